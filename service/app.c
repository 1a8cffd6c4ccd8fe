/* app.c - service set-up shared by aasd and aasctl. */
#include "service/app.h"

#include <stdlib.h>
#include <string.h>

#include "base/embed.h"
#include "base/log.h"
#include "service/reaper.h"
#include <stdatomic.h>
#include "base/migrate.h"

#define APP_CACHE_ENTRIES 100000
#define APP_CACHE_TTL_S 60.0

static void
caches_on(void *ctx)
{
	struct app *app = ctx;

	ttl_set_enabled(app->sessions, 1);
	ttl_set_enabled(app->keys, 1);
}

static void
caches_off(void *ctx)
{
	struct app *app = ctx;

	ttl_set_enabled(app->sessions, 0);
	ttl_set_enabled(app->keys, 0);
}

static void
invalidate(const char *payload, void *ctx)
{
	struct app *app = ctx;

	if (strncmp(payload, "s:", 2) == 0)
		ttl_del(app->sessions, payload + 2);
	else if (strncmp(payload, "k:", 2) == 0)
		ttl_del(app->keys, payload + 2);
	else if (strncmp(payload, "e:", 2) == 0)
		reap_poke(atomic_load(&app->reaper));
	else if (strncmp(payload, "a:", 2) == 0) {
		const struct app_hooks *h = atomic_load(&app->hooks);
		if (h && h->account_closed)
			h->account_closed(h->ctx, payload + 2);
	}
}

void
app_set_hooks(struct app *app, const struct app_hooks *h)
{
	atomic_store(&app->hooks, h);
}

void
app_sandbox_ended(struct app *app, const char *sandbox_id)
{
	const struct app_hooks *h = atomic_load(&app->hooks);

	if (h && h->sandbox_ended)
		h->sandbox_ended(h->ctx, sandbox_id);
}

static int
start_caches(struct app *app, struct err *e)
{
	const struct ntf_handlers h = { caches_on, caches_off, invalidate, app };

	app->sessions = ttl_new(APP_CACHE_ENTRIES, APP_CACHE_TTL_S);
	app->keys = ttl_new(APP_CACHE_ENTRIES, APP_CACHE_TTL_S);
	if (app->sessions == NULL || app->keys == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return -1;
	}
	/* Off until the listener runs: a missed notice must not leave a
	 * revoked key or ended session usable. */
	caches_off(app);
	app->ntf = ntf_new(app->cfg.database_url, "aas_invalidate", &h, e);
	return app->ntf ? 0 : -1;
}

struct app *
app_new(const struct config *cfg, unsigned flags, struct err *e)
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
	if (migrate_apply(app->db, embed_migrations, embed_migrations_count, &applied, e) < 0)
		goto fail;
	if (applied > 0)
		log_info("database schema: %d migration(s) applied", applied);
	if ((flags & APP_CACHES) && start_caches(app, e) < 0)
		goto fail;
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
	ntf_free(app->ntf);
	ttl_free(app->sessions);
	ttl_free(app->keys);
	db_free(app->db);
	free(app);
}
