/* achan_chan.c - the agent connection's channels (vmm/achan_int.h): their
 * bookkeeping (lookup by hash, the writer's turn, zombies), and the
 * callers' side: opening one, sending on it, taking its frames and
 * answer, giving it up. */
#include "vmm/achan.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/achan_int.h"
#include "base/fmt.h"

/* ---- bookkeeping (lock held) ---- */

void
achan_frames_in_free(struct achan_frame_in *f)
{
	while (f) {
		struct achan_frame_in *n = f->next;
		free(f);
		f = n;
	}
}

void
achan_frames_out_free(struct achan_frame_out *f)
{
	while (f) {
		struct achan_frame_out *n = f->next;
		free(f);
		f = n;
	}
}

struct achan_chan *
achan_chan_find(struct achan *c, uint32_t id)
{
	for (struct achan_chan *ch = c->hash[id % ACHAN_HASH]; ch; ch = ch->hnext)
		if (ch->id == id)
			return ch;
	return NULL;
}

void
achan_ring_remove(struct achan *c, struct achan_chan *ch)
{
	struct achan_chan **pp, *prev = NULL;

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

void
achan_ring_push(struct achan *c, struct achan_chan *ch)
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
void
achan_chan_drop(struct achan *c, struct achan_chan *ch)
{
	for (struct achan_chan **pp = &c->chans; *pp; pp = &(*pp)->next)
		if (*pp == ch) {
			*pp = ch->next;
			break;
		}
	for (struct achan_chan **pp = &c->hash[ch->id % ACHAN_HASH]; *pp; pp = &(*pp)->hnext)
		if (*pp == ch) {
			*pp = ch->hnext;
			break;
		}
	achan_ring_remove(c, ch);
	if (ch->owned)
		c->nopen--;
	else
		c->nzombies--;
	achan_frames_in_free(ch->in_head);
	achan_frames_out_free(ch->out_head);
	achan_frames_out_free(ch->pre_close);
	free(ch);
}

/* ---- channels (caller threads) ---- */

struct achan_chan *
achan_chan_open(struct achan *c, int kind, long long deadline_ms, struct err *e)
{
	struct achan_chan *ch = NULL;

	pthread_mutex_lock(&c->lock);
	if (achan_wait_ready_locked(c, deadline_ms, e) < 0)
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
chan_release_locked(struct achan *c, struct achan_chan *ch)
{
	if (ch->ended || c->state == -1) {
		achan_chan_drop(c, ch);
		return;
	}
	achan_frames_in_free(ch->in_head);
	ch->in_head = ch->in_tail = NULL;
	ch->last[0] = ch->last[1] = NULL;
	for (struct achan_frame_out *f = ch->out_head, *next, **keep = &ch->pre_close; f;
	     f = next) {
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
	achan_ring_remove(c, ch);
	ch->grant_pending = 0;
	ch->owned = 0;
	ch->close_pending = 1;
	c->nopen--;
	c->nzombies++;
	while (c->nzombies > ACHAN_MAX_ZOMBIES) {
		struct achan_chan *old = NULL;

		for (struct achan_chan *z = c->chans; z; z = z->next)
			if (!z->owned && !z->close_pending && (old == NULL || z->id < old->id))
				old = z;
		if (old == NULL)
			break;
		if (old->id > c->zombie_floor)
			c->zombie_floor = old->id;
		abound_forget(&c->bound, old->window);
		achan_chan_drop(c, old);
	}
}

void
achan_chan_release(struct achan *c, struct achan_chan *ch)
{
	if (ch == NULL)
		return;
	pthread_mutex_lock(&c->lock);
	chan_release_locked(c, ch);
	pthread_mutex_unlock(&c->lock);
	achan_arm(c);
}

int
achan_chan_gone(struct achan *c, struct achan_chan *ch, struct err *e)
{
	if (c->state == -1)
		return achan_unavailable(c, e);
	if (ch->failed) {
		err_set(e, ERR_UNAVAILABLE, "the guest agent restarted during the operation");
		return -1;
	}
	return 0;
}

/* Queues one frame (header added here) on a channel, waiting while its
 * send queue is full. 1 when the channel has ended meanwhile (the agent
 * answered early): nothing is sent. */
int
achan_chan_send(struct achan *c, struct achan_chan *ch, uint16_t type, uint16_t flags,
    const void *p, size_t n, long long deadline_ms, struct err *e)
{
	struct achan_frame_out *f = malloc(sizeof(*f) + AP_HDR_SIZE + n);
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
		if (achan_chan_gone(c, ch, e) < 0)
			goto out;
		if (ch->ended) {
			rc = 1;
			goto out;
		}
		if (ch->out_bytes == 0 || ch->out_bytes + f->len <= ACHAN_CHAN_SENDQ)
			break;
		if (achan_wait_change(c, deadline_ms, NULL)) {
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
	achan_ring_push(c, ch);
	f = NULL;
	rc = 0;
out:
	pthread_mutex_unlock(&c->lock);
	free(f);
	if (rc == 0)
		achan_arm(c);
	return rc;
}

/* The next frame on a channel: 1 with *out (the caller frees it), 0 at
 * the deadline or on cancel, -1 with e set. Data taken is granted again. */
int
achan_chan_next(struct achan *c, struct achan_chan *ch, long long deadline_ms,
    const atomic_int *cancel, struct achan_frame_in **out, struct err *e)
{
	int rc = -1, grant = 0;

	pthread_mutex_lock(&c->lock);
	for (;;) {
		/* A failed connection serves nothing more, queued or not. */
		if (achan_chan_gone(c, ch, e) < 0)
			break;
		if (ch->in_head) {
			struct achan_frame_in *f = ch->in_head;

			ch->in_head = f->next;
			if (ch->in_head == NULL)
				ch->in_tail = NULL;
			for (int i = 0; i < 2; i++)
				if (ch->last[i] == f)
					ch->last[i] = NULL;
			f->next = NULL;
			if (achan_is_data(f->type) && !ch->ended) {
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
		if (achan_wait_change(c, deadline_ms, cancel)) {
			rc = 0;
			break;
		}
	}
	pthread_mutex_unlock(&c->lock);
	if (grant)
		achan_arm(c);
	return rc;
}

/* Turns a RESULT into 0 or an error of the kind achan.h names. */
int
achan_result_check(const struct ap_field *f, size_t nf, const char *what, struct err *e)
{
	const struct ap_field *fe = ap_find(f, nf, AP_TAG_ERRNO);
	const struct ap_field *fm = ap_find(f, nf, AP_TAG_MESSAGE);
	char msg[AP_MAX_STRING + 1] = "";
	uint32_t no = fe ? ap_u32(fe) : 0;
	enum err_kind kind = ERR_INVALID;

	if (no == 0)
		return 0;
	if (fm == NULL || ap_str(fm, msg, sizeof(msg)) < 0 || msg[0] == '\0')
		fmt_cut(msg, sizeof(msg), "%s", strerror((int)no));
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
int
achan_chan_reply(struct achan *c, struct achan_chan *ch, long long deadline_ms,
    struct achan_frame_in **fr, const char *what, struct err *e)
{
	int r = achan_chan_next(c, ch, deadline_ms, NULL, fr, e);

	if (r == 0)
		err_set(e, ERR_TIMEOUT, "%s: the guest agent did not answer in time", what);
	return r == 1 ? 0 : -1;
}

/* Waits for the RESULT that ends a channel (other frames are skipped)
 * and parses it into fields. */
int
achan_wait_result(struct achan *c, struct achan_chan *ch, long long deadline_ms,
    struct achan_frame_in **res, struct ap_field *f, size_t *nf, const char *what, struct err *e)
{
	for (;;) {
		struct achan_frame_in *fr = NULL;

		if (achan_chan_reply(c, ch, deadline_ms, &fr, what, e) < 0)
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

struct ap_field *
achan_fields_new(struct err *e)
{
	struct ap_field *f = malloc(sizeof(*f) * AP_MAX_FIELDS);

	if (f == NULL)
		err_set(e, ERR_INTERNAL, "out of memory");
	return f;
}

/* A request whose only answer is a RESULT; *res and f filled on success. */
int
achan_simple_call(struct achan *c, int kind, uint16_t flags, const struct ap_out *o,
    long long deadline_ms, const char *what, struct achan_frame_in **res, struct ap_field *f,
    size_t *nf, struct err *e)
{
	struct achan_chan *ch;
	int rc = -1;

	if (o->overflow) {
		err_set(e, ERR_INVALID, "%s: request too large", what);
		return -1;
	}
	ch = achan_chan_open(c, kind, deadline_ms, e);
	if (ch == NULL)
		return -1;
	if (achan_chan_send(c, ch, (uint16_t)kind, flags, o->buf, o->len, deadline_ms, e) < 0 ||
	    achan_wait_result(c, ch, deadline_ms, res, f, nf, what, e) < 0)
		goto out;
	if (achan_result_check(f, *nf, what, e) < 0) {
		free(*res);
		*res = NULL;
		goto out;
	}
	rc = 0;
out:
	achan_chan_release(c, ch);
	return rc;
}
