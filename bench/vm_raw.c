/* vm_raw.c - the baselines of bench/vm.sh: libvirt and the guest agent
 * used directly, without aasd, the database or HTTP.
 *
 *   vm_raw boot URI IMAGE_DIR WORK_DIR QEMU_USER N
 *       N times: overlay + start of the sandbox domain XML + wait for the
 *       first guest-agent answer; prints one line "boot_ms <ms>" each.
 *   vm_raw exec URI DOMAIN N PATH [ARG...]
 *       N guest-exec round trips (start, poll status until exited) on a
 *       running domain; prints "exec_ms <ms>" each. */
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "vmm/agent.h"
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
		vm_destroy(h, "aas-rawbench", &e);
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
	fprintf(stderr,
	    "usage: vm_raw boot URI IMAGE_DIR WORK_DIR QEMU_USER N\n"
	    "       vm_raw exec URI DOMAIN N PATH [ARG...]\n");
	return 2;
}
