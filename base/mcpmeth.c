/* mcpmeth.c - one MCP message dispatched over an endpoint's method
 * table (see mcp_method.h). */
#include "base/mcpmeth.h"

#include <string.h>

#include "base/fmt.h"

/* 1 when the entry's name names the method. */
static int
names(const char *name, const char *method)
{
	size_t n = strlen(name);

	if (n > 0 && name[n - 1] == '/')
		return strncmp(method, name, n) == 0;
	return strcmp(method, name) == 0;
}

json_t *
mcpmeth_handle(const struct mcpmeth_set *m, void *ctx, json_t *raw)
{
	struct rpc_msg msg;
	char text[200];

	rpc_classify(raw, &msg);
	if (msg.kind == RPC_INVALID)
		return rpc_error(msg.id, msg.err_code, msg.err_msg, NULL);
	if (msg.kind == RPC_RESPONSE)
		return NULL; /* no endpoint sends requests: nothing to match */
	if (m->seen)
		m->seen(ctx, &msg);
	if (msg.kind == RPC_NOTIFICATION) {
		if (strcmp(msg.method, "notifications/cancelled") == 0 && m->cancel) {
			json_t *rid = json_object_get(msg.params, "requestId");
			if (rpc_id_valid(rid))
				m->cancel(ctx, rid);
		}
		return NULL; /* initialized and the others need nothing */
	}
	for (size_t i = 0; i < m->n; i++)
		if (names(m->table[i].name, msg.method))
			return m->table[i].fn(ctx, &msg);
	fmt_cut(text, sizeof(text), "Method not found: %.120s", msg.method);
	return rpc_error(msg.id, RPC_METHOD_NOT_FOUND, text, NULL);
}

json_t *
mcpmeth_ping(void *ctx, struct rpc_msg *msg)
{
	(void)ctx;
	return rpc_result(msg->id, json_object());
}

json_t *
mcpmeth_one_page(const struct rpc_msg *msg)
{
	if (json_object_get(msg->params, "cursor") != NULL)
		return rpc_error(msg->id, RPC_INVALID_PARAMS,
		    "invalid cursor: the tool list has a single page", NULL);
	return NULL;
}
