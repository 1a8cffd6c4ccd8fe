/* guest_pty.c - terminals in a guest (guest.h, "terminals"): a login
 * shell on a pty of the agent's, its input and output streamed. */
#include "vmm/guest.h"

#include <stdlib.h>

#include "vmm/achan.h"
#include "vmm/guest_int.h"

struct guest_pty {
	struct guest_exec g;
};

/* -1 with e set unless a terminal of rows x cols may be asked for. */
static int
dims_ok(unsigned rows, unsigned cols, struct err *e)
{
	if (rows == 0 || cols == 0 || rows > GUEST_PTY_MAX_DIM || cols > GUEST_PTY_MAX_DIM) {
		err_set_field(e, "rows", "rows and cols: 1 to %d", GUEST_PTY_MAX_DIM);
		return -1;
	}
	return 0;
}

struct guest_pty *
guest_pty_start(struct vm_host *h, const char *dom, unsigned rows, unsigned cols, struct err *e)
{
	static const char *const argv[] = { "/bin/bash", "-l", NULL };
	const struct achan_exec_req req = {
		.argv = argv,
		.cwd = GUEST_HOME,
		.pty = 1,
		.rows = rows,
		.cols = cols,
		.stdin_stream = 1,
	};
	struct guest_pty *p;
	long pid;

	if (dims_ok(rows, cols, e) < 0)
		return NULL;
	p = calloc(1, sizeof(*p));
	if (p == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	if (guest_exec_open(h, dom, &req, &pid, &p->g, e) < 0) {
		free(p);
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
		int rc = achan_exec_next(p->g.x, deadline_ms, cancel, &ev, e);

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
	return achan_exec_stdin(p->g.x, data, len, 0, e);
}

int
guest_pty_resize(struct guest_pty *p, unsigned rows, unsigned cols, struct err *e)
{
	if (dims_ok(rows, cols, e) < 0)
		return -1;
	return achan_exec_resize(p->g.x, rows, cols, e);
}

void
guest_pty_free(struct guest_pty *p)
{
	if (p == NULL)
		return;
	guest_exec_close(&p->g);
	free(p);
}
