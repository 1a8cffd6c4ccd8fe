/* test_card.c - the server card (server/card.h) built from the embedded
 * tool catalogue. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "server/card.h"
#include "service/tools.h"

static struct config
cfg_with(const char *public_url, const char *dashboard)
{
	struct config cfg;

	memset(&cfg, 0, sizeof(cfg));
	snprintf(cfg.public_url, sizeof(cfg.public_url), "%s", public_url);
	snprintf(cfg.dashboard_url, sizeof(cfg.dashboard_url), "%s", dashboard);
	return cfg;
}

static void
test_card_describes_transport_and_tools(void **state)
{
	struct config cfg = cfg_with("https://api.example.com", "");
	json_t *card, *tools;
	size_t i;
	json_t *t;

	(void)state;
	card = card_build(&cfg);
	assert_non_null(card);
	assert_string_equal(json_string_value(json_object_get(json_object_get(card, "serverInfo"),
				"name")),
	    "aas");
	assert_string_equal(json_string_value(json_object_get(json_object_get(card, "transport"),
				"url")),
	    "https://api.example.com/v1/mcp");
	tools = json_object_get(card, "tools");
	assert_int_equal(json_array_size(tools), 19);
	json_array_foreach(tools, i, t) {
		assert_string_equal(json_string_value(json_object_get(t, "name")),
		    tools_name_at(i));
		assert_true(json_equal(json_object_get(t, "inputSchema"),
		    tools_field_at(i, "inputSchema")));
		assert_non_null(json_object_get(t, "description"));
	}
	json_decref(card);
}

static void
test_config_schema_sends_the_key_as_x_api_key(void **state)
{
	struct config cfg = cfg_with("http://127.0.0.1:8080", "https://dash.example.com/keys");
	json_t *card, *schema, *key;
	char *text;

	(void)state;
	card = card_build(&cfg);
	schema = json_object_get(card, "configSchema");
	key = json_object_get(json_object_get(schema, "properties"), "apiKey");
	assert_string_equal(json_string_value(json_object_get(key, "type")), "string");
	assert_string_equal(json_string_value(json_object_get(json_object_get(key, "x-from"),
				"header")),
	    "x-api-key");
	assert_string_equal(json_string_value(json_array_get(json_object_get(schema, "required"),
				0)),
	    "apiKey");
	assert_non_null(strstr(json_string_value(json_object_get(key, "description")),
	    "https://dash.example.com/keys"));
	/* Smithery's limit for a config schema. */
	text = json_dumps(schema, JSON_COMPACT);
	assert_true(strlen(text) < 1024);
	free(text);
	json_decref(card);
}

static int
setup(void **state)
{
	struct err e;

	(void)state;
	err_clear(&e);
	return tools_init(&e);
}

static int
teardown(void **state)
{
	(void)state;
	tools_cleanup();
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_card_describes_transport_and_tools),
		cmocka_unit_test(test_config_schema_sends_the_key_as_x_api_key),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
