/* sandbox_cmd.c - following and stopping a command that was started
 * earlier (get_command, kill_command). */
#include "sandbox/sandbox_int.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/utf8.h"
#include "vmm/guest.h"

#define CMD_WAIT_FIRST_MS 100   /* get_command's first pause; doubles */
#define CMD_WAIT_MAX_MS 1000    /* its longest pause between two looks */
#define CMD_WAIT_SLICE_MS 50    /* how often a pause looks at the cancel flag */
#define CMD_KILL_SETTLE_MS 2000 /* kill_command waits this long for the end */

void
sbx_cmd_res_clear(struct sbx_cmd_res *res)
{
	if (res == NULL)
		return;
	free(res->out);
	free(res->err);
	memset(res, 0, sizeof(*res));
}

static int
cancelled(const struct sbx_progress *pg)
{
	return pg && pg->cancel && atomic_load(pg->cancel);
}

/* The wait ends early: the caller cancelled, or the service is stopping. */
static int
stop_waiting(struct sbx *s, const struct sbx_progress *pg)
{
	return cancelled(pg) || atomic_load(&s->calls_stop);
}

/* Sleeps `ms`, waking early when the wait should end. */
static void
pause_ms(struct sbx *s, long long ms, const struct sbx_progress *pg)
{
	while (ms > 0 && !stop_waiting(s, pg)) {
		long long step = ms < CMD_WAIT_SLICE_MS ? ms : CMD_WAIT_SLICE_MS;
		struct timespec ts = { (time_t)(step / 1000), (long)(step % 1000) * 1000000L };

		nanosleep(&ts, NULL);
		ms -= step;
	}
}

/* The command's row, after asking the guest about a running background
 * command (its end is recorded). A foreground command's end is recorded
 * by the run_command call that waits for it: asking here would take the
 * exit status from under that call. */
static int
load_cmd(struct sbx *s, struct vm_host *h, const char *domain, const char *id, const char *cmd,
    struct store_cmd *c, struct err *e)
{
	if (store_cmd_get(s->db, id, cmd, c, e) < 0)
		return -1;
	if (strcmp(c->state, "running") != 0 || !c->background || c->pid <= 0)
		return 0;
	if (sbx_poll_command(s, h, domain, c->id, c->pid) != 1)
		return 0;
	return store_cmd_get(s->db, id, cmd, c, e);
}

/* The running sandbox and the command of the caller. */
static struct vm_host *
cmd_vm(struct sbx *s, const char *account, const char *id, const char *cmd, char *domain, size_t dn,
    struct err *e)
{
	struct store_row row;
	struct vm_host *h;

	if ((h = sbx_running(s, account, id, &row, domain, dn, e)) == NULL)
		return NULL;
	if (!sbx_command_id_valid(cmd)) {
		err_set_at(e, ERR_NOT_FOUND, "command_id", "command_id: no command %.40s in %s",
		    cmd ? cmd : "", id);
		return NULL;
	}
	return h;
}

static void
fill_state(struct sbx_cmd_res *res, const struct store_cmd *c)
{
	memcpy(res->command_id, c->id, sizeof(res->command_id));
	memcpy(res->state, c->state, sizeof(res->state));
	res->has_exit_code = c->has_exit_code;
	res->exit_code = c->exit_code;
	res->background = c->background;
	memcpy(res->stdout_path, c->stdout_path, sizeof(res->stdout_path));
	memcpy(res->stderr_path, c->stderr_path, sizeof(res->stderr_path));
}

/* A log's size (guest_read_log of nothing). The logs of a command that
 * has just started may not exist yet: while it runs, a log that cannot be
 * read counts as empty. */
static int
log_total(struct vm_host *h, const char *domain, const char *path, int running, long long *total,
    struct err *e)
{
	char *data = NULL;
	size_t len = 0;
	struct err le;
	int rc;

	err_clear(&le);
	rc = guest_read_log(h, domain, path, 0, 0, -1, &data, &len, total, &le);
	free(data);
	/* Not when the guest cannot be reached: that is no empty log. */
	if (rc < 0 && running && le.kind != ERR_UNAVAILABLE) {
		*total = 0;
		return 0;
	}
	if (rc < 0)
		*e = le;
	return rc;
}

/* Up to `max` bytes of a log from `offset`. While more may follow, a
 * character cut at the end is left for the next read, so that the next
 * offset starts a character. */
static int
read_from(struct vm_host *h, const char *domain, const char *path, const char *field,
    long long offset, size_t max, int running, char **data, size_t *len, long long *total,
    struct err *e)
{
	struct err le;

	err_clear(&le);
	if (guest_read_log(h, domain, path, offset, max, -1, data, len, total, &le) < 0) {
		if (!running || le.kind == ERR_UNAVAILABLE) {
			*e = le;
			return -1;
		}
		/* Not there yet (as in log_total): nothing printed so far. */
		*data = NULL;
		*len = 0;
		*total = 0;
	}
	if (offset > *total) {
		free(*data);
		*data = NULL;
		*len = 0;
		err_set_field(e, field, "%s: %lld is past the end of the output (%lld bytes)",
		    field, offset, *total);
		return -1;
	}
	if (running || offset + (long long)*len < *total)
		*len = utf8_whole_len(*data, *len);
	return 0;
}

/* A guest call failed on sandbox `id`: it ends when its guest broke the
 * agent protocol, and a call that lost a race with a pause, a snapshot or
 * a destroy says so (sbx_guest_failed; the row need not run any more).
 * Returns -1. */
static int
guest_failed(struct sbx *s, const char *account, const char *id, struct err *e)
{
	struct store_row row;
	struct err le;

	err_clear(&le);
	if (e->kind != ERR_UNAVAILABLE || store_load(s->db, account, id, &row, &le) < 0)
		return -1;
	return sbx_guest_failed(s, id, row.host, e);
}

static int
command_get(struct sbx *s, const char *account, const struct sbx_cmd_req *req,
    const struct sbx_progress *pg, struct sbx_cmd_res *res, struct err *e)
{
	char domain[64];
	struct vm_host *h;
	struct store_cmd c;
	long long deadline, delay = CMD_WAIT_FIRST_MS;
	size_t max = (size_t)s->cfg->max_output_bytes;
	int running;

	memset(res, 0, sizeof(*res));
	if (req->stdout_offset < 0 || req->stderr_offset < 0) {
		err_set_field(e, req->stdout_offset < 0 ? "stdout_offset" : "stderr_offset",
		    "%s: must not be negative",
		    req->stdout_offset < 0 ? "stdout_offset" : "stderr_offset");
		return -1;
	}
	if (req->wait_s < 0 || req->wait_s > s->cfg->max_wait_s) {
		err_set_field(e, "wait_seconds", "wait_seconds: at most %d on this service",
		    s->cfg->max_wait_s);
		return -1;
	}
	if ((h = cmd_vm(s, account, req->sandbox_id, req->command_id, domain, sizeof(domain), e)) ==
	    NULL)
		return -1;
	deadline = clock_ms() + (long long)req->wait_s * 1000;
	for (;;) {
		long long out_total, err_total, left;

		if (load_cmd(s, h, domain, req->sandbox_id, req->command_id, &c, e) < 0)
			return -1;
		if (strcmp(c.state, "running") != 0 || req->wait_s == 0 || stop_waiting(s, pg))
			break;
		if (log_total(h, domain, c.stdout_path, 1, &out_total, e) < 0 ||
		    log_total(h, domain, c.stderr_path, 1, &err_total, e) < 0)
			return -1;
		if (out_total > req->stdout_offset || err_total > req->stderr_offset)
			break;
		left = deadline - clock_ms();
		if (left <= 0)
			break;
		pause_ms(s, delay < left ? delay : left, pg);
		delay = delay * 2 < CMD_WAIT_MAX_MS ? delay * 2 : CMD_WAIT_MAX_MS;
	}
	fill_state(res, &c);
	running = strcmp(c.state, "running") == 0;
	res->out_offset = req->stdout_offset;
	res->err_offset = req->stderr_offset;
	if (read_from(h, domain, c.stdout_path, "stdout_offset", req->stdout_offset, max, running,
		&res->out, &res->out_len, &res->out_total, e) < 0 ||
	    read_from(h, domain, c.stderr_path, "stderr_offset", req->stderr_offset, max, running,
		&res->err, &res->err_len, &res->err_total, e) < 0) {
		sbx_cmd_res_clear(res);
		return -1;
	}
	return 0;
}

int
sbx_command_get(struct sbx *s, const char *account, const struct sbx_cmd_req *req,
    const struct sbx_progress *pg, struct sbx_cmd_res *res, struct err *e)
{
	if (command_get(s, account, req, pg, res, e) < 0)
		return guest_failed(s, account, req->sandbox_id, e);
	return 0;
}

static int
command_kill(struct sbx *s, const char *account, const struct sbx_kill_req *req,
    struct sbx_cmd_res *res, struct err *e)
{
	char domain[64];
	struct vm_host *h;
	struct store_cmd c;
	long long deadline, delay = CMD_WAIT_FIRST_MS / 2;

	memset(res, 0, sizeof(*res));
	if (req->sig < 1 || req->sig > 64) {
		err_set_field(e, "signal", "signal: not a signal");
		return -1;
	}
	if ((h = cmd_vm(s, account, req->sandbox_id, req->command_id, domain, sizeof(domain), e)) ==
	    NULL)
		return -1;
	if (load_cmd(s, h, domain, req->sandbox_id, req->command_id, &c, e) < 0)
		return -1;
	if (strcmp(c.state, "running") != 0 || c.pid <= 0) {
		/* Ended (or never started): nothing to signal. */
		fill_state(res, &c);
		return 0;
	}
	/* Noted first, so that whoever sees the end records it as killed. */
	if (store_cmd_set_kill(s->db, c.id, req->sig, e) < 0 ||
	    guest_kill(h, domain, c.pid, req->sig, e) < 0)
		return -1;
	res->signalled = 1;
	/* A command usually ends at once; a caught signal may not end it. */
	deadline = clock_ms() + CMD_KILL_SETTLE_MS;
	for (;;) {
		long long left;

		if (load_cmd(s, h, domain, req->sandbox_id, req->command_id, &c, e) < 0)
			return -1;
		left = deadline - clock_ms();
		if (strcmp(c.state, "running") != 0 || left <= 0)
			break;
		pause_ms(s, delay < left ? delay : left, NULL);
		delay = delay * 2 < CMD_WAIT_MAX_MS ? delay * 2 : CMD_WAIT_MAX_MS;
	}
	fill_state(res, &c);
	return 0;
}

int
sbx_command_kill(struct sbx *s, const char *account, const struct sbx_kill_req *req,
    struct sbx_cmd_res *res, struct err *e)
{
	if (command_kill(s, account, req, res, e) < 0)
		return guest_failed(s, account, req->sandbox_id, e);
	return 0;
}
