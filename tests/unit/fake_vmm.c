/* fake_vmm.c - the fake hypervisor and guest of fake_vmm.h. Each
 * __wrap_<name> stands in for the vmm/ function <name> the service calls;
 * the pure helpers (names, paths, base64) run the real code through
 * __real_<name>. The Makefile wraps every vmm/ function called in
 * service/, so a new call without a stand-in here fails to link instead of
 * reaching libvirt. */
#include "tests/unit/fake_vmm.h"

#include <pthread.h>
#include <stdatomic.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "base/clock.h"
#include "base/db.h"
#include "base/num.h"
#include "base/tar.h"
#include "base/err.h"
#include "vmm/guest.h"
#include "vmm/guest_listen.h"
#include "vmm/orch.h"

#define FAKE_QEMU_UID 64055
#define FAKE_PID_BASE 1000
#define FAKE_POLL_US 5000 /* guest_run_wait's poll period */
#define FAKE_KILL_SIGNAL 15
#define FAKE_TIMEOUT_EXIT 124       /* the guest helper's "timed out" */
#define FAKE_MAX_OUTPUT (16u << 20) /* bytes one fake command may print */
#define FAKE_MAX_SLEEP_S 86400

/* ---- state ---- */

struct fake_file {
	char path[FAKE_PATH_MAX];
	unsigned char *data; /* malloc'd; never NULL once set */
	size_t len;
	unsigned mode;
};

struct fake_cmd {
	long pid;
	long long end_ms; /* monotonic time it ends at */
	int exit_code;
	int signal;   /* set when it was killed */
	int reported; /* its end was reported: the agent forgot it */
	char out_path[256];
	char err_path[256];
};

struct fake_fwd {
	int guest_port;
	int host_port;
};

struct fake_vm {
	char id[FAKE_ID_MAX];
	size_t host; /* index into fk.hosts */
	int live;
	int vcpus;
	int memory_mib;
	enum vm_net net;
	int boots;
	int destroys;
	int paused; /* orch_detach: out of reach, not yet destroyed */
	int saved;  /* orch_pause: its memory on disk, no domain */
	struct fake_file files[FAKE_MAX_FILES];
	size_t nfiles;
	struct fake_cmd cmds[FAKE_MAX_CMDS];
	size_t ncmds;
	struct fake_fwd fwds[FAKE_MAX_FWDS];
	size_t nfwds;
	char console[FAKE_CONSOLE_MAX]; /* "": the default power-down line */
	char agent_fault[256];          /* "": its guest agent behaves */
	int oom_killed;                 /* stopped by its memory limit on the host */
};

/* A snapshot: the VM it was taken from as it was then. */
#define FAKE_MAX_SNAPS 16
struct fake_snap {
	char id[FAKE_ID_MAX];
	struct fake_vm vm; /* a copy, files included */
};

/* A host is its URI; the service holds a pointer to one as a vm_host. */
struct fake_host {
	char uri[512];
	long long memory_mib; /* 0: the default */
	int vcpus;
	int unreachable;
};

static struct {
	pthread_mutex_t lock;
	struct fake_host hosts[FAKE_MAX_HOSTS];
	size_t nhosts;
	struct fake_vm vms[FAKE_MAX_VMS];
	size_t nvms;
	struct fake_counts counts;
	long next_pid;
	int next_port;
	int boot_failures_left;
	int detach_failures_left;
	int pause_failures_left;
	int resume_failures_left;
	int snapshot_failures_left;
	struct fake_snap snaps[FAKE_MAX_SNAPS];
	size_t nsnaps;
	int migrate_failures; /* orch_migrate calls still to fail */
	int netguard_ok;
	int listen_state; /* what guest_listen_probe answers; -1 fails */
	int ready;
	int no_sink; /* guest_run_wait does not call the sink */
	fake_forward_fn on_forward;
	void *on_forward_ctx;
} fk = { .lock = PTHREAD_MUTEX_INITIALIZER,
	.next_pid = FAKE_PID_BASE,
	.next_port = FAKE_FIRST_HOST_PORT,
	.netguard_ok = 1,
	.ready = 1 };

/* What orch_new hands out: the fake has one orchestrator at a time. */
static int fake_orch_token;

/* The real code of the pure helpers. */
int __real_orch_domain_name(const char *id, char *out, size_t n);
void __real_orch_ids_free(char **ids, size_t n);
int __real_guest_abs_path(const char *path, char *out, size_t n);
int __real_guest_log_paths(const char *cmd_id, char *out, size_t on, char *err, size_t en);
const char *__real_vm_net_name(enum vm_net n);
int __real_orch_uri_private(const char *uri);
int __real_orch_uri_this_machine(const char *uri);
int __real_orch_uri_net_checked_here(const char *uri);

static void
lock(void)
{
	pthread_mutex_lock(&fk.lock);
}

static void
unlock(void)
{
	pthread_mutex_unlock(&fk.lock);
}

static void
vm_clear(struct fake_vm *vm)
{
	for (size_t i = 0; i < vm->nfiles; i++)
		free(vm->files[i].data);
	memset(vm, 0, sizeof(*vm));
}

void
fake_vmm_reset(void)
{
	lock();
	for (size_t i = 0; i < fk.nvms; i++)
		vm_clear(&fk.vms[i]);
	fk.nvms = 0;
	memset(fk.hosts, 0, sizeof(fk.hosts));
	fk.nhosts = 0;
	memset(&fk.counts, 0, sizeof(fk.counts));
	fk.next_pid = FAKE_PID_BASE;
	fk.next_port = FAKE_FIRST_HOST_PORT;
	fk.boot_failures_left = 0;
	fk.detach_failures_left = 0;
	fk.pause_failures_left = 0;
	fk.resume_failures_left = 0;
	fk.snapshot_failures_left = 0;
	for (size_t i = 0; i < fk.nsnaps; i++)
		vm_clear(&fk.snaps[i].vm);
	fk.nsnaps = 0;
	fk.no_sink = 0;
	fk.netguard_ok = 1;
	fk.listen_state = GUEST_LISTEN_NONE;
	fk.ready = 1;
	fk.on_forward = NULL;
	fk.on_forward_ctx = NULL;
	unlock();
}

struct fake_counts
fake_vmm_counts(void)
{
	struct fake_counts c;

	lock();
	c = fk.counts;
	unlock();
	return c;
}

void
fake_vmm_fail_boots(int n)
{
	lock();
	fk.boot_failures_left = n;
	unlock();
}

void
fake_vmm_fail_detaches(int n)
{
	lock();
	fk.detach_failures_left = n;
	unlock();
}

void
fake_vmm_fail_pauses(int n)
{
	lock();
	fk.pause_failures_left = n;
	unlock();
}

void
fake_vmm_fail_resumes(int n)
{
	lock();
	fk.resume_failures_left = n;
	unlock();
}

void
fake_vmm_set_sink(int on)
{
	lock();
	fk.no_sink = !on;
	unlock();
}

void
fake_vmm_set_netguard(int ok)
{
	lock();
	fk.netguard_ok = ok;
	unlock();
}

void
fake_vmm_set_listen(int state)
{
	lock();
	fk.listen_state = state;
	unlock();
}

void
fake_vmm_on_forward(fake_forward_fn fn, void *ctx)
{
	lock();
	fk.on_forward = fn;
	fk.on_forward_ctx = ctx;
	unlock();
}

void
fake_vmm_set_ready(int ready)
{
	lock();
	fk.ready = ready;
	unlock();
}

/* ---- lookups (lock held) ---- */

static int
host_index(const char *uri, size_t *out)
{
	for (size_t i = 0; uri && i < fk.nhosts; i++) {
		if (strcmp(fk.hosts[i].uri, uri) == 0) {
			*out = i;
			return 0;
		}
	}
	return -1;
}

static int
host_of(struct vm_host *h, size_t *out)
{
	const struct fake_host *fh = (const struct fake_host *)(void *)h;

	if (fh < fk.hosts || fh >= fk.hosts + fk.nhosts)
		return -1;
	*out = (size_t)(fh - fk.hosts);
	return 0;
}

static struct fake_vm *
vm_find(const char *id)
{
	/* The newest slot wins: an id is never booted twice by the service. */
	for (size_t i = fk.nvms; i > 0; i--)
		if (strcmp(fk.vms[i - 1].id, id) == 0)
			return &fk.vms[i - 1];
	return NULL;
}

static const char *
id_of_domain(const char *dom)
{
	size_t n = strlen(ORCH_DOMAIN_PREFIX);

	return strncmp(dom, ORCH_DOMAIN_PREFIX, n) == 0 ? dom + n : NULL;
}

/* The running VM a guest call names, or NULL with the error libvirt gives
 * for a domain that is not there. */
static struct fake_vm *
vm_of(struct vm_host *h, const char *dom, struct err *e)
{
	const char *id = id_of_domain(dom);
	struct fake_vm *vm = id ? vm_find(id) : NULL;
	size_t host;

	if (host_of(h, &host) < 0) {
		err_set(e, ERR_INTERNAL, "fake: not a host of this orchestrator");
		return NULL;
	}
	if (vm == NULL || !vm->live || vm->host != host) {
		err_set(e, ERR_UNAVAILABLE, "Domain not found: no domain with matching name '%s'",
		    dom);
		return NULL;
	}
	if (vm->agent_fault[0] != '\0') {
		/* What vm_agent_get says once the connection failed. */
		err_set(e, ERR_UNAVAILABLE, "the guest agent broke the protocol: %s",
		    vm->agent_fault);
		return NULL;
	}
	return vm;
}

static struct fake_file *
file_find(struct fake_vm *vm, const char *path)
{
	for (size_t i = 0; i < vm->nfiles; i++)
		if (strcmp(vm->files[i].path, path) == 0)
			return &vm->files[i];
	return NULL;
}

/* A directory exists when it is one the image has or holds a file. */
static int
dir_exists(struct fake_vm *vm, const char *dir)
{
	static const char *const image_dirs[] = { "/", "/tmp", GUEST_HOME, GUEST_CMD_DIR };
	size_t n = strlen(dir);

	for (size_t i = 0; i < sizeof(image_dirs) / sizeof(image_dirs[0]); i++)
		if (strcmp(image_dirs[i], dir) == 0)
			return 1;
	for (size_t i = 0; i < vm->nfiles; i++)
		if (strncmp(vm->files[i].path, dir, n) == 0 && vm->files[i].path[n] == '/')
			return 1;
	return 0;
}

static int
file_set(struct fake_vm *vm, const char *path, const void *data, size_t len, unsigned mode,
    struct err *e)
{
	struct fake_file *f = file_find(vm, path);
	unsigned char *copy;

	if (strlen(path) >= FAKE_PATH_MAX) {
		err_set(e, ERR_INVALID, "%s: File name too long", path);
		return -1;
	}
	if (f == NULL && vm->nfiles >= FAKE_MAX_FILES) {
		err_set(e, ERR_LIMIT, "%s: No space left on device (fake: %d files)", path,
		    FAKE_MAX_FILES);
		return -1;
	}
	copy = malloc(len ? len : 1);
	if (copy == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return -1;
	}
	if (len)
		memcpy(copy, data, len);
	if (f == NULL) {
		f = &vm->files[vm->nfiles++];
		snprintf(f->path, sizeof(f->path), "%s", path);
	} else {
		free(f->data);
	}
	f->data = copy;
	f->len = len;
	f->mode = mode & 07777;
	return 0;
}

static struct fake_cmd *
cmd_find(struct fake_vm *vm, long pid, struct err *e)
{
	for (size_t i = 0; i < vm->ncmds; i++)
		if (vm->cmds[i].pid == pid && !vm->cmds[i].reported)
			return &vm->cmds[i];
	/* The agent forgets a process once it reported its end. */
	err_set(e, ERR_NOT_FOUND, "the guest agent no longer knows process %ld", pid);
	return NULL;
}

/* ---- the command table ---- */

struct fake_outcome {
	int exit_code;
	long long duration_ms;
	unsigned char *out; /* malloc'd or NULL */
	size_t out_len;
	unsigned char *err;
	size_t err_len;
};

static int
set_bytes(unsigned char **dst, size_t *dst_len, const void *src, size_t len)
{
	free(*dst);
	*dst = malloc(len ? len : 1);
	if (*dst == NULL)
		return -1;
	if (len)
		memcpy(*dst, src, len);
	*dst_len = len;
	return 0;
}

/* a then b, whatever their length: a command may be as long as
 * run_command allows. */
static int
set_text(unsigned char **dst, size_t *dst_len, const char *a, const char *b)
{
	size_t na = strlen(a), nb = strlen(b);
	unsigned char *buf = malloc(na + nb + 1);

	if (buf == NULL)
		return -1;
	memcpy(buf, a, na);
	memcpy(buf + na, b, nb);
	free(*dst);
	*dst = buf;
	*dst_len = na + nb;
	return 0;
}

static int
append_text(unsigned char **dst, size_t *dst_len, const char *text)
{
	size_t n = strlen(text);
	unsigned char *b = realloc(*dst, *dst_len + n + 1);

	if (b == NULL)
		return -1;
	memcpy(b + *dst_len, text, n);
	*dst = b;
	*dst_len += n;
	return 0;
}

static int
arg_count(const char *arg, long long max, long long *out)
{
	return num_parse_ll(arg, out) < 0 || *out < 0 || *out > max ? -1 : 0;
}

typedef int (*fake_cmd_fn)(struct fake_vm *vm, const struct guest_run *r, const char *arg,
    struct fake_outcome *oc);

static int
cmd_true(struct fake_vm *vm, const struct guest_run *r, const char *arg, struct fake_outcome *oc)
{
	(void)vm, (void)r, (void)arg;
	oc->exit_code = 0;
	return 0;
}

static int
cmd_false(struct fake_vm *vm, const struct guest_run *r, const char *arg, struct fake_outcome *oc)
{
	(void)vm, (void)r, (void)arg;
	oc->exit_code = 1;
	return 0;
}

static int
cmd_exit(struct fake_vm *vm, const struct guest_run *r, const char *arg, struct fake_outcome *oc)
{
	long long code;

	(void)vm, (void)r;
	if (arg_count(arg, 255, &code) < 0)
		return -1;
	oc->exit_code = (int)code;
	return 0;
}

/* "echo X" to stdout, "echo X >&2" to stderr. */
static int
cmd_echo(struct fake_vm *vm, const struct guest_run *r, const char *arg, struct fake_outcome *oc)
{
	static const char to_err[] = " >&2";
	size_t n = strlen(arg), k = strlen(to_err);
	char text[FAKE_PATH_MAX];

	(void)vm, (void)r;
	if (n >= sizeof(text))
		return -1;
	if (n >= k && strcmp(arg + n - k, to_err) == 0) {
		memcpy(text, arg, n - k);
		text[n - k] = '\0';
		return set_text(&oc->err, &oc->err_len, text, "\n");
	}
	return set_text(&oc->out, &oc->out_len, arg, "\n");
}

static int
cmd_sleep(struct fake_vm *vm, const struct guest_run *r, const char *arg, struct fake_outcome *oc)
{
	long long s;

	(void)vm, (void)r;
	if (arg_count(arg, FAKE_MAX_SLEEP_S, &s) < 0)
		return -1;
	oc->duration_ms = s * 1000;
	return 0;
}

/* "yes | head -c N": N bytes of "y\n". */
static int
cmd_yes(struct fake_vm *vm, const struct guest_run *r, const char *arg, struct fake_outcome *oc)
{
	long long n;

	(void)vm, (void)r;
	if (arg_count(arg, FAKE_MAX_OUTPUT, &n) < 0)
		return -1;
	free(oc->out);
	oc->out = malloc(n ? (size_t)n : 1);
	if (oc->out == NULL)
		return -1;
	for (long long i = 0; i < n; i++)
		oc->out[i] = (unsigned char)(i % 2 == 0 ? 'y' : '\n');
	oc->out_len = (size_t)n;
	return 0;
}

static int
cmd_cat_stdin(struct fake_vm *vm, const struct guest_run *r, const char *arg,
    struct fake_outcome *oc)
{
	(void)vm, (void)arg;
	return set_bytes(&oc->out, &oc->out_len, r->stdin_data ? r->stdin_data : "",
	    r->stdin_data ? r->stdin_len : 0);
}

static int
cmd_cat_file(struct fake_vm *vm, const struct guest_run *r, const char *arg,
    struct fake_outcome *oc)
{
	char path[FAKE_PATH_MAX];
	struct fake_file *f;

	if (arg[0] == '/')
		snprintf(path, sizeof(path), "%s", arg);
	else
		snprintf(path, sizeof(path), "%s/%s", r->cwd ? r->cwd : GUEST_HOME, arg);
	f = file_find(vm, path);
	if (f == NULL) {
		oc->exit_code = 1;
		return set_text(&oc->err, &oc->err_len, arg, ": No such file or directory\n");
	}
	return set_bytes(&oc->out, &oc->out_len, f->data, f->len);
}

static int
cmd_pwd(struct fake_vm *vm, const struct guest_run *r, const char *arg, struct fake_outcome *oc)
{
	(void)vm, (void)arg;
	return set_text(&oc->out, &oc->out_len, r->cwd ? r->cwd : GUEST_HOME, "\n");
}

static int
cmd_printenv(struct fake_vm *vm, const struct guest_run *r, const char *arg,
    struct fake_outcome *oc)
{
	const char *v = json_string_value(json_object_get(r->env, arg));

	(void)vm;
	if (v == NULL) {
		oc->exit_code = 1;
		return 0;
	}
	return set_text(&oc->out, &oc->out_len, v, "\n");
}

/* A command is its whole text ("exact") or a prefix and one argument. */
static const struct {
	const char *text;
	int exact;
	fake_cmd_fn fn;
} commands[] = {
	{ "true", 1, cmd_true },
	{ "false", 1, cmd_false },
	{ "exit ", 0, cmd_exit },
	{ "echo ", 0, cmd_echo },
	{ "sleep ", 0, cmd_sleep },
	{ "yes | head -c ", 0, cmd_yes },
	{ "cat", 1, cmd_cat_stdin },
	{ "cat ", 0, cmd_cat_file },
	{ "pwd", 1, cmd_pwd },
	{ "printenv ", 0, cmd_printenv },
};

/* Decides what a command prints, how it ends and how long it takes. -1
 * only when memory ran out. */
static int
interpret(struct fake_vm *vm, const struct guest_run *r, struct fake_outcome *oc)
{
	const char *cmd = r->command;

	memset(oc, 0, sizeof(*oc));
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		size_t n = strlen(commands[i].text);
		int hit = commands[i].exact ? strcmp(cmd, commands[i].text) == 0 :
					      strncmp(cmd, commands[i].text, n) == 0;

		if (!hit)
			continue;
		if (commands[i].fn(vm, r, commands[i].exact ? "" : cmd + n, oc) < 0) {
			oc->exit_code = 2;
			if (set_text(&oc->err, &oc->err_len, cmd, ": bad argument (fake)\n") < 0)
				return -1;
		}
		goto timeout;
	}
	oc->exit_code = 127;
	if (set_text(&oc->err, &oc->err_len, "bash: line 1: ", cmd) < 0 ||
	    append_text(&oc->err, &oc->err_len, ": command not found\n") < 0)
		return -1;
timeout:
	/* The guest helper kills a command at its timeout and says 124. */
	if (r->timeout_s > 0 && oc->duration_ms > (long long)r->timeout_s * 1000) {
		oc->duration_ms = (long long)r->timeout_s * 1000;
		oc->exit_code = FAKE_TIMEOUT_EXIT;
	}
	return 0;
}

/* ---- guest ---- */

int
__wrap_guest_run_start(struct vm_host *h, const char *dom, const struct guest_run *r, long *pid,
    struct err *e)
{
	struct fake_outcome oc;
	struct fake_vm *vm;
	struct fake_cmd *c;
	int rc = -1;

	memset(&oc, 0, sizeof(oc));
	lock();
	if ((vm = vm_of(h, dom, e)) == NULL)
		goto out;
	if (vm->ncmds >= FAKE_MAX_CMDS) {
		err_set(e, ERR_LIMIT, "fake: more than %d commands in one VM", FAKE_MAX_CMDS);
		goto out;
	}
	if (interpret(vm, r, &oc) < 0) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	c = &vm->cmds[vm->ncmds];
	memset(c, 0, sizeof(*c));
	__real_guest_log_paths(r->cmd_id, c->out_path, sizeof(c->out_path), c->err_path,
	    sizeof(c->err_path));
	/* The logs are complete from the start: a fake command prints at once. */
	if (file_set(vm, c->out_path, oc.out, oc.out_len, 0600, e) < 0 ||
	    file_set(vm, c->err_path, oc.err, oc.err_len, 0600, e) < 0)
		goto out;
	c->pid = fk.next_pid++;
	c->exit_code = oc.exit_code;
	c->end_ms = clock_ms() + oc.duration_ms;
	vm->ncmds++;
	*pid = c->pid;
	rc = 0;
out:
	unlock();
	free(oc.out);
	free(oc.err);
	return rc;
}

static long long
file_len(struct fake_vm *vm, const char *path)
{
	struct fake_file *f = file_find(vm, path);

	return f ? (long long)f->len : -1;
}

/* Reports a command's end once, as the guest agent does. 1 ended, 0
 * still running, -1 gone or unknown. */
static int
cmd_poll(struct vm_host *h, const char *dom, long pid, struct fake_cmd *out, struct err *e)
{
	struct fake_vm *vm;
	struct fake_cmd *c;
	int rc = -1;

	lock();
	if ((vm = vm_of(h, dom, e)) == NULL || (c = cmd_find(vm, pid, e)) == NULL)
		goto out;
	rc = 0;
	if (clock_ms() >= c->end_ms) {
		c->reported = 1;
		*out = *c;
		rc = 1;
	}
out:
	unlock();
	return rc;
}

int
__wrap_guest_run_wait(struct vm_host *h, const char *dom, long pid, long long deadline_ms,
    const atomic_int *cancel, const struct guest_sink *sink, int *exit_code, long long *out_size,
    long long *err_size, struct err *e)
{
	struct fake_cmd c;

	*out_size = *err_size = -1;
	for (;;) {
		int rc = cmd_poll(h, dom, pid, &c, e);

		if (rc < 0)
			return -1;
		if (rc == 1) {
			struct fake_vm *vm;

			*exit_code = c.signal ? 128 + c.signal : c.exit_code;
			lock();
			vm = vm_of(h, dom, e);
			if (vm) {
				*out_size = file_len(vm, c.out_path);
				*err_size = file_len(vm, c.err_path);
			}
			/* The whole output at the end, as one chunk per stream. */
			if (vm && sink && sink->output && !fk.no_sink) {
				struct fake_file *fo = file_find(vm, c.out_path);
				struct fake_file *fe = file_find(vm, c.err_path);

				if (fo && fo->len)
					sink->output(sink->ctx, 1, (const char *)fo->data, fo->len);
				if (fe && fe->len)
					sink->output(sink->ctx, 2, (const char *)fe->data, fe->len);
			}
			unlock();
			return 1;
		}
		if (clock_ms() >= deadline_ms || (cancel && atomic_load(cancel)))
			return 0;
		usleep(FAKE_POLL_US);
	}
}

int
__wrap_guest_listen_probe(struct vm_host *h, const char *dom, int port, struct err *e)
{
	int rc = -1;

	(void)port;
	lock();
	if (vm_of(h, dom, e) == NULL)
		goto out;
	rc = fk.listen_state;
	if (rc < 0)
		err_set(e, ERR_UNAVAILABLE, "the guest agent did not answer");
out:
	unlock();
	return rc;
}

int
__wrap_guest_read_log(struct vm_host *h, const char *dom, const char *path, long long offset,
    size_t max, long long known_size, char **data, size_t *len, long long *total, struct err *e)
{
	struct fake_vm *vm;
	struct fake_file *f;
	size_t n;
	int rc = -1;

	(void)known_size;
	*data = NULL;
	*len = 0;
	*total = 0;
	lock();
	if ((vm = vm_of(h, dom, e)) == NULL)
		goto out;
	if ((f = file_find(vm, path)) == NULL) {
		err_set(e, ERR_INTERNAL, "guest-file-open: %s: No such file or directory", path);
		goto out;
	}
	if (offset < 0 || (size_t)offset > f->len)
		offset = (long long)f->len;
	n = f->len - (size_t)offset < max ? f->len - (size_t)offset : max;
	*data = malloc(n + 1);
	if (*data == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	memcpy(*data, f->data + offset, n);
	(*data)[n] = '\0';
	*len = n;
	*total = (long long)f->len;
	rc = 0;
out:
	unlock();
	return rc;
}

static void
parent_of(const char *path, char *out, size_t n)
{
	const char *slash = strrchr(path, '/');
	size_t k = slash && slash != path ? (size_t)(slash - path) : 1;

	snprintf(out, n, "%.*s", (int)k, path);
}

int
__wrap_guest_put_file(struct vm_host *h, const char *dom, const char *path,
    const unsigned char *data, size_t len, unsigned mode, int make_parents, struct err *e)
{
	char parent[FAKE_PATH_MAX];
	struct fake_vm *vm;
	int rc = -1;

	lock();
	if ((vm = vm_of(h, dom, e)) == NULL)
		goto out;
	parent_of(path, parent, sizeof(parent));
	if (path[0] != '/' || (!make_parents && !dir_exists(vm, parent))) {
		/* What the helper says; the real guest_put_file maps its exit 1
		 * to ERR_INVALID. */
		err_set(e, ERR_INVALID, "%s: No such file or directory", path);
		goto out;
	}
	rc = file_set(vm, path, data, len, mode, e);
out:
	unlock();
	return rc;
}

int
__wrap_guest_get_file(struct vm_host *h, const char *dom, const char *path, long long offset,
    size_t length, unsigned char **data, size_t *len, long long *total, struct err *e)
{
	struct fake_vm *vm;
	struct fake_file *f;
	size_t from, n;
	int rc = -1;

	*data = NULL;
	*len = 0;
	lock();
	if ((vm = vm_of(h, dom, e)) == NULL)
		goto out;
	if ((f = file_find(vm, path)) == NULL) {
		err_set(e, ERR_NOT_FOUND, "%s: No such file or directory", path);
		goto out;
	}
	from = offset < 0 ? 0 : (size_t)offset < f->len ? (size_t)offset : f->len;
	n = f->len - from < length ? f->len - from : length;
	*data = malloc(n ? n : 1);
	if (*data == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	if (n)
		memcpy(*data, f->data + from, n);
	*len = n;
	*total = (long long)f->len;
	rc = 0;
out:
	unlock();
	return rc;
}

/* The streamed forms, over the buffered fakes (small files only). */
int
__wrap_guest_put_stream(struct vm_host *h, const char *dom, const char *path, unsigned mode,
    int make_parents, guest_read_fn read, void *ctx, uint64_t max_bytes, uint64_t *written,
    struct err *e)
{
	unsigned char *buf = malloc(GUEST_MAX_FILE);
	size_t len = 0;
	ssize_t n = 1;
	int rc = -1;

	(void)max_bytes;
	*written = 0;
	if (buf == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return -1;
	}
	while (n > 0 && len < GUEST_MAX_FILE)
		if ((n = read(ctx, buf + len, GUEST_MAX_FILE - len, e)) > 0)
			len += (size_t)n;
	if (n == 0 && __wrap_guest_put_file(h, dom, path, buf, len, mode, make_parents, e) == 0) {
		*written = len;
		rc = 0;
	}
	free(buf);
	return rc;
}

int
__wrap_guest_file_size(struct vm_host *h, const char *dom, const char *path, long long *size,
    struct err *e)
{
	unsigned char *data = NULL;
	size_t len;

	if (__wrap_guest_get_file(h, dom, path, 0, 0, &data, &len, size, e) < 0)
		return -1;
	free(data);
	return 0;
}

int
__wrap_guest_get_stream(struct vm_host *h, const char *dom, const char *path, long long offset,
    long long length, guest_write_fn write, void *ctx, struct err *e)
{
	unsigned char *data = NULL;
	size_t len;
	long long total;
	int rc;

	if (__wrap_guest_get_file(h, dom, path, offset, (size_t)length, &data, &len, &total, e) < 0)
		return -1;
	rc = write(ctx, data, len, e);
	free(data);
	return rc;
}

/* ---- trees: the checked archive (ustar names, pax `path` records) ---- */

#define FAKE_TREE_MAX (8u << 20) /* bytes of archive one fake unpack holds */

static unsigned long long
tar_num(const unsigned char *p, size_t n)
{
	unsigned long long v = 0;

	for (size_t i = 0; i < n && p[i] >= '0' && p[i] <= '7'; i++)
		v = v * 8 + (unsigned long long)(p[i] - '0');
	return v;
}

/* Like the real one: nothing changes unless `read` ended cleanly; then
 * every regular member is a file under dir. */
int
__wrap_guest_tree_put(struct vm_host *h, const char *dom, const char *dir, guest_read_fn read,
    void *ctx, uint64_t max_bytes, struct err *e)
{
	unsigned char *buf = malloc(FAKE_TREE_MAX);
	size_t len = 0, off = 0;
	char name[FAKE_PATH_MAX] = "", path[FAKE_PATH_MAX * 2];
	ssize_t n = 1;
	int rc = -1;

	(void)max_bytes;
	if (buf == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return -1;
	}
	while (n > 0 && len < FAKE_TREE_MAX)
		if ((n = read(ctx, buf + len, FAKE_TREE_MAX - len, e)) > 0)
			len += (size_t)n;
	if (n != 0)
		goto out;
	while (off + TAR_BLOCK <= len && buf[off] != 0) {
		const unsigned char *hd = buf + off;
		unsigned long long size = tar_num(hd + 124, 12);
		const unsigned char *data = hd + TAR_BLOCK;

		off += TAR_BLOCK + ((size + TAR_BLOCK - 1) / TAR_BLOCK) * TAR_BLOCK;
		if (off > len) {
			err_set(e, ERR_INTERNAL, "fake tree: archive cut short");
			goto out;
		}
		if (hd[156] == 'x') {
			const char *p = memmem(data, size, " path=", 6);
			const char *nl = p ?
			    memchr(p, '\n', size - (size_t)(p - (const char *)data)) :
			    NULL;
			if (p && nl)
				snprintf(name, sizeof(name), "%.*s", (int)(nl - p - 6), p + 6);
			continue;
		}
		if (name[0] == '\0')
			snprintf(name, sizeof(name), "%.100s", (const char *)hd);
		if (hd[156] == '0' &&
		    (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path) ||
			__wrap_guest_put_file(h, dom, path, data, size,
			    (unsigned)tar_num(hd + 100, 8), 1, e) < 0))
			goto out;
		name[0] = '\0';
	}
	rc = 0;
out:
	free(buf);
	return rc;
}

/* A file name component matching one of the patterns (fnmatch). */
static int
excluded(const char *rel, const char *const *exclude, size_t n)
{
	for (const char *c = rel; c; c = strchr(c, '/') ? strchr(c, '/') + 1 : NULL) {
		char part[256];
		size_t len = strcspn(c, "/");

		if (len >= sizeof(part))
			continue;
		memcpy(part, c, len);
		part[len] = '\0';
		for (size_t i = 0; i < n; i++)
			if (fnmatch(exclude[i], part, 0) == 0)
				return 1;
	}
	return 0;
}

/* The files under dir but the excluded ones, and one FIFO named "fifo"
 * (a download leaves it out). */
int
__wrap_guest_tree_get(struct vm_host *h, const char *dom, const char *dir,
    const char *const *exclude, size_t n_exclude, guest_write_fn write, void *ctx,
    uint64_t max_bytes, struct err *e)
{
	static const char zeros[TAR_BLOCK];
	char hdr[TAR_MAX_HEADER];
	struct fake_vm *vm;
	size_t n = strlen(dir);
	int rc = -1;

	(void)max_bytes;
	lock();
	if ((vm = vm_of(h, dom, e)) == NULL)
		goto out;
	for (size_t i = 0; i < vm->nfiles; i++) {
		struct fake_file *f = &vm->files[i];
		ssize_t k;

		if (strncmp(f->path, dir, n) != 0 || f->path[n] != '/' ||
		    excluded(f->path + n + 1, exclude, n_exclude))
			continue;
		if ((k = tar_header(hdr, sizeof(hdr), f->path + n + 1, '0', f->mode, f->len, 0,
			 e)) < 0 ||
		    write(ctx, hdr, (size_t)k, e) < 0 || write(ctx, f->data, f->len, e) < 0 ||
		    write(ctx, zeros, tar_pad(f->len), e) < 0)
			goto out;
	}
	if (tar_header(hdr, sizeof(hdr), "fifo", '0', 0644, 0, 0, e) < 0)
		goto out;
	hdr[156] = '6';
	{
		/* The checksum again, for the type changed. */
		unsigned sum = 0;
		memset(hdr + 148, ' ', 8);
		for (size_t i = 0; i < TAR_BLOCK; i++)
			sum += (unsigned char)hdr[i];
		snprintf(hdr + 148, 8, "%06o", sum);
	}
	rc = write(ctx, hdr, TAR_BLOCK, e);
out:
	unlock();
	return rc;
}

/* Files only (directories are implied by them), at most `depth` levels. */
json_t *
__wrap_guest_list_files(struct vm_host *h, const char *dom, const char *path, int depth, int limit,
    int *truncated, struct err *e)
{
	struct fake_vm *vm;
	json_t *arr = NULL;
	size_t n = strlen(path);

	*truncated = 0;
	lock();
	if ((vm = vm_of(h, dom, e)) == NULL)
		goto out;
	if (!dir_exists(vm, path)) {
		err_set(e, ERR_NOT_FOUND, "%s: No such file or directory", path);
		goto out;
	}
	arr = json_array();
	for (size_t i = 0; arr && i < vm->nfiles; i++) {
		const struct fake_file *f = &vm->files[i];
		const char *rel = f->path + n;
		char mode[8];
		int levels = 1;

		if (strncmp(f->path, path, n) != 0 || (n > 1 && *rel++ != '/'))
			continue;
		for (const char *p = rel; *p; p++)
			levels += *p == '/';
		if (levels > depth)
			continue;
		if (json_array_size(arr) >= (size_t)limit) {
			*truncated = 1;
			break;
		}
		snprintf(mode, sizeof(mode), "%04o", f->mode);
		json_array_append_new(arr,
		    json_pack("{s:s, s:s, s:I, s:s, s:s}", "path", f->path, "type", "file", "size",
			(json_int_t)f->len, "mode", mode, "mtime", "1970-01-01T00:00:00Z"));
	}
	if (arr == NULL)
		err_set(e, ERR_INTERNAL, "out of memory");
out:
	unlock();
	return arr;
}

int
__wrap_guest_abs_path(const char *path, char *out, size_t n)
{
	return __real_guest_abs_path(path, out, n);
}

int
__wrap_guest_log_paths(const char *cmd_id, char *out, size_t on, char *err, size_t en)
{
	return __real_guest_log_paths(cmd_id, out, on, err, en);
}

int
__wrap_guest_run_poll(struct vm_host *h, const char *dom, const char *cmd_id, long pid,
    int *exit_code, struct err *e)
{
	struct fake_cmd c;

	(void)cmd_id;
	int rc = cmd_poll(h, dom, pid, &c, e);

	if (rc == 1)
		*exit_code = c.signal ? 128 + c.signal : c.exit_code;
	return rc;
}

void
__wrap_guest_run_release(struct vm_host *h, const char *dom, long pid)
{
	(void)h;
	(void)dom;
	(void)pid;
}

/* SIGTERM to a command that still runs ends it now. */
int
__wrap_guest_kill(struct vm_host *h, const char *dom, long pid, int sig, struct err *e)
{
	struct fake_vm *vm;
	int rc = -1;

	lock();
	if ((vm = vm_of(h, dom, e)) == NULL)
		goto out;
	for (size_t i = 0; i < vm->ncmds; i++) {
		struct fake_cmd *c = &vm->cmds[i];
		if (c->pid == pid && !c->reported && clock_ms() < c->end_ms) {
			c->end_ms = clock_ms();
			c->signal = sig ? sig : FAKE_KILL_SIGNAL;
			fk.counts.kills++;
		}
	}
	rc = 0;
out:
	unlock();
	return rc;
}

const char *
__wrap_vm_net_name(enum vm_net n)
{
	return __real_vm_net_name(n);
}

/* ---- orchestrator ---- */

struct orch *
__wrap_orch_new(const struct orch_config *cfg, struct err *e)
{
	const char *p = cfg->libvirt_uri ? cfg->libvirt_uri : "";

	lock();
	memset(fk.hosts, 0, sizeof(fk.hosts));
	fk.nhosts = 0;
	while (*p) {
		size_t len = strcspn(p, ",");

		if (fk.nhosts >= FAKE_MAX_HOSTS || len >= sizeof(fk.hosts[0].uri)) {
			unlock();
			err_set(e, ERR_INVALID, "fake: at most %d hosts of %zu bytes",
			    FAKE_MAX_HOSTS, sizeof(fk.hosts[0].uri) - 1);
			return NULL;
		}
		if (len > 0)
			snprintf(fk.hosts[fk.nhosts++].uri, sizeof(fk.hosts[0].uri), "%.*s",
			    (int)len, p);
		p += len;
		if (*p == ',')
			p++;
	}
	unlock();
	if (fk.nhosts == 0) {
		err_set(e, ERR_INVALID, "fake: AAS_LIBVIRT_URI names no host");
		return NULL;
	}
	return (struct orch *)(void *)&fake_orch_token;
}

void
__wrap_orch_free(struct orch *o)
{
	(void)o;
}

int
__wrap_orch_wait_ready(struct orch *o, int timeout_ms, struct err *e)
{
	int ready;

	(void)o, (void)timeout_ms;
	lock();
	ready = fk.ready;
	unlock();
	if (!ready)
		err_set(e, ERR_UNAVAILABLE, "no guest image in the image directory (fake)");
	return ready ? 0 : -1;
}

const char *
__wrap_orch_accel(struct orch *o)
{
	(void)o;
	return "kvm";
}

const char *
__wrap_orch_accel_reason(struct orch *o)
{
	(void)o;
	return "";
}

size_t
__wrap_orch_host_count(struct orch *o)
{
	size_t n;

	(void)o;
	lock();
	n = fk.nhosts;
	unlock();
	return n;
}

const char *
__wrap_orch_host_uri_at(struct orch *o, size_t i)
{
	(void)o;
	return i < fk.nhosts ? fk.hosts[i].uri : NULL;
}

struct vm_host *
__wrap_orch_host_by_uri(struct orch *o, const char *uri)
{
	size_t i;
	struct vm_host *h = NULL;

	(void)o;
	lock();
	if (host_index(uri, &i) == 0)
		h = (struct vm_host *)(void *)&fk.hosts[i];
	unlock();
	return h;
}

int
__wrap_orch_host_add(struct orch *o, const char *uri, struct err *e)
{
	size_t i;
	int rc = 0;

	(void)o;
	lock();
	if (host_index(uri, &i) < 0) {
		if (fk.nhosts >= FAKE_MAX_HOSTS || strlen(uri) >= sizeof(fk.hosts[0].uri)) {
			err_set(e, ERR_LIMIT, "fake: at most %d hosts", FAKE_MAX_HOSTS);
			rc = -1;
		} else {
			snprintf(fk.hosts[fk.nhosts].uri, sizeof(fk.hosts[0].uri), "%s", uri);
			fk.nhosts++;
		}
	}
	unlock();
	return rc;
}

int
__wrap_orch_uri_private(const char *uri)
{
	return __real_orch_uri_private(uri);
}

/* The fake's own hosts are this machine's; others (a test's "remote"
 * hosts) are not. */
int
__wrap_orch_uri_net_checked_here(const char *uri)
{
	return strncmp(uri, "fake:///", 8) == 0 || __real_orch_uri_net_checked_here(uri);
}

int
__wrap_orch_net_rule_hash(struct orch *o, char *out, size_t n)
{
	(void)o;
	snprintf(out, n, "%s", FAKE_NET_RULE_HASH);
	return 0;
}

int
__wrap_orch_uri_this_machine(const char *uri)
{
	return __real_orch_uri_this_machine(uri);
}

void
__wrap_orch_host_set_pooled(struct orch *o, const char *uri, int pooled)
{
	(void)o, (void)uri, (void)pooled;
}

static atomic_int spare_said = -1;

void
__wrap_orch_host_set_spare(struct orch *o, const char *uri, int spare)
{
	(void)o, (void)uri;
	atomic_store(&spare_said, spare != 0);
}

int
fake_spare_said(void)
{
	return atomic_exchange(&spare_said, -1);
}

void
fake_migrate_fail(int n)
{
	lock();
	fk.migrate_failures = n;
	unlock();
}

/* A move takes the VM to the other host as it is, less its forwards
 * (QEMU's hostfwd rules are not migrated). */
int
__wrap_orch_migrate(struct orch *o, const char *from, const char *to, const char *id,
    long long *pause_ms, struct err *e)
{
	struct fake_vm *vm;
	size_t src, dst;
	int rc = -1;

	(void)o;
	lock();
	vm = vm_find(id);
	if (host_index(from, &src) < 0 || host_index(to, &dst) < 0 || vm == NULL || !vm->live ||
	    vm->host != src) {
		err_set(e, ERR_NOT_FOUND, "fake: VM %s is not running on %s", id, from);
		goto out;
	}
	if (fk.migrate_failures > 0) {
		fk.migrate_failures--;
		err_set(e, ERR_UNAVAILABLE, "fake: migration of %s failed", id);
		goto out;
	}
	vm->host = dst;
	vm->nfwds = 0;
	*pause_ms = FAKE_MOVE_PAUSE_MS;
	fk.counts.migrations++;
	rc = 0;
out:
	unlock();
	return rc;
}

/* A host's figures: its set capacity (64 GiB and 64 CPUs unless a test
 * set others), free memory less what its live VMs were given. */
int
__wrap_orch_host_stats(struct orch *o, const char *uri, struct orch_host_stats *out, struct err *e)
{
	size_t i;
	int rc = -1;

	(void)o;
	memset(out, 0, sizeof(*out));
	lock();
	if (host_index(uri, &i) < 0) {
		err_set(e, ERR_NOT_FOUND, "fake: no host %s", uri);
	} else if (fk.hosts[i].unreachable) {
		err_set(e, ERR_UNAVAILABLE, "fake: %s does not answer", uri);
	} else {
		out->memory_mib = fk.hosts[i].memory_mib ? fk.hosts[i].memory_mib : 65536;
		out->vcpus = fk.hosts[i].vcpus ? fk.hosts[i].vcpus : 64;
		out->free_memory_mib = out->memory_mib;
		for (size_t k = 0; k < fk.nvms; k++)
			if (fk.vms[k].live && fk.vms[k].host == i) {
				out->free_memory_mib -= fk.vms[k].memory_mib;
				out->domains++;
			}
		out->cpu_busy = 0.1;
		out->disk_free_mib = -1;
		rc = 0;
	}
	unlock();
	return rc;
}

int
fake_host_set(const char *uri, long long memory_mib, int vcpus, int unreachable)
{
	size_t i;
	int rc = -1;

	lock();
	if (host_index(uri, &i) == 0) {
		fk.hosts[i].memory_mib = memory_mib;
		fk.hosts[i].vcpus = vcpus;
		fk.hosts[i].unreachable = unreachable;
		rc = 0;
	}
	unlock();
	return rc;
}

/* A new VM slot (lock held), or NULL when the fake is full. */
static struct fake_vm *
vm_new(const char *id, size_t host)
{
	struct fake_vm *vm;

	if (fk.nvms >= FAKE_MAX_VMS || strlen(id) >= FAKE_ID_MAX)
		return NULL;
	vm = &fk.vms[fk.nvms++];
	memset(vm, 0, sizeof(*vm));
	snprintf(vm->id, sizeof(vm->id), "%s", id);
	vm->host = host;
	vm->live = 1;
	return vm;
}

int
__wrap_orch_boot(struct orch *o, const char *uri, const char *id, enum vm_net net, int vcpus,
    int memory_mib, orch_progress_fn fn, void *ctx, enum orch_booted *how, struct err *e)
{
	static const char *const steps[] = { "creating the disk", "starting the VM",
		"waiting for the guest agent", "guest agent answered" };
	struct fake_vm *vm;
	size_t host;

	(void)o;
	if (how)
		*how = ORCH_BOOTED_COLD;
	lock();
	if (host_index(uri, &host) < 0) {
		unlock();
		err_set(e, ERR_INVALID, "fake: no host %s", uri);
		return -1;
	}
	if (fk.boot_failures_left > 0) {
		fk.boot_failures_left--;
		fk.counts.boot_failures++;
		unlock();
		err_set(e, ERR_UNAVAILABLE, "the guest agent did not answer in time (fake)");
		return -1;
	}
	vm = vm_find(id);
	if (vm != NULL && vm->live) {
		unlock();
		err_set(e, ERR_CONFLICT, "domain %s%s already runs", ORCH_DOMAIN_PREFIX, id);
		return -1;
	}
	if ((vm = vm_new(id, host)) == NULL) {
		unlock();
		err_set(e, ERR_LIMIT, "fake: more than %d VMs in one test", FAKE_MAX_VMS);
		return -1;
	}
	vm->vcpus = vcpus;
	vm->memory_mib = memory_mib;
	vm->net = net;
	vm->boots++;
	fk.counts.boots++;
	unlock();
	for (size_t i = 0; fn && i < sizeof(steps) / sizeof(steps[0]); i++)
		fn(ctx, (double)(i + 1), (double)(sizeof(steps) / sizeof(steps[0])), steps[i]);
	return 0;
}

int
__wrap_orch_forward_add(struct orch *o, const char *uri, const char *id, const char *address,
    int guest_port, int *host_port, struct err *e)
{
	fake_forward_fn hook = NULL;
	void *hook_ctx = NULL;
	struct fake_vm *vm;
	size_t host;
	int rc = -1;

	(void)o, (void)address;
	lock();
	vm = vm_find(id);
	if (host_index(uri, &host) < 0 || vm == NULL || !vm->live || vm->host != host) {
		err_set(e, ERR_UNAVAILABLE, "Domain not found: no domain with matching name '%s%s'",
		    ORCH_DOMAIN_PREFIX, id);
		goto out;
	}
	if (vm->nfwds >= FAKE_MAX_FWDS) {
		err_set(e, ERR_LIMIT, "fake: more than %d forwards in one VM", FAKE_MAX_FWDS);
		goto out;
	}
	vm->fwds[vm->nfwds].guest_port = guest_port;
	vm->fwds[vm->nfwds].host_port = fk.next_port++;
	*host_port = vm->fwds[vm->nfwds].host_port;
	vm->nfwds++;
	fk.counts.forward_adds++;
	hook = fk.on_forward;
	hook_ctx = fk.on_forward_ctx;
	rc = 0;
out:
	unlock();
	if (hook)
		hook(hook_ctx, id, guest_port);
	return rc;
}

int
__wrap_orch_forward_remove(struct orch *o, const char *uri, const char *id, const char *address,
    int host_port, struct err *e)
{
	struct fake_vm *vm;
	int rc = -1;

	(void)o, (void)uri, (void)address;
	lock();
	vm = vm_find(id);
	for (size_t i = 0; vm && i < vm->nfwds; i++) {
		if (vm->fwds[i].host_port == host_port) {
			vm->fwds[i] = vm->fwds[--vm->nfwds];
			fk.counts.forward_removes++;
			rc = 0;
			break;
		}
	}
	if (rc < 0)
		err_set(e, ERR_NOT_FOUND, "no forward on 127.0.0.1:%d", host_port);
	unlock();
	return rc;
}

int
__wrap_orch_destroy(struct orch *o, const char *uri, const char *id, struct err *e)
{
	struct fake_vm *vm;

	(void)o, (void)uri, (void)e;
	lock();
	fk.counts.destroys++;
	if ((vm = vm_find(id)) != NULL) {
		vm->live = 0;
		vm->destroys++;
		vm->nfwds = 0; /* forwards go with the QEMU process */
	}
	unlock();
	return 0;
}

int
__wrap_orch_detach(struct orch *o, const char *uri, const char *id, struct err *e)
{
	struct fake_vm *vm;

	(void)o, (void)uri;
	lock();
	if (fk.detach_failures_left > 0) {
		fk.detach_failures_left--;
		unlock();
		err_set(e, ERR_UNAVAILABLE, "fake: cannot pause %s", id);
		return -1;
	}
	if ((vm = vm_find(id)) != NULL && vm->live)
		vm->paused = 1;
	unlock();
	return 0;
}

int
__wrap_orch_pause(struct orch *o, const char *uri, const char *id, long long *bytes, struct err *e)
{
	struct fake_vm *vm;
	int rc = -1;

	(void)o, (void)uri;
	*bytes = 0;
	lock();
	if (fk.pause_failures_left > 0) {
		fk.pause_failures_left--;
		err_set(e, ERR_UNAVAILABLE, "fake: cannot save %s", id);
	} else if ((vm = vm_find(id)) == NULL || !vm->live) {
		err_set(e, ERR_NOT_FOUND, "fake: VM %s is not running", id);
	} else {
		vm->live = 0;
		vm->saved = 1;
		vm->nfwds = 0; /* forwards go with the QEMU process */
		fk.counts.pauses++;
		*bytes = (long long)vm->memory_mib << 20;
		rc = 0;
	}
	unlock();
	return rc;
}

int
__wrap_orch_resume(struct orch *o, const char *uri, const char *id, struct err *e)
{
	struct fake_vm *vm;
	int rc = -1;

	(void)o, (void)uri;
	lock();
	if (fk.resume_failures_left > 0) {
		fk.resume_failures_left--;
		err_set(e, ERR_UNAVAILABLE, "fake: cannot restore %s", id);
	} else if ((vm = vm_find(id)) == NULL || !vm->saved) {
		err_set(e, ERR_NOT_FOUND, "fake: the saved memory of %s is missing", id);
	} else {
		vm->live = 1;
		vm->saved = 0;
		fk.counts.resumes++;
		rc = 0;
	}
	unlock();
	return rc;
}

int
__wrap_orch_saved(struct orch *o, const char *id)
{
	struct fake_vm *vm;
	int saved;

	(void)o;
	lock();
	saved = (vm = vm_find(id)) != NULL && vm->saved;
	unlock();
	return saved;
}

int
__wrap_orch_continue(struct orch *o, const char *uri, const char *id, struct err *e)
{
	struct fake_vm *vm;

	(void)o, (void)uri, (void)e;
	lock();
	if ((vm = vm_find(id)) != NULL)
		vm->paused = 0;
	unlock();
	return 0;
}

/* ---- snapshots ---- */

void
fake_vmm_fail_snapshots(int n)
{
	lock();
	fk.snapshot_failures_left = n;
	unlock();
}

static struct fake_snap *
snap_find(const char *id)
{
	for (size_t i = 0; i < fk.nsnaps; i++)
		if (strcmp(fk.snaps[i].id, id) == 0)
			return &fk.snaps[i];
	return NULL;
}

/* `to` becomes a copy of `from`, its files duplicated (lock held). */
static int
vm_copy(struct fake_vm *to, const struct fake_vm *from)
{
	*to = *from;
	for (size_t i = 0; i < from->nfiles; i++) {
		to->files[i].data = malloc(from->files[i].len ? from->files[i].len : 1);
		if (to->files[i].data == NULL) {
			to->nfiles = i;
			return -1;
		}
		memcpy(to->files[i].data, from->files[i].data, from->files[i].len);
	}
	return 0;
}

int
__wrap_orch_snapshot(struct orch *o, const char *uri, const char *id, const char *snap,
    long long *bytes, int *restarted, struct err *e)
{
	struct fake_vm *vm;
	struct fake_snap *sn;
	int rc = -1;

	(void)o, (void)uri;
	*bytes = 0;
	*restarted = 0;
	lock();
	if (fk.snapshot_failures_left > 0) {
		fk.snapshot_failures_left--;
		err_set(e, ERR_UNAVAILABLE, "fake: cannot save %s", id);
	} else if ((vm = vm_find(id)) == NULL || !vm->live) {
		err_set(e, ERR_NOT_FOUND, "fake: VM %s is not running", id);
	} else if (fk.nsnaps >= FAKE_MAX_SNAPS) {
		err_set(e, ERR_LIMIT, "fake: more than %d snapshots", FAKE_MAX_SNAPS);
	} else {
		sn = &fk.snaps[fk.nsnaps];
		memset(sn, 0, sizeof(*sn));
		snprintf(sn->id, sizeof(sn->id), "%s", snap);
		if (vm_copy(&sn->vm, vm) == 0) {
			fk.nsnaps++;
			vm->nfwds = 0; /* restored on a new QEMU */
			*restarted = 1;
			*bytes = (long long)vm->memory_mib << 20;
			fk.counts.snapshots++;
			rc = 0;
		} else {
			vm_clear(&sn->vm);
			err_set(e, ERR_INTERNAL, "fake: out of memory");
		}
	}
	unlock();
	return rc;
}

int
__wrap_orch_snapshot_recover(struct orch *o, const char *uri, const char *id, const char *snap,
    int *kept, int *restarted, struct err *e)
{
	struct fake_vm *vm;
	int rc = 0;

	(void)o, (void)uri;
	lock();
	*kept = snap_find(snap) != NULL;
	*restarted = *kept;
	if ((vm = vm_find(id)) == NULL || (!vm->live && !*kept)) {
		err_set(e, ERR_NOT_FOUND, "fake: VM %s ended with no saved state", id);
		rc = -1;
	} else {
		vm->live = 1;
		vm->paused = 0;
	}
	unlock();
	return rc;
}

int
__wrap_orch_snapshot_whole(struct orch *o, const char *snap, long long *bytes)
{
	struct fake_snap *sn;

	(void)o;
	lock();
	sn = snap_find(snap);
	if (sn && bytes)
		*bytes = (long long)sn->vm.memory_mib << 20;
	unlock();
	return sn != NULL;
}

void
__wrap_orch_snapshot_delete(struct orch *o, const char *snap)
{
	struct fake_snap *sn;

	(void)o;
	lock();
	if ((sn = snap_find(snap)) != NULL) {
		vm_clear(&sn->vm);
		*sn = fk.snaps[--fk.nsnaps];
		fk.counts.snapshot_deletes++;
	}
	unlock();
}

const char *
__wrap_orch_image_id(struct orch *o)
{
	(void)o;
	return FAKE_IMAGE_ID;
}

int
__wrap_orch_boot_snapshot(struct orch *o, const char *uri, const char *id, const char *snap,
    orch_progress_fn fn, void *ctx, struct err *e)
{
	struct fake_snap *sn;
	struct fake_vm *vm;
	size_t host;
	int rc = -1;

	(void)o;
	lock();
	if (host_index(uri, &host) < 0) {
		err_set(e, ERR_INVALID, "fake: no host %s", uri);
	} else if (fk.boot_failures_left > 0) {
		fk.boot_failures_left--;
		fk.counts.boot_failures++;
		err_set(e, ERR_UNAVAILABLE, "the guest agent did not answer in time (fake)");
	} else if ((sn = snap_find(snap)) == NULL) {
		err_set(e, ERR_NOT_FOUND, "fake: no snapshot %s", snap);
	} else if ((vm = vm_new(id, host)) == NULL) {
		err_set(e, ERR_LIMIT, "fake: more than %d VMs in one test", FAKE_MAX_VMS);
	} else if (vm_copy(vm, &sn->vm) < 0) {
		err_set(e, ERR_INTERNAL, "fake: out of memory");
	} else {
		snprintf(vm->id, sizeof(vm->id), "%s", id);
		vm->host = host;
		vm->live = 1;
		vm->boots = 1;
		vm->destroys = 0;
		vm->nfwds = 0;
		fk.counts.forks++;
		rc = 0;
	}
	unlock();
	if (rc == 0 && fn)
		fn(ctx, 4, 4, "guest agent answered");
	return rc;
}

int
__wrap_guest_new_identity(struct vm_host *h, const char *dom, struct err *e)
{
	(void)h, (void)dom, (void)e;
	lock();
	fk.counts.identities++;
	unlock();
	return 0;
}

int
__wrap_guest_drop_caches(struct vm_host *h, const char *dom, struct err *e)
{
	(void)h, (void)dom, (void)e;
	return 0;
}

int
__wrap_guest_set_clock(struct vm_host *h, const char *dom, struct err *e)
{
	(void)h, (void)dom, (void)e;
	return 0;
}

/* The fake keeps no VM directories. */
void
__wrap_orch_sweep_dirs(struct orch *o, int (*unowned)(void *ctx, const char *id), void *ctx)
{
	(void)o, (void)unowned, (void)ctx;
}

int
__wrap_orch_list(struct orch *o, const char *uri, char ***ids, size_t *n, struct err *e)
{
	size_t host, count = 0, k = 0;
	char **out;

	(void)o;
	*ids = NULL;
	*n = 0;
	lock();
	fk.counts.lists++;
	if (host_index(uri, &host) < 0) {
		unlock();
		err_set(e, ERR_INVALID, "fake: no host %s", uri);
		return -1;
	}
	for (size_t i = 0; i < fk.nvms; i++)
		count += fk.vms[i].live && fk.vms[i].host == host;
	out = calloc(count ? count : 1, sizeof(*out));
	for (size_t i = 0; out && i < fk.nvms; i++) {
		if (!fk.vms[i].live || fk.vms[i].host != host)
			continue;
		if ((out[k] = strdup(fk.vms[i].id)) == NULL) {
			__real_orch_ids_free(out, k);
			out = NULL;
			break;
		}
		k++;
	}
	unlock();
	if (out == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return -1;
	}
	*ids = out;
	*n = k;
	return 0;
}

void
__wrap_orch_ids_free(char **ids, size_t n)
{
	__real_orch_ids_free(ids, n);
}

int
__wrap_orch_vm_exists(struct orch *o, const char *uri, const char *id, struct err *e)
{
	struct fake_vm *vm;
	size_t host;
	int rc;

	(void)o;
	lock();
	if (host_index(uri, &host) < 0) {
		err_set(e, ERR_INVALID, "fake: no host %s", uri);
		rc = -1;
	} else {
		vm = vm_find(id);
		rc = vm != NULL && vm->live && vm->host == host;
	}
	unlock();
	return rc;
}

int
__wrap_orch_vm_stats(struct orch *o, const char *uri, const char *id, struct vm_stats *out,
    struct err *e)
{
	struct fake_vm *vm;
	size_t host;
	int rc = -1;

	(void)o;
	memset(out, 0, sizeof(*out));
	lock();
	vm = vm_find(id);
	if (host_index(uri, &host) == 0 && vm != NULL && vm->live && vm->host == host) {
		out->running = 1;
		out->cpu_time_ns = 1500000000ULL;
		out->max_memory_kib = (unsigned long)vm->memory_mib * 1024;
		out->memory_kib = out->max_memory_kib / 4;
		out->rss_kib = out->max_memory_kib / 2;
		rc = 0;
	} else {
		err_set(e, ERR_UNAVAILABLE, "Domain not found: no domain with matching name '%s%s'",
		    ORCH_DOMAIN_PREFIX, id);
	}
	unlock();
	return rc;
}

int
__wrap_orch_net_ensure(struct orch *o, struct err *e)
{
	int ok;

	(void)o;
	lock();
	fk.counts.netguard_checks++;
	ok = fk.netguard_ok;
	unlock();
	if (!ok)
		err_set(e, ERR_UNAVAILABLE, "nft: cannot load the isolation rule (fake)");
	return ok ? 0 : -1;
}

char *
__wrap_orch_console_tail(struct orch *o, const char *id, size_t max)
{
	char text[FAKE_CONSOLE_MAX + FAKE_ID_MAX + 32];
	char *out;
	size_t n;

	struct fake_vm *vm;

	(void)o;
	snprintf(text, sizeof(text), "fake console of %s: reboot: Power down\n", id);
	lock();
	if ((vm = vm_find(id)) != NULL && vm->console[0] != '\0')
		snprintf(text, sizeof(text), "fake console of %s: %s", id, vm->console);
	unlock();
	n = strlen(text) < max ? strlen(text) : max;
	out = malloc(n + 1);
	if (out) {
		memcpy(out, text + strlen(text) - n, n);
		out[n] = '\0';
	}
	return out;
}

int
__wrap_orch_domain_name(const char *id, char *out, size_t n)
{
	return __real_orch_domain_name(id, out, n);
}

/* ---- what the tests look at ---- */

int
fake_vm_info(const char *id, struct fake_vm_info *out)
{
	struct fake_vm *vm;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	lock();
	if ((vm = vm_find(id)) != NULL) {
		out->live = vm->live;
		out->vcpus = vm->vcpus;
		out->memory_mib = vm->memory_mib;
		out->net = vm->net;
		out->boots = vm->boots;
		out->destroys = vm->destroys;
		out->paused = vm->paused;
		out->saved = vm->saved;
		out->forwards = (int)vm->nfwds;
		snprintf(out->host, sizeof(out->host), "%s", fk.hosts[vm->host].uri);
		rc = 0;
	}
	unlock();
	return rc;
}

int
fake_vm_wait_destroyed(const char *id, int timeout_ms)
{
	struct fake_vm_info vm;

	for (int waited = 0; waited <= timeout_ms; waited += 5) {
		if (fake_vm_info(id, &vm) == 0 && vm.destroys > 0)
			return 0;
		usleep(5000);
	}
	return -1;
}

static int
lose(const char *id, int oom)
{
	struct fake_vm *vm;
	int rc = -1;

	lock();
	if ((vm = vm_find(id)) != NULL && vm->live) {
		vm->live = 0;
		vm->nfwds = 0;
		vm->oom_killed = oom;
		rc = 0;
	}
	unlock();
	return rc;
}

int
fake_vm_lose(const char *id)
{
	return lose(id, 0);
}

int
fake_vm_lose_oom(const char *id)
{
	return lose(id, 1);
}

int
__wrap_orch_vm_out_of_memory(struct orch *o, const char *id)
{
	struct fake_vm *vm;
	int oom = 0;

	(void)o;
	lock();
	if ((vm = vm_find(id)) != NULL) {
		oom = vm->oom_killed;
		vm->oom_killed = 0; /* told once, as the watch forgets it */
	}
	unlock();
	return oom;
}

int
fake_vm_set_console(const char *id, const char *text)
{
	struct fake_vm *vm;
	int rc = -1;

	lock();
	if ((vm = vm_find(id)) != NULL) {
		snprintf(vm->console, sizeof(vm->console), "%s", text);
		rc = 0;
	}
	unlock();
	return rc;
}

int
fake_vm_set_agent_fault(const char *id, const char *why)
{
	struct fake_vm *vm;
	int rc = -1;

	lock();
	if ((vm = vm_find(id)) != NULL) {
		snprintf(vm->agent_fault, sizeof(vm->agent_fault), "%s", why);
		rc = 0;
	}
	unlock();
	return rc;
}

int
__wrap_orch_agent_fault(struct orch *o, const char *uri, const char *id, char *why, size_t n)
{
	struct fake_vm *vm;
	int fault = 0;

	(void)o;
	(void)uri;
	if (n > 0)
		why[0] = '\0';
	lock();
	if ((vm = vm_find(id)) != NULL && vm->live && vm->agent_fault[0] != '\0') {
		snprintf(why, n, "%s", vm->agent_fault);
		fault = 1;
	}
	unlock();
	return fault;
}

int
fake_vm_add_orphan(const char *id)
{
	int rc;

	lock();
	rc = fk.nhosts > 0 && vm_new(id, 0) != NULL ? 0 : -1;
	unlock();
	return rc;
}

int
fake_vm_forward(const char *id, int guest_port)
{
	struct fake_vm *vm;
	int port = -1;

	lock();
	vm = vm_find(id);
	for (size_t i = 0; vm && i < vm->nfwds; i++)
		if (vm->fwds[i].guest_port == guest_port)
			port = vm->fwds[i].host_port;
	unlock();
	return port;
}

long long
fake_file_get(const char *id, const char *path, unsigned char *out, size_t n, unsigned *mode)
{
	struct fake_vm *vm;
	struct fake_file *f;
	long long len = -1;

	lock();
	if ((vm = vm_find(id)) != NULL && (f = file_find(vm, path)) != NULL) {
		if (out && n)
			memcpy(out, f->data, f->len < n ? f->len : n);
		if (mode)
			*mode = f->mode;
		len = (long long)f->len;
	}
	unlock();
	return len;
}

int
fake_file_put(const char *id, const char *path, const void *data, size_t len, unsigned mode)
{
	struct fake_vm *vm;
	struct err e;
	int rc = -1;

	err_clear(&e);
	lock();
	if ((vm = vm_find(id)) != NULL)
		rc = file_set(vm, path, data, len, mode, &e);
	unlock();
	return rc;
}
