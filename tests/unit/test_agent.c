/* test_agent.c - the guest agent (vmm/image/aas-agent.c) built for the
 * host, run as root on a socketpair with a spare uid (65534) and a
 * temporary home, spoken to through the shared encoder and parser
 * (vmm/image/aproto.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/sha.h>

#include "vmm/image/aproto.h"

#define USER_ID 65534
#define RECV_MAX (AP_HDR_SIZE + AP_MAX_PAYLOAD)
#define BIG_FILE (64u << 20)

struct agent {
	pid_t pid;
	int fd;
	char dir[64];
	char home[96];
	unsigned char buf[4 * RECV_MAX];
	size_t len;
	int sync;
};

struct frame {
	struct ap_hdr h;
	unsigned char p[AP_MAX_PAYLOAD];
	struct ap_field f[AP_MAX_FIELDS];
	size_t nf;
};

static struct frame fr; /* the last frame received */
static unsigned char payload[AP_MAX_PAYLOAD];

static long long
ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
agent_path(char *out, size_t n)
{
	char self[PATH_MAX - 32];
	ssize_t r = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	assert_true(r > 0);
	self[r] = '\0';
	slash = strrchr(self, '/');
	assert_non_null(slash);
	*slash = '\0';
	snprintf(out, n, "%s/aas-agent-host", self);
}

static int
setup(void **state)
{
	struct agent *a = calloc(1, sizeof(*a));
	char bin[PATH_MAX];
	int sv[2];

	assert_non_null(a);
	agent_path(bin, sizeof(bin));
	snprintf(a->dir, sizeof(a->dir), "/tmp/aas-agent-test.XXXXXX");
	assert_non_null(mkdtemp(a->dir));
	chmod(a->dir, 0755);
	snprintf(a->home, sizeof(a->home), "%s/home", a->dir);
	assert_int_equal(mkdir(a->home, 0755), 0);
	assert_int_equal(chown(a->home, USER_ID, USER_ID), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	a->pid = fork();
	assert_true(a->pid >= 0);
	if (a->pid == 0) {
		char fdarg[16];

		dup2(sv[1], 3);
		snprintf(fdarg, sizeof(fdarg), "3");
		execl(bin, bin, "--fd", fdarg, "--uid", "65534", "--gid", "65534", "--home",
		    a->home, (char *)NULL);
		_exit(127);
	}
	close(sv[1]);
	a->fd = sv[0];
	*state = a;
	return 0;
}

static int
teardown(void **state)
{
	struct agent *a = *state;
	char cmd[128];

	if (a->fd >= 0)
		close(a->fd);
	kill(a->pid, SIGKILL);
	waitpid(a->pid, NULL, 0);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", a->dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", a->dir);
	free(a);
	return 0;
}

static void
send_raw(struct agent *a, const void *p, size_t n)
{
	const unsigned char *b = p;

	while (n > 0) {
		ssize_t w = write(a->fd, b, n);

		if (w < 0 && errno == EINTR)
			continue;
		assert_true(w > 0);
		b += w;
		n -= (size_t)w;
	}
}

static void
send_frame(struct agent *a, uint16_t type, uint16_t flags, uint32_t chan, const void *p, size_t n)
{
	unsigned char h[AP_HDR_SIZE];
	struct ap_hdr hd = { (uint32_t)n, type, flags, chan };

	ap_hdr_put(h, &hd);
	send_raw(a, h, sizeof(h));
	if (n > 0)
		send_raw(a, p, n);
}

static void
send_out(struct agent *a, uint16_t type, uint16_t flags, uint32_t chan, const struct ap_out *o)
{
	assert_false(o->overflow);
	send_frame(a, type, flags, chan, o->buf, o->len);
}

static void
send_hello(struct agent *a, uint64_t nonce)
{
	struct ap_out o = { payload, 0, 0 };

	send_raw(a, AP_SYNC, AP_SYNC_LEN);
	ap_put_u64(&o, AP_TAG_NONCE, nonce);
	send_out(a, AP_T_HELLO, 0, 0, &o);
}

static void
send_window(struct agent *a, uint32_t chan, uint64_t n)
{
	struct ap_out o = { payload, 0, 0 };

	ap_put_u64(&o, AP_TAG_SIZE, n);
	send_out(a, AP_T_WINDOW, 0, chan, &o);
}

/* The next frame into fr within timeout_ms: 1, or 0 at the timeout. */
static int
recv_frame(struct agent *a, int timeout_ms)
{
	long long end = ms() + timeout_ms;

	for (;;) {
		if (!a->sync) {
			unsigned char *s = memmem(a->buf, a->len, AP_SYNC, AP_SYNC_LEN);

			if (s != NULL) {
				size_t off = (size_t)(s - a->buf) + AP_SYNC_LEN;

				memmove(a->buf, a->buf + off, a->len - off);
				a->len -= off;
				a->sync = 1;
				continue;
			}
		} else if (a->len >= AP_HDR_SIZE) {
			/* A SYNC (before a HELLO) reads as an oversized header. */
			if (ap_hdr_get(a->buf, &fr.h) < 0) {
				assert_memory_equal(a->buf, AP_SYNC, AP_HDR_SIZE);
				a->sync = 0;
				continue;
			}
			if (a->len >= AP_HDR_SIZE + fr.h.len) {
				memcpy(fr.p, a->buf + AP_HDR_SIZE, fr.h.len);
				memmove(a->buf, a->buf + AP_HDR_SIZE + fr.h.len,
				    a->len - AP_HDR_SIZE - fr.h.len);
				a->len -= AP_HDR_SIZE + fr.h.len;
				fr.nf = 0;
				if (fr.h.type != AP_T_STDOUT && fr.h.type != AP_T_STDERR &&
				    fr.h.type != AP_T_DATA && fr.h.type != AP_T_PONG)
					assert_int_equal(ap_parse(fr.p, fr.h.len, fr.f,
							     AP_MAX_FIELDS, &fr.nf),
					    0);
				return 1;
			}
		}
		{
			struct pollfd p = { a->fd, POLLIN, 0 };
			long long left = end - ms();
			ssize_t r;

			if (left <= 0 || poll(&p, 1, (int)left) <= 0)
				return 0;
			assert_true(a->len < sizeof(a->buf));
			r = read(a->fd, a->buf + a->len, sizeof(a->buf) - a->len);
			assert_true(r > 0);
			a->len += (size_t)r;
		}
	}
}

static uint64_t
field_u64(int tag)
{
	const struct ap_field *f = ap_find(fr.f, fr.nf, tag);

	if (f == NULL)
		fail_msg("no field %d in frame type 0x%x", tag, fr.h.type);
	return ap_u64(f);
}

static int
has_field(int tag)
{
	return ap_find(fr.f, fr.nf, tag) != NULL;
}

/* The next frame on chan (frames of other channels are skipped). */
static void
expect(struct agent *a, uint32_t chan, uint16_t type, int timeout_ms)
{
	long long end = ms() + timeout_ms;

	for (;;) {
		int left = (int)(end - ms());

		if (left <= 0 || !recv_frame(a, left))
			fail_msg("no frame 0x%x on channel %u within %d ms", type, chan,
			    timeout_ms);
		if (fr.h.chan != chan || (chan == 0 && fr.h.type != type))
			continue;
		if (fr.h.type == AP_T_WINDOW && type != AP_T_WINDOW)
			continue; /* stdin credit, checked where it matters */
		if (fr.h.type != type) {
			char msg[256] = "";
			const struct ap_field *m = ap_find(fr.f, fr.nf, AP_TAG_MESSAGE);

			if (m != NULL)
				ap_str(m, msg, sizeof(msg));
			fail_msg("channel %u: frame 0x%x (%s), expected 0x%x", chan, fr.h.type, msg,
			    type);
		}
		return;
	}
}

/* A RESULT on chan with errno err (0: success). */
static void
expect_result(struct agent *a, uint32_t chan, int err)
{
	expect(a, chan, AP_T_RESULT, 5000);
	if (err == 0)
		assert_false(has_field(AP_TAG_ERRNO));
	else
		assert_int_equal(field_u64(AP_TAG_ERRNO), err);
}

static void
handshake(struct agent *a)
{
	send_hello(a, 7);
	for (;;) {
		expect(a, 0, AP_T_HELLO, 5000);
		if (field_u64(AP_TAG_NONCE) == 7)
			return;
	}
}

struct run {
	char out[1 << 16];
	size_t nout;
	char err[1 << 16];
	size_t nerr;
	int code, sig;
	long pid;
	long long t_start, t_first_out, t_exit;
	int out_fin, err_fin;
	uint64_t stdin_credit; /* WINDOW frames: stdin the process took */
};

static void
exec_start(struct agent *a, uint32_t chan, uint16_t flags, const char *const *argv,
    const char *const *extra_env, struct ap_out *more)
{
	struct ap_out o = { payload, 0, 0 };

	for (size_t i = 0; argv[i] != NULL; i++)
		ap_put_str(&o, AP_TAG_ARG, argv[i]);
	for (size_t i = 0; extra_env != NULL && extra_env[i] != NULL; i++)
		ap_put_str(&o, AP_TAG_ENV, extra_env[i]);
	if (more != NULL) {
		assert_true(o.len + more->len <= AP_MAX_PAYLOAD);
		memcpy(o.buf + o.len, more->buf, more->len);
		o.len += more->len;
	}
	send_out(a, AP_T_EXEC, flags, chan, &o);
}

/* Collects a command's frames until EXIT, granting what it takes. */
static void
collect(struct agent *a, uint32_t chan, struct run *r, int timeout_ms)
{
	long long end = ms() + timeout_ms;

	for (;;) {
		int left = (int)(end - ms());

		if (left <= 0 || !recv_frame(a, left))
			fail_msg("no EXIT on channel %u within %d ms", chan, timeout_ms);
		if (fr.h.chan != chan)
			continue;
		switch (fr.h.type) {
		case AP_T_STARTED:
			r->pid = (long)field_u64(AP_TAG_PID);
			r->t_start = ms();
			break;
		case AP_T_STDOUT:
		case AP_T_STDERR: {
			int o = fr.h.type == AP_T_STDOUT;
			char *dst = o ? r->out : r->err;
			size_t *n = o ? &r->nout : &r->nerr;

			if (fr.h.flags & AP_F_FIN)
				*(o ? &r->out_fin : &r->err_fin) = 1;
			if (o && fr.h.len > 0 && r->t_first_out == 0)
				r->t_first_out = ms();
			if (*n + fr.h.len < sizeof(r->out)) {
				memcpy(dst + *n, fr.p, fr.h.len);
				*n += fr.h.len;
				dst[*n] = '\0';
			}
			if (fr.h.len > 0)
				send_window(a, chan, fr.h.len);
			break;
		}
		case AP_T_WINDOW:
			r->stdin_credit += field_u64(AP_TAG_SIZE);
			break;
		case AP_T_EXIT:
			r->code = (int)field_u64(AP_TAG_CODE);
			r->sig = (int)field_u64(AP_TAG_SIGNAL);
			r->t_exit = ms();
			return;
		case AP_T_RESULT: {
			char msg[256] = "";
			const struct ap_field *m = ap_find(fr.f, fr.nf, AP_TAG_MESSAGE);

			if (m != NULL)
				ap_str(m, msg, sizeof(msg));
			fail_msg("channel %u failed: %s", chan, msg);
			return;
		}
		default:
			fail_msg("unexpected frame 0x%x", fr.h.type);
		}
	}
}

static struct run *
run_cmd(struct agent *a, uint32_t chan, uint16_t flags, const char *const *argv,
    const char *const *env, struct ap_out *more, int timeout_ms)
{
	static struct run r;

	memset(&r, 0, sizeof(r));
	exec_start(a, chan, flags, argv, env, more);
	collect(a, chan, &r, timeout_ms);
	return &r;
}

static void
test_handshake_after_garbage(void **state)
{
	struct agent *a = *state;
	unsigned char junk[5000];
	char want[64] = "";
	const struct ap_field *f;
	char got[64];
	FILE *fp;

	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (unsigned char)(i * 7 + 3);
	memcpy(junk + 100, AP_SYNC, 8); /* half a SYNC */
	send_raw(a, junk, sizeof(junk));
	send_hello(a, 0x1122334455667788ull);
	for (;;) {
		expect(a, 0, AP_T_HELLO, 5000);
		if (field_u64(AP_TAG_NONCE) == 0x1122334455667788ull)
			break;
		assert_int_equal(field_u64(AP_TAG_NONCE), 0); /* the unasked one at start */
	}
	assert_int_equal(field_u64(AP_TAG_VERSION), AP_VERSION);
	fp = fopen("/proc/sys/kernel/random/boot_id", "r");
	assert_non_null(fp);
	assert_non_null(fgets(want, sizeof(want), fp));
	fclose(fp);
	want[strcspn(want, "\n")] = '\0';
	f = ap_find(fr.f, fr.nf, AP_TAG_BOOT_ID);
	assert_non_null(f);
	assert_int_equal(ap_str(f, got, sizeof(got)), 0);
	assert_string_equal(got, want);
	send_frame(a, AP_T_PING, 0, 0, "abc", 3);
	expect(a, 0, AP_T_PONG, 5000);
	assert_int_equal(fr.h.len, 3);
	assert_memory_equal(fr.p, "abc", 3);
}

static void
test_exec_streams_in_order(void **state)
{
	struct agent *a = *state;
	const char *const argv[] = { "bash", "-c",
		"for i in 1 2 3 4 5; do echo out$i; echo err$i >&2; sleep 0.1; done; "
		"echo $(id -u):$(id -g):$(id -G):$HOME:$USER:$PWD:$TERM:$FOO; "
		"grep NoNewPrivs /proc/self/status | tr -d '\\t\\n'; exit 7",
		NULL };
	const char *const env[] = { "FOO=bar", "USER=sandbox", NULL };
	char want[512];
	struct run *r;

	handshake(a);
	r = run_cmd(a, 1, 0, argv, env, NULL, 10000);
	snprintf(want, sizeof(want),
	    "out1\nout2\nout3\nout4\nout5\n65534:65534:65534:%s:sandbox:%s:dumb:bar\nNoNewPrivs:1",
	    a->home, a->home);
	assert_string_equal(r->out, want);
	assert_string_equal(r->err, "err1\nerr2\nerr3\nerr4\nerr5\n");
	assert_int_equal(r->code, 7);
	assert_int_equal(r->sig, 0);
	assert_true(r->out_fin && r->err_fin);
	assert_true(r->pid > 1);
	/* Streamed: the first line came long before the end. */
	assert_true(r->t_first_out - r->t_start < 300);
	assert_true(r->t_exit - r->t_first_out >= 350);
}

static void
test_exit_despite_left_child(void **state)
{
	struct agent *a = *state;
	const char *const argv[] = { "bash", "-c", "sleep 5 & echo x", NULL };
	struct run *r;
	long long t0 = ms();

	handshake(a);
	/* The child holds the pipes: EXIT comes AP_DRAIN_MS after bash ends. */
	r = run_cmd(a, 1, 0, argv, NULL, NULL, 4000);
	assert_string_equal(r->out, "x\n");
	assert_int_equal(r->code, 0);
	assert_true(ms() - t0 >= AP_DRAIN_MS);
	assert_true(ms() - t0 < 2000);
}

static void
test_stdin(void **state)
{
	struct agent *a = *state;
	const char *const cat[] = { "cat", NULL };
	const char *const wc[] = { "wc", "-c", NULL };
	struct run r;

	handshake(a);
	memset(&r, 0, sizeof(r));
	exec_start(a, 1, AP_F_STDIN, cat, NULL, NULL);
	send_frame(a, AP_T_STDIN, 0, 1, "hello ", 6);
	send_frame(a, AP_T_STDIN, AP_F_FIN, 1, "world", 5);
	collect(a, 1, &r, 5000);
	assert_string_equal(r.out, "hello world");
	assert_int_equal(r.code, 0);
	/* Every stdin byte came back as credit once cat took it. */
	assert_int_equal(r.stdin_credit, 11);
	/* Without AP_F_STDIN stdin is /dev/null. */
	assert_string_equal(run_cmd(a, 2, 0, wc, NULL, NULL, 5000)->out, "0\n");
}

static void
test_window_stall_and_resume(void **state)
{
	struct agent *a = *state;
	const char *const argv[] = { "head", "-c", "1000000", "/dev/zero", NULL };
	size_t got = 0;
	int exited = 0;

	handshake(a);
	exec_start(a, 1, 0, argv, NULL, NULL);
	expect(a, 1, AP_T_STARTED, 5000);
	/* No grants: exactly the initial window, then silence (no EXIT). */
	while (recv_frame(a, 500)) {
		assert_int_equal(fr.h.chan, 1);
		assert_int_equal(fr.h.type, AP_T_STDOUT);
		got += fr.h.len;
	}
	assert_int_equal(got, AP_WINDOW_INIT);
	send_window(a, 1, 1000000 - AP_WINDOW_INIT);
	while (!exited) {
		assert_true(recv_frame(a, 5000));
		if (fr.h.type == AP_T_STDOUT)
			got += fr.h.len;
		exited = fr.h.type == AP_T_EXIT;
	}
	assert_int_equal(got, 1000000);
	assert_int_equal(field_u64(AP_TAG_CODE), 0);
}

static void
test_timeout_124(void **state)
{
	struct agent *a = *state;
	const char *const sleeper[] = { "sleep", "30", NULL };
	const char *const stubborn[] = { "bash", "-c", "trap '' TERM; sleep 30", NULL };
	unsigned char mb[64];
	struct ap_out more = { mb, 0, 0 };
	long long t0 = ms();
	struct run *r;

	handshake(a);
	ap_put_u32(&more, AP_TAG_TIMEOUT_S, 1);
	r = run_cmd(a, 1, 0, sleeper, NULL, &more, 5000);
	assert_int_equal(r->code, 124);
	assert_true(ms() - t0 < 2000);
	/* A process that ignores SIGTERM gets SIGKILL AP_KILL_GRACE_S later. */
	t0 = ms();
	r = run_cmd(a, 2, 0, stubborn, NULL, &more, 8000);
	assert_int_equal(r->code, 124);
	assert_true(ms() - t0 >= 1000 + AP_KILL_GRACE_S * 1000 - 100);
}

/* Processes whose process group is pgid, from /proc. */
static int
group_members(long pgid)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)) != NULL) {
		char path[300], buf[512], *p;
		FILE *fp;
		long pg = 0;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		fp = fopen(path, "r");
		if (fp == NULL)
			continue;
		if (fgets(buf, sizeof(buf), fp) != NULL && (p = strrchr(buf, ')')) != NULL) {
			char st;
			long ppid;

			if (sscanf(p + 2, "%c %ld %ld", &st, &ppid, &pg) == 3 && pg == pgid &&
			    st != 'Z')
				n++;
		}
		fclose(fp);
	}
	closedir(d);
	return n;
}

static void
test_signal_group(void **state)
{
	struct agent *a = *state;
	const char *const argv[] = { "bash", "-c", "sleep 100 & sleep 100 & wait", NULL };
	struct ap_out o = { payload, 0, 0 };
	long pid;
	int n = 0;

	handshake(a);
	exec_start(a, 1, AP_F_DETACH, argv, NULL, NULL);
	expect(a, 1, AP_T_STARTED, 5000);
	pid = (long)field_u64(AP_TAG_PID);
	send_frame(a, AP_T_CLOSE, 0, 1, NULL, 0);
	for (int i = 0; i < 100 && (n = group_members(pid)) < 3; i++)
		usleep(20000);
	assert_int_equal(n, 3);
	/* Groups it did not start are refused. */
	ap_put_u32(&o, AP_TAG_PID, 1);
	ap_put_u32(&o, AP_TAG_SIGNAL, SIGKILL);
	send_out(a, AP_T_SIGNAL, 0, 2, &o);
	expect_result(a, 2, EPERM);
	o.len = 0;
	ap_put_u32(&o, AP_TAG_PID, (uint32_t)getpid());
	ap_put_u32(&o, AP_TAG_SIGNAL, SIGKILL);
	send_out(a, AP_T_SIGNAL, 0, 3, &o);
	expect_result(a, 3, EPERM);
	o.len = 0;
	ap_put_u32(&o, AP_TAG_PID, (uint32_t)pid);
	ap_put_u32(&o, AP_TAG_SIGNAL, SIGKILL);
	send_out(a, AP_T_SIGNAL, 0, 4, &o);
	expect_result(a, 4, 0);
	for (int i = 0; i < 100 && (n = group_members(pid)) > 0; i++)
		usleep(20000);
	assert_int_equal(n, 0);
}

static char *
slurp(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY);
	ssize_t r;

	assert_true(fd >= 0);
	r = read(fd, buf, n - 1);
	close(fd);
	assert_true(r >= 0);
	buf[r] = '\0';
	return buf;
}

/* Waits up to timeout_ms for path to exist. */
static int
appears(const char *path, int timeout_ms)
{
	long long end = ms() + timeout_ms;
	struct timespec ts = { 0, 20 * 1000000L };

	while (access(path, F_OK) != 0) {
		if (ms() > end)
			return 0;
		nanosleep(&ts, NULL);
	}
	return 1;
}

static long
rss_kib(pid_t pid)
{
	char path[64], buf[4096], *end;
	const char *m;
	long v;

	snprintf(path, sizeof(path), "/proc/%ld/status", (long)pid);
	m = strstr(slurp(path, buf, sizeof(buf)), "VmRSS:");
	assert_non_null(m);
	v = strtol(m + 6, &end, 10);
	assert_true(end > m + 6 && v > 0);
	return v;
}

/* A command that leaves a process behind returns when its own process
 * ends; what it left keeps writing to the same stdout, which the agent
 * drains into the command's log after EXIT: `&`, nohup, setsid and disown. */
static void
test_background_keeps_its_output(void **state)
{
	struct agent *a = *state;
	static const char *const forms[][2] = {
		{ "( ", " ) &" },
		{ "nohup bash -c '", "' &" },
		{ "setsid bash -c '", "' &" },
		{ "( ", " ) & disown" },
	};
	char out[300], done[300], cmd[1100], loop[512], buf[2048];
	unsigned char mb[1200];

	handshake(a);
	for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
		struct ap_out more = { mb, 0, 0 };
		const char *argv[] = { "bash", "-c", cmd, NULL };
		struct run *r;
		long long t0 = ms();

		snprintf(out, sizeof(out), "%s/out%zu", a->dir, i);
		snprintf(done, sizeof(done), "%s/done%zu", a->home, i);
		snprintf(loop, sizeof(loop),
		    "for i in 1 2 3 4 5 6 7 8 9 10; do echo line$i || exit 3; sleep 0.1; done; "
		    "touch %s",
		    done);
		snprintf(cmd, sizeof(cmd), "%s%s%s", forms[i][0], loop, forms[i][1]);
		ap_put_str(&more, AP_TAG_LOG_OUT, out);
		r = run_cmd(a, (uint32_t)(1 + i), 0, argv, NULL, &more, 5000);
		assert_int_equal(r->code, 0);
		/* The call did not wait for what the command left running. */
		assert_true(r->t_exit - t0 < 900);
		assert_true(appears(done, 10000));
		assert_non_null(strstr(slurp(out, buf, sizeof(buf)), "line10\n"));
	}
}

/* A left-behind process that writes a lot is drained at the log's bound:
 * it never blocks on a full pipe, the log stops at its bound and the
 * agent's memory stays put. */
static void
test_background_floods_bounded(void **state)
{
	struct agent *a = *state;
	char out[300], done[300], cmd[600];
	const char *argv[] = { "bash", "-c", cmd, NULL };
	unsigned char mb[1200];
	struct ap_out more = { mb, 0, 0 };
	struct stat st;
	long rss0;

	handshake(a);
	rss0 = rss_kib(a->pid);
	snprintf(out, sizeof(out), "%s/out", a->dir);
	snprintf(done, sizeof(done), "%s/done", a->home);
	snprintf(cmd, sizeof(cmd), "( head -c 300000000 /dev/zero && touch %s ) & echo x", done);
	ap_put_str(&more, AP_TAG_LOG_OUT, out);
	ap_put_u64(&more, AP_TAG_LOG_MAX, 1 << 20);
	run_cmd(a, 1, 0, argv, NULL, &more, 10000);
	assert_true(appears(done, 60000));
	assert_int_equal(stat(out, &st), 0);
	assert_true(st.st_size <= 1 << 20);
	assert_true(rss_kib(a->pid) - rss0 < 8 * 1024);
}

static void
test_detached_logs_and_exit_file(void **state)
{
	struct agent *a = *state;
	const char *const argv[] = { "bash", "-c", "echo 0123456789abcdef; echo e >&2; exit 3",
		NULL };
	char out[300], err[300], ex[300], buf[100];
	unsigned char mb[1200];
	struct ap_out more = { mb, 0, 0 };
	struct run *r;

	handshake(a);
	snprintf(out, sizeof(out), "%s/out", a->dir);
	snprintf(err, sizeof(err), "%s/err", a->dir);
	snprintf(ex, sizeof(ex), "%s/exit", a->dir);
	ap_put_str(&more, AP_TAG_LOG_OUT, out);
	ap_put_str(&more, AP_TAG_LOG_ERR, err);
	ap_put_u64(&more, AP_TAG_LOG_MAX, 10);
	ap_put_str(&more, AP_TAG_EXIT_FILE, ex);
	r = run_cmd(a, 1, AP_F_DETACH, argv, NULL, &more, 5000);
	assert_int_equal(r->code, 3);
	assert_int_equal(r->nout + r->nerr, 0); /* the files only */
	assert_string_equal(slurp(out, buf, sizeof(buf)), "0123456789");
	assert_string_equal(slurp(err, buf, sizeof(buf)), "e\n");
	assert_string_equal(slurp(ex, buf, sizeof(buf)), "3 0\n");
	/* Appended, never through a symbolic link. */
	r = run_cmd(a, 2, AP_F_DETACH, argv, NULL, &more, 5000);
	assert_string_equal(slurp(err, buf, sizeof(buf)), "e\ne\n");
	unlink(out);
	assert_int_equal(symlink("/etc/passwd-not-here", out), 0);
	exec_start(a, 3, AP_F_DETACH, argv, NULL, &more);
	expect_result(a, 3, ELOOP);
}

static void
put_file(struct agent *a, uint32_t chan, uint16_t flags, const char *path, const void *data,
    size_t n, int err)
{
	struct ap_out o = { payload, 0, 0 };
	const unsigned char *p = data;

	ap_put_str(&o, AP_TAG_PATH, path);
	send_out(a, AP_T_PUT, flags, chan, &o);
	do {
		size_t k = n > AP_MAX_PAYLOAD ? AP_MAX_PAYLOAD : n;

		send_frame(a, AP_T_DATA, k == n ? AP_F_FIN : 0, chan, p, k);
		p += k;
		n -= k;
	} while (n > 0);
	expect_result(a, chan, err);
}

/* GETs path into buf (at most n bytes); returns the bytes received and
 * *size the whole size the agent reported. */
static size_t
get_file(struct agent *a, uint32_t chan, const char *path, unsigned char *buf, size_t n,
    uint64_t *size)
{
	struct ap_out o = { payload, 0, 0 };
	size_t got = 0;

	ap_put_str(&o, AP_TAG_PATH, path);
	send_out(a, AP_T_GET, 0, chan, &o);
	for (;;) {
		assert_true(recv_frame(a, 10000));
		if (fr.h.chan != chan)
			continue;
		if (fr.h.type == AP_T_RESULT) {
			assert_false(has_field(AP_TAG_ERRNO));
			*size = field_u64(AP_TAG_SIZE);
			return got;
		}
		assert_int_equal(fr.h.type, AP_T_DATA);
		assert_true(got + fr.h.len <= n);
		memcpy(buf + got, fr.p, fr.h.len);
		got += fr.h.len;
		send_window(a, chan, fr.h.len);
	}
}

static void
test_put_get_64mib(void **state)
{
	struct agent *a = *state;
	unsigned char *data = malloc(BIG_FILE), *back = malloc(BIG_FILE);
	unsigned char h1[SHA256_DIGEST_LENGTH], h2[SHA256_DIGEST_LENGTH];
	char path[200];
	uint64_t size = 0, x = 88172645463325252ull;
	long long t0, t1, t2;
	struct stat st;

	assert_non_null(data);
	assert_non_null(back);
	for (size_t i = 0; i < BIG_FILE; i += 8) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		memcpy(data + i, &x, 8);
	}
	handshake(a);
	snprintf(path, sizeof(path), "%s/big.bin", a->home);
	t0 = ms();
	put_file(a, 1, 0, path, data, BIG_FILE, 0);
	assert_int_equal(field_u64(AP_TAG_SIZE), BIG_FILE);
	t1 = ms();
	assert_int_equal(get_file(a, 2, path, back, BIG_FILE, &size), BIG_FILE);
	t2 = ms();
	assert_int_equal(size, BIG_FILE);
	SHA256(data, BIG_FILE, h1);
	SHA256(back, BIG_FILE, h2);
	assert_memory_equal(h1, h2, sizeof(h1));
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_uid, USER_ID); /* written as the user */
	fprintf(stderr, "# 64 MiB PUT %lld ms, GET %lld ms\n", t1 - t0, t2 - t1);
	free(data);
	free(back);
}

/* A download while a command's output frames are queued around its data
 * frames: both streams arrive whole and in order. */
static void
test_get_beside_output(void **state)
{
	struct agent *a = *state;
	const size_t fsize = 4u << 20, lines = 200000;
	const char *const argv[] = { "seq", "1", "200000", NULL };
	unsigned char *data = malloc(fsize), *back = malloc(fsize);
	char *out = malloc(lines * 8), *want = malloc(lines * 8);
	size_t got = 0, nout = 0, nwant = 0;
	int exited = 0, done = 0;
	uint64_t x = 0x9e3779b97f4a7c15ull;
	struct ap_out o = { payload, 0, 0 };
	char path[200];

	assert_non_null(data);
	assert_non_null(back);
	assert_non_null(out);
	assert_non_null(want);
	for (size_t i = 0; i < fsize; i += 8) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		memcpy(data + i, &x, 8);
	}
	for (size_t i = 1; i <= lines; i++)
		nwant += (size_t)snprintf(want + nwant, lines * 8 - nwant, "%zu\n", i);
	handshake(a);
	snprintf(path, sizeof(path), "%s/beside.bin", a->home);
	put_file(a, 1, 0, path, data, fsize, 0);
	exec_start(a, 2, 0, argv, NULL, NULL);
	ap_put_str(&o, AP_TAG_PATH, path);
	send_out(a, AP_T_GET, 0, 3, &o);
	while (!exited || !done) {
		assert_true(recv_frame(a, 10000));
		if (fr.h.chan == 2 && fr.h.type == AP_T_STDOUT) {
			assert_true(nout + fr.h.len <= lines * 8);
			memcpy(out + nout, fr.p, fr.h.len);
			nout += fr.h.len;
			if (fr.h.len > 0)
				send_window(a, 2, fr.h.len);
		} else if (fr.h.chan == 2 && fr.h.type == AP_T_EXIT) {
			assert_int_equal(field_u64(AP_TAG_CODE), 0);
			exited = 1;
		} else if (fr.h.chan == 3 && fr.h.type == AP_T_DATA) {
			assert_true(got + fr.h.len <= fsize);
			memcpy(back + got, fr.p, fr.h.len);
			got += fr.h.len;
			send_window(a, 3, fr.h.len);
		} else if (fr.h.chan == 3 && fr.h.type == AP_T_RESULT) {
			assert_false(has_field(AP_TAG_ERRNO));
			done = 1;
		}
	}
	assert_int_equal(got, fsize);
	assert_memory_equal(back, data, fsize);
	assert_int_equal(nout, nwant);
	assert_memory_equal(out, want, nwant);
	free(data);
	free(back);
	free(out);
	free(want);
}

static void
test_put_flags_stat_list(void **state)
{
	struct agent *a = *state;
	struct ap_out o = { payload, 0, 0 };
	char path[300], dir[200], name[300];
	unsigned char buf[64];
	uint64_t size;
	int seen = 0;

	handshake(a);
	snprintf(dir, sizeof(dir), "%s/d/e", a->home);
	snprintf(path, sizeof(path), "%s/f.txt", dir);
	/* PARENTS, MODE, then OFFSET into it and EXCL refusing it. */
	ap_put_str(&o, AP_TAG_PATH, path);
	ap_put_u32(&o, AP_TAG_MODE, 0600);
	send_out(a, AP_T_PUT, AP_F_PARENTS | AP_F_EXCL, 1, &o);
	send_frame(a, AP_T_DATA, AP_F_FIN, 1, "hello world", 11);
	expect_result(a, 1, 0);
	o.len = 0;
	ap_put_str(&o, AP_TAG_PATH, path);
	ap_put_u64(&o, AP_TAG_OFFSET, 6);
	send_out(a, AP_T_PUT, 0, 2, &o);
	send_frame(a, AP_T_DATA, AP_F_FIN, 2, "WORLD", 5);
	expect_result(a, 2, 0);
	assert_int_equal(get_file(a, 3, path, buf, sizeof(buf), &size), 11);
	assert_memory_equal(buf, "hello WORLD", 11);
	put_file(a, 4, AP_F_EXCL, path, "x", 1, EEXIST);
	put_file(a, 5, AP_F_TRUNC, path, "abc", 3, 0);
	o.len = 0;
	ap_put_str(&o, AP_TAG_PATH, path);
	send_out(a, AP_T_STAT, 0, 6, &o);
	expect_result(a, 6, 0);
	assert_int_equal(field_u64(AP_TAG_TYPE), AP_FT_FILE);
	assert_int_equal(field_u64(AP_TAG_SIZE), 3);
	assert_int_equal(field_u64(AP_TAG_MODE), 0600);
	assert_int_equal(field_u64(AP_TAG_UID), USER_ID);
	assert_int_equal(field_u64(AP_TAG_GID), USER_ID);
	assert_true(field_u64(AP_TAG_MTIME) > 1600000000ull * 1000000000ull);
	/* A link, a directory and the file. */
	snprintf(name, sizeof(name), "%s/ln", dir);
	assert_int_equal(symlink("f.txt", name), 0);
	snprintf(name, sizeof(name), "%s/sub", dir);
	assert_int_equal(mkdir(name, 0700), 0);
	o.len = 0;
	ap_put_str(&o, AP_TAG_PATH, dir);
	send_out(a, AP_T_LIST, 0, 7, &o);
	for (;;) {
		char n[256];

		assert_true(recv_frame(a, 5000));
		if (fr.h.type == AP_T_RESULT)
			break;
		assert_int_equal(fr.h.type, AP_T_ENTRY);
		assert_int_equal(ap_str(ap_find(fr.f, fr.nf, AP_TAG_NAME), n, sizeof(n)), 0);
		if (strcmp(n, "f.txt") == 0 && field_u64(AP_TAG_TYPE) == AP_FT_FILE &&
		    field_u64(AP_TAG_SIZE) == 3)
			seen |= 1;
		else if (strcmp(n, "ln") == 0 && field_u64(AP_TAG_TYPE) == AP_FT_LINK)
			seen |= 2;
		else if (strcmp(n, "sub") == 0 && field_u64(AP_TAG_TYPE) == AP_FT_DIR &&
		    field_u64(AP_TAG_MODE) == 0700)
			seen |= 4;
		else
			fail_msg("unexpected entry %s", n);
	}
	assert_false(has_field(AP_TAG_ERRNO));
	assert_int_equal(seen, 7);
	/* PUT never follows a link in the last component. */
	put_file(a, 8, 0, dir, "x", 1, EISDIR);
	snprintf(name, sizeof(name), "%s/ln", dir);
	put_file(a, 9, 0, name, "x", 1, ELOOP);
}

static void
test_errors(void **state)
{
	struct agent *a = *state;
	struct ap_out o = { payload, 0, 0 };
	const char *const pwd[] = { "pwd", NULL };
	const char *const nope[] = { "no-such-program-here", NULL };
	unsigned char mb[300];
	struct ap_out more = { mb, 0, 0 };
	char path[200];
	unsigned char buf[8];
	uint64_t size;

	handshake(a);
	ap_put_str(&o, AP_TAG_PATH, "/no/such/file");
	send_out(a, AP_T_GET, 0, 1, &o);
	expect_result(a, 1, ENOENT);
	assert_true(has_field(AP_TAG_MESSAGE));
	/* The test's directory is root's: the user may not write there, root may. */
	snprintf(path, sizeof(path), "%s/rootfile", a->dir);
	put_file(a, 2, 0, path, "x", 1, EACCES);
	put_file(a, 3, AP_F_ROOT, path, "x", 1, 0);
	assert_int_equal(chmod(path, 0600), 0);
	o.len = 0;
	ap_put_str(&o, AP_TAG_PATH, path);
	send_out(a, AP_T_GET, 0, 4, &o);
	expect_result(a, 4, EACCES);
	assert_int_equal(get_file(a, 5, "/etc/hostname", buf, sizeof(buf), &size) <= sizeof(buf),
	    1);
	o.len = 0;
	ap_put_str(&o, AP_TAG_PATH, "relative/path");
	send_out(a, AP_T_STAT, 0, 6, &o);
	expect_result(a, 6, EINVAL);
	o.len = 0;
	ap_put_str(&o, AP_TAG_PATH, "/root");
	send_out(a, AP_T_LIST, 0, 7, &o);
	expect_result(a, 7, EACCES);
	/* An unusable cwd fails the command as a shell would (126, and
	 * stderr says why), never runs it in the home directory. */
	ap_put_str(&more, AP_TAG_CWD, "/no/such/dir");
	{
		struct run *r = run_cmd(a, 8, 0, pwd, NULL, &more, 5000);

		assert_int_equal(r->code, 126);
		assert_string_equal(r->out, "");
		assert_non_null(strstr(r->err, "/no/such/dir"));
	}
	exec_start(a, 9, 0, nope, NULL, NULL);
	expect_result(a, 9, ENOENT);
	more.len = 0;
	ap_put_str(&more, AP_TAG_CWD, "/");
	assert_string_equal(run_cmd(a, 10, 0, pwd, NULL, &more, 5000)->out, "/\n");
}

static void
test_pty_echo_and_resize(void **state)
{
	struct agent *a = *state;
	const char *const argv[] = { "bash", "-c",
		"stty size; tty >/dev/null && echo tty-ok; read x; echo got:$x; stty size", NULL };
	unsigned char mb[64];
	struct ap_out more = { mb, 0, 0 };
	struct ap_out o = { payload, 0, 0 };
	char out[4096] = "";
	size_t n = 0;

	handshake(a);
	ap_put_u32(&more, AP_TAG_ROWS, 24);
	ap_put_u32(&more, AP_TAG_COLS, 80);
	exec_start(a, 1, AP_F_PTY, argv, NULL, &more);
	expect(a, 1, AP_T_STARTED, 5000);
	/* Waits for the first size before resizing. */
	while (strstr(out, "tty-ok") == NULL) {
		expect(a, 1, AP_T_STDOUT, 5000);
		assert_true(n + fr.h.len < sizeof(out));
		memcpy(out + n, fr.p, fr.h.len);
		n += fr.h.len;
		out[n] = '\0';
	}
	ap_put_u32(&o, AP_TAG_ROWS, 50);
	ap_put_u32(&o, AP_TAG_COLS, 132);
	send_out(a, AP_T_RESIZE, 0, 1, &o);
	send_frame(a, AP_T_STDIN, 0, 1, "hello\n", 6);
	for (;;) {
		assert_true(recv_frame(a, 5000));
		if (fr.h.type == AP_T_EXIT)
			break;
		if (fr.h.type != AP_T_STDOUT)
			continue;
		assert_true(n + fr.h.len < sizeof(out));
		memcpy(out + n, fr.p, fr.h.len);
		n += fr.h.len;
		out[n] = '\0';
	}
	assert_int_equal(field_u64(AP_TAG_CODE), 0);
	assert_non_null(strstr(out, "24 80\r\n"));
	assert_non_null(strstr(out, "hello\r\n")); /* the terminal's echo */
	assert_non_null(strstr(out, "got:hello\r\n"));
	assert_non_null(strstr(out, "50 132\r\n"));
}

static void
test_hostile_frames(void **state)
{
	struct agent *a = *state;
	const char *const sleeper[] = { "sleep", "30", NULL };
	unsigned char bad[64], hdr[AP_HDR_SIZE];
	struct ap_hdr h = { AP_MAX_PAYLOAD + 1, AP_T_EXEC, 0, 5 };
	static unsigned char big[AP_MAX_PAYLOAD];
	struct ap_out o = { payload, 0, 0 };
	int st;

	handshake(a);
	/* A field that runs past its payload, an unknown tag, a NUL in a string. */
	bad[0] = AP_TAG_ARG;
	bad[1] = 0, bad[2] = 0, bad[3] = 0, bad[4] = 50;
	send_frame(a, AP_T_EXEC, 0, 1, bad, 7);
	expect_result(a, 1, EINVAL);
	bad[0] = 99, bad[4] = 1;
	send_frame(a, AP_T_STAT, 0, 2, bad, 6);
	expect_result(a, 2, EINVAL);
	bad[0] = AP_TAG_PATH, bad[4] = 2, bad[5] = '/', bad[6] = '\0';
	send_frame(a, AP_T_GET, 0, 3, bad, 7);
	expect_result(a, 3, EINVAL);
	/* An EXEC without ARG, a wrong-width integer. */
	send_frame(a, AP_T_EXEC, 0, 4, NULL, 0);
	expect_result(a, 4, EINVAL);
	/* An oversized header: out of sync until the next SYNC, then fine. */
	ap_hdr_put(hdr, &h);
	send_raw(a, hdr, sizeof(hdr));
	send_raw(a, big, 1000);
	handshake(a);
	/* Stdin beyond AP_STDIN_MAX for a process that never reads it. */
	exec_start(a, 6, AP_F_STDIN, sleeper, NULL, NULL);
	expect(a, 6, AP_T_STARTED, 5000);
	for (size_t sent = 0; sent <= AP_STDIN_MAX; sent += sizeof(big))
		send_frame(a, AP_T_STDIN, 0, 6, big, sizeof(big));
	expect_result(a, 6, ENOBUFS);
	/* A WINDOW beyond reason; frames for channels that do not exist. */
	exec_start(a, 7, 0, sleeper, NULL, NULL);
	expect(a, 7, AP_T_STARTED, 5000);
	send_window(a, 7, UINT64_MAX);
	expect_result(a, 7, EINVAL);
	send_window(a, 12345, 10);
	send_frame(a, AP_T_DATA, 0, 12346, "x", 1);
	send_frame(a, AP_T_STDIN, 0, 12347, "x", 1);
	send_frame(a, 0x7777, 0, 12348, NULL, 0);
	/* Requests that fail one after another leave nothing behind. */
	for (uint32_t c = 100; c < 100 + 300; c++) {
		o.len = 0;
		ap_put_str(&o, AP_TAG_PATH, "/dev/null");
		send_out(a, AP_T_PUT, 0, c, &o);
	}
	/* A PUT on /dev/null is refused (not a regular file): each one ended. */
	for (uint32_t c = 100; c < 100 + 300; c++)
		expect_result(a, c, EINVAL);
	send_frame(a, AP_T_PING, 0, 0, "still", 5);
	expect(a, 0, AP_T_PONG, 5000);
	assert_int_equal(waitpid(a->pid, &st, WNOHANG), 0);
}

static void
test_channel_limit(void **state)
{
	struct agent *a = *state;
	struct ap_out o = { payload, 0, 0 };
	char path[200];
	int refused = 0, open_ok = 0;

	handshake(a);
	snprintf(path, sizeof(path), "%s/p", a->home);
	for (uint32_t c = 1; c <= 300; c++) {
		char p[220];

		snprintf(p, sizeof(p), "%s%u", path, c);
		o.len = 0;
		ap_put_str(&o, AP_TAG_PATH, p);
		send_out(a, AP_T_PUT, 0, c, &o); /* open until FIN */
	}
	while (recv_frame(a, 500)) {
		assert_int_equal(fr.h.type, AP_T_RESULT);
		assert_int_equal(field_u64(AP_TAG_ERRNO), EAGAIN);
		refused++;
	}
	assert_int_equal(refused, 300 - 256);
	for (uint32_t c = 1; c <= 300; c++)
		send_frame(a, AP_T_DATA, AP_F_FIN, c, "z", 1);
	while (recv_frame(a, 500)) {
		assert_int_equal(fr.h.type, AP_T_RESULT);
		open_ok += !has_field(AP_TAG_ERRNO);
	}
	assert_int_equal(open_ok, 256);
}

/* Process CPU time in clock ticks, from /proc/PID/stat. */
static long
cpu_ticks(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long ut = 0, stt = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	slurp(path, buf, sizeof(buf));
	p = strrchr(buf, ')');
	assert_non_null(p);
	assert_int_equal(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut,
			     &stt),
	    2);
	return (long)(ut + stt);
}

static void
test_host_away(void **state)
{
	struct agent *a = *state;
	const char *const argv[] = { "bash", "-c", "sleep 0.5; echo later", NULL };
	unsigned char mb[300];
	struct ap_out more = { mb, 0, 0 };
	char out[300], buf[64];
	long t0;
	int st;

	handshake(a);
	snprintf(out, sizeof(out), "%s/later", a->dir);
	ap_put_str(&more, AP_TAG_LOG_OUT, out);
	exec_start(a, 1, 0, argv, NULL, &more);
	expect(a, 1, AP_T_STARTED, 5000);
	/* The host goes: the process runs on, the agent waits without spinning. */
	close(a->fd);
	a->fd = -1;
	t0 = cpu_ticks(a->pid);
	usleep(1500000);
	assert_true(cpu_ticks(a->pid) - t0 < 20);
	assert_int_equal(waitpid(a->pid, &st, WNOHANG), 0);
	assert_string_equal(slurp(out, buf, sizeof(buf)), "later\n");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_handshake_after_garbage, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exec_streams_in_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exit_despite_left_child, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stdin, setup, teardown),
		cmocka_unit_test_setup_teardown(test_window_stall_and_resume, setup, teardown),
		cmocka_unit_test_setup_teardown(test_timeout_124, setup, teardown),
		cmocka_unit_test_setup_teardown(test_signal_group, setup, teardown),
		cmocka_unit_test_setup_teardown(test_detached_logs_and_exit_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_background_keeps_its_output, setup, teardown),
		cmocka_unit_test_setup_teardown(test_background_floods_bounded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_put_get_64mib, setup, teardown),
		cmocka_unit_test_setup_teardown(test_get_beside_output, setup, teardown),
		cmocka_unit_test_setup_teardown(test_put_flags_stat_list, setup, teardown),
		cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pty_echo_and_resize, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_frames, setup, teardown),
		cmocka_unit_test_setup_teardown(test_channel_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_host_away, setup, teardown),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
