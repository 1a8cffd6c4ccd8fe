/* place.c - placement time per create (make bench, bench/fleet.mjs):
 * hosts_reserve in a transaction of its own, as a create runs it after
 * locking its account row, against hosts that each carry `per_host` live
 * sandboxes' reservations. The same statement with 1 host is the baseline.
 *
 *   bench_place DATABASE_URL HOSTS PER_HOST N
 *       Adds HOSTS host rows and PER_HOST warm sandbox rows on each, times
 *       N placements of a small sandbox, prints "place_us <us>" for each,
 *       then removes what it added. The schema must be in place (aasd
 *       migrated the database). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/db.h"
#include "base/num.h"
#include "sandbox/hosts.h"

#define BENCH_HOSTS_MAX 16
#define BENCH_PER_HOST_MAX 200

struct bench {
	char tag[48];
	char lit[BENCH_HOSTS_MAX * 80];
	char chosen[HOSTS_URI_MAX];
};

static double
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int
place_tx(PGconn *c, void *arg, struct err *e)
{
	struct bench *b = arg;
	struct place_need need = { 512, 1 };

	return hosts_reserve(c, b->lit, &need, NULL, b->chosen, sizeof(b->chosen), e) == 1 ? 0 : -1;
}

/* Host rows as a poll leaves them, and their warm sandboxes. */
static int
populate(struct db *db, struct bench *b, long long hosts, long long per_host, struct err *e)
{
	size_t len = 0;

	len += (size_t)snprintf(b->lit, sizeof(b->lit), "{");
	for (long long h = 0; h < hosts; h++) {
		char uri[96], n[24];
		const char *p[2] = { uri, n };

		snprintf(uri, sizeof(uri), "test:///%s-%lld", b->tag, h);
		snprintf(n, sizeof(n), "%lld", per_host);
		len += (size_t)snprintf(b->lit + len, sizeof(b->lit) - len, "%s\"%s\"",
		    h ? "," : "", uri);
		if (db_exec(db,
			"INSERT INTO hosts(uri, name, memory_mib, vcpus, free_memory_mib, cpu_busy,"
			" seen_at, memory_overcommit) VALUES ($1, $1, 262144, 64, 131072, 0.2, now(), 4)",
			1, p, NULL, e) < 0 ||
		    db_exec(db,
			"INSERT INTO sandboxes(id, in_pool, size, host_uri, domain_name, state,"
			" timeout_minutes, reserved_memory_mib, reserved_vcpus)"
			" SELECT 'sbx-' || substr(md5($1 || '/' || i), 1, 16), true, 'small', $1,"
			" 'aas-bench-' || md5($1 || '/' || i), 'running', 60, 512, 1"
			" FROM generate_series(1, $2::int) i",
			2, p, NULL, e) < 0)
			return -1;
	}
	snprintf(b->lit + len, sizeof(b->lit) - len, "}");
	return 0;
}

static void
depopulate(struct db *db, struct bench *b)
{
	char like[64];
	const char *p[1] = { like };
	struct err e;

	snprintf(like, sizeof(like), "test:///%s-%%", b->tag);
	err_clear(&e);
	err_ignore(db_exec(db, "DELETE FROM sandboxes WHERE host_uri LIKE $1", 1, p, NULL, &e));
	err_ignore(db_exec(db, "DELETE FROM hosts WHERE uri LIKE $1", 1, p, NULL, &e));
}

int
main(int argc, char **argv)
{
	long long hosts, per_host, n;
	struct bench b;
	struct db *db;
	struct err e;
	int rc = 1;

	if (argc != 5 || num_parse_ll(argv[2], &hosts) < 0 || hosts < 1 ||
	    hosts > BENCH_HOSTS_MAX || num_parse_ll(argv[3], &per_host) < 0 || per_host < 0 ||
	    per_host > BENCH_PER_HOST_MAX || num_parse_ll(argv[4], &n) < 0 || n < 1) {
		fprintf(stderr, "usage: bench_place DATABASE_URL HOSTS(1-%d) PER_HOST(0-%d) N\n",
		    BENCH_HOSTS_MAX, BENCH_PER_HOST_MAX);
		return 2;
	}
	err_clear(&e);
	if ((db = db_new(argv[1], 1, &e)) == NULL) {
		fprintf(stderr, "bench_place: %s\n", e.msg);
		return 1;
	}
	memset(&b, 0, sizeof(b));
	snprintf(b.tag, sizeof(b.tag), "bench-place-%d-%lld", (int)getpid(), hosts);
	if (populate(db, &b, hosts, per_host, &e) < 0)
		goto out;
	/* A first round warms the connection and the plan. */
	for (long long i = 0; i < n + 20; i++) {
		double t0 = now_us();

		if (db_tx(db, place_tx, &b, &e) < 0)
			goto out;
		if (i >= 20)
			printf("place_us %.1f\n", now_us() - t0);
	}
	rc = 0;
out:
	if (rc != 0)
		fprintf(stderr, "bench_place: %s\n", e.msg[0] ? e.msg : "no host had room");
	depopulate(db, &b);
	db_free(db);
	return rc;
}
