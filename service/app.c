/* app.c - service set-up shared by aasd and aasctl. */
#include "service/app.h"

#include <stdlib.h>
#include <string.h>

#include "base/embed.h"
#include "base/fmt.h"
#include "base/log.h"
#include "account/accounts.h"
#include "sandbox/reaper.h"
#include "sandbox/sandbox.h"
#include "service/tasks.h"
#include <stdatomic.h>
#include "base/migrate.h"

#define APP_CACHE_ENTRIES 100000
#define APP_CACHE_TTL_S 60.0

/* Listening (again): whatever was announced while the listener was down
 * is lost, so both caches start empty, and enabling moves their
 * generation on so that no lookup begun before this stores its answer. */
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

/* A cached key's value is its account id. */
static int
key_of_account(const char *val, void *account_id)
{
	return strcmp(val, account_id) == 0;
}

/* A cached session's value is "<protocol version>|<account id>". */
static int
session_of_account(const char *val, void *account_id)
{
	const char *bar = strchr(val, '|');

	return bar != NULL && strcmp(bar + 1, account_id) == 0;
}

static void
session_ended(struct app *app, const char *id)
{
	ttl_del(app->sessions, id);
	pthread_mutex_lock(&app->hooks_lock);
	if (app->hooks.session_ended)
		app->hooks.session_ended(id, app->hooks.ctx);
	pthread_mutex_unlock(&app->hooks_lock);
}

/* Its keys and sessions were revoked and ended in the same transaction
 * (and announced one by one); dropping whatever the caches still hold of
 * the account does not depend on those notices. The sandboxes are the
 * reaper's work, never this thread's. */
static void
account_disabled(struct app *app, const char *account_id)
{
	char id[ACCT_ID_LEN + 1];

	if (!acct_id_valid(account_id) || fmt_buf(id, sizeof(id), "%s", account_id) < 0)
		return;
	log_info("account %s disabled: dropping its keys and sessions, stopping its sandboxes", id);
	ttl_del_matching(app->keys, key_of_account, id);
	ttl_del_matching(app->sessions, session_of_account, id);
	reap_poke(atomic_load(&app->reaper));
	pthread_mutex_lock(&app->hooks_lock);
	if (app->hooks.account_disabled)
		app->hooks.account_disabled(id, app->hooks.ctx);
	pthread_mutex_unlock(&app->hooks_lock);
}

static void
invalidate(const char *payload, void *ctx)
{
	struct app *app = ctx;

	if (strncmp(payload, "s:", 2) == 0)
		session_ended(app, payload + 2);
	else if (strncmp(payload, "k:", 2) == 0)
		ttl_del(app->keys, payload + 2);
	else if (strncmp(payload, "e:", 2) == 0)
		reap_poke(atomic_load(&app->reaper));
	else if (strncmp(payload, "a:", 2) == 0)
		account_disabled(app, payload + 2);
	else if (strncmp(payload, "t:", 2) == 0)
		tasks_notice(atomic_load(&app->tasks), payload + 2);
}

void
app_set_hooks(struct app *app, const struct app_hooks *h)
{
	pthread_mutex_lock(&app->hooks_lock);
	if (h)
		app->hooks = *h;
	else
		memset(&app->hooks, 0, sizeof(app->hooks));
	pthread_mutex_unlock(&app->hooks_lock);
}

void
app_sandbox_ended(struct app *app, const char *sandbox_id)
{
	pthread_mutex_lock(&app->hooks_lock);
	if (app->hooks.sandbox_ended)
		app->hooks.sandbox_ended(sandbox_id, app->hooks.ctx);
	pthread_mutex_unlock(&app->hooks_lock);
}

static void
sandbox_ended(void *ctx, const char *sandbox_id)
{
	app_sandbox_ended(ctx, sandbox_id);
}

int
app_start_sandboxes(struct app *app, struct err *e)
{
	const struct sbx_env env = {
		.cfg = &app->cfg,
		.db = app->db,
		.reaper = &app->reaper,
		.ended = sandbox_ended,
		.ctx = app,
	};

	app->sbx = sbx_new(&env, e);
	return app->sbx ? 0 : -1;
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
	pthread_mutex_init(&app->hooks_lock, NULL);
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
	pthread_mutex_destroy(&app->hooks_lock);
	free(app);
}
