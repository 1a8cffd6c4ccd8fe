/* test_bridge_local.c - the local side of the sync tools in a temporary
 * directory: scanning with links, atomic writes that never leave the
 * root, deletions (bridge/br_local.h); and the stdio line reader
 * (bridge/br_io.h). */
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

#include "bridge/br_io.h"
#include "bridge/br_local.h"

static char base[256]; /* mkdtemp: holds root/ and outside/ */
static char root[300];

static void
put(const char *rel, const char *text)
{
	char p[600];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", base, rel);
	f = fopen(p, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void
sub(const char *rel)
{
	char p[600];

	snprintf(p, sizeof(p), "%s/%s", base, rel);
	assert_int_equal(mkdir(p, 0755), 0);
}

static void
link_(const char *target, const char *rel)
{
	char p[600];

	snprintf(p, sizeof(p), "%s/%s", base, rel);
	assert_int_equal(symlink(target, p), 0);
}

static int
setup(void **state)
{
	(void)state;
	snprintf(base, sizeof(base), "/tmp/test_bridge_local.XXXXXX");
	if (mkdtemp(base) == NULL)
		return -1;
	snprintf(root, sizeof(root), "%s/root", base);
	sub("root");
	sub("outside");
	put("outside/secret", "s");
	sub("root/src");
	put("root/src/a.c", "int a;\n");
	put("root/top.txt", "top\n");
	sub("root/.git");
	put("root/.git/HEAD", "ref\n");
	return 0;
}

static int
teardown(void **state)
{
	char cmd[400];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	return system(cmd) == 0 ? 0 : -1;
}

static struct br_tree *
scan(int follow, json_t *warnings, struct err *e)
{
	struct br_tree *t = br_tree_new(1000);
	struct br_excl *x = br_excl_new(NULL, e);
	char real[300];

	assert_int_equal(br_local_root(root, 0, real, sizeof(real), e), 0);
	if (br_local_scan(real, x, follow, t, warnings, e) < 0) {
		br_tree_free(t);
		t = NULL;
	} else {
		br_tree_sort(t);
	}
	br_excl_free(x);
	return t;
}

static void
test_scan_plain(void **state)
{
	json_t *w = json_array();
	struct err e;
	struct br_tree *t;

	(void)state;
	err_clear(&e);
	t = scan(1, w, &e);
	assert_non_null(t);
	assert_int_equal(br_tree_count(t), 3); /* src, src/a.c, top.txt; not .git */
	assert_int_equal(br_tree_find(t, "src")->type, 'd');
	assert_int_equal(br_tree_find(t, "src/a.c")->size, 7);
	assert_null(br_tree_find(t, ".git/HEAD"));
	assert_int_equal(json_array_size(w), 0);
	br_tree_free(t);
	json_decref(w);
}

static void
test_scan_links(void **state)
{
	json_t *w = json_array();
	struct err e;
	struct br_tree *t;
	const struct br_entry *en;

	(void)state;
	link_("src/a.c", "root/alias.c");       /* inside: sent as the file */
	link_("no-such-file", "root/dangling"); /* warned about */
	link_("src", "root/srcdir");            /* a directory: warned about */
	err_clear(&e);
	t = scan(1, w, &e);
	assert_non_null(t);
	en = br_tree_find(t, "alias.c");
	assert_non_null(en);
	assert_int_equal(en->type, 'f');
	assert_non_null(en->source);
	assert_non_null(strstr(en->source, "/root/src/a.c"));
	assert_null(br_tree_find(t, "dangling"));
	assert_null(br_tree_find(t, "srcdir"));
	assert_int_equal(json_array_size(w), 2);
	br_tree_free(t);
	/* Without following, links are entries of their own. */
	err_clear(&e);
	t = scan(0, NULL, &e);
	assert_int_equal(br_tree_find(t, "alias.c")->type, 'l');
	assert_null(br_tree_find(t, "alias.c")->source);
	br_tree_free(t);
	json_decref(w);
}

static void
test_scan_refuses_link_out(void **state)
{
	char target[400];
	struct err e;

	(void)state;
	snprintf(target, sizeof(target), "%s/outside/secret", base);
	link_(target, "root/src/leak");
	err_clear(&e);
	assert_null(scan(1, NULL, &e));
	assert_int_equal(e.kind, ERR_FORBIDDEN);
	assert_string_equal(e.field, "local_path");
	assert_non_null(strstr(e.msg, "src/leak"));
	assert_non_null(strstr(e.msg, "outside"));
	link_("../../outside", "root/src/up");
}

static void
test_root_rules(void **state)
{
	char out[300], p[400];
	struct err e;

	(void)state;
	err_clear(&e);
	assert_int_equal(br_local_root("relative/dir", 0, out, sizeof(out), &e), -1);
	assert_non_null(strstr(e.msg, "absolute"));
	err_clear(&e);
	snprintf(p, sizeof(p), "%s/top.txt", root);
	assert_int_equal(br_local_root(p, 0, out, sizeof(out), &e), -1);
	err_clear(&e);
	snprintf(p, sizeof(p), "%s/missing", root);
	assert_int_equal(br_local_root(p, 0, out, sizeof(out), &e), -1);
	assert_int_equal(e.kind, ERR_NOT_FOUND);
	err_clear(&e);
	snprintf(p, sizeof(p), "%s/made/deep", base);
	assert_int_equal(br_local_root(p, 1, out, sizeof(out), &e), 0);
	assert_string_equal(out, p);
}

static void
read_back(const char *rel, const char *want)
{
	char p[600], buf[64] = "";
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", base, rel);
	f = fopen(p, "r");
	assert_non_null(f);
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	assert_string_equal(buf, want);
}

static void
test_atomic_write(void **state)
{
	struct br_lfile *f;
	struct stat st;
	char p[600];
	struct err e;

	(void)state;
	err_clear(&e);
	f = br_lfile_open(root, "new/deeper/out.txt", &e);
	assert_non_null(f);
	assert_int_equal(br_lfile_write(f, "hello", 5, &e), 0);
	snprintf(p, sizeof(p), "%s/new/deeper/out.txt", root);
	assert_int_equal(stat(p, &st), -1); /* not there before the commit */
	assert_int_equal(br_lfile_commit(f, 0750, 1600000000, &e), 0);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mtime, 1600000000);
	assert_int_equal(st.st_mode & 0777, 0750);
	read_back("root/new/deeper/out.txt", "hello");
	/* An aborted one leaves nothing behind. */
	f = br_lfile_open(root, "new/aborted.txt", &e);
	assert_non_null(f);
	br_lfile_abort(f);
	br_lfile_abort(NULL);
	snprintf(p, sizeof(p), "%s/new/aborted.txt", root);
	assert_int_equal(stat(p, &st), -1);
	assert_int_equal(
	    system("test -z \"$(ls -A /tmp/test_bridge_local.*/root/new | grep aas-sync)\""), 0);
}

static void
test_write_never_follows_links(void **state)
{
	char target[400];
	struct err e;
	struct br_lfile *f;

	(void)state;
	snprintf(target, sizeof(target), "%s/outside", base);
	link_(target, "root/exit");
	err_clear(&e);
	assert_null(br_lfile_open(root, "exit/secret", &e));
	assert_int_equal(e.kind, ERR_FORBIDDEN);
	assert_non_null(strstr(e.msg, "refusing"));
	read_back("outside/secret", "s");
	err_clear(&e);
	assert_int_equal(br_local_mkdirs(root, "exit/sub", &e), -1);
	/* A link at the final name is replaced, its target untouched. */
	snprintf(target, sizeof(target), "%s/outside/secret", base);
	link_(target, "root/replace_me");
	err_clear(&e);
	f = br_lfile_open(root, "replace_me", &e);
	assert_non_null(f);
	assert_int_equal(br_lfile_write(f, "new", 3, &e), 0);
	assert_int_equal(br_lfile_commit(f, 0644, 1600000000, &e), 0);
	read_back("outside/secret", "s");
	read_back("root/replace_me", "new");
}

static void
test_remove(void **state)
{
	struct err e;

	(void)state;
	err_clear(&e);
	assert_int_equal(br_local_remove(root, "src/leak", 0, &e), 1); /* the link only */
	assert_int_equal(br_local_remove(root, "src/up", 0, &e), 1);
	read_back("outside/secret", "s");
	assert_int_equal(br_local_remove(root, "src", 1, &e), 0); /* not empty */
	assert_int_equal(br_local_remove(root, "src/a.c", 0, &e), 1);
	assert_int_equal(br_local_remove(root, "src/a.c", 0, &e), 0); /* already gone */
	assert_int_equal(br_local_remove(root, "src", 1, &e), 1);
	assert_int_equal(br_local_remove(root, "exit/secret", 0, &e), -1);
	read_back("outside/secret", "s");
}

/* ---- line reader ---- */

static void
test_lines(void **state)
{
	int fds[2];
	const char data[] = "{\"a\":1}\r\n\n"
			    "0123456789abcdef\n"
			    "ok\n"
			    "tail";
	struct br_in *in;
	char *line;
	size_t len;

	(void)state;
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(write(fds[1], data, sizeof(data) - 1), (ssize_t)sizeof(data) - 1);
	close(fds[1]);
	in = br_in_new(fds[0], 10);
	assert_int_equal(br_in_next(in, &line, &len), BR_IN_LINE);
	assert_string_equal(line, "{\"a\":1}\r");
	assert_int_equal(br_in_next(in, &line, &len), BR_IN_LINE);
	assert_int_equal(len, 0);
	assert_int_equal(br_in_next(in, &line, &len), BR_IN_TOO_LONG);
	assert_int_equal(br_in_next(in, &line, &len), BR_IN_LINE);
	assert_string_equal(line, "ok");
	assert_int_equal(br_in_next(in, &line, &len), BR_IN_LINE);
	assert_string_equal(line, "tail");
	assert_int_equal(br_in_next(in, &line, &len), BR_IN_EOF);
	br_in_free(in);
	br_in_free(NULL);
	close(fds[0]);
}

static void
test_long_line_across_reads(void **state)
{
	int fds[2];
	size_t big = 300000;
	char *buf = malloc(big + 4);
	struct br_in *in;
	char *line;
	size_t len;

	(void)state;
	memset(buf, 'x', big);
	memcpy(buf + big, "\nok\n", 4);
	assert_int_equal(pipe(fds), 0);
	if (fork() == 0) {
		close(fds[0]);
		for (size_t off = 0; off < big + 4;) {
			ssize_t w = write(fds[1], buf + off, big + 4 - off);
			if (w <= 0)
				_exit(1);
			off += (size_t)w;
		}
		_exit(0);
	}
	close(fds[1]);
	in = br_in_new(fds[0], big);
	assert_int_equal(br_in_next(in, &line, &len), BR_IN_LINE);
	assert_int_equal(len, big);
	assert_int_equal(br_in_next(in, &line, &len), BR_IN_LINE);
	assert_string_equal(line, "ok");
	assert_int_equal(br_in_next(in, &line, &len), BR_IN_EOF);
	br_in_free(in);
	close(fds[0]);
	free(buf);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_scan_plain),
		cmocka_unit_test(test_scan_links),
		cmocka_unit_test(test_scan_refuses_link_out),
		cmocka_unit_test(test_root_rules),
		cmocka_unit_test(test_atomic_write),
		cmocka_unit_test(test_write_never_follows_links),
		cmocka_unit_test(test_remove),
		cmocka_unit_test(test_lines),
		cmocka_unit_test(test_long_line_across_reads),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
