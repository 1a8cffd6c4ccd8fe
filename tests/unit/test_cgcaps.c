/* test_cgcaps.c - which cgroup layouts can weight a VM's block I/O
 * (vmm/cgcaps.h), on cgroup trees made in a temporary directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "vmm/cgcaps.h"

struct tree {
	char root[64];
};

static void
put(struct tree *t, const char *name, const char *text)
{
	char path[256];
	FILE *f;

	assert_true(snprintf(path, sizeof(path), "%s/%s", t->root, name) < (int)sizeof(path));
	if (text == NULL) {
		assert_int_equal(mkdir(path, 0755), 0);
		return;
	}
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int
setup(void **state)
{
	struct tree *t = calloc(1, sizeof(*t));

	snprintf(t->root, sizeof(t->root), "/tmp/aas-cgcaps-XXXXXX");
	if (mkdtemp(t->root) == NULL)
		return -1;
	*state = t;
	return 0;
}

static int
teardown(void **state)
{
	struct tree *t = *state;
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", t->root);
	if (system(cmd) != 0)
		return -1;
	free(t);
	return 0;
}

/* v1 under mq-deadline: a blkio controller with throttling files only. */
static void
test_v1_no_weight(void **state)
{
	struct tree *t = *state;

	put(t, "blkio", NULL);
	put(t, "blkio/blkio.throttle.read_bps_device", "");
	/* The unified hierarchy beside it does not count: libvirt uses v1. */
	put(t, "cgroup.controllers", "cpu io memory\n");
	assert_int_equal(cgcaps_blkio_weight(t->root), 0);
}

static void
test_v1_cfq(void **state)
{
	struct tree *t = *state;

	put(t, "blkio", NULL);
	put(t, "blkio/blkio.weight", "500\n");
	assert_int_equal(cgcaps_blkio_weight(t->root), 1);
}

static void
test_v1_bfq(void **state)
{
	struct tree *t = *state;

	put(t, "blkio", NULL);
	put(t, "blkio/blkio.bfq.weight", "100\n");
	assert_int_equal(cgcaps_blkio_weight(t->root), 1);
}

static void
test_v2(void **state)
{
	struct tree *t = *state;

	put(t, "cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n");
	assert_int_equal(cgcaps_blkio_weight(t->root), 1);
}

/* v2 without the io controller; a name that merely contains "io" is not it. */
static void
test_v2_without_io(void **state)
{
	struct tree *t = *state;

	put(t, "cgroup.controllers", "cpuset cpu iox memory pids bio\n");
	assert_int_equal(cgcaps_blkio_weight(t->root), 0);
}

static void
test_nothing(void **state)
{
	struct tree *t = *state;

	assert_int_equal(cgcaps_blkio_weight(t->root), 0);
	assert_int_equal(cgcaps_blkio_weight("/nonexistent-aas-cgroup-root"), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_v1_no_weight, setup, teardown),
		cmocka_unit_test_setup_teardown(test_v1_cfq, setup, teardown),
		cmocka_unit_test_setup_teardown(test_v1_bfq, setup, teardown),
		cmocka_unit_test_setup_teardown(test_v2, setup, teardown),
		cmocka_unit_test_setup_teardown(test_v2_without_io, setup, teardown),
		cmocka_unit_test_setup_teardown(test_nothing, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
