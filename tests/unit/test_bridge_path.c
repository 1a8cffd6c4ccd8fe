/* test_bridge_path.c - the sync tools' path rules: excludes, containment,
 * names from a remote listing, sandbox directories, shell quoting
 * (bridge/br_path.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bridge/br_path.h"

static struct br_excl *
excl(const char *json)
{
	json_t *j = json ? json_loads(json, 0, NULL) : NULL;
	struct err e;
	struct br_excl *x;

	err_clear(&e);
	x = br_excl_new(j, &e);
	json_decref(j);
	return x;
}

static void
test_default_excludes(void **state)
{
	struct br_excl *x = excl(NULL);

	(void)state;
	assert_non_null(x);
	assert_true(br_excl_match(x, ".git"));
	assert_true(br_excl_match(x, ".git/config"));
	assert_true(br_excl_match(x, "web/node_modules/react/index.js"));
	assert_true(br_excl_match(x, "pkg/__pycache__"));
	assert_false(br_excl_match(x, "src/main.c"));
	assert_false(br_excl_match(x, ".gitignore"));
	assert_false(br_excl_match(x, "my.git/x"));
	assert_false(br_excl_match(x, "node_modules_backup"));
	br_excl_free(x);
	br_excl_free(NULL);
}

/* What the service's tree download may leave out itself: single-name
 * patterns only, each as the service takes it. */
static void
test_excl_names(void **state)
{
	struct br_excl *d = excl(NULL);
	struct br_excl *x =
	    excl("[\"*.o\", \"/build/\", \"docs/*.tmp\", \"a,b\", \"tab\\there\", \"x?\"]");
	struct br_excl *none = excl("[]");
	char out[256], tiny[8];

	(void)state;
	br_excl_names(d, out, sizeof(out));
	assert_string_equal(out, ".git,node_modules,__pycache__");
	br_excl_names(x, out, sizeof(out));
	assert_string_equal(out, "*.o,x?");
	br_excl_names(none, out, sizeof(out));
	assert_string_equal(out, "");
	/* What does not fit is left to the bridge's own check. */
	br_excl_names(d, tiny, sizeof(tiny));
	assert_string_equal(tiny, ".git");
	br_excl_free(d);
	br_excl_free(x);
	br_excl_free(none);
}

static void
test_given_excludes_replace_defaults(void **state)
{
	struct br_excl *x = excl("[\"*.o\", \"/build/\", \"docs/*.tmp\"]");
	struct br_excl *none = excl("[]");

	(void)state;
	assert_non_null(x);
	assert_true(br_excl_match(x, "a.o"));
	assert_true(br_excl_match(x, "src/deep/b.o"));
	assert_true(br_excl_match(x, "build"));
	assert_true(br_excl_match(x, "build/out/x"));
	assert_false(br_excl_match(x, "src/build/x")); /* anchored at the root */
	assert_true(br_excl_match(x, "docs/a.tmp"));
	assert_false(br_excl_match(x, "docs/sub/a.tmp")); /* '*' does not cross '/' */
	assert_false(br_excl_match(x, ".git/config"));    /* defaults replaced */
	assert_false(br_excl_match(none, ".git"));
	br_excl_free(x);
	br_excl_free(none);
}

static void
test_bad_excludes(void **state)
{
	json_t *j = json_loads("[\"/\"]", 0, NULL);
	json_t *many = json_array();
	struct err e;

	(void)state;
	err_clear(&e);
	assert_null(br_excl_new(j, &e));
	assert_string_equal(e.field, "excludes");
	for (int i = 0; i < 65; i++)
		json_array_append_new(many, json_string("x"));
	err_clear(&e);
	assert_null(br_excl_new(many, &e));
	assert_string_equal(e.field, "excludes");
	json_decref(j);
	json_decref(many);
}

static void
test_within(void **state)
{
	(void)state;
	assert_true(br_path_within("/home/u/proj", "/home/u/proj"));
	assert_true(br_path_within("/home/u/proj", "/home/u/proj/a/b"));
	assert_false(br_path_within("/home/u/proj", "/home/u/project"));
	assert_false(br_path_within("/home/u/proj", "/home/u"));
	assert_false(br_path_within("/home/u/proj", "/etc/passwd"));
	assert_true(br_path_within("/", "/anything"));
}

static void
test_rel_ok(void **state)
{
	(void)state;
	assert_true(br_path_rel_ok("a"));
	assert_true(br_path_rel_ok("a/b.c/..d/.e"));
	assert_false(br_path_rel_ok(""));
	assert_false(br_path_rel_ok("/a"));
	assert_false(br_path_rel_ok("a/"));
	assert_false(br_path_rel_ok("a//b"));
	assert_false(br_path_rel_ok("."));
	assert_false(br_path_rel_ok(".."));
	assert_false(br_path_rel_ok("../x"));
	assert_false(br_path_rel_ok("a/../../x"));
	assert_false(br_path_rel_ok("a/./b"));
	assert_false(br_path_rel_ok("a/.."));
}

/* What a remote listing says is checked before it names a local file. */
static void
test_remote_entries(void **state)
{
	(void)state;
	assert_string_equal(br_path_below("/home/sandbox/p", "/home/sandbox/p/a/b"), "a/b");
	assert_string_equal(br_path_below("/", "/etc/x"), "etc/x");
	assert_null(br_path_below("/home/sandbox/p", "/home/sandbox/p"));
	assert_null(br_path_below("/home/sandbox/p", "/home/sandbox/px/a"));
	assert_null(br_path_below("/home/sandbox/p", "/etc/passwd"));
	assert_null(br_path_below("/home/sandbox/p", "/home/sandbox/p/../../../etc/passwd"));
	assert_null(br_path_below("/home/sandbox/p", "/home/sandbox/p/a/../../x"));
	assert_null(br_path_below("/home/sandbox/p", "/home/sandbox/p//abs"));
	assert_null(br_path_below("/home/sandbox/p", "relative/name"));
	assert_null(br_path_below("/home/sandbox/p", "/home/sandbox/p/a/"));
}

static void
sdir_ok(const char *in, const char *want)
{
	char out[128];
	struct err e;

	err_clear(&e);
	assert_int_equal(br_path_sandbox_dir(in, out, sizeof(out), &e), 0);
	assert_string_equal(out, want);
}

static void
test_sandbox_dir(void **state)
{
	char out[16];
	struct err e;

	(void)state;
	sdir_ok("proj", "/home/sandbox/proj");
	sdir_ok("./proj/", "/home/sandbox/proj");
	sdir_ok(".", "/home/sandbox");
	sdir_ok("/tmp//x/./y/", "/tmp/x/y");
	sdir_ok("/", "/");
	sdir_ok("//", "/");
	err_clear(&e);
	assert_int_equal(br_path_sandbox_dir("a/../b", out, sizeof(out), &e), -1);
	assert_string_equal(e.field, "sandbox_path");
	err_clear(&e);
	assert_int_equal(br_path_sandbox_dir("/a/very/long/path", out, sizeof(out), &e), -1);
}

static void
test_join_and_depth(void **state)
{
	char out[64];

	(void)state;
	assert_int_equal(br_path_join("/home/sandbox", "a/b", out, sizeof(out)), 0);
	assert_string_equal(out, "/home/sandbox/a/b");
	assert_int_equal(br_path_join("/", "a", out, sizeof(out)), 0);
	assert_string_equal(out, "/a");
	assert_int_equal(br_path_join("/x", "a", out, 4), -1);
	assert_int_equal(br_path_depth("a"), 1);
	assert_int_equal(br_path_depth("a/b/c"), 3);
}

static void
test_sh_quote(void **state)
{
	char out[64];

	(void)state;
	assert_int_equal(br_sh_quote("plain", out, sizeof(out)), 7);
	assert_string_equal(out, "'plain'");
	br_sh_quote("it's $(rm -rf ~) `x` \"y\"", out, sizeof(out));
	assert_string_equal(out, "'it'\\''s $(rm -rf ~) `x` \"y\"'");
	br_sh_quote("", out, sizeof(out));
	assert_string_equal(out, "''");
	assert_int_equal(br_sh_quote("abcdef", out, 8), -1);
	assert_int_equal(br_sh_quote("abcdef", out, 9), 8);
	assert_int_equal(br_sh_quote("'", out, 6), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_default_excludes),
		cmocka_unit_test(test_excl_names),
		cmocka_unit_test(test_given_excludes_replace_defaults),
		cmocka_unit_test(test_bad_excludes),
		cmocka_unit_test(test_within),
		cmocka_unit_test(test_rel_ok),
		cmocka_unit_test(test_remote_entries),
		cmocka_unit_test(test_sandbox_dir),
		cmocka_unit_test(test_join_and_depth),
		cmocka_unit_test(test_sh_quote),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
