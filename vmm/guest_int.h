/* guest_int.h - what the guest module's pieces share (guest.c: commands;
 * guest_file.c: files; guest_list.c: listings; guest_pty.c: terminals).
 * Not for use outside vmm/guest*.c. */
#ifndef AAS_GUEST_INT_H
#define AAS_GUEST_INT_H

#include <stddef.h>

#include "base/err.h"
#include "vmm/achan.h"
#include "vmm/guest.h"

/* The deadline of one short agent request (a stat, a page, a kill). */
#define GUEST_SHORT_OP_MS 60000

/* A command in the guest and the agent connection it runs over. */
struct guest_exec {
	struct achan *c;
	struct achan_exec *x;
};

/* Starts `req` in domain `dom` over an agent connection of its own: 0 with
 * both held in g (*pid: the guest's), or -1 with e set and nothing held. */
int guest_exec_open(struct vm_host *h, const char *dom, const struct achan_exec_req *req, long *pid,
    struct guest_exec *g, struct err *e) AAS_MUST_CHECK;
/* Lets go of what g holds (a command still running runs on); an empty g
 * is fine. */
void guest_exec_close(struct guest_exec *g);

/* -1, with a refusal by the guest (ERR_FORBIDDEN) made the caller's bad
 * argument (ERR_INVALID), as file operations report it. */
int guest_file_error(struct err *e) AAS_FAILS;
/* Reads [offset, offset + max) of a file into a NUL-ended buffer (flags:
 * achan's, e.g. ACHAN_AS_ROOT); *total: the file's size. */
int guest_get_bytes(struct vm_host *h, const char *dom, const char *path, int flags,
    long long offset, size_t max, unsigned char **data, size_t *len, long long *total,
    struct err *e) AAS_MUST_CHECK;

#endif
