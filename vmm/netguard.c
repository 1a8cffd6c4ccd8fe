/* netguard.c - install and check the sandbox isolation rule with nft(8). */
#include "vmm/netguard.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/clock.h"

#define NFT_TIMEOUT_MS 5000
#define NFT_OUT_MAX (64 * 1024)

extern char **environ;

int
netguard_ruleset(uid_t uid, char *out, size_t n)
{
	/* TCP gets a reset so a guest's connection fails at once rather than
	 * timing out. "table; delete table; table {...}" replaces any older copy in one
	 * transaction, and works whether or not the table exists. */
	int r = snprintf(out, n,
	    "table inet " NETGUARD_TABLE "\n"
	    "delete table inet " NETGUARD_TABLE "\n"
	    "table inet " NETGUARD_TABLE " {\n"
	    "\tchain output {\n"
	    "\t\ttype filter hook output priority -10; policy accept;\n"
	    "\t\tmeta skuid %u fib daddr type { local, broadcast, multicast } ct state new"
	    " meta l4proto tcp counter reject with tcp reset\n"
	    "\t\tmeta skuid %u fib daddr type { local, broadcast, multicast } ct state new counter reject\n"
	    "\t\tmeta skuid %u ip daddr 169.254.0.0/16 counter reject\n"
	    "\t\tmeta skuid %u ip6 daddr fe80::/10 counter reject\n"
	    "\t}\n"
	    "}\n",
	    (unsigned)uid, (unsigned)uid, (unsigned)uid, (unsigned)uid);
	return r < 0 || (size_t)r >= n ? -1 : 0;
}

/* Runs nft with argv, feeding `input` (may be NULL) on stdin and keeping
 * up to outn-1 bytes of stdout+stderr. Returns the exit status or -1. */
static int
run_nft(char *const argv[], const char *input, char *out, size_t outn, struct err *e)
{
	int in[2] = { -1, -1 }, op[2] = { -1, -1 }, status = -1, rc = -1;
	posix_spawn_file_actions_t fa;
	size_t used = 0, inlen = input ? strlen(input) : 0, inoff = 0;
	long long deadline = clock_ms() + NFT_TIMEOUT_MS;
	pid_t pid = -1;

	out[0] = '\0';
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(op, O_CLOEXEC) < 0) {
		err_set(e, ERR_INTERNAL, "netguard: pipe: %s", strerror(errno));
		goto out;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_adddup2(&fa, op[1], 1);
	posix_spawn_file_actions_adddup2(&fa, op[1], 2);
	errno = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (errno != 0) {
		err_set(e, ERR_UNAVAILABLE, "netguard: cannot run nft: %s (install nftables)",
		    strerror(errno));
		pid = -1;
		goto out;
	}
	close(in[0]);
	close(op[1]);
	in[0] = op[1] = -1;
	if (inlen == 0) {
		close(in[1]);
		in[1] = -1;
	}
	fcntl(op[0], F_SETFL, O_NONBLOCK);
	if (in[1] >= 0)
		fcntl(in[1], F_SETFL, O_NONBLOCK);
	for (;;) {
		struct pollfd p[2] = { { op[0], POLLIN, 0 }, { in[1], POLLOUT, 0 } };
		long long left = deadline - clock_ms();

		if (left <= 0) {
			err_set(e, ERR_TIMEOUT, "netguard: nft did not finish in time");
			kill(pid, SIGKILL);
			goto out;
		}
		if (poll(p, in[1] >= 0 ? 2 : 1, (int)left) < 0 && errno != EINTR)
			goto out;
		if (in[1] >= 0 && (p[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
			ssize_t w = write(in[1], input + inoff, inlen - inoff);
			if (w > 0)
				inoff += (size_t)w;
			if (w < 0 && errno != EAGAIN)
				inoff = inlen;
			if (inoff >= inlen) {
				close(in[1]);
				in[1] = -1;
			}
		}
		if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			char buf[4096];
			ssize_t r = read(op[0], buf, sizeof(buf));
			if (r == 0)
				break;
			if (r > 0 && used + 1 < outn) {
				size_t k = (size_t)r < outn - 1 - used ? (size_t)r :
									 outn - 1 - used;
				memcpy(out + used, buf, k);
				used += k;
				out[used] = '\0';
			}
		}
	}
	if (waitpid(pid, &status, 0) == pid) {
		pid = -1;
		rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
	}
out:
	if (pid > 0)
		waitpid(pid, NULL, 0);
	for (int i = 0; i < 2; i++) {
		if (in[i] >= 0)
			close(in[i]);
		if (op[i] >= 0)
			close(op[i]);
	}
	return rc;
}

static void
first_line(char *s)
{
	s[strcspn(s, "\n")] = '\0';
}

int
netguard_install(uid_t uid, struct err *e)
{
	char rules[2048];
	char *out = malloc(NFT_OUT_MAX);
	char *const argv[] = { "nft", "-f", "-", NULL };
	int rc = -1, st;

	if (out == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return -1;
	}
	if (netguard_ruleset(uid, rules, sizeof(rules)) < 0) {
		err_set(e, ERR_INTERNAL, "netguard: ruleset too long");
		goto out;
	}
	st = run_nft(argv, rules, out, NFT_OUT_MAX, e);
	if (st < 0)
		goto out;
	if (st != 0) {
		first_line(out);
		err_set(e, ERR_UNAVAILABLE, "netguard: nft could not load the isolation rule: %s",
		    out[0] ? out : "no message");
		goto out;
	}
	rc = 0;
out:
	free(out);
	return rc;
}

int
netguard_check(uid_t uid, struct err *e)
{
	char *const argv[] = { "nft", "list", "table", "inet", NETGUARD_TABLE, NULL };
	char *out = malloc(NFT_OUT_MAX);
	char want[128];
	int rc = -1, st;

	if (out == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return -1;
	}
	st = run_nft(argv, NULL, out, NFT_OUT_MAX, e);
	if (st < 0)
		goto out;
	if (st != 0) {
		first_line(out);
		err_set(e, ERR_UNAVAILABLE, "netguard: no table inet %s (%s)", NETGUARD_TABLE,
		    out[0] ? out : "nft failed");
		goto out;
	}
	/* nft prints the rule back in its own words; these are the parts that
	 * make it a guard: the hook, the user, the local-address match and
	 * the verdict. */
	snprintf(want, sizeof(want), "meta skuid %u fib daddr type { local,", (unsigned)uid);
	if (strstr(out, "hook output") == NULL || strstr(out, want) == NULL ||
	    strstr(out, "ct state new") == NULL || strstr(out, "reject with tcp reset") == NULL) {
		err_set(e, ERR_UNAVAILABLE, "netguard: table inet %s lacks the rule for uid %u",
		    NETGUARD_TABLE, (unsigned)uid);
		goto out;
	}
	rc = 0;
out:
	free(out);
	return rc;
}

int
netguard_ensure(uid_t uid, struct err *e)
{
	struct err first;

	err_clear(&first);
	if (netguard_check(uid, &first) == 0)
		return 0;
	if (netguard_install(uid, e) < 0)
		return -1;
	return netguard_check(uid, e);
}
