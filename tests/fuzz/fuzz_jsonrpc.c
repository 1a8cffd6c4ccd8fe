/* fuzz_jsonrpc.c - a JSON-RPC body from bytes (base/jsonrpc.h): parsed,
 * each message of a batch classified, and the reply the classification
 * leads to built and serialised. Checks what the transports rely on: a
 * request has a method and a usable id, an invalid message has an error
 * code and message, a notification has no id. */
#include <string.h>

#include <jansson.h>

#include "base/jsonrpc.h"
#include "tests/fuzz/fuzz.h"

#define FUZZ_RPC_BATCH_MAX 64 /* messages of a batch looked at */

static void
one(json_t *raw)
{
	struct rpc_msg m;
	json_t *reply = NULL;
	char *text;

	memset(&m, 0xa5, sizeof(m));
	rpc_classify(raw, &m);
	switch (m.kind) {
	case RPC_REQUEST:
		FUZZ_CHECK(m.method != NULL && rpc_id_valid(m.id));
		FUZZ_CHECK(m.params == NULL || json_is_object(m.params) || json_is_array(m.params));
		reply = rpc_result(m.id, json_pack("{s:s}", "method", m.method));
		break;
	case RPC_NOTIFICATION:
		FUZZ_CHECK(m.method != NULL && m.id == NULL);
		reply = rpc_notification(m.method, m.params ? json_incref(m.params) : NULL);
		break;
	case RPC_RESPONSE:
		FUZZ_CHECK(m.method == NULL);
		break;
	case RPC_INVALID:
		FUZZ_CHECK(m.err_code != 0);
		FUZZ_CHECK(memchr(m.err_msg, '\0', sizeof(m.err_msg)) != NULL && m.err_msg[0]);
		FUZZ_CHECK(m.id == NULL || rpc_id_valid(m.id));
		reply = rpc_error(m.id, m.err_code, m.err_msg, NULL);
		break;
	default:
		FUZZ_CHECK(!"unknown kind");
	}
	if (reply) {
		text = json_dumps(reply, JSON_COMPACT);
		FUZZ_CHECK(text != NULL);
		free(text);
		json_decref(reply);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char msg[256];
	json_t *body = rpc_parse((const char *)data, size, msg, sizeof(msg));
	size_t i;
	json_t *it;

	if (body == NULL) {
		FUZZ_CHECK(memchr(msg, '\0', sizeof(msg)) != NULL);
		return 0;
	}
	if (json_is_array(body)) {
		json_array_foreach(body, i, it) {
			if (i >= FUZZ_RPC_BATCH_MAX)
				break;
			one(it);
		}
	} else {
		one(body);
	}
	json_decref(body);
	return 0;
}
