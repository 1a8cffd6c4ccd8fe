/* test_service_tools.c - the sandbox tools through tools_invoke, against
 * the real service, store and billing over PostgreSQL and a fake guest
 * (fake_vmm.h): create, run_command, write_file / read_file, expose_port,
 * and one account not seeing another's sandbox. Needs
 * AAS_TEST_DATABASE_URL; each test ends with every account's balance
 * equal to the sum of its ledger (checked in the tear-down). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/db.h"
#include "base/err.h"
#include "sandbox/preview.h"
#include "sandbox/sandbox.h"
#include "tests/unit/fake_vmm.h"
#include "vmm/guest_listen.h"
#include "tests/unit/service_fixture.h"

#define ID_MAX 32

/* ---- create ---- */

static void
test_create_charges_minutes_times_price(void **state)
{
	struct sfx *s = *state;
	struct fake_vm_info vm;
	char id[ID_MAX];
	json_t *r, *u;

	r = sfx_ok(s, s->account, "create_sandbox",
	    json_pack("{s:s, s:i, s:s, s:{s:s}}", "size", "small", "timeout_minutes", 10, "name",
		"first", "metadata", "team", "qa"));
	snprintf(id, sizeof(id), "%s", sfx_str(r, "sandbox_id"));
	assert_string_equal(sfx_str(r, "state"), "running");
	assert_string_equal(sfx_str(r, "size"), "small");
	assert_string_equal(sfx_str(r, "name"), "first");
	assert_string_equal(sfx_str(r, "accelerator"), "kvm");
	assert_string_equal(sfx_str(r, "network"), "nat");
	assert_string_equal(json_string_value(json_object_get(json_object_get(r, "metadata"),
				"team")),
	    "qa");
	assert_int_equal(sfx_int(r, "vcpus"), 1);
	assert_int_equal(sfx_int(r, "memory_mib"), 512);
	json_decref(r);

	/* 10 minutes at 500 micro-USD, taken once, in the ledger and the balance. */
	assert_int_equal(sfx_balance(s, s->account), SFX_FREE_CREDIT - 10 * SFX_PRICE_SMALL);
	assert_int_equal(sfx_ll(s,
			     "SELECT sum(amount) FROM ledger WHERE sandbox_id = $1"
			     " AND kind = 'charge'",
			     id),
	    -10 * SFX_PRICE_SMALL);
	assert_int_equal(sfx_ll(s, "SELECT count(*) FROM ledger WHERE sandbox_id = $1", id), 1);
	u = sfx_ok(s, s->account, "get_usage", NULL);
	assert_int_equal(sfx_int(u, "balance"), SFX_FREE_CREDIT - 10 * SFX_PRICE_SMALL);
	json_decref(u);

	/* The row: running, paid for 10 minutes, expiring 10 minutes after it
	 * became ready. */
	assert_int_equal(sfx_ll(s, "SELECT charged FROM sandboxes WHERE id = $1", id),
	    10 * SFX_PRICE_SMALL);
	assert_int_equal(sfx_ll(s, "SELECT paid_minutes FROM sandboxes WHERE id = $1", id), 10);
	assert_int_equal(sfx_ll(s, "SELECT price_per_minute FROM sandboxes WHERE id = $1", id),
	    SFX_PRICE_SMALL);
	assert_int_equal(sfx_ll(s,
			     "SELECT extract(epoch FROM expires_at - ready_at)::bigint"
			     " FROM sandboxes WHERE id = $1",
			     id),
	    600);
	assert_int_equal(sfx_ll(s,
			     "SELECT count(*) FROM sandboxes WHERE id = $1"
			     " AND state = 'running' AND settled_at IS NULL",
			     id),
	    1);

	/* The VM: one boot of the size asked for, with a network device. */
	assert_int_equal(fake_vm_info(id, &vm), 0);
	assert_true(vm.live);
	assert_int_equal(vm.boots, 1);
	assert_int_equal(vm.vcpus, 1);
	assert_int_equal(vm.memory_mib, 512);
	assert_int_equal(vm.net, VM_NET_NAT);
	assert_string_equal(vm.host, s->host);
	/* The boot's progress reached the caller. */
	assert_true(s->progress_n >= 4);
	assert_string_equal(s->progress[s->progress_n - 1], "guest agent answered");

	/* A medium one costs its own price. */
	r = sfx_ok(s, s->account, "create_sandbox",
	    json_pack("{s:s, s:i, s:b}", "size", "medium", "timeout_minutes", 3, "internet", 0));
	assert_string_equal(sfx_str(r, "network"), "isolated");
	assert_int_equal(sfx_ll(s, "SELECT charged FROM sandboxes WHERE id = $1",
			     sfx_str(r, "sandbox_id")),
	    3 * SFX_PRICE_MEDIUM);
	json_decref(r);
	assert_int_equal(sfx_balance(s, s->account),
	    SFX_FREE_CREDIT - 10 * SFX_PRICE_SMALL - 3 * SFX_PRICE_MEDIUM);
}

static void
test_create_refused_without_credit(void **state)
{
	struct sfx *s = *state;
	struct err e;

	/* 30 minutes of a large sandbox is more than an account starts with. */
	assert_true(30 * SFX_PRICE_LARGE > SFX_FREE_CREDIT);
	e = sfx_fails(s, s->account, "create_sandbox",
	    json_pack("{s:s, s:i}", "size", "large", "timeout_minutes", 30), ERR_PAYMENT);
	assert_non_null(strstr(e.msg, "not enough credit"));
	/* Nothing written: no row, no charge, no VM. */
	assert_int_equal(sfx_balance(s, s->account), SFX_FREE_CREDIT);
	assert_int_equal(sfx_ll(s, "SELECT count(*) FROM sandboxes WHERE account_id = $1",
			     s->account),
	    0);
	assert_int_equal(sfx_ll(s,
			     "SELECT count(*) FROM ledger WHERE account_id = $1"
			     " AND kind <> 'grant'",
			     s->account),
	    0);
	assert_int_equal(fake_vmm_counts().boots, 0);
}

static void
test_create_refused_past_max_lifetime(void **state)
{
	struct sfx *s = *state;
	struct err e;

	e = sfx_fails(s, s->account, "create_sandbox",
	    json_pack("{s:i}", "timeout_minutes", SFX_MAX_LIFETIME_MIN + 1), ERR_INVALID);
	assert_string_equal(e.field, "timeout_minutes");
	assert_int_equal(sfx_balance(s, s->account), SFX_FREE_CREDIT);
	assert_int_equal(fake_vmm_counts().boots, 0);
}

static void
test_create_refused_while_hypervisor_not_ready(void **state)
{
	struct sfx *s = *state;

	fake_vmm_set_ready(0);
	sfx_fails(s, s->account, "create_sandbox", NULL, ERR_UNAVAILABLE);
	assert_int_equal(sfx_balance(s, s->account), SFX_FREE_CREDIT);
	assert_int_equal(sfx_ll(s, "SELECT count(*) FROM sandboxes WHERE account_id = $1",
			     s->account),
	    0);
}

/* ---- run_command ---- */

/* Runs `command` and returns the result; `extra` adds arguments. */
static json_t *
run(struct sfx *s, const char *id, const char *command, json_t *extra)
{
	json_t *args = json_pack("{s:s, s:s}", "sandbox_id", id, "command", command);

	if (extra) {
		json_object_update(args, extra);
		json_decref(extra);
	}
	return sfx_ok(s, s->account, "run_command", args);
}

static void
test_run_exit_codes_and_output(void **state)
{
	static const struct {
		const char *command;
		int exit_code;
		const char *out, *err;
	} cases[] = {
		{ "true", 0, "", "" },
		{ "false", 1, "", "" },
		{ "exit 3", 3, "", "" },
		{ "echo hello", 0, "hello\n", "" },
		{ "echo oops >&2", 0, "", "oops\n" },
		{ "no-such-program", 127, "",
		    "bash: line 1: no-such-program: command not found\n" },
	};
	struct sfx *s = *state;
	char id[ID_MAX], st[16];

	sfx_create(s, 10, id);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *r = run(s, id, cases[i].command, NULL);
		const char *cmd_id = sfx_str(r, "command_id");

		assert_string_equal(sfx_str(r, "state"), "exited");
		assert_int_equal(sfx_int(r, "exit_code"), cases[i].exit_code);
		assert_string_equal(sfx_str(r, "stdout"), cases[i].out);
		assert_string_equal(sfx_str(r, "stderr"), cases[i].err);
		assert_int_equal(sfx_int(r, "stdout_bytes"), strlen(cases[i].out));
		assert_false(json_is_true(json_object_get(r, "timed_out")));
		/* The command's row says the same. */
		sfx_text(s, "SELECT state FROM sandbox_commands WHERE id = $1", cmd_id, st,
		    sizeof(st));
		assert_string_equal(st, "exited");
		assert_int_equal(sfx_ll(s, "SELECT exit_code FROM sandbox_commands WHERE id = $1",
				     cmd_id),
		    cases[i].exit_code);
		json_decref(r);
	}
}

/* The longest command run_command's schema takes reaches the guest whole
 * and is answered as any other (the black-box fuzzer sends it). */
static void
test_run_longest_command(void **state)
{
	static const char pre[] = "bash: line 1: ", post[] = ": command not found\n";
	enum { LONGEST = 65536 };
	struct sfx *s = *state;
	char id[ID_MAX];
	char *cmd = malloc(LONGEST + 1);
	json_t *r;

	assert_non_null(cmd);
	memset(cmd, 'x', LONGEST);
	cmd[LONGEST] = '\0';
	sfx_create(s, 10, id);
	r = run(s, id, cmd, NULL);
	assert_int_equal(sfx_int(r, "exit_code"), 127);
	assert_int_equal(sfx_int(r, "stderr_bytes"), sizeof(pre) - 1 + LONGEST + sizeof(post) - 1);
	json_decref(r);
	free(cmd);
}

static void
test_run_passes_stdin_env_and_cwd(void **state)
{
	struct sfx *s = *state;
	char id[ID_MAX];
	json_t *r;

	sfx_create(s, 10, id);
	r = run(s, id, "cat", json_pack("{s:s}", "stdin", "line one\nline two\n"));
	assert_string_equal(sfx_str(r, "stdout"), "line one\nline two\n");
	json_decref(r);
	r = run(s, id, "printenv GREETING", json_pack("{s:{s:s}}", "env", "GREETING", "hi"));
	assert_string_equal(sfx_str(r, "stdout"), "hi\n");
	json_decref(r);
	r = run(s, id, "pwd", json_pack("{s:s}", "cwd", "/tmp"));
	assert_string_equal(sfx_str(r, "stdout"), "/tmp\n");
	json_decref(r);
	r = run(s, id, "pwd", NULL);
	assert_string_equal(sfx_str(r, "stdout"), "/home/sandbox\n");
	json_decref(r);
}

static void
test_run_timeout(void **state)
{
	struct sfx *s = *state;
	char id[ID_MAX], st[16];
	json_t *r;

	sfx_create(s, 10, id);
	r = run(s, id, "sleep 5", json_pack("{s:i}", "timeout_seconds", 1));
	assert_string_equal(sfx_str(r, "state"), "timed_out");
	assert_true(json_is_true(json_object_get(r, "timed_out")));
	assert_int_equal(sfx_int(r, "exit_code"), 124);
	assert_true(sfx_int(r, "duration_ms") >= 1000);
	sfx_text(s, "SELECT state FROM sandbox_commands WHERE id = $1", sfx_str(r, "command_id"),
	    st, sizeof(st));
	assert_string_equal(st, "timed_out");
	json_decref(r);

	/* Within its timeout a sleep just ends. */
	r = run(s, id, "sleep 0", json_pack("{s:i}", "timeout_seconds", 1));
	assert_string_equal(sfx_str(r, "state"), "exited");
	assert_false(json_is_true(json_object_get(r, "timed_out")));
	assert_int_equal(sfx_int(r, "exit_code"), 0);
	json_decref(r);
}

static void
test_run_output_truncated(void **state)
{
	struct sfx *s = *state;
	char id[ID_MAX];
	struct err e;
	json_t *r;

	sfx_create(s, 10, id);
	/* 5000 bytes, 1000 kept: the count says what there was. */
	r = run(s, id, "yes | head -c 5000", json_pack("{s:i}", "max_output_bytes", 1000));
	assert_int_equal(strlen(sfx_str(r, "stdout")), 1000);
	assert_int_equal(sfx_int(r, "stdout_bytes"), 5000);
	assert_true(json_is_true(json_object_get(r, "stdout_truncated")));
	assert_false(json_is_true(json_object_get(r, "stderr_truncated")));
	assert_int_equal(sfx_int(r, "stderr_bytes"), 0);
	assert_memory_equal(sfx_str(r, "stdout"), "y\ny\n", 4);
	json_decref(r);

	/* Exactly at the limit nothing is cut. */
	r = run(s, id, "yes | head -c 1000", json_pack("{s:i}", "max_output_bytes", 1000));
	assert_int_equal(strlen(sfx_str(r, "stdout")), 1000);
	assert_false(json_is_true(json_object_get(r, "stdout_truncated")));
	json_decref(r);

	/* At the service's own cap (AAS_MAX_OUTPUT_BYTES). */
	r = run(s, id, "yes | head -c 2000000",
	    json_pack("{s:I}", "max_output_bytes", (json_int_t)SFX_MAX_OUTPUT));
	assert_int_equal(strlen(sfx_str(r, "stdout")), SFX_MAX_OUTPUT);
	assert_int_equal(sfx_int(r, "stdout_bytes"), 2000000);
	assert_true(json_is_true(json_object_get(r, "stdout_truncated")));
	json_decref(r);

	/* Beyond that cap the call is refused, naming the field. */
	e = sfx_fails(s, s->account, "run_command",
	    json_pack("{s:s, s:s, s:I}", "sandbox_id", id, "command", "true", "max_output_bytes",
		(json_int_t)SFX_MAX_OUTPUT + 1),
	    ERR_INVALID);
	assert_string_equal(e.field, "max_output_bytes");
}

/* A service whose output cap is below run_command's default keeps the
 * cap when the call names no max_output_bytes, instead of refusing it. */
static void
test_run_default_output_under_small_cap(void **state)
{
	struct sfx *s = *state;
	char id[ID_MAX];
	json_t *r;

	sfx_create(s, 10, id);
	r = run(s, id, "yes | head -c 5000", NULL);
	assert_int_equal(strlen(sfx_str(r, "stdout")), 1024);
	assert_int_equal(sfx_int(r, "stdout_bytes"), 5000);
	assert_true(json_is_true(json_object_get(r, "stdout_truncated")));
	json_decref(r);
}

static void
test_run_cancelled(void **state)
{
	struct sfx *s = *state;
	char id[ID_MAX];
	struct err e;

	sfx_create(s, 10, id);
	/* The client cancelled: the command is stopped in the guest. */
	atomic_store(&s->cancel, 1);
	e = sfx_fails(s, s->account, "run_command",
	    json_pack("{s:s, s:s, s:i}", "sandbox_id", id, "command", "sleep 30", "timeout_seconds",
		60),
	    ERR_CONFLICT);
	atomic_store(&s->cancel, 0);
	assert_non_null(strstr(e.msg, "cancelled"));
	assert_int_equal(fake_vmm_counts().kills, 1);
	assert_int_equal(sfx_ll(s,
			     "SELECT count(*) FROM sandbox_commands WHERE sandbox_id = $1"
			     " AND state = 'failed'",
			     id),
	    1);
}

static void
test_run_background(void **state)
{
	struct sfx *s = *state;
	char id[ID_MAX], cmd_id[32], st[16];
	json_t *r, *cmds;

	sfx_create(s, 10, id);
	r = run(s, id, "exit 7", json_pack("{s:b}", "background", 1));
	assert_string_equal(sfx_str(r, "state"), "running");
	assert_true(json_is_true(json_object_get(r, "background")));
	snprintf(cmd_id, sizeof(cmd_id), "%s", sfx_str(r, "command_id"));
	json_decref(r);
	sfx_text(s, "SELECT state FROM sandbox_commands WHERE id = $1", cmd_id, st, sizeof(st));
	assert_string_equal(st, "running");

	/* Looking at the sandbox asks the guest about it: it has ended. */
	r = sfx_ok(s, s->account, "get_sandbox", json_pack("{s:s}", "sandbox_id", id));
	cmds = json_object_get(r, "commands");
	assert_int_equal(json_array_size(cmds), 1);
	assert_string_equal(sfx_str(json_array_get(cmds, 0), "state"), "exited");
	assert_int_equal(sfx_int(json_array_get(cmds, 0), "exit_code"), 7);
	json_decref(r);
}

/* Per-sandbox bounds: exposed ports, running background commands and the
 * record of commands, each refused or trimmed at its configured cap. */
static void
test_per_sandbox_caps(void **state)
{
	struct sfx *s = *state;
	char id[ID_MAX];
	struct err e;
	json_t *r;

	sfx_create(s, 10, id);
	for (int port = 8000; port < 8002; port++)
		json_decref(sfx_ok(s, s->account, "expose_port",
		    json_pack("{s:s, s:i}", "sandbox_id", id, "port", port)));
	e = sfx_fails(s, s->account, "expose_port",
	    json_pack("{s:s, s:i}", "sandbox_id", id, "port", 8002), ERR_LIMIT);
	assert_string_equal(e.field, "port");
	assert_non_null(strstr(e.msg, "AAS_MAX_PORTS_PER_SANDBOX=2"));
	assert_int_equal(sfx_ll(s, "SELECT count(*) FROM sandbox_ports WHERE sandbox_id = $1", id),
	    2);

	/* A background command that ended since anyone looked frees its
	 * place: at the cap the guest is asked first. */
	json_decref(run(s, id, "sleep 1", json_pack("{s:b}", "background", 1)));
	usleep(1200 * 1000);
	r = run(s, id, "sleep 100", json_pack("{s:b}", "background", 1));
	json_decref(r);
	e = sfx_fails(s, s->account, "run_command",
	    json_pack("{s:s, s:s, s:b}", "sandbox_id", id, "command", "sleep 100", "background", 1),
	    ERR_LIMIT);
	assert_non_null(strstr(e.msg, "AAS_MAX_BACKGROUND_PER_SANDBOX=1"));
	/* Foreground commands still run, and the record keeps the newest 10. */
	for (int i = 0; i < 15; i++)
		json_decref(run(s, id, "true", NULL));
	assert_int_equal(sfx_ll(s, "SELECT count(*) FROM sandbox_commands WHERE sandbox_id = $1",
			     id),
	    10);
}

/* ---- files ---- */

static json_t *
read_file(struct sfx *s, const char *id, const char *path, json_t *extra)
{
	json_t *args = json_pack("{s:s, s:s}", "sandbox_id", id, "path", path);

	if (extra) {
		json_object_update(args, extra);
		json_decref(extra);
	}
	return sfx_ok(s, s->account, "read_file", args);
}

static void
test_write_then_read_text(void **state)
{
	static const struct {
		long long offset, length; /* length 0: the default */
		const char *content;
		int eof;
	} pages[] = {
		{ 0, 0, "hello world\n", 1 },
		{ 6, 5, "world", 0 },
		{ 6, 100, "world\n", 1 },
		{ 0, 12, "hello world\n", 1 },
		{ 12, 0, "", 1 },
		{ 100, 0, "", 1 },
	};
	struct sfx *s = *state;
	unsigned char bytes[64];
	unsigned mode = 0;
	char id[ID_MAX];
	json_t *r;

	sfx_create(s, 10, id);
	r = sfx_ok(s, s->account, "write_file",
	    json_pack("{s:s, s:s, s:s}", "sandbox_id", id, "path", "notes/a.txt", "content",
		"hello world\n"));
	assert_string_equal(sfx_str(r, "path"), "/home/sandbox/notes/a.txt");
	assert_int_equal(sfx_int(r, "bytes_written"), 12);
	assert_string_equal(sfx_str(r, "mode"), "0644");
	json_decref(r);
	/* The bytes are in the guest, with the mode. */
	assert_int_equal(fake_file_get(id, "/home/sandbox/notes/a.txt", bytes, sizeof(bytes),
			     &mode),
	    12);
	assert_memory_equal(bytes, "hello world\n", 12);
	assert_int_equal(mode, 0644);

	for (size_t i = 0; i < sizeof(pages) / sizeof(pages[0]); i++) {
		json_t *extra = json_pack("{s:I}", "offset", (json_int_t)pages[i].offset);
		if (pages[i].length)
			json_object_set_new(extra, "length", json_integer(pages[i].length));
		r = read_file(s, id, "notes/a.txt", extra);
		assert_string_equal(sfx_str(r, "content"), pages[i].content);
		assert_string_equal(sfx_str(r, "encoding"), "text");
		assert_int_equal(sfx_int(r, "offset"), pages[i].offset);
		assert_int_equal(sfx_int(r, "length"), strlen(pages[i].content));
		assert_int_equal(sfx_int(r, "total_size"), 12);
		assert_int_equal(json_is_true(json_object_get(r, "eof")), pages[i].eof);
		json_decref(r);
	}

	/* A command sees the file; a write replaces it, with a new mode. */
	r = run(s, id, "cat notes/a.txt", NULL);
	assert_string_equal(sfx_str(r, "stdout"), "hello world\n");
	json_decref(r);
	r = sfx_ok(s, s->account, "write_file",
	    json_pack("{s:s, s:s, s:s, s:s}", "sandbox_id", id, "path", "/home/sandbox/notes/a.txt",
		"content", "#!/bin/sh\n", "mode", "0755"));
	assert_string_equal(sfx_str(r, "mode"), "0755");
	json_decref(r);
	assert_int_equal(fake_file_get(id, "/home/sandbox/notes/a.txt", bytes, sizeof(bytes),
			     &mode),
	    10);
	assert_int_equal(mode, 0755);
}

static void
test_write_then_read_base64(void **state)
{
	static const unsigned char blob[] = { 0x00, 0xff, 0x10, 'a', 0x80, 0x00, 0x7f };
	static const char blob_b64[] = "AP8QYYAAfw==";
	struct sfx *s = *state;
	unsigned char bytes[16];
	char id[ID_MAX];
	json_t *r;

	sfx_create(s, 10, id);
	r = sfx_ok(s, s->account, "write_file",
	    json_pack("{s:s, s:s, s:s}", "sandbox_id", id, "path", "/tmp/blob.bin",
		"content_base64", blob_b64));
	assert_int_equal(sfx_int(r, "bytes_written"), sizeof(blob));
	json_decref(r);
	assert_int_equal(fake_file_get(id, "/tmp/blob.bin", bytes, sizeof(bytes), NULL),
	    sizeof(blob));
	assert_memory_equal(bytes, blob, sizeof(blob));

	r = read_file(s, id, "/tmp/blob.bin", json_pack("{s:s}", "encoding", "base64"));
	assert_string_equal(sfx_str(r, "content"), blob_b64);
	assert_string_equal(sfx_str(r, "encoding"), "base64");
	assert_int_equal(sfx_int(r, "total_size"), sizeof(blob));
	assert_true(json_is_true(json_object_get(r, "eof")));
	json_decref(r);
	/* A page of it: bytes 1..3. */
	r = read_file(s, id, "/tmp/blob.bin",
	    json_pack("{s:s, s:i, s:i}", "encoding", "base64", "offset", 1, "length", 3));
	assert_string_equal(sfx_str(r, "content"), "/xBh");
	assert_false(json_is_true(json_object_get(r, "eof")));
	json_decref(r);
	/* As text, bytes that are not UTF-8 become U+FFFD. */
	r = read_file(s, id, "/tmp/blob.bin", json_pack("{s:i, s:i}", "offset", 1, "length", 1));
	assert_string_equal(sfx_str(r, "content"), "\xEF\xBF\xBD");
	json_decref(r);
}

static void
test_file_errors(void **state)
{
	struct sfx *s = *state;
	char id[ID_MAX];
	struct err e;

	sfx_create(s, 10, id);
	e = sfx_fails(s, s->account, "read_file",
	    json_pack("{s:s, s:s}", "sandbox_id", id, "path", "missing.txt"), ERR_NOT_FOUND);
	assert_non_null(strstr(e.msg, "/home/sandbox/missing.txt"));
	/* Without make_parents a missing directory is an error. */
	sfx_fails(s, s->account, "write_file",
	    json_pack("{s:s, s:s, s:s, s:b}", "sandbox_id", id, "path", "no/such/dir/f.txt",
		"content", "x", "make_parents", 0),
	    ERR_INVALID);
	assert_int_equal(fake_file_get(id, "/home/sandbox/no/such/dir/f.txt", NULL, 0, NULL), -1);
	e = sfx_fails(s, s->account, "write_file",
	    json_pack("{s:s, s:s, s:s, s:s}", "sandbox_id", id, "path", "f.txt", "content", "x",
		"content_base64", "eA=="),
	    ERR_INVALID);
	assert_string_equal(e.field, "content");
	e = sfx_fails(s, s->account, "write_file",
	    json_pack("{s:s, s:s, s:s}", "sandbox_id", id, "path", "f.txt", "content_base64",
		"not base64!"),
	    ERR_INVALID);
	assert_string_equal(e.field, "content_base64");
}

static void
test_list_files(void **state)
{
	struct sfx *s = *state;
	char id[ID_MAX];
	json_t *r;

	sfx_create(s, 10, id);
	assert_int_equal(fake_file_put(id, "/home/sandbox/a.txt", "a", 1, 0644), 0);
	assert_int_equal(fake_file_put(id, "/home/sandbox/src/b.c", "bb", 2, 0600), 0);
	assert_int_equal(fake_file_put(id, "/home/sandbox/src/deep/c.h", "ccc", 3, 0644), 0);
	r = sfx_ok(s, s->account, "list_files",
	    json_pack("{s:s, s:i}", "sandbox_id", id, "depth", 2));
	assert_string_equal(sfx_str(r, "path"), "/home/sandbox");
	assert_int_equal(json_array_size(json_object_get(r, "entries")), 2);
	assert_false(json_is_true(json_object_get(r, "truncated")));
	json_decref(r);
	r = sfx_ok(s, s->account, "list_files",
	    json_pack("{s:s, s:s, s:i, s:i}", "sandbox_id", id, "path", "src", "depth", 5, "limit",
		1));
	assert_string_equal(sfx_str(r, "path"), "/home/sandbox/src");
	assert_int_equal(json_array_size(json_object_get(r, "entries")), 1);
	assert_true(json_is_true(json_object_get(r, "truncated")));
	json_decref(r);
}

/* ---- expose_port ---- */

/* The front end's hook: which sandboxes it was told ended. */
static char ended_ids[4][ID_MAX];
static int n_ended;

static void
record_ended(const char *sandbox_id, void *ctx)
{
	(void)ctx;
	if (n_ended < 4)
		snprintf(ended_ids[n_ended++], ID_MAX, "%s", sandbox_id);
}

/* The reaper ends a disabled account's sandboxes, and any notice wakes
 * it; its claim skips a row locked elsewhere (FOR UPDATE ... SKIP
 * LOCKED). So the row stays locked while the account is disabled: the
 * preview is refused for the account, not because the sandbox ended. */
struct while_disabled {
	struct sfx *s;
	const char *id, *host;
	struct preview_route route;
};

static int
route_while_disabled(PGconn *c, void *arg, struct err *e)
{
	struct while_disabled *wd = arg;
	const char *p[1] = { wd->id };

	if (db_conn_exec(c, "SELECT 1 FROM sandboxes WHERE id = $1 FOR SHARE", 1, p, NULL, e) < 0)
		return -1;
	assert_int_equal(sfx_ll(wd->s,
			     "WITH u AS (UPDATE accounts SET disabled_at = now() WHERE id = $1"
			     " RETURNING 1) SELECT count(*) FROM u",
			     wd->s->account),
	    1);
	memset(&wd->route, 0, sizeof(wd->route));
	sbx_preview_route(wd->s->app->sbx, &(struct preview_ask){ .host = wd->host }, &wd->route);
	assert_int_equal(sfx_ll(wd->s,
			     "WITH u AS (UPDATE accounts SET disabled_at = NULL WHERE id = $1"
			     " RETURNING 1) SELECT count(*) FROM u",
			     wd->s->account),
	    1);
	return 0;
}

static void
test_expose_port(void **state)
{
	struct sfx *s = *state;
	char id[ID_MAX], url[256], host[128];
	struct preview_route route;
	struct fake_vm_info vm;
	struct err e;
	json_t *r;
	int hp;

	sfx_create(s, 10, id);
	r = sfx_ok(s, s->account, "expose_port",
	    json_pack("{s:s, s:i}", "sandbox_id", id, "port", 8080));
	snprintf(url, sizeof(url), "http://8080-%s." SFX_PREVIEW_DOMAIN "/", id);
	assert_string_equal(sfx_str(r, "url"), url);
	assert_true(json_is_true(json_object_get(r, "public")));
	assert_null(json_object_get(r, "token"));
	json_decref(r);
	/* A forward into the VM, and the preview goes to it. */
	hp = fake_vm_forward(id, 8080);
	assert_true(hp >= FAKE_FIRST_HOST_PORT);
	snprintf(host, sizeof(host), "8080-%s." SFX_PREVIEW_DOMAIN, id);
	memset(&route, 0, sizeof(route));
	sbx_preview_route(s->app->sbx, &(struct preview_ask){ .host = host }, &route);
	assert_int_equal(route.status, 0);
	assert_int_equal(route.upstream_port, hp);
	assert_string_equal(route.upstream_address, "127.0.0.1");
	/* Whose it is, for the proxy's per-sandbox and per-account caps. */
	assert_string_equal(route.sandbox_id, id);
	assert_string_equal(route.account_id, s->account);
	/* A disabled account's previews are not served. */
	struct while_disabled wd = { .s = s, .id = id, .host = host };
	err_clear(&e);
	assert_int_equal(db_tx(s->app->db, route_while_disabled, &wd, &e), 0);
	assert_int_equal(wd.route.status, 404);

	/* The same port twice is refused, and no second forward is made. */
	e = sfx_fails(s, s->account, "expose_port",
	    json_pack("{s:s, s:i}", "sandbox_id", id, "port", 8080), ERR_CONFLICT);
	assert_string_equal(e.field, "port");
	assert_int_equal(fake_vmm_counts().forward_adds, 1);

	/* A private port: a token shown once and a signed URL; no token, no entry. */
	r = sfx_ok(s, s->account, "expose_port",
	    json_pack("{s:s, s:i, s:b}", "sandbox_id", id, "port", 3000, "public", 0));
	snprintf(url, sizeof(url), "http://3000-%s." SFX_PREVIEW_DOMAIN "/", id);
	assert_string_equal(sfx_str(r, "url"), url);
	assert_int_equal(strncmp(sfx_str(r, "token"), "aas_pt_", 7), 0);
	assert_int_equal(strncmp(sfx_str(r, "signed_url"), url, strlen(url)), 0);
	json_decref(r);
	snprintf(host, sizeof(host), "3000-%s." SFX_PREVIEW_DOMAIN, id);
	memset(&route, 0, sizeof(route));
	sbx_preview_route(s->app->sbx, &(struct preview_ask){ .host = host }, &route);
	assert_int_equal(route.status, 401);

	r = sfx_ok(s, s->account, "get_sandbox", json_pack("{s:s}", "sandbox_id", id));
	assert_int_equal(json_array_size(json_object_get(r, "ports")), 2);
	json_decref(r);

	/* Destroyed: the forwards go with the VM, the ports with the row, and
	 * the front end hears of it (to close the previews still open). */
	const struct app_hooks hooks = { .sandbox_ended = record_ended };
	n_ended = 0;
	app_set_hooks(s->app, &hooks);
	json_decref(sfx_ok(s, s->account, "destroy_sandbox", json_pack("{s:s}", "sandbox_id", id)));
	app_set_hooks(s->app, NULL);
	assert_int_equal(n_ended, 1);
	assert_string_equal(ended_ids[0], id);
	assert_int_equal(fake_vm_info(id, &vm), 0);
	assert_int_equal(vm.forwards, 0);
	assert_int_equal(sfx_ll(s, "SELECT count(*) FROM sandbox_ports WHERE sandbox_id = $1", id),
	    0);
}

/* A preview whose upstream closed without answering says why: nothing
 * listens on the port, a server listens on loopback only, one listens and
 * closed anyway, or the guest cannot be asked; a paused sandbox's preview
 * says it is paused (not "does not exist"). */
static void
test_preview_explains_no_answer(void **state)
{
	static const struct {
		int listen;
		const char *says;
	} cases[] = {
		{ GUEST_LISTEN_NONE, "Nothing is listening on port 8080 inside the sandbox" },
		{ GUEST_LISTEN_LOOPBACK, "but only on 127.0.0.1" },
		{ GUEST_LISTEN_ANY, "closed the connection without answering" },
		{ -1, "could not be asked why" },
	};
	struct sfx *s = *state;
	char id[ID_MAX], host[128], msg[320];
	struct preview_route route;

	sfx_create(s, 10, id);
	json_decref(sfx_ok(s, s->account, "expose_port",
	    json_pack("{s:s, s:i}", "sandbox_id", id, "port", 8080)));
	snprintf(host, sizeof(host), "8080-%s." SFX_PREVIEW_DOMAIN, id);
	memset(&route, 0, sizeof(route));
	sbx_preview_route(s->app->sbx, &(struct preview_ask){ .host = host }, &route);
	assert_int_equal(route.status, 0);
	assert_int_equal(route.guest_port, 8080);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		fake_vmm_set_listen(cases[i].listen);
		sbx_preview_explain(s->app->sbx, &route, msg, sizeof(msg));
		if (strstr(msg, cases[i].says) == NULL)
			fail_msg("listen %d: \"%s\"", cases[i].listen, msg);
	}
	json_decref(sfx_ok(s, s->account, "pause_sandbox", json_pack("{s:s}", "sandbox_id", id)));
	sbx_preview_explain(s->app->sbx, &route, msg, sizeof(msg));
	assert_non_null(strstr(msg, "The sandbox is paused"));
	memset(&route, 0, sizeof(route));
	sbx_preview_route(s->app->sbx, &(struct preview_ask){ .host = host }, &route);
	assert_int_equal(route.status, 503);
	assert_non_null(strstr(route.message, "resume_sandbox"));
}

/* Another request exposes the same port while this one adds its forward. */
static void
expose_same_port(void *ctx, const char *id, int guest_port)
{
	char param[64];

	snprintf(param, sizeof(param), "%s:%d", id, guest_port);
	assert_int_equal(
	    sfx_ll(ctx,
		"WITH i AS (INSERT INTO sandbox_ports(sandbox_id, port,"
		" public, host_port) VALUES (split_part($1, ':', 1), split_part($1, ':', 2)::int,"
		" true, 1) RETURNING 1) SELECT count(*) FROM i",
		param),
	    1);
}

static void
test_expose_port_lost_race_removes_forward(void **state)
{
	struct sfx *s = *state;
	char id[ID_MAX];
	struct err e;

	sfx_create(s, 10, id);
	fake_vmm_on_forward(expose_same_port, s);
	e = sfx_fails(s, s->account, "expose_port",
	    json_pack("{s:s, s:i}", "sandbox_id", id, "port", 8080), ERR_CONFLICT);
	fake_vmm_on_forward(NULL, NULL);
	assert_string_equal(e.field, "port");
	/* The forward made for the losing request is taken away again. */
	assert_int_equal(fake_vmm_counts().forward_adds, 1);
	assert_int_equal(fake_vmm_counts().forward_removes, 1);
	assert_int_equal(fake_vm_forward(id, 8080), -1);
	assert_int_equal(sfx_ll(s, "SELECT count(*) FROM sandbox_ports WHERE sandbox_id = $1", id),
	    1);
}

/* ---- without networking ---- */

static void
test_net_off(void **state)
{
	struct sfx *s = *state;
	struct fake_vm_info vm;
	char id[ID_MAX];
	struct err e;
	json_t *r;

	/* internet defaults to true, which this server cannot give. */
	e = sfx_fails(s, s->account, "create_sandbox", NULL, ERR_UNAVAILABLE);
	assert_string_equal(e.field, "internet");
	assert_int_equal(sfx_balance(s, s->account), SFX_FREE_CREDIT);
	r = sfx_ok(s, s->account, "create_sandbox", json_pack("{s:b}", "internet", 0));
	snprintf(id, sizeof(id), "%s", sfx_str(r, "sandbox_id"));
	assert_string_equal(sfx_str(r, "network"), "none");
	json_decref(r);
	assert_int_equal(fake_vm_info(id, &vm), 0);
	assert_int_equal(vm.net, VM_NET_NONE);
	/* The rule was never even looked at. */
	assert_int_equal(fake_vmm_counts().netguard_checks, 0);
	e = sfx_fails(s, s->account, "expose_port",
	    json_pack("{s:s, s:i}", "sandbox_id", id, "port", 8080), ERR_CONFLICT);
	assert_non_null(strstr(e.msg, "no network device"));
	assert_int_equal(fake_vmm_counts().forward_adds, 0);
}

/* ---- accounts ---- */

static void
test_other_account_sees_not_found(void **state)
{
	struct sfx *s = *state;
	char id[ID_MAX], st[16];
	json_t *r;

	sfx_create(s, 10, id);
	sfx_fails(s, s->other, "get_sandbox", json_pack("{s:s}", "sandbox_id", id), ERR_NOT_FOUND);
	sfx_fails(s, s->other, "run_command",
	    json_pack("{s:s, s:s}", "sandbox_id", id, "command", "true"), ERR_NOT_FOUND);
	sfx_fails(s, s->other, "write_file",
	    json_pack("{s:s, s:s, s:s}", "sandbox_id", id, "path", "x", "content", "x"),
	    ERR_NOT_FOUND);
	sfx_fails(s, s->other, "read_file", json_pack("{s:s, s:s}", "sandbox_id", id, "path", "x"),
	    ERR_NOT_FOUND);
	sfx_fails(s, s->other, "list_files", json_pack("{s:s}", "sandbox_id", id), ERR_NOT_FOUND);
	sfx_fails(s, s->other, "expose_port", json_pack("{s:s, s:i}", "sandbox_id", id, "port", 80),
	    ERR_NOT_FOUND);
	sfx_fails(s, s->other, "extend_sandbox",
	    json_pack("{s:s, s:i}", "sandbox_id", id, "minutes", 1), ERR_NOT_FOUND);
	sfx_fails(s, s->other, "destroy_sandbox", json_pack("{s:s}", "sandbox_id", id),
	    ERR_NOT_FOUND);
	r = sfx_ok(s, s->other, "list_sandboxes", NULL);
	assert_int_equal(json_array_size(json_object_get(r, "sandboxes")), 0);
	json_decref(r);

	/* Nothing happened to it, and the other account paid nothing. */
	sfx_state(s, id, st, sizeof(st));
	assert_string_equal(st, "running");
	assert_true(fake_vm_info(id, &(struct fake_vm_info){ 0 }) == 0);
	assert_int_equal(sfx_ll(s, "SELECT count(*) FROM sandbox_commands WHERE sandbox_id = $1",
			     id),
	    0);
	assert_int_equal(fake_vmm_counts().forward_adds, 0);
	assert_int_equal(sfx_balance(s, s->other), SFX_FREE_CREDIT);
	assert_int_equal(sfx_balance(s, s->account), SFX_FREE_CREDIT - 10 * SFX_PRICE_SMALL);
	r = sfx_ok(s, s->account, "list_sandboxes", NULL);
	assert_int_equal(json_array_size(json_object_get(r, "sandboxes")), 1);
	json_decref(r);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, sfx_setup, sfx_teardown)

int
main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_create_charges_minutes_times_price),
		T(test_create_refused_without_credit),
		T(test_create_refused_past_max_lifetime),
		T(test_create_refused_while_hypervisor_not_ready),
		T(test_run_exit_codes_and_output),
		T(test_run_longest_command),
		T(test_run_passes_stdin_env_and_cwd),
		T(test_run_timeout),
		T(test_run_output_truncated),
		T(test_run_cancelled),
		T(test_run_background),
		cmocka_unit_test_setup_teardown(test_per_sandbox_caps, sfx_setup_small_caps,
		    sfx_teardown),
		T(test_write_then_read_text),
		T(test_write_then_read_base64),
		T(test_file_errors),
		T(test_list_files),
		T(test_expose_port),
		T(test_preview_explains_no_answer),
		T(test_expose_port_lost_race_removes_forward),
		cmocka_unit_test_setup_teardown(test_net_off, sfx_setup_net_off, sfx_teardown),
		cmocka_unit_test_setup_teardown(test_run_default_output_under_small_cap,
		    sfx_setup_small_output, sfx_teardown),
		T(test_other_account_sees_not_found),
	};

	return cmocka_run_group_tests(tests, sfx_group_setup, sfx_group_teardown);
}
