/* test_gzip.c - stored-block gzip: the CRC-32 check value, the member's
 * layout, and round trips through the system's gzip for sizes around a
 * block's limit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/gzip.h"

static void
test_crc(void **state)
{
	(void)state;
	assert_int_equal(gz_crc32(0, "123456789", 9), 0xCBF43926u);
	assert_int_equal(gz_crc32(0, "", 0), 0);
	/* In pieces, the same. */
	assert_int_equal(gz_crc32(gz_crc32(0, "1234", 4), "56789", 5), 0xCBF43926u);
}

/* Decompresses with gzip -dc and compares. */
static void
round_trip(size_t n)
{
	char path[] = "/tmp/aas-gz-XXXXXX", cmd[128];
	unsigned char *in = malloc(n ? n : 1), *back = malloc(n + 16);
	struct buf b;
	FILE *f;
	size_t got;
	int fd;

	assert_non_null(in);
	assert_non_null(back);
	for (size_t i = 0; i < n; i++)
		in[i] = (unsigned char)(i * 7 + (i >> 8));
	buf_init(&b, n + 4096);
	assert_int_equal(gz_stored(&b, in, n), 0);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	f = fdopen(fd, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(b.data, 1, b.len, f), b.len);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "gzip -dc < %s", path);
	f = popen(cmd, "r");
	assert_non_null(f);
	got = fread(back, 1, n + 16, f);
	assert_int_equal(pclose(f), 0);
	assert_int_equal(got, n);
	assert_memory_equal(back, in, n);
	unlink(path);
	buf_free(&b);
	free(in);
	free(back);
}

static void
test_round_trips(void **state)
{
	static const size_t sizes[] = { 0, 1, 65534, 65535, 65536, 3 * 65535 + 17 };

	(void)state;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		round_trip(sizes[i]);
}

static void
test_bounded(void **state)
{
	char data[100] = { 0 };
	struct buf b;

	(void)state;
	buf_init(&b, 50);
	assert_int_equal(gz_stored(&b, data, sizeof(data)), -1);
	buf_free(&b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crc),
		cmocka_unit_test(test_round_trips),
		cmocka_unit_test(test_bounded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
