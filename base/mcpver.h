/* mcpver.h - the MCP protocol revisions this project speaks
 * (mcpver_), shared by aasd's transport, get_service_info and the
 * stdio bridge so they never disagree. */
#ifndef AAS_MCP_VERSION_H
#define AAS_MCP_VERSION_H

#include <stddef.h>

/* The stateless revision (no initialize, no session; the version, client
 * info and capabilities ride in each request's _meta), served beside the
 * others on the same endpoint, chosen per request. */
#define MCP_VERSION_STATELESS "2026-07-28"

/* The revision whose JSON-RPC batches are allowed. */
#define MCP_VERSION_BATCH "2025-03-26"

size_t mcpver_count(void);
/* The i-th revision, newest first; NULL past the end. */
const char *mcpver_at(size_t i);
/* 1 when `v` is one of them. */
int mcpver_supported(const char *v);

#endif
