/* guest.c - sandbox operations through the guest's aas-agent (achan):
 * commands stream their output, files move as raw bytes. */
#include "vmm/guest.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vmm/achan.h"
#include "vmm/vm_agent.h"
#include "base/clock.h"
#include "base/keys.h"
#include "base/log.h"

#define GUEST_ENV_MAX 80
#define GUEST_SHORT_OP_MS 60000
#define GUEST_LIST_NAME_MAX 4096
/* Foreground commands this process waits on at once (one per call). */
#define GUEST_PROCS_MAX 4096

int
guest_abs_path(const char *path, char *out, size_t n)
{
	int r = path[0] == '/' ? snprintf(out, n, "%s", path) :
				 snprintf(out, n, "%s/%s", GUEST_HOME, path);

	return r < 0 || (size_t)r >= n ? -1 : 0;
}

void
guest_log_paths(const char *cmd_id, char *out, size_t on, char *err, size_t en)
{
	snprintf(out, on, "%s/%s.out", GUEST_CMD_DIR, cmd_id);
	snprintf(err, en, "%s/%s.err", GUEST_CMD_DIR, cmd_id);
}

static void
exit_path(const char *cmd_id, char *out, size_t n)
{
	snprintf(out, n, "%s/%s.exit", GUEST_CMD_DIR, cmd_id);
}

/* ---- foreground commands: the live channel, found again by pid ---- */

struct proc {
	struct proc *next;
	struct vm_host *h;
	char dom[128];
	long pid;
	struct achan_exec *x;
	struct achan *c;
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
	achan_exec_free(p->x);
	achan_free(p->c);
	free(p);
}

/* A file the sandbox user may not touch is the caller's bad argument,
 * not a refusal by the service: ERR_INVALID (400), as the tools say. */
static int
file_error(struct err *e)
{
	if (e->kind == ERR_FORBIDDEN)
		e->kind = ERR_INVALID;
	return -1;
}

/* The agent connection of a domain, or NULL with e set. */
static struct achan *
agent(struct vm_host *h, const char *dom, struct err *e)
{
	return vm_agent_get(h, dom, e);
}

int
guest_run_start(struct vm_host *h, const char *dom, const struct guest_run *r, long *pid,
    struct err *e)
{
	const char *env[GUEST_ENV_MAX + 1];
	char *owned[GUEST_ENV_MAX];
	size_t ne = 0;
	char out[256], errp[256], ex[256];
	const char *key;
	json_t *val;
	struct achan *c;
	struct achan_exec *x = NULL;
	struct proc *p = NULL;
	int rc = -1;

	if (r->env) {
		json_object_foreach((json_t *)r->env, key, val) {
			size_t len;
			char *kv;

			if (ne >= GUEST_ENV_MAX) {
				err_set_field(e, "env", "env: at most %d variables", GUEST_ENV_MAX);
				goto out;
			}
			len = strlen(key) + json_string_length(val) + 2;
			kv = malloc(len);
			if (kv == NULL) {
				err_set(e, ERR_INTERNAL, "out of memory");
				goto out;
			}
			snprintf(kv, len, "%s=%s", key, json_string_value(val));
			owned[ne] = kv;
			env[ne++] = kv;
		}
	}
	env[ne] = NULL;
	if ((c = agent(h, dom, e)) == NULL)
		goto out;
	guest_log_paths(r->cmd_id, out, sizeof(out), errp, sizeof(errp));
	exit_path(r->cmd_id, ex, sizeof(ex));
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
	if (!r->background) {
		p = calloc(1, sizeof(*p));
		if (p == NULL) {
			err_set(e, ERR_INTERNAL, "out of memory");
			achan_free(c);
			goto out;
		}
		pthread_mutex_lock(&procs_lock);
		if (n_procs >= GUEST_PROCS_MAX) {
			pthread_mutex_unlock(&procs_lock);
			err_set(e, ERR_LIMIT, "too many commands waited on at once (%d)",
			    GUEST_PROCS_MAX);
			achan_free(c);
			goto out;
		}
		pthread_mutex_unlock(&procs_lock);
	}
	x = achan_exec_start(c, &req, pid, e);
	if (x == NULL) {
		achan_free(c);
		goto out;
	}
	if (r->stdin_data && achan_exec_stdin(x, r->stdin_data, r->stdin_len, 1, e) < 0) {
		struct err ignore;

		err_clear(&ignore);
		(void)achan_exec_signal(x, SIGKILL, &ignore);
		achan_exec_free(x);
		achan_free(c);
		goto out;
	}
	if (r->background) {
		achan_exec_free(x);
		achan_free(c);
	} else {
		p->h = h;
		snprintf(p->dom, sizeof(p->dom), "%s", dom);
		p->pid = *pid;
		p->x = x;
		p->c = c;
		proc_put(p);
		p = NULL;
	}
	rc = 0;
out:
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

		rc = achan_exec_next(p->x, deadline_ms, cancel, &ev, e);
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

/* ---- bytes in and out ---- */

struct mem_in {
	const unsigned char *p;
	size_t left;
};

static ssize_t
mem_read(void *ctx, void *buf, size_t n, struct err *e)
{
	struct mem_in *m = ctx;
	size_t k = n < m->left ? n : m->left;

	(void)e;
	memcpy(buf, m->p, k);
	m->p += k;
	m->left -= k;
	return (ssize_t)k;
}

struct mem_out {
	unsigned char *buf;
	size_t len, max;
};

static int
mem_write(void *ctx, const void *buf, size_t n, struct err *e)
{
	struct mem_out *m = ctx;

	if (n > m->max - m->len) {
		err_set(e, ERR_INTERNAL, "the guest sent more than asked for");
		return -1;
	}
	memcpy(m->buf + m->len, buf, n);
	m->len += n;
	return 0;
}

/* Reads [offset, offset + max) into a NUL-ended buffer. */
static int
get_bytes(struct vm_host *h, const char *dom, const char *path, int flags, long long offset,
    size_t max, unsigned char **data, size_t *len, long long *total, struct err *e)
{
	struct mem_out m = { NULL, 0, max };
	struct achan *c;
	uint64_t whole = 0;
	int rc;

	*data = NULL;
	*len = 0;
	*total = 0;
	if (offset < 0) {
		err_set_field(e, "offset", "offset: must not be negative");
		return -1;
	}
	m.buf = malloc(max + 1);
	if (m.buf == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return -1;
	}
	if ((c = agent(h, dom, e)) == NULL) {
		free(m.buf);
		return -1;
	}
	rc = achan_get(c, path, flags, (uint64_t)offset, max, mem_write, &m, &whole,
	    clock_ms() + GUEST_SHORT_OP_MS, e);
	achan_free(c);
	if (rc < 0) {
		free(m.buf);
		return file_error(e);
	}
	m.buf[m.len] = '\0';
	*data = m.buf;
	*len = m.len;
	*total = (long long)whole;
	return 0;
}

int
guest_read_log(struct vm_host *h, const char *dom, const char *path, long long offset, size_t max,
    long long known_size, char **data, size_t *len, long long *total, struct err *e)
{
	unsigned char *buf;
	struct achan *c;
	struct achan_stat st;
	int rc;

	/* The logs are root's in a root-only directory: reading them as
	 * root cannot be redirected by the command. */
	if (max > 0) {
		rc = get_bytes(h, dom, path, ACHAN_AS_ROOT, offset, max, &buf, len, total, e);
		*data = (char *)buf;
		return rc;
	}
	*data = calloc(1, 1);
	*len = 0;
	*total = known_size;
	if (*data == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return -1;
	}
	if (known_size >= 0)
		return 0;
	if ((c = agent(h, dom, e)) == NULL)
		goto fail;
	rc = achan_stat(c, path, ACHAN_AS_ROOT, &st, clock_ms() + GUEST_SHORT_OP_MS, e);
	achan_free(c);
	if (rc < 0)
		goto fail;
	*total = (long long)st.size;
	return 0;
fail:
	free(*data);
	*data = NULL;
	return -1;
}

int
guest_put_file(struct vm_host *h, const char *dom, const char *path, const unsigned char *data,
    size_t len, unsigned mode, int make_parents, struct err *e)
{
	struct mem_in m = { data, len };
	struct achan *c = agent(h, dom, e);
	uint64_t written = 0;
	int rc;

	if (c == NULL)
		return -1;
	rc = achan_put(c, path, mode & 07777,
	    ACHAN_PUT_TRUNC | (make_parents ? ACHAN_PUT_PARENTS : 0), 0, mem_read, &m, &written,
	    clock_ms() + GUEST_SHORT_OP_MS, e);
	achan_free(c);
	if (rc < 0)
		return file_error(e);
	if (written != len) {
		err_set(e, ERR_INTERNAL, "%s: the guest stored %llu of %zu bytes", path,
		    (unsigned long long)written, len);
		return -1;
	}
	return 0;
}

int
guest_get_file(struct vm_host *h, const char *dom, const char *path, long long offset,
    size_t length, unsigned char **data, size_t *len, long long *total, struct err *e)
{
	if (length == 0) {
		/* Only the size: no bytes move. */
		*data = NULL;
		*len = 0;
		if (guest_file_size(h, dom, path, total, e) < 0)
			return -1;
		*data = calloc(1, 1);
		return *data ? 0 : -1;
	}
	return get_bytes(h, dom, path, 0, offset, length, data, len, total, e);
}

long long
guest_stream_deadline(uint64_t max_bytes)
{
	return clock_ms() + GUEST_SHORT_OP_MS +
	    (long long)(max_bytes / GUEST_STREAM_MIN_BPS) * 1000;
}

int
guest_put_stream(struct vm_host *h, const char *dom, const char *path, unsigned mode,
    int make_parents, guest_read_fn read, void *ctx, uint64_t max_bytes, uint64_t *written,
    struct err *e)
{
	struct achan *c = agent(h, dom, e);
	int rc;

	*written = 0;
	if (c == NULL)
		return -1;
	rc = achan_put(c, path, mode & 07777,
	    ACHAN_PUT_TRUNC | (make_parents ? ACHAN_PUT_PARENTS : 0), 0, read, ctx, written,
	    guest_stream_deadline(max_bytes), e);
	achan_free(c);
	return rc < 0 ? file_error(e) : 0;
}

int
guest_file_size(struct vm_host *h, const char *dom, const char *path, long long *size,
    struct err *e)
{
	struct achan *c = agent(h, dom, e);
	struct achan_stat st;
	int rc;

	*size = 0;
	if (c == NULL)
		return -1;
	rc = achan_stat(c, path, 0, &st, clock_ms() + GUEST_SHORT_OP_MS, e);
	achan_free(c);
	if (rc < 0)
		return file_error(e);
	if (st.type != ACHAN_FT_FILE) {
		err_set(e, ERR_INVALID, "%s: not a regular file", path);
		return -1;
	}
	*size = (long long)st.size;
	return 0;
}

int
guest_get_stream(struct vm_host *h, const char *dom, const char *path, long long offset,
    long long length, guest_write_fn write, void *ctx, struct err *e)
{
	struct achan *c;
	uint64_t whole = 0;
	int rc;

	if (offset < 0 || length <= 0) {
		err_set_field(e, "offset", "offset: outside the file");
		return -1;
	}
	if ((c = agent(h, dom, e)) == NULL)
		return -1;
	rc = achan_get(c, path, 0, (uint64_t)offset, (uint64_t)length, write, ctx, &whole,
	    guest_stream_deadline((uint64_t)length), e);
	achan_free(c);
	return rc < 0 ? file_error(e) : 0;
}

/* ---- list_files: a walk of LIST calls, depth first, names in order ---- */

struct name_st {
	char *name;
	struct achan_stat st;
};

struct dir_buf {
	struct name_st *v;
	size_t n, cap, max;
	int truncated;
};

static int
collect(void *ctx, const char *name, const struct achan_stat *st, struct err *e)
{
	struct dir_buf *d = ctx;

	if (d->n == d->max) {
		d->truncated = 1;
		return 1;
	}
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 64;
		struct name_st *v = realloc(d->v, cap * sizeof(*v));

		if (v == NULL) {
			err_set(e, ERR_INTERNAL, "out of memory");
			return -1;
		}
		d->v = v;
		d->cap = cap;
	}
	d->v[d->n].name = strdup(name);
	if (d->v[d->n].name == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return -1;
	}
	d->v[d->n++].st = *st;
	return 0;
}

static int
by_name(const void *a, const void *b)
{
	return strcmp(((const struct name_st *)a)->name, ((const struct name_st *)b)->name);
}

static void
dir_buf_clear(struct dir_buf *d)
{
	for (size_t i = 0; i < d->n; i++)
		free(d->v[i].name);
	free(d->v);
}

static const char *
type_name(enum achan_ftype t)
{
	switch (t) {
	case ACHAN_FT_FILE:
		return "file";
	case ACHAN_FT_DIR:
		return "directory";
	case ACHAN_FT_LINK:
		return "symlink";
	default:
		return "other";
	}
}

static json_t *
entry_json(const char *path, const struct achan_stat *st)
{
	char mode[8], when[32];
	time_t mt = (time_t)(st->mtime_ns / 1000000000);
	struct tm tm;

	snprintf(mode, sizeof(mode), "%04o", st->mode & 07777);
	if (gmtime_r(&mt, &tm) == NULL)
		memset(&tm, 0, sizeof(tm));
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	return json_pack("{s:s%, s:s, s:I, s:s, s:s}", "path", path, strlen(path), "type",
	    type_name(st->type), "size", (json_int_t)st->size, "mode", mode, "mtime", when);
}

struct walk {
	struct achan *c;
	json_t *out;
	int limit;
	int truncated;
	long long deadline;
};

static int
walk_dir(struct walk *w, const char *dir, int level, int depth, struct err *e)
{
	struct dir_buf d = { NULL, 0, 0, 0, 0 };
	int rc = -1;

	d.max = (size_t)(w->limit - (int)json_array_size(w->out)) + 1;
	if (achan_list(w->c, dir, collect, &d, w->deadline, e) < 0)
		goto out;
	/* An empty directory has no array at all (qsort wants one). */
	if (d.n > 1)
		qsort(d.v, d.n, sizeof(*d.v), by_name);
	for (size_t i = 0; i < d.n; i++) {
		char path[GUEST_LIST_NAME_MAX];
		json_t *j;

		if ((int)json_array_size(w->out) >= w->limit) {
			w->truncated = 1;
			break;
		}
		if ((size_t)snprintf(path, sizeof(path), "%s%s%s", dir,
			dir[strlen(dir) - 1] == '/' ? "" : "/", d.v[i].name) >= sizeof(path))
			continue; /* deeper than any path a tool can name */
		j = entry_json(path, &d.v[i].st);
		if (j == NULL || json_array_append_new(w->out, j) < 0) {
			err_set(e, ERR_INTERNAL, "out of memory");
			goto out;
		}
		if (d.v[i].st.type == ACHAN_FT_DIR && level < depth) {
			struct err sub;

			/* An unreadable subdirectory is listed, not entered. */
			err_clear(&sub);
			if (walk_dir(w, path, level + 1, depth, &sub) < 0 &&
			    (sub.kind == ERR_UNAVAILABLE || sub.kind == ERR_TIMEOUT ||
				sub.kind == ERR_INTERNAL)) {
				*e = sub;
				goto out;
			}
		}
	}
	if (d.truncated)
		w->truncated = 1;
	rc = 0;
out:
	dir_buf_clear(&d);
	return rc;
}

json_t *
guest_list_files(struct vm_host *h, const char *dom, const char *path, int depth, int limit,
    int *truncated, struct err *e)
{
	struct walk w = { NULL, json_array(), limit, 0, clock_ms() + GUEST_SHORT_OP_MS };

	*truncated = 0;
	if (w.out == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	if ((w.c = agent(h, dom, e)) == NULL || walk_dir(&w, path, 1, depth, e) < 0) {
		achan_free(w.c);
		json_decref(w.out);
		file_error(e);
		return NULL;
	}
	achan_free(w.c);
	*truncated = w.truncated;
	return w.out;
}

/* ---- signals and background commands ---- */

int
guest_kill(struct vm_host *h, const char *dom, long pid, int sig, struct err *e)
{
	struct achan *c = agent(h, dom, e);
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

	exit_path(cmd_id, path, sizeof(path));
	err_clear(&local);
	rc = get_bytes(h, dom, path, ACHAN_AS_ROOT, 0, 64, &data, &len, &total, &local);
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

/* ---- terminals ---- */

struct guest_pty {
	struct achan *c;
	struct achan_exec *x;
};

struct guest_pty *
guest_pty_start(struct vm_host *h, const char *dom, unsigned rows, unsigned cols, struct err *e)
{
	static const char *const argv[] = { "/bin/bash", "-l", NULL };
	struct guest_pty *p;
	long pid;

	if (rows == 0 || cols == 0 || rows > GUEST_PTY_MAX_DIM || cols > GUEST_PTY_MAX_DIM) {
		err_set_field(e, "rows", "rows and cols: 1 to %d", GUEST_PTY_MAX_DIM);
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (p == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	if ((p->c = agent(h, dom, e)) == NULL) {
		free(p);
		return NULL;
	}
	const struct achan_exec_req req = {
		.argv = argv,
		.cwd = GUEST_HOME,
		.pty = 1,
		.rows = rows,
		.cols = cols,
		.stdin_stream = 1,
	};
	p->x = achan_exec_start(p->c, &req, &pid, e);
	if (p->x == NULL) {
		guest_pty_free(p);
		return NULL;
	}
	return p;
}

int
guest_pty_read(struct guest_pty *p, long long deadline_ms, const atomic_int *cancel,
    const char **data, size_t *len, int *exit_code, struct err *e)
{
	struct achan_ev ev;

	for (;;) {
		int rc = achan_exec_next(p->x, deadline_ms, cancel, &ev, e);

		if (rc <= 0)
			return rc;
		if (ev.kind == ACHAN_EV_EXIT) {
			*exit_code = ev.signal ? 128 + ev.signal : ev.code;
			return 2;
		}
		/* A terminal has one output; stderr is merged into it. */
		*data = ev.data;
		*len = ev.len;
		if (ev.len > 0 || ev.kind == ACHAN_EV_STDOUT)
			return 1;
	}
}

int
guest_pty_write(struct guest_pty *p, const void *data, size_t len, struct err *e)
{
	return achan_exec_stdin(p->x, data, len, 0, e);
}

int
guest_pty_resize(struct guest_pty *p, unsigned rows, unsigned cols, struct err *e)
{
	if (rows == 0 || cols == 0 || rows > GUEST_PTY_MAX_DIM || cols > GUEST_PTY_MAX_DIM) {
		err_set_field(e, "rows", "rows and cols: 1 to %d", GUEST_PTY_MAX_DIM);
		return -1;
	}
	return achan_exec_resize(p->x, rows, cols, e);
}

void
guest_pty_free(struct guest_pty *p)
{
	if (p == NULL)
		return;
	achan_exec_free(p->x);
	achan_free(p->c);
	free(p);
}

/* Runs argv as root in the guest, its output dropped; 0 when it exits 0
 * within 10 s. `what` names it in errors. */
static int
run_root_quiet(struct vm_host *h, const char *dom, const char **argv, const char *what,
    struct err *e)
{
	struct achan_exec_req req = { .argv = argv, .as_root = 1, .timeout_s = 10 };
	long long deadline = clock_ms() + 10000;
	struct achan *c = agent(h, dom, e);
	struct achan_exec *x;
	struct achan_ev ev;
	long pid;
	int rc = -1, got;

	if (c == NULL)
		return -1;
	if ((x = achan_exec_start(c, &req, &pid, e)) == NULL)
		goto out;
	while ((got = achan_exec_next(x, deadline, NULL, &ev, e)) == 1 && ev.kind != ACHAN_EV_EXIT)
		;
	if (got == 1 && ev.code == 0 && ev.signal == 0)
		rc = 0;
	else if (got == 1)
		err_set(e, ERR_UNAVAILABLE, "the guest's %s failed (%d)", what, ev.code);
	else if (got == 0)
		err_set(e, ERR_TIMEOUT, "the guest's %s did not finish in time", what);
	achan_exec_free(x);
out:
	achan_free(c);
	return rc;
}

/* The host's time as "seconds.nanoseconds". */
static void
now_text(char *out, size_t n)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	snprintf(out, n, "%lld.%09ld", (long long)now.tv_sec, now.tv_nsec);
}

int
guest_set_clock(struct vm_host *h, const char *dom, struct err *e)
{
	char when[48];
	const char *argv[] = { "/bin/date", "-u", "-s", when, NULL };

	when[0] = '@';
	now_text(when + 1, sizeof(when) - 1);
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
	now_text(when, sizeof(when));
	return run_root_quiet(h, dom, argv, "aas-identity", e);
}
