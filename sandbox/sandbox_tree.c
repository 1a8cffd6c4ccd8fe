/* sandbox_tree.c - directories in and out of a sandbox as tar streams.
 * The archive passes through base/tar on its way: an upload is refused at
 * the first member that breaks a rule (and the guest then changes
 * nothing, vmm/guest_tree.c), a download leaves such members out. */
#include "sandbox/sandbox_int.h"

#include <stdlib.h>
#include <string.h>

#include "base/tar.h"
#include "vmm/guest.h"

#define TREE_IN_CHUNK (64 * 1024)
/* What one input chunk can become: a member's header may grow by a pax
 * header (1 KiB) for every 512 bytes read; the end blocks besides. */
#define TREE_PENDING_MAX (4 * TREE_IN_CHUNK + 4 * TAR_BLOCK)

struct tree_in {
	guest_read_fn read; /* the client's bytes */
	void *ctx;
	struct tar_filter *f;
	unsigned char *in;
	unsigned char *pend; /* checked bytes not yet handed on */
	size_t pend_off, pend_len;
	int done;
};

static int
pend_emit(void *ctx, const void *p, size_t n, struct err *e)
{
	struct tree_in *t = ctx;

	if (n > TREE_PENDING_MAX - t->pend_len) {
		err_set(e, ERR_INTERNAL, "tree: checked bytes outgrew their buffer");
		return -1;
	}
	memcpy(t->pend + t->pend_len, p, n);
	t->pend_len += n;
	return 0;
}

/* guest_read_fn: the checked archive, the end blocks only once the whole
 * input was checked. Fills buf when the input has that much, so the
 * guest gets whole frames however the body arrives. */
static ssize_t
tree_in_read(void *ctx, void *buf, size_t n, struct err *e)
{
	struct tree_in *t = ctx;
	size_t got = 0;

	while (got < n) {
		size_t k;

		if (t->pend_off == t->pend_len) {
			ssize_t r;

			if (t->done)
				break;
			t->pend_off = t->pend_len = 0;
			r = t->read(t->ctx, t->in, TREE_IN_CHUNK, e);
			if (r < 0)
				return -1;
			if (r == 0) {
				if (tar_filter_finish(t->f, pend_emit, t, e) < 0)
					return -1;
				t->done = 1;
			} else if (tar_filter_push(t->f, t->in, (size_t)r, pend_emit, t, e) < 0) {
				return -1;
			}
			continue;
		}
		k = t->pend_len - t->pend_off < n - got ? t->pend_len - t->pend_off : n - got;
		memcpy((char *)buf + got, t->pend + t->pend_off, k);
		t->pend_off += k;
		got += k;
	}
	return (ssize_t)got;
}

static void
stats_out(const struct tar_filter *f, struct sbx_tree_res *res)
{
	const struct tar_stats *st = tar_filter_stats(f);

	res->files = st->files;
	res->dirs = st->dirs;
	res->symlinks = st->symlinks;
	res->hardlinks = st->hardlinks;
	res->bytes = st->bytes;
	res->skipped = st->skipped;
}

int
sbx_tree_put(struct sbx *s, const char *account, const char *sandbox_id, const char *path,
    guest_read_fn read, void *ctx, uint64_t max_bytes, uint64_t max_entries,
    struct sbx_tree_res *res, struct err *e)
{
	const struct tar_rules rules = { .skip_bad = 0,
		.max_member_bytes = max_bytes,
		.max_members = max_entries };
	struct tree_in t = { .read = read, .ctx = ctx };
	struct store_row row;
	struct vm_host *h;
	char domain[64];
	int rc = -1;

	memset(res, 0, sizeof(*res));
	if (path == NULL) {
		err_set_field(e, "path", "path: required (the directory to unpack into)");
		return -1;
	}
	if ((h = sbx_file_vm(s, account, sandbox_id, path, res->path, sizeof(res->path), &row,
		 domain, sizeof(domain), e)) == NULL)
		return -1;
	t.f = tar_filter_new(&rules);
	t.in = malloc(TREE_IN_CHUNK);
	t.pend = malloc(TREE_PENDING_MAX);
	if (t.f == NULL || t.in == NULL || t.pend == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	if (guest_tree_put(h, domain, res->path, tree_in_read, &t, max_bytes, e) < 0) {
		/* A refused archive is the caller's; a failed guest may end the
		 * sandbox (sbx_guest_failed). */
		/* The archive's limits are a bad request, not a quota. */
		if (e->kind == ERR_LIMIT && strcmp(e->field, "member") == 0)
			e->kind = ERR_INVALID;
		if (e->kind == ERR_INVALID || e->kind == ERR_LIMIT)
			goto out;
		(void)sbx_guest_failed(s, sandbox_id, row.host, e);
		goto out;
	}
	stats_out(t.f, res);
	rc = 0;
out:
	tar_filter_free(t.f);
	free(t.in);
	free(t.pend);
	return rc;
}

struct tree_out {
	guest_write_fn write; /* to the client */
	void *ctx;
	sbx_tree_start_fn start;
	struct tar_filter *f;
	uint64_t sent, max;
	int started;
};

static int
out_emit(void *ctx, const void *p, size_t n, struct err *e)
{
	struct tree_out *t = ctx;

	if (n > t->max - t->sent) {
		err_set_field(e, "AAS_MAX_FILE_BYTES",
		    "the archive is larger than AAS_MAX_FILE_BYTES (%llu bytes); ask for a "
		    "smaller directory",
		    (unsigned long long)t->max);
		e->kind = ERR_LIMIT;
		return -1;
	}
	if (!t->started) {
		if (t->start(t->ctx, e) < 0)
			return -1;
		t->started = 1;
	}
	t->sent += n;
	return t->write(t->ctx, p, n, e);
}

/* guest_write_fn: the guest's tar through the filter. */
static int
tree_out_write(void *ctx, const void *buf, size_t n, struct err *e)
{
	struct tree_out *t = ctx;

	return tar_filter_push(t->f, buf, n, out_emit, t, e);
}

/* "a,b*,c": GNU tar --exclude patterns, each 1 to GUEST_TREE_PATTERN_MAX
 * printable bytes, at most GUEST_TREE_EXCLUDE_MAX; NULL or "" is none.
 * The guest's tar gets each as one argument, never through a shell. */
static int
exclude_parse(const char *list, char pats[][GUEST_TREE_PATTERN_MAX + 1], const char **pat,
    size_t *n, struct err *e)
{
	*n = 0;
	if (list == NULL || *list == '\0')
		return 0;
	for (const char *p = list;;) {
		size_t len = strcspn(p, ",");

		if (*n == GUEST_TREE_EXCLUDE_MAX) {
			err_set_field(e, "exclude", "exclude: at most %d patterns",
			    GUEST_TREE_EXCLUDE_MAX);
			return -1;
		}
		if (len == 0 || len > GUEST_TREE_PATTERN_MAX) {
			err_set_field(e, "exclude",
			    "exclude: each pattern 1 to %d bytes, separated by commas",
			    GUEST_TREE_PATTERN_MAX);
			return -1;
		}
		for (size_t i = 0; i < len; i++)
			if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f) {
				err_set_field(e, "exclude", "exclude: a control character");
				return -1;
			}
		memcpy(pats[*n], p, len);
		pats[*n][len] = '\0';
		pat[*n] = pats[*n];
		(*n)++;
		if (p[len] == '\0')
			return 0;
		p += len + 1;
	}
}

int
sbx_tree_get(struct sbx *s, const char *account, const char *sandbox_id, const char *path,
    const char *exclude, uint64_t max_bytes, sbx_tree_start_fn start, guest_write_fn write,
    void *ctx, struct sbx_tree_res *res, struct err *e)
{
	char pats[GUEST_TREE_EXCLUDE_MAX][GUEST_TREE_PATTERN_MAX + 1];
	const char *pat[GUEST_TREE_EXCLUDE_MAX];
	size_t npat = 0;
	const struct tar_rules rules = { .skip_bad = 1,
		.max_member_bytes = max_bytes,
		.max_members = UINT64_MAX };
	struct tree_out t = { .write = write, .ctx = ctx, .start = start, .max = max_bytes };
	struct store_row row;
	struct vm_host *h;
	char domain[64];
	int rc = -1;

	memset(res, 0, sizeof(*res));
	if (exclude_parse(exclude, pats, pat, &npat, e) < 0)
		return -1;
	if ((h = sbx_file_vm(s, account, sandbox_id, path ? path : GUEST_HOME, res->path,
		 sizeof(res->path), &row, domain, sizeof(domain), e)) == NULL)
		return -1;
	if ((t.f = tar_filter_new(&rules)) == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return -1;
	}
	if (guest_tree_get(h, domain, res->path, pat, npat, tree_out_write, &t, max_bytes, e) < 0) {
		if (e->kind != ERR_INVALID && e->kind != ERR_LIMIT)
			(void)sbx_guest_failed(s, sandbox_id, row.host, e);
		goto out;
	}
	if (tar_filter_finish(t.f, out_emit, &t, e) < 0)
		goto out;
	stats_out(t.f, res);
	rc = 0;
out:
	tar_filter_free(t.f);
	return rc;
}
