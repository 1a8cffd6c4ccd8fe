/* ngcli.c - aasd --netguard-{rules,rules-hash,users,install,watch}.
 *
 * --netguard-install and --netguard-watch run as root (the unit's
 * ExecStartPre=+ and deploy/aas-netguard.service): aasd itself keeps no
 * CAP_NET_ADMIN, so it can neither load nor read nftables and trusts the
 * status these two record (vmm/netguard_status.h). */
#include "server/ngcli.h"

#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/config.h"
#include "base/keys.h"
#include "vmm/netguard.h"
#include "vmm/netguard_status.h"

static const char *const commands[] = { "--netguard-rules", "--netguard-rules-hash",
	"--netguard-users", "--netguard-install", "--netguard-watch" };

static volatile sig_atomic_t stop_watch;

static void
on_stop(int sig)
{
	(void)sig;
	stop_watch = 1;
}

int
ngcli_users(const struct config *cfg, struct netguard_users *who)
{
	struct passwd *pw = getpwnam(cfg->qemu_user);

	if (pw == NULL)
		return -1;
	who->user = (uint32_t)pw->pw_uid;
	who->first = cfg->qemu_uids.first;
	who->count = cfg->qemu_uids.count;
	return 0;
}

int
ngcli_is(const char *arg)
{
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(arg, commands[i]) == 0)
			return 1;
	return 0;
}

static const char *
env_get(const char *name)
{
	return getenv(name);
}

static int
print_rules(const struct netguard_users *who, const struct config *cfg, int hash_only)
{
	char rules[NETGUARD_RULES_MAX], hash[KEY_HASH_HEX_LEN + 1];

	if (netguard_ruleset(who, cfg->net_allow, rules, sizeof(rules)) < 0)
		return 1;
	if (!hash_only) {
		fputs(rules, stdout);
		return 0;
	}
	/* What `aasctl host add --isolation-rule` records for a host the
	 * rule was installed on. */
	key_hash_hex(rules, strlen(rules), hash, sizeof(hash));
	printf("%s\n", hash);
	return 0;
}

/* Ensures the rule once and records the outcome where aasd reads it. */
static int
ensure_and_record(const struct netguard_users *who, const struct config *cfg, struct err *e)
{
	struct err we;
	int rc = netguard_ensure(who, cfg->net_allow, e);

	if (cfg->netguard_status[0] == '\0')
		return rc;
	err_clear(&we);
	if (netguard_status_write(cfg->netguard_status, who, cfg->net_allow, rc < 0 ? e->msg : NULL,
		cfg->netguard_watch_s, (long long)time(NULL), &we) < 0)
		fprintf(stderr, "aasd: %s\n", we.msg);
	return rc;
}

/* Every AAS_NETGUARD_WATCH_S: the rule checked, put back when it is gone
 * (a flush of the ruleset, another tool's reload), the outcome recorded. */
static int
watch(const struct netguard_users *who, const struct config *cfg)
{
	int last = -2;

	if (cfg->netguard_status[0] == '\0') {
		fprintf(stderr, "aasd: --netguard-watch needs AAS_NETGUARD_STATUS\n");
		return 2;
	}
	signal(SIGTERM, on_stop);
	signal(SIGINT, on_stop);
	while (!stop_watch) {
		struct err e;
		int rc;

		err_clear(&e);
		rc = ensure_and_record(who, cfg, &e);
		if (rc != last)
			fprintf(stderr,
			    rc == 0 ? "aasd: isolation rule in place (%s)\n" :
				      "aasd: isolation rule missing: %s\n",
			    rc == 0 ? cfg->netguard_status : e.msg);
		last = rc;
		for (int i = 0; i < cfg->netguard_watch_s * 10 && !stop_watch; i++)
			clock_sleep_ms(100);
	}
	return 0;
}

int
ngcli_main(const char *what)
{
	struct config cfg;
	struct err e;
	struct netguard_users who;
	char users[NETGUARD_USERS_TEXT];

	err_clear(&e);
	if (config_load(&cfg, env_get, &e) < 0) {
		fprintf(stderr, "aasd: %s\n", e.msg);
		return 2;
	}
	if (ngcli_users(&cfg, &who) < 0) {
		fprintf(stderr, "aasd: AAS_QEMU_USER: no user %s\n", cfg.qemu_user);
		return 1;
	}
	netguard_users_text(&who, users, sizeof(users));
	if (strcmp(what, "--netguard-users") == 0) {
		/* For the test set-up's own rule, which must match the same users. */
		printf("%s\n", users);
		return 0;
	}
	if (strcmp(what, "--netguard-rules") == 0 || strcmp(what, "--netguard-rules-hash") == 0)
		return print_rules(&who, &cfg, strcmp(what, "--netguard-rules-hash") == 0);
	if (strcmp(what, "--netguard-watch") == 0)
		return watch(&who, &cfg);
	if (ensure_and_record(&who, &cfg, &e) < 0) {
		fprintf(stderr, "aasd: %s\n", e.msg);
		return 1;
	}
	printf("isolation rule for %s and the VM users (uids %s) in place: nft table inet %s\n",
	    cfg.qemu_user, users, NETGUARD_TABLE);
	return 0;
}
