/* mcp_cred.h - the id of the credential a request to /v1/mcp carries
 * (mcp_cred_), which an MCP session is bound to: "k:" and 32 hex digits of
 * the API key's SHA-256, or "g:" and the OAuth grant of an access token (a
 * refreshed token keeps its session). Never the key itself. */
#ifndef AAS_MCP_CRED_H
#define AAS_MCP_CRED_H

#include "base/err.h"
#include "server/http.h"
#include "account/session.h"

struct app;

/* Fills `out` (SESS_CRED_MAX + 1 bytes) for the request's credential,
 * already accepted by authentication; "" when it carries none. -1 with e
 * when a token's grant cannot be read. */
int mcp_cred_id(struct app *app, struct http_req *req, char out[SESS_CRED_MAX + 1],
    struct err *e) AAS_MUST_CHECK;

/* 1 when a request with credential `cred` of `account` (NULL, "": none)
 * may use the session `s`: its own credential's, or, for a session made
 * before credentials were recorded, its account's. An anonymous session
 * answers 0 to a credential (it is adopted first: sess_adopt) and 1 to
 * none. */
int mcp_cred_may_use(const struct sess_info *s, const char *account, const char *cred);

#endif
