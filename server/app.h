/* app.h - the service's long-lived parts, created once at start and
 * shared (read-only or internally locked) by every request. */
#ifndef AAS_APP_H
#define AAS_APP_H

#include "config.h"
#include "db.h"
#include "err.h"

#define AAS_VERSION "0.1.0"

struct app {
	struct config cfg;
	struct db *db;
};

/* Opens the database pool and applies migrations. */
struct app *app_new(const struct config *cfg, struct err *e);
void app_free(struct app *app);

#endif
