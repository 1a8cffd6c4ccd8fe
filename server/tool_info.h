/* tool_info.h - get_service_info: what a client learns with no key. */
#ifndef AAS_TOOL_INFO_H
#define AAS_TOOL_INFO_H

#include <jansson.h>

#include "tools.h"

json_t *tool_info_get_service_info(struct call_ctx *cx, const json_t *args,
    struct err *e);

#endif
