/* store_int.h - what the store's files share (not a public interface). */
#ifndef AAS_STORE_INT_H
#define AAS_STORE_INT_H

#include "sandbox/store.h"

#define STORE_TS(col) "to_char(" col " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"

/* A sandbox or snapshot id the account does not have: the kind, field
 * and message (with its argument) of err_set_at or db_query_row, so the
 * statements that find one row and store_not_found say it alike. */
#define STORE_NO_SANDBOX(id)                                                         \
	ERR_NOT_FOUND, "sandbox_id", "sandbox_id: no sandbox %.40s in your account", \
	    (id) ? (id) : ""
#define STORE_NO_SNAPSHOT(id)                                                           \
	ERR_NOT_FOUND, "snapshot_id", "snapshot_id: no snapshot %.40s in your account", \
	    (id) ? (id) : ""

/* ERR_NOT_FOUND naming sandbox_id. */
void store_not_found(const char *id, struct err *e);
/* A text column as JSON: null when NULL or empty. */
json_t *store_text_or_null(const PGresult *r, int row, int col);
/* An integer column as JSON: null when NULL or unreadable. */
json_t *store_int_or_null(const PGresult *r, int row, int col);

/* The first column of the only row of `r` into out, and clears `r`;
 * ERR_NOT_FOUND naming sandbox `id` when there is no row; -1 also when `r`
 * is NULL (its error is already in `e`). */
int store_only_str(PGresult *r, const char *id, char *out, size_t n, struct err *e) AAS_MUST_CHECK;

/* Makes one row of a result into JSON (NULL when out of memory). */
typedef json_t *(*store_json_fn)(const PGresult *r, int row);
/* The only row of a db_query_row answer as `conv` makes it, and clears
 * `r`; NULL when `r` is NULL (its error is already in `e`) or with
 * ERR_INTERNAL when out of memory. */
json_t *store_row_json(PGresult *r, store_json_fn conv, struct err *e);

/* One count(*) whose only parameter is the sandbox id. */
int store_count(struct db *db, const char *sql, const char *sandbox_id, long long *n,
    struct err *e) AAS_MUST_CHECK;
/* The same inside a transaction, on its connection. */
int store_conn_count(PGconn *c, const char *sql, const char *sandbox_id, long long *n,
    struct err *e) AAS_MUST_CHECK;

/* Reads one row into `elem`: 0 kept, 1 left out, -1 with `e` set. */
typedef int (*store_row_fn)(const PGresult *r, int row, void *elem, struct err *e);

/* Runs a query and reads its rows into a malloc'd array of `size`-byte
 * elements (*out, *n; NULL and 0 for no rows). */
int store_rows(struct db *db, const char *sql, int nparams, const char *const *params, size_t size,
    store_row_fn read, void **out, size_t *n, struct err *e) AAS_MUST_CHECK;

/* Takes the answer of an UPDATE ... RETURNING id, host_uri of at most
 * one row (and clears it): 1 with both, 0 for no row, -1 on error. */
int store_id_host(PGresult *r, char *id, char *host, size_t hn, struct err *e) AAS_MUST_CHECK;

/* The preview forwards of sandbox `id` now go to `host_ports` (one per
 * entry of `ports`): its VM started again on a new QEMU. */
int store_conn_ports_rebind(PGconn *c, const char *id, const int *ports, const int *host_ports,
    size_t n, struct err *e) AAS_MUST_CHECK;
/* Runs `sql` (a change of sandbox `id`'s row, on a transaction's
 * connection) and, when it changed the row, rebinds its preview forwards
 * (none when ports is NULL): 0 with *won 1 when it changed the row, or -1
 * with e set. */
int store_conn_change_rebind(PGconn *c, const char *sql, int nparams, const char *const *params,
    const char *id, const int *ports, const int *host_ports, size_t n, int *won,
    struct err *e) AAS_MUST_CHECK;
/* The same in a transaction of its own; *won is set when it commits. */
int store_change_rebind(struct db *db, const char *sql, int nparams, const char *const *params,
    const char *id, const int *ports, const int *host_ports, size_t n, int *won,
    struct err *e) AAS_MUST_CHECK;

#endif
