/* agent_tree_commit.c - the stage of a finished archive checked and moved
 * into place (vmm/image/agent_tree.h, atree_commit): links that lead out
 * refuse it, conflicts are found before anything moves. Part of the static
 * aas-agent, and of aasd's tests. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "vmm/image/agent_tree_int.h"
#include "vmm/image/gsys.h"

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
		return atree_fail(NULL, errno, msg, mn, "tree: %s", strerror(errno));
	}
	if (depth > ATREE_MAX_DEPTH) {
		closedir(d);
		return atree_fail(NULL, ELOOP, msg, mn, "tree: deeper than %d levels",
		    ATREE_MAX_DEPTH);
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
		return atree_fail(NULL, errno, msg, mn, "tree: %s", strerror(errno));
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
		atree_fail(NULL, ELOOP, msg, mn, "tree: deeper than %d levels", ATREE_MAX_DEPTH);
		return NULL;
	}
	dup_fd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
	if (d == NULL) {
		int err = errno;

		if (dup_fd >= 0)
			close(dup_fd);
		atree_fail(NULL, err, msg, mn, "tree: %s", strerror(err));
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
		if (gsys_fmt(rel + n, cap - n, "%s%s", n ? "/" : "", ent->d_name) < 0) {
			rc = atree_fail(NULL, ENAMETOOLONG, msg, mn, "tree: a name too long");
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
				rc = atree_fail(NULL, EXDEV, msg, mn,
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
			rc = atree_fail(NULL, errno, msg, mn, "tree: %s", strerror(errno));
			break;
		}
		have = fstatat(dfd, ent->d_name, &ds, AT_SYMLINK_NOFOLLOW) == 0;
		if (!have && errno != ENOENT) {
			rc = atree_fail(NULL, errno, msg, mn, "tree: %.200s/%.200s: %s", path,
			    ent->d_name, strerror(errno));
			break;
		}
		if (have && S_ISDIR(ss.st_mode) != S_ISDIR(ds.st_mode)) {
			rc = atree_fail(NULL, S_ISDIR(ss.st_mode) ? ENOTDIR : EISDIR, msg, mn,
			    "tree: %.200s/%.200s is a %s in the directory and a %s in the archive",
			    path, ent->d_name, S_ISDIR(ds.st_mode) ? "directory" : "file",
			    S_ISDIR(ss.st_mode) ? "directory" : "file");
			break;
		}
		if (!move && !(S_ISDIR(ss.st_mode) && have) && can_move(sfd, dfd, have, &ds) < 0) {
			rc = atree_fail(NULL, errno, msg, mn, "tree: %.200s/%.200s: %s", path,
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
				rc = atree_fail(NULL, errno, msg, mn, "tree: %.200s/%.200s: %s",
				    path, ent->d_name, strerror(errno));
			} else {
				/* path names the place in messages only: a cut one will do */
				gsys_cut(path + n, plen - n, "/%s", ent->d_name);
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
			rc = atree_fail(NULL, errno, msg, mn, "tree: %.200s/%.200s: %s", path,
			    ent->d_name, strerror(errno));
		}
	}
	if (rc == 0 && errno != 0)
		rc = atree_fail(NULL, errno, msg, mn, "tree: %s", strerror(errno));
	closedir(d);
	return rc;
}

/* mkdir -p of an absolute path. */
static int
make_dirs(const char *path)
{
	char p[PATH_MAX];

	if (gsys_fmt(p, sizeof(p), "%s", path) < 0) {
		errno = ENAMETOOLONG;
		return -1;
	}
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
		return atree_fail(t, EINVAL, msg, mn, "tree: an earlier error");
	if (t->st != ST_HEADER && t->st != ST_END)
		return atree_fail(t, EINVAL, msg, mn, "tree: the archive ended inside a member");
	if (t->have != 0)
		return atree_fail(t, EINVAL, msg, mn, "tree: the archive ended inside a header");
	atree_close_fd(&t->cache_fd);
	path[0] = '\0';
	if (links_inside(t->stage_fd, t->stage_fd, path, sizeof(path), 0, msg, mn) < 0) {
		t->st = ST_FAILED;
		return -1;
	}
	if (stat(t->dir, &st) < 0 && errno == ENOENT) {
		/* A new directory: the stage becomes it. */
		char parent[PATH_MAX];
		char *s;

		memcpy(parent, t->dir, sizeof(parent));
		s = strrchr(parent, '/');
		if (s != NULL && s != parent)
			*s = '\0';
		if (settle(t->stage_fd, 0, msg, mn) < 0) {
			t->st = ST_FAILED;
			return -1;
		}
		if ((s != parent && make_dirs(parent) < 0) || rename(t->stage, t->dir) < 0)
			return atree_fail(t, errno, msg, mn, "tree: %.300s: %s", t->dir,
			    strerror(errno));
		(void)chmod(t->dir, 0755);
		t->stage[0] = '\0';
		return 0;
	}
	dfd = open(t->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return atree_fail(t, errno, msg, mn, "tree: %.300s: %s", t->dir, strerror(errno));
	memcpy(path, t->dir, sizeof(path));
	rc = walk(t->stage_fd, dfd, 0, 0, path, sizeof(path), msg, mn);
	if (rc == 0)
		rc = walk(t->stage_fd, dfd, 1, 0, path, sizeof(path), msg, mn);
	close(dfd);
	if (rc < 0)
		t->st = ST_FAILED;
	return rc;
}
