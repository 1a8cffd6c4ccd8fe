/* achan.c - aasd's end of the agent protocol (vmm/achan.h).
 *
 * One mutex and one condition variable per connection. libvirt's event
 * thread reads (through aread, which hands over whole frames) and writes;
 * callers queue frames and wait on the condition variable. The writer
 * takes one frame at a time, control frames first (HELLO, PING, WINDOW,
 * CLOSE), then one frame from each channel with something queued in turn,
 * so a PUT of any size delays a PING or another channel by at most the
 * frame being written and one more.
 *
 * What a guest sends is bounded three ways. Every frame and every byte
 * read draws on the connection's budget (achan_bound.h: ABOUND_FRAME_RATE
 * frames a second, bursts of ABOUND_FRAME_BURST; out-of-sync bytes cost
 * more): past it aasd stops reading the stream until a timer, so the
 * guest waits and a wake-up of the shared event thread does a bounded
 * amount of work for it, and the reader is fed in ACHAN_FEED_SLICE slices
 * so that a pause can come inside a chunk. Every frame has a count or a
 * byte bound, past which the guest broke the protocol: data (STDOUT,
 * STDERR, DATA, ENTRY) the window; only output ends with FIN, once per
 * stream, and only that end may be empty; STARTED once, EXIT or RESULT
 * once (then the channel is over); WINDOW never 0 and never more than
 * the stdin sent; PONG one per PING, HELLO answers one per HELLO,
 * restarts ABOUND_RESTART_BURST at once; frames before a handshake
 * ABOUND_STALE_MAX bytes; frames for forgotten zombies what those had on
 * the way. Lookups per frame are constant time (channels by hash, a
 * stream's last block by pointer), so the budget is also the CPU bound.
 *
 * Memory per connection (what a guest sends cannot grow it further):
 *   - the connection itself (83 KiB, the 64 KiB receive chunk in it), the
 *     reader's frame buffer (AP_HDR_SIZE + AP_MAX_PAYLOAD, 128 KiB) and
 *     the frame being written (at most 128 KiB);
 *   - per channel, at most ACHAN_MAX_CHANNELS (32) open:
 *     - a send queue of at most ACHAN_CHAN_SENDQ bytes (one frame);
 *     - a receive queue of at most AP_WINDOW_INIT (256 KiB) of data, or
 *       ACHAN_GET_WINDOW (1 MiB) for a large GET: more than granted is a
 *       hostile guest. Frames from ACHAN_COALESCE_FRAME bytes up take
 *       their size and 24 bytes; smaller ones merge into blocks of
 *       ACHAN_COALESCE_MAX (16 KiB), each at least 3/4 full once the next
 *       of its stream exists, and an entry adds a 4-byte length to its 15
 *       bytes at least: at most 4/3 of the window (19/15 of that for a
 *       LIST) and a 16 KiB block per stream: under 460 KiB (1.4 MiB for a
 *       large GET);
 *     - STARTED and EXIT, or one RESULT (128 KiB each at most), and the
 *       block a caller holds (achan_exec_next, achan_get's write: 128 KiB
 *       at most, its data already granted again);
 *     so under 760 KiB for a command, 1.7 MiB for a large GET;
 *   - abandoned channels kept to recognise frames still on the way:
 *     ACHAN_MAX_ZOMBIES records of 160 bytes (40 KiB; nothing queued).
 * Worst case about 340 KiB + 32 * 1.7 MiB + 40 KiB, some 55 MiB, only with
 * 32 large downloads at once and a guest filling every window; a command
 * or an upload alone stays under 1.1 MiB, a download under 2.1 MiB.
 */
#include "vmm/achan.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libvirt/virterror.h>

#include "base/clock.h"
#include "vmm/achan_bound.h"
#include "vmm/aread.h"
#include "vmm/image/aproto.h"

#define ACHAN_MAX_CHANNELS 32
#define ACHAN_CHAN_SENDQ (AP_HDR_SIZE + AP_MAX_PAYLOAD)
#define ACHAN_MAX_ZOMBIES 256
#define ACHAN_COALESCE_FRAME 4096      /* output and entry frames under this merge */
#define ACHAN_COALESCE_MAX (16 * 1024) /* into blocks of this size */
#define ACHAN_RECV_CHUNK (64 * 1024)
#define ACHAN_FEED_SLICE 4096        /* bytes fed to the reader between budget checks */
#define ACHAN_HASH 128               /* channel lookup buckets */
#define ACHAN_IO_BURST (1024 * 1024) /* bytes read or written per wake-up */
#define ACHAN_CALL_MAX_MS 60000      /* calls that take no deadline */
#define ACHAN_POLL_MS 100            /* cancel flags are looked at this often */
#define ACHAN_MAX_PINGS 64
#define ACHAN_CTL_MAX 128
#define ACHAN_REASON_MAX 256

#define EV_R (VIR_STREAM_EVENT_READABLE | VIR_STREAM_EVENT_ERROR | VIR_STREAM_EVENT_HANGUP)
#define EV_W VIR_STREAM_EVENT_WRITABLE

struct frame_out {
	struct frame_out *next;
	size_t len;
	unsigned char b[]; /* header and payload */
};

struct frame_in {
	struct frame_in *next;
	uint16_t type, flags;
	uint32_t len;
	uint32_t cap;
	uint32_t data;     /* window bytes it holds (ENTRY blocks: records' payloads) */
	unsigned char p[]; /* ENTRY: records of u32 length + payload */
};

struct chan {
	struct chan *next;
	uint32_t id;
	int kind;    /* AP_T_EXEC, AP_T_PUT, ... */
	int owned;   /* 0: abandoned (a zombie until its end arrives) */
	int ended;   /* RESULT or EXIT arrived */
	int failed;  /* the agent restarted under it */
	int started; /* EXEC: STARTED arrived */
	int eof_out, eof_err;
	int close_pending;
	struct frame_in *in_head, *in_tail;
	uint64_t window;        /* data bytes the agent may still send */
	uint64_t grant_pending; /* consumed, to grant with WINDOW */
	uint64_t stdin_credit;  /* STDIN bytes we may still send */
	struct frame_out *out_head, *out_tail;
	size_t out_bytes;
	/* SIGNAL frames still queued when the caller gave the channel up:
	 * they go before its CLOSE (a hang-up or kill is not lost to it). */
	struct frame_out *pre_close;
	struct chan *ring_next;
	int in_ring;
	struct chan *hnext;       /* in its hash bucket */
	struct frame_in *last[2]; /* the last queued block of STDERR ([1]) and of the rest */
};

struct ping {
	struct ping *next;
	uint64_t seq;
	int sent, answered;
};

struct achan {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_mutex_t arm_lock; /* orders changes of the watched events */
	atomic_int refs;          /* all references; the event watch holds one */
	atomic_int urefs;         /* the callers' (achan_ref / achan_free) */

	/* transport: a libvirt stream, or a descriptor (tests) */
	virStreamPtr st;
	int fd;
	int watch;
	int armed;   /* events being watched */
	int removed; /* the watch is gone */
	int aborted; /* the stream was aborted */

	int state; /* 0 handshake, 1 ready, -1 failed */
	int closed;
	int fault;
	char reason[ACHAN_REASON_MAX];
	uint64_t nonce;
	int hello_pending;
	unsigned restarts; /* unasked HELLOs while ready */
	char boot_id[AP_MAX_STRING + 1];

	struct aread *rd;
	struct abound bound;
	int throttled;     /* not reading until the timer fires */
	int timer;         /* that timer, or -1 */
	size_t roff, rlen; /* bytes of rbuf read and not fed yet */
	struct chan *hash[ACHAN_HASH];
	struct chan *chans;
	size_t nopen, nzombies;
	uint32_t next_chan;
	uint32_t zombie_floor; /* channels up to here may be forgotten zombies */
	struct chan *ring_head, *ring_tail;
	struct ping *pings;
	uint64_t ping_seq;
	size_t npings;

	/* the frame being written */
	struct frame_out *cur;
	const unsigned char *cur_p;
	size_t cur_len, cur_off;
	unsigned char ctl[ACHAN_CTL_MAX];

	struct ap_field fields[AP_MAX_FIELDS];
	unsigned char rbuf[ACHAN_RECV_CHUNK];
};

struct achan_exec {
	struct achan *c;
	struct chan *ch;
	struct frame_in *held;
	int pending_eof; /* ACHAN_EV_* to report with len 0 next */
	int exited;
	int stdin_stream;
};

static const unsigned char sync_bytes[] = AP_SYNC;

/* ---- helpers ---- */

static const char *
virt_error(void)
{
	virErrorPtr e = virGetLastError();

	return e && e->message ? e->message : "unknown libvirt error";
}

static uint64_t
new_nonce(void)
{
	struct timespec ts;
	static atomic_uint_fast64_t counter;
	uint64_t n;

	clock_gettime(CLOCK_REALTIME, &ts);
	n = (uint64_t)ts.tv_sec * 1000000007u ^ (uint64_t)ts.tv_nsec << 20 ^
	    (uint64_t)atomic_fetch_add(&counter, 1) * 0x9e3779b97f4a7c15ull;
	return n ? n : 1;
}

/* Marks the connection failed (lock held); the first reason stays. */
static void fail_locked(struct achan *c, int fault, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
fail_locked(struct achan *c, int fault, const char *fmt, ...)
{
	va_list ap;

	if (c->state == -1)
		return;
	va_start(ap, fmt);
	vsnprintf(c->reason, sizeof(c->reason), fmt, ap);
	va_end(ap);
	c->state = -1;
	c->fault = fault;
	pthread_cond_broadcast(&c->cond);
}

static void
frames_in_free(struct frame_in *f)
{
	while (f) {
		struct frame_in *n = f->next;
		free(f);
		f = n;
	}
}

static void
frames_out_free(struct frame_out *f)
{
	while (f) {
		struct frame_out *n = f->next;
		free(f);
		f = n;
	}
}

static struct chan *
chan_find(struct achan *c, uint32_t id)
{
	for (struct chan *ch = c->hash[id % ACHAN_HASH]; ch; ch = ch->hnext)
		if (ch->id == id)
			return ch;
	return NULL;
}

static void
ring_remove(struct achan *c, struct chan *ch)
{
	struct chan **pp, *prev = NULL;

	if (!ch->in_ring)
		return;
	for (pp = &c->ring_head; *pp; prev = *pp, pp = &(*pp)->ring_next)
		if (*pp == ch) {
			*pp = ch->ring_next;
			if (c->ring_tail == ch)
				c->ring_tail = prev;
			break;
		}
	ch->in_ring = 0;
	ch->ring_next = NULL;
}

static void
ring_push(struct achan *c, struct chan *ch)
{
	if (ch->in_ring)
		return;
	ch->ring_next = NULL;
	if (c->ring_tail)
		c->ring_tail->ring_next = ch;
	else
		c->ring_head = ch;
	c->ring_tail = ch;
	ch->in_ring = 1;
}

/* Unlinks and frees a channel (lock held). */
static void
chan_drop(struct achan *c, struct chan *ch)
{
	for (struct chan **pp = &c->chans; *pp; pp = &(*pp)->next)
		if (*pp == ch) {
			*pp = ch->next;
			break;
		}
	for (struct chan **pp = &c->hash[ch->id % ACHAN_HASH]; *pp; pp = &(*pp)->hnext)
		if (*pp == ch) {
			*pp = ch->hnext;
			break;
		}
	ring_remove(c, ch);
	if (ch->owned)
		c->nopen--;
	else
		c->nzombies--;
	frames_in_free(ch->in_head);
	frames_out_free(ch->out_head);
	frames_out_free(ch->pre_close);
	free(ch);
}

/* ---- transport ---- */

static void io_event(struct achan *c, int events);

static void
stream_cb(virStreamPtr st, int events, void *opaque)
{
	(void)st;
	io_event(opaque, events);
}

static void
fd_cb(int watch, int fd, int events, void *opaque)
{
	int ev = 0;

	(void)watch;
	(void)fd;
	if (events & VIR_EVENT_HANDLE_READABLE)
		ev |= VIR_STREAM_EVENT_READABLE;
	if (events & VIR_EVENT_HANDLE_WRITABLE)
		ev |= VIR_STREAM_EVENT_WRITABLE;
	if (events & VIR_EVENT_HANDLE_ERROR)
		ev |= VIR_STREAM_EVENT_ERROR;
	if (events & VIR_EVENT_HANDLE_HANGUP)
		ev |= VIR_STREAM_EVENT_HANGUP;
	io_event(opaque, ev);
}

static int
fd_events(int ev)
{
	return (ev & VIR_STREAM_EVENT_READABLE ? VIR_EVENT_HANDLE_READABLE : 0) |
	    (ev & VIR_STREAM_EVENT_WRITABLE ? VIR_EVENT_HANDLE_WRITABLE : 0);
}

static void unref(struct achan *c);

static void
watch_free(void *opaque)
{
	unref(opaque);
}

/* Bytes read: > 0, 0 at the end, -2 when nothing is there, -1 failed. */
static ssize_t
io_recv(struct achan *c, void *buf, size_t n)
{
	if (c->st)
		return virStreamRecv(c->st, buf, n);
	ssize_t r = read(c->fd, buf, n);
	if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return -2;
	return r;
}

static ssize_t
io_send(struct achan *c, const void *buf, size_t n)
{
	if (c->st)
		return virStreamSend(c->st, buf, n);
	ssize_t r = write(c->fd, buf, n);
	if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return -2;
	return r;
}

/* 1 when the writer has something to do (lock held). */
static int
want_write(struct achan *c)
{
	if (c->state == -1)
		return 0;
	if (c->cur || c->cur_len || c->hello_pending || c->ring_head)
		return 1;
	for (struct ping *p = c->pings; p; p = p->next)
		if (!p->sent)
			return 1;
	for (struct chan *ch = c->chans; ch; ch = ch->next)
		if (ch->close_pending || (ch->grant_pending && !ch->ended && ch->owned))
			return 1;
	return 0;
}

/* Watches for writability exactly while there is something to write. The
 * decision and the change happen under arm_lock, so the last call always
 * reflects the latest state. */
static void
arm(struct achan *c)
{
	int want;

	pthread_mutex_lock(&c->arm_lock);
	pthread_mutex_lock(&c->lock);
	want = (c->throttled ? 0 : EV_R) | (want_write(c) ? EV_W : 0);
	pthread_mutex_unlock(&c->lock);
	if (!c->removed && want != c->armed) {
		if (c->st)
			virStreamEventUpdateCallback(c->st, want);
		else
			virEventUpdateHandle(c->watch, fd_events(want));
		c->armed = want;
	}
	pthread_mutex_unlock(&c->arm_lock);
}

/* Stops watching the transport (the watch's reference goes later, on
 * the event thread). */
static void
io_stop(struct achan *c)
{
	pthread_mutex_lock(&c->arm_lock);
	if (!c->removed) {
		c->removed = 1;
		if (c->st)
			virStreamEventRemoveCallback(c->st);
		else
			virEventRemoveHandle(c->watch);
		/* Nothing more is read from a failed stream: libvirt need not
		 * keep what the guest goes on sending either. */
		if (c->st && !c->aborted) {
			virStreamAbort(c->st);
			c->aborted = 1;
		}
	}
	if (c->timer >= 0) {
		virEventRemoveTimeout(c->timer);
		c->timer = -1;
	}
	pthread_mutex_unlock(&c->arm_lock);
}

/* ---- frames from the guest (event thread, lock held) ---- */

static int hostile(struct achan *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int
hostile(struct achan *c, const char *fmt, ...)
{
	char msg[ACHAN_REASON_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fail_locked(c, 1, "guest agent broke the protocol: %s", msg);
	return -1;
}

/* Every open operation fails: the agent restarted. */
static void
agent_restarted(struct achan *c)
{
	struct chan *ch = c->chans;

	while (ch) {
		struct chan *next = ch->next;

		if (ch->owned) {
			ch->failed = 1;
			ch->ended = 1;
			frames_out_free(ch->out_head);
			ch->out_head = ch->out_tail = NULL;
			ch->out_bytes = 0;
			ring_remove(c, ch);
		} else {
			chan_drop(c, ch);
		}
		ch = next;
	}
	c->state = 0;
	c->restarts++;
	c->nonce = new_nonce();
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
			    hostile(c, "more than %u bytes before answering the handshake",
				ABOUND_STALE_MAX) :
			    0;
		if (h->len != 8)
			return hostile(c, "PONG of %lu bytes", (unsigned long)h->len);
		if (c->bound.pongs_owed == 0)
			return hostile(c, "more PONGs than PINGs");
		c->bound.pongs_owed--;
		for (int i = 0; i < 8; i++)
			seq = seq << 8 | p[i];
		if (seq >= c->ping_seq)
			return hostile(c, "PONG to a PING never sent");
		for (struct ping *q = c->pings; q; q = q->next)
			if (q->seq == seq && q->sent)
				q->answered = 1;
		pthread_cond_broadcast(&c->cond);
		return 0;
	}
	if (h->type != AP_T_HELLO) {
		if (c->state != 1 && abound_stale(&c->bound, h->len) == 0)
			return 0; /* left over from before the handshake */
		return hostile(c, "frame type 0x%x on channel 0", h->type);
	}
	char why[128];

	if (aread_fields(h, p, c->fields, &nf, why, sizeof(why)) < 0)
		return hostile(c, "%s", why);
	const struct ap_field *fn = ap_find(c->fields, nf, AP_TAG_NONCE);
	uint64_t nonce = ap_u64(fn);
	if (nonce == 0) {
		/* The agent (re)started: it skipped what we sent before. */
		if (abound_restart(&c->bound, clock_ms()) < 0)
			return hostile(c, "the agent restarted more than %d times in %d s",
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
			return hostile(c, "more than %u bytes of stale HELLOs", ABOUND_STALE_MAX);
		return 0;
	}
	if (c->bound.hellos_owed == 0)
		return hostile(c, "more HELLO answers than HELLOs");
	c->bound.hellos_owed--;
	if (c->state != 0)
		return 0; /* a second answer: HELLO went out twice */
	const struct ap_field *fv = ap_find(c->fields, nf, AP_TAG_VERSION);
	if (fv == NULL || ap_u32(fv) != AP_VERSION)
		return hostile(c, "agent speaks protocol version %u, not %u", fv ? ap_u32(fv) : 0,
		    AP_VERSION);
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
		return hostile(c, "%s on channel %lu", why, (unsigned long)h->chan);
	return 0;
}

static int
is_data(int type)
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
chan_queue(struct achan *c, struct chan *ch, const struct ap_hdr *h, const unsigned char *p)
{
	struct frame_in *f, **last = &ch->last[h->type == AP_T_STDERR];
	int entry = h->type == AP_T_ENTRY;
	int streamed = is_data(h->type);
	uint32_t need = h->len + (entry ? 4 : 0);
	int small = streamed && !(h->flags & AP_F_FIN) && need < ACHAN_COALESCE_FRAME;

	if (small && *last && !((*last)->flags & AP_F_FIN) && (*last)->len + need <= (*last)->cap) {
		f = *last;
		goto append;
	}
	uint32_t cap = small ? ACHAN_COALESCE_MAX : need;
	f = malloc(sizeof(*f) + cap);
	if (f == NULL) {
		fail_locked(c, 0, "out of memory");
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
stream_check(struct achan *c, struct chan *ch, const struct ap_hdr *h)
{
	unsigned long id = (unsigned long)h->chan;
	int want = h->type == AP_T_DATA ? AP_T_GET : h->type == AP_T_ENTRY ? AP_T_LIST : AP_T_EXEC;
	int *eof = h->type == AP_T_STDERR ? &ch->eof_err : &ch->eof_out;

	if (ch->kind != want)
		return hostile(c, "data frame type 0x%x on channel %lu of the wrong kind", h->type,
		    id);
	if (want == AP_T_EXEC && !ch->started)
		return hostile(c, "output on channel %lu before STARTED", id);
	if (*eof)
		return hostile(c, "output after its end on channel %lu", id);
	if (h->flags & AP_F_FIN) {
		if (want != AP_T_EXEC)
			return hostile(c, "end of data (FIN) from the agent on channel %lu", id);
		*eof = 1;
	} else if (h->len == 0) {
		return hostile(c, "empty data frame type 0x%x without FIN on channel %lu", h->type,
		    id);
	}
	return 0;
}

static int
chan_frame(struct achan *c, const struct ap_hdr *h, const unsigned char *p)
{
	struct chan *ch;
	uint64_t cost;

	if (c->state != 1) {
		/* Before the handshake: frames of an earlier connection. */
		if (abound_stale(&c->bound, h->len) < 0)
			return hostile(c, "more than %u bytes before answering the handshake",
			    ABOUND_STALE_MAX);
		return 0;
	}
	ch = chan_find(c, h->chan);
	if (ch == NULL) {
		/* A zombie forgotten to keep their number bounded: what was
		 * on its way, no more. */
		if (h->chan <= c->zombie_floor && h->chan != 0 &&
		    abound_forgotten(&c->bound, h->len) == 0)
			return 0;
		return hostile(c, "frame type 0x%x on unknown channel %lu", h->type,
		    (unsigned long)h->chan);
	}
	if (ch->ended)
		return hostile(c, "frame type 0x%x on closed channel %lu", h->type,
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
			return hostile(c, "unexpected STARTED on channel %lu",
			    (unsigned long)h->chan);
		ch->started = 1;
		break;
	case AP_T_EXIT:
		if (ch->kind != AP_T_EXEC || !ch->started)
			return hostile(c, "unexpected EXIT on channel %lu", (unsigned long)h->chan);
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
			return hostile(c, "bad WINDOW on channel %lu", (unsigned long)h->chan);
		if (ap_u64(fs) == 0 || ap_u64(fs) > AP_STDIN_MAX - ch->stdin_credit)
			return hostile(c, "WINDOW of %llu bytes for stdin never sent",
			    (unsigned long long)ap_u64(fs));
		ch->stdin_credit += ap_u64(fs);
		pthread_cond_broadcast(&c->cond);
		return 0;
	}
	default:
		return hostile(c, "unexpected frame type 0x%x on channel %lu", h->type,
		    (unsigned long)h->chan);
	}
	if (h->type != AP_T_STDOUT && h->type != AP_T_STDERR && h->type != AP_T_DATA &&
	    check_fields(c, h, p) < 0)
		return -1;
	if (is_data(h->type)) {
		cost = h->len;
		if (cost > ch->window)
			return hostile(c, "%lu data bytes on channel %lu beyond the %lu granted",
			    (unsigned long)h->len, (unsigned long)h->chan,
			    (unsigned long)ch->window);
		ch->window -= cost;
	}
	if (!ch->owned) {
		/* Abandoned: checked, then dropped; its end lets it go. */
		if (ch->ended)
			chan_drop(c, ch);
		return 0;
	}
	if (chan_queue(c, ch, h, p) < 0)
		return -1;
	pthread_cond_broadcast(&c->cond);
	return 0;
}

static int
on_frame(void *ctx, const struct ap_hdr *h, const unsigned char *p)
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
static void
on_sync(void *ctx)
{
	struct achan *c = ctx;

	abound_frame(&c->bound);
}

/* ---- writing (event thread, lock held) ---- */

static void
ctl_frame(struct achan *c, int with_sync, uint16_t type, uint32_t chan, const unsigned char *pl,
    size_t n)
{
	struct ap_hdr h = { .len = (uint32_t)n, .type = type, .flags = 0, .chan = chan };
	size_t off = 0;

	if (with_sync) {
		memcpy(c->ctl, sync_bytes, AP_SYNC_LEN);
		off = AP_SYNC_LEN;
	}
	ap_hdr_put(c->ctl + off, &h);
	memcpy(c->ctl + off + AP_HDR_SIZE, pl, n);
	c->cur = NULL;
	c->cur_p = c->ctl;
	c->cur_len = off + AP_HDR_SIZE + n;
	c->cur_off = 0;
}

/* Chooses the next frame to write; 0 when there is none. */
static int
pick(struct achan *c)
{
	unsigned char pl[64];
	struct ap_out o = { .buf = pl };

	if (c->hello_pending) {
		ap_put_u64(&o, AP_TAG_NONCE, c->nonce);
		ctl_frame(c, 1, AP_T_HELLO, 0, pl, o.len);
		c->hello_pending = 0;
		c->bound.hellos_owed++;
		return 1;
	}
	for (struct ping *q = c->pings; q; q = q->next)
		if (!q->sent) {
			for (int i = 0; i < 8; i++)
				pl[i] = (unsigned char)(q->seq >> (56 - 8 * i));
			ctl_frame(c, 0, AP_T_PING, 0, pl, 8);
			q->sent = 1;
			c->bound.pongs_owed++;
			return 1;
		}
	for (struct chan *ch = c->chans; ch; ch = ch->next) {
		if (ch->close_pending && ch->pre_close) {
			struct frame_out *f = ch->pre_close;

			ch->pre_close = f->next;
			f->next = NULL;
			c->cur = f;
			c->cur_p = f->b;
			c->cur_len = f->len;
			c->cur_off = 0;
			return 1;
		}
		if (ch->close_pending) {
			ctl_frame(c, 0, AP_T_CLOSE, ch->id, pl, 0);
			ch->close_pending = 0;
			return 1;
		}
		if (ch->grant_pending && ch->owned && !ch->ended) {
			ap_put_u64(&o, AP_TAG_SIZE, ch->grant_pending);
			ctl_frame(c, 0, AP_T_WINDOW, ch->id, pl, o.len);
			ch->window += ch->grant_pending;
			ch->grant_pending = 0;
			return 1;
		}
	}
	struct chan *ch = c->ring_head;
	if (ch == NULL)
		return 0;
	ring_remove(c, ch);
	struct frame_out *f = ch->out_head;
	ch->out_head = f->next;
	if (ch->out_head == NULL)
		ch->out_tail = NULL;
	else
		ring_push(c, ch);
	ch->out_bytes -= f->len;
	f->next = NULL;
	c->cur = f;
	c->cur_p = f->b;
	c->cur_len = f->len;
	c->cur_off = 0;
	return 1;
}

/* Writes until the transport would block or a burst is done. */
static void
write_some(struct achan *c)
{
	size_t done = 0;
	int wrote = 0;

	while (c->state != -1 && done < ACHAN_IO_BURST) {
		if (c->cur_len == 0 && !pick(c))
			break;
		wrote = 1;
		ssize_t r = io_send(c, c->cur_p + c->cur_off, c->cur_len - c->cur_off);
		if (r == -2)
			break;
		if (r < 0) {
			fail_locked(c, 0, "agent channel write failed: %s",
			    c->st ? virt_error() : strerror(errno));
			break;
		}
		c->cur_off += (size_t)r;
		done += (size_t)r;
		if (c->cur_off == c->cur_len) {
			free(c->cur);
			c->cur = NULL;
			c->cur_len = c->cur_off = 0;
		}
	}
	if (wrote)
		pthread_cond_broadcast(&c->cond);
}

/* Feeds the reader what was read before and reads more, a slice at a
 * time while the connection's budget lasts (lock held). Returns the
 * milliseconds reading pauses for (0: until the transport has more). */
static long long
read_some(struct achan *c)
{
	size_t got = 0;
	long long pause = 0;

	while (c->state != -1) {
		pause = abound_wait_ms(&c->bound, clock_ms());
		if (pause > 0)
			break;
		if (c->roff == c->rlen) {
			if (got >= ACHAN_IO_BURST)
				break;
			ssize_t r = io_recv(c, c->rbuf, sizeof(c->rbuf));

			if (r == -2)
				break;
			if (r == 0) {
				fail_locked(c, 0, "agent channel closed");
				break;
			}
			if (r < 0) {
				fail_locked(c, 0, "agent channel read failed: %s",
				    c->st ? virt_error() : strerror(errno));
				break;
			}
			c->roff = 0;
			c->rlen = (size_t)r;
			got += (size_t)r;
		}
		size_t n = c->rlen - c->roff < ACHAN_FEED_SLICE ? c->rlen - c->roff :
								  ACHAN_FEED_SLICE;

		abound_bytes(&c->bound, n, !aread_synced(c->rd));
		int rc = aread_feed(c->rd, c->rbuf + c->roff, n);

		c->roff += n;
		if (rc < 0 && aread_reason(c->rd)[0])
			hostile(c, "%s", aread_reason(c->rd));
	}
	if (c->state == -1)
		return 0;
	c->throttled = pause > 0;
	return pause;
}

/* The pause is over: read on (event thread). */
static void
timer_cb(int timer, void *opaque)
{
	struct achan *c = opaque;

	pthread_mutex_lock(&c->arm_lock);
	if (c->timer == timer)
		virEventUpdateTimeout(timer, -1);
	pthread_mutex_unlock(&c->arm_lock);
	pthread_mutex_lock(&c->lock);
	c->throttled = 0;
	pthread_mutex_unlock(&c->lock);
	io_event(c, VIR_STREAM_EVENT_READABLE);
}

/* Pauses reading for ms (the watch drops READABLE in arm). Without a
 * timer reading goes on: slower guests, never a stuck one. */
static void
throttle(struct achan *c, long long ms)
{
	int ok = 1;

	pthread_mutex_lock(&c->arm_lock);
	if (c->removed) {
		ok = 0;
	} else if (c->timer >= 0) {
		virEventUpdateTimeout(c->timer, (int)ms);
	} else {
		atomic_fetch_add(&c->refs, 1);
		c->timer = virEventAddTimeout((int)ms, timer_cb, c, watch_free);
		if (c->timer < 0) {
			atomic_fetch_sub(&c->refs, 1);
			ok = 0;
		}
	}
	pthread_mutex_unlock(&c->arm_lock);
	if (!ok) {
		pthread_mutex_lock(&c->lock);
		c->throttled = 0;
		pthread_mutex_unlock(&c->lock);
	}
}

static void
io_event(struct achan *c, int events)
{
	int stop = 0;
	long long pause = 0;

	pthread_mutex_lock(&c->lock);
	if (c->state == -1 || c->closed) {
		stop = 1;
		goto out;
	}
	if ((events &
		(VIR_STREAM_EVENT_READABLE | VIR_STREAM_EVENT_HANGUP | VIR_STREAM_EVENT_ERROR)) &&
	    !c->throttled)
		pause = read_some(c);
	if (c->state != -1)
		write_some(c);
	if (c->state == -1)
		stop = 1;
out:
	pthread_mutex_unlock(&c->lock);
	if (stop) {
		io_stop(c);
		return;
	}
	if (pause > 0)
		throttle(c, pause);
	arm(c);
}

/* ---- life ---- */

static struct achan *
achan_new(struct err *e)
{
	struct achan *c = calloc(1, sizeof(*c));
	pthread_condattr_t ca;

	if (c == NULL || (c->rd = aread_new(on_frame, on_sync, c)) == NULL) {
		free(c);
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->arm_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cond, &ca);
	pthread_condattr_destroy(&ca);
	atomic_init(&c->refs, 2); /* the caller's and the watch's */
	atomic_init(&c->urefs, 1);
	c->fd = -1;
	c->watch = -1;
	c->timer = -1;
	abound_init(&c->bound, clock_ms());
	c->nonce = new_nonce();
	c->hello_pending = 1;
	c->next_chan = 1;
	c->armed = EV_R | EV_W;
	return c;
}

static void
destroy(struct achan *c)
{
	if (c->st) {
		if (!c->aborted)
			virStreamAbort(c->st);
		virStreamFree(c->st);
	}
	if (c->fd >= 0)
		close(c->fd);
	while (c->chans)
		chan_drop(c, c->chans);
	free(c->cur);
	aread_free(c->rd);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->arm_lock);
	pthread_cond_destroy(&c->cond);
	free(c);
}

static void
unref(struct achan *c)
{
	if (c && atomic_fetch_sub(&c->refs, 1) == 1)
		destroy(c);
}

struct achan *
achan_open(virConnectPtr conn, virDomainPtr dom, struct err *e)
{
	struct achan *c = achan_new(e);

	if (c == NULL)
		return NULL;
	c->st = virStreamNew(conn, VIR_STREAM_NONBLOCK);
	if (c->st == NULL || virDomainOpenChannel(dom, AP_PORT_NAME, c->st, 0) < 0) {
		err_set(e, ERR_UNAVAILABLE, "agent channel %s: %s", AP_PORT_NAME, virt_error());
		goto fail;
	}
	if (virStreamEventAddCallback(c->st, EV_R | EV_W, stream_cb, c, watch_free) < 0) {
		err_set(e, ERR_UNAVAILABLE, "agent channel events: %s", virt_error());
		goto fail;
	}
	return c;
fail:
	atomic_store(&c->refs, 1);
	unref(c);
	return NULL;
}

struct achan *
achan_open_fd(int fd, struct err *e)
{
	struct achan *c;
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		err_set(e, ERR_INVALID, "agent descriptor: %s", strerror(errno));
		close(fd);
		return NULL;
	}
	c = achan_new(e);
	if (c == NULL) {
		close(fd);
		return NULL;
	}
	c->fd = fd;
	c->watch = virEventAddHandle(fd, fd_events(EV_R | EV_W), fd_cb, c, watch_free);
	if (c->watch < 0) {
		err_set(e, ERR_UNAVAILABLE, "agent descriptor: no event loop");
		atomic_store(&c->refs, 1);
		unref(c);
		return NULL;
	}
	return c;
}

struct achan *
achan_ref(struct achan *c)
{
	atomic_fetch_add(&c->urefs, 1);
	atomic_fetch_add(&c->refs, 1);
	return c;
}

void
achan_close(struct achan *c)
{
	if (c == NULL)
		return;
	pthread_mutex_lock(&c->lock);
	c->closed = 1;
	fail_locked(c, 0, "agent channel closed by aasd");
	pthread_mutex_unlock(&c->lock);
	io_stop(c);
	/* Here, not when the last reference goes: that may be on the event
	 * thread, inside libvirt's release of the watch. */
	pthread_mutex_lock(&c->arm_lock);
	if (c->st && !c->aborted) {
		virStreamAbort(c->st);
		c->aborted = 1;
	}
	pthread_mutex_unlock(&c->arm_lock);
}

void
achan_free(struct achan *c)
{
	if (c == NULL)
		return;
	if (atomic_fetch_sub(&c->urefs, 1) == 1)
		achan_close(c);
	unref(c);
}

/* ---- waiting (lock held) ---- */

/* Waits for a change until the deadline (or ACHAN_POLL_MS at most, when
 * a cancel flag is watched). 1 once the deadline passed. */
static int
wait_change(struct achan *c, long long deadline_ms, const atomic_int *cancel)
{
	long long now = clock_ms(), until = deadline_ms;
	struct timespec ts;

	if (now >= deadline_ms)
		return 1;
	if (cancel && until > now + ACHAN_POLL_MS)
		until = now + ACHAN_POLL_MS;
	ts.tv_sec = until / 1000;
	ts.tv_nsec = (until % 1000) * 1000000;
	pthread_cond_timedwait(&c->cond, &c->lock, &ts);
	return 0;
}

static int
unavailable(struct achan *c, struct err *e)
{
	err_set(e, ERR_UNAVAILABLE, "guest agent unavailable: %s", c->reason);
	return -1;
}

/* Waits until the handshake is done. */
static int
wait_ready_locked(struct achan *c, long long deadline_ms, struct err *e)
{
	for (;;) {
		if (c->state == -1)
			return unavailable(c, e);
		if (c->state == 1)
			return 0;
		if (wait_change(c, deadline_ms, NULL)) {
			err_set(e, ERR_TIMEOUT, "the guest agent did not answer");
			return -1;
		}
	}
}

int
achan_wait_ready(struct achan *c, long long deadline_ms, struct err *e)
{
	int rc;

	pthread_mutex_lock(&c->lock);
	rc = wait_ready_locked(c, deadline_ms, e);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int
achan_state(struct achan *c)
{
	int s;

	pthread_mutex_lock(&c->lock);
	s = c->state;
	pthread_mutex_unlock(&c->lock);
	return s;
}

const char *
achan_failure(struct achan *c, char *buf, size_t n)
{
	pthread_mutex_lock(&c->lock);
	snprintf(buf, n, "%s", c->state == -1 ? c->reason : "");
	pthread_mutex_unlock(&c->lock);
	return buf;
}

int
achan_guest_at_fault(struct achan *c)
{
	int f;

	pthread_mutex_lock(&c->lock);
	f = c->state == -1 && c->fault;
	pthread_mutex_unlock(&c->lock);
	return f;
}

int
achan_ping(struct achan *c, long long deadline_ms, struct err *e)
{
	struct ping q = { 0 };
	unsigned restarts;
	int rc = -1;

	pthread_mutex_lock(&c->lock);
	if (wait_ready_locked(c, deadline_ms, e) < 0)
		goto out;
	if (c->npings >= ACHAN_MAX_PINGS) {
		err_set(e, ERR_LIMIT, "more than %d pings at once", ACHAN_MAX_PINGS);
		goto out;
	}
	restarts = c->restarts;
	q.seq = c->ping_seq++;
	q.next = c->pings;
	c->pings = &q;
	c->npings++;
	pthread_mutex_unlock(&c->lock);
	arm(c);
	pthread_mutex_lock(&c->lock);
	for (;;) {
		if (q.answered) {
			rc = 0;
			break;
		}
		if (c->state == -1) {
			unavailable(c, e);
			break;
		}
		if (c->restarts != restarts) {
			err_set(e, ERR_UNAVAILABLE, "the guest agent restarted during the ping");
			break;
		}
		if (wait_change(c, deadline_ms, NULL)) {
			err_set(e, ERR_TIMEOUT, "the guest agent did not answer a ping");
			break;
		}
	}
	for (struct ping **pp = &c->pings; *pp; pp = &(*pp)->next)
		if (*pp == &q) {
			*pp = q.next;
			break;
		}
	c->npings--;
out:
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* ---- channels (caller threads) ---- */

static struct chan *
chan_open(struct achan *c, int kind, long long deadline_ms, struct err *e)
{
	struct chan *ch = NULL;

	pthread_mutex_lock(&c->lock);
	if (wait_ready_locked(c, deadline_ms, e) < 0)
		goto out;
	if (c->nopen >= ACHAN_MAX_CHANNELS) {
		err_set(e, ERR_LIMIT, "more than %d agent operations at once on one sandbox",
		    ACHAN_MAX_CHANNELS);
		goto out;
	}
	if (c->next_chan == UINT32_MAX) {
		err_set(e, ERR_LIMIT, "agent channel numbers used up");
		goto out;
	}
	ch = calloc(1, sizeof(*ch));
	if (ch == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	ch->id = c->next_chan++;
	ch->kind = kind;
	ch->owned = 1;
	ch->window = AP_WINDOW_INIT;
	ch->stdin_credit = AP_STDIN_MAX;
	ch->next = c->chans;
	c->chans = ch;
	ch->hnext = c->hash[ch->id % ACHAN_HASH];
	c->hash[ch->id % ACHAN_HASH] = ch;
	c->nopen++;
out:
	pthread_mutex_unlock(&c->lock);
	return ch;
}

/* The caller gives a channel up (lock held): one that has not ended
 * becomes a zombie behind a CLOSE. */
static void
chan_release_locked(struct achan *c, struct chan *ch)
{
	if (ch->ended || c->state == -1) {
		chan_drop(c, ch);
		return;
	}
	frames_in_free(ch->in_head);
	ch->in_head = ch->in_tail = NULL;
	ch->last[0] = ch->last[1] = NULL;
	for (struct frame_out *f = ch->out_head, *next, **keep = &ch->pre_close; f; f = next) {
		struct ap_hdr h;

		next = f->next;
		f->next = NULL;
		if (ap_hdr_get(f->b, &h) == 0 && h.type == AP_T_SIGNAL) {
			*keep = f;
			keep = &f->next;
		} else {
			free(f);
		}
	}
	ch->out_head = ch->out_tail = NULL;
	ch->out_bytes = 0;
	ring_remove(c, ch);
	ch->grant_pending = 0;
	ch->owned = 0;
	ch->close_pending = 1;
	c->nopen--;
	c->nzombies++;
	while (c->nzombies > ACHAN_MAX_ZOMBIES) {
		struct chan *old = NULL;

		for (struct chan *z = c->chans; z; z = z->next)
			if (!z->owned && !z->close_pending && (old == NULL || z->id < old->id))
				old = z;
		if (old == NULL)
			break;
		if (old->id > c->zombie_floor)
			c->zombie_floor = old->id;
		abound_forget(&c->bound, old->window);
		chan_drop(c, old);
	}
}

static void
chan_release(struct achan *c, struct chan *ch)
{
	if (ch == NULL)
		return;
	pthread_mutex_lock(&c->lock);
	chan_release_locked(c, ch);
	pthread_mutex_unlock(&c->lock);
	arm(c);
}

static int
chan_gone(struct achan *c, struct chan *ch, struct err *e)
{
	if (c->state == -1)
		return unavailable(c, e);
	if (ch->failed) {
		err_set(e, ERR_UNAVAILABLE, "the guest agent restarted during the operation");
		return -1;
	}
	return 0;
}

/* Queues one frame (header added here) on a channel, waiting while its
 * send queue is full. 1 when the channel has ended meanwhile (the agent
 * answered early): nothing is sent. */
static int
chan_send(struct achan *c, struct chan *ch, uint16_t type, uint16_t flags, const void *p, size_t n,
    long long deadline_ms, struct err *e)
{
	struct frame_out *f = malloc(sizeof(*f) + AP_HDR_SIZE + n);
	struct ap_hdr h = { .len = (uint32_t)n, .type = type, .flags = flags, .chan = ch->id };
	int rc = -1;

	if (f == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return -1;
	}
	f->next = NULL;
	f->len = AP_HDR_SIZE + n;
	ap_hdr_put(f->b, &h);
	if (n)
		memcpy(f->b + AP_HDR_SIZE, p, n);
	pthread_mutex_lock(&c->lock);
	for (;;) {
		if (chan_gone(c, ch, e) < 0)
			goto out;
		if (ch->ended) {
			rc = 1;
			goto out;
		}
		if (ch->out_bytes == 0 || ch->out_bytes + f->len <= ACHAN_CHAN_SENDQ)
			break;
		if (wait_change(c, deadline_ms, NULL)) {
			err_set(e, ERR_TIMEOUT, "the guest agent stopped taking data");
			goto out;
		}
	}
	if (ch->out_tail)
		ch->out_tail->next = f;
	else
		ch->out_head = f;
	ch->out_tail = f;
	ch->out_bytes += f->len;
	ring_push(c, ch);
	f = NULL;
	rc = 0;
out:
	pthread_mutex_unlock(&c->lock);
	free(f);
	if (rc == 0)
		arm(c);
	return rc;
}

/* The next frame on a channel: 1 with *out (the caller frees it), 0 at
 * the deadline or on cancel, -1 with e set. Data taken is granted again. */
static int
chan_next(struct achan *c, struct chan *ch, long long deadline_ms, const atomic_int *cancel,
    struct frame_in **out, struct err *e)
{
	int rc = -1, grant = 0;

	pthread_mutex_lock(&c->lock);
	for (;;) {
		/* A failed connection serves nothing more, queued or not. */
		if (chan_gone(c, ch, e) < 0)
			break;
		if (ch->in_head) {
			struct frame_in *f = ch->in_head;

			ch->in_head = f->next;
			if (ch->in_head == NULL)
				ch->in_tail = NULL;
			for (int i = 0; i < 2; i++)
				if (ch->last[i] == f)
					ch->last[i] = NULL;
			f->next = NULL;
			if (is_data(f->type) && !ch->ended) {
				ch->grant_pending += f->data;
				grant = f->data > 0;
			}
			*out = f;
			rc = 1;
			break;
		}
		if (ch->ended) {
			err_set(e, ERR_INTERNAL, "the operation has ended");
			break;
		}
		if (cancel && atomic_load(cancel)) {
			rc = 0;
			break;
		}
		if (wait_change(c, deadline_ms, cancel)) {
			rc = 0;
			break;
		}
	}
	pthread_mutex_unlock(&c->lock);
	if (grant)
		arm(c);
	return rc;
}

/* Turns a RESULT into 0 or an error of the kind achan.h names. */
static int
result_check(const struct ap_field *f, size_t nf, const char *what, struct err *e)
{
	const struct ap_field *fe = ap_find(f, nf, AP_TAG_ERRNO);
	const struct ap_field *fm = ap_find(f, nf, AP_TAG_MESSAGE);
	char msg[AP_MAX_STRING + 1] = "";
	uint32_t no = fe ? ap_u32(fe) : 0;
	enum err_kind kind = ERR_INVALID;

	if (no == 0)
		return 0;
	if (fm == NULL || ap_str(fm, msg, sizeof(msg)) < 0 || msg[0] == '\0')
		snprintf(msg, sizeof(msg), "%s", strerror((int)no));
	if (no == ENOENT)
		kind = ERR_NOT_FOUND;
	else if (no == EACCES || no == EPERM)
		kind = ERR_FORBIDDEN;
	else if (no == ENOSPC || no == EDQUOT || no == EFBIG)
		kind = ERR_LIMIT;
	err_set(e, kind, "%s: %s", what, msg);
	return -1;
}

/* The next frame of a request's answer: 0 with *fr (the caller frees
 * it), -1 with e set, ERR_TIMEOUT naming `what` at the deadline. */
static int
chan_reply(struct achan *c, struct chan *ch, long long deadline_ms, struct frame_in **fr,
    const char *what, struct err *e)
{
	int r = chan_next(c, ch, deadline_ms, NULL, fr, e);

	if (r == 0)
		err_set(e, ERR_TIMEOUT, "%s: the guest agent did not answer in time", what);
	return r == 1 ? 0 : -1;
}

/* Waits for the RESULT that ends a channel (other frames are skipped)
 * and parses it into fields. */
static int
wait_result(struct achan *c, struct chan *ch, long long deadline_ms, struct frame_in **res,
    struct ap_field *f, size_t *nf, const char *what, struct err *e)
{
	for (;;) {
		struct frame_in *fr = NULL;

		if (chan_reply(c, ch, deadline_ms, &fr, what, e) < 0)
			return -1;
		if (fr->type != AP_T_RESULT) {
			free(fr);
			continue;
		}
		if (ap_parse(fr->p, fr->len, f, AP_MAX_FIELDS, nf) < 0) {
			free(fr);
			err_set(e, ERR_INTERNAL, "%s: malformed result", what);
			return -1;
		}
		*res = fr;
		return 0;
	}
}

static struct ap_field *
fields_new(struct err *e)
{
	struct ap_field *f = malloc(sizeof(*f) * AP_MAX_FIELDS);

	if (f == NULL)
		err_set(e, ERR_INTERNAL, "out of memory");
	return f;
}

/* ---- processes ---- */

struct achan_exec *
achan_exec_start(struct achan *c, const struct achan_exec_req *req, long *pid, struct err *e)
{
	long long deadline = clock_ms() + ACHAN_CALL_MAX_MS;
	struct achan_exec *x = NULL;
	struct chan *ch = NULL;
	struct ap_out o = { 0 };
	struct frame_in *fr = NULL;
	struct ap_field *f = NULL;
	size_t nf;
	uint16_t flags = 0;

	if (req->argv == NULL || req->argv[0] == NULL) {
		err_set(e, ERR_INVALID, "no program to run");
		return NULL;
	}
	o.buf = malloc(AP_MAX_PAYLOAD);
	f = fields_new(e);
	x = calloc(1, sizeof(*x));
	if (o.buf == NULL || f == NULL || x == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto fail;
	}
	for (size_t i = 0; req->argv[i]; i++)
		ap_put_str(&o, AP_TAG_ARG, req->argv[i]);
	for (size_t i = 0; req->env && req->env[i]; i++)
		ap_put_str(&o, AP_TAG_ENV, req->env[i]);
	if (req->cwd)
		ap_put_str(&o, AP_TAG_CWD, req->cwd);
	if (req->timeout_s > 0)
		ap_put_u32(&o, AP_TAG_TIMEOUT_S, (uint32_t)req->timeout_s);
	if (req->log_out)
		ap_put_str(&o, AP_TAG_LOG_OUT, req->log_out);
	if (req->log_err)
		ap_put_str(&o, AP_TAG_LOG_ERR, req->log_err);
	if (req->log_max)
		ap_put_u64(&o, AP_TAG_LOG_MAX, req->log_max);
	if (req->exit_file)
		ap_put_str(&o, AP_TAG_EXIT_FILE, req->exit_file);
	if (req->pty) {
		ap_put_u32(&o, AP_TAG_ROWS, req->rows);
		ap_put_u32(&o, AP_TAG_COLS, req->cols);
		flags |= AP_F_PTY;
	}
	if (o.overflow) {
		err_set(e, ERR_INVALID, "command, environment and paths exceed %u bytes",
		    AP_MAX_PAYLOAD);
		goto fail;
	}
	flags |= (req->as_root ? AP_F_ROOT : 0) | (req->detach ? AP_F_DETACH : 0) |
	    (req->stdin_stream ? AP_F_STDIN : 0);
	ch = chan_open(c, AP_T_EXEC, deadline, e);
	if (ch == NULL)
		goto fail;
	if (chan_send(c, ch, AP_T_EXEC, flags, o.buf, o.len, deadline, e) < 0)
		goto fail;
	for (;;) {
		int r = chan_next(c, ch, deadline, NULL, &fr, e);
		if (r < 0)
			goto fail;
		if (r == 0) {
			err_set(e, ERR_TIMEOUT, "the guest agent did not start the command");
			goto fail;
		}
		if (fr->type == AP_T_STARTED || fr->type == AP_T_RESULT)
			break;
		free(fr);
		fr = NULL;
	}
	if (ap_parse(fr->p, fr->len, f, AP_MAX_FIELDS, &nf) < 0) {
		err_set(e, ERR_INTERNAL, "malformed answer to EXEC");
		goto fail;
	}
	if (fr->type == AP_T_RESULT) {
		if (result_check(f, nf, req->argv[0], e) == 0)
			err_set(e, ERR_INTERNAL, "the guest agent did not start the command");
		goto fail;
	}
	if (pid)
		*pid = (long)ap_u32(ap_find(f, nf, AP_TAG_PID));
	free(fr);
	free(f);
	free(o.buf);
	x->c = achan_ref(c);
	x->ch = ch;
	x->stdin_stream = req->stdin_stream;
	return x;
fail:
	free(fr);
	free(f);
	free(o.buf);
	free(x);
	chan_release(c, ch);
	return NULL;
}

int
achan_exec_next(struct achan_exec *x, long long deadline_ms, const atomic_int *cancel,
    struct achan_ev *ev, struct err *e)
{
	struct frame_in *fr = NULL;
	int r;

	free(x->held);
	x->held = NULL;
	memset(ev, 0, sizeof(*ev));
	if (x->pending_eof) {
		ev->kind = x->pending_eof;
		x->pending_eof = 0;
		return 1;
	}
	if (x->exited) {
		err_set(e, ERR_INVALID, "the process has exited: no more events");
		return -1;
	}
	for (;;) {
		r = chan_next(x->c, x->ch, deadline_ms, cancel, &fr, e);
		if (r <= 0)
			return r;
		if (fr->type == AP_T_STDOUT || fr->type == AP_T_STDERR) {
			ev->kind = fr->type == AP_T_STDOUT ? ACHAN_EV_STDOUT : ACHAN_EV_STDERR;
			ev->data = (const char *)fr->p;
			ev->len = fr->len;
			if ((fr->flags & AP_F_FIN) && fr->len > 0)
				x->pending_eof = ev->kind;
			x->held = fr;
			return 1;
		}
		if (fr->type == AP_T_EXIT) {
			struct ap_field f[8];
			size_t nf;

			if (ap_parse(fr->p, fr->len, f, 8, &nf) == 0) {
				const struct ap_field *fc = ap_find(f, nf, AP_TAG_CODE);
				const struct ap_field *fs = ap_find(f, nf, AP_TAG_SIGNAL);
				ev->code = fc ? (int)ap_u32(fc) : -1;
				ev->signal = fs ? (int)ap_u32(fs) : 0;
			} else {
				ev->code = -1;
			}
			ev->kind = ACHAN_EV_EXIT;
			x->exited = 1;
			free(fr);
			return 1;
		}
		if (fr->type == AP_T_RESULT) {
			struct ap_field *f = fields_new(e);
			size_t nf;

			if (f && ap_parse(fr->p, fr->len, f, AP_MAX_FIELDS, &nf) == 0 &&
			    result_check(f, nf, "command", e) == 0)
				err_set(e, ERR_INTERNAL, "the guest agent ended the command");
			free(f);
			free(fr);
			x->exited = 1;
			return -1;
		}
		free(fr);
	}
}

int
achan_exec_stdin(struct achan_exec *x, const void *p, size_t n, int eof, struct err *e)
{
	struct achan *c = x->c;
	const unsigned char *b = p;
	long long deadline = clock_ms() + ACHAN_CALL_MAX_MS;

	if (!x->stdin_stream) {
		err_set(e, ERR_INVALID, "the process was started without a stdin stream");
		return -1;
	}
	while (n > 0 || eof) {
		size_t k = n < AP_MAX_PAYLOAD ? n : AP_MAX_PAYLOAD;
		int last = eof && k == n;

		pthread_mutex_lock(&c->lock);
		for (;;) {
			if (chan_gone(c, x->ch, e) < 0) {
				pthread_mutex_unlock(&c->lock);
				return -1;
			}
			if (x->ch->stdin_credit > 0 || k == 0)
				break;
			if (wait_change(c, deadline, NULL)) {
				pthread_mutex_unlock(&c->lock);
				err_set(e, ERR_TIMEOUT, "the process does not read its input");
				return -1;
			}
		}
		if (k > x->ch->stdin_credit)
			k = (size_t)x->ch->stdin_credit;
		last = eof && k == n;
		x->ch->stdin_credit -= k;
		pthread_mutex_unlock(&c->lock);
		int r = chan_send(c, x->ch, AP_T_STDIN, last ? AP_F_FIN : 0, b, k, deadline, e);
		if (r < 0)
			return -1;
		if (r == 1)
			return 0; /* it ended: the input has nowhere to go */
		b += k;
		n -= k;
		if (last)
			break;
	}
	return 0;
}

int
achan_exec_signal(struct achan_exec *x, int sig, struct err *e)
{
	unsigned char pl[16];
	struct ap_out o = { .buf = pl };

	ap_put_u32(&o, AP_TAG_SIGNAL, (uint32_t)sig);
	int r = chan_send(x->c, x->ch, AP_T_SIGNAL, 0, pl, o.len, clock_ms() + ACHAN_CALL_MAX_MS,
	    e);
	return r < 0 ? -1 : 0;
}

int
achan_exec_resize(struct achan_exec *x, unsigned rows, unsigned cols, struct err *e)
{
	unsigned char pl[32];
	struct ap_out o = { .buf = pl };

	ap_put_u32(&o, AP_TAG_ROWS, rows);
	ap_put_u32(&o, AP_TAG_COLS, cols);
	int r = chan_send(x->c, x->ch, AP_T_RESIZE, 0, pl, o.len, clock_ms() + ACHAN_CALL_MAX_MS,
	    e);
	return r < 0 ? -1 : 0;
}

void
achan_exec_free(struct achan_exec *x)
{
	if (x == NULL)
		return;
	free(x->held);
	chan_release(x->c, x->ch);
	achan_free(x->c);
	free(x);
}

/* A request whose only answer is a RESULT; *res and f filled on success. */
static int
simple_call(struct achan *c, int kind, uint16_t flags, const struct ap_out *o,
    long long deadline_ms, const char *what, struct frame_in **res, struct ap_field *f, size_t *nf,
    struct err *e)
{
	struct chan *ch;
	int rc = -1;

	if (o->overflow) {
		err_set(e, ERR_INVALID, "%s: request too large", what);
		return -1;
	}
	ch = chan_open(c, kind, deadline_ms, e);
	if (ch == NULL)
		return -1;
	if (chan_send(c, ch, (uint16_t)kind, flags, o->buf, o->len, deadline_ms, e) < 0 ||
	    wait_result(c, ch, deadline_ms, res, f, nf, what, e) < 0)
		goto out;
	if (result_check(f, *nf, what, e) < 0) {
		free(*res);
		*res = NULL;
		goto out;
	}
	rc = 0;
out:
	chan_release(c, ch);
	return rc;
}

int
achan_kill(struct achan *c, long pid, int sig, long long deadline_ms, struct err *e)
{
	unsigned char pl[32];
	struct ap_out o = { .buf = pl };
	struct frame_in *res = NULL;
	struct ap_field f[16];
	size_t nf;

	ap_put_u32(&o, AP_TAG_PID, (uint32_t)pid);
	ap_put_u32(&o, AP_TAG_SIGNAL, (uint32_t)sig);
	if (simple_call(c, AP_T_SIGNAL, 0, &o, deadline_ms, "signal", &res, f, &nf, e) < 0)
		return -1;
	free(res);
	return 0;
}

/* ---- files ---- */

static uint16_t
file_flags(int flags)
{
	return (flags & ACHAN_PUT_TRUNC ? AP_F_TRUNC : 0) |
	    (flags & ACHAN_PUT_PARENTS ? AP_F_PARENTS : 0) |
	    (flags & ACHAN_PUT_EXCL ? AP_F_EXCL : 0) | (flags & ACHAN_AS_ROOT ? AP_F_ROOT : 0) |
	    (flags & ACHAN_PUT_TREE ? AP_F_TREE : 0);
}

static int
path_payload(struct ap_out *o, const char *path, struct err *e)
{
	if (path == NULL || path[0] != '/' || strlen(path) > AP_MAX_STRING) {
		err_set(e, ERR_INVALID, "path must be absolute and at most %d bytes",
		    AP_MAX_STRING);
		return -1;
	}
	ap_put_str(o, AP_TAG_PATH, path);
	return 0;
}

/* A file request on a channel of its own: the payload it sends (the path
 * first, then a few numbers) and room for the fields of its answer. */
struct freq {
	struct achan *c;
	struct chan *ch; /* NULL until freq_send */
	long long deadline_ms;
	unsigned char pl[AP_MAX_STRING + 64];
	struct ap_out o;
	struct ap_field *f;
	size_t nf;
};

/* Starts a request on path: 0, or -1 with e set (a path that is not
 * absolute or too long, no memory). freq_end is due either way. */
static int
freq_begin(struct freq *q, struct achan *c, const char *path, long long deadline_ms, struct err *e)
{
	q->c = c;
	q->ch = NULL;
	q->deadline_ms = deadline_ms;
	q->o = (struct ap_out){ .buf = q->pl };
	q->f = NULL;
	if (path_payload(&q->o, path, e) < 0)
		return -1;
	q->f = fields_new(e);
	return q->f ? 0 : -1;
}

/* Opens the request's channel and sends the payload as `kind`: what
 * chan_send returns (1: the agent has answered already). */
static int
freq_send(struct freq *q, int kind, uint16_t flags, struct err *e)
{
	q->ch = chan_open(q->c, kind, q->deadline_ms, e);
	if (q->ch == NULL)
		return -1;
	return chan_send(q->c, q->ch, (uint16_t)kind, flags, q->o.buf, q->o.len, q->deadline_ms, e);
}

/* Frees the fields and gives the channel up. */
static void
freq_end(struct freq *q)
{
	free(q->f);
	chan_release(q->c, q->ch);
}

int
achan_put(struct achan *c, const char *path, unsigned mode, int flags, uint64_t offset,
    achan_read_fn read_fn, void *ctx, uint64_t *written, long long deadline_ms, struct err *e)
{
	struct freq q;
	unsigned char *buf = NULL;
	struct frame_in *res = NULL;
	int r, rc = -1;

	if (freq_begin(&q, c, path, deadline_ms, e) < 0)
		goto out;
	if (mode)
		ap_put_u32(&q.o, AP_TAG_MODE, mode);
	if (offset)
		ap_put_u64(&q.o, AP_TAG_OFFSET, offset);
	buf = malloc(AP_MAX_PAYLOAD);
	if (buf == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	r = freq_send(&q, AP_T_PUT, file_flags(flags), e);
	while (r == 0) {
		ssize_t n = read_fn(ctx, buf, AP_MAX_PAYLOAD, e);

		if (n < 0)
			goto out;
		r = chan_send(c, q.ch, AP_T_DATA, n == 0 ? AP_F_FIN : 0, buf, (size_t)n,
		    deadline_ms, e);
		if (n == 0)
			break;
	}
	if (r < 0 || wait_result(c, q.ch, deadline_ms, &res, q.f, &q.nf, path, e) < 0 ||
	    result_check(q.f, q.nf, path, e) < 0)
		goto out;
	const struct ap_field *fs = ap_find(q.f, q.nf, AP_TAG_SIZE);
	if (written)
		*written = fs ? ap_u64(fs) : 0;
	rc = 0;
out:
	free(res);
	free(buf);
	freq_end(&q);
	return rc;
}

/* A large GET's window grows to ACHAN_GET_WINDOW with a WINDOW frame
 * queued on the channel itself, so that it reaches the agent after the
 * GET that opens the channel (any agent takes WINDOW on a GET). The
 * credit counts here first: the agent cannot use it before it arrives. */
static int
get_widen(struct achan *c, struct chan *ch, uint64_t length, long long deadline_ms, struct err *e)
{
	uint64_t want = length == 0 || length > ACHAN_GET_WINDOW ? ACHAN_GET_WINDOW : length;
	unsigned char pl[16];
	struct ap_out o = { .buf = pl };

	if (want <= AP_WINDOW_INIT)
		return 0;
	ap_put_u64(&o, AP_TAG_SIZE, want - AP_WINDOW_INIT);
	pthread_mutex_lock(&c->lock);
	ch->window += want - AP_WINDOW_INIT;
	pthread_mutex_unlock(&c->lock);
	return chan_send(c, ch, AP_T_WINDOW, 0, o.buf, o.len, deadline_ms, e) < 0 ? -1 : 0;
}

int
achan_get(struct achan *c, const char *path, int flags, uint64_t offset, uint64_t length,
    achan_write_fn write_fn, void *ctx, uint64_t *total, long long deadline_ms, struct err *e)
{
	struct freq q;
	int rc = -1;

	if (freq_begin(&q, c, path, deadline_ms, e) < 0)
		goto out;
	if (offset)
		ap_put_u64(&q.o, AP_TAG_OFFSET, offset);
	if (length)
		ap_put_u64(&q.o, AP_TAG_LENGTH, length);
	if (freq_send(&q, AP_T_GET, file_flags(flags & ACHAN_AS_ROOT), e) < 0 ||
	    get_widen(c, q.ch, length, deadline_ms, e) < 0)
		goto out;
	for (;;) {
		struct frame_in *fr = NULL;

		if (chan_reply(c, q.ch, deadline_ms, &fr, path, e) < 0)
			goto out;
		if (fr->type == AP_T_DATA) {
			int w = fr->len ? write_fn(ctx, fr->p, fr->len, e) : 0;
			free(fr);
			if (w < 0)
				goto out;
			continue;
		}
		if (fr->type != AP_T_RESULT) {
			free(fr);
			continue;
		}
		if (ap_parse(fr->p, fr->len, q.f, AP_MAX_FIELDS, &q.nf) < 0 ||
		    result_check(q.f, q.nf, path, e) < 0) {
			err_set(e, ERR_INTERNAL, "%s: malformed result", path);
			free(fr);
			goto out;
		}
		const struct ap_field *fs = ap_find(q.f, q.nf, AP_TAG_SIZE);
		if (total)
			*total = fs ? ap_u64(fs) : 0;
		free(fr);
		rc = 0;
		break;
	}
out:
	freq_end(&q);
	return rc;
}

static enum achan_ftype
ftype(uint32_t t)
{
	switch (t) {
	case AP_FT_FILE:
		return ACHAN_FT_FILE;
	case AP_FT_DIR:
		return ACHAN_FT_DIR;
	case AP_FT_LINK:
		return ACHAN_FT_LINK;
	default:
		return ACHAN_FT_OTHER;
	}
}

static void
stat_fill(const struct ap_field *f, size_t nf, struct achan_stat *st)
{
	const struct ap_field *x;

	memset(st, 0, sizeof(*st));
	if ((x = ap_find(f, nf, AP_TAG_TYPE)))
		st->type = ftype(ap_u32(x));
	if ((x = ap_find(f, nf, AP_TAG_SIZE)))
		st->size = ap_u64(x);
	if ((x = ap_find(f, nf, AP_TAG_MODE)))
		st->mode = ap_u32(x);
	if ((x = ap_find(f, nf, AP_TAG_MTIME)))
		st->mtime_ns = (int64_t)ap_u64(x);
	if ((x = ap_find(f, nf, AP_TAG_UID)))
		st->uid = ap_u32(x);
	if ((x = ap_find(f, nf, AP_TAG_GID)))
		st->gid = ap_u32(x);
}

int
achan_stat(struct achan *c, const char *path, int flags, struct achan_stat *st,
    long long deadline_ms, struct err *e)
{
	struct freq q;
	struct frame_in *res = NULL;
	int rc = -1;

	if (freq_begin(&q, c, path, deadline_ms, e) == 0)
		rc = simple_call(c, AP_T_STAT, file_flags(flags & ACHAN_AS_ROOT), &q.o, deadline_ms,
		    path, &res, q.f, &q.nf, e);
	if (rc == 0)
		stat_fill(q.f, q.nf, st);
	free(res);
	freq_end(&q);
	return rc;
}

/* Hands the entries of one block (records of u32 length + payload, each
 * checked on arrival) to fn: 0 to go on, 1 when fn stopped, -1. */
static int
list_block(const struct frame_in *fr, struct ap_field *f, achan_entry_fn fn, void *ctx,
    const char *path, struct err *e)
{
	char name[AP_MAX_STRING + 1];
	size_t off = 0, nf;

	while (off + 4 <= fr->len) {
		const unsigned char *q = fr->p + off;
		uint32_t n = (uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 | (uint32_t)q[2] << 8 |
		    q[3];
		struct achan_stat st;
		const struct ap_field *fnm;

		if (n > fr->len - off - 4 || ap_parse(q + 4, n, f, AP_MAX_FIELDS, &nf) < 0 ||
		    (fnm = ap_find(f, nf, AP_TAG_NAME)) == NULL ||
		    ap_str(fnm, name, sizeof(name)) < 0) {
			err_set(e, ERR_INTERNAL, "%s: malformed entry", path);
			return -1;
		}
		off += 4 + (size_t)n;
		stat_fill(f, nf, &st);
		int r = fn(ctx, name, &st, e);
		if (r != 0)
			return r;
	}
	return 0;
}

int
achan_list(struct achan *c, const char *path, achan_entry_fn fn, void *ctx, long long deadline_ms,
    struct err *e)
{
	struct freq q;
	int r, rc = -1;

	if (freq_begin(&q, c, path, deadline_ms, e) < 0 || freq_send(&q, AP_T_LIST, 0, e) < 0)
		goto out;
	for (;;) {
		struct frame_in *fr = NULL;

		if (chan_reply(c, q.ch, deadline_ms, &fr, path, e) < 0)
			goto out;
		if (fr->type == AP_T_RESULT) {
			if (ap_parse(fr->p, fr->len, q.f, AP_MAX_FIELDS, &q.nf) < 0)
				err_set(e, ERR_INTERNAL, "%s: malformed answer", path);
			else
				rc = result_check(q.f, q.nf, path, e);
			free(fr);
			break;
		}
		if (fr->type != AP_T_ENTRY) {
			free(fr);
			continue;
		}
		r = list_block(fr, q.f, fn, ctx, path, e);
		free(fr);
		if (r < 0)
			goto out;
		if (r == 1) {
			rc = 0;
			break;
		}
	}
out:
	freq_end(&q);
	return rc;
}
