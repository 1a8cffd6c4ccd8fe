/* sandbox.h - the sandbox service (sbx_): one implementation of every
 * sandbox operation, used by the MCP tools (and the REST API). Rows in
 * PostgreSQL, VMs through the orchestrator, everything scoped to the
 * calling account: another account's sandbox is "not found". */
#ifndef AAS_SANDBOX_H
#define AAS_SANDBOX_H

#include <stdatomic.h>

#include <jansson.h>

#include "base/config.h"
#include "base/db.h"
#include "base/err.h"
#include "vmm/guest.h"

struct sbx;
struct orch;
struct reaper;

/* What the sandbox service takes from the process that runs it; all of it
 * outlives the service. */
struct sbx_env {
	const struct config *cfg;
	struct db *db;
	/* Holds the expiry reaper while it runs (NULL before and after), so
	 * the process's notification thread can wake it. */
	struct reaper *_Atomic *reaper;
	/* A sandbox ended in this process (its previews close); on the
	 * maintenance thread or a worker, so it must not block. NULL: unheard. */
	void (*ended)(void *ctx, const char *sandbox_id);
	void *ctx;
};

/* How a long operation reports progress and learns it was cancelled. */
struct sbx_progress {
	void (*fn)(void *ctx, double progress, double total, const char *message);
	void *ctx;
	const atomic_int *cancel;
	/* A command's output as the guest produces it (fd 1 or 2), on the
	 * calling thread and in order; raw bytes, any split. NULL: unwanted. */
	void (*output)(void *ctx, int fd, const char *data, size_t len);
};

/* Starts the orchestrator and the maintenance thread (heartbeat,
 * reconcile, warm pool). */
struct sbx *sbx_new(const struct sbx_env *env, struct err *e);
void sbx_free(struct sbx *s);
/* Calls waiting on a guest (run_command) end now with "the service is
 * stopping" and their commands are stopped, so a shutdown never waits for
 * a user's command. Called before the worker pool is joined. */
void sbx_stop_calls(struct sbx *s);
struct orch *sbx_orch(struct sbx *s);

/* Requests are typed: the tool layer (tool_sandbox.c) turns a validated
 * JSON argument object into one of these once, and a front end that
 * moves raw bytes (REST files) fills them directly. Strings are borrowed
 * for the call. Results that carry bytes are typed too; the others are
 * the tool's result object (outputSchema), built here from the row. */

#define SBX_PATH_MAX 4200 /* an absolute path inside the guest */

struct sbx_create_req {
	const char *size;     /* NULL: small */
	int timeout_min;      /* 0: AAS_DEFAULT_TIMEOUT_MIN */
	const char *name;     /* NULL: none */
	const char *metadata; /* a JSON object as text, or NULL: {} */
	int internet;
	const char *from_snapshot; /* NULL: a new VM from the image */
};

/* snapshot_sandbox's arguments. */
struct sbx_snapshot_req {
	const char *sandbox_id;
	const char *name; /* NULL: none */
	int keep_minutes; /* 0: AAS_SNAPSHOT_KEEP_MIN */
};

struct sbx_list_req {
	const char *state;  /* NULL: any; "live": creating or running */
	const char *cursor; /* NULL: from the newest */
	int limit;
};

struct sbx_run_req {
	const char *sandbox_id;
	const char *command;
	const char *cwd;        /* NULL: the sandbox user's home */
	const json_t *env;      /* object of strings (schema-checked), or NULL */
	const char *stdin_data; /* NULL: /dev/null */
	size_t stdin_len;
	int timeout_s;        /* inside the guest; 0: none (background only) */
	long long max_output; /* bytes kept per stream */
	int background;
};

struct sbx_run_res {
	char command_id[24];
	char stdout_path[256];
	char stderr_path[256];
	const char *state; /* running, exited, timed_out */
	int ended;         /* the guest reported the end */
	int exit_code;     /* when ended */
	int timed_out;
	int background;
	char *out, *err; /* kept output (malloc'd), not NUL-terminated */
	size_t out_len, err_len;
	long long out_total, err_total;
	long long duration_ms;
};

/* get_command: a command's state and its output from the offsets. */
struct sbx_cmd_req {
	const char *sandbox_id;
	const char *command_id;
	long long stdout_offset, stderr_offset;
	int wait_s; /* wait this long for news while it runs; 0: answer now */
};

/* kill_command. */
struct sbx_kill_req {
	const char *sandbox_id;
	const char *command_id;
	int sig;
};

/* A command as get_command and kill_command report it. */
struct sbx_cmd_res {
	char command_id[24];
	char state[16]; /* running, exited, timed_out, killed, failed */
	int has_exit_code, exit_code;
	int background;
	char stdout_path[256];
	char stderr_path[256];
	/* get_command: output from the offsets (malloc'd, not NUL-terminated). */
	char *out, *err;
	size_t out_len, err_len;
	long long out_offset, err_offset; /* where out and err start */
	long long out_total, err_total;   /* the logs' sizes */
	/* kill_command: 1 when the signal was sent, 0 when it had ended. */
	int signalled;
};

struct sbx_write_req {
	const char *sandbox_id;
	const char *path; /* relative paths are under the home */
	const unsigned char *data;
	size_t len;
	unsigned mode;
	int make_parents;
};

struct sbx_write_res {
	char path[SBX_PATH_MAX];
	size_t bytes;
	unsigned mode;
};

struct sbx_read_req {
	const char *sandbox_id;
	const char *path;
	long long offset;
	size_t length;
};

struct sbx_read_res {
	char path[SBX_PATH_MAX];
	unsigned char *data; /* malloc'd */
	size_t len;
	long long offset;
	long long total; /* the file's whole size */
};

struct sbx_files_req {
	const char *sandbox_id;
	const char *path; /* NULL: the home */
	int depth;
	int limit;
};

struct sbx_expose_req {
	const char *sandbox_id;
	int port;
	int public;
};

json_t *sbx_create(struct sbx *s, const char *account, const struct sbx_create_req *req,
    const struct sbx_progress *pg, struct err *e);
json_t *sbx_get(struct sbx *s, const char *account, const char *sandbox_id, struct err *e);
/* A login shell on a terminal in the account's running sandbox (see
 * guest_pty_start); ERR_NOT_FOUND for another account's sandbox. */
struct guest_pty;
struct guest_pty *sbx_pty_open(struct sbx *s, const char *account, const char *sandbox_id,
    unsigned rows, unsigned cols, struct err *e);
json_t *sbx_list(struct sbx *s, const char *account, const struct sbx_list_req *req, struct err *e);
json_t *sbx_destroy(struct sbx *s, const char *account, const char *sandbox_id, struct err *e);
/* pause_sandbox: a running sandbox's memory is saved and its VM ends; the
 * compute minutes not started are refunded and storage is billed while it
 * is paused. resume_sandbox: it runs again, processes and files as they
 * were, charged compute until its expiry. ERR_CONFLICT in any other state. */
json_t *sbx_pause(struct sbx *s, const char *account, const char *sandbox_id, struct err *e);
json_t *sbx_resume(struct sbx *s, const char *account, const char *sandbox_id, struct err *e);
/* snapshot_sandbox: the running sandbox's memory and disk kept as a
 * snapshot of the account (its storage charged for keep_minutes up
 * front); the sandbox runs on. list_snapshots and delete_snapshot (the
 * minutes not begun go back). Another account's ids are not found. */
json_t *sbx_snapshot(struct sbx *s, const char *account, const struct sbx_snapshot_req *req,
    struct err *e);
json_t *sbx_snapshot_list(struct sbx *s, const char *account, struct err *e);
json_t *sbx_snapshot_delete(struct sbx *s, const char *account, const char *snapshot_id,
    struct err *e);
/* 0 with `res` filled (sbx_run_res_clear it), -1 with `e`. */
int sbx_run(struct sbx *s, const char *account, const struct sbx_run_req *req,
    const struct sbx_progress *pg, struct sbx_run_res *res, struct err *e) AAS_MUST_CHECK;
void sbx_run_res_clear(struct sbx_run_res *res);
int sbx_write_file(struct sbx *s, const char *account, const struct sbx_write_req *req,
    struct sbx_write_res *res, struct err *e) AAS_MUST_CHECK;
/* 0 with `res` filled (sbx_read_res_clear it), -1 with `e`. */
int sbx_read_file(struct sbx *s, const char *account, const struct sbx_read_req *req,
    struct sbx_read_res *res, struct err *e) AAS_MUST_CHECK;
void sbx_read_res_clear(struct sbx_read_res *res);
/* write_file with the bytes from `read` instead of req->data, up to
 * `max_bytes` (the caller enforces it; it sizes the guest's deadline). */
int sbx_write_stream(struct sbx *s, const char *account, const struct sbx_write_req *req,
    guest_read_fn read, void *ctx, uint64_t max_bytes, struct sbx_write_res *res,
    struct err *e) AAS_MUST_CHECK;
/* Where a streamed read starts: called once the size is known, before
 * any byte (res: path, offset, total; len the bytes that follow); -1 with
 * e set refuses. */
typedef int (*sbx_read_start_fn)(void *ctx, const struct sbx_read_res *res, struct err *e);
/* read_file streamed: [offset, offset + length) (length 0: to the end,
 * refused above `max_bytes`) to `write`, after `start`. */
int sbx_read_stream(struct sbx *s, const char *account, const struct sbx_read_req *req,
    long long max_bytes, sbx_read_start_fn start, guest_write_fn write, void *ctx,
    struct err *e) AAS_MUST_CHECK;
/* ---- trees: a directory as one tar stream (sandbox_tree.c) ---- */

struct sbx_tree_res {
	char path[SBX_PATH_MAX]; /* the absolute directory */
	unsigned long long files, dirs, symlinks, hardlinks, bytes, skipped;
};

/* Unpacks the tar stream `read` gives into `path` in the account's
 * running sandbox, as the sandbox user. The archive is checked on its way
 * (base/tar: no absolute or ".." names, no links out of the directory, no
 * device files; set-id bits cleared); a member that breaks a rule, a
 * file over `max_bytes` or more than `max_entries` members is an error
 * naming it, and then nothing in the directory changes. */
int sbx_tree_put(struct sbx *s, const char *account, const char *sandbox_id, const char *path,
    guest_read_fn read, void *ctx, uint64_t max_bytes, uint64_t max_entries,
    struct sbx_tree_res *res, struct err *e) AAS_MUST_CHECK;
/* Called once, before the first byte of a tree download. */
typedef int (*sbx_tree_start_fn)(void *ctx, struct err *e);
/* The directory `path` (default: the home) as a tar stream to `write`,
 * after `start`: members that break the same rules are left out (counted
 * in res->skipped), at most `max_bytes` of archive. `exclude` (NULL: none)
 * is a comma-separated list of patterns whose matches are not sent. */
int sbx_tree_get(struct sbx *s, const char *account, const char *sandbox_id, const char *path,
    const char *exclude, uint64_t max_bytes, sbx_tree_start_fn start, guest_write_fn write,
    void *ctx, struct sbx_tree_res *res, struct err *e) AAS_MUST_CHECK;
json_t *sbx_list_files(struct sbx *s, const char *account, const struct sbx_files_req *req,
    struct err *e);
/* 1 when new sandboxes get a network device (the isolation rule is in
 * place), 0 with the reason in `why` when not (sandbox_net.c). */
int sbx_net_state(struct sbx *s, char *why, size_t n);

/* expose_port: a forward into the VM and a preview URL (sandbox_ports.c). */
json_t *sbx_expose_port(struct sbx *s, const char *account, const struct sbx_expose_req *req,
    struct err *e);
/* {sandbox_id, ports: [...]} of one sandbox of the account. */
json_t *sbx_list_ports(struct sbx *s, const char *account, const char *sandbox_id, struct err *e);

/* Decides where a preview request goes (the proxy's resolver): the
 * forward of an exposed port of a running sandbox, after the private
 * preview's credential is checked. */
struct preview_ask;
struct preview_route;
void sbx_preview_route(struct sbx *s, const struct preview_ask *ask, struct preview_route *out);
/* Why the upstream of route `r` (status 0) closed without answering, for
 * its error page: the sandbox is paused, nothing listens on the port, a
 * server listens on loopback only, or one listens and closed anyway.
 * Asks the guest (bounded by the agent's short-operation deadline); runs
 * on the proxy's request thread. */
void sbx_preview_explain(struct sbx *s, const struct preview_route *r, char *msg, size_t n);
/* One command of a sandbox as recorded (command text, state, exit code,
 * log paths, times), without asking the guest. */
json_t *sbx_command_record(struct sbx *s, const char *account, const char *sandbox_id,
    const char *command_id, struct err *e);
/* One command of a sandbox: its state and
 * exit code (a running background command is asked about first), log
 * paths and, while the sandbox runs, the logs' sizes. */
json_t *sbx_command_status(struct sbx *s, const char *account, const char *sandbox_id,
    const char *command_id, struct err *e);

/* get_command: 0 with `res` filled (sbx_cmd_res_clear it), -1 with `e`.
 * Waits (pg->cancel ends the wait early) while the command runs and has
 * printed nothing past the offsets, at most req->wait_s seconds. */
int sbx_command_get(struct sbx *s, const char *account, const struct sbx_cmd_req *req,
    const struct sbx_progress *pg, struct sbx_cmd_res *res, struct err *e) AAS_MUST_CHECK;
/* kill_command: signals the command's process group unless it ended, and
 * reports its state after a short wait for the end (no output). */
int sbx_command_kill(struct sbx *s, const char *account, const struct sbx_kill_req *req,
    struct sbx_cmd_res *res, struct err *e) AAS_MUST_CHECK;
void sbx_cmd_res_clear(struct sbx_cmd_res *res);

/* Live capacity (refreshed by the maintenance thread): accelerator, hosts,
 * live sandboxes, warm VMs per size. New reference. */
json_t *sbx_capacity(struct sbx *s);
/* VMs of destroyed sandboxes being torn down after the answer, now. */
int sbx_teardowns(struct sbx *s);

/* One reconcile pass (also run periodically): domains without a live row
 * are destroyed, live rows without a domain fail. Exposed for tests. */
int sbx_reconcile(struct sbx *s, struct err *e) AAS_MUST_CHECK;

#endif
