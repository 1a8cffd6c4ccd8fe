/* test_service_tree.c - trees in and out of a sandbox (sbx_tree_put,
 * sbx_tree_get) against the real service over PostgreSQL and the fake
 * guest (fake_vmm.h): an archive is checked on its way, a refused one
 * (a bad member after good ones, a cut stream, too many members) changes
 * nothing, another account's sandbox is not found, and a download leaves
 * out what breaks the rules. Needs AAS_TEST_DATABASE_URL. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/err.h"
#include "base/tar.h"
#include "service/app.h"
#include "sandbox/sandbox.h"
#include "tests/unit/fake_vmm.h"
#include "tests/unit/service_fixture.h"

#define ARCHIVE_MAX (64 * 1024)
#define MAX_BYTES (1u << 20)

struct archive {
	char b[ARCHIVE_MAX];
	size_t len, off;
};

/* One member with a raw ustar name (no checks: hostile names too). */
static void
add(struct archive *a, const char *name, char type, const char *content)
{
	size_t n = strlen(content);
	char *h = a->b + a->len;
	unsigned sum = 0;
	struct err e;

	err_clear(&e);
	assert_true(tar_header(h, TAR_MAX_HEADER, "placeholder", '0', 0644, n, 1700000000, &e) ==
	    TAR_BLOCK);
	memset(h, 0, 100);
	memcpy(h, name, strlen(name));
	h[156] = type;
	memset(h + 148, ' ', 8);
	for (size_t i = 0; i < TAR_BLOCK; i++)
		sum += (unsigned char)h[i];
	snprintf(h + 148, 8, "%06o", sum);
	a->len += TAR_BLOCK;
	memcpy(a->b + a->len, content, n);
	a->len += n + tar_pad(n);
	assert_true(a->len + TAR_END_BYTES <= sizeof(a->b));
}

static void
end(struct archive *a)
{
	memset(a->b + a->len, 0, TAR_END_BYTES);
	a->len += TAR_END_BYTES;
}

/* Hands the archive over in 700-byte pieces (not whole blocks). */
static ssize_t
archive_read(void *ctx, void *buf, size_t n, struct err *e)
{
	struct archive *a = ctx;
	size_t k = a->len - a->off;

	(void)e;
	if (k > 700)
		k = 700;
	if (k > n)
		k = n;
	memcpy(buf, a->b + a->off, k);
	a->off += k;
	return (ssize_t)k;
}

static int
put(struct sfx *s, const char *account, const char *id, struct archive *a, uint64_t max_entries,
    struct sbx_tree_res *res, struct err *e)
{
	a->off = 0;
	err_clear(e);
	return sbx_tree_put(s->app->sbx, account, id, "proj", archive_read, a, MAX_BYTES,
	    max_entries, res, e);
}

static long long
guest_file(const char *id, const char *rel, char *out, size_t n)
{
	char path[256];

	snprintf(path, sizeof(path), "/home/sandbox/proj/%s", rel);
	memset(out, 0, n);
	return fake_file_get(id, path, (unsigned char *)out, n - 1, NULL);
}

static void
test_tree_put_unpacks(void **state)
{
	struct sfx *s = *state;
	struct archive *a = calloc(1, sizeof(*a));
	struct sbx_tree_res res;
	char id[32], text[64];
	struct err e;

	sfx_create(s, 10, id);
	add(a, "./a/b.txt", '0', "bee\n");
	add(a, "a/", '5', "");
	add(a, "c.txt", '0', "sea\n");
	end(a);
	assert_int_equal(put(s, s->account, id, a, 100, &res, &e), 0);
	assert_string_equal(res.path, "/home/sandbox/proj");
	assert_int_equal(res.files, 2);
	assert_int_equal(res.dirs, 1);
	assert_int_equal(res.bytes, 8);
	assert_int_equal(guest_file(id, "a/b.txt", text, sizeof(text)), 4);
	assert_string_equal(text, "bee\n");
	assert_int_equal(guest_file(id, "c.txt", text, sizeof(text)), 4);
	free(a);
}

static void
test_tree_put_refused_changes_nothing(void **state)
{
	static const char *const bad[] = { "../up.txt", "/etc/abs", "x/../../y" };
	struct sfx *s = *state;
	struct sbx_tree_res res;
	char id[32], text[64];
	struct err e;

	sfx_create(s, 10, id);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct archive *a = calloc(1, sizeof(*a));

		add(a, "good.txt", '0', "good\n");
		add(a, bad[i], '0', "bad\n");
		end(a);
		assert_int_equal(put(s, s->account, id, a, 100, &res, &e), -1);
		assert_int_equal(e.kind, ERR_INVALID);
		assert_string_equal(e.field, "member");
		assert_non_null(strstr(e.msg, bad[i]));
		free(a);
	}
	{
		/* A device, and a stream cut inside a member. */
		struct archive *a = calloc(1, sizeof(*a));

		add(a, "good.txt", '0', "good\n");
		add(a, "dev", '3', "");
		end(a);
		assert_int_equal(put(s, s->account, id, a, 100, &res, &e), -1);
		assert_string_equal(e.field, "member");
		a->len = 0;
		add(a, "good.txt", '0', "good\n");
		add(a, "half.txt", '0', "0123456789");
		a->len -= TAR_BLOCK - 5;
		assert_int_equal(put(s, s->account, id, a, 100, &res, &e), -1);
		assert_int_equal(e.kind, ERR_INVALID);
		free(a);
	}
	assert_int_equal(guest_file(id, "good.txt", text, sizeof(text)), -1);
}

static void
test_tree_put_max_entries(void **state)
{
	struct sfx *s = *state;
	struct archive *a = calloc(1, sizeof(*a));
	struct sbx_tree_res res;
	char id[32], text[64];
	struct err e;

	sfx_create(s, 10, id);
	add(a, "one", '0', "1");
	add(a, "two", '0', "2");
	add(a, "three", '0', "3");
	end(a);
	assert_int_equal(put(s, s->account, id, a, 2, &res, &e), -1);
	/* A bad request, not a quota to wait out. */
	assert_int_equal(e.kind, ERR_INVALID);
	assert_int_equal(guest_file(id, "one", text, sizeof(text)), -1);
	assert_int_equal(put(s, s->account, id, a, 3, &res, &e), 0);
	assert_int_equal(guest_file(id, "three", text, sizeof(text)), 1);
	free(a);
}

static void
test_tree_other_account(void **state)
{
	struct sfx *s = *state;
	struct archive *a = calloc(1, sizeof(*a));
	struct sbx_tree_res res;
	char id[32], text[64];
	struct err e;

	sfx_create(s, 10, id);
	add(a, "x.txt", '0', "x");
	end(a);
	assert_int_equal(put(s, s->other, id, a, 100, &res, &e), -1);
	assert_int_equal(e.kind, ERR_NOT_FOUND);
	assert_int_equal(guest_file(id, "x.txt", text, sizeof(text)), -1);
	free(a);
}

struct sink {
	int starts;
	size_t len;
	char b[ARCHIVE_MAX];
};

static int
sink_start(void *ctx, struct err *e)
{
	struct sink *k = ctx;

	(void)e;
	assert_int_equal(k->len, 0);
	k->starts++;
	return 0;
}

static int
sink_write(void *ctx, const void *p, size_t n, struct err *e)
{
	struct sink *k = ctx;

	(void)e;
	assert_int_equal(k->starts, 1);
	assert_true(n <= sizeof(k->b) - k->len);
	memcpy(k->b + k->len, p, n);
	k->len += n;
	return 0;
}

static int
count_emit(void *ctx, const void *p, size_t n, struct err *e)
{
	(void)ctx;
	(void)p;
	(void)n;
	(void)e;
	return 0;
}

static void
test_tree_get_leaves_out_bad_members(void **state)
{
	struct sfx *s = *state;
	struct sink *k = calloc(1, sizeof(*k));
	const struct tar_rules strict = { .skip_bad = 0 };
	struct tar_filter *f;
	struct sbx_tree_res res;
	char id[32];
	struct err e;

	sfx_create(s, 10, id);
	assert_int_equal(fake_file_put(id, "/home/sandbox/proj/a.txt", "aaa", 3, 0644), 0);
	assert_int_equal(fake_file_put(id, "/home/sandbox/proj/d/b.txt", "bb", 2, 04755), 0);
	assert_int_equal(fake_file_put(id, "/home/sandbox/elsewhere.txt", "no", 2, 0644), 0);
	err_clear(&e);
	assert_int_equal(sbx_tree_get(s->app->sbx, s->account, id, "proj", NULL, MAX_BYTES,
			     sink_start, sink_write, k, &res, &e),
	    0);
	assert_int_equal(res.files, 2);
	assert_int_equal(res.skipped, 1); /* the fake's FIFO */
	assert_int_equal(res.bytes, 5);
	/* What came out is a whole archive under the strictest rules. */
	f = tar_filter_new(&strict);
	assert_int_equal(tar_filter_push(f, k->b, k->len, count_emit, NULL, &e), 0);
	assert_int_equal(tar_filter_finish(f, count_emit, NULL, &e), 0);
	assert_int_equal(tar_filter_stats(f)->files, 2);
	tar_filter_free(f);
	/* Another account: not found, and nothing started. */
	memset(k, 0, sizeof(*k));
	err_clear(&e);
	assert_int_equal(sbx_tree_get(s->app->sbx, s->other, id, "proj", NULL, MAX_BYTES,
			     sink_start, sink_write, k, &res, &e),
	    -1);
	assert_int_equal(e.kind, ERR_NOT_FOUND);
	assert_int_equal(k->starts, 0);
	free(k);
}

/* Exclude patterns reach the guest's tar; a bad list is refused before
 * anything starts. */
static void
test_tree_get_exclude(void **state)
{
	struct sfx *s = *state;
	struct sink *k = calloc(1, sizeof(*k));
	static const char *const bad[] = { ",", "a,,b", "a,", "x\ty" };
	char many[200] = "p0", id[32];
	struct sbx_tree_res res;
	struct err e;

	sfx_create(s, 10, id);
	assert_int_equal(fake_file_put(id, "/home/sandbox/proj/a.txt", "aaa", 3, 0644), 0);
	assert_int_equal(fake_file_put(id, "/home/sandbox/proj/node_modules/m.js", "mm", 2, 0644),
	    0);
	assert_int_equal(fake_file_put(id, "/home/sandbox/proj/d/x.pyc", "pp", 2, 0644), 0);
	err_clear(&e);
	assert_int_equal(sbx_tree_get(s->app->sbx, s->account, id, "proj", "node_modules,*.pyc",
			     MAX_BYTES, sink_start, sink_write, k, &res, &e),
	    0);
	assert_int_equal(res.files, 1);
	assert_int_equal(res.bytes, 3);
	for (int i = 1; i <= 32; i++)
		snprintf(many + strlen(many), sizeof(many) - strlen(many), ",p%d", i);
	for (size_t i = 0; i <= sizeof(bad) / sizeof(bad[0]); i++) {
		memset(k, 0, sizeof(*k));
		err_clear(&e);
		assert_int_equal(sbx_tree_get(s->app->sbx, s->account, id, "proj",
				     i < sizeof(bad) / sizeof(bad[0]) ? bad[i] : many, MAX_BYTES,
				     sink_start, sink_write, k, &res, &e),
		    -1);
		assert_int_equal(e.kind, ERR_INVALID);
		assert_string_equal(e.field, "exclude");
		assert_int_equal(k->starts, 0);
	}
	free(k);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, sfx_setup, sfx_teardown)

int
main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_tree_put_unpacks),
		T(test_tree_put_refused_changes_nothing),
		T(test_tree_put_max_entries),
		T(test_tree_other_account),
		T(test_tree_get_leaves_out_bad_members),
		T(test_tree_get_exclude),
	};

	return cmocka_run_group_tests(tests, sfx_group_setup, sfx_group_teardown);
}
