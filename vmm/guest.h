/* guest.h - operations inside a sandbox VM (guest_) through the guest's
 * aas-agent (vmm/achan.h): commands run as the sandbox user with their
 * output streamed and kept in logs (guest.c), files move as raw bytes with
 * the sandbox user's rights (guest_file.c, listings guest_list.c), and
 * terminals (guest_pty.c). */
#ifndef AAS_GUEST_H
#define AAS_GUEST_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "base/err.h"
#include "vmm/vm.h"

#define GUEST_HOME "/home/sandbox"
#define GUEST_CMD_DIR "/var/lib/aas/cmd"
#define GUEST_MAX_FILE (8u << 20) /* write_file / read page limit */
#define GUEST_MAX_STDIN (1u << 20)

struct guest_run {
	const char *cmd_id; /* names the log files */
	const char *command;
	const char *cwd;        /* NULL: GUEST_HOME */
	const json_t *env;      /* object of strings, or NULL */
	const char *stdin_data; /* NULL: /dev/null */
	size_t stdin_len;
	int timeout_s;  /* inside the guest; 0 = none */
	int background; /* left running; its end is read from its exit file */
};

/* Log paths of a command (inside the guest): 0, or -1 when one does not
 * fit (both are then "", which names no file). */
int guest_log_paths(const char *cmd_id, char *out, size_t on, char *err, size_t en);

/* Starts a command; fills the guest pid (of its process group). A
 * foreground command is then waited on with guest_run_wait until it
 * ends, or let go with guest_run_release. */
int guest_run_start(struct vm_host *h, const char *dom, const struct guest_run *r, long *pid,
    struct err *e) AAS_MUST_CHECK;

/* Output of a command as the guest produces it (fd 1 or 2), given on the
 * waiting thread in order; the logs keep all of it as well. */
struct guest_sink {
	void (*output)(void *ctx, int fd, const char *data, size_t len);
	void *ctx;
};

/* Waits until the command ends, `deadline_ms` (monotonic) passes or
 * *cancel is set, giving its output to `sink` (NULL: none) meanwhile.
 * Returns 1 when it ended (exit_code set; 124 = timed out inside the
 * guest; sizes of its logs, -1 when unknown), 0 when it is still running,
 * -1 on error. */
int guest_run_wait(struct vm_host *h, const char *dom, long pid, long long deadline_ms,
    const atomic_int *cancel, const struct guest_sink *sink, int *exit_code, long long *out_size,
    long long *err_size, struct err *e) AAS_MUST_CHECK;

/* Lets go of a foreground command this process no longer waits on (it
 * runs on unless killed). */
void guest_run_release(struct vm_host *h, const char *dom, long pid);

/* Reads up to `max` bytes of a log file from `offset`; `total` is the
 * whole size. `known_size` (-1 when unknown) saves asking for it. */
int guest_read_log(struct vm_host *h, const char *dom, const char *path, long long offset,
    size_t max, long long known_size, char **data, size_t *len, long long *total,
    struct err *e) AAS_MUST_CHECK;

/* Writes a file as the sandbox user (never through a shell). */
int guest_put_file(struct vm_host *h, const char *dom, const char *path, const unsigned char *data,
    size_t len, unsigned mode, int make_parents, struct err *e) AAS_MUST_CHECK;

/* Reads [offset, offset+length) of a file as the sandbox user. */
int guest_get_file(struct vm_host *h, const char *dom, const char *path, long long offset,
    size_t length, unsigned char **data, size_t *len, long long *total,
    struct err *e) AAS_MUST_CHECK;

/* Streamed files (REST): bytes come from and go to callbacks, so memory
 * does not grow with the file. The deadline allows GUEST_STREAM_MIN_BPS
 * for `max_bytes` on top of the usual minute. */
#define GUEST_STREAM_MIN_BPS (1024 * 1024)
/* That deadline (monotonic ms) for a stream of up to max_bytes. */
long long guest_stream_deadline(uint64_t max_bytes);

/* The next bytes of an upload: the count, 0 at the end, -1 with e set. */
typedef ssize_t (*guest_read_fn)(void *ctx, void *buf, size_t n, struct err *e);
/* Takes bytes of a download: 0, or -1 with e set to stop. */
typedef int (*guest_write_fn)(void *ctx, const void *buf, size_t n, struct err *e);

/* Writes a file (truncated first) as the sandbox user from `read` until
 * it ends; *written is what the guest stored. A failure part way leaves
 * what was written. */
int guest_put_stream(struct vm_host *h, const char *dom, const char *path, unsigned mode,
    int make_parents, guest_read_fn read, void *ctx, uint64_t max_bytes, uint64_t *written,
    struct err *e) AAS_MUST_CHECK;

/* The size of a regular file the sandbox user may read (ERR_INVALID for a
 * directory or anything else). */
int guest_file_size(struct vm_host *h, const char *dom, const char *path, long long *size,
    struct err *e) AAS_MUST_CHECK;

/* Gives [offset, offset + length) of a file to `write` as it arrives. */
int guest_get_stream(struct vm_host *h, const char *dom, const char *path, long long offset,
    long long length, guest_write_fn write, void *ctx, struct err *e) AAS_MUST_CHECK;

/* ---- trees: a directory as one tar stream (guest_tree.c) ---- */

/* Unpacks the tar stream `read` gives into `dir` (created when missing)
 * as the sandbox user, with the guest's tar (no owners, the user's umask).
 * Only when `read` ended (0) and the whole archive unpacked does anything
 * appear in `dir`; otherwise nothing there changes. `read` hands over an
 * archive the caller has checked (base/tar). */
int guest_tree_put(struct vm_host *h, const char *dom, const char *dir, guest_read_fn read,
    void *ctx, uint64_t max_bytes, struct err *e) AAS_MUST_CHECK;
/* Gives `write` a tar stream (GNU format, names under ".") of `dir` as the
 * sandbox user can read it, without what matches one of the `exclude`
 * patterns (GNU tar's --exclude: a glob on any name in the tree). An
 * error before the first byte is the usual one (no such directory:
 * ERR_INVALID on "path"). */
#define GUEST_TREE_EXCLUDE_MAX 32
#define GUEST_TREE_PATTERN_MAX 255
int guest_tree_get(struct vm_host *h, const char *dom, const char *dir, const char *const *exclude,
    size_t n_exclude, guest_write_fn write, void *ctx, uint64_t max_bytes,
    struct err *e) AAS_MUST_CHECK;

/* Lists a tree as the sandbox user: array of {path,type,size,mode,mtime}. */
json_t *guest_list_files(struct vm_host *h, const char *dom, const char *path, int depth, int limit,
    int *truncated, struct err *e);

/* Sends `sig` to a command's whole process group. */
int guest_kill(struct vm_host *h, const char *dom, long pid, int sig, struct err *e) AAS_MUST_CHECK;

/* One poll of a background command started with guest_run_start: 1 with
 * its exit code (128 + signal when killed) once it ended, 0 while it runs,
 * -1 with ERR_NOT_FOUND when the guest no longer knows it (it rebooted),
 * or -1 with another error. */
int guest_run_poll(struct vm_host *h, const char *dom, const char *cmd_id, long pid, int *exit_code,
    struct err *e) AAS_MUST_CHECK;

/* ---- terminals (guest_pty.c) ---- */

#define GUEST_PTY_MAX_DIM 1000 /* rows or columns of a terminal */

struct guest_pty;

/* Starts `/bin/bash -l` as the sandbox user on a terminal of rows x cols
 * in the sandbox user's home, its input streamed. NULL with e set. */
struct guest_pty *guest_pty_start(struct vm_host *h, const char *dom, unsigned rows, unsigned cols,
    struct err *e);
/* The next output: 1 with data/len (valid until the next call; len 0 is
 * the end of output), 2 when the shell ended (exit_code: its code, 128 +
 * signal when killed), 0 at the deadline or when *cancel became nonzero,
 * -1 with e set (the guest connection failed). */
int guest_pty_read(struct guest_pty *p, long long deadline_ms, const atomic_int *cancel,
    const char **data, size_t *len, int *exit_code, struct err *e) AAS_MUST_CHECK;
/* Terminal input (blocks while the agent's stdin window is full). */
int guest_pty_write(struct guest_pty *p, const void *data, size_t len,
    struct err *e) AAS_MUST_CHECK;
int guest_pty_resize(struct guest_pty *p, unsigned rows, unsigned cols,
    struct err *e) AAS_MUST_CHECK;
/* Lets go of the terminal; the agent hangs its shell up (SIGHUP to the
 * shell's process group) if it still runs. NULL is fine. */
void guest_pty_free(struct guest_pty *p);

/* Makes a user path absolute (relative paths are under GUEST_HOME).
 * -1 when the result would not fit. */
int guest_abs_path(const char *path, char *out, size_t n);

/* Sets the guest's clock to the host's (UTC, to the nanosecond as sent),
 * as root: a guest restored from saved memory has the clock of its save. */
int guest_set_clock(struct vm_host *h, const char *dom, struct err *e) AAS_MUST_CHECK;
/* A guest started from a snapshot made its own (vmm/image/identity.c): its
 * random generator reseeded from GUEST_SEED_BYTES of the host's, a new
 * /etc/machine-id, and the host's clock. */
/* The guest's clean page cache dropped (as root), so that a saved state
 * holds what its processes use, not what they read once. */
int guest_drop_caches(struct vm_host *h, const char *dom, struct err *e) AAS_MUST_CHECK;
#define GUEST_IDENTITY_PATH "/usr/local/sbin/aas-identity"
#define GUEST_SEED_BYTES 32
int guest_new_identity(struct vm_host *h, const char *dom, struct err *e) AAS_MUST_CHECK;

#endif
