/* tool_sandbox.h - MCP tool handlers for sandboxes: they translate the
 * call context to the sandbox service and nothing else. */
#ifndef AAS_TOOL_SANDBOX_H
#define AAS_TOOL_SANDBOX_H

#include "service/tools.h"

json_t *tool_create_sandbox(struct call_ctx *cx, const json_t *args, struct err *e);
json_t *tool_run_command(struct call_ctx *cx, const json_t *args, struct err *e);
json_t *tool_write_file(struct call_ctx *cx, const json_t *args, struct err *e);
json_t *tool_read_file(struct call_ctx *cx, const json_t *args, struct err *e);
json_t *tool_list_files(struct call_ctx *cx, const json_t *args, struct err *e);
json_t *tool_expose_port(struct call_ctx *cx, const json_t *args, struct err *e);
json_t *tool_get_sandbox(struct call_ctx *cx, const json_t *args, struct err *e);
json_t *tool_list_sandboxes(struct call_ctx *cx, const json_t *args, struct err *e);
json_t *tool_destroy_sandbox(struct call_ctx *cx, const json_t *args, struct err *e);
json_t *tool_extend_sandbox(struct call_ctx *cx, const json_t *args, struct err *e);
json_t *tool_get_usage(struct call_ctx *cx, const json_t *args, struct err *e);

#endif
