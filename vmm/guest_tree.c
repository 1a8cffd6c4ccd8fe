/* guest_tree.c - directories as tar streams through the guest's own tar,
 * run as the sandbox user (vmm/guest.h, "trees").
 *
 * An upload unpacks into a stage directory next to the target (in its
 * deepest existing ancestor, so on the same file system), and only a
 * stream that ended cleanly is linked into place (cp -al) by a second
 * command; anything else removes the stage. So an archive refused part
 * way, or a client that goes away, changes nothing in the target. The
 * caller checks the archive itself (base/tar): this file moves bytes. */
#include "vmm/guest.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "base/clock.h"
#include "vmm/achan.h"
#include "vmm/vm_agent.h"

#define TREE_CHUNK (64 * 1024) /* stdin pieces sent to the guest */
#define TREE_MSG_MAX 600       /* guest error text kept for the caller */
#define TREE_STAGE_MAX 4200
#define TREE_SHORT_MS 60000

/* $1 the target, $2 the stage's name: prints the stage's path, then
 * unpacks stdin into it; on failure the stage goes and tar's words go to
 * stderr. */
static const char put_script[] =
    "a=$1\n"
    "while [ ! -d \"$a\" ]; do a=${a%/*}; [ -n \"$a\" ] || a=/; done\n"
    "s=${a%/}/$2\n"
    "mkdir -m 700 -- \"$s\" || exit 3\n"
    "printf '%s\\n' \"$s\"\n"
    "tar -x -f - -C \"$s\" --no-same-owner --no-same-permissions 2>\"$s.err\" && exit 0\n"
    "head -c 500 \"$s.err\" >&2; rm -rf -- \"$s\" \"$s.err\"; exit 2\n";

/* $1 the stage, $2 the target: links what was unpacked into place (the
 * top level one by one, so the target's own mode and times stay). */
static const char commit_script[] =
    "s=$1 d=$2\n"
    "mkdir -p -- \"$d\" && cd -- \"$s\" &&\n"
    "find . -mindepth 1 -maxdepth 1 -exec cp -al --remove-destination -t \"$d\" -- {} +\n"
    "r=$?; cd /; rm -rf -- \"$s\" \"$s.err\"; exit $r\n";

static const char drop_script[] = "rm -rf -- \"$1\" \"$1.err\"\n";

/* GNU tar: 1 is "some file changed as we read it", still an archive. */
static const char get_script[] = "cd -- \"$1\" && exec tar -c -f - --format=gnu .\n";

struct run {
	struct achan_exec *x;
	char out[TREE_STAGE_MAX]; /* stdout kept (the stage's path) */
	size_t out_len;
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

static int
start(struct achan *c, struct run *r, const char *script, const char *a1, const char *a2,
    int with_stdin, struct err *e)
{
	const char *argv[] = { "/bin/sh", "-c", script, "aas-tree", a1, a2, NULL };
	const struct achan_exec_req req = { .argv = argv, .stdin_stream = with_stdin };
	long pid;

	memset(r, 0, sizeof(*r));
	r->x = achan_exec_start(c, &req, &pid, e);
	return r->x ? 0 : -1;
}

/* Takes the events there are until the deadline (0: only what is queued);
 * stdout goes to `write` when given, else it is kept. 1 once it exited. */
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
		} else if (write != NULL) {
			if (ev.len > 0 && write(ctx, ev.data, ev.len, e) < 0)
				return -1;
		} else {
			keep(r->out, sizeof(r->out), &r->out_len, ev.data, ev.len);
		}
	}
	return 1;
}

/* Runs a short command to its end; 0 when it exited 0. */
static int
run_short(struct achan *c, const char *script, const char *a1, const char *a2, const char *what,
    struct err *e)
{
	struct run r;
	int rc = -1;

	if (start(c, &r, script, a1, a2, 0, e) < 0)
		return -1;
	if (drain(&r, clock_ms() + TREE_SHORT_MS, NULL, NULL, e) < 0)
		goto out;
	if (!r.exited) {
		err_set(e, ERR_TIMEOUT, "%s: the guest did not finish in time", what);
		goto out;
	}
	if (r.code != 0) {
		err_set_field(e, "path", "%s: %s", what, r.msg_len ? r.msg : "failed");
		goto out;
	}
	rc = 0;
out:
	achan_exec_free(r.x);
	return rc;
}

static void
stage_name(char *out, size_t n)
{
	unsigned char raw[8] = { 0 };
	char hex[17];

	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw)) {
		unsigned long long t = (unsigned long long)clock_ms();
		memcpy(raw, &t, sizeof(raw) < sizeof(t) ? sizeof(raw) : sizeof(t));
	}
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(hex + 2 * i, 3, "%02x", raw[i]);
	snprintf(out, n, ".aas-tree-%s", hex);
}

int
guest_tree_put(struct vm_host *h, const char *dom, const char *dir, guest_read_fn read, void *ctx,
    uint64_t max_bytes, struct err *e)
{
	long long deadline = clock_ms() + TREE_SHORT_MS +
	    (long long)(max_bytes / GUEST_STREAM_MIN_BPS) * 1000;
	struct achan *c = vm_agent_get(h, dom, e);
	char name[32], *buf = NULL, *nl;
	struct run r = { 0 };
	int rc = -1, clean_end = 0;

	if (c == NULL)
		return -1;
	buf = malloc(TREE_CHUNK);
	if (buf == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	stage_name(name, sizeof(name));
	if (start(c, &r, put_script, dir, name, 1, e) < 0)
		goto out;
	for (;;) {
		ssize_t n = read(ctx, buf, TREE_CHUNK, e);

		if (n < 0)
			break;
		if (achan_exec_stdin(r.x, buf, (size_t)n, n == 0, e) < 0)
			break;
		/* A guest that gave up early (no room for the stage) is not
		 * fed the rest of a large body. */
		if (drain(&r, 0, NULL, NULL, e) < 0)
			break;
		if (n == 0) {
			clean_end = 1;
			break;
		}
		if (r.exited)
			break;
	}
	if (!clean_end && !r.exited) {
		/* Stopped part way: the input ends here, tar finishes with
		 * what it has, and the stage goes below. */
		struct err ignore;

		err_clear(&ignore);
		if (achan_exec_stdin(r.x, NULL, 0, 1, &ignore) < 0 ||
		    drain(&r, clock_ms() + TREE_SHORT_MS, NULL, NULL, &ignore) <= 0)
			(void)achan_exec_signal(r.x, SIGKILL, &ignore);
	}
	if (clean_end && drain(&r, deadline, NULL, NULL, e) < 0)
		clean_end = 0;
	if (clean_end && !r.exited) {
		err_set(e, ERR_TIMEOUT, "path: the guest did not finish unpacking in time");
		clean_end = 0;
	}
	if (r.exited && r.code != 0 && (clean_end || e->kind == ERR_NONE)) {
		err_set_field(e, "path", "path: %s: %s", dir,
		    r.msg_len ? r.msg : "cannot unpack there");
		clean_end = 0;
	}
	nl = memchr(r.out, '\n', r.out_len);
	if (nl != NULL)
		*nl = '\0';
	if (!clean_end) {
		struct err ignore;

		err_clear(&ignore);
		if (nl != NULL && r.out[0] == '/')
			(void)run_short(c, drop_script, r.out, "", "clean-up", &ignore);
		goto out;
	}
	if (nl == NULL || r.out[0] != '/') {
		err_set(e, ERR_INTERNAL, "the guest did not say where it unpacked");
		goto out;
	}
	if (run_short(c, commit_script, r.out, dir, "path", e) < 0)
		goto out;
	rc = 0;
out:
	achan_exec_free(r.x);
	achan_free(c);
	free(buf);
	return rc;
}

int
guest_tree_get(struct vm_host *h, const char *dom, const char *dir, guest_write_fn write, void *ctx,
    uint64_t max_bytes, struct err *e)
{
	long long deadline = clock_ms() + TREE_SHORT_MS +
	    (long long)(max_bytes / GUEST_STREAM_MIN_BPS) * 1000;
	struct achan *c = vm_agent_get(h, dom, e);
	struct run r = { 0 };
	int rc = -1;

	if (c == NULL)
		return -1;
	if (start(c, &r, get_script, dir, "", 0, e) < 0)
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
		(void)achan_exec_signal(r.x, SIGKILL, &ignore);
	}
	achan_exec_free(r.x);
	achan_free(c);
	return rc;
}
