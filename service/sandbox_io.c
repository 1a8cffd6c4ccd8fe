/* sandbox_io.c - commands and files inside a running sandbox. */
#include "service/sandbox_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vmm/agent.h"
#include "vmm/guest.h"
#include "base/keys.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/utf8.h"

#define SBX_DEFAULT_TIMEOUT_S 60
#define SBX_DEFAULT_OUTPUT (256 * 1024)
#define SBX_HOST_GRACE_S 10     /* host deadline beyond the guest's timeout */


static int
int_arg(const json_t *args, const char *name, int def)
{
	const json_t *v = json_object_get(args, name);

	return v ? (int)json_number_value(v) : def;
}

static json_t *
text_of(const char *data, size_t len)
{
	size_t n;
	char *clean = utf8_sanitize(data ? data : "", data ? len : 0, &n, NULL);
	json_t *j = clean ? json_stringn(clean, n) : NULL;

	free(clean);
	return j ? j : json_string("");
}

static void
record_end(struct sbx *s, const char *cmd_id, const char *state, int code)
{
	char codes[16];
	const char *p[3] = { cmd_id, state, codes };
	struct err e;
	PGresult *r;

	err_clear(&e);
	snprintf(codes, sizeof(codes), "%d", code);
	r = db_query(s->app->db, "UPDATE sandbox_commands SET state = $2, ended_at = now(),"
	    " exit_code = CASE WHEN $2 = 'running' THEN NULL ELSE $3::int END"
	    " WHERE id = $1", 3, p, &e);
	PQclear(r);
}

/* Stops a command's whole process group (its supervisor forwards the
 * signal); used when the caller cancels. */
static void
kill_command(struct vm_host *h, const char *domain, long pid)
{
	char pids[24];
	struct agent_exec_status st;
	struct err e;

	err_clear(&e);
	snprintf(pids, sizeof(pids), "%ld", pid);
	const char *argv[] = { "-TERM", pids, NULL };
	struct agent_exec x = { .path = "/bin/kill", .argv = argv, .capture = 1 };
	if (agent_run(h, domain, &x, 10000, &st, &e) == 0)
		agent_exec_status_clear(&st);
}

json_t *
sbx_run(struct sbx *s, const char *account, const json_t *args,
    const struct sbx_progress *pg, struct err *e)
{
	const char *id = json_string_value(json_object_get(args, "sandbox_id"));
	const char *command = json_string_value(json_object_get(args, "command"));
	const json_t *stdin_v = json_object_get(args, "stdin");
	int background = json_is_true(json_object_get(args, "background"));
	int timeout_s = int_arg(args, "timeout_seconds", background ? 0 : SBX_DEFAULT_TIMEOUT_S);
	long long max_out = int_arg(args, "max_output_bytes", SBX_DEFAULT_OUTPUT);
	char domain[64], cmd_id[24] = "cmd-", out_path[256], err_path[256], pids[24];
	struct sbx_row row;
	struct vm_host *h;
	struct guest_run run;
	long long t0 = clock_ms();
	long pid;
	int code = -1, ended;
	long long out_size = -1, err_size = -1;
	PGresult *r;

	if (max_out > s->app->cfg.max_output_bytes) {
		err_set_field(e, "max_output_bytes", "max_output_bytes: at most %lld on this service",
		    s->app->cfg.max_output_bytes);
		return NULL;
	}
	if ((h = sbx_running(s, account, id, &row, domain, sizeof(domain), e)) == NULL)
		return NULL;
	if (key_random_base36(cmd_id + 4, 16) < 0) {
		err_set(e, ERR_INTERNAL, "random generator failed");
		return NULL;
	}
	guest_log_paths(cmd_id, out_path, sizeof(out_path), err_path, sizeof(err_path));
	memset(&run, 0, sizeof(run));
	run.cmd_id = cmd_id;
	run.command = command;
	run.cwd = json_string_value(json_object_get(args, "cwd"));
	run.env = json_object_get(args, "env");
	run.stdin_data = json_string_value(stdin_v);
	run.stdin_len = stdin_v ? json_string_length(stdin_v) : 0;
	run.timeout_s = timeout_s;
	{
		const char *p[6] = { cmd_id, id, command, background ? "t" : "f", out_path, err_path };
		r = db_query(s->app->db, "INSERT INTO sandbox_commands(id, sandbox_id, command,"
		    " background, state, stdout_path, stderr_path)"
		    " VALUES ($1, $2, $3, $4::boolean, 'running', $5, $6)", 6, p, e);
		if (r == NULL)
			return NULL;
		PQclear(r);
	}
	if (guest_run_start(h, domain, &run, &pid, e) < 0) {
		record_end(s, cmd_id, "failed", -1);
		return NULL;
	}
	snprintf(pids, sizeof(pids), "%ld", pid);
	{
		const char *p[2] = { cmd_id, pids };
		r = db_query(s->app->db, "UPDATE sandbox_commands SET guest_pid = $2::bigint"
		    " WHERE id = $1", 2, p, e);
		PQclear(r);
	}
	if (background) {
		return json_pack("{s:s, s:s, s:s, s:s, s:s, s:b, s:I}",
		    "sandbox_id", id, "command_id", cmd_id, "state", "running",
		    "stdout_path", out_path, "stderr_path", err_path, "background", 1,
		    "duration_ms", (json_int_t)(clock_ms() - t0));
	}
	/* The guest kills the command at timeout_s; the host answers anyway a
	 * little later if the guest is stuck. */
	ended = guest_run_wait(h, domain, pid,
	    t0 + (long long)(timeout_s ? timeout_s + SBX_HOST_GRACE_S : 86400) * 1000,
	    pg ? pg->cancel : NULL, &code, &out_size, &err_size, e);
	if (ended < 0) {
		record_end(s, cmd_id, "failed", -1);
		return NULL;
	}
	if (ended == 0 && pg && pg->cancel && atomic_load(pg->cancel)) {
		kill_command(h, domain, pid);
		record_end(s, cmd_id, "failed", -1);
		err_set(e, ERR_CONFLICT, "cancelled");
		return NULL;
	}

	char *out = NULL, *errb = NULL;
	size_t out_len = 0, err_len = 0;
	long long out_total = 0, err_total = 0;
	if (guest_read_log(h, domain, out_path, (size_t)max_out, out_size, &out, &out_len,
	    &out_total, e) < 0 ||
	    guest_read_log(h, domain, err_path, (size_t)max_out, err_size, &errb, &err_len,
	    &err_total, e) < 0) {
		free(out);
		free(errb);
		record_end(s, cmd_id, ended ? "exited" : "timed_out", code);
		return NULL;
	}
	int timed_out = !ended || (timeout_s > 0 && code == 124);
	const char *state = timed_out ? "timed_out" : "exited";
	record_end(s, cmd_id, ended ? state : "running", code);
	json_t *res = json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:b, s:b, s:I, s:I, s:s, s:s,"
	    " s:b, s:I, s:b}",
	    "sandbox_id", id, "command_id", cmd_id, "state", state,
	    "exit_code", ended ? json_integer(code) : json_null(),
	    "stdout", text_of(out, out_len), "stderr", text_of(errb, err_len),
	    "stdout_truncated", out_total > (long long)out_len,
	    "stderr_truncated", err_total > (long long)err_len,
	    "stdout_bytes", (json_int_t)out_total, "stderr_bytes", (json_int_t)err_total,
	    "stdout_path", out_path, "stderr_path", err_path,
	    "timed_out", timed_out, "duration_ms", (json_int_t)(clock_ms() - t0),
	    "background", 0);
	if (res && !ended)
		json_object_set_new(res, "note", json_string(
		    "the guest did not report the end in time; the command may still be running"));
	free(out);
	free(errb);
	return res;
}

/* ---- files ---- */

static int
path_arg(const json_t *args, const char *name, const char *def, char *out, size_t n,
    struct err *e)
{
	const char *p = json_string_value(json_object_get(args, name));

	if (guest_abs_path(p ? p : def, out, n) < 0) {
		err_set_field(e, name, "%s: too long", name);
		return -1;
	}
	return 0;
}

json_t *
sbx_write_file(struct sbx *s, const char *account, const json_t *args, struct err *e)
{
	const char *id = json_string_value(json_object_get(args, "sandbox_id"));
	const json_t *text = json_object_get(args, "content");
	const json_t *b64 = json_object_get(args, "content_base64");
	const char *mode_s = json_string_value(json_object_get(args, "mode"));
	const json_t *mp = json_object_get(args, "make_parents");
	char path[4200], domain[64], modebuf[8];
	struct sbx_row row;
	unsigned char *data = NULL;
	size_t len = 0;
	unsigned mode = 0644;
	json_t *out = NULL;
	struct vm_host *h;

	if ((text == NULL) == (b64 == NULL)) {
		err_set_field(e, "content", "content / content_base64: give exactly one of them");
		return NULL;
	}
	if (path_arg(args, "path", NULL, path, sizeof(path), e) < 0)
		return NULL;
	if (mode_s)
		mode = (unsigned)strtoul(mode_s, NULL, 8);
	if (b64) {
		data = agent_b64_decode(json_string_value(b64), &len);
		if (data == NULL) {
			err_set_field(e, "content_base64", "content_base64: not valid base64");
			return NULL;
		}
	} else {
		len = json_string_length(text);
		data = malloc(len + 1);
		if (data)
			memcpy(data, json_string_value(text), len);
	}
	if (data == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	if (len > GUEST_MAX_FILE) {
		err_set_field(e, b64 ? "content_base64" : "content",
		    "%s: at most %u bytes per write", b64 ? "content_base64" : "content", GUEST_MAX_FILE);
		goto out;
	}
	if ((h = sbx_running(s, account, id, &row, domain, sizeof(domain), e)) == NULL)
		goto out;
	if (guest_put_file(h, domain, path, data, len, mode, mp ? json_is_true(mp) : 1, e) < 0)
		goto out;
	snprintf(modebuf, sizeof(modebuf), "%04o", mode);
	out = json_pack("{s:s, s:s, s:I, s:s}", "sandbox_id", id, "path", path,
	    "bytes_written", (json_int_t)len, "mode", modebuf);
out:
	free(data);
	return out;
}

json_t *
sbx_read_file(struct sbx *s, const char *account, const json_t *args, struct err *e)
{
	const char *id = json_string_value(json_object_get(args, "sandbox_id"));
	const char *enc = json_string_value(json_object_get(args, "encoding"));
	const json_t *off_v = json_object_get(args, "offset");
	long long offset = off_v ? (long long)json_number_value(off_v) : 0;
	size_t length = (size_t)int_arg(args, "length", 1024 * 1024);
	char path[4200], domain[64];
	struct sbx_row row;
	unsigned char *data = NULL;
	size_t len = 0;
	long long total = 0;
	struct vm_host *h;
	json_t *content, *out;
	int base64 = enc && strcmp(enc, "base64") == 0;

	if (path_arg(args, "path", NULL, path, sizeof(path), e) < 0)
		return NULL;
	if ((h = sbx_running(s, account, id, &row, domain, sizeof(domain), e)) == NULL)
		return NULL;
	if (guest_get_file(h, domain, path, offset, length, &data, &len, &total, e) < 0)
		return NULL;
	if (base64) {
		char *b = agent_b64_encode(data, len);
		content = b ? json_string(b) : NULL;
		free(b);
	} else {
		content = text_of((const char *)data, len);
	}
	free(data);
	if (content == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	out = json_pack("{s:s, s:s, s:I, s:I, s:I, s:b, s:s, s:o}", "sandbox_id", id,
	    "path", path, "offset", (json_int_t)offset, "length", (json_int_t)len,
	    "total_size", (json_int_t)total, "eof", offset + (long long)len >= total,
	    "encoding", base64 ? "base64" : "text", "content", content);
	return out;
}

json_t *
sbx_list_files(struct sbx *s, const char *account, const json_t *args, struct err *e)
{
	const char *id = json_string_value(json_object_get(args, "sandbox_id"));
	char path[4200], domain[64];
	struct sbx_row row;
	struct vm_host *h;
	json_t *entries;
	int truncated = 0;

	if (path_arg(args, "path", GUEST_HOME, path, sizeof(path), e) < 0)
		return NULL;
	if ((h = sbx_running(s, account, id, &row, domain, sizeof(domain), e)) == NULL)
		return NULL;
	entries = guest_list_files(h, domain, path, int_arg(args, "depth", 2),
	    int_arg(args, "limit", 500), &truncated, e);
	if (entries == NULL)
		return NULL;
	return json_pack("{s:s, s:s, s:o, s:b}", "sandbox_id", id, "path", path,
	    "entries", entries, "truncated", truncated);
}

/* ---- command status ---- */

static int
command_id_valid(const char *id)
{
	if (id == NULL || strlen(id) != 20 || strncmp(id, "cmd-", 4) != 0)
		return 0;
	for (const char *p = id + 4; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9')))
			return 0;
	return 1;
}

/* A log's size, or null when the guest cannot say (it is best effort). */
static json_t *
log_size(struct vm_host *h, const char *domain, const char *path)
{
	char *data = NULL;
	size_t len = 0;
	long long total = -1;
	struct err e;

	err_clear(&e);
	if (h == NULL || guest_read_log(h, domain, path, 0, -1, &data, &len, &total, &e) < 0)
		total = -1;
	free(data);
	return total >= 0 ? json_integer(total) : json_null();
}

json_t *
sbx_command_status(struct sbx *s, const char *account, const json_t *args, struct err *e)
{
	const char *id = json_string_value(json_object_get(args, "sandbox_id"));
	const char *cmd = json_string_value(json_object_get(args, "command_id"));
	struct sbx_row row;
	struct vm_host *h = NULL;
	char domain[64] = "";
	json_t *out;
	PGresult *r;

	if (id == NULL) {
		err_set_at(e, ERR_INVALID, "sandbox_id", "sandbox_id: required");
		return NULL;
	}
	if (sbx_load(s, account, id, &row, e) < 0)
		return NULL;
	if (!command_id_valid(cmd)) {
		err_set_at(e, ERR_NOT_FOUND, "command_id", "command_id: no command %.40s in %s",
		    cmd ? cmd : "", id);
		return NULL;
	}
	if (strcmp(row.state, "running") == 0) {
		sbx_refresh_commands(s, id, row.host);
		h = orch_host_by_uri(s->orch, row.host);
		orch_domain_name(id, domain, sizeof(domain));
	}
	{
		const char *p[2] = { cmd, id };
		r = db_query(s->app->db,
		    "SELECT id, command, background, state, exit_code, stdout_path, stderr_path, "
		    SBX_TS("started_at") ", " SBX_TS("ended_at")
		    " FROM sandbox_commands WHERE id = $1 AND sandbox_id = $2", 2, p, e);
	}
	if (r == NULL)
		return NULL;
	if (PQntuples(r) != 1) {
		PQclear(r);
		err_set_at(e, ERR_NOT_FOUND, "command_id", "command_id: no command %s in %s",
		    cmd, id);
		return NULL;
	}
	out = json_pack("{s:s, s:s, s:s, s:b, s:s, s:o, s:s, s:s, s:o, s:o, s:s, s:o}",
	    "sandbox_id", id, "command_id", cmd,
	    "command", PQgetvalue(r, 0, 1),
	    "background", strcmp(PQgetvalue(r, 0, 2), "t") == 0,
	    "state", PQgetvalue(r, 0, 3),
	    "exit_code", PQgetisnull(r, 0, 4) ? json_null() :
	        json_integer(strtol(PQgetvalue(r, 0, 4), NULL, 10)),
	    "stdout_path", PQgetvalue(r, 0, 5), "stderr_path", PQgetvalue(r, 0, 6),
	    "stdout_bytes", log_size(h, domain, PQgetvalue(r, 0, 5)),
	    "stderr_bytes", log_size(h, domain, PQgetvalue(r, 0, 6)),
	    "started_at", PQgetvalue(r, 0, 7),
	    "ended_at", PQgetisnull(r, 0, 8) ? json_null() : json_string(PQgetvalue(r, 0, 8)));
	PQclear(r);
	if (out == NULL)
		err_set(e, ERR_INTERNAL, "out of memory");
	return out;
}
