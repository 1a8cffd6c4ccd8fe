/* reaper.h - destroys sandboxes when they expire (reap_), whether or not
 * anyone asks, and those of disabled accounts. expires_at lives in
 * PostgreSQL; due rows are claimed with FOR UPDATE SKIP LOCKED, so with
 * several aasd each sandbox is reaped once. The thread sleeps until the
 * nearest expiry and is woken early when an expiry changes (a create, an
 * extend: notification "e:") or an account is disabled ("a:"). A claimed
 * row keeps its end reason (expired or account_disabled) through the
 * destroy. */
#ifndef AAS_REAPER_H
#define AAS_REAPER_H

#include "base/config.h"
#include "base/db.h"
#include "base/err.h"

struct reaper;

/* Ends one claimed sandbox (destroy its VM, settle its bill). */
typedef int (*reap_destroy_fn)(void *ctx, const char *id, const char *host);

/* Reaps sandboxes on the hosts in `hosts` (comma-separated URIs). */
struct reaper *reap_new(struct db *db, const char *hosts, const char *instance,
    reap_destroy_fn destroy, void *ctx, struct err *e);
void reap_free(struct reaper *r);
/* The hosts changed (one was added): reaps on `hosts` from now on. */
int reap_set_hosts(struct reaper *r, const char *hosts, struct err *e) AAS_MUST_CHECK;
/* Something's expiry changed: look again now. */
void reap_poke(struct reaper *r);

#endif
