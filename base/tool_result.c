/* tool_result.c - CallToolResult objects. */
#include "base/tool_result.h"

#include <stdio.h>
#include <stdlib.h>

json_t *
tool_result_text(const char *text, int is_error)
{
	json_t *res = json_pack("{s:[{s:s, s:s}]}", "content", "type", "text", "text", text);

	if (res && is_error)
		json_object_set_new(res, "isError", json_true());
	return res;
}

json_t *
tool_result_error(const struct err *e)
{
	char text[700];

	snprintf(text, sizeof(text), "Error (%s): %s", err_kind_name(e->kind), e->msg);
	return tool_result_text(text, 1);
}

json_t *
tool_result_structured(json_t *obj)
{
	char *text = json_dumps(obj, JSON_COMPACT);
	json_t *res = text ? tool_result_text(text, 0) : NULL;

	free(text);
	if (res)
		json_object_set(res, "structuredContent", obj);
	json_decref(obj);
	return res;
}
