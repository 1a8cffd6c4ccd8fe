/* db.h - a small PostgreSQL connection pool. Queries are parameterised
 * only. A connection found broken is reset and the statement retried once,
 * so a database restart costs the requests made during the outage only. */
#ifndef AAS_DB_H
#define AAS_DB_H

#include <stddef.h>

#include <libpq-fe.h>

#include "base/err.h"

struct db;

/* A single connection with the pool's settings (for LISTEN). */
PGconn *db_connect_raw(const char *url);

struct db *db_new(const char *url, int size, struct err *e);
void db_free(struct db *db);

/* One statement in autocommit. Returns a result with tuples or command
 * status (caller PQclear()s it), or NULL with `e` set. */
PGresult *db_query(struct db *db, const char *sql, int nparams, const char *const *params,
    struct err *e);

#define DB_TX_RETRIES 5 /* runs again after a deadlock or serialization failure */

/* Runs fn between BEGIN and COMMIT on one connection; ROLLBACK when fn
 * returns -1. If the connection breaks before fn ran, it is retried once;
 * when PostgreSQL aborts it as a deadlock victim or for a serialization
 * failure (40P01, 40001), the whole transaction runs again, up to
 * DB_TX_RETRIES times, so fn must not act outside the database. */
typedef int (*db_tx_fn)(PGconn *c, void *arg, struct err *e);
int db_tx(struct db *db, db_tx_fn fn, void *arg, struct err *e) AAS_MUST_CHECK;

/* A statement on a connection handed to a db_tx_fn. */
PGresult *db_conn_query(PGconn *c, const char *sql, int nparams, const char *const *params,
    struct err *e);

/* A statement that finds one row (autocommit, or on a transaction's
 * connection): the result holding it (caller PQclear()s it), or NULL with
 * `e` set. No row (or more than one, which the SQL is to rule out) is the
 * caller's error, mostly ERR_NOT_FOUND: `kind`, `field` (may be NULL) and
 * the message `fmt` makes. */
PGresult *db_query_row(struct db *db, const char *sql, int nparams, const char *const *params,
    struct err *e, enum err_kind kind, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 8, 9)));
PGresult *db_conn_query_row(PGconn *c, const char *sql, int nparams, const char *const *params,
    struct err *e, enum err_kind kind, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 8, 9)));

/* Rows touched by an INSERT/UPDATE/DELETE result. */
long db_affected(PGresult *r);

/* Runs a statement whose rows are not needed (autocommit, or on a
 * transaction's connection): 0 with the number of rows it touched in
 * *affected (may be NULL), or -1 with `e` set. */
int db_exec(struct db *db, const char *sql, int nparams, const char *const *params, long *affected,
    struct err *e) AAS_MUST_CHECK;
int db_conn_exec(PGconn *c, const char *sql, int nparams, const char *const *params, long *affected,
    struct err *e) AAS_MUST_CHECK;

/* Typed reads of one field of a result. Each checks that the row and
 * column exist and, for numbers, that the whole text is a number in range;
 * -1 with ERR_INTERNAL otherwise (a schema/code mismatch, never the
 * client's fault). A NULL field reads as `def` (the *_or forms) or fails. */
int db_get_ll(const PGresult *r, int row, int col, long long *out, struct err *e) AAS_MUST_CHECK;
int db_get_ll_or(const PGresult *r, int row, int col, long long def, long long *out,
    struct err *e) AAS_MUST_CHECK;
/* The number a query such as "SELECT count(*)" answered (its first row's
 * first field), r PQclear()ed; r NULL (the query failed, `e` set) is -1. */
int db_take_ll(PGresult *r, long long *out, struct err *e) AAS_MUST_CHECK;
/* One field of the row db_take_row reads: where it goes and which typed
 * read reads it (a NULL field reads as 0 in the _OR0 kinds). */
enum db_col_kind { DB_COL_STR, DB_COL_LL, DB_COL_LL_OR0, DB_COL_INT, DB_COL_INT_OR0, DB_COL_BOOL };
struct db_col {
	enum db_col_kind kind;
	void *out;
	size_t n; /* DB_COL_STR: the size of out */
};
/* The columns, one per field in order. _Generic with a single type makes
 * a pointer to anything else a compile error, as the typed reads would. */
#define DB_STR(p, size) ((struct db_col){ DB_COL_STR, _Generic((p), char * : (p)), (size) })
#define DB_LL(p) ((struct db_col){ DB_COL_LL, _Generic((p), long long * : (p)), 0 })
#define DB_LL_OR0(p) ((struct db_col){ DB_COL_LL_OR0, _Generic((p), long long * : (p)), 0 })
#define DB_INT(p) ((struct db_col){ DB_COL_INT, _Generic((p), int * : (p)), 0 })
#define DB_INT_OR0(p) ((struct db_col){ DB_COL_INT_OR0, _Generic((p), int * : (p)), 0 })
#define DB_BOOL(p) ((struct db_col){ DB_COL_BOOL, _Generic((p), int * : (p)), 0 })
#define DB_NCOLS(cols) (sizeof(cols) / sizeof((cols)[0]))
/* The fields of the first row of r read in order into cols[0..n-1], r
 * PQclear()ed: 0, or -1 with e set at the first that does not read; r
 * NULL (the query failed, `e` set) is -1. */
int db_take_row(PGresult *r, const struct db_col *cols, size_t n, struct err *e) AAS_MUST_CHECK;
/* db_take_row for a query that may find no row: 1 with the row read, 0
 * when there is none (or more than one), -1 with e set. */
int db_take_row_or_none(PGresult *r, const struct db_col *cols, size_t n,
    struct err *e) AAS_MUST_CHECK;
int db_get_int(const PGresult *r, int row, int col, int *out, struct err *e) AAS_MUST_CHECK;
int db_get_int_or(const PGresult *r, int row, int col, int def, int *out,
    struct err *e) AAS_MUST_CHECK;
/* "t" / "f" of a boolean column. */
int db_get_bool(const PGresult *r, int row, int col, int *out, struct err *e) AAS_MUST_CHECK;
/* Copies a text field into out (truncation is an error); NULL reads as "". */
int db_get_str(const PGresult *r, int row, int col, char *out, size_t n,
    struct err *e) AAS_MUST_CHECK;
/* The field's text (borrowed from r), or NULL when it is SQL NULL. */
const char *db_get_text(const PGresult *r, int row, int col);

/* A comma-separated list ("a,b") as a PostgreSQL text[] literal
 * ({"a","b"}, quotes and backslashes escaped; empty items dropped); -1
 * when it does not fit `n` bytes. */
int db_array_literal(const char *list, char *out, size_t n);

/* 0 when a trivial query succeeds. */
int db_ping(struct db *db, struct err *e) AAS_MUST_CHECK;

#endif
