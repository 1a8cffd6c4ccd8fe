/* test_netguard.c - the isolation ruleset text (vmm/netguard.h) and the
 * AAS_NET_ALLOW ranges it is built from (base/config.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/config.h"
#include "vmm/netguard.h"
#include "vmm/netguard_status.h"

#include <unistd.h>

#define UID_LINE(rest) "meta skuid 999 " rest "\n"

/* One user alone, the way the rule read before per-VM users. */
static const struct netguard_users u999 = { 999, 0, 0 };
static const struct netguard_users u998 = { 998, 0, 0 };

/* Index of `needle` in `hay`, failing the test when it is absent. */
static size_t
at(const char *hay, const char *needle)
{
	const char *p = strstr(hay, needle);

	if (p == NULL)
		fail_msg("missing from the ruleset: %s\n---\n%s", needle, hay);
	return (size_t)(p - hay);
}

static void
test_ruleset_default(void **state)
{
	char rules[NETGUARD_RULES_MAX];
	size_t len;

	(void)state;
	assert_int_equal(netguard_ruleset(&u999, "", rules, sizeof(rules)), 0);
	at(rules, "delete table inet aas_guard");
	at(rules,
	    UID_LINE("fib daddr type { local, broadcast, multicast } ct state new meta l4proto "
		     "tcp counter reject with tcp reset"));
	at(rules, UID_LINE("ip daddr 169.254.0.0/16 counter reject"));
	at(rules, UID_LINE("ip6 daddr fe80::/10 counter reject"));
	/* The operator's networks: TCP with a reset, the rest rejected. */
	at(rules,
	    "meta skuid 999 ip daddr { 10.0.0.0/8, 100.64.0.0/10, 172.16.0.0/12, "
	    "192.168.0.0/16 } ct state new meta l4proto tcp counter reject with tcp reset "
	    "comment \"aas rules ");
	at(rules,
	    UID_LINE("ip daddr { 10.0.0.0/8, 100.64.0.0/10, 172.16.0.0/12, 192.168.0.0/16 } "
		     "ct state new counter reject"));
	at(rules,
	    UID_LINE("ip6 daddr fc00::/7 ct state new meta l4proto tcp counter reject with "
		     "tcp reset"));
	at(rules, UID_LINE("ip6 daddr fc00::/7 ct state new counter reject"));
	/* No list, no accept. */
	assert_null(strstr(rules, "accept\n"));
	assert_int_equal(netguard_ruleset(&u999, NULL, rules, sizeof(rules)), 0);
	assert_null(strstr(rules, "accept\n"));
	/* Too small a buffer is an error, not a cut ruleset. */
	len = strlen(rules);
	assert_int_equal(netguard_ruleset(&u999, "", rules, 64), -1);
	assert_int_equal(netguard_ruleset(&u999, "", rules, len), -1);
	assert_int_equal(netguard_ruleset(&u999, "", rules, len + 1), 0);
}

static void
test_ruleset_allow(void **state)
{
	char rules[NETGUARD_RULES_MAX], plain[NETGUARD_RULES_MAX];
	size_t local, link6, acc4, acc6, deny4, deny6;

	(void)state;
	assert_int_equal(netguard_ruleset(&u999, "10.99.20.0/24,fd12:3456::/32,192.168.7.1/32",
			     rules, sizeof(rules)),
	    0);
	local = at(rules, "meta skuid 999 fib daddr type { local,");
	link6 = at(rules, UID_LINE("ip6 daddr fe80::/10 counter reject"));
	acc4 = at(rules,
	    UID_LINE("ip daddr { 10.99.20.0/24, 192.168.7.1/32 } ct state new counter "
		     "accept"));
	acc6 = at(rules, UID_LINE("ip6 daddr { fd12:3456::/32 } ct state new counter accept"));
	deny4 = at(rules, "meta skuid 999 ip daddr { 10.0.0.0/8,");
	deny6 = at(rules, "meta skuid 999 ip6 daddr fc00::/7");
	/* The host and link-local first (no list opens them), then the
	 * allowed ranges, then the private ranges refused. */
	assert_true(local < link6 && link6 < acc4 && acc4 < acc6 && acc6 < deny4 && deny4 < deny6);
	/* Only IPv4 ranges: no IPv6 accept. */
	assert_int_equal(netguard_ruleset(&u999, "10.99.20.0/24", rules, sizeof(rules)), 0);
	at(rules, UID_LINE("ip daddr { 10.99.20.0/24 } ct state new counter accept"));
	assert_null(strstr(rules, "ip6 daddr {"));
	/* The mark differs with the list and the user, so a table made for
	 * another is outdated; the same input gives the same text. */
	assert_int_equal(netguard_ruleset(&u999, "", plain, sizeof(plain)), 0);
	assert_string_not_equal(strstr(rules, "comment"), strstr(plain, "comment"));
	assert_int_equal(netguard_ruleset(&u998, "10.99.20.0/24", plain, sizeof(plain)), 0);
	assert_string_not_equal(strstr(rules, "comment"), strstr(plain, "comment"));
	assert_int_equal(netguard_ruleset(&u999, "10.99.20.0/24", plain, sizeof(plain)), 0);
	assert_string_equal(rules, plain);
	/* Whatever reaches it is checked again: nothing else gets into nft's program. */
	assert_int_equal(netguard_ruleset(&u999, "10.0.0.0/8 } accept", rules, sizeof(rules)), -1);
	assert_int_equal(netguard_ruleset(&u999, "10.0.0.0/8,,", rules, sizeof(rules)), -1);
	assert_int_equal(netguard_ruleset(&u999, "10.0.0.1/8", rules, sizeof(rules)), -1);
}

/* The probes' user and the per-VM range in one set, in nft's order (the
 * check compares nft's listing with it). */
static void
test_ruleset_users(void **state)
{
	const struct netguard_users range = { 999, 3000000, 1024 }, one = { 999, 3000000, 1 };
	const struct netguard_users above = { 4000000, 3000000, 16 };
	char rules[NETGUARD_RULES_MAX], other[NETGUARD_RULES_MAX], text[NETGUARD_USERS_TEXT];

	(void)state;
	assert_int_equal(netguard_ruleset(&range, "", rules, sizeof(rules)), 0);
	at(rules, "meta skuid { 999, 3000000-3001023 } fib daddr type { local,");
	at(rules,
	    "meta skuid { 999, 3000000-3001023 } ip6 daddr fc00::/7 ct state new counter reject");
	assert_null(strstr(rules, "meta skuid 999 "));
	assert_int_equal(netguard_users_text(&one, text, sizeof(text)), 0);
	assert_string_equal(text, "{ 999, 3000000 }");
	assert_int_equal(netguard_users_text(&above, text, sizeof(text)), 0);
	assert_string_equal(text, "{ 3000000-3000015, 4000000 }");
	/* Words that do not fit are none at all, not a cut list of users. */
	assert_int_equal(netguard_users_text(&above, text, 8), -1);
	assert_string_equal(text, "");
	/* Another range is another ruleset: an older table is replaced. */
	assert_int_equal(netguard_ruleset(&one, "", other, sizeof(other)), 0);
	assert_string_not_equal(strstr(rules, "comment"), strstr(other, "comment"));
}

static void
test_ruleset_longest_list(void **state)
{
	char allow[CONFIG_NET_ALLOW_MAX + 16], rules[NETGUARD_RULES_MAX];
	size_t used = 0;

	(void)state;
	/* The longest canonical IPv6 ranges, as many as the setting allows. */
	for (int i = 0; i < CONFIG_MAX_NET_ALLOW; i++)
		used += (size_t)snprintf(allow + used, sizeof(allow) - used,
		    "%sfd00:1111:2222:3333:4444:5555:6666:%04x/128", i ? "," : "", 0x1000 + i);
	assert_int_equal(netguard_ruleset(&u999, allow, rules, sizeof(rules)), 0);
	at(rules, "fd00:1111:2222:3333:4444:5555:6666:101f/128 } ct state new counter accept");
	/* One more is over the limit. */
	snprintf(allow + used, sizeof(allow) - used, ",fd00::/8");
	assert_int_equal(netguard_ruleset(&u999, allow, rules, sizeof(rules)), -1);
}

static void
test_cidr_canon(void **state)
{
	static const struct {
		const char *in, *out;
		int fam;
	} good[] = {
		{ "10.99.0.0/16", "10.99.0.0/16", 4 },
		{ "0.0.0.0/0", "0.0.0.0/0", 4 },
		{ "192.168.7.1", "192.168.7.1/32", 4 },
		{ "192.168.7.1/32", "192.168.7.1/32", 4 },
		{ "FD12:3456:0:0::/32", "fd12:3456::/32", 6 },
		{ "fd00::1", "fd00::1/128", 6 },
		{ "::/0", "::/0", 6 },
		{ "2001:db8::/127", "2001:db8::/127", 6 },
	};
	static const char *const bad[] = {
		"",
		"/8",
		"10.0.0.0/33", /* prefix too long for IPv4 */
		"fd00::/129",  /* and for IPv6 */
		"10.0.0.0/-1",
		"10.0.0.0/",
		"10.0.0.0/8x",
		"10.0.0.0/08 ",
		"10.0.0.1/8", /* bits set past the prefix */
		"fd00::1/64",
		"10.0.0/8",
		"10.0.0.256/32",
		"junk",
		"fd00:::1/64",
		"10.0.0.0 /8",
		"10.0.0.0/8,",
		"1.2.3.4/32/1",
		"::ffff:1.2.3.4.5/128",
	};
	char out[64];

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		assert_int_equal(config_cidr_canon(good[i].in, out, sizeof(out)), good[i].fam);
		assert_string_equal(out, good[i].out);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (config_cidr_canon(bad[i], out, sizeof(out)) != -1)
			fail_msg("accepted %s", bad[i]);
	/* Does not fit: an error, not a cut range. */
	assert_int_equal(config_cidr_canon("10.99.0.0/16", out, 12), -1);
}

static const char *env_allow;

static const char *
fake_env(const char *name)
{
	return strcmp(name, "AAS_NET_ALLOW") == 0 ? env_allow : NULL;
}

static void
test_config_net_allow(void **state)
{
	static const char *const bad[] = { "10.0.0.0/33", "junk", "10.99.0.0/16,", ",10.99.0.0/16",
		"10.99.0.0/16,,fd00::/8", "10.99.0.1/16", "fd00::/200" };
	struct config *cfg = malloc(sizeof(*cfg));
	char many[2048];
	size_t used = 0;
	struct err e;

	(void)state;
	assert_non_null(cfg);
	env_allow = NULL;
	err_clear(&e);
	assert_int_equal(config_load(cfg, fake_env, &e), 0);
	assert_string_equal(cfg->net_allow, "");
	env_allow = " 10.99.20.0/24 , FD00::/8,192.168.7.1";
	assert_int_equal(config_load(cfg, fake_env, &e), 0);
	assert_string_equal(cfg->net_allow, "10.99.20.0/24,fd00::/8,192.168.7.1/32");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		env_allow = bad[i];
		err_clear(&e);
		if (config_load(cfg, fake_env, &e) != -1)
			fail_msg("AAS_NET_ALLOW=%s accepted", bad[i]);
		/* The message names the variable. */
		assert_non_null(strstr(e.msg, "AAS_NET_ALLOW"));
	}
	/* At most CONFIG_MAX_NET_ALLOW ranges. */
	for (int i = 0; i < CONFIG_MAX_NET_ALLOW; i++)
		used += (size_t)snprintf(many + used, sizeof(many) - used, "%s10.%d.0.0/16",
		    i ? "," : "", i);
	env_allow = many;
	assert_int_equal(config_load(cfg, fake_env, &e), 0);
	snprintf(many + used, sizeof(many) - used, ",fd00::/8");
	err_clear(&e);
	assert_int_equal(config_load(cfg, fake_env, &e), -1);
	assert_non_null(strstr(e.msg, "AAS_NET_ALLOW"));
	free(cfg);
}

/* A status path of this test's own. */
static void
status_path(char *out, size_t n)
{
	snprintf(out, n, "/tmp/aas-test-netguard-%ld.status", (long)getpid());
}

static void
test_status_round_trip(void **state)
{
	char path[128];
	struct err e;

	(void)state;
	status_path(path, sizeof(path));
	unlink(path);
	err_clear(&e);
	/* No file: no watcher, aasd checks nftables itself. */
	assert_int_equal(netguard_status_check(path, &u999, "", 1000, &e), 1);
	assert_int_equal(netguard_status_write(path, &u999, "", NULL, 5, 1000, &e), 0);
	assert_int_equal(netguard_status_check(path, &u999, "", 1000, &e), 0);
	/* Fresh for three periods, not after. */
	assert_int_equal(netguard_status_check(path, &u999, "", 1015, &e), 0);
	assert_int_equal(netguard_status_check(path, &u999, "", 1016, &e), -1);
	assert_non_null(strstr(e.msg, "16 s ago"));
	assert_non_null(strstr(e.msg, "aas-netguard.service"));
	/* From the future by more than a period: a clock step or a forgery. */
	err_clear(&e);
	assert_int_equal(netguard_status_check(path, &u999, "", 990, &e), -1);
	/* Another user or allow-list: another ruleset. */
	err_clear(&e);
	assert_int_equal(netguard_status_check(path, &u998, "", 1000, &e), -1);
	assert_non_null(strstr(e.msg, "another ruleset"));
	err_clear(&e);
	assert_int_equal(netguard_status_check(path, &u999, "10.99.20.0/24", 1000, &e), -1);
	assert_non_null(strstr(e.msg, "AAS_NET_ALLOW"));
	/* The watcher's failure, with its reason on one line. */
	err_clear(&e);
	assert_int_equal(netguard_status_write(path, &u999, "", "nft: no\nsuch table", 5, 1000, &e),
	    0);
	assert_int_equal(netguard_status_check(path, &u999, "", 1000, &e), -1);
	assert_non_null(strstr(e.msg, "cannot keep the isolation rule: nft: no such table"));
	unlink(path);
}

static void
test_status_hostile_text(void **state)
{
	char mark[64], ok[256];
	struct err e;
	const char *bad[] = {
		"",
		"aas-netguard 2\nstate ok\n",
		"aas-netguard 1\nstate ok\nchecked 1000\nevery 5\n",         /* no mark */
		"aas-netguard 1\nstate ok\nmark x\nchecked 10x0\nevery 5\n", /* a number */
		"aas-netguard 1\nstate ok\nmark x\nchecked 1000\nevery 0\n", /* no period */
		"aas-netguard 1\nstate ok\nmark x\nchecked 1000\nevery 99999\n",
		"aas-netguard 1\nstate ok\nmark x\nchecked -5\nevery 5\n",
	};

	(void)state;
	assert_int_equal(netguard_mark(&u999, "", mark, sizeof(mark)), 0);
	snprintf(ok, sizeof(ok), "aas-netguard 1\nstate ok\nmark %s\nchecked 1000\nevery 5\n",
	    mark);
	err_clear(&e);
	assert_int_equal(netguard_status_parse(ok, strlen(ok), mark, 1000, &e), 0);
	/* A NUL inside is not a status. */
	assert_int_equal(netguard_status_parse(ok, strlen(ok) + 1, mark, 1000, &e), -1);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err_clear(&e);
		assert_int_equal(netguard_status_parse(bad[i], strlen(bad[i]), mark, 1000, &e), -1);
	}
	/* Anything past the bound is not read. */
	{
		char big[NETGUARD_STATUS_MAX + 64];

		memset(big, 'a', sizeof(big));
		err_clear(&e);
		assert_int_equal(netguard_status_parse(big, sizeof(big), mark, 1000, &e), -1);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ruleset_default),
		cmocka_unit_test(test_ruleset_allow),
		cmocka_unit_test(test_ruleset_users),
		cmocka_unit_test(test_ruleset_longest_list),
		cmocka_unit_test(test_cidr_canon),
		cmocka_unit_test(test_config_net_allow),
		cmocka_unit_test(test_status_round_trip),
		cmocka_unit_test(test_status_hostile_text),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
