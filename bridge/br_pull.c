/* br_pull.c - many files of a sandbox directory in one tar download
 * (bridge/br_pull.h). The archive comes from the sandbox, so it is read
 * through the same checks as an upload (base/tar.h, members that break a
 * rule left out); only names the caller asked for are written, and each
 * through br_lfile, which refuses a path leading outside the root. */
#include "bridge/br_pull.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bridge/br_local.h"
#include "bridge/br_remote.h"
#include "base/tar.h"

struct pull {
	struct br_call *c;
	const char *root;
	const struct br_entry *const *want;
	size_t n;
	unsigned char *got;
	br_pull_done_fn done;
	void *ctx;
	struct tar_filter *tf;
	struct br_lfile *f; /* the wanted file being written, or NULL */
	size_t cur;         /* its index in want */
	uint64_t left;      /* its bytes still to come */
	long long bytes;
};

/* The index of rel in want, or n. */
static size_t
find(const struct pull *p, const char *rel)
{
	size_t lo = 0, hi = p->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(p->want[mid]->rel, rel);

		if (c == 0)
			return mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return p->n;
}

static int
commit(struct pull *p, struct err *e)
{
	const struct br_entry *en = p->want[p->cur];
	struct br_lfile *f = p->f;

	p->f = NULL;
	if (br_lfile_commit(f, en->mode, en->mtime >= 0 ? en->mtime : (long long)time(NULL), e) < 0)
		return -1;
	p->got[p->cur] = 1;
	if (p->done)
		p->done(p->ctx, en, p->bytes);
	return 0;
}

static int
on_member(void *ctx, const struct tar_member *m, struct err *e)
{
	struct pull *p = ctx;
	char rel[TAR_MAX_NAME + 1];
	size_t i;

	if (m->type != '0' || m->name_len > TAR_MAX_NAME)
		return 0;
	memcpy(rel, m->name, m->name_len);
	rel[m->name_len] = '\0';
	if ((i = find(p, rel)) == p->n || p->got[i])
		return 0;
	if ((p->f = br_lfile_open(p->root, rel, e)) == NULL)
		return -1;
	p->cur = i;
	p->left = m->size;
	p->bytes = (long long)m->size;
	return m->size == 0 ? commit(p, e) : 0;
}

static int
on_data(void *ctx, const void *b, size_t n, struct err *e)
{
	struct pull *p = ctx;

	if (br_call_cancelled(p->c)) {
		err_set(e, ERR_CONFLICT, "cancelled");
		return -1;
	}
	if (p->f == NULL)
		return 0; /* a member nobody asked for */
	if (br_lfile_write(p->f, b, n, e) < 0)
		return -1;
	p->left -= n;
	return p->left == 0 ? commit(p, e) : 0;
}

/* The raw answer, as it arrives. */
static int
on_bytes(void *ctx, const void *b, size_t n, struct err *e)
{
	struct pull *p = ctx;

	return tar_filter_push(p->tf, b, n, on_data, p, e);
}

int
br_pull_tree(struct br_call *c, const char *sbx, const char *sdir, const char *root,
    const char *exclude, const struct br_entry *const *want, size_t n, unsigned char *got,
    long timeout_s, br_pull_done_fn done, void *ctx, struct err *e)
{
	const struct tar_rules rules = { .skip_bad = 1, .member = on_member };
	struct pull p = { .c = c,
		.root = root,
		.want = want,
		.n = n,
		.got = got,
		.done = done,
		.ctx = ctx };
	int rc = -1;

	if ((p.tf = tar_filter_new(&rules)) == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return -1;
	}
	if (br_remote_get_tree(c, sbx, sdir, exclude, on_bytes, &p, timeout_s, e) < 0 ||
	    tar_filter_finish(p.tf, on_data, &p, e) < 0)
		goto out;
	rc = 0;
out:
	if (p.f)
		br_lfile_abort(p.f);
	tar_filter_free(p.tf);
	return rc;
}
