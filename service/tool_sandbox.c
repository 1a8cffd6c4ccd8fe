/* tool_sandbox.c - sandbox tools over the sandbox service. */
#include "service/tool_sandbox.h"

#include "billing/billing.h"
#include "service/sandbox.h"

static void
progress_to_call(void *ctx, double progress, double total, const char *message)
{
	call_progress(ctx, progress, total, message);
}

static struct sbx *
service(struct call_ctx *cx, struct err *e)
{
	if (cx->app->sbx == NULL)
		err_set(e, ERR_UNAVAILABLE, "this server runs without a VM layer");
	return cx->app->sbx;
}

#define PROGRESS(cx) { progress_to_call, (cx), (cx)->cancelled }

json_t *
tool_create_sandbox(struct call_ctx *cx, const json_t *args, struct err *e)
{
	struct sbx_progress pg = PROGRESS(cx);
	struct sbx *s = service(cx, e);

	return s ? sbx_create(s, cx->account_id, args, &pg, e) : NULL;
}

json_t *
tool_run_command(struct call_ctx *cx, const json_t *args, struct err *e)
{
	struct sbx_progress pg = PROGRESS(cx);
	struct sbx *s = service(cx, e);

	return s ? sbx_run(s, cx->account_id, args, &pg, e) : NULL;
}

/* The rest take no progress: each is one bounded guest call. */
#define SIMPLE_TOOL(tool, fn)                                                 \
	json_t *tool(struct call_ctx *cx, const json_t *args, struct err *e) \
	{                                                                     \
		struct sbx *s = service(cx, e);                               \
		return s ? fn(s, cx->account_id, args, e) : NULL;             \
	}

SIMPLE_TOOL(tool_write_file, sbx_write_file)
SIMPLE_TOOL(tool_read_file, sbx_read_file)
SIMPLE_TOOL(tool_list_files, sbx_list_files)
SIMPLE_TOOL(tool_expose_port, sbx_expose_port)
SIMPLE_TOOL(tool_get_sandbox, sbx_get)
SIMPLE_TOOL(tool_list_sandboxes, sbx_list)
SIMPLE_TOOL(tool_destroy_sandbox, sbx_destroy)

json_t *
tool_extend_sandbox(struct call_ctx *cx, const json_t *args, struct err *e)
{
	return bill_extend(cx->app->db, &cx->app->cfg, cx->account_id,
	    json_string_value(json_object_get(args, "sandbox_id")),
	    (int)json_integer_value(json_object_get(args, "minutes")), e);
}

json_t *
tool_get_usage(struct call_ctx *cx, const json_t *args, struct err *e)
{
	return bill_usage(cx->app->db, &cx->app->cfg, cx->account_id, args, e);
}
