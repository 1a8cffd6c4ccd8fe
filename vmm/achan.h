/* achan.h - aasd's end of the agent protocol (achan_): one connection per
 * VM to the guest's aas-agent on the virtio-serial port AP_PORT_NAME,
 * opened with virDomainOpenChannel as a non-blocking libvirt stream and
 * driven by stream callbacks on libvirt's event thread (no polling), so
 * it works the same over a remote URI as under the embedded driver.
 *
 * The calls below block the calling worker thread (never the event
 * thread) until their answer, a deadline or a cancel flag. Everything the
 * guest sends is hostile: frames are parsed by aproto, every queue is
 * bounded, every frame and byte draws on a rate budget (achan_bound.h:
 * past it aasd reads no more until later), and a guest that breaks the
 * protocol (a bad frame, more data than granted, an empty or second end
 * of data, repeated answers, restarts in a loop, no sync within
 * AP_SYNC_SCAN_MAX, an unknown channel) puts the connection in the failed
 * state with a reason (achan_failure) and aasd reads nothing more from
 * it; every waiting call then fails with ERR_UNAVAILABLE, and the owner
 * ends the sandbox with that reason. */
#ifndef AAS_ACHAN_H
#define AAS_ACHAN_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <libvirt/libvirt.h>

#include "base/err.h"

struct achan;

/* Opens the port of a running domain and starts the handshake. The
 * caller holds the one reference. */
struct achan *achan_open(virConnectPtr conn, virDomainPtr dom, struct err *e);
/* The same over a connected descriptor (a socketpair in tests, a unix
 * socket for diagnostics), watched by libvirt's event loop; takes `fd`
 * (closed with the object, or at once on failure). */
struct achan *achan_open_fd(int fd, struct err *e);
/* Another reference, for a call on another thread. */
struct achan *achan_ref(struct achan *c);
/* Closes the stream: every call still waiting fails with ERR_UNAVAILABLE
 * and later calls fail at once. The object stays until its last
 * reference goes. */
void achan_close(struct achan *c);
/* Drops a reference (the last one closes and frees). NULL is fine. */
void achan_free(struct achan *c);

/* Waits until the agent has answered the handshake (the guest is ready).
 * ERR_TIMEOUT at the deadline (monotonic ms, base/clock.h). */
int achan_wait_ready(struct achan *c, long long deadline_ms, struct err *e) AAS_MUST_CHECK;
/* 1 once the connection is usable, 0 while not yet, -1 when failed. */
int achan_state(struct achan *c);
/* Why the connection failed ("" while it has not): a hostile or broken
 * guest, or the stream ending. */
const char *achan_failure(struct achan *c, char *buf, size_t n);
/* 1 when the failure was the guest breaking the protocol (flood, garbage,
 * oversized frames) rather than the stream closing. */
int achan_guest_at_fault(struct achan *c);
/* One PING/PONG round trip. */
int achan_ping(struct achan *c, long long deadline_ms, struct err *e) AAS_MUST_CHECK;

/* ---- processes ---- */

struct achan_exec_req {
	const char *const *argv; /* NULL-terminated; argv[0] is the program */
	const char *const *env;  /* NULL-terminated "K=V", or NULL */
	const char *cwd;         /* NULL: the sandbox user's home */
	int timeout_s;           /* 0: none */
	int as_root;             /* operator use only */
	int detach;              /* output to the log files only; no events */
	int pty;                 /* run on a terminal of rows x cols */
	unsigned rows, cols;
	const char *log_out, *log_err; /* guest files the output is kept in, or NULL */
	const char *exit_file;         /* guest file "CODE SIGNAL\n" goes to, or NULL */
	uint64_t log_max;              /* bytes kept per log (0: no bound) */
	int stdin_stream;              /* stdin through achan_exec_stdin */
};

struct achan_exec;

enum achan_ev_kind {
	ACHAN_EV_STDOUT = 1, /* data, len (len 0: end of file) */
	ACHAN_EV_STDERR,
	ACHAN_EV_EXIT, /* code, signal */
};

struct achan_ev {
	enum achan_ev_kind kind;
	const char *data; /* valid until the next achan_exec_next or free */
	size_t len;
	int code;
	int signal;
};

/* Starts a process; returns once the agent has reported its pid (a
 * detached one is then left running). NULL with e set otherwise. */
struct achan_exec *achan_exec_start(struct achan *c, const struct achan_exec_req *req, long *pid,
    struct err *e);
/* The next event of a process started without detach: 1 with ev filled,
 * 0 at the deadline or when *cancel became nonzero (checked at least
 * every 100 ms), -1 with e set (the connection failed). Output is granted
 * to the guest again as the caller takes it. After ACHAN_EV_EXIT there
 * are no more events. */
int achan_exec_next(struct achan_exec *x, long long deadline_ms, const atomic_int *cancel,
    struct achan_ev *ev, struct err *e) AAS_MUST_CHECK;
/* Sends stdin bytes (blocks while AP_STDIN_MAX bytes are in flight);
 * eof closes the process's stdin. */
int achan_exec_stdin(struct achan_exec *x, const void *p, size_t n, int eof,
    struct err *e) AAS_MUST_CHECK;
int achan_exec_signal(struct achan_exec *x, int sig, struct err *e) AAS_MUST_CHECK;
int achan_exec_resize(struct achan_exec *x, unsigned rows, unsigned cols,
    struct err *e) AAS_MUST_CHECK;
/* Abandons the channel (the process runs on unless signalled). */
void achan_exec_free(struct achan_exec *x);

/* Signals the process group of a process this agent started (by pid,
 * e.g. a background command started by an earlier aasd). */
int achan_kill(struct achan *c, long pid, int sig, long long deadline_ms,
    struct err *e) AAS_MUST_CHECK;

/* ---- files (with the sandbox user's rights) ---- */

/* Supplies the next bytes of a PUT: returns the count (0 at the end) or
 * -1 with e set to abort. */
typedef ssize_t (*achan_read_fn)(void *ctx, void *buf, size_t n, struct err *e);
/* Takes the bytes of a GET: 0, or -1 with e set to abort. */
typedef int (*achan_write_fn)(void *ctx, const void *buf, size_t n, struct err *e);

/* The receive window of a GET of more than AP_WINDOW_INIT bytes: the
 * agent may have this much of a file on its way (more frames in flight
 * per wake-up; the initial window stays the protocol's). */
#define ACHAN_GET_WINDOW (1024u * 1024)

#define ACHAN_PUT_TRUNC 1
#define ACHAN_PUT_PARENTS 2
#define ACHAN_PUT_EXCL 4
#define ACHAN_AS_ROOT 8   /* any file call: as root, for aasd's own files */
#define ACHAN_PUT_TREE 16 /* the bytes are a checked tar stream to unpack into path */

/* Writes a file from `read` at `offset`; *written is what the agent
 * stored. Guest errors come back as ERR_NOT_FOUND (ENOENT), ERR_FORBIDDEN
 * (EACCES, EPERM), ERR_LIMIT (ENOSPC, EDQUOT, EFBIG), ERR_INVALID (EISDIR,
 * ENOTDIR, ELOOP, EEXIST, ...) with the agent's message. */
int achan_put(struct achan *c, const char *path, unsigned mode, int flags, uint64_t offset,
    achan_read_fn read, void *ctx, uint64_t *written, long long deadline_ms,
    struct err *e) AAS_MUST_CHECK;
/* Reads [offset, offset + length) (length 0: to the end) into `write`;
 * *total is the file's whole size. */
int achan_get(struct achan *c, const char *path, int flags, uint64_t offset, uint64_t length,
    achan_write_fn write, void *ctx, uint64_t *total, long long deadline_ms,
    struct err *e) AAS_MUST_CHECK;

enum achan_ftype { ACHAN_FT_OTHER, ACHAN_FT_FILE, ACHAN_FT_DIR, ACHAN_FT_LINK };

struct achan_stat {
	enum achan_ftype type;
	uint64_t size;
	unsigned mode;
	int64_t mtime_ns;
	unsigned uid, gid;
};

int achan_stat(struct achan *c, const char *path, int flags, struct achan_stat *st,
    long long deadline_ms, struct err *e) AAS_MUST_CHECK;

/* One directory's entries, each given to fn (name is NUL-ended); fn
 * returns 0 to go on, 1 to stop early, -1 with e set to abort. */
typedef int (*achan_entry_fn)(void *ctx, const char *name, const struct achan_stat *st,
    struct err *e);
int achan_list(struct achan *c, const char *path, achan_entry_fn fn, void *ctx,
    long long deadline_ms, struct err *e) AAS_MUST_CHECK;

#endif
