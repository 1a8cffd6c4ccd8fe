/* authsrv.c - OAuth metadata, token, registration and revocation
 * endpoints (oauth_http_). Database work runs on workers, queued under
 * the client's address. */
#include "server/authsrv.h"

#include <stdlib.h>
#include <string.h>

#include "base/fmt.h"
#include "base/keys.h"
#include "base/log.h"
#include "server/rest_query.h"
#include "server/web.h"
#include "account/oauth.h"

#define FORM_MAX 8192

int
authsrv_resource(const struct config *cfg, char *out, size_t n, struct err *e)
{
	if (fmt_buf(out, n, "%s/v1/mcp", cfg->public_url) < 0) {
		err_set(e, ERR_INTERNAL, "AAS_PUBLIC_URL too long for the OAuth resource");
		return -1;
	}
	return 0;
}

int
authsrv_challenge(const struct config *cfg, char *out, size_t n)
{
	if (!cfg->oauth)
		return fmt_buf(out, n, "Bearer");
	return fmt_buf(out, n,
	    "Bearer resource_metadata=\"%s/.well-known/oauth-protected-resource/v1/mcp\", "
	    "scope=\"" OAUTH_SCOPE "\"",
	    cfg->public_url);
}

static int
get_only(struct http_req *req)
{
	if (strcmp(http_method(req), "GET") == 0 || strcmp(http_method(req), "HEAD") == 0)
		return 1;
	http_add_header(req, "Allow", "GET, HEAD");
	http_reply_error(req, 405, "method_not_allowed", "use GET");
	return 0;
}

static void
public_json(struct http_req *req, json_t *body)
{
	/* Public metadata: any page may read it. */
	http_add_header(req, "Access-Control-Allow-Origin", "*");
	http_add_header(req, "Cache-Control", "public, max-age=300");
	http_reply_json(req, 200, body);
}

static void
protected_resource(struct http_req *req, void *ctx)
{
	struct app *app = ctx;
	const struct config *cfg = &app->cfg;
	char resource[CONFIG_STR_MAX + 16], docs[CONFIG_STR_MAX + 32];
	struct err e;

	if (!get_only(req))
		return;
	err_clear(&e);
	if (authsrv_resource(cfg, resource, sizeof(resource), &e) < 0 ||
	    fmt_err(&e, "AAS_PUBLIC_URL", docs, sizeof(docs), "%s/dashboard/connect",
		cfg->public_url) < 0) {
		http_reply_error(req, 500, "internal", e.msg);
		return;
	}
	public_json(req,
	    json_pack("{s:s, s:[s], s:[s], s:[s], s:s, s:s}", "resource", resource,
		"authorization_servers", cfg->public_url, "scopes_supported", OAUTH_SCOPE,
		"bearer_methods_supported", "header", "resource_name", "aas",
		"resource_documentation", docs));
}

static void
authorization_server(struct http_req *req, void *ctx)
{
	struct app *app = ctx;
	const char *o = app->cfg.public_url;
	char authz[CONFIG_STR_MAX + 32], token[CONFIG_STR_MAX + 32], reg[CONFIG_STR_MAX + 32],
	    rev[CONFIG_STR_MAX + 32];

	if (!get_only(req))
		return;
	if (fmt_buf(authz, sizeof(authz), "%s/oauth/authorize", o) < 0 ||
	    fmt_buf(token, sizeof(token), "%s/oauth/token", o) < 0 ||
	    fmt_buf(reg, sizeof(reg), "%s/oauth/register", o) < 0 ||
	    fmt_buf(rev, sizeof(rev), "%s/oauth/revoke", o) < 0) {
		http_reply_error(req, 500, "internal", "AAS_PUBLIC_URL too long");
		return;
	}
	public_json(req,
	    json_pack("{s:s, s:s, s:s, s:s, s:s, s:[s], s:[s], s:[ss], s:[s], s:[s], s:[s], s:b,"
		      " s:b}",
		"issuer", o, "authorization_endpoint", authz, "token_endpoint", token,
		"registration_endpoint", reg, "revocation_endpoint", rev, "scopes_supported",
		OAUTH_SCOPE, "response_types_supported", "code", "grant_types_supported",
		"authorization_code", "refresh_token", "code_challenge_methods_supported", "S256",
		"token_endpoint_auth_methods_supported", "none",
		"revocation_endpoint_auth_methods_supported", "none",
		"client_id_metadata_document_supported", 1,
		"authorization_response_iss_parameter_supported", 1));
}

static void
no_oidc(struct http_req *req, void *ctx)
{
	(void)ctx;
	http_reply_error(req, 404, "not_found",
	    "no OpenID Connect here; see /.well-known/oauth-authorization-server");
}

/* ---- token, register, revoke: POSTs answered as RFC 6749 says ---- */

struct job {
	struct app *app;
	int kind; /* 0 token, 1 register, 2 revoke */
	char addr[64];
};

static void
oauth_error(struct http_req *req, int status, const char *code, const char *desc)
{
	http_add_header(req, "Cache-Control", "no-store");
	http_add_header(req, "Access-Control-Allow-Origin", "*");
	http_reply_json(req, status,
	    json_pack("{s:s, s:s}", "error", code, "error_description", desc));
}

static void
oauth_fail(struct http_req *req, const struct err *e, const char *fallback)
{
	int status = e->kind == ERR_INVALID ? 400 : err_http_status(e->kind);

	if (e->kind == ERR_NONE) {
		oauth_error(req, 500, "server_error", "the request failed without a reason");
		return;
	}

	oauth_error(req, status, e->field[0] ? e->field : fallback, e->msg);
}

static const char *
field(json_t *form, const char *name)
{
	const char *v = json_string_value(json_object_get(form, name));

	return v ? v : "";
}

/* The form body (application/x-www-form-urlencoded) as an object. */
static json_t *
read_form(struct http_req *req)
{
	size_t len = 0;
	const char *body = http_body(req, &len);
	const char *ct = http_header(req, "Content-Type");
	struct err e;
	json_t *form;

	if (ct == NULL || strncasecmp(ct, "application/x-www-form-urlencoded", 33) != 0 ||
	    (ct[33] != '\0' && ct[33] != ';' && ct[33] != ' ')) {
		oauth_error(req, 400, "invalid_request",
		    "send the parameters as application/x-www-form-urlencoded");
		return NULL;
	}
	err_clear(&e);
	form = rest_query_parse_body(body, len, &e);
	if (form == NULL && e.kind == ERR_INTERNAL)
		oauth_error(req, 500, "server_error", e.msg);
	else if (form == NULL)
		oauth_error(req, 400, "invalid_request", e.msg);
	return form;
}

static void
token_reply(struct http_req *req, const struct oauth_tokens *t)
{
	http_add_header(req, "Cache-Control", "no-store");
	http_add_header(req, "Pragma", "no-cache");
	http_add_header(req, "Access-Control-Allow-Origin", "*");
	http_reply_json(req, 200,
	    json_pack("{s:s, s:s, s:i, s:s, s:s}", "access_token", t->access, "token_type",
		"Bearer", "expires_in", t->expires_in, "refresh_token", t->refresh, "scope",
		t->scope));
}

static void
token(struct http_req *req, struct app *app)
{
	json_t *form = read_form(req);
	const char *grant;
	struct oauth_tokens t;
	struct err e;
	int rc;

	if (form == NULL)
		return;
	if (http_header(req, "Authorization") != NULL) {
		/* Every client here is public (token_endpoint_auth_method none). */
		oauth_error(req, 401, "invalid_client",
		    "this server has public clients only: send client_id in the form, no "
		    "Authorization header");
		goto out;
	}
	grant = field(form, "grant_type");
	err_clear(&e);
	if (strcmp(grant, "authorization_code") == 0)
		rc = oauth_code_redeem(app->db, &app->cfg, field(form, "code"),
		    field(form, "client_id"), field(form, "redirect_uri"),
		    field(form, "code_verifier"), field(form, "resource"), &t, &e);
	else if (strcmp(grant, "refresh_token") == 0)
		rc = oauth_refresh(app->db, &app->cfg, field(form, "refresh_token"),
		    field(form, "client_id"), field(form, "resource"), &t, &e);
	else {
		oauth_error(req, 400, "unsupported_grant_type",
		    "grant_type must be authorization_code or refresh_token");
		goto out;
	}
	if (rc < 0)
		oauth_fail(req, &e, "invalid_grant");
	else
		token_reply(req, &t);
	memset(&t, 0, sizeof(t));
out:
	json_decref(form);
}

static void
reg(struct http_req *req, struct app *app, const char *addr)
{
	size_t len = 0;
	const char *body = http_body(req, &len);
	json_error_t je;
	json_t *meta, *reply = NULL;
	struct err e;

	meta = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(meta)) {
		json_decref(meta);
		oauth_error(req, 400, "invalid_client_metadata", "the body must be a JSON object");
		return;
	}
	err_clear(&e);
	if (oauth_client_register(app->db, &app->cfg, meta, addr, &reply, &e) < 0)
		oauth_fail(req, &e, "invalid_client_metadata");
	else {
		log_info("oauth: client %s registered",
		    json_string_value(json_object_get(reply, "client_id")));
		http_add_header(req, "Cache-Control", "no-store");
		http_add_header(req, "Access-Control-Allow-Origin", "*");
		http_reply_json(req, 201, reply);
	}
	json_decref(meta);
}

static void
token_revoke(struct http_req *req, struct app *app)
{
	json_t *form = read_form(req);
	struct err e;

	if (form == NULL)
		return;
	err_clear(&e);
	if (oauth_revoke_token(app->db, field(form, "token"), field(form, "client_id"), &e) < 0)
		oauth_fail(req, &e, "server_error");
	else {
		http_add_header(req, "Access-Control-Allow-Origin", "*");
		http_reply_raw(req, 200, "application/json", "{}", 2);
	}
	json_decref(form);
}

static void
work(struct http_req *req, void *arg)
{
	struct job *j = arg;

	if (j->kind == 0)
		token(req, j->app);
	else if (j->kind == 1)
		reg(req, j->app, j->addr);
	else
		token_revoke(req, j->app);
	free(j);
}

static void
post_entry(struct http_req *req, struct app *app, int kind)
{
	char key[64], hash[KEY_HASH_HEX_LEN + 1];
	struct job *j;

	if (strcmp(http_method(req), "OPTIONS") == 0) {
		/* A browser-based client's preflight. */
		http_add_header(req, "Access-Control-Allow-Origin", "*");
		http_add_header(req, "Access-Control-Allow-Methods", "POST");
		http_add_header(req, "Access-Control-Allow-Headers",
		    "Content-Type, MCP-Protocol-Version");
		http_add_header(req, "Access-Control-Max-Age", "600");
		http_reply_raw(req, 204, "", "", 0);
		return;
	}
	if (strcmp(http_method(req), "POST") != 0) {
		http_add_header(req, "Allow", "POST");
		http_reply_error(req, 405, "method_not_allowed", "use POST");
		return;
	}
	j = calloc(1, sizeof(*j));
	if (j == NULL) {
		oauth_error(req, 500, "server_error", "out of memory");
		return;
	}
	j->app = app;
	j->kind = kind;
	web_client_addr(req, app->cfg.trust_x_real_ip, j->addr, sizeof(j->addr));
	key_hash_hex(j->addr, strlen(j->addr), hash, sizeof(hash));
	if (fmt_buf(key, sizeof(key), "o:%.32s", hash) < 0) {
		free(j);
		oauth_error(req, 500, "server_error", "work key too long");
		return;
	}
	http_defer_as(req, key, work, j, free);
}

static void
token_entry(struct http_req *req, void *ctx)
{
	post_entry(req, ctx, 0);
}

static void
register_entry(struct http_req *req, void *ctx)
{
	post_entry(req, ctx, 1);
}

static void
revoke_entry(struct http_req *req, void *ctx)
{
	post_entry(req, ctx, 2);
}

static void
no_oauth(struct http_req *req, void *ctx)
{
	(void)ctx;
	http_reply_error(req, 404, "not_found",
	    "this service uses API keys (Authorization: Bearer or x-api-key), not OAuth");
}

size_t
authsrv_routes(struct app *app, struct http_route *out, size_t max)
{
	static const char *const well_known[] = { "/.well-known/oauth-protected-resource",
		"/.well-known/oauth-protected-resource/v1/mcp",
		"/.well-known/oauth-authorization-server", "/.well-known/openid-configuration" };
	size_t n = 0;

	if (max < OAUTH_HTTP_ROUTES)
		return 0;
	if (!app->cfg.oauth) {
		/* OAuth-capable clients stop looking and use the configured header. */
		for (size_t i = 0; i < 4; i++)
			out[n++] = (struct http_route){ .path = well_known[i],
				.handler = no_oauth };
		return n;
	}
	out[n++] = (struct http_route){ .path = well_known[0],
		.handler = protected_resource,
		.ctx = app };
	out[n++] = (struct http_route){ .path = well_known[1],
		.handler = protected_resource,
		.ctx = app };
	out[n++] = (struct http_route){ .path = well_known[2],
		.handler = authorization_server,
		.ctx = app };
	out[n++] = (struct http_route){ .path = well_known[3], .handler = no_oidc };
	out[n++] = (struct http_route){ .path = "/oauth/token",
		.handler = token_entry,
		.ctx = app,
		.max_body = FORM_MAX,
		.max_body_name = "the OAuth form limit" };
	out[n++] = (struct http_route){ .path = "/oauth/register",
		.handler = register_entry,
		.ctx = app,
		.max_body = FORM_MAX,
		.max_body_name = "the OAuth form limit" };
	out[n++] = (struct http_route){ .path = "/oauth/revoke",
		.handler = revoke_entry,
		.ctx = app,
		.max_body = FORM_MAX,
		.max_body_name = "the OAuth form limit" };
	return n;
}
