/* netguard_cli.h - aasd's isolation-rule commands (netguard_cli_): print
 * the rule for other hosts, install it from a privileged start step, or
 * keep it in place as the root watcher an unprivileged aasd relies on. */
#ifndef AAS_NETGUARD_CLI_H
#define AAS_NETGUARD_CLI_H

struct config;
struct netguard_users;

/* The users the rule is for, from the settings (AAS_QEMU_USER's uid and
 * AAS_QEMU_UIDS); -1 when AAS_QEMU_USER names no user. */
int netguard_cli_users(const struct config *cfg, struct netguard_users *who);

/* Whether `arg` is one of these commands. */
int netguard_cli_is(const char *arg);
/* Runs it; returns the process's exit status. */
int netguard_cli_main(const char *what);

#endif
