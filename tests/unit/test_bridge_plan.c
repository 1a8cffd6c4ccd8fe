/* test_bridge_plan.c - the incremental decisions of the sync tools, the
 * trees they compare and the times they read (bridge/br_plan.h,
 * bridge/br_tree.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bridge/br_plan.h"
#include "bridge/br_tree.h"

static struct br_entry
ent(const char *rel, char type, long long size, long long mtime)
{
	struct br_entry e = { .rel = (char *)rel,
		.type = type,
		.size = size,
		.mtime = mtime,
		.mode = 0644 };
	return e;
}

static void
test_plan_file(void **state)
{
	struct br_entry src = ent("a.txt", 'f', 10, 1700000000);
	struct br_entry same = ent("a.txt", 'f', 10, 1700000000);
	struct br_entry bigger = ent("a.txt", 'f', 11, 1700000000);
	struct br_entry newer = ent("a.txt", 'f', 10, 1700000001);
	struct br_entry unknown = ent("a.txt", 'f', 10, -1);
	struct br_entry link = ent("a.txt", 'l', 10, 1700000000);
	struct br_entry dir = ent("a.txt", 'd', 0, 1700000000);

	(void)state;
	assert_int_equal(br_plan_file(&src, NULL), BR_SEND);
	assert_int_equal(br_plan_file(&src, &same), BR_SKIP);
	assert_int_equal(br_plan_file(&src, &bigger), BR_SEND);
	assert_int_equal(br_plan_file(&src, &newer), BR_SEND); /* older or newer alike */
	assert_int_equal(br_plan_file(&src, &unknown), BR_SEND);
	assert_int_equal(br_plan_file(&src, &link), BR_SEND); /* a link is replaced */
	assert_int_equal(br_plan_file(&src, &dir), BR_CONFLICT);
}

static struct br_tree *
tree(const struct br_entry *v, size_t n)
{
	struct br_tree *t = br_tree_new(100);
	struct err e;

	err_clear(&e);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(br_tree_add(t, &v[i], &e), 0);
	br_tree_sort(t);
	return t;
}

static void
test_extras(void **state)
{
	const struct br_entry s[] = {
		ent("src", 'd', 0, 1),
		ent("src/a.c", 'f', 1, 1),
		ent("was_dir", 'f', 1, 1),
	};
	const struct br_entry d[] = {
		ent("src", 'd', 0, 1),
		ent("src/a.c", 'f', 1, 1),
		ent("src/old.c", 'f', 1, 1),
		ent("gone", 'd', 0, 1),
		ent("gone/x", 'f', 1, 1),
		ent("was_dir", 'd', 0, 1),
		ent(".git", 'd', 0, 1),
		ent("keep/node_modules", 'd', 0, 1),
	};
	struct br_tree *src = tree(s, sizeof(s) / sizeof(s[0]));
	struct br_tree *dst = tree(d, sizeof(d) / sizeof(d[0]));
	struct err e;
	struct br_excl *x;

	(void)state;
	err_clear(&e);
	x = br_excl_new(NULL, &e);
	assert_false(br_plan_extra(src, br_tree_find(dst, "src"), x));
	assert_false(br_plan_extra(src, br_tree_find(dst, "src/a.c"), x));
	assert_true(br_plan_extra(src, br_tree_find(dst, "src/old.c"), x));
	assert_true(br_plan_extra(src, br_tree_find(dst, "gone"), x));
	assert_true(br_plan_extra(src, br_tree_find(dst, "gone/x"), x));
	assert_true(br_plan_extra(src, br_tree_find(dst, "was_dir"), x)); /* kind changed */
	assert_false(br_plan_extra(src, br_tree_find(dst, ".git"), x));   /* excluded stays */
	assert_false(br_plan_extra(src, br_tree_find(dst, "keep/node_modules"), x));
	br_excl_free(x);
	br_tree_free(src);
	br_tree_free(dst);
}

static void
test_tree_sorted_and_bounded(void **state)
{
	struct br_tree *t = br_tree_new(3);
	struct br_entry a = ent("b/c", 'f', 1, 1), b = ent("a.txt", 'f', 1, 1),
			c = ent("b", 'd', 0, 1), d = ent("z", 'f', 1, 1);
	struct err e;

	(void)state;
	err_clear(&e);
	assert_int_equal(br_tree_add(t, &a, &e), 0);
	assert_int_equal(br_tree_add(t, &b, &e), 0);
	assert_int_equal(br_tree_add(t, &c, &e), 0);
	assert_int_equal(br_tree_add(t, &d, &e), -1);
	assert_int_equal(e.kind, ERR_LIMIT);
	br_tree_sort(t);
	assert_int_equal(br_tree_count(t), 3);
	assert_string_equal(br_tree_at(t, 0)->rel, "a.txt");
	assert_string_equal(br_tree_at(t, 1)->rel, "b");
	assert_string_equal(br_tree_at(t, 2)->rel, "b/c"); /* a child after its parent */
	assert_null(br_tree_at(t, 3));
	assert_non_null(br_tree_find(t, "b/c"));
	assert_null(br_tree_find(t, "b/d"));
	br_tree_free(t);
	br_tree_free(NULL);
}

static void
test_time_parse(void **state)
{
	long long t;

	(void)state;
	assert_int_equal(br_time_parse("1970-01-01T00:00:00Z", &t), 0);
	assert_int_equal(t, 0);
	assert_int_equal(br_time_parse("2023-11-14T22:13:20Z", &t), 0);
	assert_int_equal(t, 1700000000);
	assert_int_equal(br_time_parse("2023-11-14T22:13:20.123Z", &t), 0);
	assert_int_equal(t, 1700000000);
	assert_int_equal(br_time_parse("2023-11-14T22:13:20+00:00", &t), 0);
	assert_int_equal(br_time_parse("2023-11-14T22:13:20+02:00", &t), -1);
	assert_int_equal(br_time_parse("2023-11-14", &t), -1);
	assert_int_equal(br_time_parse("", &t), -1);
	assert_int_equal(br_time_parse(NULL, &t), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plan_file),
		cmocka_unit_test(test_extras),
		cmocka_unit_test(test_tree_sorted_and_bounded),
		cmocka_unit_test(test_time_parse),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
