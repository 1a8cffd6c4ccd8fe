/* sse.c - SSE streams over libmicrohttpd callback responses. */
#include "server/sse.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"

struct sse {
	atomic_int refs;
	pthread_mutex_t lock;
	char *buf;
	size_t len, cap, off; /* unsent data is buf[off..len) */
	int finished;         /* no more data will come */
	int failed;           /* end with an error */
	int closed;           /* MHD freed the response */
	int suspended;        /* connection parked by the reader */
	struct MHD_Connection *conn;
	time_t last_write;
	void (*on_close)(void *arg); /* runs once, then cleared */
	void *on_close_arg;
	struct sse *next, *prev; /* registry of open streams */
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sse *registry;
static size_t registry_count;

struct sse *
sse_new(void)
{
	struct sse *s = calloc(1, sizeof(*s));

	if (s == NULL)
		return NULL;
	atomic_init(&s->refs, 1);
	pthread_mutex_init(&s->lock, NULL);
	s->last_write = time(NULL);
	return s;
}

void
sse_ref(struct sse *s)
{
	atomic_fetch_add(&s->refs, 1);
}

/* Runs the close callback if it has not run yet. */
static void
fire_close(struct sse *s)
{
	void (*fn)(void *);
	void *arg;

	pthread_mutex_lock(&s->lock);
	fn = s->on_close;
	arg = s->on_close_arg;
	s->on_close = NULL;
	pthread_mutex_unlock(&s->lock);
	if (fn)
		fn(arg);
}

void
sse_on_close(struct sse *s, void (*fn)(void *arg), void *arg)
{
	int now = 0;

	pthread_mutex_lock(&s->lock);
	if (s->closed)
		now = 1; /* already over: run it at once */
	else if (s->on_close == NULL) {
		s->on_close = fn;
		s->on_close_arg = arg;
	}
	pthread_mutex_unlock(&s->lock);
	if (now)
		fn(arg);
}

void
sse_unref(struct sse *s)
{
	if (s == NULL || atomic_fetch_sub(&s->refs, 1) != 1)
		return;
	fire_close(s);
	pthread_mutex_destroy(&s->lock);
	free(s->buf);
	free(s);
}

/* Called with s->lock held; returns the connection to resume, if any. */
static struct MHD_Connection *
take_resume(struct sse *s)
{
	if (!s->suspended || s->conn == NULL)
		return NULL;
	s->suspended = 0;
	return s->conn;
}

static int
append(struct sse *s, const char *const *parts, const size_t *lens, int n)
{
	struct MHD_Connection *resume = NULL;
	size_t total = 0;
	int rc = -1;

	for (int i = 0; i < n; i++)
		total += lens[i];
	pthread_mutex_lock(&s->lock);
	if (s->finished || s->failed || s->closed)
		goto out;
	if (s->off > 0 && s->off == s->len)
		s->off = s->len = 0;
	if (s->len - s->off + total > SSE_MAX_BUFFER) {
		log_warn("sse: %zu bytes pending and %zu more would exceed the stream's"
			 " limit; ending it",
		    s->len - s->off, total);
		s->failed = 1;
		resume = take_resume(s);
		goto out;
	}
	if (s->len + total > s->cap) {
		/* Compact first; grow only if still short. */
		if (s->off > 0) {
			memmove(s->buf, s->buf + s->off, s->len - s->off);
			s->len -= s->off;
			s->off = 0;
		}
		if (s->len + total > s->cap) {
			size_t ncap = s->cap ? s->cap : 4096;
			while (ncap < s->len + total)
				ncap *= 2;
			char *nb = realloc(s->buf, ncap);
			if (nb == NULL)
				goto out;
			s->buf = nb;
			s->cap = ncap;
		}
	}
	for (int i = 0; i < n; i++) {
		memcpy(s->buf + s->len, parts[i], lens[i]);
		s->len += lens[i];
	}
	s->last_write = time(NULL);
	resume = take_resume(s);
	rc = 0;
out:
	pthread_mutex_unlock(&s->lock);
	if (resume)
		MHD_resume_connection(resume);
	return rc;
}

int
sse_send_message(struct sse *s, const char *json, size_t len)
{
	return sse_send_event(s, "message", json, len);
}

int
sse_send_event(struct sse *s, const char *event, const char *json, size_t len)
{
	const char *parts[5] = { "event: ", event, "\ndata: ", json, "\n\n" };
	size_t lens[5] = { 7, strlen(event), 7, len, 2 };

	/* A raw CR or LF would end the data line early (SSE treats either as
	 * a line end); compact JSON from jansson has neither. */
	if (memchr(json, '\n', len) != NULL || memchr(json, '\r', len) != NULL ||
	    strpbrk(event, "\r\n") != NULL)
		return -1;
	return append(s, parts, lens, 5);
}

size_t
sse_pending(struct sse *s)
{
	size_t n;

	pthread_mutex_lock(&s->lock);
	n = s->len - s->off;
	pthread_mutex_unlock(&s->lock);
	return n;
}

int
sse_gate_pass(struct sse *s, struct sse_gate *g, double progress)
{
	if (sse_pending(s) <= SSE_MAX_PROGRESS_BACKLOG)
		return 1;
	g->dropped++;
	g->dropped_at = progress;
	return 0;
}

int
sse_send_comment(struct sse *s, const char *text)
{
	const char *parts[3] = { ": ", text, "\n\n" };
	size_t lens[3] = { 2, strlen(text), 2 };

	return append(s, parts, lens, 3);
}

void
sse_finish(struct sse *s)
{
	struct MHD_Connection *resume;

	pthread_mutex_lock(&s->lock);
	s->finished = 1;
	resume = take_resume(s);
	pthread_mutex_unlock(&s->lock);
	if (resume)
		MHD_resume_connection(resume);
}

int
sse_closed(struct sse *s)
{
	int c;

	pthread_mutex_lock(&s->lock);
	c = s->closed;
	pthread_mutex_unlock(&s->lock);
	return c;
}

static ssize_t
sse_reader(void *cls, uint64_t pos, char *out, size_t max)
{
	struct sse *s = cls;
	ssize_t n;

	(void)pos;
	pthread_mutex_lock(&s->lock);
	if (s->failed) {
		n = MHD_CONTENT_READER_END_WITH_ERROR;
	} else if (s->len > s->off) {
		size_t avail = s->len - s->off;
		size_t take = avail < max ? avail : max;
		memcpy(out, s->buf + s->off, take);
		s->off += take;
		n = (ssize_t)take;
	} else if (s->finished) {
		n = MHD_CONTENT_READER_END_OF_STREAM;
	} else {
		/* Nothing to send: park the connection until the next append.
		 * Suspending from the content reader is the documented way. */
		s->suspended = 1;
		MHD_suspend_connection(s->conn);
		n = 0;
	}
	pthread_mutex_unlock(&s->lock);
	return n;
}

static void
registry_remove(struct sse *s)
{
	pthread_mutex_lock(&registry_lock);
	if (s->prev)
		s->prev->next = s->next;
	else if (registry == s)
		registry = s->next;
	if (s->next)
		s->next->prev = s->prev;
	s->next = s->prev = NULL;
	registry_count--;
	pthread_mutex_unlock(&registry_lock);
}

static void
sse_response_free(void *cls)
{
	struct sse *s = cls;

	registry_remove(s);
	pthread_mutex_lock(&s->lock);
	s->closed = 1;
	s->conn = NULL;
	s->suspended = 0;
	pthread_mutex_unlock(&s->lock);
	fire_close(s);
	sse_unref(s);
}

struct MHD_Response *
sse_response(struct sse *s, struct MHD_Connection *conn)
{
	struct MHD_Response *r;

	sse_ref(s);
	r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, sse_reader, s,
	    sse_response_free);
	if (r == NULL) {
		sse_unref(s);
		return NULL;
	}
	pthread_mutex_lock(&s->lock);
	s->conn = conn;
	pthread_mutex_unlock(&s->lock);
	pthread_mutex_lock(&registry_lock);
	s->next = registry;
	s->prev = NULL;
	if (registry)
		registry->prev = s;
	registry = s;
	registry_count++;
	pthread_mutex_unlock(&registry_lock);
	return r;
}

void
sse_keepalive_all(int idle_s)
{
	time_t now = time(NULL);

	/* Appending resumes a parked connection, which can only free the
	 * stream from the HTTP thread after our registry lock is released:
	 * collect first, then write. */
	for (;;) {
		struct sse *due = NULL;

		pthread_mutex_lock(&registry_lock);
		for (struct sse *s = registry; s; s = s->next) {
			pthread_mutex_lock(&s->lock);
			int idle = !s->finished && !s->failed && now - s->last_write >= idle_s;
			pthread_mutex_unlock(&s->lock);
			if (idle) {
				due = s;
				sse_ref(due);
				break;
			}
		}
		pthread_mutex_unlock(&registry_lock);
		if (due == NULL)
			return;
		if (sse_send_comment(due, "keep-alive") < 0) {
			/* Mark it written so the loop moves on. */
			pthread_mutex_lock(&due->lock);
			due->last_write = now;
			pthread_mutex_unlock(&due->lock);
		}
		sse_unref(due);
	}
}

void
sse_finish_all(void)
{
	for (;;) {
		struct sse *open = NULL;

		pthread_mutex_lock(&registry_lock);
		for (struct sse *s = registry; s; s = s->next) {
			pthread_mutex_lock(&s->lock);
			int live = !s->finished;
			pthread_mutex_unlock(&s->lock);
			if (live) {
				open = s;
				sse_ref(open);
				break;
			}
		}
		pthread_mutex_unlock(&registry_lock);
		if (open == NULL)
			return;
		sse_finish(open);
		sse_unref(open);
	}
}

size_t
sse_open_count(void)
{
	size_t n;

	pthread_mutex_lock(&registry_lock);
	n = registry_count;
	pthread_mutex_unlock(&registry_lock);
	return n;
}
