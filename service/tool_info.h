/* tool_info.h - get_service_info: what a client learns with no key. */
#ifndef AAS_TOOL_INFO_H
#define AAS_TOOL_INFO_H

#include <stddef.h>

#include "service/app.h"

/* The whole CallToolResult of get_service_info, serialised; rebuilt at
 * most once a second, since the service description changes only with
 * live capacity. Returns a malloc'd copy (caller frees) or NULL. */
char *tool_info_result_json(struct app *app, size_t *len);

#endif
