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

struct sbx;
struct reaper;

/* What the front end does when a tenant's live connections must end. The
 * service calls these from any thread; they must not block. */
struct app_hooks {
	/* A sandbox ended (destroyed, expired or failed) in this process. */
	void (*sandbox_ended)(void *ctx, const char *sandbox_id);
	/* "a:<account_id>" arrived on aas_invalidate: the account was
	 * disabled, in this process or another. */
	void (*account_closed)(void *ctx, const char *account_id);
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
	/* Its expiry reaper, woken by "e:" notifications (set once running). */
	struct reaper *_Atomic reaper;
	/* Set once the front end is up; NULL before and after. */
	const struct app_hooks *_Atomic hooks;
};

enum app_flags {
	APP_CACHES = 1, /* a serving process: caches and invalidation listener */
};

/* Opens the database pool and applies migrations. */
struct app *app_new(const struct config *cfg, unsigned flags, struct err *e);
void app_free(struct app *app);
/* Installs hooks (NULL: none); `h` must stay valid until it is replaced. */
void app_set_hooks(struct app *app, const struct app_hooks *h);
/* Tells the front end that a sandbox ended (no operation without hooks). */
void app_sandbox_ended(struct app *app, const char *sandbox_id);

#endif
