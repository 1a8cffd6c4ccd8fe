/* br_tools.h - tools/call in the bridge (br_tools_): argument validation
 * against the catalogue, forwarding to the REST API, the sync tools, and
 * the CallToolResult shape the server uses. */
#ifndef AAS_BR_TOOLS_H
#define AAS_BR_TOOLS_H

#include <jansson.h>

#include "bridge/br_api.h"

/* Builds the catalogue of the forwarded tools and the sync tools. */
int br_tools_init(struct err *e) AAS_MUST_CHECK;
void br_tools_cleanup(void);

/* 1 when the bridge lists a tool of that name. */
int br_tools_exists(const char *name);

/* Runs a tool; returns a CallToolResult: the API's JSON as
 * structuredContent plus the same as text, or isError with a message.
 * NULL only for an unknown tool. */
json_t *br_tools_call(struct br_call *c, const char *name, const json_t *args);

#endif
