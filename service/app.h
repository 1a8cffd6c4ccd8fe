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
};

enum app_flags {
	APP_CACHES = 1, /* a serving process: caches and invalidation listener */
};

/* Opens the database pool and applies migrations. */
struct app *app_new(const struct config *cfg, unsigned flags, struct err *e);
void app_free(struct app *app);

#endif
