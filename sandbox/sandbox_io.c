/* sandbox_io.c - commands and files inside a running sandbox, and the
 * state of its background commands. */
#include "sandbox/sandbox_int.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vmm/guest.h"
#include "base/keys.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/utf8.h"

#define SBX_HOST_GRACE_S 10   /* host deadline beyond the guest's timeout */
#define SBX_WAIT_SLICE_MS 500 /* how soon a stopping service is noticed */

static void
record_end(struct sbx *s, const char *cmd_id, const char *state, int code)
{
	struct err e;

	err_clear(&e);
	if (store_cmd_end(s->db, cmd_id, state, code, 0, &e) < 0)
		log_warn("command %s: cannot record its end: %s", cmd_id, e.msg);
}

/* Stops a command's whole process group (its supervisor forwards the
 * signal); used when the caller cancels. */
static void
kill_command(struct vm_host *h, const char *domain, long pid)
{
	struct err e;

	err_clear(&e);
	if (guest_kill(h, domain, pid, SIGTERM, &e) < 0)
		log_warn("cannot stop a cancelled command: %s", e.msg);
}

/* The caller's output sink, counting what the guest delivered through it
 * so that the rest can be sent from the logs at the end. */
struct counted_sink {
	const struct sbx_progress *pg;
	long long sent[2]; /* stdout, stderr bytes */
};

static void
counted_output(void *ctx, int fd, const char *data, size_t len)
{
	struct counted_sink *cs = ctx;

	if (fd != 1 && fd != 2)
		return;
	cs->sent[fd - 1] += (long long)len;
	cs->pg->output(cs->pg->ctx, fd, data, len);
}

/* Whatever of the kept output the guest did not deliver while the
 * command ran (a transport that gives it only at the end, or its last
 * bytes), so that a streaming caller sees all of it. */
static void
catch_up(struct counted_sink *cs, const struct sbx_run_res *res)
{
	const char *data[2] = { res->out, res->err };
	size_t len[2] = { res->out_len, res->err_len };

	for (int i = 0; i < 2; i++)
		if (data[i] && cs->sent[i] < (long long)len[i])
			cs->pg->output(cs->pg->ctx, i + 1, data[i] + cs->sent[i],
			    len[i] - (size_t)cs->sent[i]);
}

void
sbx_run_res_clear(struct sbx_run_res *res)
{
	if (res == NULL)
		return;
	free(res->out);
	free(res->err);
	memset(res, 0, sizeof(*res));
}

/* A run_command under way: its sandbox's VM, its command there, and
 * what the wait for it saw. */
struct run {
	struct sbx *s;
	const char *account;
	const struct sbx_run_req *req;
	const struct sbx_progress *pg;
	struct sbx_run_res *res;
	struct counted_sink counted;
	struct store_row row;
	struct vm_host *h;
	char domain[64];
	long pid;
	long long t0;
	int ended, code;
	long long out_size, err_size;
};

/* Records the command in its sandbox's list (the background cap is
 * checked there) and keeps that list bounded. */
static int
run_record(struct run *r, struct err *e)
{
	struct sbx *s = r->s;
	const struct sbx_run_req *req = r->req;
	const char *id = req->sandbox_id;
	struct err ignore;

	if (req->background) {
		long long n;
		int cap = s->cfg->max_background_per_sandbox;

		if (store_cmd_background_count(s->db, id, &n, e) < 0)
			return -1;
		/* At the cap, ask the guest first: a command that ended since
		 * anyone last looked no longer counts. */
		if (n >= cap)
			sbx_refresh_commands(s, id, r->row.host);
	}
	/* The cap itself is checked where the row is inserted, under the
	 * sandbox row's lock: parallel starts cannot pass it together. */
	if (store_cmd_insert(s->db, r->res->command_id, id, req->command, req->background,
		s->cfg->max_background_per_sandbox, r->res->stdout_path, r->res->stderr_path,
		e) < 0)
		return -1;
	/* The record of commands stays bounded; the logs stay in the guest. */
	err_clear(&ignore);
	err_ignore(store_cmd_trim(s->db, id, s->cfg->max_commands_kept, &ignore));
	return 0;
}

/* Checks the request, finds the running VM, names the command and its
 * logs, records it and starts it in the guest (r->pid). */
static int
run_start(struct run *r, struct err *e)
{
	struct sbx *s = r->s;
	const struct sbx_run_req *req = r->req;
	struct sbx_run_res *res = r->res;
	struct guest_run run;
	struct err ignore;

	if (req->max_output < 0 || req->max_output > s->cfg->max_output_bytes) {
		err_set_field(e, "max_output_bytes",
		    "max_output_bytes: at most %lld on this service", s->cfg->max_output_bytes);
		return -1;
	}
	if ((r->h = sbx_running(s, r->account, req->sandbox_id, &r->row, r->domain,
		 sizeof(r->domain), e)) == NULL)
		return -1;
	memcpy(res->command_id, "cmd-", 4);
	if (key_random_base36(res->command_id + 4, 16) < 0) {
		err_set(e, ERR_INTERNAL, "random generator failed");
		return -1;
	}
	guest_log_paths(res->command_id, res->stdout_path, sizeof(res->stdout_path),
	    res->stderr_path, sizeof(res->stderr_path));
	if (run_record(r, e) < 0)
		return -1;
	memset(&run, 0, sizeof(run));
	run.cmd_id = res->command_id;
	run.command = req->command;
	run.cwd = req->cwd;
	run.env = req->env;
	run.stdin_data = req->stdin_data;
	run.stdin_len = req->stdin_data ? req->stdin_len : 0;
	run.timeout_s = req->timeout_s;
	run.background = req->background;
	if (guest_run_start(r->h, r->domain, &run, &r->pid, e) < 0) {
		record_end(s, res->command_id, "failed", -1);
		return sbx_guest_failed(s, req->sandbox_id, r->row.host, e);
	}
	/* Only needed to ask about a background command later. */
	err_clear(&ignore);
	err_ignore(store_cmd_set_pid(s->db, res->command_id, r->pid, &ignore));
	return 0;
}

/* The caller cancelled. */
static int
run_cancelled(const struct run *r)
{
	return r->pg && r->pg->cancel && atomic_load(r->pg->cancel);
}

/* Waits for a foreground command (r->ended: 1 it ended, 0 it still runs,
 * -1 the guest failed, with e). The guest kills the command at timeout_s;
 * the host answers anyway a little later if the guest is stuck. Waits in
 * slices so a stopping service is noticed as soon as a cancel. */
static void
run_wait(struct run *r, struct err *e)
{
	const struct sbx_progress *pg = r->pg;
	struct guest_sink sink = { NULL, NULL };
	int timeout_s = r->req->timeout_s;
	long long deadline;

	if (pg && pg->output) {
		sink.output = counted_output;
		sink.ctx = &r->counted;
	}
	deadline = r->t0 + (long long)(timeout_s ? timeout_s + SBX_HOST_GRACE_S : 86400) * 1000;
	do {
		long long slice = clock_ms() + SBX_WAIT_SLICE_MS;

		r->ended = guest_run_wait(r->h, r->domain, r->pid,
		    slice < deadline ? slice : deadline, pg ? pg->cancel : NULL,
		    sink.output ? &sink : NULL, &r->code, &r->out_size, &r->err_size, e);
	} while (r->ended == 0 && clock_ms() < deadline && !atomic_load(&r->s->calls_stop) &&
	    !run_cancelled(r));
	if (r->ended == 0)
		guest_run_release(r->h, r->domain, r->pid);
}

/* The end of a foreground command's wait: a guest failure, a stop or a
 * cancel (the command is stopped), or its result with the kept output. */
static int
run_end(struct run *r, struct err *e)
{
	struct sbx *s = r->s;
	const struct sbx_run_req *req = r->req;
	struct sbx_run_res *res = r->res;
	int ended = r->ended, code = r->code, timeout_s = req->timeout_s;

	if (ended < 0) {
		record_end(s, res->command_id, "failed", -1);
		return sbx_guest_failed(s, req->sandbox_id, r->row.host, e);
	}
	if (ended == 0 && atomic_load(&s->calls_stop)) {
		kill_command(r->h, r->domain, r->pid);
		record_end(s, res->command_id, "failed", -1);
		err_set(e, ERR_UNAVAILABLE, "the service is restarting; the command was stopped");
		return -1;
	}
	if (ended == 0 && run_cancelled(r)) {
		kill_command(r->h, r->domain, r->pid);
		record_end(s, res->command_id, "failed", -1);
		err_set(e, ERR_CONFLICT, "cancelled");
		return -1;
	}
	if (guest_read_log(r->h, r->domain, res->stdout_path, 0, (size_t)req->max_output,
		r->out_size, &res->out, &res->out_len, &res->out_total, e) < 0 ||
	    guest_read_log(r->h, r->domain, res->stderr_path, 0, (size_t)req->max_output,
		r->err_size, &res->err, &res->err_len, &res->err_total, e) < 0) {
		record_end(s, res->command_id, ended ? "exited" : "timed_out", code);
		sbx_run_res_clear(res);
		return -1;
	}
	if (r->pg && r->pg->output)
		catch_up(&r->counted, res);
	res->ended = ended;
	res->exit_code = code;
	res->timed_out = !ended || (timeout_s > 0 && code == 124);
	res->state = res->timed_out ? "timed_out" : "exited";
	record_end(s, res->command_id, ended ? res->state : "running", code);
	res->duration_ms = clock_ms() - r->t0;
	return 0;
}

int
sbx_run(struct sbx *s, const char *account, const struct sbx_run_req *req,
    const struct sbx_progress *pg, struct sbx_run_res *res, struct err *e)
{
	struct run r = {
		.s = s,
		.account = account,
		.req = req,
		.pg = pg,
		.res = res,
		.counted = { pg, { 0, 0 } },
		.t0 = clock_ms(),
		.code = -1,
		.out_size = -1,
		.err_size = -1,
	};

	memset(res, 0, sizeof(*res));
	if (run_start(&r, e) < 0)
		return -1;
	if (req->background) {
		res->state = "running";
		res->background = 1;
		res->duration_ms = clock_ms() - r.t0;
		return 0;
	}
	run_wait(&r, e);
	return run_end(&r, e);
}

/* ---- files ---- */

static int
abs_path(const char *p, const char *field, char *out, size_t n, struct err *e)
{
	if (guest_abs_path(p, out, n) < 0) {
		err_set_field(e, field, "%s: too long", field);
		return -1;
	}
	return 0;
}

struct vm_host *
sbx_file_vm(struct sbx *s, const char *account, const char *id, const char *path, char *abs,
    size_t an, struct store_row *row, char *domain, size_t dn, struct err *e)
{
	if (path == NULL) {
		err_set_field(e, "path", "path: required");
		return NULL;
	}
	if (abs_path(path, "path", abs, an, e) < 0)
		return NULL;
	return sbx_running(s, account, id, row, domain, dn, e);
}

/* Where a read or write of a file goes: the sandbox's running VM. */
struct file_at {
	struct vm_host *h;
	char domain[64];
	struct store_row row;
};

/* A write's mode checked and its VM and absolute path (res->path) found:
 * 0, or -1 with e set. */
static int
write_at(struct sbx *s, const char *account, const struct sbx_write_req *req,
    struct sbx_write_res *res, struct file_at *at, struct err *e)
{
	if (req->mode > 07777) {
		err_set_field(e, "mode", "mode: not a file mode");
		return -1;
	}
	at->h = sbx_file_vm(s, account, req->sandbox_id, req->path, res->path, sizeof(res->path),
	    &at->row, at->domain, sizeof(at->domain), e);
	return at->h ? 0 : -1;
}

/* A read's offset checked and its VM and absolute path (into path, of
 * size pn) found: 0, or -1 with e set. */
static int
read_at(struct sbx *s, const char *account, const struct sbx_read_req *req, char *path, size_t pn,
    struct file_at *at, struct err *e)
{
	if (req->offset < 0) {
		err_set_field(e, "offset", "offset: must not be negative");
		return -1;
	}
	at->h = sbx_file_vm(s, account, req->sandbox_id, req->path, path, pn, &at->row, at->domain,
	    sizeof(at->domain), e);
	return at->h ? 0 : -1;
}

int
sbx_write_file(struct sbx *s, const char *account, const struct sbx_write_req *req,
    struct sbx_write_res *res, struct err *e)
{
	struct file_at at;

	memset(res, 0, sizeof(*res));
	if (req->len > GUEST_MAX_FILE) {
		err_set_field(e, "content", "content: at most %u bytes per write", GUEST_MAX_FILE);
		return -1;
	}
	if (write_at(s, account, req, res, &at, e) < 0)
		return -1;
	if (guest_put_file(at.h, at.domain, res->path, req->data, req->len, req->mode,
		req->make_parents, e) < 0)
		return sbx_guest_failed(s, req->sandbox_id, at.row.host, e);
	res->bytes = req->len;
	res->mode = req->mode;
	return 0;
}

void
sbx_read_res_clear(struct sbx_read_res *res)
{
	if (res == NULL)
		return;
	free(res->data);
	res->data = NULL;
	res->len = 0;
}

int
sbx_read_file(struct sbx *s, const char *account, const struct sbx_read_req *req,
    struct sbx_read_res *res, struct err *e)
{
	struct file_at at;

	memset(res, 0, sizeof(*res));
	if (read_at(s, account, req, res->path, sizeof(res->path), &at, e) < 0)
		return -1;
	if (guest_get_file(at.h, at.domain, res->path, req->offset, req->length, &res->data,
		&res->len, &res->total, e) < 0)
		return sbx_guest_failed(s, req->sandbox_id, at.row.host, e);
	res->offset = req->offset;
	return 0;
}

int
sbx_write_stream(struct sbx *s, const char *account, const struct sbx_write_req *req,
    guest_read_fn read, void *ctx, uint64_t max_bytes, struct sbx_write_res *res, struct err *e)
{
	struct file_at at;
	uint64_t written = 0;

	memset(res, 0, sizeof(*res));
	if (write_at(s, account, req, res, &at, e) < 0)
		return -1;
	if (guest_put_stream(at.h, at.domain, res->path, req->mode, req->make_parents, read, ctx,
		max_bytes, &written, e) < 0)
		return sbx_guest_failed(s, req->sandbox_id, at.row.host, e);
	res->bytes = (size_t)written;
	res->mode = req->mode;
	return 0;
}

int
sbx_read_stream(struct sbx *s, const char *account, const struct sbx_read_req *req,
    long long max_bytes, sbx_read_start_fn start, guest_write_fn write, void *ctx, struct err *e)
{
	struct sbx_read_res res;
	struct file_at at;
	long long size;

	memset(&res, 0, sizeof(res));
	if (read_at(s, account, req, res.path, sizeof(res.path), &at, e) < 0)
		return -1;
	if (guest_file_size(at.h, at.domain, res.path, &size, e) < 0)
		return sbx_guest_failed(s, req->sandbox_id, at.row.host, e);
	res.total = size;
	res.offset = req->offset < size ? req->offset : size;
	res.len = (size_t)(size - res.offset);
	if (req->length > 0 && req->length < res.len)
		res.len = req->length;
	if ((long long)res.len > max_bytes) {
		err_set_field(e, "length",
		    "length: %zu bytes from offset %lld, more than AAS_MAX_FILE_BYTES (%lld) in "
		    "one response; page with offset and length",
		    res.len, res.offset, max_bytes);
		return -1;
	}
	if (start(ctx, &res, e) < 0)
		return -1;
	if (res.len == 0)
		return 0;
	if (guest_get_stream(at.h, at.domain, res.path, res.offset, (long long)res.len, write, ctx,
		e) < 0)
		return sbx_guest_failed(s, req->sandbox_id, at.row.host, e);
	return 0;
}

json_t *
sbx_list_files(struct sbx *s, const char *account, const struct sbx_files_req *req, struct err *e)
{
	char path[SBX_PATH_MAX], domain[64];
	struct store_row row;
	struct vm_host *h;
	json_t *entries;
	int truncated = 0;

	if (abs_path(req->path ? req->path : GUEST_HOME, "path", path, sizeof(path), e) < 0)
		return NULL;
	if ((h = sbx_running(s, account, req->sandbox_id, &row, domain, sizeof(domain), e)) == NULL)
		return NULL;
	entries = guest_list_files(h, domain, path, req->depth, req->limit, &truncated, e);
	if (entries == NULL) {
		sbx_guest_failed(s, req->sandbox_id, row.host, e);
		return NULL;
	}
	return json_pack("{s:s, s:s, s:o, s:b}", "sandbox_id", req->sandbox_id, "path", path,
	    "entries", entries, "truncated", truncated);
}

/* ---- command status ---- */

int
sbx_poll_command(struct sbx *s, struct vm_host *h, const char *domain, const char *cmd_id, long pid)
{
	int code = -1, ended;
	struct err e;

	err_clear(&e);
	ended = guest_run_poll(h, domain, cmd_id, pid, &code, &e);
	if (ended < 0 && e.kind == ERR_NOT_FOUND) {
		/* The guest no longer knows it: the outcome is unknown. */
		err_clear(&e);
		err_ignore(store_cmd_end(s->db, cmd_id, "failed", -1, 1, &e));
		return 1;
	}
	if (ended == 1) {
		err_clear(&e);
		err_ignore(store_cmd_end(s->db, cmd_id, code == 124 ? "timed_out" : "exited", code,
		    1, &e));
	}
	return ended;
}

void
sbx_refresh_commands(struct sbx *s, const char *id, const char *host)
{
	struct vm_host *h = orch_host_by_uri(s->orch, host);
	struct store_cmd_pid *cmds = NULL;
	size_t n = 0;
	char domain[64];
	struct err e;

	err_clear(&e);
	if (h == NULL || store_cmd_running(s->db, id, &cmds, &n, &e) < 0)
		return;
	orch_domain_name(id, domain, sizeof(domain));
	for (size_t i = 0; i < n; i++)
		(void)sbx_poll_command(s, h, domain, cmds[i].id, cmds[i].pid);
	free(cmds);
}

int
sbx_command_id_valid(const char *id)
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
	if (h == NULL || path == NULL ||
	    guest_read_log(h, domain, path, 0, 0, -1, &data, &len, &total, &e) < 0)
		total = -1;
	free(data);
	return total >= 0 ? json_integer(total) : json_null();
}

/* The caller's sandbox `id` and a well-formed command id in it. */
static int
command_row(struct sbx *s, const char *account, const char *id, const char *cmd,
    struct store_row *row, struct err *e)
{
	if (store_load(s->db, account, id, row, e) < 0)
		return -1;
	if (!sbx_command_id_valid(cmd)) {
		err_set_at(e, ERR_NOT_FOUND, "command_id", "command_id: no command %.40s in %s",
		    cmd ? cmd : "", id);
		return -1;
	}
	return 0;
}

json_t *
sbx_command_record(struct sbx *s, const char *account, const char *id, const char *cmd,
    struct err *e)
{
	struct store_row row;

	if (command_row(s, account, id, cmd, &row, e) < 0)
		return NULL;
	return store_cmd_json(s->db, id, cmd, e);
}

json_t *
sbx_command_status(struct sbx *s, const char *account, const char *id, const char *cmd,
    struct err *e)
{
	struct store_row row;
	struct vm_host *h = NULL;
	char domain[64] = "";
	json_t *out;

	if (id == NULL) {
		err_set_at(e, ERR_INVALID, "sandbox_id", "sandbox_id: required");
		return NULL;
	}
	if (command_row(s, account, id, cmd, &row, e) < 0)
		return NULL;
	if (strcmp(row.state, "running") == 0) {
		sbx_refresh_commands(s, id, row.host);
		h = orch_host_by_uri(s->orch, row.host);
		orch_domain_name(id, domain, sizeof(domain));
	}
	out = store_cmd_json(s->db, id, cmd, e);
	if (out == NULL)
		return NULL;
	json_object_set_new(out, "sandbox_id", json_string(id));
	json_object_set_new(out, "stdout_bytes",
	    log_size(h, domain, json_string_value(json_object_get(out, "stdout_path"))));
	json_object_set_new(out, "stderr_bytes",
	    log_size(h, domain, json_string_value(json_object_get(out, "stderr_path"))));
	return out;
}
