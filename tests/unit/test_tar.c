/* test_tar.c - the tar filter, reader and writer (base/tar.h): archives
 * made by GNU tar in its three formats pushed through the filter in pieces
 * of every size and extracted again, and through the reader; hand-built
 * hostile headers, and the writer's output read by GNU tar and by the
 * filter. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/tar.h"

static char dir[64]; /* mkdtemp */

/* ---- helpers ---- */

struct sink {
	unsigned char *p;
	size_t n, cap;
	int fail_after; /* >0: the emit call of that number fails */
	int calls;
};

static int
sink_emit(void *ctx, const void *p, size_t n, struct err *e)
{
	struct sink *s = ctx;

	assert_int_equal(n % TAR_BLOCK, 0);
	assert_true(n > 0);
	if (s->fail_after > 0 && ++s->calls >= s->fail_after) {
		err_set(e, ERR_UNAVAILABLE, "the consumer went away");
		return -1;
	}
	if (s->n + n > s->cap) {
		s->cap = (s->n + n) * 2;
		s->p = realloc(s->p, s->cap);
		assert_non_null(s->p);
	}
	memcpy(s->p + s->n, p, n);
	s->n += n;
	return 0;
}

/* Filters in (len bytes) in pieces of `piece` bytes (0: whole) into out
 * with these rules; 0 or -1 with e; stats copied to st when not NULL. */
static int
filter(const void *in, size_t len, size_t piece, const struct tar_rules *r, struct sink *out,
    struct err *e, struct tar_stats *st)
{
	struct tar_filter *f = tar_filter_new(r);
	const unsigned char *p = in;
	int rc = 0;

	assert_non_null(f);
	err_clear(e);
	memset(out, 0, sizeof(*out));
	for (size_t at = 0; at < len && rc == 0;) {
		size_t n = piece == 0 || len - at < piece ? len - at : piece;

		rc = tar_filter_push(f, p + at, n, sink_emit, out, e);
		at += n;
	}
	if (rc == 0)
		rc = tar_filter_finish(f, sink_emit, out, e);
	if (rc < 0) {
		struct err again;

		assert_int_not_equal(e->kind, ERR_NONE);
		assert_string_equal(e->field, "member");
		/* The filter stays failed with the same error. */
		err_clear(&again);
		assert_int_equal(tar_filter_push(f, "x", 1, sink_emit, out, &again), -1);
		assert_int_equal(again.kind, e->kind);
		assert_string_equal(again.msg, e->msg);
		err_clear(&again);
		assert_int_equal(tar_filter_finish(f, sink_emit, out, &again), -1);
		assert_string_equal(again.msg, e->msg);
	}
	if (st)
		*st = *tar_filter_stats(f);
	tar_filter_free(f);
	return rc;
}

static const struct tar_rules skip_rules = { .skip_bad = 1,
	.max_member_bytes = 1 << 20,
	.max_members = 1000 };
static const struct tar_rules refuse_rules = { .max_member_bytes = 1 << 20, .max_members = 1000 };

static void
sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if (system(cmd) != 0)
		fail_msg("failed: %s", cmd);
}

static unsigned char *
slurp(const char *rel, size_t *len)
{
	char p[512];
	FILE *f;
	unsigned char *buf = malloc(1 << 22);

	assert_non_null(buf);
	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	f = fopen(p, "rb");
	assert_non_null(f);
	*len = fread(buf, 1, 1 << 22, f);
	fclose(f);
	return buf;
}

static void
spit(const char *rel, const void *p, size_t n)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(p, 1, n, f), n);
	fclose(f);
}

/* A ustar header block by hand: mode and size as given, a valid checksum
 * unless told otherwise. */
static void
raw_hdr(unsigned char *b, const char *name, char type, unsigned mode, unsigned long long size,
    const char *link)
{
	unsigned sum = 0;

	memset(b, 0, TAR_BLOCK);
	memcpy(b, name, strnlen(name, 100));
	snprintf((char *)b + 100, 8, "%07o", mode);
	snprintf((char *)b + 108, 8, "%07o", 1000u);
	snprintf((char *)b + 116, 8, "%07o", 1000u);
	{
		char num[32];

		snprintf(num, sizeof(num), "%011llo", size);
		memcpy(b + 124, num, 12);
	}
	snprintf((char *)b + 136, 12, "%011o", 1700000000u);
	b[156] = (unsigned char)type;
	if (link)
		memcpy(b + 157, link, strnlen(link, 100));
	memcpy(b + 257,
	    "ustar\0"
	    "00",
	    8);
	memcpy(b + 265, "user", 4);
	memset(b + 148, ' ', 8);
	for (int i = 0; i < TAR_BLOCK; i++)
		sum += b[i];
	snprintf((char *)b + 148, 8, "%06o", sum);
}

/* An archive built block by block. */
struct arc {
	unsigned char p[64 * 1024 + 8 * TAR_BLOCK];
	size_t n;
};

static void
add_hdr(struct arc *a, const char *name, char type, unsigned mode, unsigned long long size,
    const char *link)
{
	raw_hdr(a->p + a->n, name, type, mode, size, link);
	a->n += TAR_BLOCK;
}

static void
add_data(struct arc *a, const void *p, size_t n)
{
	memset(a->p + a->n, 0, n + tar_pad(n));
	memcpy(a->p + a->n, p, n);
	a->n += n + tar_pad(n);
}

static void
add_zero(struct arc *a)
{
	memset(a->p + a->n, 0, TAR_BLOCK);
	a->n += TAR_BLOCK;
}

/* Refuse mode fails with kind and a message holding `want`; skip mode
 * gives the same error when `both`, else passes and counts one skipped. */
static void
refused(const struct arc *a, enum err_kind kind, const char *want, int both)
{
	struct sink out;
	struct err e;
	struct tar_stats st;

	assert_int_equal(filter(a->p, a->n, 0, &refuse_rules, &out, &e, NULL), -1);
	assert_int_equal(e.kind, kind);
	if (strstr(e.msg, want) == NULL)
		fail_msg("\"%s\" not in \"%s\"", want, e.msg);
	free(out.p);
	if (both) {
		assert_int_equal(filter(a->p, a->n, 0, &skip_rules, &out, &e, NULL), -1);
		assert_int_equal(e.kind, kind);
		assert_non_null(strstr(e.msg, want));
	} else {
		assert_int_equal(filter(a->p, a->n, 0, &skip_rules, &out, &e, &st), 0);
		assert_int_equal(st.skipped, 1);
	}
	free(out.p);
}

/* ---- archives made by GNU tar ---- */

static char p150[160], p300[310];

static void
make_paths(void)
{
	/* "d/" + 70 + "/" + 77: splits into ustar's prefix and name. */
	snprintf(p150, sizeof(p150), "d/%070d/%077d", 0, 0);
	assert_int_equal(strlen(p150), 150);
	memset(p150 + 2, 'a', 70);
	memset(p150 + 73, 'b', 77);
	snprintf(p300, sizeof(p300), "d/%090d/%090d/%090d/%025d", 0, 0, 0, 0);
	assert_int_equal(strlen(p300), 300);
	memset(p300 + 2, 'c', 90);
	memset(p300 + 93, 'd', 90);
	memset(p300 + 184, 'e', 90);
	memset(p300 + 275, 'f', 25);
}

static int
setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/test_tar.XXXXXX");
	if (mkdtemp(dir) == NULL)
		return -1;
	make_paths();
	/* ustar cannot hold the 300-byte name: its archive is made first. */
	sh("cd %s && mkdir -p src/d && cd src && printf hello > d/f && ln -s f d/l && "
	   "ln d/f d/h && mkfifo d/p && printf s > d/s && chmod 4755 d/s && "
	   "mkdir -p $(dirname %s) && printf long150 > %s && "
	   "tar --format=ustar -cf ../ustar.tar . && "
	   "mkdir -p $(dirname %s) && printf long300 > %s && "
	   "tar --format=gnu -cf ../gnu.tar . && tar --format=pax -cf ../pax.tar .",
	    dir, p150, p150, p300, p300);
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	sh("rm -rf %s", dir);
	return 0;
}

static void
check_tree(const char *fmt)
{
	struct stat st;
	char p[700];
	unsigned char *buf;
	size_t n;

	snprintf(p, sizeof(p), "%s/x-%s/d/s", dir, fmt);
	assert_int_equal(stat(p, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0755); /* set-uid gone */
	snprintf(p, sizeof(p), "%s/x-%s/d/p", dir, fmt);
	assert_int_equal(lstat(p, &st), -1); /* the FIFO was left out */
	snprintf(p, sizeof(p), "%s/x-%s/d/l", dir, fmt);
	assert_int_equal(lstat(p, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	snprintf(p, sizeof(p), "%s/x-%s/d/h", dir, fmt);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_nlink, 2);
	snprintf(p, sizeof(p), "x-%s/%s", fmt, p150);
	buf = slurp(p, &n);
	assert_int_equal(n, 7);
	assert_memory_equal(buf, "long150", 7);
	free(buf);
	if (strcmp(fmt, "ustar") != 0) {
		snprintf(p, sizeof(p), "x-%s/%s", fmt, p300);
		buf = slurp(p, &n);
		assert_int_equal(n, 7);
		assert_memory_equal(buf, "long300", 7);
		free(buf);
	}
}

static void
gnu_format(const char *fmt)
{
	static const size_t pieces[] = { 1, 7, 0 };
	struct sink out[3], again;
	struct tar_stats st, st2;
	struct err e;
	char name[64];
	unsigned char *in;
	size_t n;

	snprintf(name, sizeof(name), "%s.tar", fmt);
	in = slurp(name, &n);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(filter(in, n, pieces[i], &skip_rules, &out[i], &e, &st), 0);
		assert_int_equal(out[i].n, out[0].n);
		assert_memory_equal(out[i].p, out[0].p, out[0].n);
	}
	assert_int_equal(st.skipped, 1);
	assert_int_equal(st.symlinks, 1);
	assert_int_equal(st.hardlinks, 1);
	assert_int_equal(st.files, strcmp(fmt, "ustar") == 0 ? 3 : 4);
	assert_int_equal(st.dirs, strcmp(fmt, "ustar") == 0 ? 2 : 5);
	assert_int_equal(st.bytes, 5 + 1 + 7 + (strcmp(fmt, "ustar") == 0 ? 0 : 7));
	/* The end of the archive is the filter's own. */
	for (size_t k = out[0].n - TAR_END_BYTES; k < out[0].n; k++)
		assert_int_equal(out[0].p[k], 0);
	/* Its output passes again unchanged, in refuse mode. */
	assert_int_equal(filter(out[0].p, out[0].n, 0, &refuse_rules, &again, &e, &st2), 0);
	assert_int_equal(again.n, out[0].n);
	assert_memory_equal(again.p, out[0].p, out[0].n);
	assert_int_equal(st2.skipped, 0);
	free(again.p);
	snprintf(name, sizeof(name), "out-%s.tar", fmt);
	spit(name, out[0].p, out[0].n);
	sh("cd %s && mkdir x-%s && tar -xf out-%s.tar -C x-%s && tar -tvf out-%s.tar >/dev/null",
	    dir, fmt, fmt, fmt, fmt);
	check_tree(fmt);
	/* Refuse mode names the FIFO. */
	for (int i = 0; i < 3; i++)
		free(out[i].p);
	assert_int_equal(filter(in, n, 7, &refuse_rules, &out[0], &e, NULL), -1);
	assert_int_equal(e.kind, ERR_INVALID);
	assert_string_equal(e.msg, "member \"./d/p\": a FIFO");
	free(out[0].p);
	free(in);
}

static void
test_gnu(void **state)
{
	(void)state;
	gnu_format("gnu");
}

static void
test_pax(void **state)
{
	(void)state;
	gnu_format("pax");
}

static void
test_ustar(void **state)
{
	(void)state;
	gnu_format("ustar");
}

/* ---- hand-built archives ---- */

static void
test_names(void **state)
{
	struct arc *a = calloc(1, sizeof(*a));
	struct sink out;
	struct err e;
	struct tar_stats st;

	(void)state;
	add_hdr(a, "/etc/passwd", '0', 0644, 0, NULL);
	refused(a, ERR_INVALID, "member \"/etc/passwd\": an absolute name", 0);
	a->n = 0;
	add_hdr(a, "a/../../x", '0', 0644, 0, NULL);
	refused(a, ERR_INVALID, "member \"a/../../x\": \"..\" in a name", 0);
	a->n = 0;
	add_hdr(a, "..", '5', 0755, 0, NULL);
	refused(a, ERR_INVALID, "\"..\" in a name", 0);
	a->n = 0;
	add_hdr(a, "a//b", '0', 0644, 0, NULL);
	refused(a, ERR_INVALID, "an empty component", 0);
	a->n = 0;
	add_hdr(a, "f/", '0', 0644, 0, NULL);
	refused(a, ERR_INVALID, "an empty component", 0);
	a->n = 0;
	add_hdr(a, "", '0', 0644, 0, NULL);
	refused(a, ERR_INVALID, "an empty name", 0);
	a->n = 0;
	add_hdr(a, "dev", '3', 0644, 0, NULL);
	refused(a, ERR_INVALID, "a device node", 0);
	a->n = 0;
	add_hdr(a, "odd", 'Z', 0644, 0, NULL);
	refused(a, ERR_INVALID, "an unknown member type 'Z'", 0);

	/* "./" is dropped without a count; "./a/" is emitted as "a/";
	 * a file's data after a left-out member still passes. */
	a->n = 0;
	add_hdr(a, "./", '5', 0755, 0, NULL);
	add_hdr(a, "./a/", '5', 0755, 0, NULL);
	add_hdr(a, "/abs", '0', 0644, 3, NULL);
	add_data(a, "abc", 3);
	add_hdr(a, "a/f", '0', 0644, 3, NULL);
	add_data(a, "xyz", 3);
	assert_int_equal(filter(a->p, a->n, 0, &skip_rules, &out, &e, &st), 0);
	assert_int_equal(st.dirs, 1);
	assert_int_equal(st.files, 1);
	assert_int_equal(st.skipped, 1);
	assert_int_equal(out.n, 3 * TAR_BLOCK + TAR_END_BYTES);
	assert_string_equal((char *)out.p, "a/");
	assert_string_equal((char *)out.p + TAR_BLOCK, "a/f");
	assert_memory_equal(out.p + 2 * TAR_BLOCK, "xyz", 3);
	free(out.p);
	free(a);
}

static void
test_links(void **state)
{
	struct arc *a = calloc(1, sizeof(*a));
	struct sink out;
	struct err e;
	struct tar_stats st;

	(void)state;
	add_hdr(a, "a", '2', 0777, 0, "../x");
	refused(a, ERR_INVALID, "member \"a\": a symlink target outside the archive", 0);
	a->n = 0;
	add_hdr(a, "a", '2', 0777, 0, "b/../../x");
	refused(a, ERR_INVALID, "outside the archive", 0);
	a->n = 0;
	add_hdr(a, "./a/b", '2', 0777, 0, "../../x");
	refused(a, ERR_INVALID, "outside the archive", 0);
	a->n = 0;
	add_hdr(a, "a", '2', 0777, 0, "/etc/passwd");
	refused(a, ERR_INVALID, "an absolute symlink target", 0);
	a->n = 0;
	add_hdr(a, "a", '2', 0777, 0, "");
	refused(a, ERR_INVALID, "an empty symlink target", 0);
	a->n = 0;
	add_hdr(a, "h", '1', 0644, 0, "../etc/shadow");
	refused(a, ERR_INVALID, "\"..\" in a hard link target", 0);
	a->n = 0;
	add_hdr(a, "h", '1', 0644, 0, "/etc/shadow");
	refused(a, ERR_INVALID, "an absolute hard link target", 0);

	a->n = 0;
	add_hdr(a, "a/b", '2', 0777, 0, "../c");
	add_hdr(a, "a/c", '2', 0777, 0, "./../a/./b");
	add_hdr(a, "h", '1', 0644, 0, "./a/x");
	assert_int_equal(filter(a->p, a->n, 0, &refuse_rules, &out, &e, &st), 0);
	assert_int_equal(st.symlinks, 2);
	assert_int_equal(st.hardlinks, 1);
	assert_string_equal((char *)out.p + 2 * TAR_BLOCK + 157, "a/x"); /* cleaned */
	free(out.p);
	free(a);
}

/* Chains of members that each look inside the root alone but lead out of
 * it together, when extracted in order. */
static void
test_link_chains(void **state)
{
	struct arc *a = calloc(1, sizeof(*a));
	struct sink out;
	struct err e;
	struct tar_stats st;

	(void)state;
	/* a -> . makes a the root; a/b -> .. is then the root's parent. */
	add_hdr(a, "a", '2', 0777, 0, ".");
	add_hdr(a, "a/b", '2', 0777, 0, "..");
	refused(a, ERR_INVALID, "member \"a/b\": its path passes through the symlink \"a\"", 0);
	/* Writing a file through a link to a subdirectory of the root: a
	 * later link may point anywhere, so no path passes through one. */
	a->n = 0;
	add_hdr(a, "d/", '5', 0755, 0, NULL);
	add_hdr(a, "l", '2', 0777, 0, "d");
	add_hdr(a, "l/f", '0', 0644, 0, NULL);
	refused(a, ERR_INVALID, "passes through the symlink \"l\"", 0);
	/* d/up -> .. is the root; s -> d/up/.. is lexically d, really the
	 * root's parent: ".." after a name is refused, whichever comes first. */
	a->n = 0;
	add_hdr(a, "d/up", '2', 0777, 0, "..");
	add_hdr(a, "s", '2', 0777, 0, "d/up/..");
	refused(a, ERR_INVALID, "member \"s\": a symlink target with \"..\" after a name", 0);
	a->n = 0;
	add_hdr(a, "s", '2', 0777, 0, "d/up/../x");
	add_hdr(a, "d/up", '2', 0777, 0, "..");
	refused(a, ERR_INVALID, "member \"s\": a symlink target with \"..\" after a name", 0);
	/* A directory of the archive replaced by a symlink after something
	 * was put in it (and then written through under the old name). */
	a->n = 0;
	add_hdr(a, "d/x", '0', 0644, 0, NULL);
	add_hdr(a, "d", '2', 0777, 0, ".");
	refused(a, ERR_INVALID, "member \"d\": a link in place of a directory", 0);
	a->n = 0;
	add_hdr(a, "d/", '5', 0755, 0, NULL);
	add_hdr(a, "d", '1', 0644, 0, "f");
	refused(a, ERR_INVALID, "member \"d\": a link in place of a directory", 0);
	/* A hard link to a symlink is that symlink in another directory:
	 * d/l -> .. is the root, a hard link h to it at the root climbs out. */
	a->n = 0;
	add_hdr(a, "d/l", '2', 0777, 0, "..");
	add_hdr(a, "h", '1', 0644, 0, "d/l");
	refused(a, ERR_INVALID, "member \"h\": a hard link to a symlink of this archive", 0);
	/* ... or a hard link through one, to a file outside. */
	a->n = 0;
	add_hdr(a, "up", '2', 0777, 0, ".");
	add_hdr(a, "h", '1', 0644, 0, "up/f");
	refused(a, ERR_INVALID,
	    "member \"h\": a hard link to a symlink of this archive, or through", 0);
	/* "a/./b" is not compared as lying under "a": refused. */
	a->n = 0;
	add_hdr(a, "a", '2', 0777, 0, ".");
	add_hdr(a, "a/./b", '2', 0777, 0, "..");
	refused(a, ERR_INVALID, "member \"a/./b\": a \".\" component inside a name", 0);

	/* In skip mode the chain is cut where it breaks: a passes, a/b and
	 * everything under a are left out, the rest passes. */
	a->n = 0;
	add_hdr(a, "a", '2', 0777, 0, ".");
	add_hdr(a, "a/b", '2', 0777, 0, "..");
	add_hdr(a, "a/b/etc/x", '0', 0644, 0, NULL);
	add_hdr(a, "ok/f", '0', 0644, 0, NULL);
	add_hdr(a, "ok/l", '2', 0777, 0, "../ok/f");
	assert_int_equal(filter(a->p, a->n, 0, &skip_rules, &out, &e, &st), 0);
	assert_int_equal(st.skipped, 2);
	assert_int_equal(st.symlinks, 2);
	assert_int_equal(st.files, 1);
	free(out.p);
	free(a);
}

static void
test_mode(void **state)
{
	struct arc *a = calloc(1, sizeof(*a));
	struct sink out, again;
	struct err e;

	(void)state;
	add_hdr(a, "s", '0', 06755, 0, NULL);
	add_hdr(a, "t/", '5', 07777, 0, NULL);
	assert_int_equal(filter(a->p, a->n, 0, &refuse_rules, &out, &e, NULL), 0);
	assert_string_equal((char *)out.p + 100, "0000755");
	assert_string_equal((char *)out.p + TAR_BLOCK + 100, "0001777");
	/* Owner fields pass unchanged; the checksums are right. */
	assert_string_equal((char *)out.p + 108, "0001750");
	assert_string_equal((char *)out.p + 265, "user");
	assert_int_equal(filter(out.p, out.n, 0, &refuse_rules, &again, &e, NULL), 0);
	free(again.p);
	free(out.p);
	free(a);
}

static void
test_checksum(void **state)
{
	struct arc *a = calloc(1, sizeof(*a));
	struct sink out;
	struct err e;

	(void)state;
	add_hdr(a, "f", '0', 0644, 0, NULL);
	a->p[0] = 'g';
	refused(a, ERR_INVALID, "not a tar header at byte 0 (bad checksum)", 1);
	/* The signed sum is accepted as well as the unsigned one. */
	a->n = 0;
	add_hdr(a, "\xe9t\xe9", '0', 0644, 0, NULL);
	{
		int sum = 0;

		memset(a->p + 148, ' ', 8);
		for (int i = 0; i < TAR_BLOCK; i++)
			sum += (signed char)a->p[i];
		snprintf((char *)a->p + 148, 8, "%06o", (unsigned)sum);
	}
	assert_int_equal(filter(a->p, a->n, 0, &refuse_rules, &out, &e, NULL), 0);
	free(out.p);
	free(a);
}

static void
test_pax_headers(void **state)
{
	struct arc *a = calloc(1, sizeof(*a));
	struct sink out, again;
	struct err e;
	struct tar_stats st;
	char rec[300], name[260];

	(void)state;
	/* A path record (200 bytes, no '/' to split at) and a size. */
	memset(name, 'n', 200);
	name[200] = '\0';
	snprintf(rec, sizeof(rec), "210 path=%s\n10 size=4\n", name);
	add_hdr(a, "PaxHeaders/x", 'x', 0644, strlen(rec), NULL);
	add_data(a, rec, strlen(rec));
	add_hdr(a, "short", '0', 0644, 99, NULL);
	add_data(a, "data", 4);
	/* A global header is dropped; a GNU long link name is applied. */
	add_hdr(a, "g", 'g', 0644, 10, NULL);
	add_data(a, "10 a=bcde\n", 10);
	add_hdr(a, "././@LongLink", 'K', 0644, 4, NULL);
	add_data(a, "dat\0", 4);
	add_hdr(a, "l", '2', 0777, 0, "ignored");
	assert_int_equal(filter(a->p, a->n, 3, &refuse_rules, &out, &e, &st), 0);
	assert_int_equal(st.files, 1);
	assert_int_equal(st.bytes, 4);
	assert_int_equal(out.p[156], 'x');
	assert_memory_equal(out.p + TAR_BLOCK, rec, 210);
	assert_string_equal((char *)out.p + 4 * TAR_BLOCK + 157, "dat");
	assert_int_equal(out.n, 5 * TAR_BLOCK + TAR_END_BYTES);
	spit("pax-out.tar", out.p, out.n);
	sh("cd %s && tar -tf pax-out.tar | grep -q '^%s$'", dir, name);
	assert_int_equal(filter(out.p, out.n, 0, &refuse_rules, &again, &e, NULL), 0);
	assert_int_equal(again.n, out.n);
	free(again.p);
	free(out.p);

	/* Records whose length lies, or that are not records. */
	static const char *bad[] = { "30 path=abc\n", "13 path=abc\n", "9 path=abc\n",
		"x path=ab\n", "5 =a\n", "6 a=bc", "11 size=1x\n", "7 path\n" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		a->n = 0;
		add_hdr(a, "P", 'x', 0644, strlen(bad[i]), NULL);
		add_data(a, bad[i], strlen(bad[i]));
		add_hdr(a, "f", '0', 0644, 0, NULL);
		refused(a, ERR_INVALID, "a malformed pax header record", 1);
	}
	/* Oversized extended headers. */
	a->n = 0;
	add_hdr(a, "P", 'x', 0644, TAR_MAX_PAX + 1, NULL);
	refused(a, ERR_LIMIT, "a pax header of 65537 bytes", 1);
	a->n = 0;
	add_hdr(a, "././@LongLink", 'L', 0644, TAR_MAX_LONGNAME + 1, NULL);
	refused(a, ERR_LIMIT, "a GNU long name of 4098 bytes", 1);
	/* A path of 4096 bytes breaks the name rule. */
	{
		static char big[4200];

		memset(big, 'p', sizeof(big));
		memcpy(big, "4107 path=", 10);
		big[4106] = '\n';
		a->n = 0;
		add_hdr(a, "P", 'x', 0644, 4107, NULL);
		add_data(a, big, 4107);
		add_hdr(a, "f", '0', 0644, 0, NULL);
		refused(a, ERR_INVALID, "a name longer than 4095 bytes", 0);
	}
	/* An extended header with no member after it. */
	a->n = 0;
	add_hdr(a, "P", 'x', 0644, 8, NULL);
	add_data(a, "8 a=bcd\n", 8);
	add_zero(a);
	add_zero(a);
	refused(a, ERR_INVALID, "an extended header without a member", 1);
	free(a);
}

static void
test_limits(void **state)
{
	struct arc *a = calloc(1, sizeof(*a));
	static const struct tar_rules small = { .skip_bad = 1,
		.max_member_bytes = 10,
		.max_members = 2 };
	struct sink out;
	struct err e;
	struct tar_stats st;

	(void)state;
	add_hdr(a, "big", '0', 0644, 11, NULL);
	add_data(a, "0123456789a", 11);
	assert_int_equal(filter(a->p, a->n, 0, &small, &out, &e, NULL), -1);
	assert_int_equal(e.kind, ERR_LIMIT);
	assert_string_equal(e.msg, "member \"big\": 11 bytes, more than the limit of 10");
	free(out.p);
	a->n = 0;
	add_hdr(a, "ok", '0', 0644, 10, NULL);
	add_data(a, "0123456789", 10);
	add_hdr(a, "fifo", '6', 0644, 0, NULL); /* left out, still counted */
	assert_int_equal(filter(a->p, a->n, 1, &small, &out, &e, &st), 0);
	assert_int_equal(st.bytes, 10);
	free(out.p);
	add_hdr(a, "three", '5', 0755, 0, NULL);
	assert_int_equal(filter(a->p, a->n, 1, &small, &out, &e, NULL), -1);
	assert_int_equal(e.kind, ERR_LIMIT);
	assert_string_equal(e.msg, "member \"three\": more than 2 members");
	free(out.p);
	free(a);
}

static void
test_ends(void **state)
{
	struct arc *a = calloc(1, sizeof(*a));
	struct sink out, plain;
	struct err e;

	(void)state;
	/* Truncated: in the data, in a header, after an extended header. */
	add_hdr(a, "f", '0', 0644, 1000, NULL);
	add_data(a, "x", 1);
	assert_int_equal(filter(a->p, a->n, 0, &refuse_rules, &out, &e, NULL), -1);
	assert_string_equal(e.msg, "member \"f\": the archive ends inside it");
	free(out.p);
	assert_int_equal(filter(a->p, 300, 0, &skip_rules, &out, &e, NULL), -1);
	assert_non_null(strstr(e.msg, "ends inside a block"));
	free(out.p);
	a->n = 0;
	add_hdr(a, "L", 'L', 0644, 2, NULL);
	add_data(a, "a", 2);
	assert_int_equal(filter(a->p, a->n, 0, &skip_rules, &out, &e, NULL), -1);
	assert_non_null(strstr(e.msg, "ends after an extended header"));
	free(out.p);

	/* Garbage after the end blocks is ignored; no end blocks at all, or
	 * one alone, are fine; a zero block before a header is not. */
	a->n = 0;
	add_hdr(a, "f", '0', 0644, 2, NULL);
	add_data(a, "hi", 2);
	assert_int_equal(filter(a->p, a->n, 0, &refuse_rules, &plain, &e, NULL), 0);
	add_zero(a);
	assert_int_equal(filter(a->p, a->n, 0, &refuse_rules, &out, &e, NULL), 0);
	assert_int_equal(out.n, plain.n);
	free(out.p);
	add_zero(a);
	memset(a->p + a->n, 0xAB, 1000);
	a->n += 1000;
	assert_int_equal(filter(a->p, a->n, 7, &refuse_rules, &out, &e, NULL), 0);
	assert_int_equal(out.n, plain.n);
	assert_memory_equal(out.p, plain.p, plain.n);
	free(out.p);
	a->n = 3 * TAR_BLOCK;
	add_hdr(a, "g", '0', 0644, 0, NULL);
	assert_int_equal(filter(a->p, a->n, 0, &skip_rules, &out, &e, NULL), -1);
	assert_string_equal(e.msg, "a header after a zero block at byte 1536");
	free(out.p);
	free(plain.p);
	free(a);
}

static void
test_emit_failure(void **state)
{
	struct arc *a = calloc(1, sizeof(*a));
	struct tar_filter *f = tar_filter_new(&refuse_rules);
	struct sink out = { .fail_after = 2 };
	struct err e;

	(void)state;
	add_hdr(a, "f", '0', 0644, 2, NULL);
	add_data(a, "hi", 2);
	err_clear(&e);
	assert_int_equal(tar_filter_push(f, a->p, a->n, sink_emit, &out, &e), -1);
	assert_int_equal(e.kind, ERR_UNAVAILABLE);
	err_clear(&e);
	assert_int_equal(tar_filter_finish(f, sink_emit, &out, &e), -1);
	assert_string_equal(e.msg, "the consumer went away");
	tar_filter_free(f);
	tar_filter_free(NULL);
	free(out.p);
	free(a);
}

/* ---- the reader ---- */

/* What a reader saw: one line per member ("type name size mode [-> link]")
 * with its data after it, as text. */
struct log {
	char text[8192];
	size_t n;
	uint64_t left; /* data bytes still due for the last member */
	int fail_on;   /* >0: the member callback of that number fails */
	int members;
};

static void
log_add(struct log *l, const char *p, size_t n)
{
	assert_true(l->n + n < sizeof(l->text));
	memcpy(l->text + l->n, p, n);
	l->n += n;
	l->text[l->n] = '\0';
}

static int
log_member(void *ctx, const struct tar_member *m, struct err *e)
{
	struct log *l = ctx;
	char line[700];
	int k;

	assert_int_equal(l->left, 0); /* the last member's data all came */
	if (l->fail_on > 0 && ++l->members >= l->fail_on) {
		err_set(e, ERR_UNAVAILABLE, "the reader went away");
		return -1;
	}
	k = snprintf(line, sizeof(line), "\n%c %.*s %llu %04o", m->type, (int)m->name_len, m->name,
	    (unsigned long long)m->size, m->mode);
	log_add(l, line, (size_t)k);
	if (m->link_len > 0) {
		k = snprintf(line, sizeof(line), " -> %.*s", (int)m->link_len, m->link);
		log_add(l, line, (size_t)k);
	}
	log_add(l, ":", 1);
	l->left = m->size;
	return 0;
}

static int
log_data(void *ctx, const void *p, size_t n, struct err *e)
{
	struct log *l = ctx;

	(void)e;
	assert_true(n > 0);
	assert_true(n <= l->left); /* no padding, nothing past the member */
	l->left -= n;
	log_add(l, p, n);
	return 0;
}

static int
read_all(const unsigned char *in, size_t len, size_t piece, struct log *l, struct err *e)
{
	struct tar_rules r = { .skip_bad = 1,
		.max_member_bytes = 1 << 20,
		.max_members = 1000,
		.member = log_member };
	struct tar_filter *f = tar_filter_new(&r);
	int rc = 0;

	assert_non_null(f);
	err_clear(e);
	for (size_t at = 0; at < len && rc == 0;) {
		size_t n = piece == 0 || len - at < piece ? len - at : piece;

		rc = tar_filter_push(f, in + at, n, log_data, l, e);
		at += n;
	}
	if (rc == 0)
		rc = tar_filter_finish(f, log_data, l, e);
	tar_filter_free(f);
	return rc;
}

static void
test_reader(void **state)
{
	static const size_t pieces[] = { 1, 7, 512, 0 };
	struct log *l = calloc(4, sizeof(*l)), *bad = calloc(1, sizeof(*bad));
	char want[700];
	struct err e;
	size_t n;
	unsigned char *in = slurp("pax.tar", &n);

	(void)state;
	for (int i = 0; i < 4; i++) {
		assert_int_equal(read_all(in, n, pieces[i], &l[i], &e), 0);
		assert_int_equal(l[i].left, 0);
		assert_string_equal(l[i].text, l[0].text);
	}
	/* Data without padding, cleaned names, set-uid gone, links with
	 * their targets, the FIFO left out, long names whole. */
	/* d/f and d/h are one file: whichever the directory lists first
	 * carries the data, the other links to it. */
	assert_true((strstr(l[0].text, "\n0 d/f 5 0644:hello\n") &&
			strstr(l[0].text, "\n1 d/h 0 0644 -> d/f:")) ||
	    (strstr(l[0].text, "\n0 d/h 5 0644:hello\n") &&
		strstr(l[0].text, "\n1 d/f 0 0644 -> d/h:")));
	assert_non_null(strstr(l[0].text, "\n0 d/s 1 0755:s\n"));
	assert_non_null(strstr(l[0].text, "\n2 d/l 0 0777 -> f:\n"));
	assert_non_null(strstr(l[0].text, "\n5 d/ 0 0755:"));
	assert_null(strstr(l[0].text, "d/p"));
	snprintf(want, sizeof(want), "\n0 %s 7 0644:long300", p300);
	assert_non_null(strstr(l[0].text, want));
	assert_null(strstr(l[0].text, "\n5 . ")); /* the root itself is not a member */
	/* A reader that fails stops the filter with its error. */
	bad->fail_on = 3;
	assert_int_equal(read_all(in, n, 100, bad, &e), -1);
	assert_string_equal(e.msg, "the reader went away");
	free(in);
	free(l);
	free(bad);
}

/* ---- the writer ---- */

static void
test_writer(void **state)
{
	struct arc *a = calloc(1, sizeof(*a));
	static const char *names[] = { "top", "sub/", NULL, NULL, "sub/empty" };
	static const char *data[] = { "hello\n", "", "one-fifty", "three-hundred", "" };
	struct sink out;
	struct tar_stats st;
	struct err e;
	ssize_t n;
	char buf[TAR_BLOCK];
	unsigned char *got;
	size_t len;

	(void)state;
	names[2] = p150;
	names[3] = p300;
	for (int i = 0; i < 5; i++) {
		char type = i == 1 ? '5' : '0';
		size_t dl = strlen(data[i]);

		err_clear(&e);
		n = tar_header((char *)a->p + a->n, sizeof(a->p) - a->n, names[i], type, 04755, dl,
		    1700000000, &e);
		assert_true(n > 0);
		assert_int_equal(n % TAR_BLOCK, 0);
		assert_int_equal(n, i == 3 ? 3 * TAR_BLOCK : TAR_BLOCK);
		a->n += (size_t)n;
		add_data(a, data[i], dl);
	}
	memset(a->p + a->n, 0, TAR_END_BYTES);
	a->n += TAR_END_BYTES;
	spit("w.tar", a->p, a->n);
	sh("cd %s && tar -tvf w.tar > w.list && grep -q '^-rwxr-xr-x .* top$' w.list && "
	   "mkdir xw && tar -xf w.tar -C xw && test -d xw/sub && "
	   "test -f xw/sub/empty && test \"$(cat xw/top)\" = hello && "
	   "test \"$(cat xw/%s)\" = three-hundred && test \"$(cat xw/%s)\" = one-fifty",
	    dir, p300, p150);
	got = slurp("w.list", &len);
	free(got);
	/* The filter passes the writer's archive unchanged. */
	assert_int_equal(filter(a->p, a->n, 5, &refuse_rules, &out, &e, &st), 0);
	assert_int_equal(st.files, 4);
	assert_int_equal(st.dirs, 1);
	assert_int_equal(out.n, a->n);
	assert_memory_equal(out.p, a->p, a->n);
	free(out.p);

	/* Refused names and types, too little room. */
	static const char *bad[] = { "/abs", "a/../b", "", ".", "a//b", "f/" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err_clear(&e);
		assert_int_equal(tar_header(buf, sizeof(buf), bad[i], '0', 0644, 0, 0, &e), -1);
		assert_int_equal(e.kind, ERR_INVALID);
		assert_string_equal(e.field, "name");
	}
	err_clear(&e);
	assert_int_equal(tar_header(buf, sizeof(buf), "x", '2', 0644, 0, 0, &e), -1);
	assert_string_equal(e.field, "type");
	err_clear(&e);
	assert_int_equal(tar_header(buf, sizeof(buf), p300, '0', 0644, 0, 0, &e), -1);
	assert_int_equal(e.kind, ERR_LIMIT);
	/* Large sizes and old times (base-256) pass the filter. */
	err_clear(&e);
	a->n = 0;
	n = tar_header((char *)a->p, sizeof(a->p), "x", '0', 0644, 0, -5, &e);
	assert_int_equal(n, TAR_BLOCK);
	assert_int_equal(a->p[136], 0xff);
	assert_int_equal(filter(a->p, TAR_BLOCK, 0, &refuse_rules, &out, &e, NULL), 0);
	assert_memory_equal(out.p, a->p, TAR_BLOCK);
	free(out.p);
	n = tar_header((char *)a->p, sizeof(a->p), "x", '0', 0644, 1ULL << 40, 0, &e);
	assert_int_equal(a->p[124], 0x80);
	assert_int_equal(filter(a->p, TAR_BLOCK, 0, &skip_rules, &out, &e, NULL), -1);
	assert_string_equal(e.msg,
	    "member \"x\": 1099511627776 bytes, more than the limit of 1048576");
	free(out.p);

	assert_int_equal(tar_pad(0), 0);
	assert_int_equal(tar_pad(1), 511);
	assert_int_equal(tar_pad(512), 0);
	assert_int_equal(tar_pad(513), 511);
	free(a);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gnu),
		cmocka_unit_test(test_pax),
		cmocka_unit_test(test_ustar),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_links),
		cmocka_unit_test(test_link_chains),
		cmocka_unit_test(test_mode),
		cmocka_unit_test(test_checksum),
		cmocka_unit_test(test_pax_headers),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_ends),
		cmocka_unit_test(test_emit_failure),
		cmocka_unit_test(test_reader),
		cmocka_unit_test(test_writer),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
