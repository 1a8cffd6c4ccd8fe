/* agent_tree.c - a checked tar stream unpacked beneath a stage directory
 * and moved into place (vmm/image/agent_tree.h). Part of the static
 * aas-agent; plain C over Linux system calls, no other state. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "vmm/image/agent_tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define BLK 512
#define NAME_MAX_BYTES 4095
#define MODE_MASK 0755 /* permissions with umask 022 applied, no set-id */
/* A directory only implied by a member's name: the sticky bit, which no
 * member's mode keeps (MODE_MASK), marks it until the commit. Such a
 * directory never changes the mode of the target's own. */
#define IMPLIED_MODE (S_ISVTX | 0755)
/* Rounds of removing a stage: link chains (at most 40 links deep in a
 * name) stack ATREE_MAX_DEPTH levels each. */
#define ATREE_MAX_ROUNDS 64
#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE 1
#endif

enum st { ST_HEADER, ST_DATA, ST_PAX, ST_SKIP, ST_END, ST_FAILED };

struct atree {
	char dir[PATH_MAX];   /* the target */
	char stage[PATH_MAX]; /* the stage, beside it */
	int stage_fd;
	enum st st;
	unsigned char blk[BLK];
	size_t have;     /* bytes in blk */
	uint64_t left;   /* data bytes of the member still to come */
	uint64_t pad;    /* padding after them */
	int fd;          /* the file being written, or -1 */
	long long mtime; /* of that file */
	char *pax;       /* a pax header's data (ATREE_MAX_PAX) */
	size_t pax_len, pax_have;
	char pax_path[NAME_MAX_BYTES + 1], pax_link[NAME_MAX_BYTES + 1];
	char cache_dir[NAME_MAX_BYTES + 1]; /* the directory part last opened */
	int cache_fd;
	uint64_t members;
};

static int
fail(struct atree *t, int err, char *msg, size_t mn, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, mn, fmt, ap);
	va_end(ap);
	if (t != NULL)
		t->st = ST_FAILED;
	errno = err;
	return -1;
}

static void
close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* Opens a relative directory beneath the stage; the kernel refuses any
 * way out (.., absolute links, links leading above). */
static int
open_beneath(int root, const char *rel)
{
	struct open_how how = {
		.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
	};

	if (rel[0] == '\0')
		return (int)syscall(SYS_openat2, root, ".", &how, sizeof(how));
	return (int)syscall(SYS_openat2, root, rel, &how, sizeof(how));
}

/* Checks a clean relative name: no empty, "." or ".." component, not too
 * deep. The last '/' of a directory's name is gone by now. */
static int
name_ok(const char *name)
{
	int depth = 0;

	if (name[0] == '\0' || name[0] == '/')
		return 0;
	for (const char *p = name; *p;) {
		const char *s = strchr(p, '/');
		size_t n = s ? (size_t)(s - p) : strlen(p);

		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return 0;
		if (++depth > ATREE_MAX_DEPTH)
			return 0;
		p += n + (s != NULL);
	}
	return 1;
}

/* The directory `dir` beneath the stage, made when missing (mkdir -p,
 * every level opened beneath the stage). A new fd, or -1. */
static int
open_dir_made(struct atree *t, char *dir)
{
	int fd = open_beneath(t->stage_fd, dir), cur;

	if (fd >= 0 || errno != ENOENT)
		return fd;
	cur = open_beneath(t->stage_fd, "");
	for (char *p = dir; cur >= 0; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char c = *p, *leaf;
		*p = '\0';
		leaf = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
		fd = open_beneath(t->stage_fd, dir);
		if (fd < 0 && errno == ENOENT &&
		    (mkdirat(cur, leaf, 0700) == 0 ? fchmodat(cur, leaf, IMPLIED_MODE, 0) == 0 :
						     errno == EEXIST))
			fd = open_beneath(t->stage_fd, dir);
		*p = c;
		close(cur);
		cur = fd;
		if (c == '\0')
			break;
	}
	return cur;
}

/* The directory holding `name` beneath the stage (made when missing), and
 * its last component in *last. A borrowed fd (the cache), or -1. */
static int
parent_of(struct atree *t, const char *name, const char **last)
{
	const char *slash = strrchr(name, '/');
	char dir[NAME_MAX_BYTES + 1];
	size_t dn = slash ? (size_t)(slash - name) : 0;
	int fd;

	*last = slash ? slash + 1 : name;
	memcpy(dir, name, dn);
	dir[dn] = '\0';
	if (t->cache_fd >= 0 && strcmp(dir, t->cache_dir) == 0)
		return t->cache_fd;
	if ((fd = open_dir_made(t, dir)) < 0)
		return -1;
	close_fd(&t->cache_fd);
	t->cache_fd = fd;
	snprintf(t->cache_dir, sizeof(t->cache_dir), "%s", dir);
	return fd;
}

/* A number field: octal, or base-256 with the GNU marker 0x80 (positive)
 * or 0xff (negative, two's complement: times before 1970), as base/tar
 * reads and writes them. */
static long long
num(const unsigned char *p, size_t n, int *bad)
{
	unsigned long long v = 0;
	size_t i = 0;

	if (p[0] == 0x80 || p[0] == 0xff) {
		v = p[0] == 0xff ? ~0ull : 0;
		for (i = 1; i < n; i++) {
			if (p[0] == 0x80 ? (v >> 55) != 0 : (v >> 55) != 0x1ff)
				*bad = 1;
			v = (v << 8) | p[i];
		}
		return (long long)v;
	}
	if (p[0] & 0x80) {
		*bad = 1;
		return 0;
	}
	while (i < n && p[i] == ' ')
		i++;
	for (; i < n && p[i] >= '0' && p[i] <= '7'; i++) {
		if (v >> 60)
			*bad = 1;
		v = v * 8 + (unsigned long long)(p[i] - '0');
	}
	if (i < n && p[i] != '\0' && p[i] != ' ')
		*bad = 1;
	return (long long)v;
}

/* A pax header's path and linkpath records (the rest is ignored). */
static int
pax_parse(struct atree *t)
{
	size_t off = 0;

	while (off < t->pax_len) {
		char *rec = t->pax + off, *sp, *eq;
		size_t len = 0, i = 0;

		while (off + i < t->pax_len && rec[i] >= '0' && rec[i] <= '9' && i < 8)
			len = len * 10 + (size_t)(rec[i++] - '0');
		if (i == 0 || len <= i || len > t->pax_len - off || rec[len - 1] != '\n')
			return -1;
		sp = rec + i;
		if (*sp != ' ')
			return -1;
		eq = memchr(sp, '=', len - i);
		if (eq == NULL)
			return -1;
		size_t klen = (size_t)(eq - sp - 1), vlen = (size_t)(rec + len - 1 - eq - 1);
		char *dst = NULL;

		if (klen == 4 && memcmp(sp + 1, "path", 4) == 0)
			dst = t->pax_path;
		else if (klen == 8 && memcmp(sp + 1, "linkpath", 8) == 0)
			dst = t->pax_link;
		if (dst != NULL) {
			if (vlen > NAME_MAX_BYTES || memchr(eq + 1, '\0', vlen) != NULL)
				return -1;
			memcpy(dst, eq + 1, vlen);
			dst[vlen] = '\0';
		}
		off += len;
	}
	return 0;
}

/* Replaces an entry of the same name (a later member wins, as in tar);
 * a directory stays and is an error for anything but a directory. */
static int
make_room(int pfd, const char *last)
{
	struct stat st;

	if (fstatat(pfd, last, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -1;
	if (S_ISDIR(st.st_mode)) {
		errno = EISDIR;
		return -1;
	}
	return unlinkat(pfd, last, 0);
}

static int
begin_member(struct atree *t, char *msg, size_t mn)
{
	const unsigned char *h = t->blk;
	char name[NAME_MAX_BYTES + 1], link[NAME_MAX_BYTES + 1];
	char type = (char)h[156];
	int bad = 0, pfd;
	long long ssize = num(h + 124, 12, &bad);
	unsigned long long size = ssize < 0 ? 0 : (unsigned long long)ssize;
	unsigned mode = (unsigned)num(h + 100, 8, &bad) & MODE_MASK;
	long long mtime = num(h + 136, 12, &bad);
	const char *last;
	size_t n;

	if (bad || ssize < 0)
		return fail(t, EINVAL, msg, mn, "tree: a bad number in a header");
	t->left = size;
	t->pad = (BLK - size % BLK) % BLK;
	if (type == 'x' || type == 'g') {
		if (size > ATREE_MAX_PAX)
			return fail(t, EINVAL, msg, mn, "tree: a pax header over %d bytes",
			    ATREE_MAX_PAX);
		t->pax_len = (size_t)size;
		t->pax_have = 0;
		t->st = type == 'x' ? ST_PAX : ST_SKIP;
		if (type == 'x' && size == 0)
			t->st = t->pad ? ST_SKIP : ST_HEADER;
		return 0;
	}
	/* The name: pax path, else ustar prefix/name. */
	if (t->pax_path[0] != '\0') {
		snprintf(name, sizeof(name), "%s", t->pax_path);
	} else {
		size_t pn = strnlen((const char *)h + 345, 155);
		size_t nn = strnlen((const char *)h, 100);

		if (pn > 0 && memcmp(h + 257, "ustar", 5) == 0)
			snprintf(name, sizeof(name), "%.*s/%.*s", (int)pn, h + 345, (int)nn, h);
		else
			snprintf(name, sizeof(name), "%.*s", (int)nn, h);
	}
	if (t->pax_link[0] != '\0')
		snprintf(link, sizeof(link), "%s", t->pax_link);
	else
		snprintf(link, sizeof(link), "%.*s", (int)strnlen((const char *)h + 157, 100),
		    h + 157);
	t->pax_path[0] = t->pax_link[0] = '\0';
	n = strlen(name);
	while (n > 1 && name[n - 1] == '/')
		name[--n] = '\0';
	if (!name_ok(name))
		return fail(t, EINVAL, msg, mn, "tree: bad name \"%.200s\"", name);
	t->members++;
	if ((pfd = parent_of(t, name, &last)) < 0)
		return fail(t, errno, msg, mn, "tree: %.200s: %s", name, strerror(errno));
	switch (type) {
	case '0':
	case '\0':
	case '7':
		/* Created new; an earlier member of the same name is replaced. */
		t->fd = openat(pfd, last, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		    mode);
		if (t->fd < 0 && errno == EEXIST && make_room(pfd, last) == 0)
			t->fd = openat(pfd, last,
			    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
		if (t->fd < 0)
			return fail(t, errno, msg, mn, "tree: %.200s: %s", name, strerror(errno));
		t->mtime = mtime;
		t->st = ST_DATA;
		break;
	case '5': {
		/* A later member wins: a file or link of this name goes; a
		 * directory made for an earlier member's name takes this mode. */
		struct stat st;
		int rc = mkdirat(pfd, last, mode | 0700);

		if (rc < 0 && errno == EEXIST && fstatat(pfd, last, &st, AT_SYMLINK_NOFOLLOW) == 0)
			rc = S_ISDIR(st.st_mode)     ? fchmodat(pfd, last, mode | 0700, 0) :
			    make_room(pfd, last) < 0 ? -1 :
						       mkdirat(pfd, last, mode | 0700);
		if (rc < 0)
			return fail(t, errno, msg, mn, "tree: %.200s: %s", name, strerror(errno));
		t->st = ST_SKIP; /* a directory's data, if any, is skipped */
		break;
	}
	case '2':
		if (link[0] == '\0' || make_room(pfd, last) < 0 || symlinkat(link, pfd, last) < 0)
			return fail(t, link[0] ? errno : EINVAL, msg, mn, "tree: %.200s: %s", name,
			    link[0] ? strerror(errno) : "empty link");
		t->st = ST_SKIP;
		break;
	case '1': {
		/* A hard link to an earlier member, found beneath the stage. */
		char tdir[NAME_MAX_BYTES + 1];
		const char *ts = strrchr(link, '/');
		const char *tlast = ts ? ts + 1 : link;
		int tfd;

		if (!name_ok(link) || make_room(pfd, last) < 0)
			return fail(t, name_ok(link) ? errno : EINVAL, msg, mn, "tree: %.200s: %s",
			    name, name_ok(link) ? strerror(errno) : "bad link target");
		snprintf(tdir, sizeof(tdir), "%.*s", ts ? (int)(ts - link) : 0, link);
		tfd = open_beneath(t->stage_fd, tdir);
		if (tfd < 0 || linkat(tfd, tlast, pfd, last, 0) < 0) {
			int err = errno;
			if (tfd >= 0)
				close(tfd);
			return fail(t, err, msg, mn, "tree: %.200s: %s", name, strerror(err));
		}
		close(tfd);
		t->st = ST_SKIP;
		break;
	}
	default:
		return fail(t, EINVAL, msg, mn, "tree: %.200s: member type '%c' not accepted", name,
		    type);
	}
	if (t->st == ST_SKIP && t->left == 0 && t->pad == 0)
		t->st = ST_HEADER;
	return 0;
}

static int
end_file(struct atree *t, char *msg, size_t mn)
{
	struct timespec ts[2] = { { .tv_sec = t->mtime }, { .tv_sec = t->mtime } };

	int rc = futimens(t->fd, ts), err = errno;

	if (close(t->fd) < 0 && rc == 0) {
		rc = -1;
		err = errno;
	}
	t->fd = -1;
	return rc < 0 ? fail(t, err, msg, mn, "tree: %s", strerror(err)) : 0;
}

int
atree_feed(struct atree *t, const unsigned char *p, size_t n, char *msg, size_t mn)
{
	while (n > 0) {
		size_t k;

		switch (t->st) {
		case ST_FAILED:
			return fail(t, EINVAL, msg, mn, "tree: an earlier error");
		case ST_END:
			return 0; /* padding after the end */
		case ST_HEADER:
			k = BLK - t->have < n ? BLK - t->have : n;
			memcpy(t->blk + t->have, p, k);
			t->have += k;
			p += k;
			n -= k;
			if (t->have < BLK)
				break;
			t->have = 0;
			{
				size_t i = 0;
				while (i < BLK && t->blk[i] == 0)
					i++;
				if (i == BLK) {
					t->st = ST_END;
					break;
				}
			}
			if (begin_member(t, msg, mn) < 0)
				return -1;
			if (t->st == ST_DATA && t->left == 0) {
				if (end_file(t, msg, mn) < 0)
					return -1;
				t->st = t->pad ? ST_SKIP : ST_HEADER;
			}
			break;
		case ST_DATA:
			k = t->left < n ? (size_t)t->left : n;
			while (k > 0) {
				ssize_t w = write(t->fd, p, k);

				if (w < 0 && errno == EINTR)
					continue;
				if (w <= 0)
					return fail(t, w < 0 ? errno : EIO, msg, mn,
					    "tree: write: %s", strerror(w < 0 ? errno : EIO));
				p += w;
				n -= (size_t)w;
				k -= (size_t)w;
				t->left -= (uint64_t)w;
			}
			if (t->left == 0) {
				if (end_file(t, msg, mn) < 0)
					return -1;
				t->st = t->pad ? ST_SKIP : ST_HEADER;
			}
			break;
		case ST_PAX:
			k = t->pax_len - t->pax_have < n ? t->pax_len - t->pax_have : n;
			memcpy(t->pax + t->pax_have, p, k);
			t->pax_have += k;
			p += k;
			n -= k;
			if (t->pax_have == t->pax_len) {
				if (pax_parse(t) < 0)
					return fail(t, EINVAL, msg, mn, "tree: a bad pax header");
				t->left = 0;
				t->st = t->pad ? ST_SKIP : ST_HEADER;
			}
			break;
		case ST_SKIP:
			k = t->left + t->pad < n ? (size_t)(t->left + t->pad) : n;
			p += k;
			n -= k;
			if (k >= t->left) {
				t->pad -= k - t->left;
				t->left = 0;
			} else {
				t->left -= k;
			}
			if (t->left == 0 && t->pad == 0)
				t->st = ST_HEADER;
			break;
		}
	}
	return 0;
}

/* ---- the stage into place ---- */

/* The implied directories beneath fd (a directory of the stage about to
 * move whole) get the plain mode. */
static int
settle(int fd, int depth, char *msg, size_t mn)
{
	int dup_fd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
	struct dirent *ent;
	struct stat st;
	int rc = 0;

	if (d == NULL) {
		if (dup_fd >= 0)
			close(dup_fd);
		return fail(NULL, errno, msg, mn, "tree: %s", strerror(errno));
	}
	if (depth > ATREE_MAX_DEPTH) {
		closedir(d);
		return fail(NULL, ELOOP, msg, mn, "tree: deeper than %d levels", ATREE_MAX_DEPTH);
	}
	if (fstat(fd, &st) == 0 && (st.st_mode & S_ISVTX))
		(void)fchmod(fd, MODE_MASK);
	while (rc == 0 && (ent = readdir(d)) != NULL) {
		int sub;

		if (strcmp(ent->d_name, ".") == 0 || strcmp(ent->d_name, "..") == 0)
			continue;
		sub = openat(fd, ent->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0)
			continue; /* not a directory */
		rc = settle(sub, depth + 1, msg, mn);
		close(sub);
	}
	closedir(d);
	return rc;
}

static int
settle_at(int at, const char *name, char *msg, size_t mn)
{
	int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int rc;

	if (fd < 0)
		return fail(NULL, errno, msg, mn, "tree: %s", strerror(errno));
	rc = settle(fd, 0, msg, mn);
	close(fd);
	return rc;
}

/* A directory stream on its own copy of fd for a walk at `depth`; NULL
 * with errno and msg (ELOOP past ATREE_MAX_DEPTH). */
static DIR *
walk_open(int fd, int depth, char *msg, size_t mn)
{
	int dup_fd;
	DIR *d;

	if (depth > ATREE_MAX_DEPTH) {
		fail(NULL, ELOOP, msg, mn, "tree: deeper than %d levels", ATREE_MAX_DEPTH);
		return NULL;
	}
	dup_fd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
	if (d == NULL) {
		int err = errno;

		if (dup_fd >= 0)
			close(dup_fd);
		fail(NULL, err, msg, mn, "tree: %s", strerror(err));
		return NULL;
	}
	return d;
}

/* Every link beneath the stage's directory fd (at rel, "" for the stage)
 * resolves beneath the stage: base/tar checks each link alone, and a
 * chain (x -> ".", up -> "x/..") that passes it would, once moved into
 * place, lead out of the target. A dangling link is left as it is. */
static int
links_inside(int root, int fd, char *rel, size_t cap, int depth, char *msg, size_t mn)
{
	DIR *d = walk_open(fd, depth, msg, mn);
	size_t n = strlen(rel);
	struct dirent *ent;
	int rc = 0;

	if (d == NULL)
		return -1;
	while (rc == 0 && (ent = readdir(d)) != NULL) {
		struct stat st;

		if (strcmp(ent->d_name, ".") == 0 || strcmp(ent->d_name, "..") == 0)
			continue;
		if (fstatat(fd, ent->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    (!S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode)))
			continue;
		if (snprintf(rel + n, cap - n, "%s%s", n ? "/" : "", ent->d_name) >=
		    (int)(cap - n)) {
			rc = fail(NULL, ENAMETOOLONG, msg, mn, "tree: a name too long");
			break;
		}
		if (S_ISLNK(st.st_mode)) {
			struct open_how how = {
				.flags = O_PATH | O_CLOEXEC,
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
			};
			int lfd = (int)syscall(SYS_openat2, root, rel, &how, sizeof(how));

			if (lfd >= 0)
				close(lfd);
			else if (errno == EXDEV)
				rc = fail(NULL, EXDEV, msg, mn,
				    "tree: %.200s: a chain of links leads out of the directory",
				    rel);
		} else {
			int sub = openat(fd, ent->d_name,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (sub >= 0) {
				rc = links_inside(root, sub, rel, cap, depth + 1, msg, mn);
				close(sub);
			}
		}
		rel[n] = '\0';
	}
	closedir(d);
	return rc;
}

/* Whether an entry of the stage's directory sfd can be renamed into the
 * target's dfd (replacing `ds` when have): the check pass looks for what
 * would make the move fail half way (another file system, no write
 * access, a sticky directory, a read-only mount). 0, or -1 with errno. */
static int
can_move(int sfd, int dfd, int have, const struct stat *ds)
{
	struct stat a, b;
	uid_t me = (uid_t)setfsuid((uid_t)-1);

	if (fstat(sfd, &a) < 0 || fstat(dfd, &b) < 0)
		return -1;
	if (a.st_dev != b.st_dev) {
		errno = EXDEV;
		return -1;
	}
	if (syscall(SYS_faccessat2, dfd, ".", W_OK | X_OK, AT_EACCESS) < 0 && errno != ENOSYS)
		return -1;
	if (have && (b.st_mode & S_ISVTX) && me != 0 && ds->st_uid != me && b.st_uid != me) {
		errno = EPERM;
		return -1;
	}
	return 0;
}

/* Depth first over the stage's directory sfd against the target's dfd:
 * check (no change) or move. */
static int
walk(int sfd, int dfd, int move, int depth, char *path, size_t plen, char *msg, size_t mn)
{
	DIR *d = walk_open(sfd, depth, msg, mn);
	struct dirent *ent;
	int rc = 0;

	if (d == NULL)
		return -1;
	while (rc == 0 && (errno = 0, ent = readdir(d)) != NULL) {
		struct stat ss, ds;
		int have;

		if (strcmp(ent->d_name, ".") == 0 || strcmp(ent->d_name, "..") == 0)
			continue;
		if (fstatat(sfd, ent->d_name, &ss, AT_SYMLINK_NOFOLLOW) < 0) {
			rc = fail(NULL, errno, msg, mn, "tree: %s", strerror(errno));
			break;
		}
		have = fstatat(dfd, ent->d_name, &ds, AT_SYMLINK_NOFOLLOW) == 0;
		if (!have && errno != ENOENT) {
			rc = fail(NULL, errno, msg, mn, "tree: %.200s/%.200s: %s", path,
			    ent->d_name, strerror(errno));
			break;
		}
		if (have && S_ISDIR(ss.st_mode) != S_ISDIR(ds.st_mode)) {
			rc = fail(NULL, S_ISDIR(ss.st_mode) ? ENOTDIR : EISDIR, msg, mn,
			    "tree: %.200s/%.200s is a %s in the directory and a %s in the archive",
			    path, ent->d_name, S_ISDIR(ds.st_mode) ? "directory" : "file",
			    S_ISDIR(ss.st_mode) ? "directory" : "file");
			break;
		}
		if (!move && !(S_ISDIR(ss.st_mode) && have) && can_move(sfd, dfd, have, &ds) < 0) {
			rc = fail(NULL, errno, msg, mn, "tree: %.200s/%.200s: %s", path,
			    ent->d_name, strerror(errno));
			break;
		}
		if (S_ISDIR(ss.st_mode) && have) {
			int s2 = openat(sfd, ent->d_name,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			int d2 = openat(dfd, ent->d_name,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			size_t n = strlen(path);

			if (s2 < 0 || d2 < 0) {
				rc = fail(NULL, errno, msg, mn, "tree: %.200s/%.200s: %s", path,
				    ent->d_name, strerror(errno));
			} else {
				snprintf(path + n, plen - n, "/%s", ent->d_name);
				rc = walk(s2, d2, move, depth + 1, path, plen, msg, mn);
				path[n] = '\0';
				if (rc == 0 && move && !(ss.st_mode & S_ISVTX))
					(void)fchmod(d2, ss.st_mode & 07777);
			}
			if (s2 >= 0)
				close(s2);
			if (d2 >= 0)
				close(d2);
		} else if (move && S_ISDIR(ss.st_mode) &&
		    (rc = settle_at(sfd, ent->d_name, msg, mn)) < 0) {
			break;
		} else if (move && renameat(sfd, ent->d_name, dfd, ent->d_name) < 0) {
			/* A file replaces a file; a whole new directory goes at once. */
			rc = fail(NULL, errno, msg, mn, "tree: %.200s/%.200s: %s", path,
			    ent->d_name, strerror(errno));
		}
	}
	if (rc == 0 && errno != 0)
		rc = fail(NULL, errno, msg, mn, "tree: %s", strerror(errno));
	closedir(d);
	return rc;
}

/* mkdir -p of an absolute path. */
static int
make_dirs(const char *path)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s", path);
	for (char *s = p + 1;; s++) {
		if (*s != '/' && *s != '\0')
			continue;
		char c = *s;
		*s = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return -1;
		*s = c;
		if (c == '\0')
			return 0;
	}
}

int
atree_commit(struct atree *t, uint64_t *members, char *msg, size_t mn)
{
	char path[PATH_MAX];
	struct stat st;
	int dfd, rc;

	*members = t->members;
	if (t->st == ST_FAILED)
		return fail(t, EINVAL, msg, mn, "tree: an earlier error");
	if (t->st != ST_HEADER && t->st != ST_END)
		return fail(t, EINVAL, msg, mn, "tree: the archive ended inside a member");
	if (t->have != 0)
		return fail(t, EINVAL, msg, mn, "tree: the archive ended inside a header");
	close_fd(&t->cache_fd);
	path[0] = '\0';
	if (links_inside(t->stage_fd, t->stage_fd, path, sizeof(path), 0, msg, mn) < 0) {
		t->st = ST_FAILED;
		return -1;
	}
	if (stat(t->dir, &st) < 0 && errno == ENOENT) {
		/* A new directory: the stage becomes it. */
		char parent[PATH_MAX];
		char *s;

		snprintf(parent, sizeof(parent), "%s", t->dir);
		s = strrchr(parent, '/');
		if (s != NULL && s != parent)
			*s = '\0';
		if (settle(t->stage_fd, 0, msg, mn) < 0) {
			t->st = ST_FAILED;
			return -1;
		}
		if ((s != parent && make_dirs(parent) < 0) || rename(t->stage, t->dir) < 0)
			return fail(t, errno, msg, mn, "tree: %.300s: %s", t->dir, strerror(errno));
		(void)chmod(t->dir, 0755);
		t->stage[0] = '\0';
		return 0;
	}
	dfd = open(t->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return fail(t, errno, msg, mn, "tree: %.300s: %s", t->dir, strerror(errno));
	snprintf(path, sizeof(path), "%s", t->dir);
	rc = walk(t->stage_fd, dfd, 0, 0, path, sizeof(path), msg, mn);
	if (rc == 0)
		rc = walk(t->stage_fd, dfd, 1, 0, path, sizeof(path), msg, mn);
	close(dfd);
	if (rc < 0)
		t->st = ST_FAILED;
	return rc;
}

/* ---- the stage ---- */

/* The deepest existing ancestor of an absolute path (itself included). */
static int
ancestor(const char *dir, char *out, size_t n)
{
	struct stat st;

	snprintf(out, n, "%s", dir);
	for (;;) {
		if (stat(out, &st) == 0)
			return S_ISDIR(st.st_mode) ? 0 : (errno = ENOTDIR, -1);
		if (errno != ENOENT)
			return -1;
		char *s = strrchr(out, '/');
		if (s == NULL || s == out) {
			snprintf(out, n, "/");
			return 0;
		}
		*s = '\0';
	}
}

static int remove_all(int at, const char *name, int depth, int top);

/* Stages of uploads that never ended (the agent or the VM stopped under
 * them) in `anc`: older than any upload may run (aasd's deadline for the
 * largest is about 70 minutes), they go. */
static void
sweep_stale(const char *anc)
{
	int afd = open(anc, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	time_t now = time(NULL);
	struct dirent *ent;
	DIR *d;

	if (afd < 0)
		return;
	if ((d = fdopendir(afd)) == NULL) {
		close(afd);
		return;
	}
	while ((ent = readdir(d)) != NULL) {
		struct stat st;
		int sfd;

		if (strncmp(ent->d_name, ".aas-tree-", 10) != 0 || strlen(ent->d_name) != 26 ||
		    fstatat(dirfd(d), ent->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(st.st_mode) || now - st.st_mtime < ATREE_STALE_S)
			continue;
		sfd = openat(dirfd(d), ent->d_name,
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sfd < 0)
			continue;
		for (int round = 0; round < ATREE_MAX_ROUNDS; round++)
			if (!remove_all(dirfd(d), ent->d_name, 0, sfd))
				break;
		close(sfd);
	}
	closedir(d);
}

struct atree *
atree_new(const char *dir, char *msg, size_t mn)
{
	struct atree *t;
	char anc[PATH_MAX];
	unsigned char rnd[8] = { 0 };
	size_t n = strlen(dir);

	if (dir[0] != '/' || n >= sizeof(t->dir)) {
		fail(NULL, EINVAL, msg, mn, "tree: not an absolute path");
		return NULL;
	}
	if (ancestor(dir, anc, sizeof(anc)) < 0) {
		fail(NULL, errno, msg, mn, "%s", strerror(errno));
		return NULL;
	}
	sweep_stale(anc);
	t = calloc(1, sizeof(*t));
	if (t == NULL || (t->pax = malloc(ATREE_MAX_PAX)) == NULL) {
		free(t);
		fail(NULL, ENOMEM, msg, mn, "tree: out of memory");
		return NULL;
	}
	t->fd = t->cache_fd = t->stage_fd = -1;
	snprintf(t->dir, sizeof(t->dir), "%s", dir);
	while (t->dir[1] != '\0' && t->dir[strlen(t->dir) - 1] == '/')
		t->dir[strlen(t->dir) - 1] = '\0';
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		memcpy(rnd, &t, sizeof(rnd) < sizeof(t) ? sizeof(rnd) : sizeof(t));
	if (snprintf(t->stage, sizeof(t->stage), "%s/.aas-tree-%02x%02x%02x%02x%02x%02x%02x%02x",
		strcmp(anc, "/") == 0 ? "" : anc, rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5],
		rnd[6], rnd[7]) >= (int)sizeof(t->stage))
		errno = ENAMETOOLONG;
	else if (mkdir(t->stage, 0700) == 0)
		t->stage_fd = open(t->stage, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (t->stage_fd < 0) {
		int err = errno;

		fail(NULL, err, msg, mn, "%s", strerror(err));
		(void)rmdir(t->stage);
		free(t->pax);
		free(t);
		errno = err;
		return NULL;
	}
	return t;
}

/* rm -rf of name in dirfd, never following links. A directory deeper
 * than ATREE_MAX_DEPTH (links in the archive let the stage grow deeper
 * than any one name) moves up into `top`, the stage, for a later round;
 * 1 when something moved so. */
static int
remove_all(int at, const char *name, int depth, int top)
{
	int fd, moved = 0;
	DIR *d;
	struct dirent *ent;

	if (unlinkat(at, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (depth > ATREE_MAX_DEPTH) {
		static unsigned long seq;
		char up[40];

		for (int i = 0; i < 16; i++) {
			snprintf(up, sizeof(up), ".aas-deep-%lu", seq++);
			if (syscall(SYS_renameat2, at, name, top, up, RENAME_NOREPLACE) == 0)
				return 1;
			if (errno != EEXIST)
				break;
		}
		return 0;
	}
	fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || (d = fdopendir(fd)) == NULL) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	while ((ent = readdir(d)) != NULL)
		if (strcmp(ent->d_name, ".") != 0 && strcmp(ent->d_name, "..") != 0)
			moved |= remove_all(dirfd(d), ent->d_name, depth + 1, top);
	closedir(d);
	(void)unlinkat(at, name, AT_REMOVEDIR);
	return moved;
}

void
atree_free(struct atree *t)
{
	if (t == NULL)
		return;
	close_fd(&t->fd);
	close_fd(&t->cache_fd);
	/* Each round takes ATREE_MAX_DEPTH levels off what is deeper. */
	if (t->stage[0] != '\0' && t->stage_fd >= 0)
		for (int round = 0; round < ATREE_MAX_ROUNDS; round++)
			if (!remove_all(AT_FDCWD, t->stage, 0, t->stage_fd))
				break;
	close_fd(&t->stage_fd);
	free(t->pax);
	free(t);
}
