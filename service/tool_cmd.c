/* tool_cmd.c - a running command's output as it is produced (the stream
 * run_command hands to the front end), and the tools that follow and stop
 * a command later: get_command, kill_command. */
#include "service/tool_cmd.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "base/fmt.h"
#include "base/utf8.h"
#include "sandbox/sandbox.h"

/* ---- output stream ---- */

void
tool_stream_init(struct tool_stream *ts, struct call_ctx *cx)
{
	memset(ts, 0, sizeof(*ts));
	ts->cx = cx;
}

int
tool_stream_wanted(const struct call_ctx *cx)
{
	return cx->output != NULL || cx->progress != NULL;
}

/* Valid text of one stream, in pieces of at most TOOLS_OUTPUT_CHUNK bytes
 * that end on a character. */
static void
emit(struct tool_stream *ts, int fd, const char *text, size_t len)
{
	static const char *const prefix[] = { "stdout: ", "stderr: " };
	char msg[TOOLS_OUTPUT_CHUNK + 16];

	while (len > 0) {
		size_t n = len > TOOLS_OUTPUT_CHUNK ? utf8_whole_len(text, TOOLS_OUTPUT_CHUNK) :
						      len;

		if (n == 0)
			n = len < TOOLS_OUTPUT_CHUNK ? len : TOOLS_OUTPUT_CHUNK; /* not text: cut */
		ts->sent += (double)n;
		if (ts->cx->output) {
			ts->cx->output(ts->cx->progress_sink, fd, text, n, ts->sent);
		} else {
			fmt_cut(msg, sizeof(msg), "%s%.*s", prefix[fd == 2], (int)n, text);
			tool_call_progress(ts->cx, ts->sent, 0, msg);
		}
		text += n;
		len -= n;
	}
}

/* Sanitises raw bytes (U+FFFD for what is not UTF-8) and emits them. */
static void
emit_raw(struct tool_stream *ts, int fd, const char *data, size_t len)
{
	size_t n;
	char *clean;

	if (len == 0)
		return;
	clean = utf8_sanitize(data, len, &n, NULL);
	if (clean == NULL)
		return; /* out of memory: this piece is lost to the stream, not the result */
	emit(ts, fd, clean, n);
	free(clean);
}

void
tool_stream_output(void *ctx, int fd, const char *data, size_t len)
{
	struct tool_stream *ts = ctx;
	int i = fd == 2;
	char piece[TOOL_STREAM_RAW + 4];

	if (fd != 1 && fd != 2)
		return;
	/* Raw slices, each joined to what was held of a cut character. */
	while (len > 0) {
		size_t take = len < TOOL_STREAM_RAW ? len : TOOL_STREAM_RAW;
		size_t have = ts->held_len[i], whole;

		memcpy(piece, ts->held[i], have);
		memcpy(piece + have, data, take);
		have += take;
		data += take;
		len -= take;
		whole = utf8_whole_len(piece, have);
		emit_raw(ts, fd, piece, whole);
		ts->held_len[i] = have - whole;
		memcpy(ts->held[i], piece + whole, ts->held_len[i]);
	}
}

void
tool_stream_end(struct tool_stream *ts)
{
	for (int i = 0; i < 2; i++) {
		emit_raw(ts, i + 1, ts->held[i], ts->held_len[i]);
		ts->held_len[i] = 0;
	}
}

/* ---- get_command ---- */

static int
get_parse(const struct call_ctx *cx, const json_t *args, void *req, struct err *e)
{
	struct sbx_cmd_req *r = req;
	int wait;

	if (tool_arg_need(args, "sandbox_id", &r->sandbox_id, e) < 0 ||
	    tool_arg_need(args, "command_id", &r->command_id, e) < 0 ||
	    tool_arg_int(args, "stdout_offset", 0, 0, TOOL_MAX_OFFSET, &r->stdout_offset, e) < 0 ||
	    tool_arg_int(args, "stderr_offset", 0, 0, TOOL_MAX_OFFSET, &r->stderr_offset, e) < 0 ||
	    tool_arg_int32(args, "wait_seconds", 0, 0, 3600, &wait, e) < 0)
		return -1;
	/* A longer wait than the service allows is a shorter wait, not an error. */
	r->wait_s = wait < cx->app->cfg.max_wait_s ? wait : cx->app->cfg.max_wait_s;
	return 0;
}

static json_t *
exit_code_json(const struct sbx_cmd_res *res)
{
	return res->has_exit_code ? json_integer(res->exit_code) : json_null();
}

static json_t *
get_result(const char *id, const struct sbx_cmd_res *res)
{
	long long out_next = res->out_offset + (long long)res->out_len;
	long long err_next = res->err_offset + (long long)res->err_len;

	/* One member a line. */
	/* clang-format off */
	return json_pack("{s:s, s:s, s:s, s:o, s:b, s:o, s:o, s:I, s:I, s:I, s:I, s:I, s:I,"
			 " s:b, s:b, s:s, s:s}",
	    "sandbox_id", id,
	    "command_id", res->command_id,
	    "state", res->state,
	    "exit_code", exit_code_json(res),
	    "background", res->background,
	    "stdout", tool_text_of(res->out, res->out_len),
	    "stderr", tool_text_of(res->err, res->err_len),
	    "stdout_offset", (json_int_t)res->out_offset,
	    "stderr_offset", (json_int_t)res->err_offset,
	    "next_stdout_offset", (json_int_t)out_next,
	    "next_stderr_offset", (json_int_t)err_next,
	    "stdout_bytes", (json_int_t)res->out_total,
	    "stderr_bytes", (json_int_t)res->err_total,
	    "stdout_truncated", out_next < res->out_total,
	    "stderr_truncated", err_next < res->err_total,
	    "stdout_path", res->stdout_path,
	    "stderr_path", res->stderr_path);
	/* clang-format on */
}

static json_t *
get_run(struct call_ctx *cx, void *req, struct err *e)
{
	struct sbx_cmd_req *r = req;
	struct sbx_progress pg = { NULL, cx, cx->cancelled, NULL };
	struct sbx *s = tool_sbx(cx, e);
	struct sbx_cmd_res res;
	json_t *out;

	if (s == NULL || sbx_command_get(s, cx->account_id, r, &pg, &res, e) < 0)
		return NULL;
	out = get_result(r->sandbox_id, &res);
	sbx_cmd_res_clear(&res);
	if (out == NULL)
		err_set(e, ERR_INTERNAL, "out of memory");
	return out;
}

/* ---- kill_command ---- */

static const struct {
	const char *name;
	int sig;
} signals[] = {
	{ "TERM", SIGTERM },
	{ "INT", SIGINT },
	{ "HUP", SIGHUP },
	{ "KILL", SIGKILL },
	{ "QUIT", SIGQUIT },
	{ "USR1", SIGUSR1 },
	{ "USR2", SIGUSR2 },
};

int
tool_signal_by_name(const char *name)
{
	if (name && strncmp(name, "SIG", 3) == 0)
		name += 3;
	for (size_t i = 0; name && i < sizeof(signals) / sizeof(signals[0]); i++)
		if (strcmp(signals[i].name, name) == 0)
			return signals[i].sig;
	return -1;
}

static const char *
signal_name(int sig)
{
	for (size_t i = 0; i < sizeof(signals) / sizeof(signals[0]); i++)
		if (signals[i].sig == sig)
			return signals[i].name;
	return "?";
}

static int
kill_parse(const struct call_ctx *cx, const json_t *args, void *req, struct err *e)
{
	struct sbx_kill_req *r = req;
	const char *name = NULL;

	(void)cx;
	if (tool_arg_need(args, "sandbox_id", &r->sandbox_id, e) < 0 ||
	    tool_arg_need(args, "command_id", &r->command_id, e) < 0 ||
	    tool_arg_str(args, "signal", &name, e) < 0)
		return -1;
	r->sig = tool_signal_by_name(name ? name : "TERM");
	if (r->sig < 0) {
		err_set_field(e, "signal", "signal: one of TERM, INT, HUP, KILL, QUIT, USR1, USR2");
		return -1;
	}
	return 0;
}

static json_t *
kill_result(const char *id, const struct sbx_kill_req *r, const struct sbx_cmd_res *res)
{
	const char *note = NULL;
	json_t *out;

	if (!res->signalled)
		note = "the command had already ended: nothing was signalled";
	else if (strcmp(res->state, "running") == 0)
		note = "the signal was sent and the command has not ended yet (it may handle the "
		       "signal): follow it with get_command, or send KILL";
	out = json_pack("{s:s, s:s, s:s, s:b, s:s, s:o}", "sandbox_id", id, "command_id",
	    res->command_id, "signal", signal_name(r->sig), "signalled", res->signalled, "state",
	    res->state, "exit_code", exit_code_json(res));
	if (out && note)
		json_object_set_new(out, "note", json_string(note));
	return out;
}

static json_t *
kill_run(struct call_ctx *cx, void *req, struct err *e)
{
	struct sbx_kill_req *r = req;
	struct sbx *s = tool_sbx(cx, e);
	struct sbx_cmd_res res;
	json_t *out;

	if (s == NULL || sbx_command_kill(s, cx->account_id, r, &res, e) < 0)
		return NULL;
	out = kill_result(r->sandbox_id, r, &res);
	sbx_cmd_res_clear(&res);
	if (out == NULL)
		err_set(e, ERR_INTERNAL, "out of memory");
	return out;
}

_Static_assert(sizeof(struct sbx_cmd_req) <= TOOL_MAX_REQ, "get_command request too large");
_Static_assert(sizeof(struct sbx_kill_req) <= TOOL_MAX_REQ, "kill_command request too large");

const struct tool_impl tool_get_command_impl = { "get_command", get_parse, get_run, NULL, NULL, 0,
	1 };
const struct tool_impl tool_kill_command_impl = { "kill_command", kill_parse, kill_run, NULL, NULL,
	0, 0 };
