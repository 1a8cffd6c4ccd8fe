/* test_bridge_pack.c - the tar stream a sync sends (bridge/br_pack.h):
 * read in odd pieces it is one archive that GNU tar unpacks to the same
 * bytes, modes and times and that base/tar passes under its strictest
 * rules; a file that shrank or grew after the scan keeps the archive well
 * formed and is named in a warning; an unreadable file is an error. */
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
#include "bridge/br_pack.h"

#define OUT_MAX (1u << 20)

static char base[256];

static void
write_file(const char *rel, const char *data, size_t n)
{
	char p[600];
	FILE *f;

	snprintf(p, sizeof(p), "%s/src/%s", base, rel);
	f = fopen(p, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, n, f), n);
	fclose(f);
}

static int
setup(void **state)
{
	char p[600];

	(void)state;
	snprintf(base, sizeof(base), "/tmp/test_bridge_pack.XXXXXX");
	if (mkdtemp(base) == NULL)
		return -1;
	snprintf(p, sizeof(p), "%s/src", base);
	if (mkdir(p, 0755) < 0)
		return -1;
	snprintf(p, sizeof(p), "%s/src/sub", base);
	return mkdir(p, 0750);
}

static int
teardown(void **state)
{
	char cmd[700];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	return system(cmd) == 0 ? 0 : -1;
}

/* The whole archive, read `piece` bytes at a time. */
static size_t
drain(struct br_pack *p, char *out, size_t piece)
{
	size_t len = 0;
	struct err e;
	ssize_t n;

	err_clear(&e);
	while ((n = br_pack_read(p, out + len, piece < OUT_MAX - len ? piece : OUT_MAX - len, &e)) >
	    0)
		len += (size_t)n;
	assert_int_equal(n, 0);
	return len;
}

static int
no_emit(void *ctx, const void *p, size_t n, struct err *e)
{
	(void)ctx;
	(void)p;
	(void)n;
	(void)e;
	return 0;
}

static void
test_pack_is_one_archive(void **state)
{
	static char big[70000], out[OUT_MAX], back[OUT_MAX];
	char src[600], cmd[1400], got[64];
	struct br_entry dir = { "sub", 'd', 0, 1600000000, 0750, NULL };
	struct br_entry f1 = { "sub/big.bin", 'f', sizeof(big), 1600000001, 0640, NULL };
	struct br_entry f2 = { "empty", 'f', 0, 1600000002, 0600, NULL };
	const struct tar_rules strict = { .skip_bad = 0 };
	struct tar_filter *f;
	struct br_pack *p;
	struct stat st;
	struct err e;
	FILE *fp;
	size_t len = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (char)(i * 31);
	write_file("sub/big.bin", big, sizeof(big));
	write_file("empty", "", 0);
	snprintf(src, sizeof(src), "%s/src", base);
	err_clear(&e);
	for (size_t piece = 1; piece <= 70001; piece += 1777) {
		p = br_pack_new(src);
		assert_non_null(p);
		assert_int_equal(br_pack_add(p, &dir, &e), 0);
		assert_int_equal(br_pack_add(p, &f1, &e), 0);
		assert_int_equal(br_pack_add(p, &f2, &e), 0);
		assert_int_equal(br_pack_count(p), 3);
		assert_int_equal(br_pack_content_bytes(p), sizeof(big));
		if (piece == 1) {
			len = drain(p, out, 1);
			assert_int_equal(len % TAR_BLOCK, 0);
		} else {
			/* The same bytes however they are asked for. */
			assert_int_equal(drain(p, back, piece), len);
			assert_memory_equal(back, out, len);
		}
		br_pack_free(p);
	}
	f = tar_filter_new(&strict);
	assert_int_equal(tar_filter_push(f, out, len, no_emit, NULL, &e), 0);
	assert_int_equal(tar_filter_finish(f, no_emit, NULL, &e), 0);
	assert_int_equal(tar_filter_stats(f)->files, 2);
	assert_int_equal(tar_filter_stats(f)->dirs, 1);
	tar_filter_free(f);
	/* GNU tar unpacks it: bytes, modes, times. */
	snprintf(cmd, sizeof(cmd), "%s/out.tar", base);
	fp = fopen(cmd, "w");
	assert_non_null(fp);
	assert_int_equal(fwrite(out, 1, len, fp), len);
	fclose(fp);
	snprintf(cmd, sizeof(cmd), "mkdir '%s/dst' && tar -x -f '%s/out.tar' -C '%s/dst'", base,
	    base, base);
	assert_int_equal(system(cmd), 0);
	snprintf(cmd, sizeof(cmd), "%s/dst/sub/big.bin", base);
	fp = fopen(cmd, "r");
	assert_non_null(fp);
	assert_int_equal(fread(back, 1, sizeof(back), fp), sizeof(big));
	fclose(fp);
	assert_memory_equal(back, big, sizeof(big));
	assert_int_equal(stat(cmd, &st), 0);
	assert_int_equal(st.st_mtime, 1600000001);
	assert_int_equal(st.st_mode & 0777, 0640);
	snprintf(cmd, sizeof(cmd), "%s/dst/sub", base);
	assert_int_equal(stat(cmd, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	snprintf(got, sizeof(got), "%o", st.st_mode & 0777);
	assert_string_equal(got, "750");
}

static void
test_pack_changed_files(void **state)
{
	static char out[OUT_MAX];
	char src[600];
	/* Listed as 10 bytes; now 4 (shrank) and 20 (grew). */
	struct br_entry shrank = { "shrank", 'f', 10, 1, 0644, NULL };
	struct br_entry grew = { "grew", 'f', 10, 1, 0644, NULL };
	struct br_entry gone = { "gone", 'f', 10, 1, 0644, NULL };
	const struct tar_rules strict = { .skip_bad = 0 };
	struct tar_filter *f;
	json_t *warnings = json_array();
	struct br_pack *p;
	struct err e;
	size_t len;

	(void)state;
	write_file("shrank", "four", 4);
	write_file("grew", "twenty bytes here...", 20);
	snprintf(src, sizeof(src), "%s/src", base);
	err_clear(&e);
	p = br_pack_new(src);
	assert_int_equal(br_pack_add(p, &shrank, &e), 0);
	assert_int_equal(br_pack_add(p, &grew, &e), 0);
	len = drain(p, out, 4096);
	f = tar_filter_new(&strict);
	assert_int_equal(tar_filter_push(f, out, len, no_emit, NULL, &e), 0);
	assert_int_equal(tar_filter_finish(f, no_emit, NULL, &e), 0);
	assert_int_equal(tar_filter_stats(f)->bytes, 20);
	tar_filter_free(f);
	br_pack_warnings(p, warnings);
	assert_int_equal(json_array_size(warnings), 2);
	assert_non_null(strstr(json_string_value(json_array_get(warnings, 0)), "shrank"));
	assert_non_null(strstr(json_string_value(json_array_get(warnings, 1)), "grew"));
	br_pack_free(p);
	/* A file that went: an error naming it. */
	p = br_pack_new(src);
	assert_int_equal(br_pack_add(p, &gone, &e), 0);
	assert_int_equal(br_pack_read(p, out, sizeof(out), &e), -1);
	assert_string_equal(e.field, "local_path");
	assert_non_null(strstr(e.msg, "gone"));
	br_pack_free(p);
	json_decref(warnings);
	br_pack_free(NULL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_pack_is_one_archive, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pack_changed_files, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
