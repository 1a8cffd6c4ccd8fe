/* npx.h - the npm package of the stdio forwarder (npx_): GET /mcp.tgz, so
 * `AAS_API_KEY=... npx -y <origin>/mcp.tgz` starts a local stdio MCP
 * server that forwards to this service's /v1/mcp. The package is put
 * together once at start from the script compiled into aasd
 * (bridge/npx/aas-mcp-remote.js), a package.json with aasd's version and
 * a config.json naming AAS_PUBLIC_URL, as a tar in a gzip member. */
#ifndef AAS_NPX_H
#define AAS_NPX_H

#include "base/config.h"
#include "base/err.h"
#include "server/http.h"

struct npx;

struct npx *npx_new(const struct config *cfg, struct err *e);
void npx_free(struct npx *n);
/* The route's handler (ctx: the npx). */
void npx_handle(struct http_req *req, void *ctx);
/* The package's bytes (for tests). */
const char *npx_bytes(const struct npx *n, size_t *len);

#endif
