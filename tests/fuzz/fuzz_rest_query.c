/* fuzz_rest_query.c - a REST query string from bytes (server/rest_query.h):
 * parsed, then typed against a tool's inputSchema with every property of
 * it allowed. The first byte picks the tool; the rest up to a newline is
 * the query, and what follows is also read as one strict integer. */
#include <string.h>

#include <jansson.h>

#include "base/err.h"
#include "server/rest_query.h"
#include "service/tools.h"
#include "tests/fuzz/fuzz.h"

static int fuzz_ready;

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_fields ff;
	const char *allowed[REST_QUERY_MAX_PARAMS + 1];
	const json_t *schema, *props, *v;
	const char *key, *name;
	json_t *q, *args;
	struct err e;
	size_t n = 0;
	long long num;

	if (!fuzz_ready) {
		err_clear(&e);
		if (tools_init(&e) < 0)
			abort();
		fuzz_ready = 1;
	}
	if (size < 1 || fuzz_split(data + 1, size - 1, 2, &ff) < 0)
		return 0;
	name = tools_name_at(data[0] % tools_count());
	schema = tools_input_schema(name);
	props = json_object_get(schema, "properties");
	json_object_foreach((json_t *)props, key, v) {
		if (n < REST_QUERY_MAX_PARAMS)
			allowed[n++] = key;
	}
	allowed[n] = NULL;

	char *qs = fuzz_dup(ff.f[0], strlen(ff.f[0]));
	err_clear(&e);
	q = qs ? rest_query_parse(qs, &e) : NULL;
	if (q) {
		FUZZ_CHECK(json_is_object(q) && json_object_size(q) <= REST_QUERY_MAX_PARAMS);
		json_object_foreach(q, key, v) {
			FUZZ_CHECK(json_is_string(v));
		}
		err_clear(&e);
		args = rest_query_args(q, allowed, schema, &e);
		if (args) {
			json_object_foreach(args, key, v) {
				FUZZ_CHECK(json_object_get(q, key) != NULL);
			}
			json_decref(args);
		} else {
			FUZZ_CHECK(e.kind != ERR_NONE && e.msg[0]);
		}
		/* Nothing is allowed: any parameter is refused. */
		err_clear(&e);
		args = rest_query_args(q, NULL, schema, &e);
		FUZZ_CHECK(json_object_size(q) == 0 ? args != NULL : args == NULL);
		json_decref(args);
		json_decref(q);
	} else if (qs) {
		FUZZ_CHECK(e.kind != ERR_NONE && e.msg[0]);
	}
	free(qs);
	if (rest_query_int(ff.f[1], &num) == 0) {
		char back[32];
		snprintf(back, sizeof(back), "%lld", num);
		FUZZ_CHECK(strcmp(back, ff.f[1]) == 0 || strcmp(ff.f[1], "-0") == 0 ||
		    ff.f[1][0] == '0' || (ff.f[1][0] == '-' && ff.f[1][1] == '0'));
	}
	free(ff.buf);
	return 0;
}
