/* fuzz_tar.c - client bytes through the tar filter (base/tar.h). The
 * first byte picks the mode and the limits and whether the harness sets
 * the checksum of every non-zero block (so that changed header fields get
 * past it); the next two seed the sizes of the pieces the rest arrives in. The output is whole blocks, the same
 * as when the input arrives in one piece (result, error and bytes); a
 * filtered archive ends with the end blocks and passes the filter again
 * in refuse mode unchanged, with the same counts; after a failure the
 * filter stays failed. A reader (tar_rules.member) over an input the
 * filter passed announces the same members and gets exactly each file's
 * bytes. */
#include "base/tar.h"
#include "tests/fuzz/fuzz.h"

struct out {
	unsigned char *p;
	size_t n, cap;
};

static int
emit(void *ctx, const void *p, size_t n, struct err *e)
{
	struct out *o = ctx;

	(void)e;
	FUZZ_CHECK(n > 0 && n % TAR_BLOCK == 0);
	if (o->n + n > o->cap) {
		size_t cap = (o->n + n) * 2;
		unsigned char *q = realloc(o->p, cap);

		FUZZ_CHECK(q != NULL);
		o->p = q;
		o->cap = cap;
	}
	memcpy(o->p + o->n, p, n);
	o->n += n;
	return 0;
}

/* Filters data; pieces of 1 .. 1024 bytes from a simple generator seeded
 * by `seed`, or one piece when seed is 0. */
static int
run(const struct tar_rules *r, const uint8_t *data, size_t size, unsigned seed, struct out *o,
    struct err *e, struct tar_stats *st)
{
	struct tar_filter *f = tar_filter_new(r);
	size_t at = 0;
	int rc = 0;

	FUZZ_CHECK(f != NULL);
	err_clear(e);
	while (at < size && rc == 0) {
		size_t n = size - at;

		if (seed != 0) {
			seed = seed * 1103515245u + 12345u;
			if (n > ((seed >> 16) & 1023) + 1)
				n = ((seed >> 16) & 1023) + 1;
		}
		rc = tar_filter_push(f, data + at, n, emit, o, e);
		at += n;
	}
	if (rc == 0)
		rc = tar_filter_finish(f, emit, o, e);
	if (rc < 0) {
		struct err again;
		size_t before = o->n;

		FUZZ_CHECK(e->kind == ERR_INVALID || e->kind == ERR_LIMIT);
		FUZZ_CHECK(strcmp(e->field, "member") == 0 && e->msg[0] != '\0');
		err_clear(&again);
		FUZZ_CHECK(tar_filter_push(f, data, size, emit, o, &again) == -1);
		FUZZ_CHECK(strcmp(again.msg, e->msg) == 0);
		err_clear(&again);
		FUZZ_CHECK(tar_filter_finish(f, emit, o, &again) == -1);
		FUZZ_CHECK(strcmp(again.msg, e->msg) == 0 && o->n == before);
	}
	*st = *tar_filter_stats(f);
	tar_filter_free(f);
	return rc;
}

/* What a reader got. */
struct seen {
	uint64_t members, bytes, left;
};

static int
seen_member(void *ctx, const struct tar_member *m, struct err *e)
{
	struct seen *s = ctx;

	(void)e;
	FUZZ_CHECK(s->left == 0);
	FUZZ_CHECK(m->name_len > 0);
	FUZZ_CHECK(m->type == '0' || m->size == 0);
	s->members++;
	s->left = m->size;
	return 0;
}

static int
seen_data(void *ctx, const void *p, size_t n, struct err *e)
{
	struct seen *s = ctx;

	(void)p;
	(void)e;
	FUZZ_CHECK(n > 0 && n <= s->left);
	s->left -= n;
	s->bytes += n;
	return 0;
}

static int
read_all(const struct tar_rules *r, const uint8_t *data, size_t size, unsigned seed, struct seen *s,
    struct err *e)
{
	struct tar_rules rr = *r;
	struct tar_filter *f;
	size_t at = 0;
	int rc = 0;

	rr.member = seen_member;
	f = tar_filter_new(&rr);
	FUZZ_CHECK(f != NULL);
	err_clear(e);
	while (at < size && rc == 0) {
		size_t n = size - at;

		seed = seed * 1103515245u + 12345u;
		if (n > ((seed >> 16) & 1023) + 1)
			n = ((seed >> 16) & 1023) + 1;
		rc = tar_filter_push(f, data + at, n, seen_data, s, e);
		at += n;
	}
	if (rc == 0)
		rc = tar_filter_finish(f, seen_data, s, e);
	tar_filter_free(f);
	return rc;
}

/* Each whole non-zero block gets a valid (unsigned) header checksum. */
static void
fix_checksums(uint8_t *p, size_t n)
{
	for (size_t at = 0; at + TAR_BLOCK <= n; at += TAR_BLOCK) {
		uint8_t *b = p + at;
		unsigned sum = 0, zero = 1;
		char tmp[8];

		for (size_t i = 0; i < TAR_BLOCK; i++)
			zero &= b[i] == 0;
		if (zero)
			continue;
		memset(b + 148, ' ', 8);
		for (size_t i = 0; i < TAR_BLOCK; i++)
			sum += b[i];
		snprintf(tmp, sizeof(tmp), "%06o", sum);
		memcpy(b + 148, tmp, 7);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint64_t bytes[] = { 0, 1, 1000, 1 << 20 };
	static const uint64_t members[] = { 0, 1, 3, 100 };
	struct tar_rules r = { 0 };
	struct out a = { 0 }, b = { 0 }, c = { 0 };
	struct tar_stats sa, sb, sc;
	struct err ea, eb, ec;
	unsigned seed;
	int ra, rb;
	uint8_t *in;

	if (size < 3)
		return 0;
	r.skip_bad = data[0] & 1;
	r.max_member_bytes = bytes[(data[0] >> 1) & 3];
	r.max_members = members[(data[0] >> 3) & 3];
	seed = (unsigned)data[1] << 8 | data[2] | 1;
	in = malloc(size - 3 + 1);
	FUZZ_CHECK(in != NULL);
	memcpy(in, data + 3, size - 3);
	size -= 3;
	if (data[0] & 0x20)
		fix_checksums(in, size);
	data = in;

	ra = run(&r, data, size, seed, &a, &ea, &sa);
	rb = run(&r, data, size, 0, &b, &eb, &sb);
	FUZZ_CHECK(ra == rb);
	FUZZ_CHECK(ra == 0 || (ea.kind == eb.kind && strcmp(ea.msg, eb.msg) == 0));
	FUZZ_CHECK(a.n == b.n && (a.n == 0 || memcmp(a.p, b.p, a.n) == 0));
	FUZZ_CHECK(memcmp(&sa, &sb, sizeof(sa)) == 0);
	if (ra == 0) {
		struct seen sn = { 0 };
		struct err er;

		FUZZ_CHECK(read_all(&r, data, size, seed, &sn, &er) == 0);
		FUZZ_CHECK(sn.left == 0 && sn.bytes == sa.bytes);
		FUZZ_CHECK(sn.members == sa.files + sa.dirs + sa.symlinks + sa.hardlinks);
		FUZZ_CHECK(a.n >= TAR_END_BYTES);
		for (size_t k = a.n - TAR_END_BYTES; k < a.n; k++)
			FUZZ_CHECK(a.p[k] == 0);
		r.skip_bad = 0;
		FUZZ_CHECK(run(&r, a.p, a.n, 0, &c, &ec, &sc) == 0);
		FUZZ_CHECK(c.n == a.n && memcmp(c.p, a.p, a.n) == 0);
		FUZZ_CHECK(sc.files == sa.files && sc.dirs == sa.dirs &&
		    sc.symlinks == sa.symlinks && sc.hardlinks == sa.hardlinks &&
		    sc.bytes == sa.bytes && sc.skipped == 0);
	}
	free(a.p);
	free(b.p);
	free(c.p);
	free(in);
	return 0;
}
