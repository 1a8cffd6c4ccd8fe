/* embed.h - files compiled into the binary by tools/embed.c. */
#ifndef AAS_EMBED_H
#define AAS_EMBED_H

#include <stddef.h>

struct embed_file {
	const char *name;
	const char *data;
	size_t len;
};

/* schema/NNN_*.sql in name order */
extern const struct embed_file embed_migrations[];
extern const size_t embed_migrations_count;
/* server/tools.json */
extern const struct embed_file embed_tools[];
extern const size_t embed_tools_count;
/* bridge/bridge_tools.json (aas-mcp only) */
extern const struct embed_file embed_bridge_tools[];
extern const size_t embed_bridge_tools_count;
/* server/openapi.json */
extern const struct embed_file embed_openapi[];
extern const size_t embed_openapi_count;

/* bridge/npx/aas-mcp-remote.js (the npm package's program) */
extern const struct embed_file embed_npx[];
extern const size_t embed_npx_count;
/* server/web/ (the dashboard's style sheet and script) */
extern const struct embed_file embed_web[];
extern const size_t embed_web_count;

#endif
