/* test_metrics.c - the metrics registry and its text rendering
 * (server/metrics.h), and the /metrics token check. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/metrics.h"
#include "server/scrape.h"

static int
reset(void **state)
{
	(void)state;
	metrics_reset();
	return 0;
}

static char *
render(const struct metrics_gauges *g)
{
	size_t len;
	char *text = metrics_render(g, &len);

	assert_non_null(text);
	assert_int_equal(strlen(text), len);
	return text;
}

/* The value of the sample line that starts with `series ` (exact). */
static int
sample(const char *text, const char *series, double *value)
{
	size_t n = strlen(series);

	for (const char *p = text; *p; p = strchr(p, '\n') + 1) {
		if (strncmp(p, series, n) == 0 && p[n] == ' ') {
			char *end;

			*value = strtod(p + n + 1, &end);
			return end != p + n + 1 && (*end == '\n' || *end == '\0');
		}
		if (strchr(p, '\n') == NULL)
			break;
	}
	return 0;
}

static double
value_of(const char *text, const char *series)
{
	double v = -1;

	if (!sample(text, series, &v))
		fail_msg("no sample %s in:\n%s", series, text);
	return v;
}

static void
test_http_routes_and_statuses(void **state)
{
	int mcp, health;
	char *text;

	(void)state;
	mcp = metrics_route_label("/v1/mcp");
	health = metrics_route_label("/healthz");
	assert_int_not_equal(mcp, health);
	assert_int_equal(metrics_route_label("/v1/mcp"), mcp); /* idempotent */
	metrics_http_request(mcp, 200);
	metrics_http_request(mcp, 200);
	metrics_http_request(mcp, 404);
	metrics_http_request(health, 503);
	metrics_http_request(METRICS_ROUTE_UNMATCHED, 404);
	metrics_http_request(mcp, 299); /* not in the list */
	metrics_http_request(-5, 200);  /* bad index */
	text = render(NULL);
	assert_true(value_of(text, "aas_http_requests_total{route=\"/v1/mcp\",status=\"200\"}") ==
	    2);
	assert_true(value_of(text, "aas_http_requests_total{route=\"/v1/mcp\",status=\"404\"}") ==
	    1);
	assert_true(value_of(text, "aas_http_requests_total{route=\"/healthz\",status=\"503\"}") ==
	    1);
	assert_true(value_of(text, "aas_http_requests_total{route=\"unmatched\",status=\"404\"}") ==
	    1);
	assert_true(value_of(text, "aas_http_requests_total{route=\"/v1/mcp\",status=\"other\"}") ==
	    1);
	assert_true(value_of(text, "aas_http_requests_total{route=\"other\",status=\"200\"}") == 1);
	free(text);
}

static void
test_route_table_is_bounded(void **state)
{
	char name[32];
	int last = 0;

	(void)state;
	for (int i = 0; i < METRICS_MAX_ROUTES + 10; i++) {
		snprintf(name, sizeof(name), "/r%d", i);
		last = metrics_route_label(name);
	}
	assert_int_equal(last, METRICS_MAX_ROUTES); /* the "other" slot */
	metrics_http_request(last, 200);
	char *text = render(NULL);
	assert_true(value_of(text, "aas_http_requests_total{route=\"other\",status=\"200\"}") == 1);
	free(text);
}

static void
test_tools_by_name_and_result(void **state)
{
	char *text;

	(void)state;
	metrics_tool_label("get_usage");
	metrics_tool_label("run_command");
	metrics_tool_call("get_usage", ERR_NONE);
	metrics_tool_call("get_usage", ERR_UNAUTHORIZED);
	metrics_tool_call("get_usage", ERR_UNAUTHORIZED);
	metrics_tool_call("run_command", ERR_TIMEOUT);
	metrics_tool_call("no_such_tool", ERR_INVALID);
	metrics_tool_call(NULL, ERR_INVALID);
	metrics_tool_duration("run_command", 0.003);
	metrics_tool_duration("run_command", 0.2);
	metrics_tool_duration("run_command", 1000); /* above every bucket */
	text = render(NULL);
	assert_true(value_of(text, "aas_tool_calls_total{tool=\"get_usage\",result=\"ok\"}") == 1);
	assert_true(value_of(text,
			"aas_tool_calls_total{tool=\"get_usage\",result=\"unauthorized\"}") == 2);
	assert_true(value_of(text,
			"aas_tool_calls_total{tool=\"run_command\",result=\"timeout\"}") == 1);
	assert_true(value_of(text,
			"aas_tool_calls_total{tool=\"other\",result=\"invalid_argument\"}") == 2);
	assert_true(
	    value_of(text,
		"aas_tool_call_duration_seconds_bucket{tool=\"run_command\",le=\"0.005\"}") == 1);
	assert_true(
	    value_of(text,
		"aas_tool_call_duration_seconds_bucket{tool=\"run_command\",le=\"0.25\"}") == 2);
	assert_true(value_of(text,
			"aas_tool_call_duration_seconds_bucket{tool=\"run_command\",le=\"300\"}") ==
	    2);
	assert_true(
	    value_of(text,
		"aas_tool_call_duration_seconds_bucket{tool=\"run_command\",le=\"+Inf\"}") == 3);
	assert_true(value_of(text, "aas_tool_call_duration_seconds_count{tool=\"run_command\"}") ==
	    3);
	double sum = value_of(text, "aas_tool_call_duration_seconds_sum{tool=\"run_command\"}");
	assert_true(sum > 1000.2 && sum < 1000.21);
	/* A tool never called has no histogram series. */
	double v;
	assert_false(sample(text, "aas_tool_call_duration_seconds_count{tool=\"get_usage\"}", &v));
	free(text);
}

static void
test_boots_agent_credits_and_gauges(void **state)
{
	struct metrics_gauges g = { .have_database = 1,
		.database_up = 1,
		.have_sandboxes = 1,
		.sandboxes = { 1, 4, 0 },
		.have_pool = 1,
		.pool_ready = { 2, 0, 0 },
		.pool_target = { 2, 1, 0 },
		.have_teardowns = 1,
		.teardowns = 3 };
	char *text;

	(void)state;
	metrics_boot(1, 6.2);
	metrics_boot(1, 0.4);
	metrics_boot(0, 0);
	metrics_agent_error(METRICS_AGENT_TIMEOUT);
	metrics_agent_error(METRICS_AGENT_N); /* out of range: ignored */
	metrics_credits_charged(15000);
	metrics_credits_charged(-3); /* never negative */
	metrics_credits_refunded(14000);
	metrics_mcp_message("tools/list");
	metrics_mcp_message("tools/list");
	metrics_mcp_message("resources/list");
	metrics_mcp_message(NULL);
	text = render(&g);
	assert_true(value_of(text, "aas_sandbox_boots_total{result=\"ok\"}") == 2);
	assert_true(value_of(text, "aas_sandbox_boots_total{result=\"failed\"}") == 1);
	assert_true(value_of(text, "aas_sandbox_boot_duration_seconds_bucket{le=\"0.5\"}") == 1);
	assert_true(value_of(text, "aas_sandbox_boot_duration_seconds_bucket{le=\"5\"}") == 1);
	assert_true(value_of(text, "aas_sandbox_boot_duration_seconds_bucket{le=\"7.5\"}") == 2);
	assert_true(value_of(text, "aas_sandbox_boot_duration_seconds_count") == 2);
	assert_true(value_of(text, "aas_guest_agent_errors_total{kind=\"timeout\"}") == 1);
	assert_true(value_of(text, "aas_guest_agent_errors_total{kind=\"error_reply\"}") == 0);
	assert_true(value_of(text, "aas_credits_charged_microusd_total") == 15000);
	assert_true(value_of(text, "aas_credits_refunded_microusd_total") == 14000);
	assert_true(value_of(text, "aas_mcp_messages_total{method=\"tools/list\"}") == 2);
	assert_true(value_of(text, "aas_mcp_messages_total{method=\"other\"}") == 2);
	assert_true(value_of(text, "aas_database_up") == 1);
	assert_true(value_of(text, "aas_sandboxes{state=\"running\"}") == 4);
	assert_true(value_of(text, "aas_warm_pool_ready{size=\"small\"}") == 2);
	assert_true(value_of(text, "aas_sandbox_teardowns") == 3);
	assert_true(value_of(text, "aas_warm_pool_target{size=\"medium\"}") == 1);
	assert_null(strstr(text, "aas_host_"));
	free(text);
	/* A host: capacity, reservations, live use; unknown figures left out. */
	g.n_hosts = 2;
	g.hosts[0] = (struct metrics_host){ .name = "h1",
		.up = 1,
		.memory_mib = 24000,
		.reserved_memory_mib = 512,
		.free_memory_mib = 20000,
		.vcpus = 2,
		.reserved_vcpus = 1,
		.sandboxes = 1,
		.cpu_busy = 0.25 };
	g.hosts[1] = (struct metrics_host){ .name = "h2",
		.draining = 1,
		.free_memory_mib = -1,
		.cpu_busy = -1 };
	text = render(&g);
	assert_true(value_of(text, "aas_host_up{host=\"h1\"}") == 1);
	assert_true(value_of(text, "aas_host_up{host=\"h2\"}") == 0);
	assert_true(value_of(text, "aas_host_draining{host=\"h2\"}") == 1);
	assert_true(value_of(text, "aas_host_memory_mib{host=\"h1\",kind=\"reserved\"}") == 512);
	assert_true(value_of(text, "aas_host_memory_mib{host=\"h1\",kind=\"free\"}") == 20000);
	assert_null(strstr(text, "aas_host_memory_mib{host=\"h2\",kind=\"free\"}"));
	assert_true(value_of(text, "aas_host_vcpus{host=\"h1\",kind=\"capacity\"}") == 2);
	assert_true(value_of(text, "aas_host_cpu_busy_ratio{host=\"h1\"}") == 0.25);
	assert_null(strstr(text, "aas_host_cpu_busy_ratio{host=\"h2\"}"));
	assert_true(value_of(text, "aas_host_sandboxes{host=\"h1\"}") == 1);
	free(text);
	/* Families whose source did not answer are left out. */
	g.have_sandboxes = g.have_pool = 0;
	g.n_hosts = 0;
	text = render(&g);
	assert_null(strstr(text, "aas_sandboxes"));
	assert_null(strstr(text, "aas_warm_pool"));
	assert_null(strstr(text, "aas_host_"));
	free(text);
}

/* Every sample's family was announced by HELP and TYPE lines before it,
 * each family once, and every line ends with a newline. */
static void
test_exposition_structure(void **state)
{
	char *text, *copy, *save = NULL;
	char families[64][96];
	int nf = 0;

	(void)state;
	metrics_tool_label("t");
	metrics_tool_call("t", ERR_NONE);
	metrics_tool_duration("t", 0.01);
	metrics_http_request(metrics_route_label("/x"), 200);
	text = render(&(struct metrics_gauges){ .have_database = 1 });
	assert_true(text[strlen(text) - 1] == '\n');
	copy = strdup(text);
	for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char name[96];
		if (strncmp(line, "# HELP ", 7) == 0) {
			assert_int_equal(sscanf(line + 7, "%95s", name), 1);
			for (int i = 0; i < nf; i++)
				assert_string_not_equal(families[i], name);
			assert_true(nf < 64);
			snprintf(families[nf++], sizeof(families[0]), "%s", name);
			continue;
		}
		if (strncmp(line, "# TYPE ", 7) == 0) {
			assert_int_equal(sscanf(line + 7, "%95s", name), 1);
			assert_string_equal(name, families[nf - 1]);
			continue;
		}
		size_t n = strcspn(line, "{ ");
		snprintf(name, sizeof(name), "%.*s", (int)n, line);
		int found = 0;
		for (int i = 0; i < nf; i++) {
			size_t fl = strlen(families[i]);
			if (strcmp(name, families[i]) == 0 ||
			    (strncmp(name, families[i], fl) == 0 &&
				(strcmp(name + fl, "_bucket") == 0 ||
				    strcmp(name + fl, "_sum") == 0 ||
				    strcmp(name + fl, "_count") == 0)))
				found = 1;
		}
		if (!found)
			fail_msg("sample %s before its HELP/TYPE", line);
	}
	free(copy);
	free(text);
}

static void
test_label_values_are_escaped(void **state)
{
	char *text;

	(void)state;
	metrics_http_request(metrics_route_label("/a\"b\\c\nd"), 200);
	text = render(NULL);
	assert_non_null(strstr(text, "route=\"/a\\\"b\\\\c\\nd\""));
	free(text);
}

struct spin {
	int route;
};

static void *
spin_main(void *arg)
{
	struct spin *s = arg;

	for (int i = 0; i < 100000; i++) {
		metrics_http_request(s->route, 200);
		metrics_tool_call("t", ERR_NONE);
		metrics_tool_duration("t", 0.001);
	}
	return NULL;
}

static void
test_concurrent_increments_are_exact(void **state)
{
	pthread_t th[4];
	struct spin s;
	char *text;

	(void)state;
	metrics_tool_label("t");
	s.route = metrics_route_label("/v1/mcp");
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&th[i], NULL, spin_main, &s), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	text = render(NULL);
	assert_true(value_of(text, "aas_http_requests_total{route=\"/v1/mcp\",status=\"200\"}") ==
	    400000);
	assert_true(value_of(text, "aas_tool_calls_total{tool=\"t\",result=\"ok\"}") == 400000);
	assert_true(value_of(text, "aas_tool_call_duration_seconds_count{tool=\"t\"}") == 400000);
	double sum = value_of(text, "aas_tool_call_duration_seconds_sum{tool=\"t\"}");
	assert_true(sum > 399.9 && sum < 400.1);
	free(text);
}

static void
test_metrics_token(void **state)
{
	(void)state;
	assert_true(scrape_token_ok("Bearer s3cret", "s3cret"));
	assert_true(scrape_token_ok("bearer  s3cret", "s3cret"));
	assert_false(scrape_token_ok("Bearer s3cre", "s3cret"));
	assert_false(scrape_token_ok("Bearer s3cretX", "s3cret"));
	assert_false(scrape_token_ok("Basic s3cret", "s3cret"));
	assert_false(scrape_token_ok("s3cret", "s3cret"));
	assert_false(scrape_token_ok(NULL, "s3cret"));
	assert_false(scrape_token_ok("Bearer ", ""));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_http_routes_and_statuses, reset),
		cmocka_unit_test_setup(test_route_table_is_bounded, reset),
		cmocka_unit_test_setup(test_tools_by_name_and_result, reset),
		cmocka_unit_test_setup(test_boots_agent_credits_and_gauges, reset),
		cmocka_unit_test_setup(test_exposition_structure, reset),
		cmocka_unit_test_setup(test_label_values_are_escaped, reset),
		cmocka_unit_test_setup(test_concurrent_increments_are_exact, reset),
		cmocka_unit_test_setup(test_metrics_token, reset),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
