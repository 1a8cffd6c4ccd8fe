/* aasd.c - the aas service: configuration, database, HTTP routes (MCP,
 * REST, health, metrics) and the preview proxy. */
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "service/app.h"
#include "server/auth.h"
#include "server/card.h"
#include "base/config.h"
#include "base/keys.h"
#include "server/http.h"
#include "base/log.h"
#include "server/mcp.h"
#include "server/netguard_cli.h"
#include "server/deploy_check.h"
#include "server/metrics_http.h"
#include "vmm/orch.h"
#include "sandbox/preview.h"
#include "server/proxy.h"
#include "server/rest.h"
#include "server/pty.h"
#include "server/npx.h"
#include "server/oauth.h"
#include "server/web.h"
#include "account/mailq.h"
#include "base/passwd.h"
#include "sandbox/sandbox.h"
#include "service/tasks.h"
#include "vmm/vm.h"
#include "service/tools.h"
#include "base/work.h"

#define WORK_QUEUE_MAX 4096
#define MAX_ROUTES 88

static const char *
env_get(const char *name)
{
	return getenv(name);
}

/* What the front end closes when another process ends a session or
 * disables an account (app_hooks: on the notification thread). */
struct front {
	struct mcp *mcp;
	struct proxy *proxy;
	struct pty_hub *pty;
};

static void
front_session_ended(const char *session_id, void *ctx)
{
	const struct front *f = ctx;

	mcp_close_session(f->mcp, session_id);
}

static void
front_account_disabled(const char *account_id, void *ctx)
{
	const struct front *f = ctx;

	mcp_close_account(f->mcp, account_id);
	proxy_close_account(f->proxy, account_id);
	pty_close_account(f->pty, account_id);
}

static void
front_sandbox_ended(const char *sandbox_id, void *ctx)
{
	const struct front *f = ctx;

	proxy_close_sandbox(f->proxy, sandbox_id);
	pty_close_sandbox(f->pty, sandbox_id);
}

/* One feature's state in /healthz: what works, and for what does not, why
 * (aasd --check-deployment says how to fix it). */
static void
feature(json_t *features, json_t *missing, const char *name, int ok, const char *why)
{
	json_object_set_new(features, name,
	    ok ? json_pack("{s:s}", "status", "ok") :
		 json_pack("{s:s, s:s}", "status", "missing", "why", why));
	if (!ok)
		json_array_append_new(missing, json_string(name));
}

static void
health_features(struct app *app, json_t *out)
{
	json_t *features = json_object(), *missing = json_array();
	char why[400] = "this server runs without sandboxes";
	int net = 0;

	if (app->sbx)
		net = sbx_net_state(app->sbx, why, sizeof(why));
	feature(features, missing, "internet", net, why);
	feature(features, missing, "previews", net,
	    net ? "" : "previews reach sandboxes over their network device, which they lack");
	feature(features, missing, "signup_mail", app->cfg.smtp_url[0] != '\0',
	    "no AAS_SMTP_URL: sign-up and password reset send no mail");
	json_object_set_new(out, "features", features);
	json_object_set_new(out, "missing", missing);
}

static void
health_work(struct http_req *req, void *ctx)
{
	struct app *app = ctx;
	struct err e;

	err_clear(&e);
	if (db_ping(app->db, &e) < 0) {
		http_reply_json(req, 503,
		    json_pack("{s:s, s:s, s:s}", "status", "unavailable", "database", "down",
			"error", e.msg));
		return;
	}
	json_t *out = json_pack("{s:s, s:s, s:s}", "status", "ok", "database", "ok", "version",
	    AAS_VERSION);
	if (app->sbx) {
		struct orch *o = sbx_orch(app->sbx);
		const char *accel = orch_accel(o);
		struct err ve;
		err_clear(&ve);
		int ok = orch_wait_ready(o, 0, &ve) == 0;
		struct orch_confinement conf;
		char range[32];

		orch_confinement(o, &conf);
		snprintf(range, sizeof(range), "%u-%u", (unsigned)conf.vm_uid_first,
		    (unsigned)(conf.vm_uid_first + conf.vm_uid_count - 1));
		json_object_set_new(out, "vm",
		    json_pack("{s:s, s:o, s:s, s:{s:s, s:s, s:s, s:s}}", "status",
			ok ? "ok" : "unavailable", "accelerator",
			accel ? json_string(accel) : json_null(), "note",
			ok ? orch_accel_reason(o) : ve.msg, "confinement", "vm_users", "own",
			"vm_uids", range, "security_drivers", conf.secmodels, "seccomp", "on"));
	}
	health_features(app, out);
	http_reply_json(req, 200, out);
}

static void
health(struct http_req *req, void *ctx)
{
	if (strcmp(http_method(req), "GET") != 0 && strcmp(http_method(req), "HEAD") != 0) {
		http_add_header(req, "Allow", "GET, HEAD");
		http_reply_error(req, 405, "method_not_allowed", "use GET");
		return;
	}
	http_defer(req, health_work, ctx, NULL);
}

/* ---- previews ---- */

static int
preview_claims(void *ctx, const char *host)
{
	struct app *app = ctx;
	char label[128];

	return preview_under_domain(host, app->cfg.preview_domain, label, sizeof(label));
}

static void
preview_resolve(void *ctx, const struct preview_ask *ask, struct preview_route *out)
{
	struct app *app = ctx;

	if (app->sbx == NULL) {
		out->status = 404;
		snprintf(out->message, sizeof(out->message),
		    "This server runs without sandboxes, so it has no previews.");
		return;
	}
	sbx_preview_route(app->sbx, ask, out);
}

static void
preview_explain(void *ctx, const struct preview_route *route, char *msg, size_t n)
{
	struct app *app = ctx;

	if (app->sbx != NULL)
		sbx_preview_explain(app->sbx, route, msg, n);
}

static void
print_config_row(const char *name, const char *def, const char *help, void *ctx)
{
	(void)ctx;
	printf("| `%s` | `%s` | %s |\n", name, *def ? def : "", help);
}

int
main(int argc, char **argv)
{
	struct config cfg;
	struct err e;
	struct app *app = NULL;
	struct mcp *mcp = NULL;
	struct card *card = NULL;
	struct metrics_http *metrics = NULL;
	struct rest *rest = NULL;
	struct pty_hub *pty = NULL;
	struct mailq *mq = NULL;
	struct web *web = NULL;
	struct npx *npx = NULL;
	struct tasks *tasks = NULL;
	struct http_route routes[MAX_ROUTES];
	size_t n_rest = 0;
	struct work_pool *work = NULL;
	struct http_server *http = NULL;
	struct proxy *proxy = NULL;
	struct front front;
	sigset_t sigs;
	int sig = 0, rc = 1;

	if (argc > 1 && strcmp(argv[1], "--config-table") == 0) {
		printf("| Variable | Default | Meaning |\n|---|---|---|\n");
		config_print_table(print_config_row, NULL);
		return 0;
	}
	if (argc > 1 && strcmp(argv[1], "--check-deployment") == 0)
		return dcheck_main();
	if (argc > 1 && netguard_cli_is(argv[1]))
		return netguard_cli_main(argv[1]);
	if (argc > 1) {
		fprintf(stderr,
		    "usage: aasd [--config-table | --check-deployment | --netguard-rules |\n"
		    "             --netguard-rules-hash | --netguard-users | --netguard-install |\n"
		    "             --netguard-watch]\n"
		    "Configuration comes from AAS_* environment variables; see docs/configuration.md.\n");
		return 2;
	}
	err_clear(&e);
	if (config_load(&cfg, env_get, &e) < 0)
		log_fatal("config: %s", e.msg);
	log_set_level((enum log_level)cfg.log_level);

	/* Signals are taken synchronously by the main thread only. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (tools_init(&e) < 0)
		log_fatal("tools: %s", e.msg);
	/* Before any thread: libcurl's global state (mail). */
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0)
		log_fatal("start: libcurl did not initialise");
	pw_set_concurrency(cfg.password_hashes);
	pw_set_share(cfg.password_hashes_per_client);
	app = app_new(&cfg, APP_CACHES, &e);
	if (app == NULL) {
		log_error("start: %s", e.msg);
		goto out;
	}
	if (strcmp(cfg.libvirt_uri, "none") != 0) {
		if (app_start_sandboxes(app, &e) < 0) {
			log_error("start: %s", e.msg);
			goto out;
		}
	} else {
		log_info("vm: AAS_LIBVIRT_URI=none; sandbox tools are unavailable");
	}
	tasks = tasks_new(app, &e);
	if (tasks == NULL) {
		log_error("start: %s", e.msg);
		goto out;
	}
	atomic_store(&app->tasks, tasks);
	mcp = mcp_new(app, &e);
	card = card_new(&app->cfg, &e);
	metrics = metrics_http_new(app, &e);
	if (mcp != NULL)
		rest = rest_new(app, &e);
	if (rest != NULL)
		pty = pty_new(app, &e);
	if (pty != NULL)
		mq = mailq_start(app->db, &app->cfg, &e);
	if (mq != NULL)
		npx = npx_new(&app->cfg, &e);
	if (npx != NULL) {
		web = web_new(app, mq, pty);
		if (web == NULL)
			err_set(&e, ERR_INTERNAL, "out of memory");
	}
	work = work_new(cfg.workers, WORK_QUEUE_MAX, &e);
	if (work != NULL) {
		struct work_limits lim = {
			.per_key_running = (size_t)cfg.max_calls_per_account,
			.per_key_queued = (size_t)cfg.max_queued_per_account,
			.max_wait_ms = (long long)cfg.queue_wait_s * 1000,
		};
		if (work_set_limits(work, &lim, &e) < 0) {
			work_free(work);
			work = NULL;
		}
	}
	if (mcp == NULL || card == NULL || metrics == NULL || rest == NULL || pty == NULL ||
	    mq == NULL || web == NULL || work == NULL) {
		log_error("start: %s", e.msg);
		goto out;
	}
	const struct http_route fixed[] = {
		{ .path = "/v1/mcp",
		    .handler = mcp_handle,
		    .ctx = mcp,
		    .error_fmt = mcp_error_fmt,
		    .head = mcp_head },
		{ .path = "/healthz", .handler = health, .ctx = app },
		{ .path = "/mcp.tgz", .handler = npx_handle, .ctx = npx },
		{ .path = "/metrics", .handler = metrics_http_handle, .ctx = metrics },
		{ .path = "/.well-known/mcp/server-card.json",
		    .handler = card_handle,
		    .ctx = card },
	};
	const struct http_route *rest_r = rest_routes(rest, &n_rest);
	size_t n_fixed = sizeof(fixed) / sizeof(fixed[0]);
	if (n_fixed + OAUTH_HTTP_ROUTES + PTY_ROUTES + n_rest + WEB_ROUTES > MAX_ROUTES) {
		log_error("start: too many HTTP routes");
		goto out;
	}
	/* The MCP and fixed routes first: the first route that matches wins. */
	memcpy(routes, fixed, sizeof(fixed));
	n_fixed += oauth_http_routes(app, routes + n_fixed, OAUTH_HTTP_ROUTES);
	n_fixed += pty_routes(pty, routes + n_fixed, PTY_ROUTES);
	memcpy(routes + n_fixed, rest_r, n_rest * sizeof(*rest_r));
	n_rest += web_routes(web, routes + n_fixed + n_rest, WEB_ROUTES);
	const struct proxy_config pcfg = {
		.max_conns = cfg.preview_max_conns,
		.max_per_sandbox = cfg.max_preview_conns_per_sandbox,
		.max_per_account = cfg.max_preview_conns_per_account,
		.idle_timeout_s = cfg.preview_timeout_s,
		.scheme = cfg.preview_scheme,
		.resolve = preview_resolve,
		.explain = preview_explain,
		.rewrite_query = preview_query_strip,
		.ctx = app,
	};
	proxy = proxy_new(&pcfg, &e);
	if (proxy == NULL) {
		log_error("start: %s", e.msg);
		goto out;
	}
	front.mcp = mcp;
	front.proxy = proxy;
	front.pty = pty;
	const struct app_hooks hooks = { front_session_ended, front_account_disabled,
		front_sandbox_ended, &front };
	app_set_hooks(app, &hooks);
	const struct http_intercept icpt = { preview_claims, app, proxy };
	struct http_auth auth;
	auth_hooks(app, &auth);
	http = http_new(&app->cfg, work, routes, n_fixed + n_rest, &icpt, &auth, &e);
	if (http == NULL) {
		log_error("start: %s", e.msg);
		goto out;
	}
	log_info("aasd %s listening on %s:%d (public %s)", AAS_VERSION, cfg.listen_host,
	    cfg.listen_port, cfg.public_url);
	sigwait(&sigs, &sig);
	log_info("aasd: signal %d, stopping", sig);
	rc = 0;
out:
	/* Nothing new is taken; workers finish (and resume their
	 * connections) before the HTTP daemon stops. */
	http_close(http);
	if (app)
		app_set_hooks(app, NULL);
	/* Calls waiting on a guest end now rather than hold the workers. */
	if (app && app->sbx)
		sbx_stop_calls(app->sbx);
	sse_finish_all();
	work_free(work);
	pty_stop(pty);
	http_free(http);
	/* Tasks stop before the service under them does. */
	if (app)
		atomic_store(&app->tasks, NULL);
	tasks_free(tasks);
	web_free(web);
	npx_free(npx);
	mailq_stop(mq);
	pty_free(pty);
	mcp_free(mcp);
	card_free(card);
	metrics_http_free(metrics);
	rest_free(rest);
	if (app)
		sbx_free(app->sbx);
	vm_events_stop();
	app_free(app);
	/* Last: the maintenance and notice threads (stopped above) may call
	 * into the proxy through the hooks until then. */
	proxy_free(proxy);
	tools_cleanup();
	curl_global_cleanup();
	return rc;
}
