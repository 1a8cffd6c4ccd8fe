/* db.h - a small PostgreSQL connection pool. Queries are parameterised
 * only. A connection found broken is reset and the statement retried once,
 * so a database restart costs the requests made during the outage only. */
#ifndef AAS_DB_H
#define AAS_DB_H

#include <libpq-fe.h>

#include "base/err.h"

struct db;

/* A single connection with the pool's settings (for LISTEN). */
PGconn *db_connect_raw(const char *url);

struct db *db_new(const char *url, int size, struct err *e);
void db_free(struct db *db);

/* One statement in autocommit. Returns a result with tuples or command
 * status (caller PQclear()s it), or NULL with `e` set. */
PGresult *db_query(struct db *db, const char *sql, int nparams,
    const char *const *params, struct err *e);

/* Runs fn between BEGIN and COMMIT on one connection; ROLLBACK when fn
 * returns -1. If the connection breaks before fn ran, it is retried once. */
typedef int (*db_tx_fn)(PGconn *c, void *arg, struct err *e);
int db_tx(struct db *db, db_tx_fn fn, void *arg, struct err *e);

/* A statement on a connection handed to a db_tx_fn. */
PGresult *db_conn_query(PGconn *c, const char *sql, int nparams,
    const char *const *params, struct err *e);

/* Rows touched by an INSERT/UPDATE/DELETE result. */
long db_affected(PGresult *r);

/* 0 when a trivial query succeeds. */
int db_ping(struct db *db, struct err *e);

#endif
