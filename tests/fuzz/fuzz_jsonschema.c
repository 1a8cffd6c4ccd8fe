/* fuzz_jsonschema.c - arbitrary JSON against every tool's inputSchema
 * from the embedded catalogue (base/jsonschema.h), and for arguments a
 * schema accepts, the typed conversion (tools_prepare) a call makes before
 * it runs. The first byte picks the tool, the rest is the JSON. The call
 * context has an account and the configuration's defaults; preparing a
 * call reaches neither the database nor a VM. */
#include <string.h>

#include <jansson.h>

#include "base/config.h"
#include "base/err.h"
#include "base/jsonschema.h"
#include "service/app.h"
#include "service/tools.h"
#include "tests/fuzz/fuzz.h"

static struct app fuzz_app;
static int fuzz_ready;

static const char *
no_env(const char *name)
{
	(void)name;
	return NULL;
}

static void
setup(void)
{
	struct err e;

	err_clear(&e);
	if (tools_init(&e) < 0 || config_load(&fuzz_app.cfg, no_env, &e) < 0) {
		fprintf(stderr, "set-up: %s\n", e.msg);
		abort();
	}
	fuzz_ready = 1;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct call_ctx cx = { .app = &fuzz_app, .account_id = "acc_fuzz", .request_id = "fuzz" };
	const json_t *schema;
	const char *name;
	json_t *args;
	struct err e;

	if (!fuzz_ready)
		setup();
	if (size < 1)
		return 0;
	name = tools_name_at(data[0] % tools_count());
	schema = tools_input_schema(name);
	FUZZ_CHECK(schema != NULL);
	args = json_loadb((const char *)data + 1, size - 1, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
	if (args == NULL)
		return 0;
	err_clear(&e);
	if (jsv_validate(schema, args, "", &e) == 0) {
		struct tool_call *c;

		FUZZ_CHECK(json_is_object(args));
		err_clear(&e);
		c = tools_prepare(&cx, tools_find(name), args, &e);
		/* Past the schema, a refusal is a clear one about the arguments. */
		if (c == NULL && (e.kind != ERR_INVALID || e.msg[0] == '\0')) {
			fprintf(stderr, "%s: prepare refuses: %d %s\n", name, (int)e.kind, e.msg);
			FUZZ_CHECK(!"a refusal that is not about the arguments");
		}
		tool_call_free(c);
	} else {
		FUZZ_CHECK(e.kind != ERR_NONE && e.msg[0] != '\0');
	}
	json_decref(args);
	return 0;
}
