/* mcp_rpc.c - MCP methods: initialize, ping, tools/list, tools/call (JSON
 * or SSE with progress), notifications, and the registry that lets
 * notifications/cancelled reach a running call. Runs on worker threads. */
#include "server/mcp_int.h"

#include <stdlib.h>
#include <string.h>

#include "base/fmt.h"
#include "base/log.h"
#include "base/mcpmeth.h"
#include "base/mcpver.h"
#include "base/toolres.h"
#include "base/metrics.h"
#include "service/tools.h"

/* ---- in-flight registry ---- */

static struct inflight *
inflight_add(struct mcp *m, const char *session, json_t *id)
{
	struct inflight *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return NULL;
	f->id_json = json_dumps(id, JSON_COMPACT | JSON_ENCODE_ANY);
	if (f->id_json == NULL || fmt_buf(f->session, sizeof(f->session), "%s", session) < 0) {
		free(f->id_json);
		free(f);
		return NULL;
	}
	atomic_init(&f->cancelled, 0);
	pthread_mutex_lock(&m->lock);
	if (m->n_inflight >= MCP_MAX_INFLIGHT) {
		pthread_mutex_unlock(&m->lock);
		free(f->id_json);
		free(f);
		return NULL;
	}
	f->next = m->inflight;
	m->inflight = f;
	m->n_inflight++;
	pthread_mutex_unlock(&m->lock);
	return f;
}

static void
inflight_remove(struct mcp *m, struct inflight *f)
{
	if (f == NULL)
		return;
	pthread_mutex_lock(&m->lock);
	for (struct inflight **pp = &m->inflight; *pp; pp = &(*pp)->next) {
		if (*pp == f) {
			*pp = f->next;
			m->n_inflight--;
			break;
		}
	}
	pthread_mutex_unlock(&m->lock);
	free(f->id_json);
	free(f);
}

static void
inflight_cancel(struct mcp *m, const char *session, json_t *id)
{
	char *want = json_dumps(id, JSON_COMPACT | JSON_ENCODE_ANY);

	if (want == NULL)
		return;
	pthread_mutex_lock(&m->lock);
	for (struct inflight *f = m->inflight; f; f = f->next) {
		if (strcmp(f->session, session) == 0 && strcmp(f->id_json, want) == 0) {
			atomic_store(&f->cancelled, 1);
			log_info("mcp: request %s cancelled by the client", want);
		}
	}
	pthread_mutex_unlock(&m->lock);
	free(want);
}

/* ---- progress over SSE ---- */

struct progress_sink {
	struct sse *sse;
	json_t *token;
	double last;
	struct sse_gate gate; /* dropped while the client was behind */
};

static void
send_progress(struct progress_sink *ps, double progress, double total, const char *message)
{
	json_t *note = rpc_progress(ps->token, progress, total, message);
	char *text;

	text = note ? json_dumps(note, JSON_COMPACT) : NULL;
	if (text)
		sse_send_message(ps->sse, text, strlen(text));
	free(text);
	json_decref(note);
}

/* Says how many notifications were dropped, once there is room again or
 * before the result. */
static void
send_drop_notice(struct progress_sink *ps)
{
	char msg[256];

	if (ps->gate.dropped == 0)
		return;
	fmt_cut(msg, sizeof(msg),
	    "notice: %lu progress notifications were dropped because the client reads too "
	    "slowly; the result (and get_command for a command's output) has everything",
	    ps->gate.dropped);
	ps->gate.dropped = 0;
	/* The progress of the last dropped one: above what went before. */
	send_progress(ps, ps->gate.dropped_at, 0, msg);
}

static void
progress_to_sse(void *p, double progress, double total, const char *message)
{
	struct progress_sink *ps = p;

	if (ps->token == NULL || progress <= ps->last)
		return; /* progress must increase */
	ps->last = progress;
	/* A slow client: drop rather than queue without bound. */
	if (!sse_gate_pass(ps->sse, &ps->gate, progress))
		return;
	send_drop_notice(ps);
	send_progress(ps, progress, total, message);
}

const char *
mcp_instructions(void)
{
	return tool_guide();
}

json_t *
mcp_icons(const struct config *cfg)
{
	char src[CONFIG_STR_MAX + 32];

	/* The dashboard's own icon, once for the server: no tool carries one. */
	if (fmt_buf(src, sizeof(src), "%s/static/icon.svg", cfg->public_url) < 0)
		return NULL;
	return json_pack("[{s:s, s:s, s:[s]}]", "src", src, "mimeType", "image/svg+xml", "sizes",
	    "any");
}

/* ---- method handlers (worker thread) ---- */

static json_t *
do_initialize(struct call_env *env, struct rpc_msg *msg, char *new_session, struct err *e)
{
	json_t *params = msg->params;
	const char *asked = json_string_value(json_object_get(params, "protocolVersion"));
	json_t *client = json_object_get(params, "clientInfo");
	struct sess_limits lim;
	const char *version;

	if (!json_is_object(params) || asked == NULL) {
		err_set_field(e, "params.protocolVersion", "params.protocolVersion is required");
		return NULL;
	}
	version = mcpver_supported(asked) ? asked : mcpver_at(0);
	sess_limits_from(&env->m->app->cfg, &lim);
	if (sess_create(env->m->app->db, &lim, version, env->account_id, env->credential,
		json_string_value(json_object_get(client, "name")),
		json_string_value(json_object_get(client, "version")), new_session, e) < 0) {
		/* No session was made: no Mcp-Session-Id goes out. */
		new_session[0] = '\0';
		return NULL;
	}
	/* One member of the result a line. */
	/* clang-format off */
	return json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s, s:s, s:s, s:o}, s:s}",
	    "protocolVersion", version,
	    "capabilities", "tools", "listChanged", 0,
	    "serverInfo", "name", "aas", "title", "Sandbox as a Service",
	    "version", AAS_VERSION,
	    "description", "Disposable Linux VMs with their own kernel, for agents.",
	    "icons", mcp_icons(&env->m->app->cfg),
	    "instructions", mcp_instructions());
	/* clang-format on */
}

/* A JSON-RPC error object for a failed request. */
static json_t *
error_for(json_t *id, const struct err *e)
{
	int code = RPC_SERVER_ERROR;

	/* Only a fault of the service is "internal"; a limit, a refusal or an
	 * outage is a server error whose message says which. */
	switch (e->kind) {
	case ERR_INVALID:
	case ERR_NOT_FOUND:
		code = RPC_INVALID_PARAMS;
		break;
	case ERR_INTERNAL:
	case ERR_NONE:
		code = RPC_INTERNAL_ERROR;
		break;
	default:
		break;
	}
	return rpc_error(id, code, e->msg, NULL);
}

static void
call_ctx_init(struct call_ctx *cx, struct call_env *env)
{
	memset(cx, 0, sizeof(*cx));
	cx->app = env->m->app;
	cx->account_id = env->account_id;
	cx->request_id = env->req ? http_request_id(env->req) : "-";
}

static json_t *
tools_call_params(struct rpc_msg *msg, const struct tool **tool, json_t **args, json_t **token)
{
	const char *name = json_string_value(json_object_get(msg->params, "name"));
	json_t *meta;

	*args = json_object_get(msg->params, "arguments");
	meta = json_object_get(msg->params, "_meta");
	*token = json_object_get(meta, "progressToken");
	if (*token && !json_is_string(*token) && !json_is_integer(*token))
		*token = NULL;
	if (!json_is_object(msg->params) || name == NULL)
		return rpc_error(msg->id, RPC_INVALID_PARAMS, "tools/call needs params.name", NULL);
	if ((*tool = tools_find(name)) == NULL) {
		char text[200];
		metrics_tool_call(NULL, ERR_INVALID); /* tool="other" */
		fmt_cut(text, sizeof(text), "Unknown tool: %.120s (tools/list names the tools)",
		    name);
		return rpc_error(msg->id, RPC_INVALID_PARAMS, text, NULL);
	}
	if (*args != NULL && !json_is_object(*args))
		return rpc_error(msg->id, RPC_INVALID_PARAMS, "params.arguments must be an object",
		    NULL);
	return NULL;
}

/* 2026-07-28: closing the response stream cancels the call. The flag is
 * shared by the call and the stream's close callback, which may run
 * after the call ended (once the last byte went out): whichever is last
 * frees it. */
struct close_cancel {
	atomic_int cancelled;
	atomic_int refs;
};

static void
close_cancel_drop(struct close_cancel *cc)
{
	if (atomic_fetch_sub(&cc->refs, 1) == 1)
		free(cc);
}

static void
close_cancel_fire(void *arg)
{
	struct close_cancel *cc = arg;

	atomic_store(&cc->cancelled, 1);
	close_cancel_drop(cc);
}

/* tools/call answered as an SSE stream: progress notifications, then the
 * result. The HTTP reply leaves before the tool runs; req is not touched
 * after http_send_now. Returns 1 when it took over the reply. */
static int
tools_call_streamed(struct call_env *env, struct rpc_msg *msg, struct tool_call *call,
    json_t *token)
{
	struct progress_sink ps = { NULL, token, 0, { 0, 0 } };
	struct close_cancel *cc = NULL;
	struct call_ctx cx;
	struct inflight *f;
	json_t *res, *reply;
	char *text;

	f = inflight_add(env->m, env->session_id, msg->id);
	if (f == NULL)
		return 0;
	ps.sse = http_reply_sse(env->req, 200);
	if (ps.sse == NULL) {
		inflight_remove(env->m, f);
		return 0;
	}
	call_ctx_init(&cx, env);
	http_send_now(env->req);
	env->req = NULL;
	if (token != NULL) {
		cx.progress = progress_to_sse;
		cx.progress_sink = &ps;
	}
	cx.cancelled = &f->cancelled;
	if (env->stateless && (cc = calloc(1, sizeof(*cc))) != NULL) {
		atomic_init(&cc->refs, 2);
		cx.cancelled = &cc->cancelled;
		sse_on_close(ps.sse, close_cancel_fire, cc);
	}
	res = tools_call_prepared(&cx, call);
	if (atomic_load(&f->cancelled) || (cc && atomic_load(&cc->cancelled))) {
		/* A cancelled request gets no result. */
		json_decref(res);
	} else {
		send_drop_notice(&ps);
		reply = rpc_result(msg->id, env->stateless ? mcp_era_result(res) : res);
		text = reply ? json_dumps(reply, JSON_COMPACT) : NULL;
		if (text)
			sse_send_message(ps.sse, text, strlen(text));
		free(text);
		json_decref(reply);
	}
	sse_finish(ps.sse);
	sse_unref(ps.sse);
	if (cc)
		close_cancel_drop(cc);
	inflight_remove(env->m, f);
	return 1;
}

static json_t *
do_tools_call(struct call_env *env, struct rpc_msg *msg, int *streamed)
{
	const struct tool *tool = NULL;
	struct tool_call *call;
	json_t *args, *token, *bad, *res;
	struct call_ctx cx;
	struct inflight *f;
	struct err e;

	bad = tools_call_params(msg, &tool, &args, &token);
	if (bad)
		return bad;
	if (env->stateless && mcp_era_wants_task(msg->params, tool_name(tool), args))
		return mcp_era_task_call(env, msg, tool, args);
	if (env->req)
		http_log_detail(env->req, "tool", tool_name(tool));
	call_ctx_init(&cx, env);
	/* Refused calls are answered at once, unstreamed. */
	err_clear(&e);
	if ((call = tools_prepare(&cx, tool, args, &e)) == NULL) {
		res = toolres_error(&e);
		return rpc_result(msg->id, env->stateless ? mcp_era_result(res) : res);
	}
	if (!env->in_batch && env->req && (token != NULL || tool_is_long(tool))) {
		*streamed = tools_call_streamed(env, msg, call, token);
		if (*streamed) {
			tool_call_free(call);
			return NULL;
		}
	}
	f = inflight_add(env->m, env->session_id, msg->id);
	cx.cancelled = f ? &f->cancelled : NULL;
	res = tools_call_prepared(&cx, call);
	inflight_remove(env->m, f);
	tool_call_free(call);
	return rpc_result(msg->id, env->stateless ? mcp_era_result(res) : res);
}

/* ---- the method tables ---- */

/* One message's context for the method tables. */
struct msg_ctx {
	struct call_env *env;
	char *new_session; /* NULL where no session may be made */
	int *streamed;
};

static void
msg_seen(void *ctx, const struct rpc_msg *msg)
{
	struct msg_ctx *c = ctx;

	if (c->env->req)
		http_log_detail(c->env->req, "rpc", msg->method);
	metrics_mcp_message(msg->method);
}

/* Only a session's own calls can be cancelled. */
static void
msg_cancel(void *ctx, json_t *request_id)
{
	struct msg_ctx *c = ctx;

	if (c->env->session_id)
		inflight_cancel(c->env->m, c->env->session_id, request_id);
}

static json_t *
m_initialize(void *ctx, struct rpc_msg *msg)
{
	struct msg_ctx *c = ctx;
	struct err e;
	json_t *r;

	if (c->env->in_batch || c->new_session == NULL)
		return rpc_error(msg->id, RPC_INVALID_REQUEST,
		    "initialize must be sent alone, without a session", NULL);
	err_clear(&e);
	r = do_initialize(c->env, msg, c->new_session, &e);
	return r ? rpc_result(msg->id, r) : error_for(msg->id, &e);
}

static json_t *
m_tools_list(void *ctx, struct rpc_msg *msg)
{
	json_t *bad = mcpmeth_one_page(msg);

	(void)ctx;
	return bad ? bad : rpc_result(msg->id, tools_list_result());
}

static json_t *
m_tools_call(void *ctx, struct rpc_msg *msg)
{
	struct msg_ctx *c = ctx;

	return do_tools_call(c->env, msg, c->streamed);
}

static json_t *
m_discover(void *ctx, struct rpc_msg *msg)
{
	(void)ctx;
	return rpc_result(msg->id, mcp_era_discover());
}

static json_t *
m_era_tools_list(void *ctx, struct rpc_msg *msg)
{
	json_t *bad = mcpmeth_one_page(msg);

	(void)ctx;
	return bad ? bad : rpc_result(msg->id, mcp_era_tools_list());
}

static json_t *
m_tasks(void *ctx, struct rpc_msg *msg)
{
	struct msg_ctx *c = ctx;

	return mcp_era_task_method(c->env, msg);
}

static const struct mcpmeth methods[] = {
	{ "initialize", m_initialize },
	{ "ping", mcpmeth_ping },
	{ "tools/list", m_tools_list },
	{ "tools/call", m_tools_call },
};

/* 2026-07-28: no initialize, no ping; discover instead. */
static const struct mcpmeth era_methods[] = {
	{ "server/discover", m_discover },
	{ "tools/list", m_era_tools_list },
	{ "tools/call", m_tools_call },
	{ "tasks/", m_tasks },
};

json_t *
mcp_handle_message(struct call_env *env, json_t *raw, char *new_session, int *streamed)
{
	struct msg_ctx c = { env, new_session, streamed };
	const struct mcpmeth_set m = {
		.table = env->stateless ? era_methods : methods,
		.n = env->stateless ? sizeof(era_methods) / sizeof(era_methods[0]) :
				      sizeof(methods) / sizeof(methods[0]),
		.seen = msg_seen,
		.cancel = msg_cancel,
	};

	return mcpmeth_handle(&m, &c, raw);
}
