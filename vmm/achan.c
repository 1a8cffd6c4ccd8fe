/* achan.c - aasd's end of the agent protocol (vmm/achan.h): the
 * connection's life (open, references, close), its state, waiting on it,
 * and PING. How the pieces fit and what bounds a guest: vmm/achan_int.h. */
#include "vmm/achan.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libvirt/virterror.h>

#include "base/clock.h"
#include "base/fmt.h"
#include "vmm/achan_int.h"
#include "vmm/aread.h"

const char *
achan_virt_error(void)
{
	virErrorPtr e = virGetLastError();

	return e && e->message ? e->message : "unknown libvirt error";
}

uint64_t
achan_new_nonce(void)
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
void
achan_fail_locked(struct achan *c, int fault, const char *fmt, ...)
{
	va_list ap;

	if (c->state == -1)
		return;
	va_start(ap, fmt);
	err_ignore(fmt_vbuf(c->reason, sizeof(c->reason), fmt, ap)); /* a cut reason will do */
	va_end(ap);
	c->state = -1;
	c->fault = fault;
	pthread_cond_broadcast(&c->cond);
}

/* ---- life ---- */

static struct achan *
achan_new(struct err *e)
{
	struct achan *c = calloc(1, sizeof(*c));
	pthread_condattr_t ca;

	if (c == NULL || (c->rd = aread_new(achan_on_frame, achan_on_sync, c)) == NULL) {
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
	c->nonce = achan_new_nonce();
	c->hello_pending = 1;
	c->next_chan = 1;
	c->armed = ACHAN_WATCH_R | ACHAN_WATCH_W;
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
		achan_chan_drop(c, c->chans);
	free(c->cur);
	aread_free(c->rd);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->arm_lock);
	pthread_cond_destroy(&c->cond);
	free(c);
}

void
achan_unref(struct achan *c)
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
		err_set(e, ERR_UNAVAILABLE, "agent channel %s: %s", AP_PORT_NAME,
		    achan_virt_error());
		goto fail;
	}
	if (achan_io_watch(c) < 0) {
		err_set(e, ERR_UNAVAILABLE, "agent channel events: %s", achan_virt_error());
		goto fail;
	}
	return c;
fail:
	atomic_store(&c->refs, 1);
	achan_unref(c);
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
	if (achan_io_watch(c) < 0) {
		err_set(e, ERR_UNAVAILABLE, "agent descriptor: no event loop");
		atomic_store(&c->refs, 1);
		achan_unref(c);
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
	achan_fail_locked(c, 0, "agent channel closed by aasd");
	pthread_mutex_unlock(&c->lock);
	achan_io_stop(c);
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
	achan_unref(c);
}

/* ---- waiting (lock held) ---- */

/* Waits for a change until the deadline (or ACHAN_POLL_MS at most, when
 * a cancel flag is watched). 1 once the deadline passed. */
int
achan_wait_change(struct achan *c, long long deadline_ms, const atomic_int *cancel)
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

int
achan_unavailable(struct achan *c, struct err *e)
{
	err_set(e, ERR_UNAVAILABLE, "guest agent unavailable: %s", c->reason);
	return -1;
}

/* Waits until the handshake is done. */
int
achan_wait_ready_locked(struct achan *c, long long deadline_ms, struct err *e)
{
	for (;;) {
		if (c->state == -1)
			return achan_unavailable(c, e);
		if (c->state == 1)
			return 0;
		if (achan_wait_change(c, deadline_ms, NULL)) {
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
	rc = achan_wait_ready_locked(c, deadline_ms, e);
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
	fmt_cut(buf, n, "%s", c->state == -1 ? c->reason : "");
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
	struct achan_ping q = { 0 };
	unsigned restarts;
	int rc = -1;

	pthread_mutex_lock(&c->lock);
	if (achan_wait_ready_locked(c, deadline_ms, e) < 0)
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
	achan_arm(c);
	pthread_mutex_lock(&c->lock);
	for (;;) {
		if (q.answered) {
			rc = 0;
			break;
		}
		if (c->state == -1) {
			achan_unavailable(c, e);
			break;
		}
		if (c->restarts != restarts) {
			err_set(e, ERR_UNAVAILABLE, "the guest agent restarted during the ping");
			break;
		}
		if (achan_wait_change(c, deadline_ms, NULL)) {
			err_set(e, ERR_TIMEOUT, "the guest agent did not answer a ping");
			break;
		}
	}
	for (struct achan_ping **pp = &c->pings; *pp; pp = &(*pp)->next)
		if (*pp == &q) {
			*pp = q.next;
			break;
		}
	c->npings--;
out:
	pthread_mutex_unlock(&c->lock);
	return rc;
}
