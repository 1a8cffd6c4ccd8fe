/* hlim.c - connections per client address, request arrival deadlines and
 * body bytes held per account, for the HTTP front end. */
#include "server/hlim.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/fmt.h"
#include "base/log.h"

/* Counts under names; a name leaves when its count is zero. */
struct count {
	char name[HLIM_NAME_MAX + 1];
	long long n;
};

struct counts {
	struct count *v;
	size_t len, cap;
};

struct hlim_conn {
	struct hlim_conn *prev, *next;
	int fd;
	char group[HLIM_GROUP_MAX + 1];
	int receiving;       /* a deadline applies */
	int exempt;          /* never swept */
	long long start_ms;  /* when the request began (or is due to) */
	long long bytes;     /* body bytes of this request */
	long long paused_ms; /* time the server did not read */
	long long paused_at; /* 0: reading */
};

struct hlim {
	pthread_mutex_t lock;
	struct hlim_limits lim;
	struct hlim_conn *conns;
	struct counts addrs;  /* open connections per address group */
	struct counts owners; /* body bytes held per owner */
	long long warned_ms;  /* the last refusal logged */
	long long unlogged;   /* refusals since, not logged */
};

#define HLIM_WARN_MS 1000 /* at most one refusal logged a second */

/* 1 when a refusal may be logged now (a flood of them logs one a
 * second), with *skipped the ones left out since. Under the lock. */
static int
warn_due(struct hlim *h, long long *skipped)
{
	long long now = clock_ms();

	if (now - h->warned_ms < HLIM_WARN_MS) {
		h->unlogged++;
		return 0;
	}
	h->warned_ms = now;
	*skipped = h->unlogged;
	h->unlogged = 0;
	return 1;
}

static struct count *
counts_find(struct counts *c, const char *name)
{
	for (size_t i = 0; i < c->len; i++)
		if (strcmp(c->v[i].name, name) == 0)
			return &c->v[i];
	return NULL;
}

/* Adds `d` under `name` when the count stays within `max` (max < 0: no
 * maximum). 0, or -1. Under the lock. */
static int
counts_add(struct counts *c, const char *name, long long d, long long max)
{
	struct count *k = counts_find(c, name);

	if (k == NULL) {
		if (d <= 0)
			return 0;
		if (c->len >= c->cap ||
		    fmt_buf(c->v[c->len].name, sizeof(c->v[c->len].name), "%s", name) < 0)
			return -1;
		k = &c->v[c->len++];
		k->n = 0;
	}
	if (d > 0 && max >= 0 && k->n + d > max) {
		if (k->n == 0)
			*k = c->v[--c->len];
		return -1;
	}
	k->n += d;
	if (k->n <= 0)
		*k = c->v[--c->len];
	return 0;
}

static long long
counts_get(struct counts *c, const char *name)
{
	struct count *k = counts_find(c, name);

	return k ? k->n : 0;
}

struct hlim *
hlim_new(const struct hlim_limits *lim)
{
	struct hlim *h = calloc(1, sizeof(*h));

	if (h == NULL)
		return NULL;
	h->lim = *lim;
	h->addrs.cap = h->owners.cap = lim->max_conns ? lim->max_conns : 1;
	h->addrs.v = calloc(h->addrs.cap, sizeof(*h->addrs.v));
	h->owners.v = calloc(h->owners.cap, sizeof(*h->owners.v));
	if (h->addrs.v == NULL || h->owners.v == NULL) {
		free(h->addrs.v);
		free(h->owners.v);
		free(h);
		return NULL;
	}
	pthread_mutex_init(&h->lock, NULL);
	return h;
}

void
hlim_free(struct hlim *h)
{
	if (h == NULL)
		return;
	while (h->conns) {
		struct hlim_conn *c = h->conns;
		h->conns = c->next;
		free(c);
	}
	pthread_mutex_destroy(&h->lock);
	free(h->addrs.v);
	free(h->owners.v);
	free(h);
}

int
hlim_group(const struct sockaddr *sa, char *out, size_t n)
{
	char text[INET6_ADDRSTRLEN];
	struct in6_addr a6;

	if (sa == NULL)
		return -1;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)(const void *)sa;
		if (inet_ntop(AF_INET, &s4->sin_addr, text, sizeof(text)) == NULL)
			return -1;
		return fmt_buf(out, n, "%s", text);
	}
	if (sa->sa_family != AF_INET6)
		return -1;
	a6 = ((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
	if (IN6_IS_ADDR_V4MAPPED(&a6)) {
		if (inet_ntop(AF_INET, a6.s6_addr + 12, text, sizeof(text)) == NULL)
			return -1;
		return fmt_buf(out, n, "%s", text);
	}
	/* One IPv6 client holds a whole /64. */
	memset(a6.s6_addr + 8, 0, 8);
	if (inet_ntop(AF_INET6, &a6, text, sizeof(text)) == NULL)
		return -1;
	return fmt_buf(out, n, "%s/64", text);
}

void
hlim_group_text(const char *addr, char *out, size_t n)
{
	struct sockaddr_in6 s6 = { 0 };
	struct sockaddr_in s4 = { 0 };

	if (inet_pton(AF_INET, addr, &s4.sin_addr) == 1) {
		s4.sin_family = AF_INET;
		if (hlim_group((struct sockaddr *)&s4, out, n) == 0)
			return;
	} else if (inet_pton(AF_INET6, addr, &s6.sin6_addr) == 1) {
		s6.sin6_family = AF_INET6;
		if (hlim_group((struct sockaddr *)&s6, out, n) == 0)
			return;
	}
	if (fmt_buf(out, n, "%s", addr) < 0)
		fmt_cut(out, n, "unknown"); /* one label for every text too long */
}

int
hlim_accept(struct hlim *h, const struct sockaddr *sa)
{
	char g[HLIM_GROUP_MAX + 1];
	long long skipped = 0;
	int ok, warn = 0;

	if (hlim_group(sa, g, sizeof(g)) < 0)
		return 1;
	pthread_mutex_lock(&h->lock);
	ok = counts_get(&h->addrs, g) < h->lim.max_conns_per_addr;
	if (!ok)
		warn = warn_due(h, &skipped);
	pthread_mutex_unlock(&h->lock);
	if (warn)
		log_warn("http: connection from %s refused: AAS_MAX_CONNS_PER_ADDR (%d) open "
			 "(%lld more refusals not logged)",
		    g, h->lim.max_conns_per_addr, skipped);
	return ok;
}

struct hlim_conn *
hlim_started(struct hlim *h, int fd, const struct sockaddr *sa)
{
	struct hlim_conn *c = calloc(1, sizeof(*c));

	if (c == NULL || hlim_group(sa, c->group, sizeof(c->group)) < 0) {
		free(c);
		return NULL;
	}
	c->fd = fd;
	c->receiving = 1;
	c->start_ms = clock_ms();
	pthread_mutex_lock(&h->lock);
	if (counts_add(&h->addrs, c->group, 1, h->lim.max_conns_per_addr) < 0) {
		/* Two accepts raced past the policy: this one goes. */
		pthread_mutex_unlock(&h->lock);
		shutdown(fd, SHUT_RDWR);
		free(c);
		return NULL;
	}
	c->next = h->conns;
	if (h->conns)
		h->conns->prev = c;
	h->conns = c;
	pthread_mutex_unlock(&h->lock);
	return c;
}

void
hlim_closed(struct hlim *h, struct hlim_conn *c)
{
	if (c == NULL)
		return;
	pthread_mutex_lock(&h->lock);
	counts_add(&h->addrs, c->group, -1, -1);
	if (c->prev)
		c->prev->next = c->next;
	else
		h->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	pthread_mutex_unlock(&h->lock);
	free(c);
}

void
hlim_request_begin(struct hlim *h, struct hlim_conn *c)
{
	long long now = clock_ms();

	if (c == NULL)
		return;
	pthread_mutex_lock(&h->lock);
	/* A new connection's clock started at accept; a kept-alive one's
	 * starts now at the latest. */
	if (!c->receiving || c->start_ms > now)
		c->start_ms = now;
	c->receiving = 1;
	pthread_mutex_unlock(&h->lock);
}

void
hlim_request_bytes(struct hlim *h, struct hlim_conn *c, size_t n)
{
	if (c == NULL)
		return;
	pthread_mutex_lock(&h->lock);
	c->bytes += (long long)n;
	pthread_mutex_unlock(&h->lock);
}

void
hlim_request_end(struct hlim *h, struct hlim_conn *c)
{
	if (c == NULL)
		return;
	pthread_mutex_lock(&h->lock);
	c->receiving = 0;
	pthread_mutex_unlock(&h->lock);
}

void
hlim_request_done(struct hlim *h, struct hlim_conn *c)
{
	if (c == NULL)
		return;
	pthread_mutex_lock(&h->lock);
	/* Idle clients are closed by the idle timeout first; one that sends
	 * the next request line a byte at a time meets this. */
	c->receiving = 1;
	c->start_ms = clock_ms() + (long long)h->lim.idle_s * 1000;
	c->bytes = c->paused_ms = c->paused_at = 0;
	pthread_mutex_unlock(&h->lock);
}

void
hlim_exempt(struct hlim *h, struct hlim_conn *c)
{
	if (c == NULL)
		return;
	pthread_mutex_lock(&h->lock);
	c->exempt = 1;
	pthread_mutex_unlock(&h->lock);
}

void
hlim_pause(struct hlim *h, struct hlim_conn *c)
{
	if (c == NULL)
		return;
	pthread_mutex_lock(&h->lock);
	if (c->paused_at == 0)
		c->paused_at = clock_ms();
	pthread_mutex_unlock(&h->lock);
}

void
hlim_resume(struct hlim *h, struct hlim_conn *c)
{
	if (c == NULL)
		return;
	pthread_mutex_lock(&h->lock);
	if (c->paused_at != 0) {
		c->paused_ms += clock_ms() - c->paused_at;
		c->paused_at = 0;
	}
	pthread_mutex_unlock(&h->lock);
}

/* When the connection's request must be in. Under the lock. */
static long long
deadline(const struct hlim *h, const struct hlim_conn *c)
{
	return c->start_ms + (long long)h->lim.recv_s * 1000 + c->paused_ms +
	    c->bytes / h->lim.min_recv_rate * 1000;
}

int
hlim_sweep(struct hlim *h, long long now_ms)
{
	int n = 0;

	pthread_mutex_lock(&h->lock);
	for (struct hlim_conn *c = h->conns; c; c = c->next) {
		if (c->exempt || !c->receiving || c->paused_at != 0 || now_ms < deadline(h, c))
			continue;
		/* libmicrohttpd sees the end of the stream and closes it; the
		 * entry goes with its close notification. */
		long long skipped;

		shutdown(c->fd, SHUT_RDWR);
		c->receiving = 0;
		if (warn_due(h, &skipped))
			log_warn("http: connection from %s closed: request not in within "
				 "AAS_REQUEST_RECV_S (%d s, %lld body bytes; %lld more not logged)",
			    c->group, h->lim.recv_s, c->bytes, skipped);
		n++;
	}
	pthread_mutex_unlock(&h->lock);
	return n;
}

int
hlim_body_take(struct hlim *h, const char *owner, long long bytes)
{
	int rc;

	pthread_mutex_lock(&h->lock);
	rc = counts_add(&h->owners, owner, bytes, h->lim.body_per_owner);
	pthread_mutex_unlock(&h->lock);
	return rc;
}

void
hlim_body_give(struct hlim *h, const char *owner, long long bytes)
{
	pthread_mutex_lock(&h->lock);
	counts_add(&h->owners, owner, -bytes, -1);
	pthread_mutex_unlock(&h->lock);
}

long long
hlim_body_held(struct hlim *h, const char *owner)
{
	long long n;

	pthread_mutex_lock(&h->lock);
	n = counts_get(&h->owners, owner);
	pthread_mutex_unlock(&h->lock);
	return n;
}
