/* tool_info.c - the service description. Built from configuration and the
 * catalogue on every call; it is small and calls are rare. */
#include "service/tool_info.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>

#include "base/fmt.h"
#include "sandbox/catalog.h"
#include "service/tool_impl.h"
#include "base/mcpver.h"
#include "sandbox/sandbox.h"

static const char guide[] =
    "aas gives you disposable Linux VMs (Debian 12, each with its own kernel). "
    "Lifecycle: create_sandbox returns a sandbox_id; run_command, write_file, read_file and "
    "list_files work in it; expose_port gives a server in it a URL; extend_sandbox adds "
    "minutes; destroy_sandbox when done. It is destroyed by itself at expires_at. "
    "Commands run as the user 'sandbox' in /home/sandbox, without sudo: use "
    "'pip install --user --break-system-packages' or npm, not apt-get. "
    "Services: end the command with '&' (e.g. 'python3 -m http.server 8000 &') or pass "
    "background: true; listen on 0.0.0.0, not 127.0.0.1; then expose_port. "
    "Long commands: run_command returns when the command's own process exits (at most "
    "timeout_seconds); for longer jobs pass background: true and call get_command with "
    "wait_seconds, passing back next_stdout_offset and next_stderr_offset to read only new "
    "output. Extend before expires_at (get_sandbox) when the work needs longer. "
    "Cost: a sandbox is billed per minute while it runs, its lifetime charged up front; "
    "destroy_sandbox early refunds the unused whole minutes; a paused sandbox "
    "(pause_sandbox) costs storage only until resume_sandbox. get_usage shows your credit. "
    "Every tool but get_service_info needs an API key: 'Authorization: Bearer <key>' or "
    "'x-api-key: <key>'.";

const char *
tool_guide(void)
{
	return guide;
}

static json_t *
first_sentence(const char *text)
{
	const char *dot = strstr(text, ". ");
	size_t n = dot ? (size_t)(dot - text) + 1 : strlen(text);

	return json_stringn(text, n);
}

static json_t *
tool_lines(void)
{
	json_t *arr = json_array();

	for (size_t i = 0; arr && i < tools_count(); i++) {
		json_array_append_new(arr,
		    json_pack("{s:s, s:s, s:o, s:b}", "name", tools_name_at(i), "title",
			tools_title_at(i), "summary", first_sentence(tools_description_at(i)),
			"requires_key", !tools_is_anonymous(tools_name_at(i))));
	}
	return arr;
}

static json_t *
sizes_json(const struct config *cfg)
{
	json_t *arr = json_array();

	for (size_t i = 0; arr && i < cat_count(); i++) {
		const struct cat_size *s = cat_at(i);
		json_array_append_new(arr,
		    json_pack("{s:s, s:i, s:i, s:i, s:I}", "name", s->name, "vcpus", s->vcpus,
			"memory_mib", s->memory_mib, "disk_gib", s->disk_gib, "price_per_minute",
			(json_int_t)cat_price(cfg, s)));
	}
	return arr;
}

static json_t *
versions_json(void)
{
	json_t *arr = json_array();

	/* The stateless revision first (newest), then those with sessions. */
	if (arr)
		json_array_append_new(arr, json_string(MCP_VERSION_STATELESS));
	for (size_t i = 0; arr && i < mcpver_count(); i++)
		json_array_append_new(arr, json_string(mcpver_at(i)));
	return arr;
}

static json_t *
info_run(struct call_ctx *cx, void *req, struct err *e)
{
	const struct config *cfg = &cx->app->cfg;
	char mcp_url[CONFIG_STR_MAX + 16], rest_url[CONFIG_STR_MAX + 16];
	char openapi_url[CONFIG_STR_MAX + 32], meta[CONFIG_STR_MAX + 64];
	json_t *out;

	(void)req;
	if (fmt_err(e, "public URL", mcp_url, sizeof(mcp_url), "%s/v1/mcp", cfg->public_url) < 0 ||
	    fmt_err(e, "public URL", rest_url, sizeof(rest_url), "%s/v1", cfg->public_url) < 0 ||
	    fmt_err(e, "public URL", openapi_url, sizeof(openapi_url), "%s/v1/openapi.json",
		cfg->public_url) < 0 ||
	    fmt_err(e, "public URL", meta, sizeof(meta),
		"%s/.well-known/oauth-protected-resource/v1/mcp", cfg->public_url) < 0)
		return NULL;
	out = json_pack("{s:s, s:s, s:s, s:o, s:o,"
			" s:{s:[ss], s:s, s:s, s:s},"
			" s:{s:s, s:s, s:s, s:s*},"
			" s:o,"
			" s:{s:i, s:i, s:i, s:I, s:i, s:i, s:i, s:i, s:i, s:i},"
			" s:{s:s, s:s, s:I, s:I, s:s}}",
	    "name", "aas", "version", AAS_VERSION, "description",
	    "Sandbox as a Service: a disposable Linux VM with its own kernel for each sandbox.",
	    "protocol_versions", versions_json(), "tools", tool_lines(), "auth", "headers",
	    "Authorization: Bearer <key>", "x-api-key: <key>", "key_format", "aas_sk_...",
	    "anonymous",
	    "initialize, ping, tools/list and get_service_info work without a key; every other tool needs one.",
	    "get_a_key",
	    *cfg->dashboard_url ?
		cfg->dashboard_url :
		"Ask the operator of this service for a key (aasctl account create / aasctl key create).",
	    "endpoints", "mcp", mcp_url, "rest", rest_url, "openapi", openapi_url, "dashboard",
	    *cfg->dashboard_url ? cfg->dashboard_url : NULL, "sizes", sizes_json(cfg), "limits",
	    "max_live_sandboxes", cfg->max_live_sandboxes, "max_lifetime_minutes",
	    cfg->max_lifetime_min, "default_timeout_minutes", cfg->default_timeout_min,
	    "max_request_bytes", (json_int_t)cfg->max_body_bytes, "default_output_bytes_per_stream",
	    262144, "max_output_bytes_per_stream", 4194304, "max_wait_seconds", cfg->max_wait_s,
	    "max_snapshots", cfg->max_snapshots, "snapshot_keep_minutes", cfg->snapshot_keep_min,
	    "snapshot_max_keep_minutes", cfg->snapshot_max_keep_min, "pricing", "currency", "USD",
	    "unit", "micro-USD (1,000,000 = 1 USD); every started minute is billed",
	    "free_credit_new_account", (json_int_t)cfg->free_credit, "paused_price_per_minute",
	    (json_int_t)cfg->price_storage, "billing",
	    "Minutes are charged up front at create/extend; destroy_sandbox refunds unused whole "
	    "minutes. pause_sandbox refunds the compute minutes not started; a paused sandbox "
	    "costs paused_price_per_minute, charged when it resumes or ends; resume_sandbox "
	    "charges compute again until the sandbox's expiry. snapshot_sandbox charges "
	    "paused_price_per_minute for its keep_minutes up front; delete_snapshot refunds the "
	    "minutes not begun.");
	if (out == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	if (cfg->oauth) {
		json_object_set_new(json_object_get(out, "auth"), "oauth",
		    json_pack("{s:s, s:s, s:s, s:s}", "how",
			"MCP clients that support OAuth connect with only the URL: a call that needs "
			"a credential answers 401 with the metadata below, the user logs in to the "
			"dashboard and approves the client, and the client sends its access token as "
			"'Authorization: Bearer <token>' (on /v1/mcp only).",
			"protected_resource_metadata", meta, "authorization_server",
			cfg->public_url, "scope", "mcp"));
	}
	json_object_set_new(out, "guide", json_string(guide));
	json_object_set_new(out, "capacity",
	    cx->app->sbx ? sbx_capacity(cx->app->sbx) :
			   json_pack("{s:s}", "note", "this server runs without a VM layer"));
	return out;
}

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static char *cache_text;
static size_t cache_len;
static time_t cache_built;

char *
tool_info_result_json(struct app *app, size_t *len)
{
	/* Building the cache is not a client's call; the caller counts it. */
	struct call_ctx cx = { .app = app, .internal = 1 };
	time_t now = time(NULL);
	char *copy = NULL;
	struct err e;

	err_clear(&e);
	pthread_mutex_lock(&cache_lock);
	if (cache_text == NULL || cache_built != now) {
		struct tool_call *c = tools_prepare(&cx, tools_find("get_service_info"), NULL, &e);
		json_t *res = c ? tools_call_prepared(&cx, c) : NULL;
		char *text = res ? json_dumps(res, JSON_COMPACT) : NULL;

		json_decref(res);
		tool_call_free(c);
		if (text != NULL) {
			free(cache_text);
			cache_text = text;
			cache_len = strlen(text);
			cache_built = now;
		}
	}
	if (cache_text != NULL && (copy = malloc(cache_len + 1)) != NULL) {
		memcpy(copy, cache_text, cache_len + 1);
		*len = cache_len;
	}
	pthread_mutex_unlock(&cache_lock);
	return copy;
}

static int
info_parse(const struct call_ctx *cx, const json_t *args, void *req, struct err *e)
{
	(void)cx;
	(void)args;
	(void)req;
	(void)e;
	return 0;
}

const struct tool_impl tool_info_impl = {
	"get_service_info",
	info_parse,
	info_run,
	NULL,
	tool_info_result_json,
	1,
	0,
};
