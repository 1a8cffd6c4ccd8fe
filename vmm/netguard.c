/* netguard.c - install and check the sandbox isolation rule with nft(8). */
#include "vmm/netguard.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/config.h"
#include "base/fmt.h"

#define NFT_TIMEOUT_MS 5000
#define NFT_OUT_MAX (64 * 1024)
#define NETGUARD_MARK "aas rules "

extern char **environ;

/* The ranges of the operator's own networks, refused unless allowed. */
static const char *const private_v4 = "10.0.0.0/8, 100.64.0.0/10, 172.16.0.0/12, 192.168.0.0/16";
static const char *const private_v6 = "fc00::/7";

struct rules {
	char *out;
	size_t n, used;
	int full;
};

static void put(struct rules *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
put(struct rules *r, const char *fmt, ...)
{
	va_list ap;
	int rc;

	if (r->full)
		return;
	va_start(ap, fmt);
	rc = fmt_vbuf(r->out + r->used, r->n - r->used, fmt, ap);
	va_end(ap);
	if (rc < 0)
		r->full = 1;
	else
		r->used += strlen(r->out + r->used);
}

/* Splits the allow-list into its IPv4 and IPv6 ranges, each checked again
 * (the text goes into an nft program), as nft set elements. */
static int
split_allow(const char *allow, char *v4, char *v6, size_t n)
{
	const char *p = allow ? allow : "";
	size_t u4 = 0, u6 = 0, count = 0;

	v4[0] = v6[0] = '\0';
	while (*p) {
		size_t len = strcspn(p, ",");
		char item[64], canon[64], *list;
		size_t *used;
		int fam;

		if (len == 0 || len >= sizeof(item) || ++count > CONFIG_MAX_NET_ALLOW)
			return -1;
		memcpy(item, p, len);
		item[len] = '\0';
		fam = config_cidr_canon(item, canon, sizeof(canon));
		if (fam < 0)
			return -1;
		list = fam == 4 ? v4 : v6;
		used = fam == 4 ? &u4 : &u6;
		if (fmt_buf(list + *used, n - *used, "%s%s", *used ? ", " : "", canon) < 0)
			return -1;
		*used += strlen(list + *used);
		p += len;
		if (*p == ',')
			p++;
	}
	return 0;
}

/* FNV-1a of `s`, for the mark below. */
static unsigned long long
text_hash(const char *s)
{
	unsigned long long h = 14695981039346656037ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

int
netguard_users_text(const struct netguard_users *who, char *out, size_t n)
{
	char range[24];
	int rc;

	if (who->count == 0)
		rc = fmt_buf(out, n, "%u", (unsigned)who->user);
	else if ((who->count == 1 ? fmt_buf(range, sizeof(range), "%u", (unsigned)who->first) :
				    fmt_buf(range, sizeof(range), "%u-%u", (unsigned)who->first,
					(unsigned)(who->first + who->count - 1))) < 0)
		rc = -1;
	/* In nft's order, so the listing matches what was loaded. */
	else if (who->user < who->first)
		rc = fmt_buf(out, n, "{ %u, %s }", (unsigned)who->user, range);
	else
		rc = fmt_buf(out, n, "{ %s, %u }", range, (unsigned)who->user);
	if (rc < 0 && n > 0)
		out[0] = '\0';
	return rc;
}

/* The ruleset with `mark` as the comment of the private ranges' rule. */
static int
ruleset_marked(const struct netguard_users *who, const char *allow, const char *mark, char *out,
    size_t n)
{
	char v4[CONFIG_NET_ALLOW_MAX + 2 * CONFIG_MAX_NET_ALLOW];
	char v6[sizeof(v4)];
	struct rules r = { out, n, 0, 0 };
	char u[NETGUARD_USERS_TEXT];

	if (n == 0 || split_allow(allow, v4, v6, sizeof(v4)) < 0 ||
	    netguard_users_text(who, u, sizeof(u)) < 0)
		return -1;
	/* TCP gets a reset so a guest's connection fails at once rather than
	 * timing out. "table; delete table; table {...}" replaces any older
	 * copy in one transaction, and works whether or not the table exists.
	 * The host itself and link-local addresses come first: no allow-list
	 * opens them. Then the allowed ranges are accepted (this chain only:
	 * other tables still see the packet), then private ranges refused. */
	put(&r,
	    "table inet " NETGUARD_TABLE "\n"
	    "delete table inet " NETGUARD_TABLE "\n"
	    "table inet " NETGUARD_TABLE " {\n"
	    "\tchain output {\n"
	    "\t\ttype filter hook output priority -10; policy accept;\n"
	    "\t\tmeta skuid %s fib daddr type { local, broadcast, multicast } ct state new"
	    " meta l4proto tcp counter reject with tcp reset\n"
	    "\t\tmeta skuid %s fib daddr type { local, broadcast, multicast } ct state new counter reject\n"
	    "\t\tmeta skuid %s ip daddr 169.254.0.0/16 counter reject\n"
	    "\t\tmeta skuid %s ip6 daddr fe80::/10 counter reject\n",
	    u, u, u, u);
	if (v4[0])
		put(&r, "\t\tmeta skuid %s ip daddr { %s } ct state new counter accept\n", u, v4);
	if (v6[0])
		put(&r, "\t\tmeta skuid %s ip6 daddr { %s } ct state new counter accept\n", u, v6);
	put(&r,
	    "\t\tmeta skuid %s ip daddr { %s } ct state new meta l4proto tcp"
	    " counter reject with tcp reset comment \"%s\"\n"
	    "\t\tmeta skuid %s ip daddr { %s } ct state new counter reject\n"
	    "\t\tmeta skuid %s ip6 daddr %s ct state new meta l4proto tcp"
	    " counter reject with tcp reset\n"
	    "\t\tmeta skuid %s ip6 daddr %s ct state new counter reject\n"
	    "\t}\n"
	    "}\n",
	    u, private_v4, mark, u, private_v4, u, private_v6, u, private_v6);
	return r.full ? -1 : 0;
}

/* What netguard_check looks for to know the table holds this very
 * ruleset: a comment naming a hash of its text (with the mark zeroed), so a
 * rule for another allow-list, another user or an older aasd is outdated. */
int
netguard_mark(const struct netguard_users *who, const char *allow, char *mark, size_t n)
{
	char *text = malloc(NETGUARD_RULES_MAX);
	int rc = -1;

	if (text == NULL)
		return -1;
	if (ruleset_marked(who, allow, NETGUARD_MARK "0000000000000000", text,
		NETGUARD_RULES_MAX) == 0)
		rc = fmt_buf(mark, n, NETGUARD_MARK "%016llx", text_hash(text));
	free(text);
	return rc;
}

int
netguard_ruleset(const struct netguard_users *who, const char *allow, char *out, size_t n)
{
	char mark[64];

	if (netguard_mark(who, allow, mark, sizeof(mark)) < 0)
		return -1;
	return ruleset_marked(who, allow, mark, out, n);
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

/* What nft with argv (and `input` on its stdin, may be NULL) printed, in
 * a buffer the caller frees, and its exit status in *st (not 0: the text
 * cut to its first line, for a message); NULL with e set when it did not
 * run to its end. */
static char *
nft_output(char *const argv[], const char *input, int *st, struct err *e)
{
	char *out = malloc(NFT_OUT_MAX);

	if (out == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	*st = run_nft(argv, input, out, NFT_OUT_MAX, e);
	if (*st < 0) {
		free(out);
		return NULL;
	}
	if (*st != 0)
		first_line(out);
	return out;
}

int
netguard_install(const struct netguard_users *who, const char *allow, struct err *e)
{
	char rules[NETGUARD_RULES_MAX];
	char *const argv[] = { "nft", "-f", "-", NULL };
	char *out;
	int st;

	if (netguard_ruleset(who, allow, rules, sizeof(rules)) < 0) {
		err_set(e, ERR_INTERNAL, "netguard: bad allow-list or ruleset too long");
		return -1;
	}
	if ((out = nft_output(argv, rules, &st, e)) == NULL)
		return -1;
	if (st != 0)
		err_set(e, ERR_UNAVAILABLE, "netguard: nft could not load the isolation rule: %s",
		    out[0] ? out : "no message");
	free(out);
	return st == 0 ? 0 : -1;
}

int
netguard_check(const struct netguard_users *who, const char *allow, struct err *e)
{
	char *const argv[] = { "nft", "list", "table", "inet", NETGUARD_TABLE, NULL };
	char want[128], mark[64], users[NETGUARD_USERS_TEXT];
	char *out;
	int rc = -1, st;

	if ((out = nft_output(argv, NULL, &st, e)) == NULL)
		return -1;
	if (st != 0) {
		err_set(e, ERR_UNAVAILABLE, "netguard: no table inet %s (%s)", NETGUARD_TABLE,
		    out[0] ? out : "nft failed");
		goto out;
	}
	/* nft prints the rule back in its own words; these are the parts that
	 * make it a guard: the hook, the user, the local-address match and
	 * the verdict; and the mark of this very ruleset (netguard_mark). */
	if (netguard_users_text(who, users, sizeof(users)) < 0 ||
	    fmt_buf(want, sizeof(want), "meta skuid %s fib daddr type { local,", users) < 0) {
		err_set(e, ERR_INTERNAL, "netguard: the rule's text does not fit");
		goto out;
	}
	if (netguard_mark(who, allow, mark, sizeof(mark)) < 0) {
		err_set(e, ERR_INTERNAL, "netguard: bad allow-list");
		goto out;
	}
	if (strstr(out, "hook output") == NULL || strstr(out, want) == NULL ||
	    strstr(out, "ct state new") == NULL || strstr(out, "reject with tcp reset") == NULL) {
		err_set(e, ERR_UNAVAILABLE, "netguard: table inet %s lacks the rule for uids %s",
		    NETGUARD_TABLE, users);
		goto out;
	}
	if (strstr(out, mark) == NULL) {
		err_set(e, ERR_UNAVAILABLE,
		    "netguard: table inet %s holds another ruleset (an older aasd or another AAS_NET_ALLOW)",
		    NETGUARD_TABLE);
		goto out;
	}
	rc = 0;
out:
	free(out);
	return rc;
}

int
netguard_ensure(const struct netguard_users *who, const char *allow, struct err *e)
{
	struct err first;

	err_clear(&first);
	if (netguard_check(who, allow, &first) == 0)
		return 0;
	if (netguard_install(who, allow, e) < 0)
		return -1;
	return netguard_check(who, allow, e);
}
