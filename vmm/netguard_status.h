/* netguard_status.h - the isolation rule's state, as a privileged watcher
 * records it for an aasd that may not read nftables (netguard_status_).
 *
 * nftables answers only processes with CAP_NET_ADMIN, which aasd under
 * deploy/aasd.service does not have. `aasd --netguard-watch`, run as root
 * by deploy/aas-netguard.service with that one capability, installs and
 * checks the rule every few seconds and writes what it found to a small
 * file (AAS_NETGUARD_STATUS); aasd trusts the file while it is fresh and
 * names this very ruleset (its mark: same users, same allow-list). */
#ifndef AAS_NETGUARD_STATUS_H
#define AAS_NETGUARD_STATUS_H

#include "base/err.h"
#include "vmm/netguard.h"

/* Longest status file read (the rest is ignored). */
#define NETGUARD_STATUS_MAX 1024
/* A status is stale this many watch periods after it was written. */
#define NETGUARD_STATUS_PERIODS 3

/* Records the watcher's finding at `path` (atomically: a temporary file
 * renamed): the rule for `who` and `allow` in place when `why` is NULL, or
 * missing for `why`; `every_s` is how often the watcher looks again. */
int netguard_status_write(const char *path, const struct netguard_users *who, const char *allow,
    const char *why, int every_s, long long now_s, struct err *e) AAS_MUST_CHECK;

/* 0 when the status at `path` says this rule is in place and is fresh at
 * `now_s`; 1 when there is no status file (no watcher: aasd checks
 * itself); -1 with the reason otherwise (stale, missing, another rule). */
int netguard_status_check(const char *path, const struct netguard_users *who, const char *allow,
    long long now_s, struct err *e) AAS_MUST_CHECK;

/* Who answered netguard_status_in_force. */
enum netguard_source { NETGUARD_BY_WATCHER, NETGUARD_BY_NFTABLES };

/* Whether the rule for `who` and `allow` is in force: the watcher's word
 * while it keeps a status at `path` (aasd without CAP_NET_ADMIN cannot
 * read nftables), nftables itself when there is none or `path` is ""
 * (with `install`, netguard_ensure: the rule goes in when missing or
 * outdated; else netguard_check). 0 when it is, -1 with the reason; *by
 * says which of the two answered. */
int netguard_status_in_force(const char *path, const struct netguard_users *who, const char *allow,
    long long now_s, int install, enum netguard_source *by, struct err *e) AAS_MUST_CHECK;

/* The parser on its own, for tests and the fuzzer: `text` (len bytes, not
 * NUL-terminated) against the mark this aasd expects. */
int netguard_status_parse(const char *text, size_t len, const char *want_mark, long long now_s,
    struct err *e) AAS_MUST_CHECK;

#endif
