/* test_conlog.c - the bounded console log (vmm/conlog.h): never over its
 * bound, always the newest bytes, in order. */
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

#include "vmm/conlog.h"

#define MAX 8192

struct fx {
	char dir[64];
	char path[128];
};

static int
setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/test_conlog.XXXXXX");
	if (mkdtemp(f->dir) == NULL)
		return -1;
	snprintf(f->path, sizeof(f->path), "%s/console.log", f->dir);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fx *f = *state;
	char tmp[160];

	unlink(f->path);
	snprintf(tmp, sizeof(tmp), "%s.new", f->path);
	unlink(tmp);
	rmdir(f->dir);
	free(f);
	return 0;
}

static long long
file_size(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0 ? (long long)sb.st_size : -1;
}

/* The whole file, NUL-terminated. */
static char *
slurp(const char *path)
{
	char *t = conlog_tail(path, 1u << 20);

	assert_non_null(t);
	return t;
}

/* Byte i of an endless stream the guest writes: a counter in text, so
 * that any cut or reorder shows. */
static char
stream_byte(size_t i)
{
	return (char)('a' + (i / 7 + i) % 26);
}

static void
test_small_output_kept_whole(void **state)
{
	struct fx *f = *state;
	struct err e;
	struct conlog *l;
	char *t;

	err_clear(&e);
	l = conlog_open(f->path, MAX, &e);
	assert_non_null(l);
	assert_int_equal(conlog_append(l, "hello ", 6, &e), 0);
	assert_int_equal(conlog_append(l, "world\n", 6, &e), 0);
	assert_int_equal(conlog_size(l), 12);
	conlog_close(l);
	t = slurp(f->path);
	assert_string_equal(t, "hello world\n");
	free(t);
}

/* 100 x the bound in uneven pieces: the file never passes the bound, and
 * always ends with the newest bytes, at least half the bound of them. */
static void
test_flood_stays_bounded_and_newest(void **state)
{
	struct fx *f = *state;
	struct err e;
	struct conlog *l;
	char chunk[3000];
	size_t written = 0;

	err_clear(&e);
	l = conlog_open(f->path, MAX, &e);
	assert_non_null(l);
	for (size_t step = 0; written < 100 * MAX; step++) {
		size_t n = 1 + (step * 977) % sizeof(chunk);
		for (size_t i = 0; i < n; i++)
			chunk[i] = stream_byte(written + i);
		assert_int_equal(conlog_append(l, chunk, n, &e), 0);
		written += n;
		long long sz = file_size(f->path);
		assert_true(sz <= MAX);
		assert_int_equal((size_t)sz, conlog_size(l));
	}
	conlog_close(l);
	char *t = slurp(f->path);
	size_t len = strlen(t);
	assert_true(len >= MAX / 2 && len <= MAX);
	for (size_t i = 0; i < len; i++)
		if (t[i] != stream_byte(written - len + i))
			fail_msg("byte %zu of the kept %zu is not the stream's", i, len);
	free(t);
}

/* One write larger than the bound keeps its own newest half-bound. */
static void
test_one_huge_write(void **state)
{
	struct fx *f = *state;
	struct err e;
	size_t n = 5 * MAX;
	char *big = malloc(n);
	struct conlog *l;

	assert_non_null(big);
	for (size_t i = 0; i < n; i++)
		big[i] = stream_byte(i);
	err_clear(&e);
	l = conlog_open(f->path, MAX, &e);
	assert_non_null(l);
	assert_int_equal(conlog_append(l, "x", 1, &e), 0);
	assert_int_equal(conlog_append(l, big, n, &e), 0);
	assert_int_equal(file_size(f->path), MAX / 2);
	conlog_close(l);
	char *t = slurp(f->path);
	assert_memory_equal(t, big + n - MAX / 2, MAX / 2);
	free(t);
	free(big);
}

/* Reopened after a restart: what it holds is kept and appended to; a file
 * already over the bound is cut to the newest half. */
static void
test_reopen_keeps_and_cuts(void **state)
{
	struct fx *f = *state;
	struct err e;
	struct conlog *l;
	FILE *fp = fopen(f->path, "w");

	assert_non_null(fp);
	for (size_t i = 0; i < 3 * MAX; i++)
		fputc(stream_byte(i), fp);
	fclose(fp);
	err_clear(&e);
	l = conlog_open(f->path, MAX, &e);
	assert_non_null(l);
	assert_int_equal(file_size(f->path), MAX / 2);
	char c = stream_byte(3 * MAX);
	assert_int_equal(conlog_append(l, &c, 1, &e), 0);
	conlog_close(l);
	char *t = slurp(f->path);
	assert_int_equal(strlen(t), MAX / 2 + 1);
	for (size_t i = 0; i < MAX / 2 + 1; i++)
		assert_int_equal(t[i], stream_byte(3 * MAX - MAX / 2 + i));
	free(t);
}

/* A symbolic link in its place is refused, not followed. */
static void
test_no_symlink_follow(void **state)
{
	struct fx *f = *state;
	struct err e;
	char target[160];

	snprintf(target, sizeof(target), "%s/target", f->dir);
	assert_int_equal(symlink(target, f->path), 0);
	err_clear(&e);
	assert_null(conlog_open(f->path, MAX, &e));
	assert_null(conlog_tail(f->path, 100));
	assert_int_equal(file_size(target), -1);
	unlink(f->path);
}

static void
test_bound_range(void **state)
{
	struct fx *f = *state;
	struct err e;

	err_clear(&e);
	assert_null(conlog_open(f->path, CONLOG_MIN_BYTES - 1, &e));
	assert_int_equal(e.kind, ERR_INVALID);
}

static void
test_tail(void **state)
{
	struct fx *f = *state;
	struct err e;
	struct conlog *l;
	char *t;

	err_clear(&e);
	l = conlog_open(f->path, MAX, &e);
	assert_non_null(l);
	assert_int_equal(conlog_append(l, "0123456789", 10, &e), 0);
	conlog_close(l);
	t = conlog_tail(f->path, 4);
	assert_string_equal(t, "6789");
	free(t);
	assert_null(conlog_tail("/nonexistent/console.log", 4));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_small_output_kept_whole, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flood_stays_bounded_and_newest, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_one_huge_write, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reopen_keeps_and_cuts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_symlink_follow, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bound_range, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tail, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
