/* netguard.h - the host firewall rule that isolates sandboxes (netguard_).
 *
 * Through user-mode networking a guest's connections leave from the QEMU
 * process, so one nftables rule on the host's output hook, matching the
 * users QEMU runs as (users nothing else uses), stops a guest from opening
 * connections to anything on the host itself (loopback, the host's own
 * addresses: PostgreSQL, aasd, libvirt, other sandboxes' forwards) and to
 * link-local addresses (cloud metadata services), nor to the private ranges
 * of the operator's own networks (RFC 1918, 100.64.0.0/10, fc00::/7) except
 * those the allow-list names. Replies on connections the host opened to a
 * forward are not new, so forwards keep working.
 *
 * `allow` is AAS_NET_ALLOW in its canonical form (config_cidr_canon's
 * ranges, comma-separated; NULL or "" for none). */
#ifndef AAS_NETGUARD_H
#define AAS_NETGUARD_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* nftables table the rule lives in (family inet). */
#define NETGUARD_TABLE "aas_guard"

/* Room for the ruleset with the longest allow-list. */
#define NETGUARD_RULES_MAX 8192

/* Who the rule is for: the QEMU user of libvirt's probes (and of VMs from
 * before per-VM users) and the range of per-VM users (count 0: none). The
 * range must not contain `user` (nft refuses overlapping elements). */
struct netguard_users {
	uint32_t user;
	uint32_t first, count;
};

/* nft's words for them: "999" or "{ 999, 3000000-3001023 }". 0, or -1
 * when they do not fit n (out is then ""). */
#define NETGUARD_USERS_TEXT 48
int netguard_users_text(const struct netguard_users *who, char *out, size_t n);

/* The ruleset text for `who` (what netguard_install loads); -1 when the
 * allow-list is not canonical or the text does not fit in n. */
int netguard_ruleset(const struct netguard_users *who, const char *allow, char *out, size_t n);
/* The mark a ruleset carries in a comment: "aas rules " and a hash of its
 * text, so another allow-list, user range or aasd version tells apart. */
#define NETGUARD_MARK_MAX 48
int netguard_mark(const struct netguard_users *who, const char *allow, char *mark, size_t n);
/* Loads the ruleset, replacing an older copy of the table atomically.
 * Needs CAP_NET_ADMIN. */
int netguard_install(const struct netguard_users *who, const char *allow,
    struct err *e) AAS_MUST_CHECK;
/* 0 when the rule for `who` and this allow-list is in place, -1 (with the
 * reason) when not. */
int netguard_check(const struct netguard_users *who, const char *allow,
    struct err *e) AAS_MUST_CHECK;
/* Checks, installs the rule when it is missing or outdated, checks again. */
int netguard_ensure(const struct netguard_users *who, const char *allow,
    struct err *e) AAS_MUST_CHECK;

#endif
