/* test_oomwatch.c - telling a VM stopped by its memory limit from one that
 * ended otherwise (vmm/oomwatch.h): the text parsers, and on a host with a
 * cgroup v1 memory controller a real process killed in a small group
 * beside one that exits on its own. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "vmm/oomwatch.h"

#define V1_MEMORY "/sys/fs/cgroup/memory"

static void
test_cgroup_of(void **state)
{
	char path[128];

	(void)state;
	/* Hybrid: v1's memory line wins over the unified one. */
	assert_int_equal(oomwatch_cgroup_of("9:name=systemd:/\n8:pids:/\n"
					    "4:memory:/machine/qemu-1-aas-x.libvirt-qemu\n"
					    "1:cpu:/machine/x/emulator\n0::/machine/x/emulator\n",
			     path, sizeof(path)),
	    1);
	assert_string_equal(path, "/machine/qemu-1-aas-x.libvirt-qemu");
	/* Controllers may share a line. */
	assert_int_equal(oomwatch_cgroup_of("5:cpu,memory,pids:/a/b\n", path, sizeof(path)), 1);
	assert_string_equal(path, "/a/b");
	assert_int_equal(oomwatch_cgroup_of("5:memoryx:/a\n0::/v2/path\n", path, sizeof(path)), 2);
	assert_string_equal(path, "/v2/path");
	/* Pure v2. */
	assert_int_equal(oomwatch_cgroup_of("0::/machine.slice/machine-qemu.scope/libvirt\n", path,
			     sizeof(path)),
	    2);
	assert_string_equal(path, "/machine.slice/machine-qemu.scope/libvirt");
	/* Nothing usable. */
	assert_int_equal(oomwatch_cgroup_of("", path, sizeof(path)), 0);
	assert_int_equal(oomwatch_cgroup_of("garbage\n1:cpu:/x\n", path, sizeof(path)), 0);
	assert_int_equal(oomwatch_cgroup_of("4:memory:relative\n", path, sizeof(path)), 0);
	assert_int_equal(oomwatch_cgroup_of("4:memory:/a-path-too-long-for-the-buffer\n", path, 8),
	    0);
}

static void
test_count(void **state)
{
	const char *v2 = "low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\noom_group_kill 0\n";
	const char *v1 = "oom_kill_disable 0\nunder_oom 0\noom_kill 3";

	(void)state;
	assert_int_equal(oomwatch_count(v2, "oom_kill"), 1);
	assert_int_equal(oomwatch_count(v2, "oom"), 2);
	assert_int_equal(oomwatch_count(v2, "max"), 12);
	assert_int_equal(oomwatch_count(v1, "oom_kill"), 3);
	assert_int_equal(oomwatch_count(v1, "under_oom"), 0);
	assert_int_equal(oomwatch_count(v2, "absent"), -1);
	assert_int_equal(oomwatch_count("oom_kill x\n", "oom_kill"), -1);
	assert_int_equal(oomwatch_count("oom_kill -1\n", "oom_kill"), -1);
	assert_int_equal(oomwatch_count("oom_kill 99999999999999999999\n", "oom_kill"), -1);
}

/* A cgroup root longer than the watch keeps is refused, not cut. */
static void
test_root_too_long(void **state)
{
	char root[400];
	struct err e;

	(void)state;
	memset(root, 'a', sizeof(root) - 1);
	root[0] = '/';
	root[sizeof(root) - 1] = '\0';
	err_clear(&e);
	assert_null(oomwatch_new(root, &e));
	assert_int_equal(e.kind, ERR_INVALID);
	assert_string_equal(e.msg, "cgroup root too long");
}

static long long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A child in cgroup `dir` (made here, limited to 32 MiB) that touches
 * `touch_mib` once told to; returns its pid. */
static pid_t
child_in_group(const char *dir, int touch_mib, int *go)
{
	char path[256], line[32];
	int p[2];
	pid_t pid;
	FILE *f;

	assert_true(mkdir(dir, 0755) == 0 || errno == EEXIST);
	snprintf(path, sizeof(path), "%s/memory.limit_in_bytes", dir);
	assert_non_null(f = fopen(path, "w"));
	fprintf(f, "%d", 32 << 20);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char c;
		size_t n = (size_t)touch_mib << 20;
		volatile char *m;

		close(p[1]);
		if (read(p[0], &c, 1) != 1)
			_exit(3);
		m = malloc(n);
		for (size_t i = 0; m != NULL && i < n; i += 4096)
			m[i] = 1;
		_exit(0);
	}
	close(p[0]);
	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	assert_non_null(f = fopen(path, "w"));
	snprintf(line, sizeof(line), "%d", (int)pid);
	fputs(line, f);
	assert_int_equal(fclose(f), 0);
	*go = p[1];
	return pid;
}

/* Waits for the child, removes its group (as libvirt does once QEMU is
 * gone) and gives the watcher a moment to see both. */
static int
end_group(const char *dir, pid_t pid, int go)
{
	int st = 0;
	long long end = now_ms() + 5000;

	assert_int_equal(write(go, "g", 1), 1);
	close(go);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	while (rmdir(dir) < 0 && errno == EBUSY && now_ms() < end)
		usleep(10000);
	usleep(200000);
	return st;
}

static void
test_v1_oom_and_normal_exit(void **state)
{
	char big[96], small[96];
	struct oomwatch *w;
	struct err e;
	pid_t a, b;
	int go_a, go_b, st;

	(void)state;
	if (geteuid() != 0 || access(V1_MEMORY "/cgroup.procs", W_OK) != 0)
		skip(); /* no cgroup v1 memory controller here to try it on */
	snprintf(big, sizeof(big), V1_MEMORY "/aas-test-oom-%d", (int)getpid());
	snprintf(small, sizeof(small), V1_MEMORY "/aas-test-ok-%d", (int)getpid());
	err_clear(&e);
	w = oomwatch_new("/sys/fs/cgroup", &e);
	assert_non_null(w);
	a = child_in_group(big, 128, &go_a);
	b = child_in_group(small, 4, &go_b);
	assert_int_equal(oomwatch_add(w, "over", a, &e), 0);
	assert_int_equal(oomwatch_add(w, "within", b, &e), 0);
	assert_true(oomwatch_watching(w, "over"));
	st = end_group(big, a, go_a);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL); /* the kernel's OOM kill */
	st = end_group(small, b, go_b);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_int_equal(oomwatch_take(w, "over"), 1);
	assert_int_equal(oomwatch_take(w, "within"), 0);
	/* Told once, then forgotten; unknown names are simply not OOM. */
	assert_int_equal(oomwatch_take(w, "over"), 0);
	assert_false(oomwatch_watching(w, "over"));
	assert_int_equal(oomwatch_take(w, "never-added"), 0);
	/* A process with no such cgroup: a clear error. */
	assert_int_equal(oomwatch_add(w, "gone", 999999999, &e), -1);
	oomwatch_free(w);
	oomwatch_free(NULL);
	assert_int_equal(oomwatch_take(NULL, "x"), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cgroup_of),
		cmocka_unit_test(test_count),
		cmocka_unit_test(test_root_too_long),
		cmocka_unit_test(test_v1_oom_and_normal_exit),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
