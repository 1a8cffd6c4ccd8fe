/* netguard_status.c - the isolation rule's state as its watcher records it
 * (netguard_status.h). The file is small and line-based:
 *
 *   aas-netguard 1
 *   state ok | missing
 *   mark aas rules 0123456789abcdef
 *   checked <unix seconds>
 *   every <seconds>
 *   why <text>                         (state missing only)
 *
 * Only root writes it (its directory is root's), but it is read like any
 * input: bounded, each field checked, anything else refused. */
#include "vmm/netguard_status.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/fcopy.h"
#include "base/fmt.h"
#include "base/num.h"

#define STATUS_MAGIC "aas-netguard 1"
#define WHY_MAX 300

int
netguard_status_write(const char *path, const struct netguard_users *who, const char *allow,
    const char *why, int every_s, long long now_s, struct err *e)
{
	char mark[64], text[NETGUARD_STATUS_MAX], tmp[4096];
	int fd = -1, rc = -1;
	size_t len;

	if (netguard_mark(who, allow, mark, sizeof(mark)) < 0) {
		err_set(e, ERR_INTERNAL, "netguard: bad allow-list");
		return -1;
	}
	/* The "why" line only with a reason. */
	if (fmt_buf(text, sizeof(text),
		STATUS_MAGIC "\nstate %s\nmark %s\nchecked %lld\nevery %d\n%s%.*s%s",
		why ? "missing" : "ok", mark, now_s, every_s, why ? "why " : "", WHY_MAX,
		why ? why : "", why ? "\n" : "") < 0 ||
	    fmt_buf(tmp, sizeof(tmp), "%s.new", path) < 0) {
		err_set(e, ERR_INTERNAL, "netguard: status path too long");
		return -1;
	}
	len = strlen(text);
	/* One line each: a reason with a newline would start a field. */
	for (char *p = strstr(text, "why "); p && *p; p++)
		if (*p == '\n' && p[1] != '\0')
			*p = ' ';
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0 || fcopy_write(fd, text, len) < 0 || fsync(fd) < 0) {
		err_set(e, ERR_UNAVAILABLE, "netguard: cannot write %s: %s", tmp, strerror(errno));
		goto out;
	}
	if (rename(tmp, path) < 0) {
		err_set(e, ERR_UNAVAILABLE, "netguard: cannot write %s: %s", path, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	if (rc < 0)
		unlink(tmp);
	return rc;
}

/* The value of line `key` in text (NUL-terminated, one field a line) into
 * out, or -1 when the line is absent or too long. */
static int
field(const char *text, const char *key, char *out, size_t n)
{
	size_t klen = strlen(key);

	for (const char *p = text; *p;) {
		const char *end = strchr(p, '\n');
		size_t len = end ? (size_t)(end - p) : strlen(p);

		if (len > klen && strncmp(p, key, klen) == 0 && p[klen] == ' ') {
			len -= klen + 1;
			if (len >= n)
				return -1;
			memcpy(out, p + klen + 1, len);
			out[len] = '\0';
			return 0;
		}
		p += len + (end ? 1 : 0);
	}
	return -1;
}

static int
field_ll(const char *text, const char *key, long long min, long long max, long long *out)
{
	char v[32];

	return field(text, key, v, sizeof(v)) < 0 || num_parse_ll(v, out) < 0 || *out < min ||
		*out > max ?
	    -1 :
	    0;
}

int
netguard_status_parse(const char *text, size_t len, const char *want_mark, long long now_s,
    struct err *e)
{
	char buf[NETGUARD_STATUS_MAX + 1], state[16], mark[64], why[WHY_MAX + 1];
	long long checked, every;

	if (len > NETGUARD_STATUS_MAX)
		len = NETGUARD_STATUS_MAX;
	memcpy(buf, text, len);
	buf[len] = '\0';
	if (strlen(buf) != len || strncmp(buf, STATUS_MAGIC "\n", strlen(STATUS_MAGIC) + 1) != 0 ||
	    field(buf, "state", state, sizeof(state)) < 0 ||
	    field(buf, "mark", mark, sizeof(mark)) < 0 ||
	    field_ll(buf, "checked", 0, 1LL << 40, &checked) < 0 ||
	    field_ll(buf, "every", 1, 3600, &every) < 0) {
		err_set(e, ERR_UNAVAILABLE, "netguard: the watcher's status is not one aasd reads");
		return -1;
	}
	if (now_s - checked > NETGUARD_STATUS_PERIODS * every || checked - now_s > every) {
		err_set(e, ERR_UNAVAILABLE,
		    "netguard: the watcher last looked at the isolation rule %lld s ago (it looks "
		    "every %lld s): is aas-netguard.service (aasd --netguard-watch) running?",
		    now_s - checked, every);
		return -1;
	}
	if (strcmp(state, "ok") != 0) {
		if (field(buf, "why", why, sizeof(why)) < 0)
			fmt_cut(why, sizeof(why), "no reason given");
		err_set(e, ERR_UNAVAILABLE,
		    "netguard: the watcher cannot keep the isolation rule: %s", why);
		return -1;
	}
	if (strcmp(mark, want_mark) != 0) {
		err_set(e, ERR_UNAVAILABLE,
		    "netguard: the watcher keeps another ruleset than this aasd's (its settings "
		    "differ: AAS_QEMU_USER, AAS_QEMU_UIDS or AAS_NET_ALLOW, or another aasd version)");
		return -1;
	}
	return 0;
}

int
netguard_status_check(const char *path, const struct netguard_users *who, const char *allow,
    long long now_s, struct err *e)
{
	char text[NETGUARD_STATUS_MAX], mark[64];
	ssize_t n;
	int fd;

	if (netguard_mark(who, allow, mark, sizeof(mark)) < 0) {
		err_set(e, ERR_INTERNAL, "netguard: bad allow-list");
		return -1;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0 && errno == ENOENT)
		return 1;
	if (fd < 0) {
		err_set(e, ERR_UNAVAILABLE, "netguard: cannot read %s: %s", path, strerror(errno));
		return -1;
	}
	n = read(fd, text, sizeof(text));
	close(fd);
	if (n < 0) {
		err_set(e, ERR_UNAVAILABLE, "netguard: cannot read %s: %s", path, strerror(errno));
		return -1;
	}
	return netguard_status_parse(text, (size_t)n, mark, now_s, e);
}

int
netguard_status_in_force(const char *path, const struct netguard_users *who, const char *allow,
    long long now_s, int install, enum netguard_source *by, struct err *e)
{
	int rc = 1;

	*by = NETGUARD_BY_WATCHER;
	if (path[0])
		rc = netguard_status_check(path, who, allow, now_s, e);
	if (rc <= 0)
		return rc;
	*by = NETGUARD_BY_NFTABLES;
	rc = install ? netguard_ensure(who, allow, e) : netguard_check(who, allow, e);
	return rc == 0 ? 0 : -1;
}
