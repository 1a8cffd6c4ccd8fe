/* aas-helper.c - runs inside the guest, started as root by the guest agent.
 * One process per operation, so each tool call costs one exec, and every
 * operation on the user's files happens with the user's own rights
 * (privileges are dropped before any user path is touched).
 *
 *   aas-helper run  CWD OUT ERR TIMEOUT_S(0 = none) STDIN(0|1) COMMAND
 *   aas-helper put  STAGE DST MODE PARENTS(0|1)
 *   aas-helper get  PATH OFFSET LENGTH
 *   aas-helper list PATH DEPTH LIMIT MAXBYTES
 *
 * Exit status 0 on success; errors are one line on stderr. `run` exits
 * with the command's status (128+signal when killed, 124 on timeout) and
 * prints the sizes of the two logs ("OUT ERR") on its own stdout, so the
 * host reads only what there is. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SANDBOX_UID 1000
#define SANDBOX_GID 1000
#define KILL_GRACE_S 2

static void
die(int code, const char *what, const char *detail)
{
	fprintf(stderr, "%s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
	exit(code);
}

static long long
number_base(const char *s, int base, long long min, long long max)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, base);
	if (errno != 0 || *end != '\0' || end == s || v < min || v > max)
		die(2, "bad number", s);
	return v;
}

static long long
number(const char *s, long long min, long long max)
{
	return number_base(s, 10, min, max);
}

/* Root becomes the sandbox user for good: groups, gid, uid. Leaving root
 * through setresuid clears every capability. */
static void
become_sandbox(void)
{
	gid_t g = SANDBOX_GID;

	if (getuid() != 0 && getuid() != SANDBOX_UID)
		die(2, "unexpected user", NULL);
	if (getuid() == 0 &&
	    (setgroups(1, &g) < 0 || setresgid(g, g, g) < 0 ||
		setresuid(SANDBOX_UID, SANDBOX_UID, SANDBOX_UID) < 0))
		die(2, "cannot drop privileges", strerror(errno));
	umask(022);
}

static int
write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int
mkdirs(const char *path)
{
	char buf[PATH_MAX];
	size_t n = strlen(path);

	if (n >= sizeof(buf))
		return -1;
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	return 0;
}

/* ---- run ---- */

static volatile sig_atomic_t got_child, got_term;

static void
on_chld(int sig)
{
	(void)sig;
	got_child = 1;
}

/* A cancelled command: the host signals this supervisor, which ends the
 * command's whole process group. */
static void
on_term(int sig)
{
	(void)sig;
	got_term = 1;
}

static int
status_code(int st)
{
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return 1;
}

static long long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for pid until `deadline_ms` (0 = none); 1 when it exited. */
static int
wait_until(pid_t pid, long long deadline_ms, int *st)
{
	for (;;) {
		pid_t r = waitpid(pid, st, WNOHANG);
		if (r == pid)
			return 1;
		if (r < 0 && errno != EINTR)
			return 1;
		if ((deadline_ms && now_ms() >= deadline_ms) || got_term)
			return 0;
		/* SIGCHLD interrupts the sleep; otherwise check again soon. */
		struct timespec ts = { 0, 20 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
}

static void
print_sizes(int fo, int fe)
{
	struct stat so, se;

	if (fstat(fo, &so) == 0 && fstat(fe, &se) == 0)
		printf("%lld %lld\n", (long long)so.st_size, (long long)se.st_size);
	fflush(stdout);
	close(fo);
	close(fe);
}

/* The logs are created by root in a root-owned directory, so the command
 * cannot swap them for links: the host reads them back as root. The
 * command itself runs as the sandbox user in its own process group. */
static int
cmd_run(char **a)
{
	const char *cwd = a[0], *out = a[1], *err = a[2], *command = a[5];
	long long timeout_s = number(a[3], 0, 86400 * 30);
	int use_stdin = (int)number(a[4], 0, 1);
	int fo, fe, st = 0;
	pid_t pid;
	struct sigaction sa;

	if (mkdirs(out) < 0)
		die(125, "cannot create the log directory", strerror(errno));
	fo = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	fe = open(err, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fo < 0 || fe < 0)
		die(125, "cannot create output files", strerror(errno));
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_chld;
	sigaction(SIGCHLD, &sa, NULL);
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, NULL);
	pid = fork();
	if (pid < 0)
		die(125, "fork", strerror(errno));
	if (pid == 0) {
		/* Its own session and process group: a timeout kills all of it. */
		setsid();
		if (!use_stdin) {
			int null = open("/dev/null", O_RDONLY);
			if (null >= 0)
				dup2(null, 0);
		}
		dup2(fo, 1);
		dup2(fe, 2);
		signal(SIGCHLD, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		become_sandbox();
		if (chdir(cwd) < 0) {
			dprintf(2, "cwd: %s: %s\n", cwd, strerror(errno));
			_exit(126);
		}
		execl("/bin/bash", "bash", "-c", command, (char *)NULL);
		dprintf(2, "bash: %s\n", strerror(errno));
		_exit(127);
	}
	if (wait_until(pid, timeout_s ? now_ms() + timeout_s * 1000 : 0, &st)) {
		print_sizes(fo, fe);
		return status_code(st);
	}
	int cancelled = got_term;
	got_term = 0;
	kill(-pid, SIGTERM);
	if (!wait_until(pid, now_ms() + KILL_GRACE_S * 1000, &st)) {
		kill(-pid, SIGKILL);
		wait_until(pid, 0, &st);
	}
	/* Whatever the group left behind gets the same end. */
	kill(-pid, SIGKILL);
	print_sizes(fo, fe);
	return cancelled ? 128 + SIGTERM : 124;
}

/* ---- put ---- */

static int
cmd_put(char **a)
{
	const char *stage = a[0], *dst = a[1];
	mode_t mode = (mode_t)number_base(a[2], 8, 0, 07777);
	int parents = (int)number(a[3], 0, 1);
	char buf[65536];
	long long total = 0;
	int in, out;
	ssize_t n;
	struct stat sb;

	/* The staging file is root's: open and remove it while still root. */
	in = open(stage, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (in < 0)
		die(2, "staging file", strerror(errno));
	unlink(stage);
	become_sandbox();
	if (parents && mkdirs(dst) < 0)
		die(1, "cannot create parent directories", strerror(errno));
	if (stat(dst, &sb) == 0 && S_ISDIR(sb.st_mode))
		die(1, "is a directory", dst);
	out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (out < 0)
		die(1, "cannot open for writing", strerror(errno));
	while ((n = read(in, buf, sizeof(buf))) > 0) {
		if (write_all(out, buf, (size_t)n) < 0)
			die(1, "write failed", strerror(errno));
		total += n;
	}
	if (n < 0 || fchmod(out, mode) < 0 || close(out) < 0)
		die(1, "write failed", strerror(errno));
	printf("%lld\n", total);
	return 0;
}

/* ---- get ---- */

static int
cmd_get(char **a)
{
	long long off = number(a[1], 0, LLONG_MAX);
	long long len = number(a[2], 0, 64LL << 20);
	char buf[65536];
	struct stat sb;
	int fd;

	become_sandbox();
	fd = open(a[0], O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die(1, "cannot open", strerror(errno));
	if (fstat(fd, &sb) < 0)
		die(1, "cannot stat", strerror(errno));
	if (S_ISDIR(sb.st_mode))
		die(1, "is a directory", a[0]);
	/* The size first, on stderr, so the caller knows the whole length. */
	fprintf(stderr, "size=%lld\n", (long long)sb.st_size);
	fflush(stderr);
	if (lseek(fd, off, SEEK_SET) < 0 && off > 0)
		die(1, "cannot seek", strerror(errno));
	while (len > 0) {
		ssize_t n = read(fd, buf, len < (long long)sizeof(buf) ? (size_t)len : sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die(1, "read failed", strerror(errno));
		if (n == 0)
			break;
		if (write_all(1, buf, (size_t)n) < 0)
			die(1, "write failed", strerror(errno));
		len -= n;
	}
	return 0;
}

/* ---- list ---- */

static long long list_limit, list_count, list_bytes, list_maxbytes;
static int list_depth, list_truncated;

static int
list_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	char type = '?';
	char line[64];
	size_t plen = strlen(path);
	int n;

	if (ftw->level == 0)
		return 0; /* the root itself is not an entry */
	if (ftw->level > list_depth)
		return FTW_SKIP_SUBTREE;
	if (list_count >= list_limit || list_bytes + (long long)plen + 64 > list_maxbytes) {
		list_truncated = 1;
		return FTW_STOP;
	}
	switch (flag) {
	case FTW_D:
	case FTW_DNR:
		type = 'd';
		break;
	case FTW_SL:
	case FTW_SLN:
		type = 'l';
		break;
	case FTW_F:
		type = S_ISREG(sb->st_mode) ? 'f' : 'o';
		break;
	default:
		type = '?';
	}
	n = snprintf(line, sizeof(line), "%c%c%lld%c%04o%c%lld%c", type, 0, (long long)sb->st_size,
	    0, (unsigned)(sb->st_mode & 07777), 0, (long long)sb->st_mtime, 0);
	fwrite(line, 1, (size_t)n, stdout);
	fwrite(path, 1, plen + 1, stdout);
	list_count++;
	list_bytes += n + (long long)plen + 1;
	if ((flag == FTW_D || flag == FTW_DNR) && ftw->level >= list_depth)
		return FTW_SKIP_SUBTREE;
	return FTW_CONTINUE;
}

static int
cmd_list(char **a)
{
	struct stat sb;

	list_depth = (int)number(a[1], 1, 64);
	list_limit = number(a[2], 1, 1000000);
	list_maxbytes = number(a[3], 1024, 64LL << 20);
	become_sandbox();
	if (lstat(a[0], &sb) < 0)
		die(1, "cannot list", strerror(errno));
	if (!S_ISDIR(sb.st_mode))
		die(1, "not a directory", a[0]);
	if (nftw(a[0], list_one, 32, FTW_PHYS | FTW_ACTIONRETVAL) < 0)
		die(1, "cannot list", strerror(errno));
	fflush(stdout);
	fprintf(stderr, "count=%lld truncated=%d\n", list_count, list_truncated);
	return 0;
}

int
main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int nargs;
		int (*fn)(char **);
	} cmds[] = {
		{ "run", 6, cmd_run },
		{ "put", 4, cmd_put },
		{ "get", 3, cmd_get },
		{ "list", 4, cmd_list },
	};

	for (size_t i = 0; argc >= 2 && i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (strcmp(argv[1], cmds[i].name) == 0 && argc == cmds[i].nargs + 2)
			return cmds[i].fn(argv + 2);
	die(2, "usage: aas-helper run|put|get|list ARGS...", NULL);
	return 2;
}
