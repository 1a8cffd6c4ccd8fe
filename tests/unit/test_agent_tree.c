/* test_agent_tree.c - the guest's tree unpacking (vmm/image/agent_tree.h)
 * in a temporary directory: a new directory appears whole, an existing
 * one is merged into, an abandoned or refused archive leaves nothing (no
 * stage either), conflicts are found before anything moves, and no name
 * or link reaches outside the stage, whatever the archive says. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/tar.h"
#include "vmm/image/agent_tree.h"

#define AR_MAX (256 * 1024)

static char base[256];

struct ar {
	char b[AR_MAX];
	size_t len;
};

/* A raw ustar header: any name, type and link (hostile ones too). */
static void
raw(struct ar *a, const char *name, char type, const char *link, const char *data, unsigned mode)
{
	size_t n = data ? strlen(data) : 0;
	char *h = a->b + a->len;
	unsigned sum = 0;

	memset(h, 0, TAR_BLOCK);
	memcpy(h, name, strlen(name));
	snprintf(h + 100, 8, "%07o", mode);
	snprintf(h + 108, 8, "%07o", 0);
	snprintf(h + 116, 8, "%07o", 0);
	snprintf(h + 124, 12, "%011o", (unsigned)n);
	snprintf(h + 136, 12, "%011o", 1600000000u);
	h[156] = type;
	if (link)
		memcpy(h + 157, link, strlen(link));
	memcpy(h + 257,
	    "ustar\0"
	    "00",
	    8);
	memset(h + 148, ' ', 8);
	for (size_t i = 0; i < TAR_BLOCK; i++)
		sum += (unsigned char)h[i];
	snprintf(h + 148, 8, "%06o", sum);
	a->len += TAR_BLOCK;
	if (n) {
		memcpy(a->b + a->len, data, n);
		a->len += n + tar_pad(n);
	}
}

/* A member through the project's writer (long names as pax). */
static void
member(struct ar *a, const char *name, char type, const char *data, unsigned mode)
{
	size_t n = data ? strlen(data) : 0;
	struct err e;
	ssize_t k;

	err_clear(&e);
	k = tar_header(a->b + a->len, AR_MAX - a->len, name, type, mode, n, 1600000000, &e);
	assert_true(k > 0);
	a->len += (size_t)k;
	memcpy(a->b + a->len, data ? data : "", n);
	a->len += n + tar_pad(n);
}

static void
end(struct ar *a)
{
	memset(a->b + a->len, 0, TAR_END_BYTES);
	a->len += TAR_END_BYTES;
}

/* Feeds in pieces of `piece` bytes; the first error's return. */
static int
feed(struct atree *t, const struct ar *a, size_t piece, char *msg)
{
	for (size_t off = 0; off < a->len; off += piece) {
		size_t k = a->len - off < piece ? a->len - off : piece;

		if (atree_feed(t, (const unsigned char *)a->b + off, k, msg, ATREE_MSG_MAX) < 0)
			return -1;
	}
	return 0;
}

static const char *
at(const char *rel)
{
	static char p[4][1024];
	static int i;

	i = (i + 1) % 4;
	snprintf(p[i], sizeof(p[i]), "%s/%s", base, rel);
	return p[i];
}

static char *
slurp(const char *rel)
{
	static char buf[256];
	FILE *f = fopen(at(rel), "r");
	size_t n;

	if (f == NULL)
		return NULL;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* Entries of a directory whose name starts with ".aas-tree-". */
static int
stages(const char *rel)
{
	DIR *d = opendir(at(rel));
	struct dirent *ent;
	int n = 0;

	assert_non_null(d);
	while ((ent = readdir(d)) != NULL)
		n += strncmp(ent->d_name, ".aas-tree-", 10) == 0;
	closedir(d);
	return n;
}

static int
setup(void **state)
{
	(void)state;
	snprintf(base, sizeof(base), "/tmp/test_agent_tree.XXXXXX");
	return mkdtemp(base) ? 0 : -1;
}

static int
teardown(void **state)
{
	char cmd[400];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	return system(cmd) == 0 ? 0 : -1;
}

static void
test_new_directory(void **state)
{
	static struct ar a;
	char msg[ATREE_MSG_MAX], longname[400];
	uint64_t members = 0;
	struct stat st;

	(void)state;
	/* 330 bytes: a pax path. */
	for (int i = 0; i < 30; i++)
		memcpy(longname + 10 * i, "level-abc/", 10);
	snprintf(longname + 300, sizeof(longname) - 300, "long.txt");
	a.len = 0;
	member(&a, "a", '5', NULL, 0750);
	member(&a, "a/b.txt", '0', "bee\n", 0666);
	member(&a, "run.sh", '0', "#!/bin/sh\n", 04777);
	member(&a, longname, '0', "long\n", 0644);
	raw(&a, "l", '2', "a/b.txt", NULL, 0777);
	raw(&a, "h", '1', "a/b.txt", NULL, 0644);
	member(&a, "implied/dirs/f", '0', "f", 0644);
	end(&a);
	for (size_t piece = 1; piece <= 4096; piece *= 8) {
		char dir[512];
		struct atree *t;

		snprintf(dir, sizeof(dir), "new-%zu/sub", piece);
		t = atree_new(at(dir), msg, sizeof(msg));
		assert_non_null(t);
		if (feed(t, &a, piece, msg) < 0)
			fail_msg("piece %zu: %s", piece, msg);
		assert_int_equal(atree_commit(t, &members, msg, sizeof(msg)), 0);
		atree_free(t);
		assert_int_equal(members, 7);
		snprintf(dir, sizeof(dir), "new-%zu/sub/a/b.txt", piece);
		assert_string_equal(slurp(dir), "bee\n");
		assert_int_equal(stat(at(dir), &st), 0);
		assert_int_equal(st.st_mode & 07777, 0644); /* umask 022 */
		assert_int_equal(st.st_mtime, 1600000000);
		assert_int_equal(st.st_nlink, 2); /* h */
		snprintf(dir, sizeof(dir), "new-%zu/sub/run.sh", piece);
		assert_int_equal(stat(at(dir), &st), 0);
		assert_int_equal(st.st_mode & 07777, 0755); /* no set-uid */
		snprintf(dir, sizeof(dir), "new-%zu/sub/l", piece);
		assert_string_equal(slurp(dir), "bee\n");
		snprintf(dir, sizeof(dir), "new-%zu/sub/implied/dirs/f", piece);
		assert_string_equal(slurp(dir), "f");
		snprintf(dir, sizeof(dir), "new-%zu/sub/%s", piece, longname);
		assert_string_equal(slurp(dir), "long\n");
		snprintf(dir, sizeof(dir), "new-%zu/sub", piece);
		assert_int_equal(stat(at(dir), &st), 0);
		assert_int_equal(st.st_mode & 0777, 0755);
		assert_int_equal(stages(""), 0);
	}
}

static void
test_merge(void **state)
{
	static struct ar a;
	char msg[ATREE_MSG_MAX];
	uint64_t members;
	struct atree *t;
	FILE *f;

	(void)state;
	assert_int_equal(mkdir(at("m"), 0755), 0);
	assert_int_equal(mkdir(at("m/keepdir"), 0755), 0);
	f = fopen(at("m/keep.txt"), "w");
	fputs("keep\n", f);
	fclose(f);
	f = fopen(at("m/same.txt"), "w");
	fputs("old\n", f);
	fclose(f);
	a.len = 0;
	member(&a, "same.txt", '0', "new\n", 0644);
	member(&a, "keepdir/added.txt", '0', "added\n", 0644);
	member(&a, "fresh/x", '0', "x", 0644);
	member(&a, "dup.txt", '0', "first\n", 0644);
	member(&a, "dup.txt", '0', "second\n", 0644); /* a later member wins, as in tar */
	end(&a);
	t = atree_new(at("m"), msg, sizeof(msg));
	assert_non_null(t);
	assert_int_equal(feed(t, &a, 333, msg), 0);
	assert_int_equal(atree_commit(t, &members, msg, sizeof(msg)), 0);
	atree_free(t);
	assert_string_equal(slurp("m/keep.txt"), "keep\n");
	assert_string_equal(slurp("m/same.txt"), "new\n");
	assert_string_equal(slurp("m/keepdir/added.txt"), "added\n");
	assert_string_equal(slurp("m/fresh/x"), "x");
	assert_string_equal(slurp("m/dup.txt"), "second\n");
	assert_int_equal(stages("m"), 0);
}

static void
test_nothing_changes(void **state)
{
	static struct ar a;
	char msg[ATREE_MSG_MAX];
	uint64_t members;
	struct atree *t;
	FILE *f;

	(void)state;
	assert_int_equal(mkdir(at("n"), 0755), 0);
	f = fopen(at("n/x"), "w");
	fputs("a file\n", f);
	fclose(f);
	/* Abandoned part way: no commit. */
	a.len = 0;
	member(&a, "one.txt", '0', "1", 0644);
	member(&a, "two.txt", '0', "2", 0644);
	t = atree_new(at("n"), msg, sizeof(msg));
	assert_int_equal(feed(t, &a, 100, msg), 0);
	assert_int_equal(stages("n"), 1);
	atree_free(t);
	assert_null(slurp("n/one.txt"));
	assert_int_equal(stages("n"), 0);
	/* Cut inside a member: commit refuses. */
	t = atree_new(at("n"), msg, sizeof(msg));
	a.len -= TAR_BLOCK;
	assert_int_equal(feed(t, &a, 100, msg), 0);
	assert_int_equal(atree_commit(t, &members, msg, sizeof(msg)), -1);
	atree_free(t);
	assert_null(slurp("n/one.txt"));
	/* A conflict (x is a file here, a directory in the archive) is found
	 * before anything moves. */
	a.len = 0;
	member(&a, "aaa-first.txt", '0', "first", 0644);
	member(&a, "x/inner", '0', "i", 0644);
	end(&a);
	t = atree_new(at("n"), msg, sizeof(msg));
	assert_int_equal(feed(t, &a, 4096, msg), 0);
	assert_int_equal(atree_commit(t, &members, msg, sizeof(msg)), -1);
	assert_non_null(strstr(msg, "x"));
	atree_free(t);
	assert_null(slurp("n/aaa-first.txt"));
	assert_string_equal(slurp("n/x"), "a file\n");
	assert_int_equal(stages("n"), 0);
	/* The target is a file. */
	assert_null(atree_new(at("n/x"), msg, sizeof(msg)));
	assert_int_equal(errno, ENOTDIR);
}

static void
test_no_way_out(void **state)
{
	static struct ar a;
	char msg[ATREE_MSG_MAX];
	struct atree *t;
	static const char *const names[] = { "../up", "/abs", "a/../../up", "a//b", "." };

	(void)state;
	assert_int_equal(mkdir(at("w"), 0755), 0);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		a.len = 0;
		raw(&a, names[i], '0', NULL, "x", 0644);
		t = atree_new(at("w/in"), msg, sizeof(msg));
		assert_non_null(t);
		assert_int_equal(feed(t, &a, 512, msg), -1);
		assert_int_equal(errno, EINVAL);
		atree_free(t);
	}
	/* Links that lead out, followed by a name through them: the kernel
	 * keeps the name beneath the stage. */
	a.len = 0;
	raw(&a, "d", '2', ".", NULL, 0777);
	raw(&a, "d/l", '2', "..", NULL, 0777);
	raw(&a, "d/l/escaped", '0', NULL, "x", 0644);
	t = atree_new(at("w/in"), msg, sizeof(msg));
	assert_int_equal(feed(t, &a, 512, msg), -1);
	assert_int_equal(errno, EXDEV);
	atree_free(t);
	a.len = 0;
	raw(&a, "abs", '2', "/tmp", NULL, 0777);
	raw(&a, "abs/escaped", '0', NULL, "x", 0644);
	t = atree_new(at("w/in"), msg, sizeof(msg));
	assert_int_equal(feed(t, &a, 512, msg), -1);
	assert_int_equal(errno, EXDEV);
	atree_free(t);
	a.len = 0;
	raw(&a, "hard", '1', "../../etc/passwd", NULL, 0644);
	t = atree_new(at("w/in"), msg, sizeof(msg));
	assert_int_equal(feed(t, &a, 512, msg), -1);
	atree_free(t);
	/* Devices and FIFOs are not members here either. */
	a.len = 0;
	raw(&a, "fifo", '6', NULL, NULL, 0644);
	t = atree_new(at("w/in"), msg, sizeof(msg));
	assert_int_equal(feed(t, &a, 512, msg), -1);
	atree_free(t);
	assert_null(slurp("w/escaped"));
	assert_null(slurp("escaped"));
	assert_int_equal(stages("w"), 0);
	atree_free(NULL);
}

/* A member with an explicit mtime through the project's writer. */
static void
member_t(struct ar *a, const char *name, char type, const char *data, unsigned mode,
    long long mtime)
{
	size_t n = data ? strlen(data) : 0;
	struct err e;
	ssize_t k;

	err_clear(&e);
	k = tar_header(a->b + a->len, AR_MAX - a->len, name, type, mode, n, mtime, &e);
	assert_true(k > 0);
	a->len += (size_t)k;
	memcpy(a->b + a->len, data ? data : "", n);
	a->len += n + tar_pad(n);
}

/* A file dated before 1970: GNU tar writes its mtime in base-256 with
 * the negative marker 0xff, base/tar passes it on unchanged, and the
 * agent refuses the whole archive ("a bad number in a header"). */
static void
test_negative_mtime(void **state)
{
	static struct ar a;
	char msg[ATREE_MSG_MAX];
	uint64_t members;
	struct atree *t;

	(void)state;
	a.len = 0;
	member_t(&a, "old.txt", '0', "old\n", 0644, -86400);
	end(&a);
	t = atree_new(at("neg"), msg, sizeof(msg));
	assert_non_null(t);
	if (feed(t, &a, 512, msg) < 0)
		fail_msg("refused: %s", msg);
	assert_int_equal(atree_commit(t, &members, msg, sizeof(msg)), 0);
	atree_free(t);
	assert_string_equal(slurp("neg/old.txt"), "old\n");
}

/* A directory the archive only implies (a member "secret/f", no
 * "secret/" member) must not change the mode of the target's existing
 * directory: ~/.ssh 0700 became 0755. */
static void
test_implied_dir_mode(void **state)
{
	static struct ar a;
	char msg[ATREE_MSG_MAX];
	uint64_t members;
	struct atree *t;
	struct stat st;

	(void)state;
	assert_int_equal(mkdir(at("h"), 0755), 0);
	assert_int_equal(mkdir(at("h/.ssh"), 0700), 0);
	a.len = 0;
	member(&a, ".ssh/authorized_keys", '0', "ssh-ed25519 AAAA\n", 0600);
	member(&a, "fresh/deep/f", '0', "f", 0644);
	member(&a, "later/x", '0', "x", 0644);
	member(&a, "later", '5', NULL, 0700);
	end(&a);
	t = atree_new(at("h"), msg, sizeof(msg));
	assert_non_null(t);
	assert_int_equal(feed(t, &a, 4096, msg), 0);
	assert_int_equal(atree_commit(t, &members, msg, sizeof(msg)), 0);
	atree_free(t);
	assert_int_equal(stat(at("h/.ssh"), &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	/* New implied directories are plain 0755; a directory member that
	 * comes after its files still gives its mode. */
	assert_int_equal(stat(at("h/fresh"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0755);
	assert_int_equal(stat(at("h/fresh/deep"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0755);
	assert_int_equal(stat(at("h/later"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	/* The same archive into a new directory. */
	t = atree_new(at("h2/new"), msg, sizeof(msg));
	assert_non_null(t);
	assert_int_equal(feed(t, &a, 4096, msg), 0);
	assert_int_equal(atree_commit(t, &members, msg, sizeof(msg)), 0);
	atree_free(t);
	assert_int_equal(stat(at("h2/new/fresh/deep"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0755);
	assert_int_equal(stat(at("h2/new/.ssh"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0755);
	assert_int_equal(stat(at("h2/new/later"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
}

/* A later member of the same name wins, as in tar: a file then a
 * directory "a" must leave a directory (mkdirat's EEXIST is taken as
 * success and the file stays). */
static void
test_later_member_wins(void **state)
{
	static struct ar a;
	char msg[ATREE_MSG_MAX];
	uint64_t members;
	struct atree *t;
	struct stat st;

	(void)state;
	a.len = 0;
	member(&a, "a", '0', "file", 0644);
	member(&a, "a", '5', NULL, 0755);
	end(&a);
	t = atree_new(at("fd"), msg, sizeof(msg));
	assert_non_null(t);
	if (feed(t, &a, 4096, msg) < 0)
		fail_msg("refused: %s", msg);
	if (atree_commit(t, &members, msg, sizeof(msg)) < 0)
		fail_msg("commit: %s", msg);
	atree_free(t);
	assert_int_equal(lstat(at("fd/a"), &st), 0);
	assert_true(S_ISDIR(st.st_mode));
}

/* A link to a deep directory and a deep name through it make the stage
 * deeper than any one name; an abandoned archive still leaves no stage. */
static void
test_deep_stage_removed(void **state)
{
	static struct ar a;
	static char deep[2048], name[4096];
	char msg[ATREE_MSG_MAX];
	struct atree *t;
	size_t k = 0;

	(void)state;
	assert_int_equal(mkdir(at("dp"), 0755), 0);
	for (int i = 0; i < 49; i++) /* fits the ustar link field */
		k += (size_t)snprintf(deep + k, sizeof(deep) - k, "%sa", i ? "/" : "");
	a.len = 0;
	member(&a, deep, '5', NULL, 0755);
	raw(&a, "l", '2', deep, NULL, 0777);
	k = (size_t)snprintf(name, sizeof(name), "l");
	for (int i = 0; i < 250; i++)
		k += (size_t)snprintf(name + k, sizeof(name) - k, "/b");
	member(&a, name, '0', "x", 0644);
	t = atree_new(at("dp"), msg, sizeof(msg));
	assert_non_null(t);
	if (feed(t, &a, 4096, msg) < 0)
		fail_msg("refused: %s", msg);
	atree_free(t); /* abandoned */
	assert_int_equal(stages("dp"), 0);
}

/* A move that would fail half way (here EACCES: a read-only directory
 * of the target) is found by the check pass: nothing moves. Run as an
 * ordinary user, as the agent does (setfsuid). */
static void
test_commit_all_or_nothing(void **state)
{
	static struct ar a;
	char msg[ATREE_MSG_MAX], name[64];
	uint64_t members;
	struct atree *t;
	FILE *f;
	int rc, moved = 0;

	(void)state;
	assert_int_equal(chmod(base, 0755), 0);
	assert_int_equal(mkdir(at("pc"), 0755), 0);
	assert_int_equal(mkdir(at("pc/ro"), 0755), 0);
	assert_int_equal(chown(at("pc"), 65534, 65534), 0);
	assert_int_equal(chown(at("pc/ro"), 65534, 65534), 0);
	assert_int_equal(chmod(at("pc/ro"), 0555), 0);
	a.len = 0;
	member(&a, "ro/b", '0', "b", 0644);
	for (int i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "f%02d", i);
		member(&a, name, '0', "new", 0644);
	}
	end(&a);
	setfsgid(65534);
	setfsuid(65534);
	t = atree_new(at("pc"), msg, sizeof(msg));
	assert_non_null(t);
	assert_int_equal(feed(t, &a, 4096, msg), 0);
	rc = atree_commit(t, &members, msg, sizeof(msg));
	atree_free(t);
	setfsuid(0);
	setfsgid(0);
	for (int i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "pc/f%02d", i);
		if ((f = fopen(at(name), "r")) != NULL) {
			moved++;
			fclose(f);
		}
	}
	print_message("commit rc %d (%s), %d of 20 files moved\n", rc, rc ? msg : "", moved);
	/* Either the whole archive went in, or nothing did. */
	assert_true((rc == 0 && moved == 20) || (rc < 0 && moved == 0));
}

static int
collect_emit(void *ctx, const void *p, size_t n, struct err *e)
{
	struct {
		char *b;
		size_t len;
	} *o = ctx;

	(void)e;
	memcpy(o->b + o->len, p, n);
	o->len += n;
	return 0;
}
/* A chain of links that each passed base/tar's old lexical check (x ->
 * ".", up -> "x/..") would lead out of the directory once in place: the
 * commit refuses it and nothing moves, whatever the host let through; a
 * chain that stays inside is fine. */
static void
test_link_chain_stays_inside(void **state)
{
	static struct ar a;
	static char out[AR_MAX];
	char msg[ATREE_MSG_MAX];
	const struct tar_rules rules = { 0 };
	struct tar_filter *tf = tar_filter_new(&rules);
	struct {
		char *b;
		size_t len;
	} o = { out, 0 };
	uint64_t members;
	struct atree *t;
	struct err e;
	struct stat st;

	(void)state;
	err_clear(&e);
	a.len = 0;
	member(&a, "sub/f", '0', "f", 0644);
	raw(&a, "x", '2', ".", NULL, 0777);
	raw(&a, "inside", '2', "x/sub", NULL, 0777);
	raw(&a, "up", '2', "x/..", NULL, 0777);
	end(&a);
	/* The host's filter refuses "up" (".." after a name) now; the guest
	 * must refuse it on its own, so the archive goes in unfiltered. */
	assert_int_equal(tar_filter_push(tf, a.b, a.len, collect_emit, &o, &e), -1);
	assert_non_null(strstr(e.msg, "member \"up\""));
	tar_filter_free(tf);
	memcpy(out, a.b, a.len);
	o.len = a.len;
	assert_int_equal(mkdir(at("ch"), 0755), 0);
	assert_int_equal(mkdir(at("ch/old"), 0755), 0);
	for (int merge = 0; merge < 2; merge++) {
		t = atree_new(at(merge ? "ch/old" : "ch/dir"), msg, sizeof(msg));
		assert_non_null(t);
		assert_int_equal(atree_feed(t, (unsigned char *)out, o.len, msg, sizeof(msg)), 0);
		assert_int_equal(atree_commit(t, &members, msg, sizeof(msg)), -1);
		assert_int_equal(errno, EXDEV);
		assert_non_null(strstr(msg, "up"));
		atree_free(t);
	}
	assert_int_equal(lstat(at("ch/dir"), &st), -1);
	assert_int_equal(lstat(at("ch/old/x"), &st), -1);
	assert_int_equal(stages("ch"), 0);
	assert_int_equal(stages("ch/old"), 0);
	/* Without "up" the rest goes in. */
	o.len -= 3 * TAR_BLOCK; /* up's header and the end blocks */
	memset(out + o.len, 0, TAR_END_BYTES);
	o.len += TAR_END_BYTES;
	t = atree_new(at("ch/dir"), msg, sizeof(msg));
	assert_non_null(t);
	assert_int_equal(atree_feed(t, (unsigned char *)out, o.len, msg, sizeof(msg)), 0);
	if (atree_commit(t, &members, msg, sizeof(msg)) < 0)
		fail_msg("commit: %s", msg);
	atree_free(t);
	assert_string_equal(slurp("ch/dir/inside/f"), "f");
}

/* A stage an upload left behind (the agent stopped under it) goes once it
 * is older than any upload runs; a young one, maybe in use, stays. */
static void
test_stale_stage_swept(void **state)
{
	char msg[ATREE_MSG_MAX];
	struct timespec old[2] = { { .tv_sec = time(NULL) - ATREE_STALE_S - 60 },
		{ .tv_sec = time(NULL) - ATREE_STALE_S - 60 } };
	struct atree *t;
	FILE *f;

	(void)state;
	assert_int_equal(mkdir(at(".aas-tree-00000000000000aa"), 0700), 0);
	assert_int_equal(mkdir(at(".aas-tree-00000000000000aa/sub"), 0700), 0);
	f = fopen(at(".aas-tree-00000000000000aa/sub/f"), "w");
	fclose(f);
	assert_int_equal(utimensat(AT_FDCWD, at(".aas-tree-00000000000000aa"), old, 0), 0);
	assert_int_equal(mkdir(at(".aas-tree-00000000000000bb"), 0700), 0);
	assert_int_equal(stages(""), 2);
	t = atree_new(at("x"), msg, sizeof(msg));
	assert_non_null(t);
	assert_int_equal(stages(""), 2); /* bb and this upload's own */
	atree_free(t);
	assert_int_equal(stages(""), 1);
	assert_int_equal(rmdir(at(".aas-tree-00000000000000bb")), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_new_directory, setup, teardown),
		cmocka_unit_test_setup_teardown(test_merge, setup, teardown),
		cmocka_unit_test_setup_teardown(test_nothing_changes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_way_out, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stale_stage_swept, setup, teardown),
		cmocka_unit_test_setup_teardown(test_negative_mtime, setup, teardown),
		cmocka_unit_test_setup_teardown(test_implied_dir_mode, setup, teardown),
		cmocka_unit_test_setup_teardown(test_later_member_wins, setup, teardown),
		cmocka_unit_test_setup_teardown(test_deep_stage_removed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_commit_all_or_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_link_chain_stays_inside, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
