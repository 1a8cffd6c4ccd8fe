/* vm_raw.c - the baselines of bench/vm.mjs and bench/agent.mjs: libvirt
 * and the guest agents used directly, without aasd, the database or HTTP.
 *
 *   vm_raw boot URI IMAGE_DIR WORK_DIR QEMU_USER N
 *       N times: overlay + start of the sandbox domain XML + wait for the
 *       first guest-agent answer; prints one line "boot_ms <ms>" each.
 *   vm_raw exec URI DOMAIN N PATH [ARG...]
 *       N guest-exec round trips (start, poll status until exited) on a
 *       running domain; prints "exec_ms <ms>" each.
 *   vm_raw clock URI DOMAIN N
 *       N qemu-ga guest-get-time calls; prints "clock <host ns before>
 *       <guest ns> <host ns after>" each (CLOCK_REALTIME on both sides), so
 *       the guest clock's offset is known within half a round trip.
 *   vm_raw port URI DOMAIN BYTES...
 *       The raw port baseline, on a domain started with AAS_BENCH_PORT=1
 *       and no aasd attached: for each size, BYTES of zeros from a trivial
 *       guest program (dd, started as root through aas-agent) to this
 *       process through the port VM_BENCH_PORT_NAME, and BYTES from here
 *       to dd in the guest, no protocol on the port. Prints
 *       "port_read <bytes> <ms>" and "port_write <bytes> <ms>", each timed
 *       at the receiving end (see port_one). */
#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <libvirt/libvirt-qemu.h>
#include <libvirt/libvirt.h>

#include "base/clock.h"
#include "vmm/achan.h"
#include "vmm/agent.h"
#include "vmm/vm_agent.h"
#include "vmm/vm_xml.h"
#include "base/log.h"
#include "vmm/orch.h"
#include "vmm/vm.h"

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int
boot(const char *uri, const char *img, const char *work, const char *user, int n)
{
	struct passwd *pw = getpwnam(user);
	struct err e;
	struct vm_host *h;
	char kernel[1024], initrd[1024], base[1024], disk[1024], console[1024], cmd[8192];

	err_clear(&e);
	if (pw == NULL || vm_events_start(NULL, &e) < 0 ||
	    (h = vm_host_open(uri, user, &e)) == NULL) {
		fprintf(stderr, "vm_raw: %s\n", e.msg[0] ? e.msg : "no such user");
		return 1;
	}
	snprintf(kernel, sizeof(kernel), "%s/vmlinuz", img);
	snprintf(initrd, sizeof(initrd), "%s/initrd.img", img);
	snprintf(base, sizeof(base), "%s/base.qcow2", img);
	mkdir(work, 0755);
	chown(work, pw->pw_uid, pw->pw_gid);
	for (int i = 0; i < n; i++) {
		struct vm_spec s = {
			.name = "aas-rawbench",
			.accel = VM_ACCEL_TCG,
			.vcpus = 1,
			.memory_mib = 512,
			.kernel = kernel,
			.initrd = initrd,
			.cmdline = ORCH_CMDLINE,
			.disk = disk,
			.console_log = console,
			.agent_socket = "/run/aas-vm/aas-rawbench.agent",
		};
		double t0 = now_ms();

		snprintf(disk, sizeof(disk), "%s/disk.qcow2", work);
		snprintf(console, sizeof(console), "%s/console.log", work);
		snprintf(cmd, sizeof(cmd),
		    "qemu-img create -q -f qcow2 -F qcow2 -b '%s' '%s'"
		    " && : > '%s' && chown %s '%s' '%s'",
		    base, disk, console, user, disk, console);
		if (system(cmd) != 0 || vm_start(h, &s, &e) < 0) {
			fprintf(stderr, "vm_raw: %s\n", e.msg[0] ? e.msg : "overlay failed");
			return 1;
		}
		while (agent_ping(h, "aas-rawbench", 1, &e) < 0) {
			err_clear(&e);
			usleep(50000);
		}
		printf("boot_ms %.1f\n", now_ms() - t0);
		fflush(stdout);
		err_ignore(vm_destroy(h, "aas-rawbench", &e));
		unlink(disk);
	}
	vm_host_close(h);
	return 0;
}

static int
exec_loop(const char *uri, const char *dom, int n, const char *path, char **args)
{
	struct err e;
	struct vm_host *h;

	err_clear(&e);
	if (vm_events_start(NULL, &e) < 0 || (h = vm_host_open(uri, "aas-qemu", &e)) == NULL) {
		fprintf(stderr, "vm_raw: %s\n", e.msg);
		return 1;
	}
	/* The agent is usable shortly after a new process connects. */
	for (int i = 0; i < 100 && agent_ping(h, dom, 1, &e) < 0; i++) {
		err_clear(&e);
		usleep(50000);
	}
	for (int i = 0; i < n; i++) {
		struct agent_exec x = { .path = path,
			.argv = (const char *const *)args,
			.capture = 1 };
		struct agent_exec_status st;
		double t0 = now_ms();

		if (agent_run(h, dom, &x, 60000, &st, &e) < 0) {
			fprintf(stderr, "vm_raw: %s\n", e.msg);
			return 1;
		}
		agent_exec_status_clear(&st);
		printf("exec_ms %.1f\n", now_ms() - t0);
		fflush(stdout);
	}
	vm_host_close(h);
	return 0;
}

static long long
real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int
clock_loop(const char *uri, const char *dom, int n)
{
	struct err e;
	struct vm_host *h;
	virDomainPtr d;
	int rc = 1;

	err_clear(&e);
	if (vm_events_start(NULL, &e) < 0 || (h = vm_host_open(uri, "aas-qemu", &e)) == NULL) {
		fprintf(stderr, "vm_raw: %s\n", e.msg);
		return 1;
	}
	d = virDomainLookupByName(vm_host_conn(h), dom);
	if (d == NULL) {
		fprintf(stderr, "vm_raw: no domain %s\n", dom);
		goto out;
	}
	/* qemu-ga answers shortly after a new process connects. */
	for (int i = 0; i < 100 && agent_ping(h, dom, 1, &e) < 0; i++) {
		err_clear(&e);
		usleep(50000);
	}
	for (int i = 0; i < n; i++) {
		long long t0 = real_ns(), t1;
		char *a = virDomainQemuAgentCommand(d, "{\"execute\":\"guest-get-time\"}", 10, 0);
		const char *p;
		long long g;

		t1 = real_ns();
		p = a != NULL ? strstr(a, "\"return\"") : NULL;
		if (p == NULL || (p = strchr(p, ':')) == NULL || sscanf(p + 1, "%lld", &g) != 1) {
			fprintf(stderr, "vm_raw: guest-get-time: %s\n",
			    a != NULL ? a : "no answer");
			free(a);
			goto out;
		}
		free(a);
		printf("clock %lld %lld %lld\n", t0, g, t1);
		fflush(stdout);
	}
	rc = 0;
out:
	if (d != NULL)
		virDomainFree(d);
	vm_host_close(h);
	return rc;
}

/* Starts `script` as root in the guest (bash -c), for guest_wait. */
static struct achan_exec *
guest_start(struct achan *c, const char *script, struct err *e)
{
	const char *argv[] = { "/bin/bash", "-c", script, NULL };
	struct achan_exec_req req = { .argv = argv, .as_root = 1, .timeout_s = 300 };
	long pid;

	return achan_exec_start(c, &req, &pid, e);
}

/* Waits for the guest program's exit; its stderr is kept in errbuf (n
 * bytes, NUL-ended, the rest dropped). */
static int
guest_wait(struct achan_exec *x, int *code, char *errbuf, size_t n, struct err *e)
{
	size_t used = 0;

	struct achan_ev ev;
	atomic_int never = 0;

	for (;;) {
		int r = achan_exec_next(x, clock_ms() + 300000, &never, &ev, e);

		if (r < 0)
			return -1;
		if (r == 0) {
			err_set(e, ERR_TIMEOUT, "guest program did not end");
			return -1;
		}
		if (ev.kind == ACHAN_EV_STDERR && ev.len > 0 && used + 1 < n) {
			size_t k = ev.len < n - 1 - used ? ev.len : n - 1 - used;

			memcpy(errbuf + used, ev.data, k);
			used += k;
		}
		errbuf[used] = '\0';
		if (ev.kind == ACHAN_EV_EXIT) {
			*code = ev.code;
			return 0;
		}
	}
}

#define PORT_BUF (256 * 1024)
#define PORT_DEV "/dev/virtio-ports/" VM_BENCH_PORT_NAME

/* One size both ways, each timed at the receiving end from the first
 * byte to the last, so the guest program's start (an exec through
 * aas-agent, tens of ms under TCG) is not counted against the port: here
 * from the first byte received (what arrives with it is counted as if it
 * took no time) for guest to host; dd's own figure in the guest (its
 * clock starts once the port is open; bytes the host queued before are
 * then read at once) for host to guest. Both err towards a faster port. */
static int
port_one(struct achan *c, virStreamPtr st, uint64_t bytes, char *buf)
{
	struct achan_exec *x = NULL;
	struct err e;
	char script[320], errbuf[1024];
	const char *p;
	uint64_t got = 0, sent = 0;
	double t0 = 0, t1, secs;
	int code = -1, rc = -1;

	err_clear(&e);
	/* Guest to host: dd writes 128 KiB blocks of zeros to the port. */
	snprintf(script, sizeof(script),
	    "exec dd if=/dev/zero of=" PORT_DEV " bs=131072 count=%" PRIu64
	    " iflag=count_bytes status=none",
	    bytes);
	if ((x = guest_start(c, script, &e)) == NULL)
		goto out;
	while (got < bytes) {
		size_t want = bytes - got < PORT_BUF ? (size_t)(bytes - got) : PORT_BUF;
		int n = virStreamRecv(st, buf, want);

		if (n <= 0) {
			err_set(&e, ERR_INTERNAL, "port read ended after %" PRIu64 " bytes", got);
			goto out;
		}
		if (got == 0)
			t0 = now_ms();
		got += (uint64_t)n;
	}
	t1 = now_ms();
	if (guest_wait(x, &code, errbuf, sizeof(errbuf), &e) < 0 || code != 0) {
		err_set(&e, ERR_INTERNAL, "guest dd: exit %d %s", code, errbuf);
		goto out;
	}
	printf("port_read %" PRIu64 " %.1f\n", bytes, t1 - t0);
	fflush(stdout);
	achan_exec_free(x);
	x = NULL;

	/* Host to guest: dd reads exactly `bytes` and says how long it took
	 * ("..., 0.0812 s, ..."). */
	snprintf(script, sizeof(script),
	    "exec dd if=" PORT_DEV " of=/dev/null bs=131072 count=%" PRIu64
	    " iflag=count_bytes,fullblock",
	    bytes);
	memset(buf, 0x5a, PORT_BUF);
	if ((x = guest_start(c, script, &e)) == NULL)
		goto out;
	while (sent < bytes) {
		size_t k = bytes - sent < PORT_BUF ? (size_t)(bytes - sent) : PORT_BUF;
		int n = virStreamSend(st, buf, k);

		if (n <= 0) {
			err_set(&e, ERR_INTERNAL, "port write failed after %" PRIu64 " bytes",
			    sent);
			goto out;
		}
		sent += (uint64_t)n;
	}
	if (guest_wait(x, &code, errbuf, sizeof(errbuf), &e) < 0 || code != 0) {
		err_set(&e, ERR_INTERNAL, "guest dd: exit %d %s", code, errbuf);
		goto out;
	}
	if ((p = strstr(errbuf, "copied, ")) == NULL || sscanf(p + 8, "%lf", &secs) != 1) {
		err_set(&e, ERR_INTERNAL, "guest dd: no time in '%s'", errbuf);
		goto out;
	}
	printf("port_write %" PRIu64 " %.1f\n", bytes, secs * 1000);
	fflush(stdout);
	rc = 0;
out:
	if (rc < 0)
		fprintf(stderr, "vm_raw: port: %s\n", e.msg[0] ? e.msg : "failed");
	achan_exec_free(x);
	return rc;
}

static int
port_loop(const char *uri, const char *dom, int nsizes, char **sizes)
{
	struct err e;
	struct vm_host *h;
	struct achan *c = NULL;
	virDomainPtr d = NULL;
	virStreamPtr st = NULL;
	char *buf = malloc(PORT_BUF);
	int rc = 1;

	err_clear(&e);
	if (buf == NULL || vm_events_start(NULL, &e) < 0 ||
	    (h = vm_host_open(uri, "aas-qemu", &e)) == NULL) {
		fprintf(stderr, "vm_raw: %s\n", e.msg);
		free(buf);
		return 1;
	}
	if ((c = vm_agent_get(h, dom, &e)) == NULL ||
	    achan_wait_ready(c, clock_ms() + 30000, &e) < 0) {
		fprintf(stderr, "vm_raw: agent: %s\n", e.msg);
		goto out;
	}
	/* A blocking stream: this thread reads and writes it while libvirt's
	 * event thread serves the agent's connection. */
	if ((d = virDomainLookupByName(vm_host_conn(h), dom)) == NULL ||
	    (st = virStreamNew(vm_host_conn(h), 0)) == NULL ||
	    virDomainOpenChannel(d, VM_BENCH_PORT_NAME, st, 0) < 0) {
		fprintf(stderr,
		    "vm_raw: cannot open %s (was the VM started with AAS_BENCH_PORT=1?)\n",
		    VM_BENCH_PORT_NAME);
		goto out;
	}
	for (int i = 0; i < nsizes; i++) {
		char *end;
		unsigned long long b = strtoull(sizes[i], &end, 10);

		if (end == sizes[i] || *end != '\0' || b < 1 || b > (1ULL << 32)) {
			fprintf(stderr, "vm_raw: bad size %s\n", sizes[i]);
			goto out;
		}
		if (port_one(c, st, b, buf) < 0)
			goto out;
	}
	rc = 0;
out:
	if (st != NULL) {
		virStreamAbort(st);
		virStreamFree(st);
	}
	if (d != NULL)
		virDomainFree(d);
	achan_free(c);
	vm_agent_forget(h, dom);
	vm_host_close(h);
	free(buf);
	return rc;
}

/* N on the command line: a whole number from 1 to 100000, else -1. */
static int
count_arg(const char *s)
{
	char *end;
	long n = strtol(s, &end, 10);

	return end != s && *end == '\0' && n >= 1 && n <= 100000 ? (int)n : -1;
}

int
main(int argc, char **argv)
{
	log_set_level(LOG_LEVEL_WARN);
	if (argc == 7 && strcmp(argv[1], "boot") == 0 && count_arg(argv[6]) > 0)
		return boot(argv[2], argv[3], argv[4], argv[5], count_arg(argv[6]));
	if (argc >= 6 && strcmp(argv[1], "exec") == 0 && count_arg(argv[4]) > 0)
		return exec_loop(argv[2], argv[3], count_arg(argv[4]), argv[5], argv + 6);
	if (argc == 5 && strcmp(argv[1], "clock") == 0 && count_arg(argv[4]) > 0)
		return clock_loop(argv[2], argv[3], count_arg(argv[4]));
	if (argc >= 5 && strcmp(argv[1], "port") == 0)
		return port_loop(argv[2], argv[3], argc - 4, argv + 4);
	fprintf(stderr,
	    "usage: vm_raw boot URI IMAGE_DIR WORK_DIR QEMU_USER N\n"
	    "       vm_raw exec URI DOMAIN N PATH [ARG...]\n"
	    "       vm_raw clock URI DOMAIN N\n"
	    "       vm_raw port URI DOMAIN BYTES...\n");
	return 2;
}
