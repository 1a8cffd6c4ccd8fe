/* guest_tree.c - directories as tar streams (vmm/guest.h, "trees").
 *
 * An upload is the agent's PUT with AP_F_TREE: the guest unpacks into a
 * stage directory beneath which the kernel keeps every name, and moves it
 * into place only on the last DATA frame, which achan sends only once
 * `read` ended cleanly; any failure before abandons the channel and the
 * agent removes the stage (vmm/image/agent_tree.h). So an archive refused
 * part way, or a client that goes away, changes nothing. A download is
 * the guest's `tar -c` as the sandbox user. The caller checks the archive
 * itself (base/tar): this file moves bytes. */
#include "vmm/guest.h"

#include <signal.h>
#include <string.h>

#include "base/clock.h"
#include "base/fmt.h"
#include "vmm/achan.h"
#include "vmm/vm_agent.h"

#define TREE_MSG_MAX 600 /* tar's error text kept for the caller */

/* GNU tar: 1 is "some file changed as we read it", still an archive.
 * One file system: /proc, /sys and the like are not a tree's content.
 * A file the user cannot read is left out, not the end of the archive;
 * an upload's stage (agent_tree.h) is not content either. */
static const char get_script[] =
    "cd -- \"$1\" && shift && exec tar -c -b 256 -f - --one-file-system --ignore-failed-read "
    "--exclude='./.aas-tree-*' \"$@\" --format=gnu .\n";

struct run {
	struct achan_exec *x;
	char msg[TREE_MSG_MAX]; /* stderr kept */
	size_t msg_len;
	int exited, code;
};

static void
keep(char *dst, size_t cap, size_t *len, const char *p, size_t n)
{
	size_t room = cap - 1 - *len;

	if (n > room)
		n = room;
	memcpy(dst + *len, p, n);
	*len += n;
	dst[*len] = '\0';
}

/* Runs script with arg as $1 and then `extra` (n strings, at most
 * GUEST_TREE_EXCLUDE_MAX, each as it is: never through a shell's
 * parsing). */
static int
start(struct achan *c, struct run *r, const char *script, const char *arg, const char *const *extra,
    size_t n, struct err *e)
{
	const char *argv[5 + GUEST_TREE_EXCLUDE_MAX + 1] = { "/bin/sh", "-c", script, "aas-tree",
		arg };
	const struct achan_exec_req req = { .argv = argv };
	long pid;

	memset(r, 0, sizeof(*r));
	for (size_t i = 0; i < n; i++)
		argv[5 + i] = extra[i];
	argv[5 + n] = NULL;
	r->x = achan_exec_start(c, &req, &pid, e);
	return r->x ? 0 : -1;
}

/* Takes the events until the process exits (1) or the deadline (0);
 * stdout goes to `write`, the start of stderr is kept. */
static int
drain(struct run *r, long long deadline_ms, guest_write_fn write, void *ctx, struct err *e)
{
	while (!r->exited) {
		struct achan_ev ev;
		int rc = achan_exec_next(r->x, deadline_ms, NULL, &ev, e);

		if (rc < 0)
			return -1;
		if (rc == 0) {
			if (deadline_ms > clock_ms())
				continue;
			return 0;
		}
		if (ev.kind == ACHAN_EV_EXIT) {
			r->exited = 1;
			r->code = ev.signal ? 128 + ev.signal : ev.code;
		} else if (ev.kind == ACHAN_EV_STDERR) {
			keep(r->msg, sizeof(r->msg), &r->msg_len, ev.data, ev.len);
		} else if (ev.len > 0 && write(ctx, ev.data, ev.len, e) < 0) {
			return -1;
		}
	}
	return 1;
}

int
guest_tree_put(struct vm_host *h, const char *dom, const char *dir, guest_read_fn read, void *ctx,
    uint64_t max_bytes, struct err *e)
{
	long long deadline = guest_stream_deadline(max_bytes);
	struct achan *c = vm_agent_get(h, dom, e);
	uint64_t sent = 0;
	int rc;

	if (c == NULL)
		return -1;
	rc = achan_put(c, dir, 0, ACHAN_PUT_TREE, 0, read, ctx, &sent, deadline, e);
	achan_free(c);
	if (rc < 0 && e->field[0] == '\0' && e->kind != ERR_TIMEOUT && e->kind != ERR_UNAVAILABLE &&
	    e->kind != ERR_INTERNAL) {
		/* What the guest said about the directory: the caller's path. */
		char msg[sizeof(e->msg)];

		memcpy(msg, e->msg, sizeof(msg));
		err_clear(e);
		err_set_field(e, "path", "path: %s", msg);
	}
	return rc;
}

int
guest_tree_get(struct vm_host *h, const char *dom, const char *dir, const char *const *exclude,
    size_t n_exclude, guest_write_fn write, void *ctx, uint64_t max_bytes, struct err *e)
{
	char opts[GUEST_TREE_EXCLUDE_MAX][GUEST_TREE_PATTERN_MAX + 16];
	const char *extra[GUEST_TREE_EXCLUDE_MAX];
	long long deadline = guest_stream_deadline(max_bytes);
	struct achan *c = vm_agent_get(h, dom, e);
	struct run r = { 0 };
	int rc = -1;

	if (c == NULL)
		return -1;
	if (n_exclude > GUEST_TREE_EXCLUDE_MAX) {
		err_set_field(e, "exclude", "exclude: at most %d patterns", GUEST_TREE_EXCLUDE_MAX);
		goto out;
	}
	for (size_t i = 0; i < n_exclude; i++) {
		if (fmt_buf(opts[i], sizeof(opts[i]), "--exclude=%s", exclude[i]) < 0) {
			err_set_field(e, "exclude", "exclude: a pattern over %d bytes",
			    GUEST_TREE_PATTERN_MAX);
			goto out;
		}
		extra[i] = opts[i];
	}
	if (start(c, &r, get_script, dir, extra, n_exclude, e) < 0)
		goto out;
	if (drain(&r, deadline, write, ctx, e) < 0)
		goto out;
	if (!r.exited) {
		err_set(e, ERR_TIMEOUT, "the guest did not finish the archive in time");
		goto out;
	}
	if (r.code > 1) {
		err_set_field(e, "path", "path: %s: %s", dir, r.msg_len ? r.msg : "cannot archive");
		goto out;
	}
	rc = 0;
out:
	if (rc < 0 && r.x != NULL && !r.exited) {
		struct err ignore;

		err_clear(&ignore);
		err_ignore(achan_exec_signal(r.x, SIGKILL, &ignore));
	}
	achan_exec_free(r.x);
	achan_free(c);
	return rc;
}
