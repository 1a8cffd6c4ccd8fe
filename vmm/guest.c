/* guest.c - sandbox operations through aas-helper. */
#include "vmm/guest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vmm/agent.h"
#include "vmm/guest_parse.h"
#include "base/keys.h"
#include "base/clock.h"
#include "base/log.h"

#define GUEST_ENV_MAX 80
#define GUEST_SHORT_OP_MS 60000

static const char *const base_env[] = {
	"HOME=" GUEST_HOME,
	"USER=sandbox",
	"LOGNAME=sandbox",
	"SHELL=/bin/bash",
	"PATH=" GUEST_HOME "/.local/bin:/usr/local/bin:/usr/bin:/bin",
	"LANG=C.UTF-8",
	"TERM=dumb",
	NULL,
};

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

/* Turns a helper's failure into an error message from its stderr. */
static void
helper_error(const struct agent_exec_status *st, const char *what, enum err_kind kind,
    struct err *e)
{
	char msg[256] = "";
	size_t n = st->err_len < sizeof(msg) - 1 ? st->err_len : sizeof(msg) - 1;

	if (st->err)
		memcpy(msg, st->err, n);
	msg[n] = '\0';
	msg[strcspn(msg, "\n")] = '\0';
	err_set(e, kind, "%s: %s", what, msg[0] ? msg : "failed");
}

int
guest_run_start(struct vm_host *h, const char *dom, const struct guest_run *r, long *pid,
    struct err *e)
{
	const char *env[GUEST_ENV_MAX + 8];
	char *owned[GUEST_ENV_MAX];
	size_t ne = 0, no = 0;
	char out[256], errp[256], tmo[24];
	const char *key;
	json_t *val;
	int rc;

	for (const char *const *p = base_env; *p; p++)
		env[ne++] = *p;
	if (r->env) {
		json_object_foreach((json_t *)r->env, key, val) {
			size_t len;
			char *kv;

			if (no >= GUEST_ENV_MAX)
				break;
			len = strlen(key) + json_string_length(val) + 2;
			kv = malloc(len);
			if (kv == NULL)
				break;
			snprintf(kv, len, "%s=%s", key, json_string_value(val));
			owned[no++] = kv;
			env[ne++] = kv;
		}
	}
	env[ne] = NULL;
	guest_log_paths(r->cmd_id, out, sizeof(out), errp, sizeof(errp));
	snprintf(tmo, sizeof(tmo), "%d", r->timeout_s);
	const char *argv[] = { "run", r->cwd ? r->cwd : GUEST_HOME, out, errp, tmo,
		r->stdin_data ? "1" : "0", r->command, NULL };
	struct agent_exec x = {
		.path = GUEST_HELPER,
		.argv = argv,
		.env = env,
		.input = (const unsigned char *)r->stdin_data,
		.input_len = r->stdin_len,
		.capture = 1, /* only the helper's own line: the log sizes */
	};
	rc = agent_exec_start(h, dom, &x, pid, e);
	for (size_t i = 0; i < no; i++)
		free(owned[i]);
	return rc;
}

int
guest_run_wait(struct vm_host *h, const char *dom, long pid, long long deadline_ms,
    const atomic_int *cancel, const struct guest_sink *sink, int *exit_code, long long *out_size,
    long long *err_size, struct err *e)
{
	useconds_t delay = 1000;

	(void)sink; /* qemu-ga has the output only once the command ended */
	*out_size = *err_size = -1;
	for (;;) {
		struct agent_exec_status st;

		if (agent_exec_status(h, dom, pid, &st, e) < 0)
			return -1;
		if (st.exited) {
			*exit_code = st.signal ? 128 + st.signal : st.exit_code;
			if (st.out == NULL || sscanf(st.out, "%lld %lld", out_size, err_size) != 2)
				*out_size = *err_size = -1;
			agent_exec_status_clear(&st);
			return 1;
		}
		agent_exec_status_clear(&st);
		if (clock_ms() >= deadline_ms || (cancel && atomic_load(cancel)))
			return 0;
		/* Quick commands end within milliseconds; long ones are
		 * polled every 100 ms at most. */
		usleep(delay);
		if (delay < 100000)
			delay = delay * 3 / 2 + 1000;
	}
}

int
guest_read_log(struct vm_host *h, const char *dom, const char *path, long long offset, size_t max,
    long long known_size, char **data, size_t *len, long long *total, struct err *e)
{
	json_t *r;
	long long handle, size = known_size;
	unsigned char *buf = NULL;
	int eof;

	*data = NULL;
	*len = 0;
	*total = 0;
	if (size >= 0)
		goto have_size;
	/* The logs are root's in a root-owned directory: reading them as
	 * root cannot be redirected by the command. */
	r = agent_call(h, dom, "guest-file-open",
	    json_pack("{s:s, s:s}", "path", path, "mode", "r"), 10, e);
	if (r == NULL)
		return -1;
	handle = json_integer_value(r);
	json_decref(r);
	r = agent_call(h, dom, "guest-file-seek",
	    json_pack("{s:I, s:I, s:i}", "handle", (json_int_t)handle, "offset", 0, "whence", 2),
	    10, e);
	size = r ? json_integer_value(json_object_get(r, "position")) : -1;
	json_decref(r);
	r = agent_call(h, dom, "guest-file-close", json_pack("{s:I}", "handle", (json_int_t)handle),
	    10, e);
	json_decref(r);
	if (size < 0)
		return -1;
have_size:
	*total = size;
	if (offset < 0 || offset > size)
		offset = size;
	if (size == offset || max == 0) {
		*data = calloc(1, 1);
		return *data ? 0 : -1;
	}
	if (agent_file_read(h, dom, path, offset,
		(size_t)(size - offset) < max ? (size_t)(size - offset) : max, &buf, len, &eof,
		e) < 0)
		return -1;
	*data = (char *)buf;
	return 0;
}

/* Runs the helper with captured output; short operations only. */
static int
helper_call(struct vm_host *h, const char *dom, const char *const *argv,
    struct agent_exec_status *st, struct err *e)
{
	struct agent_exec x = {
		.path = GUEST_HELPER,
		.argv = argv,
		.env = base_env,
		.capture = 1,
	};

	return agent_run(h, dom, &x, GUEST_SHORT_OP_MS, st, e);
}

int
guest_put_file(struct vm_host *h, const char *dom, const char *path, const unsigned char *data,
    size_t len, unsigned mode, int make_parents, struct err *e)
{
	char stage[128], rnd[33], modes[8];
	struct agent_exec_status st;
	int rc;

	if (key_random_hex(rnd, sizeof(rnd), 16) < 0) {
		err_set(e, ERR_INTERNAL, "random generator failed");
		return -1;
	}
	/* Root writes the bytes to its own staging file; the helper opens
	 * and unlinks it as root, then writes the target as the user. */
	snprintf(stage, sizeof(stage), "%s/%s", GUEST_STAGE_DIR, rnd);
	if (agent_file_write(h, dom, stage, data, len, e) < 0)
		return -1;
	snprintf(modes, sizeof(modes), "%04o", mode & 07777);
	const char *argv[] = { "put", stage, path, modes, make_parents ? "1" : "0", NULL };
	if (helper_call(h, dom, argv, &st, e) < 0)
		return -1;
	rc = st.exit_code == 0 ? 0 : -1;
	if (rc < 0)
		helper_error(&st, path, st.exit_code == 1 ? ERR_INVALID : ERR_INTERNAL, e);
	agent_exec_status_clear(&st);
	return rc;
}

int
guest_get_file(struct vm_host *h, const char *dom, const char *path, long long offset,
    size_t length, unsigned char **data, size_t *len, long long *total, struct err *e)
{
	char off[24], cnt[24];
	struct agent_exec_status st;
	const char *sz;

	*data = NULL;
	*len = 0;
	snprintf(off, sizeof(off), "%lld", offset);
	snprintf(cnt, sizeof(cnt), "%zu", length);
	const char *argv[] = { "get", path, off, cnt, NULL };
	if (helper_call(h, dom, argv, &st, e) < 0)
		return -1;
	if (st.exit_code != 0) {
		helper_error(&st, path, st.exit_code == 1 ? ERR_NOT_FOUND : ERR_INTERNAL, e);
		agent_exec_status_clear(&st);
		return -1;
	}
	sz = st.err ? strstr(st.err, "size=") : NULL;
	if (sz == NULL || guest_parse_number(sz + 5, "\n", total) < 0)
		*total = 0;
	*data = (unsigned char *)st.out;
	*len = st.out_len;
	if (*data == NULL)
		*data = calloc(1, 1);
	st.out = NULL;
	agent_exec_status_clear(&st);
	return *data ? 0 : -1;
}

json_t *
guest_list_files(struct vm_host *h, const char *dom, const char *path, int depth, int limit,
    int *truncated, struct err *e)
{
	char d[16], l[16];
	struct agent_exec_status st;
	json_t *arr;

	snprintf(d, sizeof(d), "%d", depth);
	snprintf(l, sizeof(l), "%d", limit);
	const char *argv[] = { "list", path, d, l, "2097152", NULL };
	if (helper_call(h, dom, argv, &st, e) < 0)
		return NULL;
	if (st.exit_code != 0) {
		helper_error(&st, path, st.exit_code == 1 ? ERR_NOT_FOUND : ERR_INTERNAL, e);
		agent_exec_status_clear(&st);
		return NULL;
	}
	*truncated = st.err && strstr(st.err, "truncated=1") != NULL;
	arr = guest_parse_list(st.out, st.out_len);
	agent_exec_status_clear(&st);
	if (arr == NULL)
		err_set(e, ERR_INTERNAL, "out of memory");
	return arr;
}

int
guest_kill(struct vm_host *h, const char *dom, long pid, int sig, struct err *e)
{
	char pids[24], sigs[16];
	struct agent_exec_status st;

	snprintf(pids, sizeof(pids), "%ld", pid);
	snprintf(sigs, sizeof(sigs), "-%d", sig);
	const char *argv[] = { sigs, pids, NULL };
	struct agent_exec x = { .path = "/bin/kill", .argv = argv, .capture = 1 };
	if (agent_run(h, dom, &x, 10000, &st, e) < 0)
		return -1;
	agent_exec_status_clear(&st);
	return 0;
}

int
guest_run_poll(struct vm_host *h, const char *dom, long pid, int *exit_code, struct err *e)
{
	struct agent_exec_status st;
	struct err local;
	int ended;

	err_clear(&local);
	if (agent_exec_status(h, dom, pid, &st, &local) < 0) {
		/* The agent forgot the process (it restarted): say so plainly. */
		if (strstr(local.msg, "Invalid parameter") || strstr(local.msg, "PID"))
			err_set(e, ERR_NOT_FOUND, "the guest agent no longer knows process %ld",
			    pid);
		else
			err_set(e, local.kind, "%s", local.msg);
		return -1;
	}
	ended = st.exited;
	if (ended)
		*exit_code = st.signal ? 128 + st.signal : st.exit_code;
	agent_exec_status_clear(&st);
	return ended;
}
