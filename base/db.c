/* db.c - connection pool over libpq. */
#include "base/db.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/fmt.h"
#include "base/log.h"
#include "base/num.h"

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
	const char *keys[] = { "dbname", "connect_timeout", "options", "application_name", NULL };
	const char *vals[] = { url, "3", "-c statement_timeout=15000", "aasd", NULL };

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

/* SQLSTATE of the last failed statement on this thread, for db_tx to
 * tell a retryable conflict from a real failure. */
static _Thread_local char last_state[6];

static void
map_result_error(PGconn *c, PGresult *r, struct err *e)
{
	const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;

	if (fmt_buf(last_state, sizeof(last_state), "%s", state ? state : "") < 0)
		last_state[0] = '\0'; /* not a state db_tx retries on */
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
db_conn_query(PGconn *c, const char *sql, int nparams, const char *const *params, struct err *e)
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
db_query(struct db *db, const char *sql, int nparams, const char *const *params, struct err *e)
{
	PGresult *r = NULL;

	for (int attempt = 0; attempt < 2; attempt++) {
		struct err local;
		struct db_slot *slot;

		err_clear(&local);
		slot = db_acquire(db, &local);
		if (slot == NULL) {
			err_set_at(e, local.kind, local.field, "%s", local.msg);
			return NULL;
		}
		r = db_conn_query(slot->conn, sql, nparams, params, &local);
		/* A broken connection is reset on next acquire; retry once. */
		int broken = r == NULL && PQstatus(slot->conn) != CONNECTION_OK;
		db_release(db, slot);
		if (r != NULL)
			return r;
		if (!broken || attempt == 1) {
			err_set_at(e, local.kind, local.field, "%s", local.msg);
			return NULL;
		}
		log_warn("db: connection broken, retrying once");
	}
	return NULL;
}

/* `r` when it holds one row; else NULL (`r` cleared) with the caller's
 * error for a missing row in `e`, or with the query's error already there
 * when `r` is NULL. */
static PGresult *
one_row(PGresult *r, struct err *e, enum err_kind kind, const char *field, const char *fmt,
    va_list ap)
{
	char msg[sizeof(e->msg)];

	if (r == NULL || PQntuples(r) == 1)
		return r;
	PQclear(r);
	/* A message for people: cut when long, as err_set would. */
	err_ignore(fmt_vbuf(msg, sizeof(msg), fmt, ap));
	err_set_at(e, kind, field, "%s", msg);
	return NULL;
}

PGresult *
db_query_row(struct db *db, const char *sql, int nparams, const char *const *params, struct err *e,
    enum err_kind kind, const char *field, const char *fmt, ...)
{
	PGresult *r = db_query(db, sql, nparams, params, e);
	va_list ap;

	va_start(ap, fmt);
	r = one_row(r, e, kind, field, fmt, ap);
	va_end(ap);
	return r;
}

PGresult *
db_conn_query_row(PGconn *c, const char *sql, int nparams, const char *const *params, struct err *e,
    enum err_kind kind, const char *field, const char *fmt, ...)
{
	PGresult *r = db_conn_query(c, sql, nparams, params, e);
	va_list ap;

	va_start(ap, fmt);
	r = one_row(r, e, kind, field, fmt, ap);
	va_end(ap);
	return r;
}

static int
retryable_state(void)
{
	/* serialization_failure, deadlock_detected */
	return strcmp(last_state, "40001") == 0 || strcmp(last_state, "40P01") == 0;
}

int
db_tx(struct db *db, db_tx_fn fn, void *arg, struct err *e)
{
	int reconnects = 0, conflicts = 0;

	for (;;) {
		struct err local;
		struct db_slot *slot;
		PGresult *r;
		int rc = -1, retry = 0;

		err_clear(&local);
		last_state[0] = '\0';
		slot = db_acquire(db, &local);
		if (slot == NULL) {
			err_set_at(e, local.kind, local.field, "%s", local.msg);
			return -1;
		}
		r = db_conn_query(slot->conn, "BEGIN", 0, NULL, &local);
		if (r == NULL) {
			int broken = PQstatus(slot->conn) != CONNECTION_OK;
			db_release(db, slot);
			if (broken && reconnects++ == 0)
				continue;
			err_set_at(e, local.kind, local.field, "%s", local.msg);
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
		/* PostgreSQL chose this transaction as a deadlock or serialization
		 * victim: nothing of it remains, so it runs again, a few times,
		 * after a short random pause that lets the other one finish. */
		if (rc != 0 && retryable_state() && conflicts < DB_TX_RETRIES) {
			conflicts++;
			retry = 1;
			log_warn("db: transaction conflict (%s), retry %d", last_state, conflicts);
			struct timespec ts = { 0, (long)(1 + rand() % 20) * 1000000L * conflicts };
			nanosleep(&ts, NULL);
		}
		if (retry)
			continue;
		if (rc != 0)
			err_set_at(e, local.kind, local.field, "%s", local.msg);
		return rc;
	}
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
	long long n;

	return num_parse_ll(PQcmdTuples(r), &n) == 0 && n >= 0 && n <= LONG_MAX ? (long)n : 0;
}

/* What db_exec and db_conn_exec answer for the result r of their
 * statement (NULL: it failed, `e` set), r cleared. */
static int
take_affected(PGresult *r, long *affected)
{
	if (r == NULL)
		return -1;
	if (affected)
		*affected = db_affected(r);
	PQclear(r);
	return 0;
}

int
db_conn_exec(PGconn *c, const char *sql, int nparams, const char *const *params, long *affected,
    struct err *e)
{
	return take_affected(db_conn_query(c, sql, nparams, params, e), affected);
}

int
db_exec(struct db *db, const char *sql, int nparams, const char *const *params, long *affected,
    struct err *e)
{
	return take_affected(db_query(db, sql, nparams, params, e), affected);
}

static int
field_ok(const PGresult *r, int row, int col, struct err *e)
{
	if (r == NULL || row < 0 || col < 0 || row >= PQntuples(r) || col >= PQnfields(r)) {
		err_set(e, ERR_INTERNAL, "database answer lacks row %d column %d", row, col);
		return 0;
	}
	return 1;
}

const char *
db_get_text(const PGresult *r, int row, int col)
{
	if (r == NULL || row < 0 || col < 0 || row >= PQntuples(r) || col >= PQnfields(r) ||
	    PQgetisnull(r, row, col))
		return NULL;
	return PQgetvalue(r, row, col);
}

int
db_take_ll(PGresult *r, long long *out, struct err *e)
{
	int rc;

	if (r == NULL)
		return -1;
	rc = db_get_ll(r, 0, 0, out, e);
	PQclear(r);
	return rc;
}

static int
take_col(const PGresult *r, int col, const struct db_col *c, struct err *e)
{
	switch (c->kind) {
	case DB_COL_STR:
		return db_get_str(r, 0, col, c->out, c->n, e);
	case DB_COL_LL:
		return db_get_ll(r, 0, col, c->out, e);
	case DB_COL_LL_OR0:
		return db_get_ll_or(r, 0, col, 0, c->out, e);
	case DB_COL_INT:
		return db_get_int(r, 0, col, c->out, e);
	case DB_COL_INT_OR0:
		return db_get_int_or(r, 0, col, 0, c->out, e);
	case DB_COL_BOOL:
		return db_get_bool(r, 0, col, c->out, e);
	}
	err_set(e, ERR_INTERNAL, "database answer: column %d of no known kind", col);
	return -1;
}

int
db_take_row(PGresult *r, const struct db_col *cols, size_t n, struct err *e)
{
	int rc = 0;

	if (r == NULL)
		return -1;
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = take_col(r, (int)i, &cols[i], e);
	PQclear(r);
	return rc;
}

int
db_take_row_or_none(PGresult *r, const struct db_col *cols, size_t n, struct err *e)
{
	if (r != NULL && PQntuples(r) != 1) {
		PQclear(r);
		return 0;
	}
	return db_take_row(r, cols, n, e) < 0 ? -1 : 1;
}

int
db_get_ll_or(const PGresult *r, int row, int col, long long def, long long *out, struct err *e)
{
	if (!field_ok(r, row, col, e))
		return -1;
	if (PQgetisnull(r, row, col)) {
		*out = def;
		return 0;
	}
	if (num_parse_ll(PQgetvalue(r, row, col), out) < 0) {
		err_set(e, ERR_INTERNAL, "database answer: column %d is not an integer", col);
		return -1;
	}
	return 0;
}

int
db_get_ll(const PGresult *r, int row, int col, long long *out, struct err *e)
{
	if (!field_ok(r, row, col, e))
		return -1;
	if (PQgetisnull(r, row, col)) {
		err_set(e, ERR_INTERNAL, "database answer: column %d is NULL", col);
		return -1;
	}
	return db_get_ll_or(r, row, col, 0, out, e);
}

static int
to_int(long long v, int col, int *out, struct err *e)
{
	if (v < INT_MIN || v > INT_MAX) {
		err_set(e, ERR_INTERNAL, "database answer: column %d out of range", col);
		return -1;
	}
	*out = (int)v;
	return 0;
}

int
db_get_int(const PGresult *r, int row, int col, int *out, struct err *e)
{
	long long v;

	return db_get_ll(r, row, col, &v, e) < 0 ? -1 : to_int(v, col, out, e);
}

int
db_get_int_or(const PGresult *r, int row, int col, int def, int *out, struct err *e)
{
	long long v;

	return db_get_ll_or(r, row, col, def, &v, e) < 0 ? -1 : to_int(v, col, out, e);
}

int
db_get_bool(const PGresult *r, int row, int col, int *out, struct err *e)
{
	const char *v;

	if (!field_ok(r, row, col, e))
		return -1;
	v = PQgetisnull(r, row, col) ? "" : PQgetvalue(r, row, col);
	if (strcmp(v, "t") != 0 && strcmp(v, "f") != 0) {
		err_set(e, ERR_INTERNAL, "database answer: column %d is not a boolean", col);
		return -1;
	}
	*out = v[0] == 't';
	return 0;
}

int
db_get_str(const PGresult *r, int row, int col, char *out, size_t n, struct err *e)
{
	const char *v;
	size_t len;

	if (!field_ok(r, row, col, e))
		return -1;
	v = PQgetisnull(r, row, col) ? "" : PQgetvalue(r, row, col);
	len = strlen(v);
	if (len >= n) {
		err_set(e, ERR_INTERNAL, "database answer: column %d longer than %zu", col, n - 1);
		return -1;
	}
	memcpy(out, v, len + 1);
	return 0;
}

int
db_array_literal(const char *list, char *out, size_t n)
{
	size_t k = 0;
	int first = 1;

	if (n < 3)
		return -1;
	out[k++] = '{';
	for (const char *p = list; *p;) {
		size_t len = strcspn(p, ",");
		if (len > 0) {
			if (!first)
				out[k++] = ',';
			first = 0;
			out[k++] = '"';
			for (size_t i = 0; i < len; i++) {
				if (k + 4 >= n)
					return -1;
				if (p[i] == '"' || p[i] == '\\')
					out[k++] = '\\';
				out[k++] = p[i];
			}
			out[k++] = '"';
		}
		p += len;
		if (*p == ',')
			p++;
		if (k + 2 >= n)
			return -1;
	}
	out[k++] = '}';
	out[k] = '\0';
	return 0;
}
