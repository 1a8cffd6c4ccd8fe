/* reaper.c - the expiry loop. */
#include "sandbox/reaper.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/fmt.h"
#include "base/log.h"
#include "sandbox/store.h"

#define REAP_BATCH 50
#define REAP_MAX_SLEEP_MS 30000
#define REAP_RETRY_MS 1000 /* after database trouble: try again soon */

struct reaper {
	struct db *db;
	char hosts[4096]; /* PostgreSQL array literal, under `lock` */
	char instance[64];
	reap_destroy_fn destroy;
	void *ctx;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int poked;
	int stop;
};

/* Claims due sandboxes (expired, or of a disabled account) and ends
 * them; returns how many were claimed. */
static int
reap_due(struct reaper *r)
{
	struct store_due *due;
	size_t n;
	struct err e;
	char hosts[sizeof(r->hosts)];

	err_clear(&e);
	pthread_mutex_lock(&r->lock);
	memcpy(hosts, r->hosts, sizeof(hosts));
	pthread_mutex_unlock(&r->lock);
	if (store_claim_due(r->db, hosts, r->instance, REAP_BATCH, &due, &n, &e) < 0) {
		log_warn("reaper: %s", e.msg);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		log_info("reaper: sandbox %s: %s", due[i].id, due[i].end_reason);
		if (r->destroy(r->ctx, due[i].id, due[i].host) < 0)
			log_warn("reaper: sandbox %s: destroy failed; reconcile retries it",
			    due[i].id);
	}
	free(due);
	return (int)n;
}

/* Milliseconds until the nearest expiry on our hosts (capped). */
static long
next_due_ms(struct reaper *r)
{
	struct err e;
	long long v;
	char hosts[sizeof(r->hosts)];

	err_clear(&e);
	pthread_mutex_lock(&r->lock);
	memcpy(hosts, r->hosts, sizeof(hosts));
	pthread_mutex_unlock(&r->lock);
	/* Nothing runs here: sleep until poked or the cap. */
	if (store_next_expiry_ms(r->db, hosts, REAP_MAX_SLEEP_MS, &v, &e) < 0) {
		log_warn("reaper: %s", e.msg);
		return REAP_RETRY_MS;
	}
	return v < 0 ? 0 : v > REAP_MAX_SLEEP_MS ? REAP_MAX_SLEEP_MS : (long)v;
}

static void *
reap_main(void *arg)
{
	struct reaper *r = arg;

	for (;;) {
		int n = reap_due(r);
		long ms = n >= REAP_BATCH ? 0 : next_due_ms(r);
		struct timespec ts = clock_cond_deadline(ms);

		pthread_mutex_lock(&r->lock);
		while (!r->stop && !r->poked && ms > 0)
			if (pthread_cond_timedwait(&r->cond, &r->lock, &ts) != 0)
				break;
		r->poked = 0;
		int stop = r->stop;
		pthread_mutex_unlock(&r->lock);
		if (stop)
			return NULL;
	}
}

struct reaper *
reap_new(struct db *db, const char *hosts, const char *instance, reap_destroy_fn destroy, void *ctx,
    struct err *e)
{
	struct reaper *r = calloc(1, sizeof(*r));

	if (r == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	if (db_array_literal(hosts, r->hosts, sizeof(r->hosts)) < 0) {
		free(r);
		err_set(e, ERR_INVALID, "reaper: host list too long");
		return NULL;
	}
	if (fmt_err(e, "reaper: instance name", r->instance, sizeof(r->instance), "%s", instance) <
	    0) {
		free(r);
		return NULL;
	}
	r->db = db;
	r->destroy = destroy;
	r->ctx = ctx;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	if (pthread_create(&r->thread, NULL, reap_main, r) != 0) {
		pthread_mutex_destroy(&r->lock);
		pthread_cond_destroy(&r->cond);
		free(r);
		err_set(e, ERR_INTERNAL, "cannot start the reaper");
		return NULL;
	}
	return r;
}

void
reap_free(struct reaper *r)
{
	if (r == NULL)
		return;
	pthread_mutex_lock(&r->lock);
	r->stop = 1;
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
	pthread_join(r->thread, NULL);
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->cond);
	free(r);
}

int
reap_set_hosts(struct reaper *r, const char *hosts, struct err *e)
{
	char lit[sizeof(r->hosts)];

	if (db_array_literal(hosts, lit, sizeof(lit)) < 0) {
		err_set(e, ERR_INVALID, "reaper: host list too long");
		return -1;
	}
	pthread_mutex_lock(&r->lock);
	memcpy(r->hosts, lit, sizeof(lit));
	r->poked = 1;
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
	return 0;
}

void
reap_poke(struct reaper *r)
{
	if (r == NULL)
		return;
	pthread_mutex_lock(&r->lock);
	r->poked = 1;
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
}
