/* db.c - connection pool over libpq. */
#include "base/db.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"

#define DB_MAX_POOL 128
#define DB_ACQUIRE_TIMEOUT_S 5

struct db_slot {
	PGconn *conn;
	int busy;
};

struct db {
	char *url;
	int size;
	pthread_mutex_t lock;
	pthread_cond_t freed;
	struct db_slot slots[DB_MAX_POOL];
};

/* Server notices (e.g. "already exists, skipping") are not errors. */
static void
db_notice(void *arg, const char *message)
{
	(void)arg;
	log_debug("db notice: %.*s", (int)strcspn(message, "\n"), message);
}

PGconn *
db_connect_raw(const char *url)
{
	/* Bounded connect and statement times: a request never waits on a
	 * stuck database for longer than these. */
	const char *keys[] = { "dbname", "connect_timeout", "options",
	    "application_name", NULL };
	const char *vals[] = { url, "3", "-c statement_timeout=15000",
	    "aasd", NULL };

	PGconn *c = PQconnectdbParams(keys, vals, 1);

	if (c != NULL)
		PQsetNoticeProcessor(c, db_notice, NULL);
	return c;
}

struct db *
db_new(const char *url, int size, struct err *e)
{
	struct db *db = NULL;

	if (size < 1 || size > DB_MAX_POOL) {
		err_set(e, ERR_INVALID, "database pool size must be 1..%d", DB_MAX_POOL);
		return NULL;
	}
	db = calloc(1, sizeof(*db));
	if (db == NULL)
		goto oom;
	db->url = strdup(url);
	if (db->url == NULL)
		goto oom;
	db->size = size;
	pthread_mutex_init(&db->lock, NULL);
	pthread_cond_init(&db->freed, NULL);
	return db;
oom:
	err_set(e, ERR_INTERNAL, "out of memory");
	free(db);
	return NULL;
}

void
db_free(struct db *db)
{
	if (db == NULL)
		return;
	for (int i = 0; i < db->size; i++)
		if (db->slots[i].conn)
			PQfinish(db->slots[i].conn);
	pthread_mutex_destroy(&db->lock);
	pthread_cond_destroy(&db->freed);
	free(db->url);
	free(db);
}

static struct db_slot *
db_acquire(struct db *db, struct err *e)
{
	struct timespec deadline;
	struct db_slot *slot = NULL;

	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += DB_ACQUIRE_TIMEOUT_S;
	pthread_mutex_lock(&db->lock);
	for (;;) {
		for (int i = 0; i < db->size; i++) {
			if (!db->slots[i].busy) {
				slot = &db->slots[i];
				slot->busy = 1;
				break;
			}
		}
		if (slot)
			break;
		if (pthread_cond_timedwait(&db->freed, &db->lock, &deadline) == ETIMEDOUT) {
			pthread_mutex_unlock(&db->lock);
			err_set(e, ERR_UNAVAILABLE, "database busy: no free connection");
			return NULL;
		}
	}
	pthread_mutex_unlock(&db->lock);

	if (slot->conn == NULL)
		slot->conn = db_connect_raw(db->url);
	else if (PQstatus(slot->conn) != CONNECTION_OK)
		PQreset(slot->conn);
	if (PQstatus(slot->conn) != CONNECTION_OK) {
		log_warn("db: connect failed: %s", PQerrorMessage(slot->conn));
		err_set(e, ERR_UNAVAILABLE, "database unavailable");
		pthread_mutex_lock(&db->lock);
		slot->busy = 0;
		pthread_cond_signal(&db->freed);
		pthread_mutex_unlock(&db->lock);
		return NULL;
	}
	return slot;
}

static void
db_release(struct db *db, struct db_slot *slot)
{
	pthread_mutex_lock(&db->lock);
	slot->busy = 0;
	pthread_cond_signal(&db->freed);
	pthread_mutex_unlock(&db->lock);
}

static void
map_result_error(PGconn *c, PGresult *r, struct err *e)
{
	const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;

	if (PQstatus(c) != CONNECTION_OK) {
		err_set(e, ERR_UNAVAILABLE, "database connection lost");
		return;
	}
	if (state && strcmp(state, "23505") == 0) {
		err_set(e, ERR_CONFLICT, "already exists");
		return;
	}
	if (state && (strcmp(state, "22P02") == 0 || strcmp(state, "23514") == 0)) {
		err_set(e, ERR_INVALID, "invalid value");
		return;
	}
	if (state && strcmp(state, "57014") == 0) {
		err_set(e, ERR_TIMEOUT, "database statement timed out");
		return;
	}
	if (state && strncmp(state, "08", 2) == 0) {
		err_set(e, ERR_UNAVAILABLE, "database connection lost");
		return;
	}
	log_error("db: %s", r ? PQresultErrorMessage(r) : PQerrorMessage(c));
	err_set(e, ERR_INTERNAL, "database error");
}

PGresult *
db_conn_query(PGconn *c, const char *sql, int nparams,
    const char *const *params, struct err *e)
{
	PGresult *r = PQexecParams(c, sql, nparams, NULL, params, NULL, NULL, 0);
	ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;

	if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK)
		return r;
	map_result_error(c, r, e);
	PQclear(r);
	return NULL;
}

PGresult *
db_query(struct db *db, const char *sql, int nparams,
    const char *const *params, struct err *e)
{
	PGresult *r = NULL;

	for (int attempt = 0; attempt < 2; attempt++) {
		struct err local;
		struct db_slot *slot;

		err_clear(&local);
		slot = db_acquire(db, &local);
		if (slot == NULL) {
			err_set(e, local.kind, "%s", local.msg);
			return NULL;
		}
		r = db_conn_query(slot->conn, sql, nparams, params, &local);
		/* A broken connection is reset on next acquire; retry once. */
		int broken = r == NULL && PQstatus(slot->conn) != CONNECTION_OK;
		db_release(db, slot);
		if (r != NULL)
			return r;
		if (!broken || attempt == 1) {
			err_set(e, local.kind, "%s", local.msg);
			return NULL;
		}
		log_warn("db: connection broken, retrying once");
	}
	return NULL;
}

int
db_tx(struct db *db, db_tx_fn fn, void *arg, struct err *e)
{
	for (int attempt = 0; attempt < 2; attempt++) {
		struct err local;
		struct db_slot *slot;
		PGresult *r;
		int rc = -1;

		err_clear(&local);
		slot = db_acquire(db, &local);
		if (slot == NULL) {
			err_set(e, local.kind, "%s", local.msg);
			return -1;
		}
		r = db_conn_query(slot->conn, "BEGIN", 0, NULL, &local);
		if (r == NULL) {
			int broken = PQstatus(slot->conn) != CONNECTION_OK;
			db_release(db, slot);
			if (broken && attempt == 0)
				continue;
			err_set(e, local.kind, "%s", local.msg);
			return -1;
		}
		PQclear(r);
		if (fn(slot->conn, arg, &local) == 0) {
			r = db_conn_query(slot->conn, "COMMIT", 0, NULL, &local);
			if (r != NULL) {
				PQclear(r);
				rc = 0;
			}
		}
		if (rc != 0 && PQstatus(slot->conn) == CONNECTION_OK) {
			PGresult *rb = PQexec(slot->conn, "ROLLBACK");
			PQclear(rb);
		}
		db_release(db, slot);
		if (rc != 0)
			err_set(e, local.kind, "%s", local.msg);
		return rc;
	}
	return -1;
}

int
db_ping(struct db *db, struct err *e)
{
	PGresult *r = db_query(db, "SELECT 1", 0, NULL, e);

	if (r == NULL)
		return -1;
	PQclear(r);
	return 0;
}

long
db_affected(PGresult *r)
{
	const char *s = PQcmdTuples(r);
	char *end;
	long n;

	if (s == NULL || *s == '\0')
		return 0;
	n = strtol(s, &end, 10);
	return *end == '\0' ? n : 0;
}
