/* test_guest_listen.c - reading a guest's TCP socket tables
 * (vmm/guest_listen.h): listeners by port and address, IPv4 and IPv6,
 * connections that are not listeners, and text that is not a table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "vmm/guest_listen.h"

#define HEAD4 "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid\n"
#define TAIL " 00000000:00000000 00:00000000 00000000  1000        0 12345 1 0 100 0 0 10 0\n"

static const char v4[] = HEAD4
    "   0: 00000000:1F40 00000000:0000 0A" TAIL  /* 0.0.0.0:8000 listening */
    "   1: 0100007F:1F41 00000000:0000 0A" TAIL  /* 127.0.0.1:8001 listening */
    "   2: 0F02000A:1F42 0202000A:C350 01" TAIL  /* 10.0.2.15:8002 established */
    "   3: 0100007F:1F43 00000000:0000 0A" TAIL  /* 127.0.0.1:8003 and */
    "   4: 0F02000A:1F43 00000000:0000 0A" TAIL; /* 10.0.2.15:8003 */

static const char v6[] =
    "  sl  local_address remote_address st\n"
    "   0: 00000000000000000000000000000000:1F40 00000000000000000000000000000000:0000 0A" TAIL
    "   1: 00000000000000000000000001000000:1F41 00000000000000000000000000000000:0000 0A" TAIL
    "   2: 0000000000000000FFFF00000100007F:1F42 00000000000000000000000000000000:0000 0A" TAIL;

static void
test_ipv4(void **state)
{
	(void)state;
	assert_int_equal(guest_listen_parse(v4, strlen(v4), 8000), GUEST_LISTEN_ANY);
	assert_int_equal(guest_listen_parse(v4, strlen(v4), 8001), GUEST_LISTEN_LOOPBACK);
	assert_int_equal(guest_listen_parse(v4, strlen(v4), 8002), GUEST_LISTEN_NONE);
	assert_int_equal(guest_listen_parse(v4, strlen(v4), 8003), GUEST_LISTEN_ANY);
	assert_int_equal(guest_listen_parse(v4, strlen(v4), 9000), GUEST_LISTEN_NONE);
}

static void
test_ipv6(void **state)
{
	(void)state;
	assert_int_equal(guest_listen_parse(v6, strlen(v6), 8000), GUEST_LISTEN_ANY);
	assert_int_equal(guest_listen_parse(v6, strlen(v6), 8001), GUEST_LISTEN_LOOPBACK);
	assert_int_equal(guest_listen_parse(v6, strlen(v6), 8002), GUEST_LISTEN_LOOPBACK);
}

static void
test_not_a_table(void **state)
{
	static const char junk[] =
	    "0: zz:1F40 00:0000 0A\n:::: \n   5: 00000000:1F4 00000000:0000 0A\n"
	    "   6: 00000000:1F40\n   7: 0000000:1F40 00000000:0000 0A\n";
	char cut[64];

	(void)state;
	assert_int_equal(guest_listen_parse(junk, strlen(junk), 8000), GUEST_LISTEN_NONE);
	assert_int_equal(guest_listen_parse(NULL, 10, 8000), GUEST_LISTEN_NONE);
	assert_int_equal(guest_listen_parse(v4, strlen(v4), 0), GUEST_LISTEN_NONE);
	assert_int_equal(guest_listen_parse(v4, strlen(v4), 70000), GUEST_LISTEN_NONE);
	/* Cut inside the state field: read within the length only. */
	memcpy(cut, v4 + strlen(HEAD4), sizeof(cut));
	assert_int_equal(guest_listen_parse(cut, 35, 8000), GUEST_LISTEN_NONE);
	assert_int_equal(guest_listen_parse(cut, 36, 8000), GUEST_LISTEN_ANY);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ipv4),
		cmocka_unit_test(test_ipv6),
		cmocka_unit_test(test_not_a_table),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
