/* guest.c - commands in a guest through its aas-agent (achan): started
 * with their output streamed and kept in logs, waited on, polled, signalled,
 * and the short root commands a restored or copied guest needs. Files,
 * listings and terminals are guest_file.c, guest_list.c and guest_pty.c. */
#include "vmm/guest.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vmm/achan.h"
#include "vmm/guest_int.h"
#include "vmm/vm_agent.h"
#include "base/clock.h"
#include "base/fmt.h"
#include "base/keys.h"

#define GUEST_ENV_MAX 80
/* Foreground commands this process waits on at once (one per call). */
#define GUEST_PROCS_MAX 4096

int
guest_abs_path(const char *path, char *out, size_t n)
{
	return path[0] == '/' ? fmt_buf(out, n, "%s", path) :
				fmt_buf(out, n, "%s/%s", GUEST_HOME, path);
}

int
guest_log_paths(const char *cmd_id, char *out, size_t on, char *err, size_t en)
{
	if (fmt_buf(out, on, "%s/%s.out", GUEST_CMD_DIR, cmd_id) == 0 &&
	    fmt_buf(err, en, "%s/%s.err", GUEST_CMD_DIR, cmd_id) == 0)
		return 0;
	if (on > 0)
		out[0] = '\0';
	if (en > 0)
		err[0] = '\0';
	return -1;
}

static int
exit_path(const char *cmd_id, char *out, size_t n, struct err *e)
{
	return fmt_err(e, "command id", out, n, "%s/%s.exit", GUEST_CMD_DIR, cmd_id);
}

/* ---- a command and the agent connection it runs over ---- */

int
guest_exec_open(struct vm_host *h, const char *dom, const struct achan_exec_req *req, long *pid,
    struct guest_exec *g, struct err *e)
{
	g->x = NULL;
	if ((g->c = vm_agent_get(h, dom, e)) == NULL)
		return -1;
	if ((g->x = achan_exec_start(g->c, req, pid, e)) == NULL) {
		guest_exec_close(g);
		return -1;
	}
	return 0;
}

void
guest_exec_close(struct guest_exec *g)
{
	achan_exec_free(g->x);
	achan_free(g->c);
	g->x = NULL;
	g->c = NULL;
}

/* ---- foreground commands: the live channel, found again by pid ---- */

struct proc {
	struct proc *next;
	struct vm_host *h;
	char dom[128];
	long pid;
	struct guest_exec g;
	long long out_size, err_size;
};

static pthread_mutex_t procs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct proc *procs;
static size_t n_procs;

static struct proc *
proc_take(struct vm_host *h, const char *dom, long pid)
{
	struct proc *found = NULL;

	pthread_mutex_lock(&procs_lock);
	for (struct proc **p = &procs; *p; p = &(*p)->next)
		if ((*p)->h == h && (*p)->pid == pid && strcmp((*p)->dom, dom) == 0) {
			found = *p;
			*p = found->next;
			n_procs--;
			break;
		}
	pthread_mutex_unlock(&procs_lock);
	return found;
}

static void
proc_put(struct proc *p)
{
	pthread_mutex_lock(&procs_lock);
	p->next = procs;
	procs = p;
	n_procs++;
	pthread_mutex_unlock(&procs_lock);
}

static void
proc_free(struct proc *p)
{
	if (p == NULL)
		return;
	guest_exec_close(&p->g);
	free(p);
}

/* A slot among the GUEST_PROCS_MAX foreground commands, or NULL with e
 * set. */
static struct proc *
proc_new(struct err *e)
{
	struct proc *p = calloc(1, sizeof(*p));
	int full;

	if (p == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	pthread_mutex_lock(&procs_lock);
	full = n_procs >= GUEST_PROCS_MAX;
	pthread_mutex_unlock(&procs_lock);
	if (full) {
		err_set(e, ERR_LIMIT, "too many commands waited on at once (%d)", GUEST_PROCS_MAX);
		free(p);
		return NULL;
	}
	return p;
}

/* The command's environment as "KEY=value" strings (malloc'd, in owned;
 * env ends with NULL). */
static int
env_list(const json_t *vars, const char **env, char **owned, size_t *ne, struct err *e)
{
	const char *key;
	json_t *val;

	*ne = 0;
	if (vars) {
		json_object_foreach((json_t *)vars, key, val) {
			size_t len;
			char *kv;

			if (*ne >= GUEST_ENV_MAX) {
				err_set_field(e, "env", "env: at most %d variables", GUEST_ENV_MAX);
				return -1;
			}
			len = strlen(key) + json_string_length(val) + 2;
			kv = malloc(len);
			if (kv == NULL) {
				err_set(e, ERR_INTERNAL, "out of memory");
				return -1;
			}
			if (fmt_err(e, "env", kv, len, "%s=%s", key, json_string_value(val)) < 0) {
				free(kv);
				return -1;
			}
			owned[*ne] = kv;
			env[(*ne)++] = kv;
		}
	}
	env[*ne] = NULL;
	return 0;
}

int
guest_run_start(struct vm_host *h, const char *dom, const struct guest_run *r, long *pid,
    struct err *e)
{
	const char *env[GUEST_ENV_MAX + 1];
	char *owned[GUEST_ENV_MAX];
	size_t ne = 0;
	char out[256], errp[256], ex[256];
	struct guest_exec g = { NULL, NULL };
	struct proc *p = NULL;
	int rc = -1;

	if (env_list(r->env, env, owned, &ne, e) < 0)
		goto out;
	if ((g.c = vm_agent_get(h, dom, e)) == NULL)
		goto out;
	if (guest_log_paths(r->cmd_id, out, sizeof(out), errp, sizeof(errp)) < 0) {
		err_set(e, ERR_INVALID, "command id too long");
		goto out;
	}
	if (exit_path(r->cmd_id, ex, sizeof(ex), e) < 0)
		goto out;
	const char *argv[] = { "/bin/bash", "-c", r->command, NULL };
	struct achan_exec_req req = {
		.argv = argv,
		.env = env,
		.cwd = r->cwd,
		.timeout_s = r->timeout_s,
		.detach = r->background,
		.log_out = out,
		.log_err = errp,
		.exit_file = ex,
		.stdin_stream = r->stdin_data != NULL,
	};
	if (!r->background && (p = proc_new(e)) == NULL)
		goto out;
	if (p != NULL && fmt_err(e, "domain name", p->dom, sizeof(p->dom), "%s", dom) < 0)
		goto out;
	if ((g.x = achan_exec_start(g.c, &req, pid, e)) == NULL)
		goto out;
	if (r->stdin_data && achan_exec_stdin(g.x, r->stdin_data, r->stdin_len, 1, e) < 0) {
		struct err ignore;

		err_clear(&ignore);
		err_ignore(achan_exec_signal(g.x, SIGKILL, &ignore));
		goto out;
	}
	if (!r->background) {
		/* Waited on: the connection goes with the command's slot. */
		p->h = h;
		p->pid = *pid;
		p->g = g;
		g = (struct guest_exec){ NULL, NULL };
		proc_put(p);
		p = NULL;
	}
	rc = 0;
out:
	guest_exec_close(&g);
	free(p);
	for (size_t i = 0; i < ne; i++)
		free(owned[i]);
	return rc;
}

int
guest_run_wait(struct vm_host *h, const char *dom, long pid, long long deadline_ms,
    const atomic_int *cancel, const struct guest_sink *sink, int *exit_code, long long *out_size,
    long long *err_size, struct err *e)
{
	struct proc *p = proc_take(h, dom, pid);
	int rc;

	*out_size = *err_size = -1;
	if (p == NULL) {
		err_set(e, ERR_NOT_FOUND, "no command %ld is being waited on", pid);
		return -1;
	}
	for (;;) {
		struct achan_ev ev;

		rc = achan_exec_next(p->g.x, deadline_ms, cancel, &ev, e);
		if (rc <= 0)
			break;
		if (ev.kind == ACHAN_EV_EXIT) {
			*exit_code = ev.signal ? 128 + ev.signal : ev.code;
			*out_size = p->out_size;
			*err_size = p->err_size;
			proc_free(p);
			return 1;
		}
		if (ev.kind == ACHAN_EV_STDOUT)
			p->out_size += (long long)ev.len;
		else
			p->err_size += (long long)ev.len;
		if (sink && sink->output && ev.len > 0)
			sink->output(sink->ctx, ev.kind == ACHAN_EV_STDOUT ? 1 : 2, ev.data,
			    ev.len);
	}
	if (rc < 0) {
		proc_free(p);
		return -1;
	}
	proc_put(p); /* still running: the caller waits again or releases it */
	return 0;
}

void
guest_run_release(struct vm_host *h, const char *dom, long pid)
{
	proc_free(proc_take(h, dom, pid));
}

/* ---- signals and background commands ---- */

int
guest_kill(struct vm_host *h, const char *dom, long pid, int sig, struct err *e)
{
	struct achan *c = vm_agent_get(h, dom, e);
	int rc;

	if (c == NULL)
		return -1;
	rc = achan_kill(c, pid, sig, clock_ms() + GUEST_SHORT_OP_MS, e);
	achan_free(c);
	return rc;
}

int
guest_run_poll(struct vm_host *h, const char *dom, const char *cmd_id, long pid, int *exit_code,
    struct err *e)
{
	char path[256];
	unsigned char *data = NULL;
	size_t len = 0;
	long long total = 0;
	struct err local;
	int code = -1, sig = 0, rc;

	if (exit_path(cmd_id, path, sizeof(path), e) < 0)
		return -1;
	err_clear(&local);
	rc = guest_get_bytes(h, dom, path, ACHAN_AS_ROOT, 0, 64, &data, &len, &total, &local);
	if (rc == 0) {
		/* "CODE SIGNAL\n", written by the agent as root. */
		if (sscanf((const char *)data, "%d %d", &code, &sig) != 2 || code < 0 ||
		    code > 255 || sig < 0 || sig > 64) {
			free(data);
			err_set(e, ERR_INTERNAL, "command %s: unreadable exit file", cmd_id);
			return -1;
		}
		free(data);
		*exit_code = sig ? 128 + sig : code;
		return 1;
	}
	if (local.kind != ERR_NOT_FOUND) {
		*e = local;
		return -1;
	}
	/* No exit file: still running, unless its group is gone (the guest
	 * rebooted, or the agent was killed with it). */
	err_clear(&local);
	if (guest_kill(h, dom, pid, 0, &local) == 0)
		return 0;
	if (local.kind == ERR_NOT_FOUND || local.kind == ERR_FORBIDDEN) {
		err_set(e, ERR_NOT_FOUND, "the guest no longer knows process %ld", pid);
		return -1;
	}
	*e = local;
	return -1;
}

/* ---- short commands as root ---- */

/* Runs argv as root in the guest, its output dropped; 0 when it exits 0
 * within 10 s. `what` names it in errors. */
static int
run_root_quiet(struct vm_host *h, const char *dom, const char **argv, const char *what,
    struct err *e)
{
	struct achan_exec_req req = { .argv = argv, .as_root = 1, .timeout_s = 10 };
	long long deadline = clock_ms() + 10000;
	struct guest_exec g;
	struct achan_ev ev;
	long pid;
	int rc = -1, got;

	if (guest_exec_open(h, dom, &req, &pid, &g, e) < 0)
		return -1;
	while ((got = achan_exec_next(g.x, deadline, NULL, &ev, e)) == 1 &&
	    ev.kind != ACHAN_EV_EXIT)
		;
	if (got == 1 && ev.code == 0 && ev.signal == 0)
		rc = 0;
	else if (got == 1)
		err_set(e, ERR_UNAVAILABLE, "the guest's %s failed (%d)", what, ev.code);
	else if (got == 0)
		err_set(e, ERR_TIMEOUT, "the guest's %s did not finish in time", what);
	guest_exec_close(&g);
	return rc;
}

/* The host's time as "seconds.nanoseconds"; -1 with e set when it does
 * not fit n. */
static int
now_text(char *out, size_t n, struct err *e)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	return fmt_err(e, "clock", out, n, "%lld.%09ld", (long long)now.tv_sec, now.tv_nsec);
}

int
guest_set_clock(struct vm_host *h, const char *dom, struct err *e)
{
	char when[48];
	const char *argv[] = { "/bin/date", "-u", "-s", when, NULL };

	when[0] = '@';
	if (now_text(when + 1, sizeof(when) - 1, e) < 0)
		return -1;
	return run_root_quiet(h, dom, argv, "date -s", e);
}

int
guest_drop_caches(struct vm_host *h, const char *dom, struct err *e)
{
	const char *argv[] = { "/bin/sh", "-c", "sync && echo 3 > /proc/sys/vm/drop_caches", NULL };

	return run_root_quiet(h, dom, argv, "drop_caches", e);
}

int
guest_new_identity(struct vm_host *h, const char *dom, struct err *e)
{
	char seed[2 * GUEST_SEED_BYTES + 1], id[33], when[48];
	const char *argv[] = { GUEST_IDENTITY_PATH, seed, id, when, NULL };

	if (key_random_hex(seed, sizeof(seed), GUEST_SEED_BYTES) < 0 ||
	    key_random_hex(id, sizeof(id), 16) < 0) {
		err_set(e, ERR_INTERNAL, "random generator failed");
		return -1;
	}
	if (now_text(when, sizeof(when), e) < 0)
		return -1;
	return run_root_quiet(h, dom, argv, "aas-identity", e);
}
