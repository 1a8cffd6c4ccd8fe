/* br_local.c - local files for the sync tools. Writes go through
 * directory descriptors opened with O_NOFOLLOW from the root down, so a
 * link inside the tree can never redirect a write outside it. */
#include "bridge/br_local.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fmt.h"

#define BR_LOCAL_MAX_DEPTH 64

void
br_warn(json_t *warnings, const char *fmt, ...)
{
	char text[600];
	va_list ap;
	size_t n = json_array_size(warnings);

	if (warnings == NULL || n > BR_MAX_WARNINGS)
		return;
	if (n == BR_MAX_WARNINGS) {
		json_array_append_new(warnings, json_string("(more warnings left out)"));
		return;
	}
	va_start(ap, fmt);
	err_ignore(fmt_vbuf(text, sizeof(text), fmt, ap)); /* a warning may be cut */
	va_end(ap);
	json_array_append_new(warnings, json_string(text));
}

static int
mkdirs(const char *path)
{
	char buf[PATH_MAX];

	if (fmt_buf(buf, sizeof(buf), "%s", path) < 0) {
		errno = ENAMETOOLONG;
		return -1;
	}
	for (char *p = buf + 1;; p++) {
		if (*p == '/' || *p == '\0') {
			char c = *p;
			*p = '\0';
			if (mkdir(buf, 0755) < 0 && errno != EEXIST)
				return -1;
			*p = c;
			if (c == '\0')
				break;
		}
	}
	return 0;
}

int
br_local_root(const char *path, int create, char *out, size_t n, struct err *e)
{
	struct stat st;
	char *real;

	if (path[0] != '/') {
		err_set_field(e, "local_path", "local_path: must be an absolute path, got '%s'",
		    path);
		return -1;
	}
	if (create && stat(path, &st) < 0 && errno == ENOENT && mkdirs(path) < 0) {
		err_set_field(e, "local_path", "local_path: cannot create %s: %s", path,
		    strerror(errno));
		return -1;
	}
	real = realpath(path, NULL);
	if (real == NULL) {
		err_set_at(e, errno == ENOENT ? ERR_NOT_FOUND : ERR_INVALID, "local_path",
		    "local_path: %s: %s", path, strerror(errno));
		return -1;
	}
	if (stat(real, &st) < 0 || !S_ISDIR(st.st_mode)) {
		err_set_field(e, "local_path", "local_path: %s is not a directory", path);
		free(real);
		return -1;
	}
	if (strlen(real) >= n) {
		err_set_field(e, "local_path", "local_path: too long");
		free(real);
		return -1;
	}
	memcpy(out, real, strlen(real) + 1);
	free(real);
	return 0;
}

/* ---- scanning ---- */

struct scan {
	const char *root;
	const struct br_excl *x;
	int follow;
	struct br_tree *t;
	json_t *warnings;
};

static int
add_entry(struct scan *s, const char *rel, char type, const struct stat *st, const char *source,
    struct err *e)
{
	struct br_entry en = {
		.rel = (char *)rel,
		.type = type,
		.size = (long long)st->st_size,
		.mtime = (long long)st->st_mtim.tv_sec,
		.mode = (unsigned)(st->st_mode & 07777),
		.source = (char *)source,
	};

	if (type == 'd')
		en.size = 0;
	return br_tree_add(s->t, &en, e);
}

/* A link met while sending: followed only when it stays inside root. */
static int
scan_link(struct scan *s, const char *full, const char *rel, struct err *e)
{
	struct stat st;
	char *real = realpath(full, NULL);
	int rc = 0;

	if (real == NULL) {
		br_warn(s->warnings, "%s: dangling symbolic link, left out", rel);
		return 0;
	}
	if (!br_path_within(s->root, real)) {
		err_set_at(e, ERR_FORBIDDEN, "local_path",
		    "local_path: %s is a symbolic link to "
		    "%s, outside %s; refusing to follow it (remove the link or exclude it)",
		    rel, real, s->root);
		rc = -1;
	} else if (stat(real, &st) < 0) {
		br_warn(s->warnings, "%s: %s, left out", rel, strerror(errno));
	} else if (S_ISREG(st.st_mode)) {
		rc = add_entry(s, rel, 'f', &st, real, e);
	} else {
		br_warn(s->warnings, "%s: symbolic link to a directory or special file, left out",
		    rel);
	}
	free(real);
	return rc;
}

static int
scan_dir(struct scan *s, const char *rel, int depth, struct err *e)
{
	char full[PATH_MAX], child[PATH_MAX], child_full[PATH_MAX];
	struct dirent *de;
	DIR *d;
	int fd, rc = -1;

	if (depth > BR_LOCAL_MAX_DEPTH) {
		err_set_field(e, "local_path", "local_path: nested deeper than %d directories",
		    BR_LOCAL_MAX_DEPTH);
		return -1;
	}
	if (*rel == '\0' ? fmt_buf(full, sizeof(full), "%s", s->root) < 0 :
			   br_path_join(s->root, rel, full, sizeof(full)) < 0) {
		err_set_field(e, "local_path", "local_path: a path is too long under %s", s->root);
		return -1;
	}
	fd = open(full, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || (d = fdopendir(fd)) == NULL) {
		err_set_field(e, "local_path", "local_path: cannot read %s: %s", full,
		    strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	while ((errno = 0, de = readdir(d)) != NULL) {
		struct stat st;
		const char *name = de->d_name;
		int r = 0;

		if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
			continue;
		if (fmt_buf(child, sizeof(child), "%s%s%s", rel, *rel ? "/" : "", name) < 0 ||
		    br_path_join(s->root, child, child_full, sizeof(child_full)) < 0) {
			err_set_field(e, "local_path", "local_path: a path is too long under %s",
			    s->root);
			goto out;
		}
		if (br_excl_match(s->x, child))
			continue;
		if (fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			br_warn(s->warnings, "%s: %s, left out", child, strerror(errno));
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			r = add_entry(s, child, 'd', &st, NULL, e);
			if (r == 0)
				r = scan_dir(s, child, depth + 1, e);
		} else if (S_ISREG(st.st_mode))
			r = add_entry(s, child, 'f', &st, NULL, e);
		else if (S_ISLNK(st.st_mode))
			r = s->follow ? scan_link(s, child_full, child, e) :
					add_entry(s, child, 'l', &st, NULL, e);
		else if (s->follow)
			br_warn(s->warnings, "%s: not a regular file, left out", child);
		else
			r = add_entry(s, child, 'o', &st, NULL, e);
		if (r < 0)
			goto out;
	}
	if (errno != 0) {
		err_set_field(e, "local_path", "local_path: cannot read %s: %s", full,
		    strerror(errno));
		goto out;
	}
	rc = 0;
out:
	closedir(d);
	return rc;
}

int
br_local_scan(const char *root, const struct br_excl *x, int follow_links, struct br_tree *t,
    json_t *warnings, struct err *e)
{
	struct scan s = { root, x, follow_links, t, warnings };

	return scan_dir(&s, "", 0, e);
}

int
br_local_open(const char *root, const struct br_entry *en, struct err *e)
{
	char full[PATH_MAX];
	const char *path = en->source;
	struct stat st;
	int fd;

	if (path == NULL) {
		if (br_path_join(root, en->rel, full, sizeof(full)) < 0) {
			err_set_field(e, "local_path", "local_path: %s: too long", en->rel);
			return -1;
		}
		path = full;
	}
	fd = open(path,
	    O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
		O_CLOEXEC); /* a FIFO put there meanwhile must not block */
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		err_set_field(e, "local_path", "local_path: cannot read %s: %s", en->rel,
		    fd < 0 ? strerror(errno) : "not a regular file");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* ---- writing ---- */

struct br_lfile {
	int dirfd;
	int fd;
	char name[NAME_MAX + 1];
	char tmp[64];
};

/* Opens the directory that holds rel's last component, walking down from
 * root without following links (making directories when `create`); the
 * last component goes to `last`. -1 with errno ENOENT when a directory is
 * missing and not to be made. */
/* Opens the directory that holds rel's last component, walking down from
 * root without following links (making directories when `create`); the
 * last component goes to `last`. -1 with errno ENOENT when a directory is
 * missing and not to be made (e left alone then). */
static int
open_parent(const char *root, const char *rel, int create, char *last, size_t lastn, struct err *e)
{
	const char *p = rel;
	int dfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC), err = 0;

	if (dfd < 0) {
		err_set_field(e, "local_path", "local_path: cannot open %s: %s", root,
		    strerror(errno));
		return -1;
	}
	for (;;) {
		const char *slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - p) : strlen(p);
		int plen = (int)(p + len - rel), nfd;
		char comp[NAME_MAX + 1];

		if (len == 0 || len > NAME_MAX ||
		    (slash == NULL && fmt_buf(last, lastn, "%.*s", (int)len, p) < 0)) {
			err_set_field(e, "local_path", "local_path: bad name %s", rel);
			err = EINVAL;
			break;
		}
		if (slash == NULL)
			return dfd;
		memcpy(comp, p, len);
		comp[len] = '\0';
		nfd = openat(dfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (nfd < 0 && errno == ENOENT && create &&
		    (mkdirat(dfd, comp, 0755) == 0 || errno == EEXIST))
			nfd = openat(dfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		err = errno;
		if (nfd < 0) {
			if (err == ELOOP || err == ENOTDIR)
				err_set_at(e, ERR_FORBIDDEN, "local_path",
				    "local_path: %.*s is a "
				    "symbolic link or a file; refusing to write through it",
				    plen, rel);
			else if (err != ENOENT || create)
				err_set_field(e, "local_path", "local_path: cannot open %.*s: %s",
				    plen, rel, strerror(err));
			break;
		}
		close(dfd);
		dfd = nfd;
		p = slash + 1;
	}
	close(dfd);
	errno = err;
	return -1;
}

struct br_lfile *
br_lfile_open(const char *root, const char *rel, struct err *e)
{
	static atomic_uint counter;
	struct br_lfile *f = calloc(1, sizeof(*f));

	if (f == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	f->fd = -1;
	f->dirfd = open_parent(root, rel, 1, f->name, sizeof(f->name), e);
	if (f->dirfd < 0) {
		free(f);
		return NULL;
	}
	if (fmt_buf(f->tmp, sizeof(f->tmp), ".aas-sync-%ld-%u.tmp", (long)getpid(),
		atomic_fetch_add(&counter, 1)) < 0)
		errno = ENAMETOOLONG;
	else
		f->fd = openat(f->dirfd, f->tmp,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (f->fd < 0) {
		err_set_field(e, "local_path", "local_path: cannot write beside %s: %s", rel,
		    strerror(errno));
		close(f->dirfd);
		free(f);
		return NULL;
	}
	return f;
}

int
br_lfile_write(struct br_lfile *f, const void *p, size_t n, struct err *e)
{
	const char *c = p;

	while (n > 0) {
		ssize_t w = write(f->fd, c, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			err_set_field(e, "local_path", "local_path: writing %s: %s", f->name,
			    strerror(errno));
			return -1;
		}
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

void
br_lfile_abort(struct br_lfile *f)
{
	if (f == NULL)
		return;
	if (f->fd >= 0)
		close(f->fd);
	unlinkat(f->dirfd, f->tmp, 0);
	close(f->dirfd);
	free(f);
}

int
br_lfile_commit(struct br_lfile *f, unsigned mode, long long mtime, struct err *e)
{
	struct timespec ts[2] = { { 0, UTIME_NOW }, { (time_t)mtime, 0 } };
	int fd = f->fd;

	f->fd = -1;
	if (fchmod(fd, (mode_t)(mode & 0777)) < 0 || futimens(fd, ts) < 0) {
		err_set_field(e, "local_path", "local_path: %s: %s", f->name, strerror(errno));
		close(fd);
	} else if (close(fd) < 0) {
		err_set_field(e, "local_path", "local_path: writing %s: %s", f->name,
		    strerror(errno));
	} else if (renameat(f->dirfd, f->tmp, f->dirfd, f->name) < 0) {
		/* (rename replaces a link at the name itself, never its target) */
		err_set_at(e, errno == EISDIR ? ERR_CONFLICT : ERR_INVALID, "local_path",
		    "local_path: cannot put %s in place: %s", f->name, strerror(errno));
	} else {
		close(f->dirfd);
		free(f);
		return 0;
	}
	br_lfile_abort(f);
	return -1;
}

int
br_local_mkdirs(const char *root, const char *rel, struct err *e)
{
	char last[NAME_MAX + 1];
	int dfd = open_parent(root, rel, 1, last, sizeof(last), e);
	int rc = 0;

	if (dfd < 0)
		return -1;
	if (mkdirat(dfd, last, 0755) < 0 && errno != EEXIST) {
		err_set_field(e, "local_path", "local_path: cannot make %s: %s", rel,
		    strerror(errno));
		rc = -1;
	}
	close(dfd);
	return rc;
}

int
br_local_remove(const char *root, const char *rel, int is_dir, struct err *e)
{
	char last[NAME_MAX + 1];
	int dfd = open_parent(root, rel, 0, last, sizeof(last), e);
	int rc = 1;

	if (dfd < 0)
		return errno == ENOENT ? 0 : -1;
	if (unlinkat(dfd, last, is_dir ? AT_REMOVEDIR : 0) < 0) {
		if (errno == ENOENT || (is_dir && (errno == ENOTEMPTY || errno == EEXIST))) {
			rc = 0;
		} else {
			err_set_field(e, "local_path", "local_path: cannot delete %s: %s", rel,
			    strerror(errno));
			rc = -1;
		}
	}
	close(dfd);
	return rc;
}
