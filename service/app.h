/* app.h - the service's long-lived parts, created once at start and
 * shared (read-only or internally locked) by every request. */
#ifndef AAS_APP_H
#define AAS_APP_H

#include "base/config.h"
#include "base/db.h"
#include "base/err.h"
#include "base/notify.h"
#include "base/ttlmap.h"

#include "base/version.h"

#include <pthread.h>

struct sbx;
struct reaper;
struct tasks;

/* What the front end does when a tenant's live connections must end: an
 * ended session ("s:<id>") closes its GET streams, a disabled account
 * ("a:<id>") its streams and previews, a sandbox that ended in this process
 * its previews. Called on the notification thread or a worker: they must
 * not block (no database, no hypervisor). Any may be NULL. */
struct app_hooks {
	void (*session_ended)(const char *session_id, void *ctx);
	void (*account_disabled)(const char *account_id, void *ctx);
	void (*sandbox_ended)(const char *sandbox_id, void *ctx);
	void *ctx;
};

struct app {
	struct config cfg;
	struct db *db;
	/* Caches of session and key lookups; NULL in short-lived tools. They
	 * are trusted only while `ntf` listens for invalidations. */
	struct ttl_map *sessions;
	struct ttl_map *keys;
	struct ntf *ntf;
	/* The sandbox service; NULL when AAS_LIBVIRT_URI=none. */
	struct sbx *sbx;
	/* Its expiry reaper, woken by "e:" and "a:" notifications (set once
	 * running). */
	struct reaper *_Atomic reaper;
	/* MCP tasks running here (set once running): "t:" notifications
	 * cancel them. */
	struct tasks *_Atomic tasks;
	/* The front end's hooks (app_set_hooks), under hooks_lock. */
	pthread_mutex_t hooks_lock;
	struct app_hooks hooks;
};

enum app_flags {
	APP_CACHES = 1, /* a serving process: caches and invalidation listener */
};

/* Opens the database pool and applies migrations. */
struct app *app_new(const struct config *cfg, unsigned flags, struct err *e);
void app_free(struct app *app);
/* Installs the front end's hooks; NULL removes them. Once it returns, no
 * call of the previous hooks is running (so their context may be freed). */
void app_set_hooks(struct app *app, const struct app_hooks *h);
/* Tells the front end that a sandbox ended (no operation without hooks). */
void app_sandbox_ended(struct app *app, const char *sandbox_id);
/* Starts the sandbox service on this app's settings and database into
 * app->sbx: its reaper is published in app->reaper, and the sandboxes that
 * end reach the front end's hooks. */
int app_start_sandboxes(struct app *app, struct err *e) AAS_MUST_CHECK;

#endif
