/* migrate.c - schema migrations. Two processes starting at once serialise
 * on a transaction-scoped advisory lock; the second finds nothing to do. */
#include "base/migrate.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "base/fmt.h"
#include "base/log.h"

/* Arbitrary constant shared by every aasd on a database: "aas-migr". */
#define MIGRATE_LOCK_KEY "6161732d6d696772"

struct migrate_ctx {
	const struct embed_file *files;
	size_t n;
	int applied;
};

static int
version_of(const char *name)
{
	int v = 0;

	if (!isdigit((unsigned char)name[0]))
		return -1;
	for (const char *p = name; isdigit((unsigned char)*p); p++) {
		v = v * 10 + (*p - '0');
		if (v > 99999)
			return -1;
	}
	return v;
}

static int
migrate_tx(PGconn *c, void *arg, struct err *e)
{
	struct migrate_ctx *m = arg;
	PGresult *r;

	if (db_conn_exec(c, "SELECT pg_advisory_xact_lock(x'" MIGRATE_LOCK_KEY "'::bigint)", 0,
		NULL, NULL, e) < 0)
		return -1;
	if (db_conn_exec(c,
		"CREATE TABLE IF NOT EXISTS schema_migrations ("
		" version integer PRIMARY KEY,"
		" name text NOT NULL,"
		" applied_at timestamptz NOT NULL DEFAULT now())",
		0, NULL, NULL, e) < 0)
		return -1;

	for (size_t i = 0; i < m->n; i++) {
		char vbuf[16];
		const char *params[2];
		int v = version_of(m->files[i].name);
		long done;

		if (v < 0) {
			err_set(e, ERR_INTERNAL, "migration %s has no version number",
			    m->files[i].name);
			return -1;
		}
		if (fmt_err(e, "migration version", vbuf, sizeof(vbuf), "%d", v) < 0)
			return -1;
		params[0] = vbuf;
		if (db_conn_exec(c, "SELECT 1 FROM schema_migrations WHERE version = $1", 1, params,
			&done, e) < 0)
			return -1;
		if (done > 0)
			continue;
		/* Migration files are fixed text from the repository; they take
		 * no parameters, so the simple-query protocol runs them whole. */
		r = PQexec(c, m->files[i].data);
		if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK) {
			log_error("migrate: %s failed: %s", m->files[i].name,
			    PQresultErrorMessage(r));
			err_set(e, ERR_INTERNAL, "migration %s failed", m->files[i].name);
			PQclear(r);
			return -1;
		}
		PQclear(r);
		params[1] = m->files[i].name;
		if (db_conn_exec(c, "INSERT INTO schema_migrations(version, name) VALUES ($1, $2)",
			2, params, NULL, e) < 0)
			return -1;
		log_info("migrate: applied %s", m->files[i].name);
		m->applied++;
	}
	return 0;
}

int
migrate_apply(struct db *db, const struct embed_file *files, size_t n, int *n_applied,
    struct err *e)
{
	struct migrate_ctx m = { files, n, 0 };

	/* All pending migrations commit together, or none do. */
	if (db_tx(db, migrate_tx, &m, e) < 0)
		return -1;
	if (n_applied)
		*n_applied = m.applied;
	return 0;
}
