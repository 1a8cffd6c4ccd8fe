/* agent_tree.c - a checked tar stream unpacked beneath a stage directory,
 * and the stage made and removed (vmm/image/agent_tree.h); moving it into
 * place is agent_tree_commit.c's. Part of the static aas-agent; plain C
 * over Linux system calls, no other state. */
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
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "vmm/image/agent_tree_int.h"
#include "vmm/image/gsys.h"

/* Rounds of removing a stage: link chains (at most 40 links deep in a
 * name) stack ATREE_MAX_DEPTH levels each. */
#define ATREE_MAX_ROUNDS 64
#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE 1
#endif

int
atree_fail(struct atree *t, int err, char *msg, size_t mn, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	gsys_vcut(msg, mn, fmt, ap);
	va_end(ap);
	if (t != NULL)
		t->st = ST_FAILED;
	errno = err;
	return -1;
}

void
atree_close_fd(int *fd)
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
	atree_close_fd(&t->cache_fd);
	t->cache_fd = fd;
	memcpy(t->cache_dir, dir, dn + 1);
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

/* A pax header: 'x' records for the next member, 'g' skipped. */
static int
begin_pax(struct atree *t, char type, unsigned long long size, char *msg, size_t mn)
{
	if (size > ATREE_MAX_PAX)
		return atree_fail(t, EINVAL, msg, mn, "tree: a pax header over %d bytes",
		    ATREE_MAX_PAX);
	t->pax_len = (size_t)size;
	t->pax_have = 0;
	t->st = type == 'x' ? ST_PAX : ST_SKIP;
	if (type == 'x' && size == 0)
		t->st = t->pad ? ST_SKIP : ST_HEADER;
	return 0;
}

/* A member as its header and the pax records before it describe it. */
struct member {
	char name[NAME_MAX_BYTES + 1];
	char link[NAME_MAX_BYTES + 1];
	unsigned mode;
	long long mtime;
	int pfd;          /* the directory it goes in, beneath the stage (borrowed) */
	const char *last; /* its name there */
};

/* The name (pax path, else ustar prefix/name; no trailing '/') and the
 * link target (pax linkpath, else the header's) of the member in t->blk;
 * the pax records are used up. 0, or -1 when one does not fit. */
static int
member_names(struct atree *t, struct member *m)
{
	const unsigned char *h = t->blk;
	size_t n, pn = strnlen((const char *)h + 345, 155), nn = strnlen((const char *)h, 100);
	int rc;

	if (t->pax_path[0] != '\0')
		rc = gsys_fmt(m->name, sizeof(m->name), "%s", t->pax_path);
	else if (pn > 0 && memcmp(h + 257, "ustar", 5) == 0)
		rc = gsys_fmt(m->name, sizeof(m->name), "%.*s/%.*s", (int)pn, h + 345, (int)nn, h);
	else
		rc = gsys_fmt(m->name, sizeof(m->name), "%.*s", (int)nn, h);
	if (t->pax_link[0] != '\0')
		rc |= gsys_fmt(m->link, sizeof(m->link), "%s", t->pax_link);
	else
		rc |= gsys_fmt(m->link, sizeof(m->link), "%.*s",
		    (int)strnlen((const char *)h + 157, 100), h + 157);
	t->pax_path[0] = t->pax_link[0] = '\0';
	n = strlen(m->name);
	while (n > 1 && m->name[n - 1] == '/')
		m->name[--n] = '\0';
	return rc;
}

/* A file, created new; an earlier member of the same name is replaced.
 * Its data comes next. */
static int
make_file(struct atree *t, const struct member *m, char *msg, size_t mn)
{
	const int oflags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;

	t->fd = openat(m->pfd, m->last, oflags, m->mode);
	if (t->fd < 0 && errno == EEXIST && make_room(m->pfd, m->last) == 0)
		t->fd = openat(m->pfd, m->last, oflags, m->mode);
	if (t->fd < 0)
		return atree_fail(t, errno, msg, mn, "tree: %.200s: %s", m->name, strerror(errno));
	t->mtime = m->mtime;
	t->st = ST_DATA;
	return 0;
}

/* A directory. A later member wins: a file or link of this name goes; a
 * directory made for an earlier member's name takes this mode. */
static int
make_dir(struct atree *t, const struct member *m, char *msg, size_t mn)
{
	struct stat st;
	int rc = mkdirat(m->pfd, m->last, m->mode | 0700);

	if (rc < 0 && errno == EEXIST && fstatat(m->pfd, m->last, &st, AT_SYMLINK_NOFOLLOW) == 0)
		rc = S_ISDIR(st.st_mode)           ? fchmodat(m->pfd, m->last, m->mode | 0700, 0) :
		    make_room(m->pfd, m->last) < 0 ? -1 :
						     mkdirat(m->pfd, m->last, m->mode | 0700);
	if (rc < 0)
		return atree_fail(t, errno, msg, mn, "tree: %.200s: %s", m->name, strerror(errno));
	t->st = ST_SKIP; /* a directory's data, if any, is skipped */
	return 0;
}

/* A symbolic link (checked against the stage at the commit). */
static int
make_symlink(struct atree *t, const struct member *m, char *msg, size_t mn)
{
	const char *link = m->link;

	if (link[0] == '\0' || make_room(m->pfd, m->last) < 0 ||
	    symlinkat(link, m->pfd, m->last) < 0)
		return atree_fail(t, link[0] ? errno : EINVAL, msg, mn, "tree: %.200s: %s", m->name,
		    link[0] ? strerror(errno) : "empty link");
	t->st = ST_SKIP;
	return 0;
}

/* A hard link to an earlier member, found beneath the stage. */
static int
make_hardlink(struct atree *t, const struct member *m, char *msg, size_t mn)
{
	char tdir[NAME_MAX_BYTES + 1];
	const char *link = m->link;
	const char *ts = strrchr(link, '/');
	const char *tlast = ts ? ts + 1 : link;
	size_t tn = ts ? (size_t)(ts - link) : 0;
	int tfd;

	if (!name_ok(link) || make_room(m->pfd, m->last) < 0)
		return atree_fail(t, name_ok(link) ? errno : EINVAL, msg, mn, "tree: %.200s: %s",
		    m->name, name_ok(link) ? strerror(errno) : "bad link target");
	memcpy(tdir, link, tn);
	tdir[tn] = '\0';
	tfd = open_beneath(t->stage_fd, tdir);
	if (tfd < 0 || linkat(tfd, tlast, m->pfd, m->last, 0) < 0) {
		int err = errno;
		if (tfd >= 0)
			close(tfd);
		return atree_fail(t, err, msg, mn, "tree: %.200s: %s", m->name, strerror(err));
	}
	close(tfd);
	t->st = ST_SKIP;
	return 0;
}

/* The header in t->blk begins a member: it is made beneath the stage (a
 * file then takes the data that follows). */
static int
begin_member(struct atree *t, char *msg, size_t mn)
{
	const unsigned char *h = t->blk;
	char type = (char)h[156];
	int bad = 0, rc;
	long long ssize = num(h + 124, 12, &bad);
	unsigned long long size = ssize < 0 ? 0 : (unsigned long long)ssize;
	struct member m;

	m.mode = (unsigned)num(h + 100, 8, &bad) & MODE_MASK;
	m.mtime = num(h + 136, 12, &bad);
	if (bad || ssize < 0)
		return atree_fail(t, EINVAL, msg, mn, "tree: a bad number in a header");
	t->left = size;
	t->pad = (BLK - size % BLK) % BLK;
	if (type == 'x' || type == 'g')
		return begin_pax(t, type, size, msg, mn);
	if (member_names(t, &m) < 0 || !name_ok(m.name))
		return atree_fail(t, EINVAL, msg, mn, "tree: bad name \"%.200s\"", m.name);
	t->members++;
	if ((m.pfd = parent_of(t, m.name, &m.last)) < 0)
		return atree_fail(t, errno, msg, mn, "tree: %.200s: %s", m.name, strerror(errno));
	switch (type) {
	case '0':
	case '\0':
	case '7':
		rc = make_file(t, &m, msg, mn);
		break;
	case '5':
		rc = make_dir(t, &m, msg, mn);
		break;
	case '2':
		rc = make_symlink(t, &m, msg, mn);
		break;
	case '1':
		rc = make_hardlink(t, &m, msg, mn);
		break;
	default:
		return atree_fail(t, EINVAL, msg, mn, "tree: %.200s: member type '%c' not accepted",
		    m.name, type);
	}
	if (rc < 0)
		return -1;
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
	return rc < 0 ? atree_fail(t, err, msg, mn, "tree: %s", strerror(err)) : 0;
}

int
atree_feed(struct atree *t, const unsigned char *p, size_t n, char *msg, size_t mn)
{
	while (n > 0) {
		size_t k;

		switch (t->st) {
		case ST_FAILED:
			return atree_fail(t, EINVAL, msg, mn, "tree: an earlier error");
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
					return atree_fail(t, w < 0 ? errno : EIO, msg, mn,
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
					return atree_fail(t, EINVAL, msg, mn,
					    "tree: a bad pax header");
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

/* ---- the stage ---- */

/* The deepest existing ancestor of an absolute path (itself included). */
static int
ancestor(const char *dir, char *out, size_t n)
{
	struct stat st;

	if (gsys_fmt(out, n, "%s", dir) < 0)
		return (errno = ENAMETOOLONG, -1);
	for (;;) {
		if (stat(out, &st) == 0)
			return S_ISDIR(st.st_mode) ? 0 : (errno = ENOTDIR, -1);
		if (errno != ENOENT)
			return -1;
		char *s = strrchr(out, '/');
		if (s == NULL || s == out) {
			memcpy(out, "/", sizeof("/")); /* n > 1: dir, which fit, is not "" */
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
		atree_fail(NULL, EINVAL, msg, mn, "tree: not an absolute path");
		return NULL;
	}
	if (ancestor(dir, anc, sizeof(anc)) < 0) {
		atree_fail(NULL, errno, msg, mn, "%s", strerror(errno));
		return NULL;
	}
	sweep_stale(anc);
	t = calloc(1, sizeof(*t));
	if (t == NULL || (t->pax = malloc(ATREE_MAX_PAX)) == NULL) {
		free(t);
		atree_fail(NULL, ENOMEM, msg, mn, "tree: out of memory");
		return NULL;
	}
	t->fd = t->cache_fd = t->stage_fd = -1;
	memcpy(t->dir, dir, n + 1);
	while (t->dir[1] != '\0' && t->dir[strlen(t->dir) - 1] == '/')
		t->dir[strlen(t->dir) - 1] = '\0';
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		memcpy(rnd, &t, sizeof(rnd) < sizeof(t) ? sizeof(rnd) : sizeof(t));
	if (gsys_fmt(t->stage, sizeof(t->stage), "%s/.aas-tree-%02x%02x%02x%02x%02x%02x%02x%02x",
		strcmp(anc, "/") == 0 ? "" : anc, rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5],
		rnd[6], rnd[7]) < 0)
		errno = ENAMETOOLONG;
	else if (mkdir(t->stage, 0700) == 0)
		t->stage_fd = open(t->stage, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (t->stage_fd < 0) {
		int err = errno;

		atree_fail(NULL, err, msg, mn, "%s", strerror(err));
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
			if (gsys_fmt(up, sizeof(up), ".aas-deep-%lu", seq++) < 0)
				break;
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
	atree_close_fd(&t->fd);
	atree_close_fd(&t->cache_fd);
	/* Each round takes ATREE_MAX_DEPTH levels off what is deeper. */
	if (t->stage[0] != '\0' && t->stage_fd >= 0)
		for (int round = 0; round < ATREE_MAX_ROUNDS; round++)
			if (!remove_all(AT_FDCWD, t->stage, 0, t->stage_fd))
				break;
	atree_close_fd(&t->stage_fd);
	free(t->pax);
	free(t);
}
