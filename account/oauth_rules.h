/* oauth_rules.h - the parts of OAuth 2.1 that need no database (oauth_):
 * PKCE, redirect URIs, client metadata documents, token shapes. Every
 * value here comes from a client and is checked once, here. */
#ifndef AAS_OAUTH_RULES_H
#define AAS_OAUTH_RULES_H

#include <jansson.h>
#include <stddef.h>

#include "base/err.h"

#define OAUTH_ACCESS_PREFIX "aas_at_"
#define OAUTH_REFRESH_PREFIX "aas_rt_"
#define OAUTH_TOKEN_LEN (7 + 64) /* prefix + 32 random bytes in hex */
#define OAUTH_CODE_LEN 64
#define OAUTH_CLIENT_ID_MAX 512
#define OAUTH_NAME_MAX 100
#define OAUTH_URI_MAX 512
#define OAUTH_REDIRECTS_MAX 10
#define OAUTH_DOC_MAX 5120 /* a client metadata document, bytes */
#define OAUTH_SCOPE "mcp"
#define OAUTH_SCOPE_MAX 100

/* A client as the authorization server knows it. */
struct oauth_client {
	char id[OAUTH_CLIENT_ID_MAX + 1];
	char name[OAUTH_NAME_MAX + 1];
	char uri[OAUTH_URI_MAX + 1]; /* client_uri, "" when none */
	char redirects[OAUTH_REDIRECTS_MAX][OAUTH_URI_MAX + 1];
	int n_redirects;
	int registered; /* 0: a metadata document */
};

/* 1 when BASE64URL(SHA-256(verifier)) is `challenge` and the verifier has
 * RFC 7636's shape (43 to 128 unreserved characters). */
int oauth_pkce_ok(const char *verifier, const char *challenge);
/* 1 when `challenge` has the shape of an S256 challenge. */
int oauth_challenge_valid(const char *challenge);
/* 1 when `uri` may be a redirect URI: https, http on a loopback address
 * (RFC 8252), or a private-use scheme with a dot in it; no fragment. */
int oauth_redirect_valid(const char *uri);
/* 1 when the presented redirect URI is one the client registered: equal,
 * or for a loopback http URI equal but for the port (RFC 8252 7.3). */
int oauth_redirect_registered(const struct oauth_client *cl, const char *uri);
/* 1 when `id` may be a Client ID Metadata Document's URL: https (or
 * http to a loopback host when `allow_http_loopback`), a path, no
 * fragment, no user, no dot segments. */
int oauth_client_id_is_url(const char *id, int allow_http_loopback);
/* Reads a client's metadata (a document fetched from its client_id, or a
 * registration request when client_id is NULL) into `out`. The fields
 * used: client_id (must equal), client_name, client_uri, redirect_uris,
 * token_endpoint_auth_method (only "none"), grant_types, response_types. */
int oauth_client_parse(const char *client_id, json_t *doc, struct oauth_client *out,
    struct err *e) AAS_MUST_CHECK;
/* The redirect URIs as a JSON array (new reference). */
json_t *oauth_client_redirects_json(const struct oauth_client *cl);
/* 1 when `s` has the shape of one of our access tokens. */
int oauth_access_shaped(const char *s, size_t len);
/* 1 when every space-separated scope in `scope` is one we grant ("" too). */
int oauth_scope_ok(const char *scope);

#endif
