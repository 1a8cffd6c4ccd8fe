/* netguard_cli.h - aasd's isolation-rule commands (netguard_cli_): print
 * the rule for other hosts, install it from a privileged start step, or
 * keep it in place as the root watcher an unprivileged aasd relies on. */
#ifndef AAS_NETGUARD_CLI_H
#define AAS_NETGUARD_CLI_H

/* Whether `arg` is one of these commands. */
int netguard_cli_is(const char *arg);
/* Runs it; returns the process's exit status. */
int netguard_cli_main(const char *what);

#endif
