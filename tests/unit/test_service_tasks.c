/* test_service_tasks.c - MCP tasks over PostgreSQL and the fake
 * hypervisor: a call run as a task ends with its CallToolResult in the
 * table, readable by its account only; a cancel stops a running command;
 * limits and ids are checked; a large result is cut with a marker, and an
 * account's stored task bytes stay under AAS_TASK_BYTES_PER_ACCOUNT, also
 * against creates in parallel, while another account still has room. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/toolres.h"
#include "service/task_cut.h"
#include "service/tasks.h"
#include "tests/unit/service_fixture.h"

#define CUT_CAP 65536        /* AAS_TASK_RESULT_MAX_BYTES in the storage tests */
#define ACCOUNT_BYTES 262144 /* AAS_TASK_BYTES_PER_ACCOUNT there */
#define BIG_OUTPUT 200000    /* bytes of stdout a large task prints */
#define RESERVE (CUT_CAP + TASK_ROW_BYTES)

static int
setup_small_storage(void **state)
{
	const struct sfx_opts o = { .task_bytes = ACCOUNT_BYTES, .task_max = CUT_CAP };

	return sfx_open(state, &o);
}

static struct tool_call *
prepare_as(struct sfx *s, const char *account, const char *tool, json_t *args)
{
	struct call_ctx cx = { .app = s->app, .account_id = account, .request_id = "t" };
	struct err e;
	struct tool_call *c;

	err_clear(&e);
	c = tools_prepare(&cx, tools_find(tool), args, &e);
	json_decref(args);
	if (c == NULL)
		fail_msg("%s: %s", tool, e.msg);
	return c;
}

static struct tool_call *
prepare(struct sfx *s, const char *tool, json_t *args)
{
	return prepare_as(s, s->account, tool, args);
}

/* Polls until the task leaves "working"; its final view. */
static json_t *
wait_done_as(struct tasks *t, const char *account, const char *id)
{
	for (int i = 0; i < 1000; i++) {
		struct err e;
		json_t *v;

		err_clear(&e);
		v = tasks_get(t, account, id, &e);
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

static json_t *
wait_done(struct tasks *t, struct sfx *s, const char *id)
{
	return wait_done_as(t, s->account, id);
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

/* The cut result is a CallToolResult within the cap, its marker and note
 * say what happened, and its text is still its structuredContent's JSON. */
static void
check_cut(json_t *v, size_t cap, size_t at_least)
{
	json_t *res = json_object_get(v, "result"), *mark, *content;
	char *text;

	assert_string_equal(json_string_value(json_object_get(v, "status")), "completed");
	assert_non_null(res);
	text = json_dumps(res, JSON_COMPACT);
	assert_non_null(text);
	assert_true(strlen(text) <= cap);
	free(text);
	mark = json_object_get(json_object_get(res, "_meta"), TASK_CUT_META);
	assert_non_null(mark);
	assert_true(json_integer_value(json_object_get(mark, "bytes")) > (json_int_t)at_least);
	assert_int_equal(json_integer_value(json_object_get(mark, "limit")), cap);
	text = json_dumps(json_object_get(mark, "fields"), 0);
	assert_non_null(text);
	assert_non_null(strstr(text, "structuredContent.stdout"));
	free(text);
	content = json_object_get(res, "content");
	assert_true(json_array_size(content) >= 2);
	assert_non_null(strstr(json_string_value(json_object_get(json_array_get(content,
								     json_array_size(content) - 1),
				   "text")),
	    "AAS_TASK_RESULT_MAX_BYTES"));
	/* Most of what fits is kept, not a token of it. */
	assert_true(strlen(json_string_value(json_object_get(json_object_get(res,
								 "structuredContent"),
			"stdout"))) > cap / 8);
	{
		json_t *again = json_loads(json_string_value(json_object_get(json_array_get(content,
										 0),
					       "text")),
		    0, NULL);

		assert_true(json_equal(again, json_object_get(res, "structuredContent")));
		json_decref(again);
	}
}

static long long
stored(struct sfx *s, const char *account, const char *what)
{
	char sql[200];

	snprintf(sql, sizeof(sql),
	    "SELECT coalesce(sum(%s), 0) FROM mcp_tasks WHERE account_id = $1", what);
	return sfx_ll(s, sql, account);
}

static struct tool_call *
big_call(struct sfx *s, const char *sbx)
{
	char cmd[64];

	snprintf(cmd, sizeof(cmd), "yes | head -c %d", BIG_OUTPUT);
	return prepare(s, "run_command",
	    json_pack("{s:s,s:s,s:i}", "sandbox_id", sbx, "command", cmd, "max_output_bytes",
		BIG_OUTPUT));
}

/* A loop of large results on one account: each is cut with its marker,
 * the account's stored bytes (counted and in the table) stay under
 * AAS_TASK_BYTES_PER_ACCOUNT, the task past it is refused naming the
 * limit, and another account still creates tasks. Once the account's
 * tasks expired it has room again. */
static void
test_large_results_bounded(void **state)
{
	struct sfx *s = *state;
	struct tasks *t = tasks_new(s->app, NULL);
	char id[TASK_ID_LEN + 1], sbx[32];
	const char *pa[1] = { s->account };
	int started = 0, refused = 0;
	struct err e;
	json_t *v;

	assert_non_null(t);
	sfx_create(s, 10, sbx);
	for (int i = 0; i < 8; i++) {
		struct tool_call *c = big_call(s, sbx);

		err_clear(&e);
		if (tasks_start(t, s->account, "run_command", c, id, &e) < 0) {
			tool_call_free(c);
			assert_int_equal(e.kind, ERR_LIMIT);
			assert_non_null(strstr(e.msg,
			    "task storage for this account is full "
			    "(256 KiB, AAS_TASK_BYTES_PER_ACCOUNT)"));
			refused++;
			continue;
		}
		started++;
		v = wait_done(t, s, id);
		check_cut(v, CUT_CAP, BIG_OUTPUT);
		json_decref(v);
		assert_true(stored(s, s->account, "stored_bytes") <= ACCOUNT_BYTES);
		assert_true(stored(s, s->account, "octet_length(result::text)") <= ACCOUNT_BYTES);
		assert_true(stored(s, s->account, "pg_column_size(result)") <= ACCOUNT_BYTES);
	}
	assert_int_equal(started, ACCOUNT_BYTES / RESERVE);
	assert_int_equal(refused, 8 - started);
	/* Another account is not affected. */
	err_clear(&e);
	assert_int_equal(tasks_start(t, s->other, "get_usage",
			     prepare_as(s, s->other, "get_usage", json_object()), id, &e),
	    0);
	v = wait_done_as(t, s->other, id);
	assert_string_equal(json_string_value(json_object_get(v, "status")), "completed");
	json_decref(v);
	/* Expired tasks no longer count (and their rows go at the next start). */
	err_clear(&e);
	assert_int_equal(db_exec(s->app->db,
			     "UPDATE mcp_tasks SET expires_at = now() - interval '1 second' "
			     "WHERE account_id = $1",
			     1, pa, NULL, &e),
	    0);
	assert_int_equal(tasks_start(t, s->account, "get_usage",
			     prepare(s, "get_usage", json_object()), id, &e),
	    0);
	json_decref(wait_done(t, s, id));
	assert_int_equal(sfx_ll(s,
			     "SELECT count(*) FROM mcp_tasks WHERE account_id = $1 "
			     "AND expires_at <= now()",
			     s->account),
	    0);
	tasks_free(t);
	json_decref(sfx_ok(s, s->account, "destroy_sandbox",
	    json_pack("{s:s}", "sandbox_id", sbx)));
}

#define RACERS 8

struct racer {
	struct sfx *s;
	struct tasks *t;
	struct tool_call *call;
	pthread_barrier_t *go;
	int rc;
	struct err e;
};

static void *
race_start(void *arg)
{
	struct racer *r = arg;
	char id[TASK_ID_LEN + 1];

	err_clear(&r->e);
	pthread_barrier_wait(r->go);
	r->rc = tasks_start(r->t, r->s->account, "get_usage", r->call, id, &r->e);
	return NULL;
}

/* With room for one more task, creates in parallel: one passes. */
static void
test_storage_check_race_free(void **state)
{
	struct sfx *s = *state;
	struct tasks *t = tasks_new(s->app, NULL);
	struct racer r[RACERS];
	pthread_t th[RACERS];
	pthread_barrier_t go;
	char held[24];
	const char *p[2] = { s->account, held };
	struct err e;
	int passed = 0;

	assert_non_null(t);
	/* Finished tasks holding all but room for one reservation. */
	snprintf(held, sizeof(held), "%d", ACCOUNT_BYTES - RESERVE - 10);
	err_clear(&e);
	assert_int_equal(db_exec(s->app->db,
			     "INSERT INTO mcp_tasks(id, account_id, tool, status, expires_at, "
			     "stored_bytes) VALUES ('task-' || substr(md5(random()::text), 1, 24), "
			     "$1, 'get_usage', 'completed', now() + interval '1 hour', $2::bigint)",
			     2, p, NULL, &e),
	    0);
	pthread_barrier_init(&go, NULL, RACERS);
	for (int i = 0; i < RACERS; i++) {
		r[i] = (struct racer){ .s = s, .t = t, .go = &go };
		r[i].call = prepare(s, "get_usage", json_object());
		assert_int_equal(pthread_create(&th[i], NULL, race_start, &r[i]), 0);
	}
	for (int i = 0; i < RACERS; i++) {
		pthread_join(th[i], NULL);
		if (r[i].rc == 0) {
			passed++;
		} else {
			assert_int_equal(r[i].e.kind, ERR_LIMIT);
			assert_non_null(strstr(r[i].e.msg, "AAS_TASK_BYTES_PER_ACCOUNT"));
			tool_call_free(r[i].call);
		}
	}
	pthread_barrier_destroy(&go);
	assert_int_equal(passed, 1);
	tasks_free(t);
	assert_true(stored(s, s->account, "stored_bytes") <= ACCOUNT_BYTES);
}

/* task_cut alone: a text-only result and a structured one with
 * multi-byte characters stay valid UTF-8 JSON within the cap. */
static void
test_cut_shapes(void **state)
{
	static char big[300001];
	json_t *res, *back;
	size_t len = 0;
	int cut = 0;
	char *text;

	(void)state;
	for (size_t i = 0; i + 3 <= sizeof(big) - 1; i += 3)
		memcpy(big + i, "\xe2\x82\xac", 3); /* the euro sign */
	big[sizeof(big) - 1] = '\0';
	res = json_pack("{s:[{s:s,s:s}],s:b}", "content", "type", "text", "text", big, "isError",
	    0);
	text = task_cut(res, 8192, &len, &cut);
	assert_non_null(text);
	assert_int_equal(cut, 1);
	assert_true(len <= 8192 && len == strlen(text));
	back = json_loads(text, 0, NULL);
	assert_non_null(back);
	assert_non_null(json_object_get(json_object_get(back, "_meta"), TASK_CUT_META));
	assert_true(json_string_length(json_object_get(
			json_array_get(json_object_get(back, "content"), 0), "text")) > 4096);
	json_decref(back);
	free(text);
	json_decref(res);
	/* Two long streams are cut to one length, each keeping its share. */
	memset(big, 'x', sizeof(big) - 1);
	res = toolres_structured(json_pack("{s:s,s:s,s:i}", "stdout", big, "stderr", big,
	    "exit_code", 0));
	text = task_cut(res, 65536, &len, &cut);
	assert_non_null(text);
	assert_true(cut == 1 && len <= 65536);
	back = json_loads(text, 0, NULL);
	assert_non_null(back);
	{
		json_t *sc = json_object_get(back, "structuredContent");
		size_t out = json_string_length(json_object_get(sc, "stdout"));

		assert_true(out > 65536 / 8);
		assert_int_equal(json_string_length(json_object_get(sc, "stderr")), out);
		assert_int_equal(json_integer_value(json_object_get(sc, "exit_code")), 0);
	}
	json_decref(back);
	free(text);
	json_decref(res);
	/* Small results are kept as they are. */
	res = json_pack("{s:[{s:s,s:s}]}", "content", "type", "text", "text", "ok");
	text = task_cut(res, 8192, &len, &cut);
	assert_int_equal(cut, 0);
	assert_non_null(strstr(text, "\"ok\""));
	assert_null(strstr(text, TASK_CUT_META));
	free(text);
	json_decref(res);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, sfx_setup, sfx_teardown)
#define TS(fn) cmocka_unit_test_setup_teardown(fn, setup_small_storage, sfx_teardown)

int
main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_task_completes),
		T(test_task_cancelled),
		T(test_task_limit_per_account),
		T(test_orphaned_task_fails),
		TS(test_large_results_bounded),
		TS(test_storage_check_race_free),
		cmocka_unit_test(test_cut_shapes),
	};

	return cmocka_run_group_tests(tests, sfx_group_setup, sfx_group_teardown);
}
