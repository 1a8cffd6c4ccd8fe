/* br_catalog.h - the bridge's tool list (br_catalog_): the server's own
 * catalogue (service/tools.json, compiled in) for the tools forwarded to
 * the REST API, then the bridge-only tools (bridge/bridge_tools.json). */
#ifndef AAS_BR_CATALOG_H
#define AAS_BR_CATALOG_H

#include <stddef.h>

#include <jansson.h>

#include "base/err.h"

/* Builds the list once, at start: the server tools named in `served`
 * (each must exist) in the server's order, then the bridge's tools. */
int br_catalog_init(const char *const *served, size_t n_served, struct err *e) AAS_MUST_CHECK;
void br_catalog_cleanup(void);

/* {"tools": [...]}, new reference. */
json_t *br_catalog_list(void);
size_t br_catalog_count(void);
/* The tool's inputSchema, or NULL for a name not listed. */
const json_t *br_catalog_input_schema(const char *name);

#endif
