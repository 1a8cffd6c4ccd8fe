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
#include "base/fmt.h"
#include "base/keys.h"
#include "server/http.h"
#include "base/log.h"
#include "server/mcp.h"
#include "server/ngcli.h"
#include "server/deploy_check.h"
#include "server/scrape.h"
#include "vmm/orch.h"
#include "sandbox/preview.h"
#include "server/proxy.h"
#include "server/rest.h"
#include "server/pty.h"
#include "server/npx.h"
#include "server/authsrv.h"
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
		fmt_cut(range, sizeof(range), "%u-%u", (unsigned)conf.vm_uid_first,
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
		fmt_cut(out->message, sizeof(out->message),
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

/* Everything the service runs, in the order it starts; stop() frees what
 * was made, whatever the point start or serve reached. */
struct daemon {
	struct config cfg;
	struct app *app;
	struct tasks *tasks;
	struct mcp *mcp;
	struct card *card;
	struct scrape *metrics;
	struct rest *rest;
	struct pty_hub *pty;
	struct mailq *mq;
	struct npx *npx;
	struct web *web;
	struct work_pool *work;
	struct http_route routes[MAX_ROUTES];
	size_t n_routes;
	struct proxy *proxy;
	struct front front;
	struct http_server *http;
};

/* The modes that do one thing and exit: the exit status. */
static int
one_shot(const char *arg)
{
	if (strcmp(arg, "--config-table") == 0) {
		printf("| Variable | Default | Meaning |\n|---|---|---|\n");
		config_print_table(print_config_row, NULL);
		return 0;
	}
	if (strcmp(arg, "--check-deployment") == 0)
		return dcheck_main();
	if (ngcli_is(arg))
		return ngcli_main(arg);
	fprintf(stderr,
	    "usage: aasd [--config-table | --check-deployment | --netguard-rules |\n"
	    "             --netguard-rules-hash | --netguard-users | --netguard-install |\n"
	    "             --netguard-watch]\n"
	    "Configuration comes from AAS_* environment variables; see docs/configuration.md.\n");
	return 2;
}

/* The settings, the signals (taken by the main thread only), and the
 * process-wide state the parts use; exits on failure. */
static void
setup(struct config *cfg, sigset_t *sigs)
{
	struct err e;

	err_clear(&e);
	if (config_load(cfg, env_get, &e) < 0)
		log_fatal("config: %s", e.msg);
	log_set_level((enum log_level)cfg->log_level);

	/* Signals are taken synchronously by the main thread only. */
	sigemptyset(sigs);
	sigaddset(sigs, SIGINT);
	sigaddset(sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (tools_init(&e) < 0)
		log_fatal("tools: %s", e.msg);
	/* Before any thread: libcurl's global state (mail). */
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0)
		log_fatal("start: libcurl did not initialise");
	pw_set_concurrency(cfg->password_hashes);
	pw_set_share(cfg->password_hashes_per_client);
}

/* The service and its front ends, each after the one it needs: 0, or -1
 * with e saying why. */
static int
start_parts(struct daemon *d, struct err *e)
{
	const struct config *cfg = &d->cfg;

	if ((d->app = app_new(cfg, APP_CACHES, e)) == NULL)
		return -1;
	if (strcmp(cfg->libvirt_uri, "none") != 0) {
		if (app_start_sandboxes(d->app, e) < 0)
			return -1;
	} else {
		log_info("vm: AAS_LIBVIRT_URI=none; sandbox tools are unavailable");
	}
	if ((d->tasks = tasks_new(d->app, e)) == NULL)
		return -1;
	atomic_store(&d->app->tasks, d->tasks);
	d->mcp = mcp_new(d->app, e);
	d->card = card_new(&d->app->cfg, e);
	d->metrics = scrape_new(d->app, e);
	if (d->mcp != NULL)
		d->rest = rest_new(d->app, e);
	if (d->rest != NULL)
		d->pty = pty_new(d->app, e);
	if (d->pty != NULL)
		d->mq = mailq_start(d->app->db, &d->app->cfg, e);
	if (d->mq != NULL)
		d->npx = npx_new(&d->app->cfg, e);
	if (d->npx != NULL) {
		d->web = web_new(d->app, d->mq, d->pty);
		if (d->web == NULL)
			err_set(e, ERR_INTERNAL, "out of memory");
	}
	d->work = work_new(cfg->workers, WORK_QUEUE_MAX, e);
	if (d->work != NULL) {
		struct work_limits lim = {
			.per_key_running = (size_t)cfg->max_calls_per_account,
			.per_key_queued = (size_t)cfg->max_queued_per_account,
			.max_wait_ms = (long long)cfg->queue_wait_s * 1000,
		};
		if (work_set_limits(d->work, &lim, e) < 0) {
			work_free(d->work);
			d->work = NULL;
		}
	}
	if (d->mcp == NULL || d->card == NULL || d->metrics == NULL || d->rest == NULL ||
	    d->pty == NULL || d->mq == NULL || d->web == NULL || d->work == NULL)
		return -1;
	return 0;
}

/* d->routes: the MCP and fixed routes first (the first route that
 * matches wins), then OAuth, the terminal, REST and the dashboard. */
static int
route_table(struct daemon *d)
{
	const struct http_route fixed[] = {
		{ .path = "/v1/mcp",
		    .handler = mcp_handle,
		    .ctx = d->mcp,
		    .error_fmt = mcp_error_fmt,
		    .head = mcp_head },
		{ .path = "/healthz", .handler = health, .ctx = d->app },
		{ .path = "/mcp.tgz", .handler = npx_handle, .ctx = d->npx },
		{ .path = "/metrics", .handler = scrape_handle, .ctx = d->metrics },
		{ .path = "/.well-known/mcp/server-card.json",
		    .handler = card_handle,
		    .ctx = d->card },
	};
	size_t n_rest = 0;
	const struct http_route *rest_r = rest_routes(d->rest, &n_rest);
	size_t n_fixed = sizeof(fixed) / sizeof(fixed[0]);

	if (n_fixed + OAUTH_HTTP_ROUTES + PTY_ROUTES + n_rest + WEB_ROUTES > MAX_ROUTES) {
		log_error("start: too many HTTP routes");
		return -1;
	}
	memcpy(d->routes, fixed, sizeof(fixed));
	n_fixed += authsrv_routes(d->app, d->routes + n_fixed, OAUTH_HTTP_ROUTES);
	n_fixed += pty_routes(d->pty, d->routes + n_fixed, PTY_ROUTES);
	memcpy(d->routes + n_fixed, rest_r, n_rest * sizeof(*rest_r));
	n_rest += web_routes(d->web, d->routes + n_fixed + n_rest, WEB_ROUTES);
	d->n_routes = n_fixed + n_rest;
	return 0;
}

/* The preview proxy, the hooks that close what another process ended,
 * and the HTTP server on its port: 0, or -1 with e saying why. */
static int
serve(struct daemon *d, struct err *e)
{
	const struct config *cfg = &d->cfg;
	const struct proxy_config pcfg = {
		.max_conns = cfg->preview_max_conns,
		.max_per_sandbox = cfg->max_preview_conns_per_sandbox,
		.max_per_account = cfg->max_preview_conns_per_account,
		.idle_timeout_s = cfg->preview_timeout_s,
		.scheme = cfg->preview_scheme,
		.resolve = preview_resolve,
		.explain = preview_explain,
		.rewrite_query = preview_query_strip,
		.ctx = d->app,
	};
	struct http_auth auth;

	if ((d->proxy = proxy_new(&pcfg, e)) == NULL)
		return -1;
	d->front.mcp = d->mcp;
	d->front.proxy = d->proxy;
	d->front.pty = d->pty;
	const struct app_hooks hooks = { front_session_ended, front_account_disabled,
		front_sandbox_ended, &d->front };
	app_set_hooks(d->app, &hooks);
	const struct http_intercept icpt = { preview_claims, d->app, d->proxy };
	auth_hooks(d->app, &auth);
	d->http = http_new(&d->app->cfg, d->work, d->routes, d->n_routes, &icpt, &auth, e);
	return d->http ? 0 : -1;
}

/* Ends what start and serve made, in the order that lets each part finish
 * with the ones it still uses. */
static void
stop(struct daemon *d)
{
	/* Nothing new is taken; workers finish (and resume their
	 * connections) before the HTTP daemon stops. */
	http_close(d->http);
	if (d->app)
		app_set_hooks(d->app, NULL);
	/* Calls waiting on a guest end now rather than hold the workers. */
	if (d->app && d->app->sbx)
		sbx_stop_calls(d->app->sbx);
	sse_finish_all();
	work_free(d->work);
	pty_stop(d->pty);
	http_free(d->http);
	/* Tasks stop before the service under them does. */
	if (d->app)
		atomic_store(&d->app->tasks, NULL);
	tasks_free(d->tasks);
	web_free(d->web);
	npx_free(d->npx);
	mailq_stop(d->mq);
	pty_free(d->pty);
	mcp_free(d->mcp);
	card_free(d->card);
	scrape_free(d->metrics);
	rest_free(d->rest);
	if (d->app)
		sbx_free(d->app->sbx);
	vm_events_stop();
	app_free(d->app);
	/* Last: the maintenance and notice threads (stopped above) may call
	 * into the proxy through the hooks until then. */
	proxy_free(d->proxy);
	tools_cleanup();
	curl_global_cleanup();
}

int
main(int argc, char **argv)
{
	struct daemon d;
	struct err e;
	sigset_t sigs;
	int sig = 0, rc = 1;

	if (argc > 1)
		return one_shot(argv[1]);
	memset(&d, 0, sizeof(d));
	setup(&d.cfg, &sigs);
	err_clear(&e);
	if (start_parts(&d, &e) < 0) {
		log_error("start: %s", e.msg);
		goto out;
	}
	if (route_table(&d) < 0)
		goto out;
	if (serve(&d, &e) < 0) {
		log_error("start: %s", e.msg);
		goto out;
	}
	log_info("aasd %s listening on %s:%d (public %s)", AAS_VERSION, d.cfg.listen_host,
	    d.cfg.listen_port, d.cfg.public_url);
	sigwait(&sigs, &sig);
	log_info("aasd: signal %d, stopping", sig);
	rc = 0;
out:
	stop(&d);
	return rc;
}
