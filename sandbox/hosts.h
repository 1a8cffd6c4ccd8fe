/* hosts.h - the hypervisor hosts every aasd shares (hosts_): registration,
 * operator settings (overcommit, draining), the capacity and live use the
 * polling aasd reports, health, and admission: reserving a size's memory
 * and vCPUs on one host inside the create's transaction.
 *
 * Lock order: a create locks the account row, then the eligible host rows
 * (FOR UPDATE, by id), then inserts its sandbox row. Nothing else locks
 * more than one host row, and nothing holding a host row locks an account. */
#ifndef AAS_HOSTS_H
#define AAS_HOSTS_H

#include <stddef.h>

#include <jansson.h>
#include <libpq-fe.h>

#include "base/db.h"
#include "base/err.h"
#include "sandbox/place.h"
#include "vmm/orch.h"

#define HOSTS_URI_MAX 256
#define HOSTS_RETRY_AFTER_S 30 /* told to a create that found no room */

/* Options of `aasctl host add`; 0 or NULL leaves a setting as it is (a new
 * host gets the defaults). */
struct hosts_options {
	const char *name;
	double memory_overcommit; /* (0, 16] */
	double cpu_overcommit;    /* (0, 64] */
	const char *preview_address;
	const char *isolation_rule; /* hex SHA-256 of the rule installed there */
	const char *storage;        /* "shared" or "pool" */
};

/* Adds the host `uri` unless it is known (aasd's AAS_LIBVIRT_URI): used
 * by the aasd that lists it only. */
int hosts_register(struct db *db, const char *uri, struct err *e) AAS_MUST_CHECK;
/* Adds or updates a host (aasctl host add), which every aasd then opens;
 * its row as JSON. */
json_t *hosts_add(struct db *db, const char *uri, const struct hosts_options *opt, struct err *e);
/* Every host: settings, state, capacity, reservations, live use, sandboxes. */
json_t *hosts_list_json(struct db *db, struct err *e);
/* Draining: no new sandboxes go there; those on it run on. `host` is a
 * name or a URI. */
int hosts_set_draining(struct db *db, const char *host, int draining, struct err *e) AAS_MUST_CHECK;
/* Forgets a host; refused (ERR_CONFLICT) while sandboxes live on it. */
int hosts_remove(struct db *db, const char *host, struct err *e) AAS_MUST_CHECK;

/* Evacuation: the host drains, and the aasd serving it live-migrates its
 * sandboxes elsewhere one by one (its warm VMs are dropped); those refused
 * before are tried again. */
int hosts_evacuate(struct db *db, const char *host, struct err *e) AAS_MUST_CHECK;
/* How an evacuation stands: sandboxes waiting, moving, and the ones that
 * could not move with the reason. */
json_t *hosts_evacuation_json(struct db *db, const char *host, struct err *e);
/* The host's private address (forwards listen there, moves arrive there);
 * "" when it has none. */
int hosts_address(struct db *db, const char *uri, char *out, size_t n,
    struct err *e) AAS_MUST_CHECK;

/* Hosts the operator added, which every aasd opens (less those private
 * to one process, see orch_uri_private): a malloc'd comma-separated list,
 * "" when none. */
char *hosts_shared_uris(struct db *db, struct err *e);

/* Records a poll of `uri`: its figures when `st` is set, else the error,
 * which makes it degraded, or down when `down_after_s` >= 0 and nobody has
 * seen it answer for that long (the caller passes -1 until its own polls
 * have failed for that long). */
int hosts_report(struct db *db, const char *uri, const struct orch_host_stats *st,
    const char *error, int down_after_s, struct err *e) AAS_MUST_CHECK;

/* The storage the host's row asks for: 1 "pool", 0 "shared", -1 not set
 * (the default applies), or -2 on error. */
int hosts_storage(struct db *db, const char *uri, struct err *e) AAS_MUST_CHECK;

/* Inside a create's transaction, without locking: how many of `uris`
 * could take a VM but not one with a network device (another rule, or
 * none), or -1 on error. */
int hosts_count_without_rule(PGconn *c, const char *uris, const char *rule,
    struct err *e) AAS_MUST_CHECK;

/* Records the isolation rule in force on a host whose rule aasd checks
 * itself (its own machine): `rule` while the check passes, NULL when not. */
int hosts_set_isolation(struct db *db, const char *uri, const char *rule,
    struct err *e) AAS_MUST_CHECK;

/* Inside the create's transaction, after the account row: locks the
 * eligible hosts among `uris` (a text[] literal), reads their
 * reservations and picks one for `need` (place.h). With `isolation_rule`
 * (the VM has a network device), only hosts with that rule recorded are
 * eligible. 1 with its URI in `uri`, 0 when none has room, -1 on
 * error. */
int hosts_reserve(PGconn *c, const char *uris, const struct place_need *need,
    const char *isolation_rule, char *uri, size_t n, struct err *e) AAS_MUST_CHECK;

/* 1 when `need` fits on host `uri` within its reservation limits now
 * (a read: nothing is reserved), 0 when not or when it is draining or
 * down, -1 on error. */
int hosts_fits(struct db *db, const char *uri, const struct place_need *need,
    struct err *e) AAS_MUST_CHECK;

/* The room a create can find among `uris` (a text[] literal: the
 * caller's hosts), in aggregate for tenants (no host names): hosts
 * available, vCPUs and memory in all, reserved, and how many more of each
 * size fit now. */
json_t *hosts_capacity_json(struct db *db, const char *uris, struct err *e);

#endif
