/* test_uidpool.c - per-VM users (vmm/uidpool.h): a uid is never held by
 * two owners, not even by two processes claiming at once, and comes back
 * only through its owner. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "vmm/uidpool.h"

#define FIRST 3000000u
#define CYCLES 100

struct fx {
	char dir[64];
	char pool[96];
};

static int
setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/test_uidpool.XXXXXX");
	if (mkdtemp(f->dir) == NULL)
		return -1;
	snprintf(f->pool, sizeof(f->pool), "%s/uids", f->dir);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fx *f = *state;
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	if (system(cmd) != 0)
		return -1;
	free(f);
	return 0;
}

static struct uidpool *
pool(struct fx *f, uint32_t count)
{
	struct err e;
	struct uidpool *p;

	err_clear(&e);
	p = uidpool_new(f->pool, FIRST, count, &e);
	if (p == NULL)
		fail_msg("uidpool_new: %s", e.msg);
	return p;
}

static void
test_claim_release(void **state)
{
	struct fx *f = *state;
	struct uidpool *p = pool(f, 3), *other;
	uint32_t a = 0, b = 0, c = 0, d = 0;
	struct err e;
	struct stat sb;
	char path[160];

	err_clear(&e);
	assert_int_equal(uidpool_claim(p, "vm-a", &a, &e), 0);
	assert_int_equal(uidpool_claim(p, "vm-b", &b, &e), 0);
	assert_int_equal(uidpool_claim(p, "vm-c", &c, &e), 0);
	assert_true(a >= FIRST && a < FIRST + 3 && b >= FIRST && b < FIRST + 3);
	assert_true(a != b && b != c && a != c);
	/* Full: a clear error, nothing claimed. */
	assert_int_equal(uidpool_claim(p, "vm-d", &d, &e), -1);
	assert_int_equal(e.kind, ERR_LIMIT);
	assert_int_equal(uidpool_find(p, "vm-d"), 0);
	/* Another process's view (a second pool on the same directory)
	 * sees the same claims. */
	other = pool(f, 3);
	assert_int_equal(uidpool_find(other, "vm-b"), b);
	assert_int_equal(uidpool_each(other, NULL, NULL), 3);
	/* Only the owner gives a uid back. */
	assert_int_equal(uidpool_release(other, b, "vm-a"), -1);
	assert_int_equal(uidpool_release(other, b + 100, "vm-b"), -1);
	assert_int_equal(uidpool_find(p, "vm-b"), b);
	assert_int_equal(uidpool_release(other, b, "vm-b"), 0);
	assert_int_equal(uidpool_release(other, b, "vm-b"), -1);
	assert_int_equal(uidpool_find(p, "vm-b"), 0);
	err_clear(&e);
	assert_int_equal(uidpool_claim(p, "vm-d", &d, &e), 0);
	assert_int_equal(d, b);
	/* Claims are the owner's only, and no stray file is left. */
	snprintf(path, sizeof(path), "%s/%u", f->pool, d);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0600);
	assert_int_equal(uidpool_each(p, NULL, NULL), 3);
	uidpool_free(other);
	uidpool_free(p);
	uidpool_free(NULL);
}

/* A uid given back is taken again last, so a VM's user is not at once
 * another's while anything of the old VM could linger. */
static void
test_reuse_last(void **state)
{
	struct fx *f = *state;
	struct uidpool *p = pool(f, 8);
	uint32_t first = 0, u = 0;
	struct err e;

	err_clear(&e);
	assert_int_equal(uidpool_claim(p, "one", &first, &e), 0);
	assert_int_equal(uidpool_release(p, first, "one"), 0);
	for (int i = 0; i < 7; i++) {
		char owner[16];

		snprintf(owner, sizeof(owner), "vm%d", i);
		assert_int_equal(uidpool_claim(p, owner, &u, &e), 0);
		assert_int_not_equal(u, first);
		assert_int_equal(uidpool_release(p, u, owner), 0);
	}
	uidpool_free(p);
}

static void
test_bad_input(void **state)
{
	struct fx *f = *state;
	struct uidpool *p = pool(f, 4);
	static const char *const bad[] = { "", "../x", "a/b", "a b", "a\nb", "x\xc3\xa9" };
	char longer[UIDPOOL_OWNER_MAX + 2];
	uint32_t u = 0;
	struct err e;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err_clear(&e);
		assert_int_equal(uidpool_claim(p, bad[i], &u, &e), -1);
		assert_int_equal(e.kind, ERR_INVALID);
	}
	memset(longer, 'a', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	err_clear(&e);
	assert_int_equal(uidpool_claim(p, longer, &u, &e), -1);
	assert_int_equal(uidpool_each(p, NULL, NULL), 0);
	err_clear(&e);
	assert_null(uidpool_new(f->pool, 0, 4, &e));
	err_clear(&e);
	assert_null(uidpool_new(f->pool, FIRST, 0, &e));
	err_clear(&e);
	assert_null(uidpool_new(f->pool, FIRST, UIDPOOL_MAX_COUNT + 1, &e));
	err_clear(&e);
	assert_null(uidpool_new(f->pool, 0x7ffffff0u, 64, &e));
	uidpool_free(p);
}

/* Two processes each run CYCLES claims and releases on a pool smaller than
 * twice what they hold, so they contend for the same uids: while a uid is
 * held, its holder keeps a marker made with O_EXCL, which fails if the
 * other process holds the same uid at the same time. */
static int
cycles(struct fx *f, int who)
{
	struct uidpool *p;
	struct err e;

	err_clear(&e);
	p = uidpool_new(f->pool, FIRST, 3, &e);
	if (p == NULL)
		return 10;
	for (int i = 0; i < CYCLES; i++) {
		char owner[32], marker[160];
		uint32_t u = 0;
		int fd;

		snprintf(owner, sizeof(owner), "p%d-%d", who, i);
		err_clear(&e);
		while (uidpool_claim(p, owner, &u, &e) < 0) {
			if (e.kind != ERR_LIMIT)
				return 11;
			err_clear(&e);
			usleep(100);
		}
		snprintf(marker, sizeof(marker), "%s/live-%u", f->dir, u);
		fd = open(marker, O_WRONLY | O_CREAT | O_EXCL, 0600);
		if (fd < 0)
			return 12; /* the other process holds it too */
		close(fd);
		usleep(200);
		if (unlink(marker) < 0 || uidpool_release(p, u, owner) < 0)
			return 13;
	}
	uidpool_free(p);
	return 0;
}

static void
test_two_processes(void **state)
{
	struct fx *f = *state;
	pid_t pid[2];
	int st;

	for (int i = 0; i < 2; i++) {
		pid[i] = fork();
		assert_true(pid[i] >= 0);
		if (pid[i] == 0)
			_exit(cycles(f, i));
	}
	for (int i = 0; i < 2; i++) {
		assert_int_equal(waitpid(pid[i], &st, 0), pid[i]);
		assert_true(WIFEXITED(st));
		assert_int_equal(WEXITSTATUS(st), 0);
	}
	/* Every uid came back. */
	{
		struct uidpool *p = pool(f, 3);

		assert_int_equal(uidpool_each(p, NULL, NULL), 0);
		uidpool_free(p);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_claim_release, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reuse_last, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_input, setup, teardown),
		cmocka_unit_test_setup_teardown(test_two_processes, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
