/* hosts.c - the hosts table: registration, settings, polls, admission. */
#include "sandbox/hosts.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "base/fmt.h"
#include "base/num.h"
#include "sandbox/catalog.h"
#include "sandbox/store.h"

#define HOSTS_MAX_ROWS 64     /* hosts one placement or aggregate reads */
#define HOSTS_RATIO_SCALE 1e6 /* ratios travel as integers in millionths */
#define HOSTS_ERROR_MAX 200   /* bytes of a poll's error kept */

static int
uri_ok(const char *uri, struct err *e)
{
	if (uri == NULL || uri[0] == '\0' || strlen(uri) >= HOSTS_URI_MAX ||
	    strchr(uri, ',') != NULL) {
		err_set_field(e, "uri", "uri: a libvirt URI of 1 to %d bytes, without commas",
		    HOSTS_URI_MAX - 1);
		return -1;
	}
	return 0;
}

int
hosts_register(struct db *db, const char *uri, struct err *e)
{
	const char *p[1] = { uri };

	if (uri_ok(uri, e) < 0)
		return -1;
	return db_exec(db, "INSERT INTO hosts(name, uri) VALUES ($1, $1) ON CONFLICT DO NOTHING", 1,
	    p, NULL, e);
}

/* A ratio option as text for SQL (NULL: unchanged); -1 when out of range. */
static int
ratio_text(double v, double max, const char *field, char *out, size_t n, const char **param,
    struct err *e)
{
	*param = NULL;
	if (v == 0)
		return 0;
	if (!(v > 0 && v <= max)) {
		err_set_field(e, field, "%s: a ratio above 0 and at most %g", field, max);
		return -1;
	}
	if (fmt_err(e, field, out, n, "%.6f", v) < 0)
		return -1;
	*param = out;
	return 0;
}

static json_t *
one_host_json(struct db *db, const char *uri, struct err *e)
{
	json_t *all = hosts_list_json(db, e), *v = NULL;
	size_t i;
	json_t *h;

	if (all == NULL)
		return NULL;
	json_array_foreach(all, i, h) {
		if (strcmp(json_string_value(json_object_get(h, "uri")), uri) == 0) {
			v = json_incref(h);
			break;
		}
	}
	json_decref(all);
	if (v == NULL)
		err_set(e, ERR_NOT_FOUND, "no host %s", uri);
	return v;
}

/* A private address is an IPv4 literal: QEMU's forwards listen on it
 * and the gateway connects to it, with no name to resolve. */
static int
address_ok(const char *a)
{
	struct in_addr in;

	return strlen(a) < INET_ADDRSTRLEN && inet_pton(AF_INET, a, &in) == 1;
}

static int
rule_hash_ok(const char *h)
{
	return strlen(h) == 64 && strspn(h, "0123456789abcdef") == 64;
}

json_t *
hosts_add(struct db *db, const char *uri, const struct hosts_options *opt, struct err *e)
{
	char mo[32], co[32];
	const char *p[7] = { uri, opt->name, NULL, NULL, opt->preview_address, opt->isolation_rule,
		opt->storage };

	if (uri_ok(uri, e) < 0 ||
	    ratio_text(opt->memory_overcommit, 16, "memory_overcommit", mo, sizeof(mo), &p[2], e) <
		0 ||
	    ratio_text(opt->cpu_overcommit, 64, "cpu_overcommit", co, sizeof(co), &p[3], e) < 0)
		return NULL;
	if (opt->preview_address && !address_ok(opt->preview_address)) {
		err_set_field(e, "preview_address",
		    "preview_address: an IPv4 address of the host that every aasd reaches"
		    " (its private address), such as 10.0.0.12");
		return NULL;
	}
	if (opt->isolation_rule && !rule_hash_ok(opt->isolation_rule)) {
		err_set_field(e, "isolation_rule",
		    "isolation_rule: the SHA-256 (64 hex digits) of the rule installed on the host,"
		    " as `aasd --netguard-rules-hash` prints it");
		return NULL;
	}
	if (opt->storage && strcmp(opt->storage, "shared") != 0 &&
	    strcmp(opt->storage, "pool") != 0) {
		err_set_field(e, "storage",
		    "storage: shared (the host sees aasd's files at the same paths) or pool (its own"
		    " libvirt storage pool)");
		return NULL;
	}
	if (db_exec(db,
		"INSERT INTO hosts AS h(uri, name, memory_overcommit, cpu_overcommit,"
		" preview_address, isolation_rule, storage, shared) VALUES ($1, coalesce($2, $1),"
		" coalesce($3::float8, 1), coalesce($4::float8, 16), $5, $6, $7, true)"
		" ON CONFLICT (uri) DO UPDATE SET name = coalesce($2, h.name), shared = true,"
		" memory_overcommit = coalesce($3::float8, h.memory_overcommit),"
		" cpu_overcommit = coalesce($4::float8, h.cpu_overcommit),"
		" preview_address = coalesce($5, h.preview_address),"
		" isolation_rule = coalesce($6, h.isolation_rule),"
		" storage = coalesce($7, h.storage)",
		7, p, NULL, e) < 0) {
		/* The statement's only checks are the name's. */
		if (e->kind == ERR_CONFLICT) {
			err_clear(e);
			err_set_field(e, "name", "name: another host has that name");
		} else if (e->kind == ERR_INVALID) {
			err_clear(e);
			err_set_field(e, "name",
			    "name: 1 to 255 printable characters, without spaces, quotes or"
			    " backslashes");
		}
		return NULL;
	}
	return one_host_json(db, uri, e);
}

/* The JSON text of the first column of a db_query_row result, which it
 * clears; NULL when `r` is NULL (its error is in `e`). */
static json_t *
json_of_row(PGresult *r, struct err *e)
{
	json_error_t je;
	json_t *v = NULL;
	const char *text;

	if (r == NULL)
		return NULL;
	text = db_get_text(r, 0, 0);
	if (text == NULL || (v = json_loads(text, 0, &je)) == NULL)
		err_set(e, ERR_INTERNAL, "hosts: unreadable answer");
	PQclear(r);
	return v;
}

json_t *
hosts_list_json(struct db *db, struct err *e)
{
	PGresult *r = db_query_row(db,
	    "SELECT coalesce(json_agg(json_build_object('name', h.name, 'uri', h.uri,"
	    " 'state', h.state, 'state_since', h.state_since, 'draining', h.draining,"
	    " 'evacuating', h.evacuating,"
	    " 'shared', h.shared,"
	    " 'memory_overcommit', h.memory_overcommit, 'cpu_overcommit', h.cpu_overcommit,"
	    " 'preview_address', h.preview_address, 'isolation_rule', h.isolation_rule,"
	    " 'storage', h.storage,"
	    " 'capacity', json_build_object('memory_mib', h.memory_mib, 'vcpus', h.vcpus),"
	    " 'reserved', json_build_object('memory_mib', coalesce(r.mem, 0),"
	    "  'vcpus', coalesce(r.cpu, 0)),"
	    " 'live', json_build_object('free_memory_mib', h.free_memory_mib,"
	    "  'cpu_busy', round(h.cpu_busy::numeric, 3), 'disk_free_mib', h.disk_free_mib,"
	    "  'domains', h.domains),"
	    " 'sandboxes', coalesce(r.n, 0), 'seen_at', h.seen_at, 'last_error', h.last_error)"
	    " ORDER BY h.id), '[]')::text"
	    " FROM hosts h LEFT JOIN (SELECT host_uri, sum(reserved_memory_mib) AS mem,"
	    "  sum(reserved_vcpus) AS cpu, count(*) FILTER (WHERE NOT in_pool) AS n"
	    "  FROM sandboxes WHERE state IN " STORE_VM_STATES
	    "  GROUP BY host_uri) r ON r.host_uri = h.uri",
	    0, NULL, e, ERR_NOT_FOUND, NULL, "no such host");

	return json_of_row(r, e);
}

static int
host_update(struct db *db, const char *sql, const char *host, long *n, struct err *e)
{
	const char *p[1] = { host };

	if (host == NULL || host[0] == '\0' || strlen(host) >= HOSTS_URI_MAX) {
		err_set_field(e, "host", "host: a host's name or URI");
		return -1;
	}
	if (db_exec(db, sql, 1, p, n, e) < 0)
		return -1;
	if (*n == 0) {
		err_set_at(e, ERR_NOT_FOUND, "host", "host: no host %s", host);
		return -1;
	}
	return 0;
}

int
hosts_set_draining(struct db *db, const char *host, int draining, struct err *e)
{
	long n = 0;

	return host_update(db,
	    draining ? "UPDATE hosts SET draining = true WHERE name = $1 OR uri = $1" :
		       "UPDATE hosts SET draining = false, evacuating = false"
		       " WHERE name = $1 OR uri = $1",
	    host, &n, e);
}

int
hosts_remove(struct db *db, const char *host, struct err *e)
{
	long n = 0;
	const char *p[1] = { host };
	long long live = 0;

	if (db_take_ll(db_query(db,
			   "SELECT count(s.id) FROM hosts h JOIN sandboxes s ON s.host_uri = h.uri"
			   " WHERE (h.name = $1 OR h.uri = $1) AND s.state IN " STORE_VM_STATES,
			   1, p, e),
		&live, e) < 0)
		return -1;
	if (live > 0) {
		err_set_at(e, ERR_CONFLICT, "host",
		    "host: %lld sandboxes still live there; drain it and wait, or evacuate it",
		    live);
		return -1;
	}
	/* A create reserving there meanwhile makes its row first: the
	 * delete then finds it live and removes nothing. */
	return host_update(db,
	    "DELETE FROM hosts h WHERE (name = $1 OR uri = $1) AND NOT EXISTS"
	    " (SELECT 1 FROM sandboxes s WHERE s.host_uri = h.uri"
	    "  AND s.state IN " STORE_VM_STATES ")",
	    host, &n, e);
}

struct evac_start {
	const char *host;
	long n;
};

static int
evacuate_tx(PGconn *c, void *arg, struct err *e)
{
	struct evac_start *a = arg;
	const char *p[1] = { a->host };

	if (db_conn_exec(c,
		"UPDATE hosts SET draining = true, evacuating = true, evacuating_since = now()"
		" WHERE name = $1 OR uri = $1",
		1, p, &a->n, e) < 0)
		return -1;
	/* Those refused before are tried again. */
	return db_conn_exec(c,
	    "UPDATE sandboxes SET move_error = NULL WHERE move_error IS NOT NULL"
	    " AND state = 'running' AND host_uri = (SELECT uri FROM hosts WHERE name = $1 OR uri = $1"
	    " LIMIT 1)",
	    1, p, NULL, e);
}

int
hosts_storage(struct db *db, const char *uri, struct err *e)
{
	const char *p[1] = { uri };
	PGresult *r = db_query(db, "SELECT coalesce(storage, '') FROM hosts WHERE uri = $1", 1, p,
	    e);
	const char *v;
	int rc = -1;

	if (r == NULL)
		return -2;
	v = PQntuples(r) == 1 ? db_get_text(r, 0, 0) : "";
	if (v && strcmp(v, "pool") == 0)
		rc = 1;
	else if (v && strcmp(v, "shared") == 0)
		rc = 0;
	PQclear(r);
	return rc;
}

int
hosts_count_without_rule(PGconn *c, const char *uris, const char *rule, struct err *e)
{
	const char *p[2] = { uris, rule };
	PGresult *r = db_conn_query(c,
	    "SELECT count(*) FROM hosts WHERE uri = ANY($1::text[]) AND NOT draining"
	    " AND state <> 'down' AND memory_mib IS NOT NULL AND isolation_rule IS DISTINCT FROM $2",
	    2, p, e);
	long long n = -1;

	if (r == NULL)
		return -1;
	if (db_get_ll(r, 0, 0, &n, e) < 0)
		n = -1;
	PQclear(r);
	return n > INT_MAX ? INT_MAX : (int)n;
}

int
hosts_set_isolation(struct db *db, const char *uri, const char *rule, struct err *e)
{
	const char *p[2] = { uri, rule };

	return db_exec(db,
	    "UPDATE hosts SET isolation_rule = $2 WHERE uri = $1"
	    " AND isolation_rule IS DISTINCT FROM $2",
	    2, p, NULL, e);
}

int
hosts_evacuate(struct db *db, const char *host, struct err *e)
{
	struct evac_start a = { host, 0 };

	if (host == NULL || host[0] == '\0' || strlen(host) >= HOSTS_URI_MAX) {
		err_set_field(e, "host", "host: a host's name or URI");
		return -1;
	}
	if (db_tx(db, evacuate_tx, &a, e) < 0)
		return -1;
	if (a.n == 0) {
		err_set_at(e, ERR_NOT_FOUND, "host", "host: no host %s", host);
		return -1;
	}
	return 0;
}

json_t *
hosts_evacuation_json(struct db *db, const char *host, struct err *e)
{
	const char *p[1] = { host };
	PGresult *r = db_query_row(db,
	    "SELECT json_build_object('host', h.name, 'evacuating', h.evacuating,"
	    " 'waiting', count(s.id) FILTER (WHERE s.moving_to IS NULL AND s.move_error IS NULL),"
	    " 'moving', count(s.id) FILTER (WHERE s.moving_to IS NOT NULL),"
	    " 'not_moved', coalesce(json_agg(json_build_object('sandbox_id', s.id,"
	    "  'error', s.move_error) ORDER BY s.id) FILTER (WHERE s.move_error IS NOT NULL), '[]'),"
	    " 'moved', (SELECT count(*) FROM sandboxes m WHERE m.moved_from = h.uri"
	    "  AND m.moved_at >= h.evacuating_since),"
	    " 'longest_pause_ms', (SELECT max(m.move_pause_ms) FROM sandboxes m"
	    "  WHERE m.moved_from = h.uri AND m.moved_at >= h.evacuating_since))::text"
	    " FROM hosts h LEFT JOIN sandboxes s ON s.host_uri = h.uri"
	    "  AND s.state IN " STORE_VM_STATES
	    " WHERE h.name = $1 OR h.uri = $1 GROUP BY h.id LIMIT 1",
	    1, p, e, ERR_NOT_FOUND, "host", "host: no host %s", host);

	return json_of_row(r, e);
}

int
hosts_address(struct db *db, const char *uri, char *out, size_t n, struct err *e)
{
	const char *p[1] = { uri };
	PGresult *r = db_query(db, "SELECT coalesce(preview_address, '') FROM hosts WHERE uri = $1",
	    1, p, e);
	int rc = -1;

	if (r == NULL)
		return -1;
	if (PQntuples(r) == 0) {
		out[0] = '\0';
		rc = 0;
	} else if (db_get_str(r, 0, 0, out, n, e) == 0) {
		rc = 0;
	}
	PQclear(r);
	return rc;
}

char *
hosts_shared_uris(struct db *db, struct err *e)
{
	PGresult *r = db_query(db, "SELECT uri FROM hosts WHERE shared ORDER BY id", 0, NULL, e);
	size_t cap = 1, len = 0;
	char *out;

	if (r == NULL)
		return NULL;
	for (int i = 0; i < PQntuples(r); i++)
		cap += strlen(PQgetvalue(r, i, 0)) + 1;
	out = malloc(cap);
	if (out == NULL) {
		PQclear(r);
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	out[0] = '\0';
	for (int i = 0; i < PQntuples(r) && i < HOSTS_MAX_ROWS; i++) {
		const char *u = PQgetvalue(r, i, 0);
		if (orch_uri_private(u))
			continue;
		if (fmt_err(e, "host list", out + len, cap - len, "%s%s", len ? "," : "", u) < 0) {
			free(out);
			out = NULL;
			break;
		}
		len += strlen(out + len);
	}
	PQclear(r);
	return out;
}

int
hosts_report(struct db *db, const char *uri, const struct orch_host_stats *st, const char *error,
    int down_after_s, struct err *e)
{
	char mem[24], cpus[16], fm[24], busy[24], disk[24], doms[16], down[16],
	    why[HOSTS_ERROR_MAX];

	/* Only an answer brings a host that is down back up. */
	if (st == NULL) {
		const char *p[3] = { uri, why, down };
		fmt_cut(why, sizeof(why), "%s", error ? error : "unreachable");
		if (fmt_err(e, "down time", down, sizeof(down), "%d", down_after_s) < 0)
			return -1;
		return db_exec(db,
		    "UPDATE hosts h SET last_error = $2, state = v.s,"
		    " state_since = CASE WHEN h.state <> v.s THEN now() ELSE h.state_since END"
		    " FROM (SELECT id, CASE WHEN state = 'down' THEN 'down'"
		    "  WHEN $3::int >= 0 AND (seen_at IS NULL"
		    "  OR seen_at < now() - make_interval(secs => $3::int)) THEN 'down'"
		    "  ELSE 'degraded' END AS s FROM hosts WHERE uri = $1) v WHERE h.id = v.id",
		    3, p, NULL, e);
	}
	const char *p[7] = { uri, mem, cpus, st->free_memory_mib >= 0 ? fm : NULL,
		st->cpu_busy >= 0 ? busy : NULL, st->disk_free_mib >= 0 ? disk : NULL, doms };
	if (fmt_err(e, "memory", mem, sizeof(mem), "%lld", st->memory_mib) < 0 ||
	    fmt_err(e, "vcpus", cpus, sizeof(cpus), "%d", st->vcpus) < 0 ||
	    fmt_err(e, "free memory", fm, sizeof(fm), "%lld", st->free_memory_mib) < 0 ||
	    fmt_err(e, "cpu busy", busy, sizeof(busy), "%.4f", st->cpu_busy) < 0 ||
	    fmt_err(e, "free disk", disk, sizeof(disk), "%lld", st->disk_free_mib) < 0 ||
	    fmt_err(e, "domains", doms, sizeof(doms), "%d", st->domains) < 0)
		return -1;
	return db_exec(db,
	    "UPDATE hosts SET memory_mib = $2::bigint, vcpus = $3::int,"
	    " free_memory_mib = $4::bigint, cpu_busy = coalesce($5::float8, cpu_busy),"
	    " disk_free_mib = $6::bigint, domains = $7::int, seen_at = now(), last_error = NULL,"
	    " state_since = CASE WHEN state <> 'up' THEN now() ELSE state_since END, state = 'up'"
	    " WHERE uri = $1",
	    7, p, NULL, e);
}

/* ---- admission ---- */

/* A host with its reservations, as read_place_host reads it. */
#define PLACE_COLUMNS                                                                        \
	"SELECT h.uri, h.memory_mib, h.vcpus, round(h.memory_overcommit * 1000000)::bigint," \
	" round(h.cpu_overcommit * 1000000)::bigint, h.free_memory_mib,"                     \
	" round(h.cpu_busy * 1000000)::bigint, h.state = 'degraded',"                        \
	" coalesce(sum(s.reserved_memory_mib), 0), coalesce(sum(s.reserved_vcpus), 0)"       \
	" FROM hosts h LEFT JOIN sandboxes s ON (s.host_uri = h.uri OR s.moving_to = h.uri)" \
	"  AND s.state IN " STORE_VM_STATES

/* Its columns, in order. */
enum { C_URI, C_MEM, C_CPUS, C_MOC, C_COC, C_FREE, C_BUSY, C_DEGRADED, C_RES_MEM, C_RES_CPU };

static int
read_place_host(const PGresult *r, int i, struct place_host *h, struct err *e)
{
	long long moc, coc, busy, mem, rmem, rcpu;
	int cpus;

	memset(h, 0, sizeof(*h));
	if (db_get_ll(r, i, C_MEM, &mem, e) < 0 || db_get_int(r, i, C_CPUS, &cpus, e) < 0 ||
	    db_get_ll(r, i, C_MOC, &moc, e) < 0 || db_get_ll(r, i, C_COC, &coc, e) < 0 ||
	    db_get_ll_or(r, i, C_FREE, -1, &h->free_memory_mib, e) < 0 ||
	    db_get_ll_or(r, i, C_BUSY, -1, &busy, e) < 0 ||
	    db_get_bool(r, i, C_DEGRADED, &h->degraded, e) < 0 ||
	    db_get_ll(r, i, C_RES_MEM, &rmem, e) < 0 || db_get_ll(r, i, C_RES_CPU, &rcpu, e) < 0)
		return -1;
	h->memory_mib = mem;
	h->vcpus = cpus;
	h->memory_overcommit = (double)moc / HOSTS_RATIO_SCALE;
	h->cpu_overcommit = (double)coc / HOSTS_RATIO_SCALE;
	h->cpu_busy = busy < 0 ? -1 : (double)busy / HOSTS_RATIO_SCALE;
	h->reserved_memory_mib = rmem;
	h->reserved_vcpus = rcpu;
	return 0;
}

/* $2: the isolation rule's hash when the VM has a network device, else
 * NULL (any host). */
#define ELIGIBLE_ISOLATION " AND ($2::text IS NULL OR isolation_rule = $2)"
#define ELIGIBLE_ISOLATION_H " AND ($2::text IS NULL OR h.isolation_rule = $2)"

/* The eligible hosts among `uris`, locked, then with their reservations
 * read by a statement of its own, so it sees every create committed
 * before the locks were granted. */
static PGresult *
eligible_hosts(PGconn *c, const char *uris, const char *rule, struct err *e)
{
	const char *p[2] = { uris, rule };
	PGresult *r;

	r = db_conn_query(c,
	    "SELECT id FROM hosts WHERE uri = ANY($1::text[]) AND NOT draining"
	    " AND state <> 'down' AND memory_mib IS NOT NULL" ELIGIBLE_ISOLATION
	    " ORDER BY id FOR UPDATE",
	    2, p, e);
	if (r == NULL)
		return NULL;
	PQclear(r);
	return db_conn_query(c,
	    PLACE_COLUMNS " WHERE h.uri = ANY($1::text[]) AND NOT h.draining AND h.state <> 'down'"
			  "  AND h.memory_mib IS NOT NULL" ELIGIBLE_ISOLATION_H
			  " GROUP BY h.id ORDER BY h.id LIMIT 64",
	    2, p, e);
}

int
hosts_reserve(PGconn *c, const char *uris, const struct place_need *need,
    const char *isolation_rule, char *uri, size_t n, struct err *e)
{
	struct place_host hs[HOSTS_MAX_ROWS];
	PGresult *r = eligible_hosts(c, uris, isolation_rule, e);
	int rows, best, rc = -1;

	if (r == NULL)
		return -1;
	rows = PQntuples(r);
	for (int i = 0; i < rows; i++)
		if (read_place_host(r, i, &hs[i], e) < 0)
			goto out;
	best = place_choose(hs, (size_t)rows, need);
	if (best < 0) {
		rc = 0;
		goto out;
	}
	if (db_get_str(r, best, C_URI, uri, n, e) < 0)
		goto out;
	rc = 1;
out:
	PQclear(r);
	return rc;
}

int
hosts_fits(struct db *db, const char *uri, const struct place_need *need, struct err *e)
{
	const char *p[1] = { uri };
	PGresult *r = db_query(db,
	    PLACE_COLUMNS " WHERE h.uri = $1 AND NOT h.draining AND h.state <> 'down'"
			  " AND h.memory_mib IS NOT NULL GROUP BY h.id",
	    1, p, e);
	struct place_host h;
	int rc = -1;

	if (r == NULL)
		return -1;
	if (PQntuples(r) != 1)
		rc = 0;
	else if (read_place_host(r, 0, &h, e) == 0)
		rc = place_fits(&h, need);
	PQclear(r);
	return rc;
}

json_t *
hosts_capacity_json(struct db *db, const char *uris, struct err *e)
{
	const char *p[1] = { uris };
	PGresult *r = db_query(db,
	    PLACE_COLUMNS " WHERE h.uri = ANY($1::text[]) AND NOT h.draining AND h.state <> 'down'"
			  " AND h.memory_mib IS NOT NULL GROUP BY h.id ORDER BY h.id LIMIT 64",
	    1, p, e);
	long long vcpus = 0, mem = 0, rmem = 0, rcpu = 0, fits[8] = { 0 };
	json_t *fit, *out = NULL;
	int rows;

	if (r == NULL)
		return NULL;
	rows = PQntuples(r);
	for (int i = 0; i < rows; i++) {
		struct place_host h;
		if (read_place_host(r, i, &h, e) < 0)
			goto out;
		vcpus += h.vcpus;
		mem += h.memory_mib;
		rmem += h.reserved_memory_mib;
		rcpu += h.reserved_vcpus;
		for (size_t k = 0; k < cat_count() && k < 8; k++) {
			const struct cat_size *sz = cat_at(k);
			struct place_need need = { sz->memory_mib, sz->vcpus };
			struct place_host t = h;
			/* Bounded: the reservation limits are finite. */
			for (int m = 0; m < 100000 && place_fits(&t, &need); m++) {
				t.reserved_memory_mib += need.memory_mib;
				t.reserved_vcpus += need.vcpus;
				fits[k]++;
			}
		}
	}
	fit = json_object();
	for (size_t k = 0; k < cat_count() && k < 8; k++)
		json_object_set_new(fit, cat_at(k)->name, json_integer(fits[k]));
	out = json_pack("{s:i, s:I, s:I, s:I, s:I, s:o}", "hosts_available", rows, "vcpus",
	    (json_int_t)vcpus, "memory_mib", (json_int_t)mem, "reserved_vcpus", (json_int_t)rcpu,
	    "reserved_memory_mib", (json_int_t)rmem, "sandboxes_that_fit_now", fit);
out:
	PQclear(r);
	return out;
}
