/* test_hlim.c - the front end's client limits (server/hlim.h): address
 * groups, connections per address, arrival deadlines with paused time
 * and body bytes, and body budgets per owner. */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/clock.h"
#include "base/log.h"
#include "server/hlim.h"

static const struct hlim_limits lim = {
	.max_conns_per_addr = 2,
	.recv_s = 10,
	.min_recv_rate = 1000,
	.idle_s = 120,
	.body_per_owner = 100,
	.max_conns = 16,
};

static struct sockaddr_storage
addr(const char *text)
{
	struct sockaddr_storage ss;

	memset(&ss, 0, sizeof(ss));
	if (strchr(text, ':')) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
		s6->sin6_family = AF_INET6;
		assert_int_equal(inet_pton(AF_INET6, text, &s6->sin6_addr), 1);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		s4->sin_family = AF_INET;
		assert_int_equal(inet_pton(AF_INET, text, &s4->sin_addr), 1);
	}
	return ss;
}

static void
test_groups(void **state)
{
	char g[HLIM_GROUP_MAX + 1];
	struct sockaddr_storage a;

	(void)state;
	a = addr("127.0.0.2");
	assert_int_equal(hlim_group((struct sockaddr *)&a, g, sizeof(g)), 0);
	assert_string_equal(g, "127.0.0.2");
	/* A whole /64 is one client; an IPv4-mapped address is its IPv4. */
	a = addr("2001:db8:1:2:aaaa:bbbb:cccc:dddd");
	assert_int_equal(hlim_group((struct sockaddr *)&a, g, sizeof(g)), 0);
	assert_string_equal(g, "2001:db8:1:2::/64");
	a = addr("::ffff:10.1.2.3");
	assert_int_equal(hlim_group((struct sockaddr *)&a, g, sizeof(g)), 0);
	assert_string_equal(g, "10.1.2.3");
	hlim_group_text("2001:db8:1:2::99", g, sizeof(g));
	assert_string_equal(g, "2001:db8:1:2::/64");
	hlim_group_text("unknown", g, sizeof(g));
	assert_string_equal(g, "unknown");
	/* Too long for out: no group (never one cut to another's). */
	a = addr("127.0.0.2");
	assert_int_equal(hlim_group((struct sockaddr *)&a, g, 8), -1);
	hlim_group_text("an-unparsable-name-longer-than-sixteen", g, 16);
	assert_string_equal(g, "unknown");
}

/* The third connection of one address is refused; another address, and
 * the first once one of its connections closed, are let in. */
static void
test_conns_per_addr(void **state)
{
	struct hlim *h = hlim_new(&lim);
	struct sockaddr_storage a = addr("127.0.0.2"), b = addr("127.0.0.1");
	struct sockaddr_storage a6 = addr("2001:db8::1"), a6b = addr("2001:db8::2");
	struct hlim_conn *c1, *c2, *c3;
	int sv[2];

	(void)state;
	assert_non_null(h);
	assert_true(hlim_accept(h, (struct sockaddr *)&a));
	c1 = hlim_started(h, -1, (struct sockaddr *)&a);
	c2 = hlim_started(h, -1, (struct sockaddr *)&a);
	assert_non_null(c1);
	assert_non_null(c2);
	assert_false(hlim_accept(h, (struct sockaddr *)&a));
	/* One that raced past the policy is shut down at once. */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_null(hlim_started(h, sv[0], (struct sockaddr *)&a));
	assert_int_equal(read(sv[1], &(char){ 0 }, 1), 0);
	close(sv[0]);
	close(sv[1]);
	assert_true(hlim_accept(h, (struct sockaddr *)&b));
	hlim_closed(h, c1);
	assert_true(hlim_accept(h, (struct sockaddr *)&a));
	/* Two addresses of one /64 count together. */
	c1 = hlim_started(h, -1, (struct sockaddr *)&a6);
	c3 = hlim_started(h, -1, (struct sockaddr *)&a6b);
	assert_non_null(c1);
	assert_non_null(c3);
	assert_false(hlim_accept(h, (struct sockaddr *)&a6));
	hlim_closed(h, c1);
	hlim_closed(h, c2);
	hlim_closed(h, c3);
	hlim_closed(h, NULL);
	hlim_free(h);
	hlim_free(NULL);
}

/* A request not in within recv_s is shut down; body bytes earn time at
 * min_recv_rate; time paused is not counted; an answered request has no
 * deadline; a kept-alive connection's next request is due after idle_s. */
static void
test_deadlines(void **state)
{
	struct hlim *h = hlim_new(&lim);
	struct sockaddr_storage a = addr("127.0.0.2");
	struct hlim_conn *c;
	long long t0 = clock_ms();
	int sv[2];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	c = hlim_started(h, sv[0], (struct sockaddr *)&a);
	assert_non_null(c);
	hlim_request_begin(h, c);
	assert_int_equal(hlim_sweep(h, t0 + 9000), 0);
	hlim_request_bytes(h, c, 5000); /* 5 s more */
	assert_int_equal(hlim_sweep(h, t0 + 14000), 0);
	hlim_pause(h, c);
	assert_int_equal(hlim_sweep(h, t0 + 100000), 0); /* paused: never */
	hlim_resume(h, c);
	hlim_request_end(h, c);
	assert_int_equal(hlim_sweep(h, t0 + 1000000), 0); /* in: no deadline */
	hlim_request_done(h, c);
	assert_int_equal(hlim_sweep(h, t0 + 120000), 0);
	assert_int_equal(hlim_sweep(h, t0 + 131000), 1);
	assert_int_equal(read(sv[1], &(char){ 0 }, 1), 0);
	assert_int_equal(hlim_sweep(h, t0 + 140000), 0); /* once */
	hlim_closed(h, c);
	close(sv[0]);
	close(sv[1]);
	/* An exempt connection (a WebSocket, the preview proxy) never is. */
	c = hlim_started(h, -1, (struct sockaddr *)&a);
	hlim_exempt(h, c);
	assert_int_equal(hlim_sweep(h, t0 + 1000000), 0);
	hlim_closed(h, c);
	hlim_free(h);
}

static void
test_body_budget(void **state)
{
	struct hlim *h = hlim_new(&lim);

	(void)state;
	assert_int_equal(hlim_body_take(h, "a:one", 60), 0);
	assert_int_equal(hlim_body_take(h, "a:one", 40), 0);
	assert_int_equal(hlim_body_take(h, "a:one", 1), -1);
	/* Another owner has its own budget. */
	assert_int_equal(hlim_body_take(h, "a:two", 100), 0);
	assert_int_equal(hlim_body_held(h, "a:one"), 100);
	hlim_body_give(h, "a:one", 60);
	assert_int_equal(hlim_body_take(h, "a:one", 50), 0);
	assert_int_equal(hlim_body_take(h, "ip:127.0.0.1", 101), -1);
	assert_int_equal(hlim_body_held(h, "ip:127.0.0.1"), 0);
	hlim_body_give(h, "a:one", 90);
	hlim_body_give(h, "a:two", 100);
	assert_int_equal(hlim_body_held(h, "a:one"), 0);
	hlim_free(h);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_groups),
		cmocka_unit_test(test_conns_per_addr),
		cmocka_unit_test(test_deadlines),
		cmocka_unit_test(test_body_budget),
	};

	log_set_level(LOG_LEVEL_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
