/* br_sync.c - sync_to_sandbox and sync_from_sandbox. Both first list the
 * two trees and refuse bad paths before anything moves; deletions
 * (delete_extras) come before copies so a kind change (a file where a
 * directory was) goes through. */
#include "bridge/br_sync.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bridge/br_local.h"
#include "bridge/br_path.h"
#include "bridge/br_plan.h"
#include "bridge/br_pull.h"
#include "bridge/br_remote.h"
#include "bridge/br_tree.h"
#include "base/fmt.h"

#define SYNC_MAX_ENTRIES 200000
#define SYNC_LIST_CAP 200 /* names shown in sent/deleted */
/* Files to fetch from which one tree download replaces a request each. */
#define SYNC_PULL_TREE_MIN 8

struct sync {
	struct br_call *c;
	const char *sbx;
	int to_sandbox; /* else from it */
	int delete_extras;
	char root[PATH_MAX]; /* local, real */
	char sdir[4200];     /* sandbox, absolute */
	struct br_excl *x;
	struct br_tree *local, *remote;
	struct br_batch *batch;
	/* report */
	json_t *sent, *deleted, *warnings;
	long long files_sent, files_skipped, files_deleted, dirs_deleted, bytes;
	int lists_truncated;
	struct timespec t0;
};

static void
note(struct sync *s, json_t *list, const char *rel)
{
	if (json_array_size(list) < SYNC_LIST_CAP)
		json_array_append_new(list, json_string(rel));
	else
		s->lists_truncated = 1;
}

static void
sync_free(struct sync *s)
{
	br_excl_free(s->x);
	br_tree_free(s->local);
	br_tree_free(s->remote);
	br_batch_free(s->batch);
	json_decref(s->sent);
	json_decref(s->deleted);
	json_decref(s->warnings);
}

static int
sync_init(struct sync *s, struct br_call *c, const json_t *args, int to_sandbox, struct err *e)
{
	const char *local = json_string_value(json_object_get(args, "local_path"));
	const char *sp = json_string_value(json_object_get(args, "sandbox_path"));

	memset(s, 0, sizeof(*s));
	clock_gettime(CLOCK_MONOTONIC, &s->t0);
	s->c = c;
	s->to_sandbox = to_sandbox;
	s->sbx = json_string_value(json_object_get(args, "sandbox_id"));
	s->delete_extras = json_is_true(json_object_get(args, "delete_extras"));
	s->sent = json_array();
	s->deleted = json_array();
	s->warnings = json_array();
	s->local = br_tree_new(SYNC_MAX_ENTRIES);
	s->remote = br_tree_new(SYNC_MAX_ENTRIES);
	if (!s->sent || !s->deleted || !s->warnings || !s->local || !s->remote) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return -1;
	}
	if ((s->batch = br_batch_new(c, s->sbx, e)) == NULL ||
	    (s->x = br_excl_new(json_object_get(args, "excludes"), e)) == NULL ||
	    br_path_sandbox_dir(sp, s->sdir, sizeof(s->sdir), e) < 0 ||
	    br_local_root(local, !to_sandbox, s->root, sizeof(s->root), e) < 0)
		return -1;
	return 0;
}

static json_t *
report(struct sync *s, const char *direction)
{
	struct timespec t1;
	json_t *r;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	r = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:O, s:O, s:b, s:O, s:I}",
	    "sandbox_id", s->sbx, "direction", direction, "local_path", s->root, "sandbox_path",
	    s->sdir, "files_sent", (json_int_t)s->files_sent, "files_skipped",
	    (json_int_t)s->files_skipped, "files_deleted", (json_int_t)s->files_deleted,
	    "dirs_deleted", (json_int_t)s->dirs_deleted, "bytes_sent", (json_int_t)s->bytes, "sent",
	    s->sent, "deleted", s->deleted, "lists_truncated", s->lists_truncated, "warnings",
	    s->warnings, "duration_ms",
	    (json_int_t)((t1.tv_sec - s->t0.tv_sec) * 1000 +
		(t1.tv_nsec - s->t0.tv_nsec) / 1000000));
	return r;
}

static int
stop_if_cancelled(struct sync *s, struct err *e)
{
	if (!br_call_cancelled(s->c))
		return 0;
	err_set(e, ERR_CONFLICT, "cancelled");
	return -1;
}

static size_t
count_files(const struct br_tree *t)
{
	size_t n = 0;

	for (size_t i = 0; i < br_tree_count(t); i++)
		n += br_tree_at(t, i)->type == 'f';
	return n;
}

/* The destination entry a source file meets, once delete_extras has
 * removed what is of the wrong kind. */
static const struct br_entry *
dest_of(const struct sync *s, const struct br_tree *src, const struct br_tree *dst, const char *rel)
{
	const struct br_entry *d = br_tree_find(dst, rel);

	if (d && s->delete_extras && br_plan_extra(src, d, s->x))
		return NULL;
	return d;
}

/* One direction's way of moving what the destination lacks. */
struct copy_ops {
	const char *field; /* the argument a conflict names */
	const char *clash; /* where the directory and the file are, in its message */
	/* A directory the destination lacks (or has as another kind). */
	int (*dir)(void *ctx, const struct br_entry *en, struct err *e);
	/* A file the destination lacks or has with another size or time. */
	int (*file)(void *ctx, const struct br_entry *en, struct err *e);
	/* A file the destination has as it is; NULL: nothing to do. */
	void (*skipped)(void *ctx);
};

/* The source tree against the destination's, in the source's (sorted)
 * order: what differs goes to ops; a file where the destination keeps a
 * directory is a conflict. The sandbox's links and special files are
 * left out with a warning. */
static int
copy_walk(struct sync *s, const struct copy_ops *ops, void *ctx, struct err *e)
{
	const struct br_tree *src = s->to_sandbox ? s->local : s->remote;
	const struct br_tree *dst = s->to_sandbox ? s->remote : s->local;
	size_t n = br_tree_count(src);

	for (size_t i = 0; i < n; i++) {
		const struct br_entry *en = br_tree_at(src, i);
		const struct br_entry *d = dest_of(s, src, dst, en->rel);

		if (stop_if_cancelled(s, e) < 0)
			return -1;
		if (en->type == 'd') {
			/* Empty directories too; parents of files come with them. */
			if ((d == NULL || d->type != 'd') && ops->dir(ctx, en, e) < 0)
				return -1;
			continue;
		}
		if (!s->to_sandbox && en->type != 'f') {
			br_warn(s->warnings, "%s: a %s in the sandbox, left out", en->rel,
			    en->type == 'l' ? "symbolic link" : "special file");
			continue;
		}
		switch (br_plan_file(en, d)) {
		case BR_SKIP:
			s->files_skipped++;
			if (ops->skipped)
				ops->skipped(ctx);
			break;
		case BR_CONFLICT:
			err_set_at(e, ERR_CONFLICT, ops->field,
			    "%s: %s is a directory %s (delete_extras: true replaces it)",
			    ops->field, en->rel, ops->clash);
			return -1;
		case BR_SEND:
			if (ops->file(ctx, en, e) < 0)
				return -1;
			break;
		}
	}
	return 0;
}

/* ---- to the sandbox ---- */

static int
remote_path(const struct sync *s, const char *rel, char *out, size_t n, struct err *e)
{
	if (br_path_join(s->sdir, rel, out, n) < 0) {
		err_set_field(e, "sandbox_path", "sandbox_path: %s: too long", rel);
		return -1;
	}
	return 0;
}

static int
delete_remote_extras(struct sync *s, struct err *e)
{
	char path[8400];
	size_t n = br_tree_count(s->remote);

	/* Files and links first, then directories deepest first (a child
	 * sorts after its parent); rmdir leaves one that still holds
	 * excluded names. */
	for (size_t i = 0; i < n; i++) {
		const struct br_entry *d = br_tree_at(s->remote, i);
		if (d->type == 'd' || !br_plan_extra(s->local, d, s->x))
			continue;
		if (remote_path(s, d->rel, path, sizeof(path), e) < 0 ||
		    br_batch_add(s->batch, "rm -f --", path, "", e) < 0)
			return -1;
		s->files_deleted++;
		note(s, s->deleted, d->rel);
	}
	for (size_t i = n; i-- > 0;) {
		const struct br_entry *d = br_tree_at(s->remote, i);
		if (d->type != 'd' || !br_plan_extra(s->local, d, s->x))
			continue;
		if (remote_path(s, d->rel, path, sizeof(path), e) < 0 ||
		    br_batch_add(s->batch, "rmdir --", path, " 2>/dev/null && echo + || :", e) < 0)
			return -1;
		note(s, s->deleted, d->rel);
	}
	if (br_batch_flush(s->batch, e) < 0)
		return -1;
	s->dirs_deleted = br_batch_marks(s->batch);
	return 0;
}

static void
pack_progress(void *ctx, size_t done, size_t total, const char *rel)
{
	struct sync *s = ctx;
	char msg[160];

	(void)rel;
	fmt_cut(msg, sizeof(msg), "%zu of %zu entries", done, total);
	br_call_progress(s->c, (double)done, (double)total, msg);
}

/* A push's pack, and the sync it counts in. */
struct pushing {
	struct sync *s;
	struct br_pack *p;
};

static int
push_dir(void *ctx, const struct br_entry *en, struct err *e)
{
	struct pushing *ps = ctx;

	return br_pack_add(ps->p, en, e);
}

static int
push_file(void *ctx, const struct br_entry *en, struct err *e)
{
	struct pushing *ps = ctx;

	if (br_pack_add(ps->p, en, e) < 0)
		return -1;
	ps->s->files_sent++;
	ps->s->bytes += en->size;
	note(ps->s, ps->s->sent, en->rel);
	return 0;
}

/* What differs goes in one tar stream (PUT .../tree): directories the
 * sandbox lacks, files it lacks or has with another size or time. The
 * archive carries modes and times, so the next run skips what it sent. */
static int
push(struct sync *s, int missing, struct err *e)
{
	static const struct copy_ops ops = {
		.field = "sandbox_path",
		.clash = "in the sandbox and a file here",
		.dir = push_dir,
		.file = push_file,
	};
	struct pushing ps = { s, br_pack_new(s->root) };
	int rc = -1;

	if (ps.p == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return -1;
	}
	br_pack_on_member(ps.p, pack_progress, s);
	if (copy_walk(s, &ops, &ps, e) < 0)
		goto out;
	if (br_pack_count(ps.p) > 0) {
		if (br_remote_put_tree(s->c, s->sbx, s->sdir, ps.p, e) < 0)
			goto out;
	} else if (missing && br_batch_add(s->batch, "mkdir -p --", s->sdir, "", e) < 0) {
		goto out;
	}
	br_pack_warnings(ps.p, s->warnings);
	rc = br_batch_flush(s->batch, e);
out:
	br_pack_free(ps.p);
	return rc;
}

/* ---- from the sandbox ---- */

static int
delete_local_extras(struct sync *s, struct err *e)
{
	for (size_t i = br_tree_count(s->local); i-- > 0;) {
		const struct br_entry *d = br_tree_at(s->local, i);
		int r;

		if (!br_plan_extra(s->remote, d, s->x))
			continue;
		if ((r = br_local_remove(s->root, d->rel, d->type == 'd', e)) < 0)
			return -1;
		if (r == 0)
			continue;
		if (d->type == 'd')
			s->dirs_deleted++;
		else
			s->files_deleted++;
		note(s, s->deleted, d->rel);
	}
	return 0;
}

/* Pages of a sandbox file into a temporary file renamed into place. */
static int
fetch_file(struct sync *s, const struct br_entry *en, struct err *e)
{
	char path[8400];
	struct br_lfile *f;
	long long off = 0, total = -1;
	int rc = 0;

	if (remote_path(s, en->rel, path, sizeof(path), e) < 0 ||
	    (f = br_lfile_open(s->root, en->rel, e)) == NULL)
		return -1;
	for (;;) {
		struct br_resp r;
		size_t got;

		if ((rc = stop_if_cancelled(s, e)) < 0 ||
		    (rc = br_remote_get(s->c, s->sbx, path, off, BR_REMOTE_PAGE, &r, e)) < 0)
			break;
		got = r.len;
		if (r.file_size >= 0)
			total = r.file_size;
		rc = br_lfile_write(f, r.body, r.len, e);
		br_resp_clear(&r);
		off += (long long)got;
		if (rc < 0 || got == 0 || (total >= 0 ? off >= total : got < BR_REMOTE_PAGE))
			break;
	}
	if (rc < 0) {
		br_lfile_abort(f);
		return -1;
	}
	if (br_lfile_commit(f, en->mode, en->mtime >= 0 ? en->mtime : (long long)time(NULL), e) < 0)
		return -1;
	s->files_sent++;
	s->bytes += off;
	note(s, s->sent, en->rel);
	return 0;
}

/* A pull's files to fetch, and its progress over all the files. */
struct pulled {
	struct sync *s;
	size_t done, total;
	const struct br_entry **want; /* in the tree's order: sorted */
	size_t nwant;
};

static void
pulled_progress(struct pulled *p)
{
	char msg[160];

	fmt_cut(msg, sizeof(msg), "%zu of %zu files", ++p->done, p->total);
	br_call_progress(p->s->c, (double)p->done, (double)p->total, msg);
}

static void
pulled_one(void *ctx, const struct br_entry *en, long long bytes)
{
	struct pulled *p = ctx;

	p->s->files_sent++;
	p->s->bytes += bytes;
	note(p->s, p->s->sent, en->rel);
	pulled_progress(p);
}

/* Many files in one tree download, the service leaving out what it can
 * of the excluded names; got[i] marks those written. */
static int
pull_tree(struct pulled *pd, unsigned char *got, struct err *e)
{
	struct sync *s = pd->s;
	char excl[8192];
	long long bytes = 0;

	for (size_t i = 0; i < br_tree_count(s->remote); i++)
		if (br_tree_at(s->remote, i)->type == 'f')
			bytes += br_tree_at(s->remote, i)->size;
	br_excl_names(s->x, excl, sizeof(excl));
	/* The usual bound, and time for the listed bytes at a slow 1 MB/s. */
	return br_pull_tree(s->c, s->sbx, s->sdir, s->root, excl, pd->want, pd->nwant, got,
	    s->c->cfg->request_timeout_s + (long)(bytes / 1000000), pulled_one, pd, e);
}

/* The files to fetch: many in one tree download, the rest (or all, when
 * few) one request each. */
static int
fetch_all(struct pulled *pd, struct err *e)
{
	size_t n = pd->nwant;
	unsigned char *got = calloc(n ? n : 1, 1);
	int rc = -1;

	if (got == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return -1;
	}
	if (n >= SYNC_PULL_TREE_MIN && pull_tree(pd, got, e) < 0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		if (got[i])
			continue;
		if (fetch_file(pd->s, pd->want[i], e) < 0)
			goto out;
		pulled_progress(pd);
	}
	rc = 0;
out:
	free(got);
	return rc;
}

static int
pull_dir(void *ctx, const struct br_entry *en, struct err *e)
{
	struct pulled *p = ctx;

	return br_local_mkdirs(p->s->root, en->rel, e);
}

static int
pull_file(void *ctx, const struct br_entry *en, struct err *e)
{
	struct pulled *p = ctx;

	(void)e;
	p->want[p->nwant++] = en;
	return 0;
}

static void
pull_skipped(void *ctx)
{
	pulled_progress(ctx);
}

static int
pull(struct sync *s, struct err *e)
{
	static const struct copy_ops ops = {
		.field = "local_path",
		.clash = "here and a file in the sandbox",
		.dir = pull_dir,
		.file = pull_file,
		.skipped = pull_skipped,
	};
	size_t n = br_tree_count(s->remote);
	struct pulled pd = { .s = s, .total = count_files(s->remote) };
	int rc = -1;

	if ((pd.want = calloc(n ? n : 1, sizeof(*pd.want))) == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return -1;
	}
	if (copy_walk(s, &ops, &pd, e) == 0)
		rc = fetch_all(&pd, e);
	free(pd.want);
	return rc;
}

/* ---- both ---- */

/* Both trees listed and sorted, the source's first; for a push, a
 * sandbox directory that does not exist yet is no error (*missing). */
static int
scan(struct sync *s, int *missing, struct err *e)
{
	if (s->to_sandbox) {
		if (br_local_scan(s->root, s->x, 1, s->local, s->warnings, e) < 0 ||
		    br_remote_scan(s->c, s->sbx, s->sdir, s->x, s->remote, missing, e) < 0)
			return -1;
	} else if (br_remote_scan(s->c, s->sbx, s->sdir, s->x, s->remote, NULL, e) < 0 ||
	    br_local_scan(s->root, s->x, 0, s->local, s->warnings, e) < 0) {
		return -1;
	}
	br_tree_sort(s->local);
	br_tree_sort(s->remote);
	return 0;
}

/* A sync either way: the source listed first, then the destination;
 * extras deleted before anything is copied. */
static json_t *
sync_run(struct br_call *c, const json_t *args, int to_sandbox, struct err *e)
{
	struct sync s;
	json_t *out = NULL;
	int missing = 0;

	if (sync_init(&s, c, args, to_sandbox, e) < 0 || scan(&s, &missing, e) < 0)
		goto out;
	if (s.delete_extras && !missing &&
	    (to_sandbox ? delete_remote_extras(&s, e) : delete_local_extras(&s, e)) < 0)
		goto out;
	if ((to_sandbox ? push(&s, missing, e) : pull(&s, e)) < 0)
		goto out;
	out = report(&s, to_sandbox ? "to_sandbox" : "from_sandbox");
out:
	sync_free(&s);
	return out;
}

json_t *
br_sync_to(struct br_call *c, const json_t *args, struct err *e)
{
	return sync_run(c, args, 1, e);
}

json_t *
br_sync_from(struct br_call *c, const json_t *args, struct err *e)
{
	return sync_run(c, args, 0, e);
}
