/* achan_io.c - the agent connection's transport on libvirt's event
 * thread (vmm/achan_int.h): a libvirt stream or a descriptor watched for
 * exactly the events there is work for, the writer that picks the next
 * frame (control frames first, then the channels in turn), and the reader
 * that feeds aread while the connection's budget lasts, pausing on a
 * timer past it. */
#include "vmm/achan.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "vmm/achan_int.h"
#include "vmm/aread.h"

static const unsigned char sync_bytes[] = AP_SYNC;

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

static void
watch_free(void *opaque)
{
	achan_unref(opaque);
}

int
achan_io_watch(struct achan *c)
{
	if (c->st)
		return virStreamEventAddCallback(c->st, ACHAN_WATCH_R | ACHAN_WATCH_W, stream_cb, c,
		    watch_free);
	c->watch = virEventAddHandle(c->fd, fd_events(ACHAN_WATCH_R | ACHAN_WATCH_W), fd_cb, c,
	    watch_free);
	return c->watch < 0 ? -1 : 0;
}

/* A descriptor's read or write as a libvirt stream's reads: -2 when it
 * would block (or was interrupted), else r. */
static ssize_t
fd_result(ssize_t r)
{
	if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return -2;
	return r;
}

/* Bytes read: > 0, 0 at the end, -2 when nothing is there, -1 failed. */
static ssize_t
io_recv(struct achan *c, void *buf, size_t n)
{
	if (c->st)
		return virStreamRecv(c->st, buf, n);
	return fd_result(read(c->fd, buf, n));
}

/* Bytes written: > 0, -2 when the transport would block, -1 failed. */
static ssize_t
io_send(struct achan *c, const void *buf, size_t n)
{
	if (c->st)
		return virStreamSend(c->st, buf, n);
	return fd_result(write(c->fd, buf, n));
}

/* 1 when the writer has something to do (lock held). */
static int
want_write(struct achan *c)
{
	if (c->state == -1)
		return 0;
	if (c->cur || c->cur_len || c->hello_pending || c->ring_head)
		return 1;
	for (struct achan_ping *p = c->pings; p; p = p->next)
		if (!p->sent)
			return 1;
	for (struct achan_chan *ch = c->chans; ch; ch = ch->next)
		if (ch->close_pending || (ch->grant_pending && !ch->ended && ch->owned))
			return 1;
	return 0;
}

/* Watches for writability exactly while there is something to write. The
 * decision and the change happen under arm_lock, so the last call always
 * reflects the latest state. */
void
achan_arm(struct achan *c)
{
	int want;

	pthread_mutex_lock(&c->arm_lock);
	pthread_mutex_lock(&c->lock);
	want = (c->throttled ? 0 : ACHAN_WATCH_R) | (want_write(c) ? ACHAN_WATCH_W : 0);
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
void
achan_io_stop(struct achan *c)
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

/* Makes a queued frame the one being written (it is freed once sent). */
static void
frame_next(struct achan *c, struct achan_frame_out *f)
{
	c->cur = f;
	c->cur_p = f->b;
	c->cur_len = f->len;
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
	for (struct achan_ping *q = c->pings; q; q = q->next)
		if (!q->sent) {
			for (int i = 0; i < 8; i++)
				pl[i] = (unsigned char)(q->seq >> (56 - 8 * i));
			ctl_frame(c, 0, AP_T_PING, 0, pl, 8);
			q->sent = 1;
			c->bound.pongs_owed++;
			return 1;
		}
	for (struct achan_chan *ch = c->chans; ch; ch = ch->next) {
		if (ch->close_pending && ch->pre_close) {
			struct achan_frame_out *f = ch->pre_close;

			ch->pre_close = f->next;
			f->next = NULL;
			frame_next(c, f);
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
	struct achan_chan *ch = c->ring_head;
	if (ch == NULL)
		return 0;
	achan_ring_remove(c, ch);
	struct achan_frame_out *f = ch->out_head;
	ch->out_head = f->next;
	if (ch->out_head == NULL)
		ch->out_tail = NULL;
	else
		achan_ring_push(c, ch);
	ch->out_bytes -= f->len;
	f->next = NULL;
	frame_next(c, f);
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
			achan_fail_locked(c, 0, "agent channel write failed: %s",
			    c->st ? achan_virt_error() : strerror(errno));
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
				achan_fail_locked(c, 0, "agent channel closed");
				break;
			}
			if (r < 0) {
				achan_fail_locked(c, 0, "agent channel read failed: %s",
				    c->st ? achan_virt_error() : strerror(errno));
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
			achan_hostile(c, "%s", aread_reason(c->rd));
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

/* Pauses reading for ms (the watch drops READABLE in achan_arm). Without a
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
		achan_io_stop(c);
		return;
	}
	if (pause > 0)
		throttle(c, pause);
	achan_arm(c);
}
