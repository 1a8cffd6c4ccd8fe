/* card.h - the MCP server card at /.well-known/mcp/server-card.json
 * (card_): what the server is, where its transport lives, its tools with
 * their schemas, and the configuration schema a registry such as Smithery
 * shows its users (the API key, sent as the x-api-key header). */
#ifndef AAS_CARD_H
#define AAS_CARD_H

#include <stddef.h>

#include <jansson.h>

#include "base/config.h"
#include "base/err.h"
#include "server/http.h"

struct card;

/* Built once (after tools_init): the card depends only on configuration
 * and the embedded catalogue. */
struct card *card_new(const struct config *cfg, struct err *e);
void card_free(struct card *c);

/* The card as JSON (new reference); exposed for tests. */
json_t *card_build(const struct config *cfg);

/* The route handler (ctx: a struct card). */
void card_handle(struct http_req *req, void *ctx);

#endif
