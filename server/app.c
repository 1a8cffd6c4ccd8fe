/* app.c - service set-up shared by aasd and aasctl. */
#include "app.h"

#include <stdlib.h>

#include "embed.h"
#include "log.h"
#include "migrate.h"

struct app *
app_new(const struct config *cfg, struct err *e)
{
	struct app *app = calloc(1, sizeof(*app));
	int applied = 0;

	if (app == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	app->cfg = *cfg;
	app->db = db_new(cfg->database_url, cfg->db_pool_size, e);
	if (app->db == NULL)
		goto fail;
	if (migrate_apply(app->db, embed_migrations, embed_migrations_count,
	    &applied, e) < 0)
		goto fail;
	if (applied > 0)
		log_info("database schema: %d migration(s) applied", applied);
	return app;
fail:
	app_free(app);
	return NULL;
}

void
app_free(struct app *app)
{
	if (app == NULL)
		return;
	db_free(app->db);
	free(app);
}
