/* ngcli.h - aasd's isolation-rule commands (ngcli_): print
 * the rule for other hosts, install it from a privileged start step, or
 * keep it in place as the root watcher an unprivileged aasd relies on. */
#ifndef AAS_NGCLI_H
#define AAS_NGCLI_H

struct config;
struct netguard_users;

/* The users the rule is for, from the settings (AAS_QEMU_USER's uid and
 * AAS_QEMU_UIDS); -1 when AAS_QEMU_USER names no user. */
int ngcli_users(const struct config *cfg, struct netguard_users *who);

/* Whether `arg` is one of these commands. */
int ngcli_is(const char *arg);
/* Runs it; returns the process's exit status. */
int ngcli_main(const char *what);

#endif
