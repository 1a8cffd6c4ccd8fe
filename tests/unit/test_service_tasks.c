/* test_service_tasks.c - MCP tasks over PostgreSQL and the fake
 * hypervisor: a call run as a task ends with its CallToolResult in the
 * table, readable by its account only; a cancel stops a running command;
 * limits and ids are checked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "service/tasks.h"
#include "tests/unit/service_fixture.h"

static struct tool_call *
prepare(struct sfx *s, const char *tool, json_t *args)
{
	struct call_ctx cx = { .app = s->app, .account_id = s->account, .request_id = "t" };
	struct err e;
	struct tool_call *c;

	err_clear(&e);
	c = tools_prepare(&cx, tools_find(tool), args, &e);
	json_decref(args);
	if (c == NULL)
		fail_msg("%s: %s", tool, e.msg);
	return c;
}

/* Polls until the task leaves "working"; its final view. */
static json_t *
wait_done(struct tasks *t, struct sfx *s, const char *id)
{
	for (int i = 0; i < 1000; i++) {
		struct err e;
		json_t *v;

		err_clear(&e);
		v = tasks_get(t, s->account, id, &e);
		if (v == NULL)
			fail_msg("tasks_get: %s", e.msg);
		if (strcmp(json_string_value(json_object_get(v, "status")), "working") != 0)
			return v;
		json_decref(v);
		usleep(10000);
	}
	fail_msg("task %s still working after 10 s", id);
	return NULL;
}

static void
test_task_completes(void **state)
{
	struct sfx *s = *state;
	struct tasks *t = tasks_new(s->app, NULL);
	char id[TASK_ID_LEN + 1];
	struct err e;
	json_t *v;

	assert_non_null(t);
	err_clear(&e);
	assert_int_equal(tasks_start(t, s->account, "get_usage",
			     prepare(s, "get_usage", json_object()), id, &e),
	    0);
	assert_true(tasks_id_valid(id));
	v = wait_done(t, s, id);
	assert_string_equal(json_string_value(json_object_get(v, "status")), "completed");
	assert_non_null(json_object_get(json_object_get(json_object_get(v, "result"),
					    "structuredContent"),
	    "balance"));
	assert_true(json_integer_value(json_object_get(v, "ttlMs")) > 0);
	json_decref(v);
	/* Another account's view: no such task. A cancel of a finished task
	 * changes nothing. */
	err_clear(&e);
	assert_null(tasks_get(t, s->other, id, &e));
	assert_int_equal(e.kind, ERR_INVALID);
	err_clear(&e);
	assert_int_equal(tasks_cancel(t, s->other, id, &e), -1);
	err_clear(&e);
	assert_int_equal(tasks_cancel(t, s->account, id, &e), 0);
	v = wait_done(t, s, id);
	assert_string_equal(json_string_value(json_object_get(v, "status")), "completed");
	json_decref(v);
	err_clear(&e);
	assert_null(tasks_get(t, s->account, "task-nope", &e));
	assert_null(tasks_get(t, s->account, "'; DROP TABLE mcp_tasks; --", &e));
	tasks_free(t);
}

static void
test_task_cancelled(void **state)
{
	struct sfx *s = *state;
	struct tasks *t = tasks_new(s->app, NULL);
	char id[TASK_ID_LEN + 1], sbx[32];
	struct err e;
	json_t *v;

	assert_non_null(t);
	sfx_create(s, 10, sbx);
	err_clear(&e);
	assert_int_equal(tasks_start(t, s->account, "run_command",
			     prepare(s, "run_command",
				 json_pack("{s:s,s:s}", "sandbox_id", sbx, "command", "sleep 30")),
			     id, &e),
	    0);
	/* While it runs, its heartbeat moves on (within a few beats, however
	 * busy the machine). */
	{
		long long moved = 0;

		for (int i = 0; i < 4 * TASK_BEAT_S * 10 && !moved; i++) {
			usleep(100000);
			moved = sfx_ll(s,
			    "SELECT (heartbeat_at > created_at + interval '1 second')::int "
			    "FROM mcp_tasks WHERE id = $1",
			    id);
		}
		assert_int_equal(moved, 1);
	}
	assert_int_equal(tasks_cancel(t, s->account, id, &e), 0);
	v = wait_done(t, s, id);
	assert_string_equal(json_string_value(json_object_get(v, "status")), "cancelled");
	assert_null(json_object_get(v, "result"));
	json_decref(v);
	tasks_free(t);
	json_decref(sfx_ok(s, s->account, "destroy_sandbox",
	    json_pack("{s:s}", "sandbox_id", sbx)));
}

static void
test_task_limit_per_account(void **state)
{
	struct sfx *s = *state;
	struct tasks *t = tasks_new(s->app, NULL);
	char id[TASK_ID_LEN + 1], sbx[32];
	struct err e;
	int started = 0;

	assert_non_null(t);
	sfx_create(s, 10, sbx);
	for (int i = 0; i < TASKS_MAX_PER_ACCOUNT + 1; i++) {
		struct tool_call *c = prepare(s, "run_command",
		    json_pack("{s:s,s:s}", "sandbox_id", sbx, "command", "sleep 30"));

		err_clear(&e);
		if (tasks_start(t, s->account, "run_command", c, id, &e) == 0) {
			started++;
		} else {
			assert_int_equal(e.kind, ERR_LIMIT);
			tool_call_free(c);
		}
	}
	assert_int_equal(started, TASKS_MAX_PER_ACCOUNT);
	/* tasks_free cancels what runs. */
	tasks_free(t);
	json_decref(sfx_ok(s, s->account, "destroy_sandbox",
	    json_pack("{s:s}", "sandbox_id", sbx)));
}

/* A task whose aasd stopped while it ran (its heartbeat is old) reads as
 * failed, and no longer counts against the account's working tasks. */
static void
test_orphaned_task_fails(void **state)
{
	struct sfx *s = *state;
	struct tasks *t = tasks_new(s->app, NULL);
	char id[TASK_ID_LEN + 1];
	const char *p[2] = { id, s->account };
	struct err e;
	json_t *v;
	size_t n = 5;

	/* An id of this test's own: its account's uuid without the dashes. */
	snprintf(id, sizeof(id), "task-");
	for (const char *c = s->account; *c && n < TASK_ID_LEN; c++)
		if (*c != '-')
			id[n++] = *c;
	id[n] = '\0';
	assert_non_null(t);
	assert_true(tasks_id_valid(id));
	err_clear(&e);
	assert_int_equal(db_exec(s->app->db,
			     "INSERT INTO mcp_tasks(id, account_id, tool, status, expires_at, "
			     "heartbeat_at) VALUES ($1, $2, 'run_command', 'working', "
			     "now() + interval '1 hour', now() - interval '1 minute')",
			     2, p, NULL, &e),
	    0);
	v = tasks_get(t, s->account, id, &e);
	assert_non_null(v);
	assert_string_equal(json_string_value(json_object_get(v, "status")), "failed");
	assert_non_null(strstr(json_string_value(json_object_get(v, "statusMessage")), "stopped"));
	json_decref(v);
	tasks_free(t);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, sfx_setup, sfx_teardown)

int
main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_task_completes),
		T(test_task_cancelled),
		T(test_task_limit_per_account),
		T(test_orphaned_task_fails),
	};

	return cmocka_run_group_tests(tests, sfx_group_setup, sfx_group_teardown);
}
