/* toolres.c - CallToolResult objects. */
#include "base/toolres.h"

#include <stdlib.h>

#include "base/fmt.h"

json_t *
toolres_text(const char *text, int is_error)
{
	json_t *res = json_pack("{s:[{s:s, s:s}]}", "content", "type", "text", "text", text);

	if (res && is_error)
		json_object_set_new(res, "isError", json_true());
	return res;
}

json_t *
toolres_error(const struct err *e)
{
	char text[700];

	fmt_cut(text, sizeof(text), "Error (%s): %s", err_kind_name(e->kind), e->msg);
	return toolres_text(text, 1);
}

json_t *
toolres_structured(json_t *obj)
{
	char *text = json_dumps(obj, JSON_COMPACT);
	json_t *res = text ? toolres_text(text, 0) : NULL;

	free(text);
	if (res)
		json_object_set(res, "structuredContent", obj);
	json_decref(obj);
	return res;
}
