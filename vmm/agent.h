/* agent.h - the QEMU guest agent, spoken through libvirt (agent_). Every
 * request stays below ~128 KiB and every reply far below libvirt's 10 MiB
 * limit: crossing that limit breaks the agent channel for the VM's life. */
#ifndef AAS_AGENT_H
#define AAS_AGENT_H

#include <stddef.h>

#include <jansson.h>

#include "base/err.h"
#include "vmm/vm.h"

/* Raw bytes per guest-file-write (~87 KiB as base64). Larger requests were
 * seen to wedge the agent channel for the VM's life under load. */
#define AGENT_MAX_CHUNK (64 * 1024)
#define AGENT_MAX_READ (2 * 1024 * 1024) /* raw bytes per guest-file-read */
#define AGENT_MAX_CAPTURE (1024 * 1024)  /* captured output we accept */

/* Runs one agent command. Returns the "return" member (new reference) or
 * NULL with e set: ERR_TIMEOUT when the agent did not answer in time,
 * ERR_UNAVAILABLE when it is not (yet) connected. */
json_t *agent_call(struct vm_host *h, const char *domain, const char *execute, json_t *args,
    int timeout_s, struct err *e);

int agent_ping(struct vm_host *h, const char *domain, int timeout_s, struct err *e) AAS_MUST_CHECK;

struct agent_exec {
	const char *path;
	const char *const *argv;    /* NULL-terminated, without argv[0] */
	const char *const *env;     /* NULL-terminated "K=V", or NULL */
	const unsigned char *input; /* stdin bytes, or NULL */
	size_t input_len;
	int capture; /* collect stdout/stderr (bounded!) */
};

/* Starts a process; fills its guest pid. */
int agent_exec_start(struct vm_host *h, const char *domain, const struct agent_exec *x, long *pid,
    struct err *e) AAS_MUST_CHECK;

struct agent_exec_status {
	int exited;
	int exit_code; /* -1 when killed by a signal */
	int signal;
	char *out; /* captured stdout (malloc'd, NUL-ended) or NULL */
	size_t out_len;
	char *err;
	size_t err_len;
};

/* One status poll. The agent forgets an exited process once reported. */
int agent_exec_status(struct vm_host *h, const char *domain, long pid, struct agent_exec_status *st,
    struct err *e) AAS_MUST_CHECK;
void agent_exec_status_clear(struct agent_exec_status *st);

/* Runs a short helper process to completion (poll until deadline_ms),
 * capturing at most AGENT_MAX_CAPTURE of output. */
int agent_run(struct vm_host *h, const char *domain, const struct agent_exec *x, int deadline_ms,
    struct agent_exec_status *st, struct err *e) AAS_MUST_CHECK;

/* Writes a whole file as root in AGENT_MAX_CHUNK pieces (created 0666
 * by the agent; callers move and chown it as needed). */
int agent_file_write(struct vm_host *h, const char *domain, const char *path,
    const unsigned char *data, size_t len, struct err *e) AAS_MUST_CHECK;
/* Reads up to `max` bytes from `offset`; *eof set when the file ended. */
int agent_file_read(struct vm_host *h, const char *domain, const char *path, long long offset,
    size_t max, unsigned char **data, size_t *len, int *eof, struct err *e) AAS_MUST_CHECK;

#endif
