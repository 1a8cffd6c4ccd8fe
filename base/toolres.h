/* toolres.h - MCP CallToolResult objects (toolres_), built the
 * same way by aasd and the aas-mcp bridge. */
#ifndef AAS_TOOL_RESULT_H
#define AAS_TOOL_RESULT_H

#include <jansson.h>

#include "base/err.h"

/* {"content": [{"type": "text", "text": ...}]}, with isError when asked.
 * New reference, or NULL when out of memory. */
json_t *toolres_text(const char *text, int is_error);
/* An isError result saying "Error (<kind>): <message>". */
json_t *toolres_error(const struct err *e);
/* A result whose structuredContent is `obj` and whose text is its JSON.
 * Takes the reference to `obj`. */
json_t *toolres_structured(json_t *obj);

#endif
