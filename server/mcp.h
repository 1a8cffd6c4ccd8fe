/* mcp.h - MCP over Streamable HTTP at /v1/mcp (mcp_): header checks,
 * sessions, JSON-RPC dispatch, SSE answers with progress, cancellation. */
#ifndef AAS_MCP_H
#define AAS_MCP_H

#include <stddef.h>

#include <jansson.h>

#include "service/app.h"
#include "server/http.h"

struct mcp;

struct mcp *mcp_new(struct app *app, struct err *e);
void mcp_free(struct mcp *m);

/* Route handler for /v1/mcp (ctx is the struct mcp). */
void mcp_handle(struct http_req *req, void *ctx);
/* The route's headers stage: origin and method refused before the body;
 * otherwise a key is optional (anonymous requests have small bodies). */
enum http_key_need mcp_head(struct http_req *req, void *ctx);
/* Error bodies on the MCP route are JSON-RPC errors with a null id. */
json_t *mcp_error_fmt(int status, const char *code, const char *message);

/* Ends the GET streams of a session, or of every session of an account
 * (an end or a disable announced by another process). Never blocks. */
void mcp_close_session(struct mcp *m, const char *session_id);
void mcp_close_account(struct mcp *m, const char *account_id);

/* Header predicates, exposed for unit tests. */
int mcp_accepts(const char *accept, const char *type);
int mcp_content_type_is_json(const char *content_type);

#endif
