/* achan_frame.c - frames from the guest agent, on libvirt's event thread
 * with the connection's lock held (vmm/achan_int.h): the handshake, PONGs
 * and restarts on channel 0, and every other frame checked against its
 * channel's state, count and window before it is queued for the caller;
 * a frame that breaks the protocol fails the connection. */
#include "vmm/achan.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/fmt.h"
#include "vmm/achan_int.h"
#include "vmm/aread.h"

int
achan_hostile(struct achan *c, const char *fmt, ...)
{
	char msg[ACHAN_REASON_MAX];
	va_list ap;

	va_start(ap, fmt);
	err_ignore(fmt_vbuf(msg, sizeof(msg), fmt, ap)); /* a cut reason will do */
	va_end(ap);
	achan_fail_locked(c, 1, "guest agent broke the protocol: %s", msg);
	return -1;
}

/* Every open operation fails: the agent restarted. */
static void
agent_restarted(struct achan *c)
{
	struct achan_chan *ch = c->chans;

	while (ch) {
		struct achan_chan *next = ch->next;

		if (ch->owned) {
			ch->failed = 1;
			ch->ended = 1;
			achan_frames_out_free(ch->out_head);
			ch->out_head = ch->out_tail = NULL;
			ch->out_bytes = 0;
			achan_ring_remove(c, ch);
		} else {
			achan_chan_drop(c, ch);
		}
		ch = next;
	}
	c->state = 0;
	c->restarts++;
	c->nonce = achan_new_nonce();
	c->hello_pending = 1;
	pthread_cond_broadcast(&c->cond);
}

static int
conn_frame(struct achan *c, const struct ap_hdr *h, const unsigned char *p)
{
	size_t nf;

	if (h->type == AP_T_PONG) {
		uint64_t seq = 0;

		if (c->state != 1)
			return abound_stale(&c->bound, h->len) < 0 ?
			    achan_hostile(c, "more than %u bytes before answering the handshake",
				ABOUND_STALE_MAX) :
			    0;
		if (h->len != 8)
			return achan_hostile(c, "PONG of %lu bytes", (unsigned long)h->len);
		if (c->bound.pongs_owed == 0)
			return achan_hostile(c, "more PONGs than PINGs");
		c->bound.pongs_owed--;
		for (int i = 0; i < 8; i++)
			seq = seq << 8 | p[i];
		if (seq >= c->ping_seq)
			return achan_hostile(c, "PONG to a PING never sent");
		for (struct achan_ping *q = c->pings; q; q = q->next)
			if (q->seq == seq && q->sent)
				q->answered = 1;
		pthread_cond_broadcast(&c->cond);
		return 0;
	}
	if (h->type != AP_T_HELLO) {
		if (c->state != 1 && abound_stale(&c->bound, h->len) == 0)
			return 0; /* left over from before the handshake */
		return achan_hostile(c, "frame type 0x%x on channel 0", h->type);
	}
	char why[128];

	if (aread_fields(h, p, c->fields, &nf, why, sizeof(why)) < 0)
		return achan_hostile(c, "%s", why);
	const struct ap_field *fn = ap_find(c->fields, nf, AP_TAG_NONCE);
	uint64_t nonce = ap_u64(fn);
	if (nonce == 0) {
		/* The agent (re)started: it skipped what we sent before. */
		if (abound_restart(&c->bound, clock_ms()) < 0)
			return achan_hostile(c, "the agent restarted more than %d times in %d s",
			    ABOUND_RESTART_BURST,
			    ABOUND_RESTART_BURST * ABOUND_RESTART_REFILL_MS / 1000);
		if (c->state == 1)
			agent_restarted(c);
		else
			c->hello_pending = 1;
		return 0;
	}
	if (nonce != c->nonce) {
		/* An answer to an earlier connection's handshake. */
		if (abound_stale(&c->bound, h->len) < 0)
			return achan_hostile(c, "more than %u bytes of stale HELLOs",
			    ABOUND_STALE_MAX);
		return 0;
	}
	if (c->bound.hellos_owed == 0)
		return achan_hostile(c, "more HELLO answers than HELLOs");
	c->bound.hellos_owed--;
	if (c->state != 0)
		return 0; /* a second answer: HELLO went out twice */
	const struct ap_field *fv = ap_find(c->fields, nf, AP_TAG_VERSION);
	if (fv == NULL || ap_u32(fv) != AP_VERSION)
		return achan_hostile(c, "agent speaks protocol version %u, not %u",
		    fv ? ap_u32(fv) : 0, AP_VERSION);
	const struct ap_field *fb = ap_find(c->fields, nf, AP_TAG_BOOT_ID);
	if (fb)
		ap_str(fb, c->boot_id, sizeof(c->boot_id));
	c->state = 1;
	abound_ready(&c->bound);
	pthread_cond_broadcast(&c->cond);
	return 0;
}

/* Checks the fields a frame must carry. */
static int
check_fields(struct achan *c, const struct ap_hdr *h, const unsigned char *p)
{
	char why[128];
	size_t nf;

	if (aread_fields(h, p, c->fields, &nf, why, sizeof(why)) < 0)
		return achan_hostile(c, "%s on channel %lu", why, (unsigned long)h->chan);
	return 0;
}

int
achan_is_data(int type)
{
	return type == AP_T_STDOUT || type == AP_T_STDERR || type == AP_T_DATA ||
	    type == AP_T_ENTRY;
}

/* Queues a frame on its channel. Small output frames of one stream merge
 * into that stream's last block (kept in ch->last: no walk of the queue),
 * and entries of a LIST into blocks of length-prefixed records, so a
 * guest sending tiny frames cannot make the bookkeeping outgrow the
 * window. chan_frame has refused empty frames but a stream's one FIN. */
static int
chan_queue(struct achan *c, struct achan_chan *ch, const struct ap_hdr *h, const unsigned char *p)
{
	struct achan_frame_in *f, **last = &ch->last[h->type == AP_T_STDERR];
	int entry = h->type == AP_T_ENTRY;
	int streamed = achan_is_data(h->type);
	uint32_t need = h->len + (entry ? 4 : 0);
	int small = streamed && !(h->flags & AP_F_FIN) && need < ACHAN_COALESCE_FRAME;

	if (small && *last && !((*last)->flags & AP_F_FIN) && (*last)->len + need <= (*last)->cap) {
		f = *last;
		goto append;
	}
	uint32_t cap = small ? ACHAN_COALESCE_MAX : need;
	f = malloc(sizeof(*f) + cap);
	if (f == NULL) {
		achan_fail_locked(c, 0, "out of memory");
		return -1;
	}
	f->next = NULL;
	f->type = h->type;
	f->flags = h->flags;
	f->len = 0;
	f->data = 0;
	f->cap = cap;
	if (ch->in_tail)
		ch->in_tail->next = f;
	else
		ch->in_head = f;
	ch->in_tail = f;
	if (streamed)
		*last = f;
append:
	if (entry) {
		f->p[f->len] = (unsigned char)(h->len >> 24);
		f->p[f->len + 1] = (unsigned char)(h->len >> 16);
		f->p[f->len + 2] = (unsigned char)(h->len >> 8);
		f->p[f->len + 3] = (unsigned char)h->len;
		f->len += 4;
	}
	if (h->len)
		memcpy(f->p + f->len, p, h->len);
	f->len += h->len;
	f->data += h->len;
	return 0;
}

/* A data frame's place in its stream: output on an EXEC once STARTED,
 * DATA on a GET, ENTRY on a LIST; only output ends with AP_F_FIN, once,
 * and only that end may be empty (an empty frame costs no window). */
static int
stream_check(struct achan *c, struct achan_chan *ch, const struct ap_hdr *h)
{
	unsigned long id = (unsigned long)h->chan;
	int want = h->type == AP_T_DATA ? AP_T_GET : h->type == AP_T_ENTRY ? AP_T_LIST : AP_T_EXEC;
	int *eof = h->type == AP_T_STDERR ? &ch->eof_err : &ch->eof_out;

	if (ch->kind != want)
		return achan_hostile(c, "data frame type 0x%x on channel %lu of the wrong kind",
		    h->type, id);
	if (want == AP_T_EXEC && !ch->started)
		return achan_hostile(c, "output on channel %lu before STARTED", id);
	if (*eof)
		return achan_hostile(c, "output after its end on channel %lu", id);
	if (h->flags & AP_F_FIN) {
		if (want != AP_T_EXEC)
			return achan_hostile(c, "end of data (FIN) from the agent on channel %lu",
			    id);
		*eof = 1;
	} else if (h->len == 0) {
		return achan_hostile(c, "empty data frame type 0x%x without FIN on channel %lu",
		    h->type, id);
	}
	return 0;
}

static int
chan_frame(struct achan *c, const struct ap_hdr *h, const unsigned char *p)
{
	struct achan_chan *ch;
	uint64_t cost;

	if (c->state != 1) {
		/* Before the handshake: frames of an earlier connection. */
		if (abound_stale(&c->bound, h->len) < 0)
			return achan_hostile(c, "more than %u bytes before answering the handshake",
			    ABOUND_STALE_MAX);
		return 0;
	}
	ch = achan_chan_find(c, h->chan);
	if (ch == NULL) {
		/* A zombie forgotten to keep their number bounded: what was
		 * on its way, no more. */
		if (h->chan <= c->zombie_floor && h->chan != 0 &&
		    abound_forgotten(&c->bound, h->len) == 0)
			return 0;
		return achan_hostile(c, "frame type 0x%x on unknown channel %lu", h->type,
		    (unsigned long)h->chan);
	}
	if (ch->ended)
		return achan_hostile(c, "frame type 0x%x on closed channel %lu", h->type,
		    (unsigned long)h->chan);
	switch (h->type) {
	case AP_T_STDOUT:
	case AP_T_STDERR:
	case AP_T_DATA:
	case AP_T_ENTRY:
		if (stream_check(c, ch, h) < 0)
			return -1;
		break;
	case AP_T_STARTED:
		if (ch->kind != AP_T_EXEC || ch->started)
			return achan_hostile(c, "unexpected STARTED on channel %lu",
			    (unsigned long)h->chan);
		ch->started = 1;
		break;
	case AP_T_EXIT:
		if (ch->kind != AP_T_EXEC || !ch->started)
			return achan_hostile(c, "unexpected EXIT on channel %lu",
			    (unsigned long)h->chan);
		ch->ended = 1;
		break;
	case AP_T_RESULT:
		ch->ended = 1;
		break;
	case AP_T_WINDOW: {
		size_t nf;
		const struct ap_field *fs;

		if (ch->kind != AP_T_EXEC ||
		    ap_parse(p, h->len, c->fields, AP_MAX_FIELDS, &nf) < 0 ||
		    (fs = ap_find(c->fields, nf, AP_TAG_SIZE)) == NULL)
			return achan_hostile(c, "bad WINDOW on channel %lu",
			    (unsigned long)h->chan);
		if (ap_u64(fs) == 0 || ap_u64(fs) > AP_STDIN_MAX - ch->stdin_credit)
			return achan_hostile(c, "WINDOW of %llu bytes for stdin never sent",
			    (unsigned long long)ap_u64(fs));
		ch->stdin_credit += ap_u64(fs);
		pthread_cond_broadcast(&c->cond);
		return 0;
	}
	default:
		return achan_hostile(c, "unexpected frame type 0x%x on channel %lu", h->type,
		    (unsigned long)h->chan);
	}
	if (h->type != AP_T_STDOUT && h->type != AP_T_STDERR && h->type != AP_T_DATA &&
	    check_fields(c, h, p) < 0)
		return -1;
	if (achan_is_data(h->type)) {
		cost = h->len;
		if (cost > ch->window)
			return achan_hostile(c,
			    "%lu data bytes on channel %lu beyond the %lu granted",
			    (unsigned long)h->len, (unsigned long)h->chan,
			    (unsigned long)ch->window);
		ch->window -= cost;
	}
	if (!ch->owned) {
		/* Abandoned: checked, then dropped; its end lets it go. */
		if (ch->ended)
			achan_chan_drop(c, ch);
		return 0;
	}
	if (chan_queue(c, ch, h, p) < 0)
		return -1;
	pthread_cond_broadcast(&c->cond);
	return 0;
}

int
achan_on_frame(void *ctx, const struct ap_hdr *h, const unsigned char *p)
{
	struct achan *c = ctx;

	if (c->state == -1)
		return -1;
	abound_frame(&c->bound);
	if (h->chan == 0)
		return conn_frame(c, h, p);
	return chan_frame(c, h, p);
}

/* An AP_SYNC between frames costs what a frame does. */
void
achan_on_sync(void *ctx)
{
	struct achan *c = ctx;

	abound_frame(&c->bound);
}
