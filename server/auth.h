/* auth.h - reading the credential from request headers (auth_): an API
 * key, or on /v1/mcp an OAuth access token. Both are accepted only in
 * `Authorization: Bearer <key>` or `x-api-key: <key>`. */
#ifndef AAS_AUTH_H
#define AAS_AUTH_H

#include <stddef.h>

#include "server/http.h"

enum auth_found {
	AUTH_NO_KEY,    /* neither header */
	AUTH_KEY,       /* a key to check */
	AUTH_MALFORMED, /* a header is there but holds no usable key */
};

/* Picks the key out of the two header values (either may be NULL). The
 * scheme is case-insensitive and surrounding blanks are ignored. When both
 * headers carry keys they must agree. On AUTH_MALFORMED, `why` says what
 * was wrong (without echoing the value). */
enum auth_found auth_extract(const char *authorization, const char *x_api_key, const char **key,
    size_t *keylen, const char **why);

/* The key a request's work queues under (http_defer_as): "a:" and the
 * account its credential was resolved to (every key, OAuth token and
 * session of one account share it), else "ip:" and the client's address
 * (an IPv4 address, an IPv6 /64; X-Real-IP from a loopback peer when
 * AAS_TRUST_X_REAL_IP). Never a key. `out` holds at least
 * AUTH_WORK_KEY_LEN + 1 bytes. */
#define AUTH_WORK_KEY_LEN 64
void auth_work_key(struct http_req *req, char *out, size_t n);
/* The "ip:" key alone (the credential is not resolved yet). */
void auth_work_key_addr(struct http_req *req, char *out, size_t n);

/* Answers 401 with WWW-Authenticate for a request whose credential is
 * missing (AUTH_NO_KEY: says how to send one, and where to get one when
 * `dashboard_url` is set), malformed (`why`) or not a live key (AUTH_KEY). */
void auth_reply_unauthorized(struct http_req *req, enum auth_found found, const char *why,
    const char *dashboard_url);

/* Answers 401 for a credential that was presented and refused (`e`
 * says why): an API key, or an OAuth access token (then the challenge
 * says invalid_token and where the metadata is, so the client refreshes
 * it or authorizes again). */
struct config;
void auth_reply_refused(struct http_req *req, const struct config *cfg, const struct err *e);

/* Resolves an API key, or an OAuth access token when `path` is the
 * resource tokens are for (/v1/mcp): ERR_UNAUTHORIZED otherwise. */
struct app;
int auth_resolve(struct app *app, const char *path, const char *key, size_t keylen, char *account,
    size_t n, struct err *e) AAS_MUST_CHECK;

/* Key resolution for the HTTP front end (http_new): the key cache of
 * `app`, then its database. */
void auth_hooks(struct app *app, struct http_auth *out);

/* http_defer_as under the request's account or address (auth_work_key),
 * so one account's slow calls never stall another's for long. */
void auth_defer(struct http_req *req, http_deferred_fn fn, void *arg, void (*drop)(void *arg));

#endif
