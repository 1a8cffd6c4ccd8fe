/* test_service_commands.c - a command's output as it is produced
 * (run_command's stream: whole characters, bounded pieces, order) and the
 * tools that follow and stop a command later, get_command and
 * kill_command, through tools_invoke against the real service over
 * PostgreSQL and the fake guest (fake_vmm.h). Needs AAS_TEST_DATABASE_URL. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/clock.h"
#include "base/err.h"
#include "service/tool_cmd.h"
#include "tests/unit/fake_vmm.h"
#include "tests/unit/service_fixture.h"

#define ID_MAX 32
#define REC_MAX 64          /* pieces a recorder keeps */
#define REC_TEXT (1u << 16) /* bytes of text a recorder keeps */

/* ---- the stream, alone ---- */

struct rec {
	int n;
	int fd[REC_MAX];
	size_t len[REC_MAX];
	double sent[REC_MAX];
	char msg[REC_MAX][96]; /* progress messages, cut */
	char text[REC_TEXT];   /* every piece, joined */
	size_t text_len;
};

static void
rec_output(void *sink, int fd, const char *text, size_t len, double sent)
{
	struct rec *r = sink;

	assert_true(r->n < REC_MAX);
	assert_true(r->text_len + len <= REC_TEXT);
	r->fd[r->n] = fd;
	r->len[r->n] = len;
	r->sent[r->n] = sent;
	r->n++;
	memcpy(r->text + r->text_len, text, len);
	r->text_len += len;
}

static void
rec_progress(void *sink, double progress, double total, const char *message)
{
	struct rec *r = sink;

	(void)total;
	assert_true(r->n < REC_MAX);
	r->sent[r->n] = progress;
	snprintf(r->msg[r->n], sizeof(r->msg[0]), "%s", message);
	r->n++;
}

/* A character split between two chunks arrives whole, in the next piece. */
static void
test_stream_keeps_characters_whole(void **state)
{
	struct rec r;
	struct call_ctx cx;
	struct tool_stream ts;

	(void)state;
	memset(&r, 0, sizeof(r));
	memset(&cx, 0, sizeof(cx));
	cx.output = rec_output;
	cx.progress_sink = &r;
	tool_stream_init(&ts, &cx);
	tool_stream_output(&ts, 1, "h\xC3", 2);
	tool_stream_output(&ts, 1, "\xA9llo \xE2\x82", 7);
	tool_stream_output(&ts, 1, "\xAC\n", 2);
	tool_stream_end(&ts);
	assert_int_equal(r.n, 3);
	assert_int_equal(r.len[0], 1); /* "h"; the é waits for its second byte */
	assert_int_equal(r.len[1], 6); /* "é" and "llo " */
	assert_int_equal(r.len[2], 4); /* "€\n" */
	assert_int_equal(r.text_len, 11);
	assert_memory_equal(r.text, "h\xC3\xA9llo \xE2\x82\xAC\n", 11);
	/* Bytes that are not text become U+FFFD; a character cut by the end too. */
	memset(&r, 0, sizeof(r));
	tool_stream_init(&ts, &cx);
	tool_stream_output(&ts, 2, "a\xFF", 2);
	tool_stream_output(&ts, 2, "b\xF0\x9F", 3);
	tool_stream_end(&ts);
	assert_int_equal(r.text_len, 11);
	assert_memory_equal(r.text,
	    "a\xEF\xBF\xBD"
	    "b\xEF\xBF\xBD\xEF\xBF\xBD",
	    10);
}

/* Large output goes in pieces of at most TOOLS_OUTPUT_CHUNK bytes, each
 * stream marked, in the order produced, with increasing progress. */
static void
test_stream_bounded_ordered(void **state)
{
	static char big[20000];
	struct rec r;
	struct call_ctx cx;
	struct tool_stream ts;
	size_t total = 0;

	(void)state;
	memset(big, 'x', sizeof(big));
	memset(&r, 0, sizeof(r));
	memset(&cx, 0, sizeof(cx));
	cx.output = rec_output;
	cx.progress_sink = &r;
	tool_stream_init(&ts, &cx);
	tool_stream_output(&ts, 1, "one\n", 4);
	tool_stream_output(&ts, 2, "two\n", 4);
	tool_stream_output(&ts, 1, big, sizeof(big));
	tool_stream_output(&ts, 2, "three\n", 6);
	tool_stream_end(&ts);
	assert_true(r.n >= 6);
	assert_int_equal(r.fd[0], 1);
	assert_int_equal(r.fd[1], 2);
	assert_int_equal(r.fd[r.n - 1], 2);
	for (int i = 0; i < r.n; i++) {
		assert_true(r.len[i] > 0 && r.len[i] <= TOOLS_OUTPUT_CHUNK);
		if (i > 0)
			assert_true(r.sent[i] > r.sent[i - 1]);
		total += r.len[i];
	}
	assert_int_equal(total, 4 + 4 + sizeof(big) + 6);
	assert_memory_equal(r.text + r.text_len - 6, "three\n", 6);

	/* Without an output hook: progress messages with the stream's name. */
	memset(&r, 0, sizeof(r));
	memset(&cx, 0, sizeof(cx));
	cx.progress = rec_progress;
	cx.progress_sink = &r;
	tool_stream_init(&ts, &cx);
	tool_stream_output(&ts, 1, "out\n", 4);
	tool_stream_output(&ts, 2, "err\n", 4);
	tool_stream_output(&ts, 3, "other fd\n", 9); /* not a stream: ignored */
	tool_stream_end(&ts);
	assert_int_equal(r.n, 2);
	assert_string_equal(r.msg[0], "stdout: out\n");
	assert_string_equal(r.msg[1], "stderr: err\n");
	assert_true(r.sent[1] > r.sent[0]);
}

/* ---- through the service ---- */

static json_t *
run(struct sfx *s, const char *id, const char *command, int background)
{
	return sfx_ok(s, s->account, "run_command",
	    json_pack("{s:s, s:s, s:b}", "sandbox_id", id, "command", command, "background",
		background));
}

static json_t *
get(struct sfx *s, const char *id, const char *cmd, json_t *extra)
{
	json_t *args = json_pack("{s:s, s:s}", "sandbox_id", id, "command_id", cmd);

	if (extra) {
		json_object_update(args, extra);
		json_decref(extra);
	}
	return sfx_ok(s, s->account, "get_command", args);
}

/* The fixture records progress: a command's output reaches it, stdout
 * before stderr as the fake produces them, and the result is the same. */
static void
test_run_output_as_progress(void **state)
{
	struct sfx *s = *state;
	char id[ID_MAX];
	json_t *r;

	sfx_create(s, 10, id);
	s->progress_n = 0;
	r = run(s, id, "echo hello", 0);
	assert_string_equal(sfx_str(r, "stdout"), "hello\n");
	json_decref(r);
	assert_int_equal(s->progress_n, 1);
	assert_string_equal(s->progress[0], "stdout: hello\n");
	s->progress_n = 0;
	r = run(s, id, "echo oops >&2", 0);
	assert_string_equal(sfx_str(r, "stderr"), "oops\n");
	json_decref(r);
	assert_int_equal(s->progress_n, 1);
	assert_string_equal(s->progress[0], "stderr: oops\n");
	/* A guest that gives no output while the command runs: the service
	 * sends it from the logs at the end, once. */
	fake_vmm_set_sink(0);
	s->progress_n = 0;
	r = run(s, id, "echo late", 0);
	assert_string_equal(sfx_str(r, "stdout"), "late\n");
	json_decref(r);
	assert_int_equal(s->progress_n, 1);
	assert_string_equal(s->progress[0], "stdout: late\n");
	fake_vmm_set_sink(1);
	/* A background command streams nothing: it is not waited for. */
	s->progress_n = 0;
	r = run(s, id, "echo later", 1);
	assert_non_null(strstr(sfx_str(r, "note"), "get_command"));
	json_decref(r);
	assert_int_equal(s->progress_n, 0);
}

static void
test_get_command_offsets(void **state)
{
	struct sfx *s = *state;
	char id[ID_MAX], cmd[ID_MAX];
	json_t *r;
	struct err e;

	sfx_create(s, 10, id);
	r = run(s, id, "echo hello", 1);
	snprintf(cmd, sizeof(cmd), "%s", sfx_str(r, "command_id"));
	json_decref(r);
	r = get(s, id, cmd, NULL);
	assert_string_equal(sfx_str(r, "state"), "exited");
	assert_int_equal(sfx_int(r, "exit_code"), 0);
	assert_string_equal(sfx_str(r, "stdout"), "hello\n");
	assert_string_equal(sfx_str(r, "stderr"), "");
	assert_int_equal(sfx_int(r, "next_stdout_offset"), 6);
	assert_int_equal(sfx_int(r, "next_stderr_offset"), 0);
	assert_int_equal(sfx_int(r, "stdout_bytes"), 6);
	assert_false(json_is_true(json_object_get(r, "stdout_truncated")));
	assert_true(json_is_true(json_object_get(r, "background")));
	json_decref(r);
	r = get(s, id, cmd, json_pack("{s:i}", "stdout_offset", 2));
	assert_string_equal(sfx_str(r, "stdout"), "llo\n");
	assert_int_equal(sfx_int(r, "stdout_offset"), 2);
	assert_int_equal(sfx_int(r, "next_stdout_offset"), 6);
	json_decref(r);
	r = get(s, id, cmd, json_pack("{s:i}", "stdout_offset", 6));
	assert_string_equal(sfx_str(r, "stdout"), "");
	json_decref(r);
	e = sfx_fails(s, s->account, "get_command",
	    json_pack("{s:s, s:s, s:i}", "sandbox_id", id, "command_id", cmd, "stdout_offset", 7),
	    ERR_INVALID);
	assert_string_equal(e.field, "stdout_offset");
}

/* More output than the service returns at once: pages by offset. */
static void
test_get_command_pages(void **state)
{
	struct sfx *s = *state;
	char id[ID_MAX], cmd[ID_MAX];
	json_t *r;

	sfx_create(s, 10, id);
	r = run(s, id, "yes | head -c 1500", 1);
	snprintf(cmd, sizeof(cmd), "%s", sfx_str(r, "command_id"));
	json_decref(r);
	r = get(s, id, cmd, NULL);
	assert_int_equal(sfx_int(r, "stdout_bytes"), 1500);
	assert_int_equal(sfx_int(r, "next_stdout_offset"), 1024); /* AAS_MAX_OUTPUT_BYTES */
	assert_true(json_is_true(json_object_get(r, "stdout_truncated")));
	json_decref(r);
	r = get(s, id, cmd, json_pack("{s:i}", "stdout_offset", 1024));
	assert_int_equal(sfx_int(r, "next_stdout_offset"), 1500);
	assert_false(json_is_true(json_object_get(r, "stdout_truncated")));
	json_decref(r);
}

/* wait_seconds returns when the command ends, not at the wait's end; without
 * it the call answers at once; a cancelled call stops waiting. */
static void
test_get_command_waits_for_the_end(void **state)
{
	struct sfx *s = *state;
	char id[ID_MAX], cmd[ID_MAX], cmd2[ID_MAX];
	long long t0, took;
	json_t *r;

	sfx_create(s, 10, id);
	r = run(s, id, "sleep 1", 1);
	snprintf(cmd, sizeof(cmd), "%s", sfx_str(r, "command_id"));
	json_decref(r);
	r = get(s, id, cmd, NULL);
	assert_string_equal(sfx_str(r, "state"), "running");
	assert_true(json_is_null(json_object_get(r, "exit_code")));
	json_decref(r);
	t0 = clock_ms();
	r = get(s, id, cmd, json_pack("{s:i}", "wait_seconds", 20));
	took = clock_ms() - t0;
	assert_string_equal(sfx_str(r, "state"), "exited");
	assert_int_equal(sfx_int(r, "exit_code"), 0);
	json_decref(r);
	assert_true(took >= 500);
	assert_true(took < 5000);

	r = run(s, id, "sleep 100", 1);
	snprintf(cmd2, sizeof(cmd2), "%s", sfx_str(r, "command_id"));
	json_decref(r);
	atomic_store(&s->cancel, 1);
	t0 = clock_ms();
	r = get(s, id, cmd2, json_pack("{s:i}", "wait_seconds", 20));
	took = clock_ms() - t0;
	atomic_store(&s->cancel, 0);
	assert_string_equal(sfx_str(r, "state"), "running");
	json_decref(r);
	assert_true(took < 2000);
}

static void
test_kill_command(void **state)
{
	struct sfx *s = *state;
	char id[ID_MAX], cmd[ID_MAX], st[16];
	json_t *r;
	struct err e;

	sfx_create(s, 10, id);
	r = run(s, id, "sleep 100", 1);
	snprintf(cmd, sizeof(cmd), "%s", sfx_str(r, "command_id"));
	json_decref(r);
	r = sfx_ok(s, s->account, "kill_command",
	    json_pack("{s:s, s:s}", "sandbox_id", id, "command_id", cmd));
	assert_true(json_is_true(json_object_get(r, "signalled")));
	assert_string_equal(sfx_str(r, "signal"), "TERM");
	assert_string_equal(sfx_str(r, "state"), "killed");
	assert_int_equal(sfx_int(r, "exit_code"), 128 + 15);
	json_decref(r);
	assert_int_equal(fake_vmm_counts().kills, 1);
	sfx_text(s, "SELECT state FROM sandbox_commands WHERE id = $1", cmd, st, sizeof(st));
	assert_string_equal(st, "killed");
	r = get(s, id, cmd, NULL);
	assert_string_equal(sfx_str(r, "state"), "killed");
	json_decref(r);
	/* Again: it ended, nothing is sent. */
	r = sfx_ok(s, s->account, "kill_command",
	    json_pack("{s:s, s:s, s:s}", "sandbox_id", id, "command_id", cmd, "signal", "KILL"));
	assert_false(json_is_true(json_object_get(r, "signalled")));
	assert_string_equal(sfx_str(r, "state"), "killed");
	assert_non_null(strstr(sfx_str(r, "note"), "already ended"));
	json_decref(r);
	assert_int_equal(fake_vmm_counts().kills, 1);

	/* Another signal by name. */
	r = run(s, id, "sleep 100", 1);
	snprintf(cmd, sizeof(cmd), "%s", sfx_str(r, "command_id"));
	json_decref(r);
	r = sfx_ok(s, s->account, "kill_command",
	    json_pack("{s:s, s:s, s:s}", "sandbox_id", id, "command_id", cmd, "signal", "SIGKILL"));
	assert_string_equal(sfx_str(r, "signal"), "KILL");
	assert_int_equal(sfx_int(r, "exit_code"), 128 + 9);
	json_decref(r);
	e = sfx_fails(s, s->account, "kill_command",
	    json_pack("{s:s, s:s, s:s}", "sandbox_id", id, "command_id", cmd, "signal", "STOP"),
	    ERR_INVALID);
	assert_string_equal(e.field, "signal");

	/* A command that ended by itself is not killed. */
	r = run(s, id, "exit 3", 1);
	snprintf(cmd, sizeof(cmd), "%s", sfx_str(r, "command_id"));
	json_decref(r);
	r = sfx_ok(s, s->account, "kill_command",
	    json_pack("{s:s, s:s}", "sandbox_id", id, "command_id", cmd));
	assert_false(json_is_true(json_object_get(r, "signalled")));
	assert_string_equal(sfx_str(r, "state"), "exited");
	assert_int_equal(sfx_int(r, "exit_code"), 3);
	json_decref(r);
	assert_int_equal(fake_vmm_counts().kills, 2);
}

/* Another account's sandbox and ids that name nothing are "not found";
 * malformed ids are refused by the schema. */
static void
test_commands_not_found(void **state)
{
	static const char *const tools[] = { "get_command", "kill_command" };
	struct sfx *s = *state;
	char id[ID_MAX], cmd[ID_MAX];
	json_t *r;
	struct err e;

	sfx_create(s, 10, id);
	r = run(s, id, "sleep 100", 1);
	snprintf(cmd, sizeof(cmd), "%s", sfx_str(r, "command_id"));
	json_decref(r);
	for (size_t i = 0; i < 2; i++) {
		e = sfx_fails(s, s->other, tools[i],
		    json_pack("{s:s, s:s}", "sandbox_id", id, "command_id", cmd), ERR_NOT_FOUND);
		assert_string_equal(e.field, "sandbox_id");
		e = sfx_fails(s, s->account, tools[i],
		    json_pack("{s:s, s:s}", "sandbox_id", id, "command_id", "cmd-0123456789abcdef"),
		    ERR_NOT_FOUND);
		assert_string_equal(e.field, "command_id");
		e = sfx_fails(s, s->account, tools[i],
		    json_pack("{s:s, s:s}", "sandbox_id", "sbx-0123456789abcdef", "command_id",
			cmd),
		    ERR_NOT_FOUND);
		e = sfx_fails(s, s->account, tools[i],
		    json_pack("{s:s, s:s}", "sandbox_id", id, "command_id", "cmd-nope"),
		    ERR_INVALID);
		assert_string_equal(e.field, "command_id");
	}
	/* Nothing was signalled by the refused calls. */
	assert_int_equal(fake_vmm_counts().kills, 0);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, sfx_setup, sfx_teardown)

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stream_keeps_characters_whole),
		cmocka_unit_test(test_stream_bounded_ordered),
		T(test_run_output_as_progress),
		T(test_get_command_offsets),
		cmocka_unit_test_setup_teardown(test_get_command_pages, sfx_setup_small_output,
		    sfx_teardown),
		T(test_get_command_waits_for_the_end),
		T(test_kill_command),
		T(test_commands_not_found),
	};

	return cmocka_run_group_tests(tests, sfx_group_setup, sfx_group_teardown);
}
