/* scrape.c - the /metrics endpoint. */
#include "server/scrape.h"
#include "sandbox/hosts.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "base/fmt.h"
#include "base/log.h"
#include "base/metrics.h"
#include "sandbox/sandbox.h"
#include "sandbox/store.h"

/* Scrapes from several Prometheus servers share one database read. */
#define GAUGE_CACHE_S 1.0

struct scrape {
	struct app *app;
	pthread_mutex_t lock;
	double read_at; /* 0: never */
	int db_up;
	int sandboxes_ok; /* the counts below were read whole */
	long long sandboxes[3];
	size_t n_hosts; /* as last read, with read_at */
	struct metrics_host hosts[METRICS_MAX_HOSTS];
};

struct scrape *
scrape_new(struct app *app, struct err *e)
{
	struct scrape *mh = calloc(1, sizeof(*mh));

	if (mh == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	mh->app = app;
	pthread_mutex_init(&mh->lock, NULL);
	return mh;
}

void
scrape_free(struct scrape *mh)
{
	if (mh == NULL)
		return;
	pthread_mutex_destroy(&mh->lock);
	free(mh);
}

int
scrape_token_ok(const char *authorization, const char *token)
{
	const char *p = authorization;
	size_t n = strlen(token);

	if (p == NULL || n == 0 || strncasecmp(p, "Bearer ", 7) != 0)
		return 0;
	p += 7;
	while (*p == ' ')
		p++;
	return strlen(p) == n && CRYPTO_memcmp(p, token, n) == 0;
}

static long long
member_ll(const json_t *o, const char *a, const char *b, long long none)
{
	const json_t *v = json_object_get(o, a);

	if (b != NULL)
		v = json_object_get(v, b);
	return json_is_integer(v) ? (long long)json_integer_value(v) : none;
}

/* The hosts table, under mh->lock. */
static void
read_hosts(struct scrape *mh)
{
	struct err e;
	json_t *all, *h;
	size_t i;

	err_clear(&e);
	mh->n_hosts = 0;
	all = hosts_list_json(mh->app->db, &e);
	json_array_foreach(all, i, h) {
		struct metrics_host *m;
		const json_t *busy = json_object_get(json_object_get(h, "live"), "cpu_busy");
		if (mh->n_hosts >= METRICS_MAX_HOSTS)
			break;
		m = &mh->hosts[mh->n_hosts];
		/* A name too long for its label is never shown cut: the host
		 * is left out. */
		if (fmt_buf(m->name, sizeof(m->name), "%s",
			json_string_value(json_object_get(h, "name"))) < 0)
			continue;
		mh->n_hosts++;
		m->up = strcmp(json_string_value(json_object_get(h, "state")), "up") == 0;
		m->draining = json_is_true(json_object_get(h, "draining"));
		m->memory_mib = member_ll(h, "capacity", "memory_mib", 0);
		m->vcpus = member_ll(h, "capacity", "vcpus", 0);
		m->reserved_memory_mib = member_ll(h, "reserved", "memory_mib", 0);
		m->reserved_vcpus = member_ll(h, "reserved", "vcpus", 0);
		m->free_memory_mib = member_ll(h, "live", "free_memory_mib", -1);
		m->sandboxes = member_ll(h, "sandboxes", NULL, 0);
		m->cpu_busy = json_is_number(busy) ? json_number_value(busy) : -1;
	}
	json_decref(all);
}

/* Live sandboxes by state and the hosts, read at most once per
 * GAUGE_CACHE_S. */
static void
read_sandboxes(struct scrape *mh, struct metrics_gauges *g)
{
	double now = metrics_now();
	struct err e;

	pthread_mutex_lock(&mh->lock);
	if (mh->read_at == 0 || now - mh->read_at >= GAUGE_CACHE_S) {
		err_clear(&e);
		mh->sandboxes_ok = store_count_live(mh->app->db, mh->sandboxes, &e) == 0;
		/* A failed count with a live connection is a read error, not an outage. */
		mh->db_up = mh->sandboxes_ok || e.kind != ERR_UNAVAILABLE;
		if (mh->db_up && !mh->sandboxes_ok)
			log_warn("metrics: sandbox counts: %s", e.msg);
		read_hosts(mh);
		mh->read_at = now;
	}
	g->n_hosts = mh->n_hosts;
	memcpy(g->hosts, mh->hosts, sizeof(g->hosts));
	g->have_database = 1;
	g->database_up = mh->db_up;
	g->have_sandboxes = mh->sandboxes_ok;
	memcpy(g->sandboxes, mh->sandboxes, sizeof(g->sandboxes));
	pthread_mutex_unlock(&mh->lock);
}

/* The warm pool as the sandbox service last saw it (its maintenance
 * thread refreshes that from the database). */
static void
read_pool(struct scrape *mh, struct metrics_gauges *g)
{
	static const char *const sizes[] = { "small", "medium", "large" };
	json_t *cap, *ready;

	if (mh->app->sbx == NULL)
		return;
	cap = sbx_capacity(mh->app->sbx);
	ready = json_object_get(cap, "warm_pool_ready");
	for (int i = 0; i < 3; i++) {
		g->pool_ready[i] = json_integer_value(json_object_get(ready, sizes[i]));
		g->pool_target[i] = mh->app->cfg.warm_pool[i];
	}
	g->have_pool = 1;
	json_decref(cap);
}

/* This process's teardowns after a destroy's answer. */
static void
read_teardowns(struct scrape *mh, struct metrics_gauges *g)
{
	if (mh->app->sbx == NULL)
		return;
	g->teardowns = sbx_teardowns(mh->app->sbx);
	g->have_teardowns = 1;
}

static void
scrape(struct http_req *req, void *ctx)
{
	struct scrape *mh = ctx;
	struct metrics_gauges g;
	size_t len;
	char *text;

	memset(&g, 0, sizeof(g));
	read_sandboxes(mh, &g);
	read_pool(mh, &g);
	read_teardowns(mh, &g);
	text = metrics_render(&g, &len);
	if (text == NULL) {
		http_reply_error(req, 500, "internal", "out of memory");
		return;
	}
	http_reply_raw(req, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
	free(text);
}

void
scrape_handle(struct http_req *req, void *ctx)
{
	struct scrape *mh = ctx;
	const char *token = mh->app->cfg.metrics_token;

	if (strcmp(http_method(req), "GET") != 0 && strcmp(http_method(req), "HEAD") != 0) {
		http_add_header(req, "Allow", "GET, HEAD");
		http_reply_error(req, 405, "method_not_allowed", "use GET");
		return;
	}
	if (*token && !scrape_token_ok(http_header(req, "Authorization"), token)) {
		http_add_header(req, "WWW-Authenticate", "Bearer realm=\"metrics\"");
		http_reply_error(req, 401, "unauthorized",
		    "/metrics needs 'Authorization: Bearer <AAS_METRICS_TOKEN>'");
		return;
	}
	/* The sandbox count may touch the database: never on an HTTP thread. */
	http_defer(req, scrape, mh, NULL);
}
