/* mcpmeth.h - the MCP methods an endpoint answers, as a table
 * (mcpmeth_), and the one dispatch over it that aasd's transport and
 * the stdio bridge share: a message classified, a cancellation passed on,
 * a request sent to its method or answered "Method not found". */
#ifndef AAS_MCP_METHOD_H
#define AAS_MCP_METHOD_H

#include <stddef.h>

#include <jansson.h>

#include "base/jsonrpc.h"

/* Answers a request: its response, or NULL when the answer goes out
 * another way (a stream, a queued call). */
typedef json_t *(*mcp_method_fn)(void *ctx, struct rpc_msg *msg);

/* One method; a name ending in '/' stands for every method under it
 * ("tasks/"). */
struct mcpmeth {
	const char *name;
	mcp_method_fn fn;
};

/* An endpoint: its methods, and what it does with every message. */
struct mcpmeth_set {
	const struct mcpmeth *table;
	size_t n;
	/* Each request and notification before it is handled (a log, a
	 * metric); NULL: nothing. */
	void (*seen)(void *ctx, const struct rpc_msg *msg);
	/* notifications/cancelled naming a valid requestId; NULL: ignored. */
	void (*cancel)(void *ctx, json_t *request_id);
};

/* Handles one message: an invalid one is answered with its error; a
 * response and a notification get no answer (a cancellation goes to
 * m->cancel); a request goes to the first method of the table that names
 * it, or is answered "Method not found". The response, or NULL. */
json_t *mcpmeth_handle(const struct mcpmeth_set *m, void *ctx, json_t *raw);

/* ping: an empty result. */
json_t *mcpmeth_ping(void *ctx, struct rpc_msg *msg);

/* tools/list of a list with a single page: the error for a request that
 * names a cursor, else NULL (the caller answers with its list). */
json_t *mcpmeth_one_page(const struct rpc_msg *msg);

#endif
