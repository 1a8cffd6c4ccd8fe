/* authsrv.h - the OAuth 2.1 authorization server's endpoints that are not pages (authsrv_):
 * RFC 9728 protected resource metadata, RFC 8414 authorization server
 * metadata, the token endpoint, dynamic client registration (RFC 7591)
 * and token revocation (RFC 7009). The consent page is the dashboard's
 * (web_oauth.c). docs/oauth.md says how it fits together. */
#ifndef AAS_AUTHSRV_H
#define AAS_AUTHSRV_H

#include <stddef.h>

#include "server/http.h"
#include "service/app.h"

#define OAUTH_HTTP_ROUTES 8

/* The resource tokens are for: <AAS_PUBLIC_URL>/v1/mcp; -1 with e set
 * when it does not fit in out. */
int authsrv_resource(const struct config *cfg, char *out, size_t n, struct err *e) AAS_MUST_CHECK;
/* The WWW-Authenticate value for a request to /v1/mcp without a
 * credential: Bearer with resource_metadata (or plain "Bearer" when
 * OAuth is off); -1 when it does not fit in out. */
int authsrv_challenge(const struct config *cfg, char *out, size_t n) AAS_MUST_CHECK;
/* Its routes into out (at most OAUTH_HTTP_ROUTES); returns how many. */
size_t authsrv_routes(struct app *app, struct http_route *out, size_t max);

#endif
