/* jsonrpc.h - JSON-RPC 2.0 message parsing, classification and replies
 * (rpc_). Pure functions over jansson values; no I/O. */
#ifndef AAS_JSONRPC_H
#define AAS_JSONRPC_H

#include <stddef.h>

#include <jansson.h>

#define RPC_PARSE_ERROR -32700
#define RPC_INVALID_REQUEST -32600
#define RPC_METHOD_NOT_FOUND -32601
#define RPC_INVALID_PARAMS -32602
#define RPC_INTERNAL_ERROR -32603
#define RPC_SERVER_ERROR -32000 /* transport-level, as the SDK uses it */
#define RPC_SESSION_NOT_FOUND -32001
/* 2026-07-28: headers that do not match the body, or are missing. */
#define RPC_HEADER_MISMATCH -32020
/* 2026-07-28: a capability the request needs and the client lacks. */
#define RPC_MISSING_CAPABILITY -32021
/* 2026-07-28: a protocol version this server does not speak. */
#define RPC_UNSUPPORTED_VERSION -32022

enum rpc_kind { RPC_REQUEST, RPC_NOTIFICATION, RPC_RESPONSE, RPC_INVALID };

struct rpc_msg {
	enum rpc_kind kind;
	json_t *id;         /* borrowed; NULL for notifications */
	const char *method; /* borrowed; NULL for responses */
	json_t *params;     /* borrowed; may be NULL */
	int err_code;       /* set when kind == RPC_INVALID */
	char err_msg[160];
};

/* Parses a body. NULL on failure with a message for a -32700 error.
 * Strings may hold NUL (validated later, with the field named). */
json_t *rpc_parse(const char *body, size_t len, char *msg, size_t msgsz);

/* Classifies one message. An invalid one keeps its id when it had a
 * usable one, so the error can be addressed to it. */
void rpc_classify(json_t *msg, struct rpc_msg *out);

/* 1 for a string or integer id (never null, float, bool, array, object). */
int rpc_id_valid(const json_t *id);

json_t *rpc_result(json_t *id, json_t *result); /* steals result */
json_t *rpc_error(json_t *id, int code, const char *message, json_t *data);
json_t *rpc_notification(const char *method, json_t *params); /* steals */
/* A notifications/progress for `token`: `progress`, `total` when above 0
 * and `message` when not NULL; NULL when out of memory. */
json_t *rpc_progress(json_t *token, double progress, double total, const char *message);

#endif
