/* card.c - the server card.
 *
 * Shape: Smithery's static server card (serverInfo, authentication, tools,
 * resources, prompts; smithery.ai/docs/build/publish) with the fields of
 * the SEP-1649 draft that say where to connect (version, protocolVersion,
 * transport), and a top-level configSchema whose apiKey property carries
 * "x-from": {"header": "x-api-key"} (smithery.ai/docs/build/session-config):
 * Smithery asks its user for the key and sends it in that header. */
#include "server/card.h"

#include <stdlib.h>
#include <string.h>

#include "service/app.h"
#include "base/fmt.h"
#include "base/mcpver.h"
#include "server/mcp.h"
#include "service/tools.h"

struct card {
	char *text;
	size_t len;
};

static json_t *
tools_json(void)
{
	static const char *const fields[] = { "title", "description", "inputSchema", "outputSchema",
		"annotations" };
	json_t *arr = json_array();

	for (size_t i = 0; arr && i < tools_count(); i++) {
		json_t *t = json_pack("{s:s}", "name", tools_name_at(i));
		for (size_t f = 0; t && f < sizeof(fields) / sizeof(fields[0]); f++) {
			const json_t *v = tools_field_at(i, fields[f]);
			if (v)
				json_object_set_new(t, fields[f], json_deep_copy(v));
		}
		if (t == NULL || json_array_append_new(arr, t) < 0) {
			json_decref(arr);
			return NULL;
		}
	}
	return arr;
}

/* Smithery keeps config schemas under 1 KB: one field, briefly described. */
static json_t *
config_schema(const struct config *cfg)
{
	char desc[CONFIG_STR_MAX + 96];

	fmt_cut(desc, sizeof(desc), "Your aas API key (aas_sk_...).%s%s",
	    cfg->dashboard_url[0] ? " Get one at " : "", cfg->dashboard_url);
	/* The layout shows the nesting of the object. */
	/* clang-format off */
	return json_pack("{s:s, s:[s], s:{s:{s:s, s:s, s:s, s:{s:s}}}}",
	    "type", "object",
	    "required", "apiKey",
	    "properties",
	      "apiKey",
	        "type", "string",
	        "title", "API key",
	        "description", desc,
	        "x-from", "header", "x-api-key");
	/* clang-format on */
}

/* What the fixed shape below leaves out: every revision, and OAuth when
 * it is on. */
static int
card_extend(json_t *card, const struct config *cfg)
{
	json_t *versions = json_array(), *auth = json_object_get(card, "authentication");
	char meta[CONFIG_STR_MAX + 64];

	if (versions == NULL || auth == NULL) {
		json_decref(versions);
		return -1;
	}
	json_array_append_new(versions, json_string(MCP_VERSION_STATELESS));
	for (size_t i = 0; i < mcpver_count(); i++)
		json_array_append_new(versions, json_string(mcpver_at(i)));
	json_object_set_new(card, "protocolVersions", versions);
	if (!cfg->oauth)
		return 0;
	if (fmt_buf(meta, sizeof(meta), "%s/.well-known/oauth-protected-resource/v1/mcp",
		cfg->public_url) < 0)
		return -1;
	json_array_append_new(json_object_get(auth, "schemes"), json_string("oauth2"));
	return json_object_set_new(auth, "oauth2",
	    json_pack("{s:s, s:s, s:[s]}", "protectedResourceMetadata", meta, "authorizationServer",
		cfg->public_url, "scopes", "mcp"));
}

json_t *
card_build(const struct config *cfg)
{
	char url[CONFIG_STR_MAX + 16];
	json_t *tools = tools_json(), *card;

	if (tools == NULL)
		return NULL;
	if (fmt_buf(url, sizeof(url), "%s/v1/mcp", cfg->public_url) < 0) {
		json_decref(tools);
		return NULL;
	}
	/* The layout shows the nesting of the object. */
	/* clang-format off */
	card = json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:s}, s:s,"
	    " s:{s:s, s:s, s:s}, s:{s:{s:b}}, s:{s:b, s:[s], s:[s, s]},"
	    " s:o, s:o, s:[], s:[]}",
	    "version", "1.0",
	    "protocolVersion", mcpver_at(0),
	    "serverInfo",
	      "name", "aas",
	      "title", "Sandbox as a Service",
	      "version", AAS_VERSION,
	      "description", "Disposable Linux VMs with their own kernel, for agents.",
	    "description", "Sandbox as a Service: each sandbox is a disposable Linux VM with its"
	      " own kernel. Create one, run commands, move files in and out, destroy it;"
	      " billed per started minute.",
	    "transport",
	      "type", "streamable-http",
	      "endpoint", "/v1/mcp",
	      "url", url,
	    "capabilities", "tools", "listChanged", 0,
	    "authentication",
	      "required", 1,
	      "schemes", "bearer",
	      "headers", "Authorization", "x-api-key",
	    "configSchema", config_schema(cfg),
	    "tools", tools,
	    "resources",
	    "prompts");
	/* clang-format on */
	if (card != NULL && card_extend(card, cfg) < 0) {
		json_decref(card);
		return NULL;
	}
	return card;
}

struct card *
card_new(const struct config *cfg, struct err *e)
{
	struct card *c = calloc(1, sizeof(*c));
	json_t *j = card_build(cfg);

	if (c == NULL || j == NULL || (c->text = json_dumps(j, JSON_COMPACT)) == NULL) {
		err_set(e, ERR_INTERNAL, "server card: out of memory");
		json_decref(j);
		card_free(c);
		return NULL;
	}
	json_decref(j);
	c->len = strlen(c->text);
	return c;
}

void
card_free(struct card *c)
{
	if (c == NULL)
		return;
	free(c->text);
	free(c);
}

void
card_handle(struct http_req *req, void *ctx)
{
	struct card *c = ctx;

	if (strcmp(http_method(req), "GET") != 0 && strcmp(http_method(req), "HEAD") != 0) {
		http_add_header(req, "Allow", "GET, HEAD");
		http_reply_error(req, 405, "method_not_allowed", "use GET");
		return;
	}
	/* Public metadata: any page may read it, caches may keep it a while. */
	http_add_header(req, "Access-Control-Allow-Origin", "*");
	http_add_header(req, "Cache-Control", "public, max-age=300");
	http_reply_raw(req, 200, "application/json", c->text, c->len);
}
