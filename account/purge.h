/* purge.h - rows whose time is over are deleted (purge_): expired MCP
 * tasks, idle and ended MCP and dashboard sessions, e-mail links, sent
 * and stale mail, limit events, OAuth codes, tokens, revoked grants and
 * clients nobody connected with. Each kind is one DELETE of at most
 * PURGE_BATCH rows, repeated up to PURGE_ROUNDS times a run: a statement
 * on one table, locking only the rows it deletes, claimed FOR UPDATE SKIP
 * LOCKED, so it never waits on a row another path holds and takes no
 * second row kind (no place in the store's lock order to keep). What
 * stays for accounting (the ledger, ended sandboxes, snapshots, payment
 * events and checkouts, revoked keys) is never touched:
 * docs/operations.md#retention. */
#ifndef AAS_PURGE_H
#define AAS_PURGE_H

#include "base/config.h"
#include "base/db.h"
#include "base/err.h"

#define PURGE_BATCH 500
#define PURGE_ROUNDS 20
#define PURGE_KINDS 10

struct purge_counts {
	long deleted[PURGE_KINDS]; /* by kind, in the order of purge_kind_name */
	long total;
};

/* One run over every kind; the rows deleted into *out (may be NULL). A
 * kind whose statement fails is logged and the others still run; -1 with
 * the first error then. */
int purge_run(struct db *db, const struct config *cfg, struct purge_counts *out,
    struct err *e) AAS_MUST_CHECK;
/* The kind at index i ("mcp_tasks", ...), or NULL past the last. */
const char *purge_kind_name(int i);

#endif
