/* br_rpc.c - MCP methods over stdio, and the workers for tools/call. */
#include "bridge/br_rpc.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/version.h"
#include "bridge/br_api.h"
#include "bridge/br_catalog.h"
#include "bridge/br_io.h"
#include "bridge/br_tools.h"
#include "base/fmt.h"
#include "base/jsonrpc.h"
#include "base/log.h"
#include "base/mcpmeth.h"
#include "base/mcpver.h"

#define BR_WORKERS 4
#define BR_MAX_CALLS 32         /* running or queued */
#define BR_MAX_LINE (24u << 20) /* write_file's base64 and then some */

/* As the server (mcp.c): newest first. */

static const char instructions[] =
    "aas gives you disposable Linux VMs (Debian 12, each with its own kernel); this local "
    "bridge forwards the aas tools to the aas REST API with your key. Typical flow: "
    "create_sandbox, then run_command / write_file / read_file / list_files, then "
    "destroy_sandbox when done. Commands run as the unprivileged user 'sandbox' in "
    "/home/sandbox, without sudo. To move a project, sync_to_sandbox copies a local "
    "directory in (only changed files) and sync_from_sandbox copies results back; both "
    "need absolute local paths.";

/* One tools/call, from the queue to its answer. */
struct call {
	int used;
	json_t *id; /* request id */
	json_t *params;
	json_t *token; /* progressToken, or NULL */
	double last_progress;
	atomic_int cancelled;
};

struct br_rpc {
	const struct br_config *cfg;
	struct br_http *http;
	struct br_in *in;
	struct br_out *out;
	pthread_t workers[BR_WORKERS];
	int n_workers;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct call calls[BR_MAX_CALLS];
	int queue[BR_MAX_CALLS]; /* indexes into calls, FIFO */
	int q_head, q_len;
	int closing; /* no more work will come */
	atomic_int stop;
};

static void
send_msg(struct br_rpc *r, json_t *msg)
{
	if (msg != NULL && br_out_send(r->out, msg) < 0)
		log_debug("stdout is closed; a message was dropped");
	json_decref(msg);
}

/* ---- progress ---- */

struct progress_sink {
	struct br_rpc *r;
	struct call *call;
};

static void
progress_out(void *p, double done, double total, const char *message)
{
	struct progress_sink *ps = p;

	if (ps->call->token == NULL || done <= ps->call->last_progress)
		return; /* progress must increase */
	ps->call->last_progress = done;
	send_msg(ps->r, rpc_progress(ps->call->token, done, total, message));
}

/* ---- workers ---- */

static void
run_call(struct br_rpc *r, struct call *call)
{
	const char *name = json_string_value(json_object_get(call->params, "name"));
	struct progress_sink ps = { r, call };
	struct br_call c = { r->http, r->cfg, &call->cancelled, progress_out, &ps };
	struct timespec t0, t1;
	const char *outcome;
	json_t *res;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	res = br_tools_call(&c, name, json_object_get(call->params, "arguments"));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (res == NULL)
		outcome = "failed";
	else if (json_is_true(json_object_get(res, "isError")))
		outcome = "error";
	else
		outcome = "ok";
	log_info("tool %s: %s in %ld ms", name, outcome,
	    (long)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000));
	if (atomic_load(&call->cancelled)) {
		json_decref(res); /* a cancelled request gets no answer */
		return;
	}
	if (res == NULL)
		send_msg(r, rpc_error(call->id, RPC_INTERNAL_ERROR, "tool failed", NULL));
	else
		send_msg(r, rpc_result(call->id, res));
}

static void
release(struct br_rpc *r, struct call *call)
{
	pthread_mutex_lock(&r->lock);
	json_decref(call->id);
	json_decref(call->params);
	call->id = call->params = call->token = NULL;
	call->used = 0;
	pthread_mutex_unlock(&r->lock);
}

static void *
worker(void *p)
{
	struct br_rpc *r = p;

	for (;;) {
		struct call *call;

		pthread_mutex_lock(&r->lock);
		while (r->q_len == 0 && !r->closing)
			pthread_cond_wait(&r->wake, &r->lock);
		if (r->q_len == 0) {
			pthread_mutex_unlock(&r->lock);
			return NULL;
		}
		call = &r->calls[r->queue[r->q_head]];
		r->q_head = (r->q_head + 1) % BR_MAX_CALLS;
		r->q_len--;
		pthread_mutex_unlock(&r->lock);
		if (!atomic_load(&call->cancelled))
			run_call(r, call);
		release(r, call);
	}
}

/* Queues a tools/call; -1 when BR_MAX_CALLS are already in hand. */
static int
enqueue(struct br_rpc *r, json_t *id, json_t *params, json_t *token)
{
	int slot = -1;

	pthread_mutex_lock(&r->lock);
	for (int i = 0; i < BR_MAX_CALLS && slot < 0; i++)
		if (!r->calls[i].used)
			slot = i;
	if (slot >= 0) {
		struct call *call = &r->calls[slot];
		call->used = 1;
		call->id = json_incref(id);
		call->params = json_incref(params);
		call->token = token; /* held by params */
		call->last_progress = 0;
		atomic_store(&call->cancelled, 0);
		r->queue[(r->q_head + r->q_len) % BR_MAX_CALLS] = slot;
		r->q_len++;
		pthread_cond_signal(&r->wake);
	}
	pthread_mutex_unlock(&r->lock);
	return slot < 0 ? -1 : 0;
}

static void
cancel_matching(struct br_rpc *r, const json_t *id)
{
	pthread_mutex_lock(&r->lock);
	for (int i = 0; i < BR_MAX_CALLS; i++) {
		struct call *call = &r->calls[i];
		if (call->used && (id == NULL || json_equal(call->id, (json_t *)id)))
			atomic_store(&call->cancelled, 1);
	}
	pthread_mutex_unlock(&r->lock);
}

/* ---- methods (reading thread) ---- */

static json_t *
do_initialize(void *ctx, struct rpc_msg *msg)
{
	const char *asked = json_string_value(json_object_get(msg->params, "protocolVersion"));
	const char *version = mcpver_at(0);

	(void)ctx;
	if (!json_is_object(msg->params) || asked == NULL)
		return rpc_error(msg->id, RPC_INVALID_PARAMS, "params.protocolVersion is required",
		    NULL);
	if (mcpver_supported(asked))
		version = asked;
	/* One member of the result a line. */
	/* clang-format off */
	return rpc_result(msg->id, json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s, s:s}, s:s}",
	    "protocolVersion", version,
	    "capabilities", "tools", "listChanged", 0,
	    "serverInfo", "name", "aas-mcp", "title", "aas (Sandbox as a Service) bridge",
	    "version", AAS_VERSION,
	    "instructions", instructions));
	/* clang-format on */
}

static json_t *
do_tools_call(void *ctx, struct rpc_msg *msg)
{
	struct br_rpc *r = ctx;
	const char *name = json_string_value(json_object_get(msg->params, "name"));
	json_t *args = json_object_get(msg->params, "arguments");
	json_t *token = json_object_get(json_object_get(msg->params, "_meta"), "progressToken");
	char text[200];

	if (!json_is_object(msg->params) || name == NULL)
		return rpc_error(msg->id, RPC_INVALID_PARAMS, "tools/call needs params.name", NULL);
	if (!br_tools_exists(name)) {
		fmt_cut(text, sizeof(text), "Unknown tool: %.120s (tools/list names the tools)",
		    name);
		return rpc_error(msg->id, RPC_INVALID_PARAMS, text, NULL);
	}
	if (args != NULL && !json_is_object(args))
		return rpc_error(msg->id, RPC_INVALID_PARAMS, "params.arguments must be an object",
		    NULL);
	if (token != NULL && !json_is_string(token) && !json_is_integer(token))
		token = NULL;
	if (enqueue(r, msg->id, msg->params, token) < 0) {
		fmt_cut(text, sizeof(text),
		    "too many tool calls in progress (%d); retry when "
		    "one has finished",
		    BR_MAX_CALLS);
		return rpc_error(msg->id, RPC_SERVER_ERROR, text, NULL);
	}
	return NULL;
}

static json_t *
do_tools_list(void *ctx, struct rpc_msg *msg)
{
	json_t *bad = mcpmeth_one_page(msg);

	(void)ctx;
	return bad ? bad : rpc_result(msg->id, br_catalog_list());
}

static void
cancel_call(void *ctx, json_t *request_id)
{
	cancel_matching(ctx, request_id);
}

static const struct mcpmeth methods[] = {
	{ "initialize", do_initialize },
	{ "ping", mcpmeth_ping },
	{ "tools/list", do_tools_list },
	{ "tools/call", do_tools_call },
};

/* The bridge sends no requests (responses need nothing) and does nothing
 * with a notification but a cancellation. */
static const struct mcpmeth_set endpoint = {
	.table = methods,
	.n = sizeof(methods) / sizeof(methods[0]),
	.cancel = cancel_call,
};

static void
handle_line(struct br_rpc *r, const char *line, size_t len)
{
	char text[200];
	json_t *raw;

	while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
		len--;
	if (len == 0)
		return;
	raw = rpc_parse(line, len, text, sizeof(text));
	if (raw == NULL) {
		send_msg(r, rpc_error(NULL, RPC_PARSE_ERROR, text, NULL));
		return;
	}
	if (json_is_array(raw))
		send_msg(r,
		    rpc_error(NULL, RPC_INVALID_REQUEST,
			"Invalid Request: batches are not supported on stdio", NULL));
	else
		send_msg(r, mcpmeth_handle(&endpoint, r, raw));
	json_decref(raw);
}

/* ---- life cycle ---- */

struct br_rpc *
br_rpc_new(const struct br_config *cfg, struct br_http *http, int in_fd, int out_fd, struct err *e)
{
	struct br_rpc *r = calloc(1, sizeof(*r));

	if (r == NULL || (r->in = br_in_new(in_fd, BR_MAX_LINE)) == NULL ||
	    (r->out = br_out_new(out_fd)) == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		br_rpc_free(r);
		return NULL;
	}
	r->cfg = cfg;
	r->http = http;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->wake, NULL);
	atomic_init(&r->stop, 0);
	for (int i = 0; i < BR_WORKERS; i++) {
		if (pthread_create(&r->workers[i], NULL, worker, r) != 0) {
			err_set(e, ERR_INTERNAL, "cannot start a worker thread");
			br_rpc_free(r);
			return NULL;
		}
		r->n_workers++;
	}
	return r;
}

static void
join_workers(struct br_rpc *r)
{
	pthread_mutex_lock(&r->lock);
	r->closing = 1;
	pthread_cond_broadcast(&r->wake);
	pthread_mutex_unlock(&r->lock);
	for (int i = 0; i < r->n_workers; i++)
		pthread_join(r->workers[i], NULL);
	r->n_workers = 0;
}

void
br_rpc_free(struct br_rpc *r)
{
	if (r == NULL)
		return;
	if (r->n_workers > 0) {
		cancel_matching(r, NULL);
		join_workers(r);
	}
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->wake);
	br_in_free(r->in);
	br_out_free(r->out);
	free(r);
}

void
br_rpc_stop(struct br_rpc *r)
{
	atomic_store(&r->stop, 1);
	/* Locks are not for signal handlers; the flags are atomic. */
	for (int i = 0; i < BR_MAX_CALLS; i++)
		atomic_store(&r->calls[i].cancelled, 1);
}

int
br_rpc_run(struct br_rpc *r)
{
	int rc = 0;

	while (!atomic_load(&r->stop)) {
		char *line;
		size_t len;
		enum br_in_status st = br_in_next(r->in, &line, &len);

		if (st == BR_IN_LINE) {
			handle_line(r, line, len);
		} else if (st == BR_IN_TOO_LONG) {
			char text[96];
			fmt_cut(text, sizeof(text), "Parse error: message longer than %u bytes",
			    BR_MAX_LINE);
			send_msg(r, rpc_error(NULL, RPC_PARSE_ERROR, text, NULL));
		} else if (st == BR_IN_EOF) {
			break;
		} else if (st == BR_IN_ERROR) {
			log_error("reading stdin failed");
			rc = -1;
			break;
		}
	}
	/* End of input lets the calls in hand finish; a stop cancels them. */
	if (atomic_load(&r->stop))
		cancel_matching(r, NULL);
	join_workers(r);
	return rc;
}
