/* agent_files.c - the agent's file requests: PUT (a file, or a tree to
 * unpack), GET, STAT and LIST, each file system call made with the
 * sandbox user's rights (agent_int.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vmm/image/agent_int.h"
#include "vmm/image/agent_tree.h"
#include "vmm/image/gsys.h"

/* The capability to override permissions goes with fsuid 0. */
void
ag_fs_as(int root)
{
	if (root)
		return;
	if (setgroups(1, &ag.gid) < 0)
		ag_say("setgroups: %s", strerror(errno));
	setfsgid(ag.gid);
	setfsuid(ag.uid);
}

void
ag_fs_root(void)
{
	setfsuid(0);
	setfsgid(0);
	if (setgroups(0, NULL) < 0)
		ag_say("setgroups: %s", strerror(errno));
}

int
ag_field_abs_path(const struct ap_field *f, char *out, size_t n)
{
	return f == NULL || ap_str(f, out, n) < 0 || out[0] != '/' ? -1 : 0;
}

static uint32_t
ftype(mode_t m)
{
	if (S_ISREG(m))
		return AP_FT_FILE;
	if (S_ISDIR(m))
		return AP_FT_DIR;
	if (S_ISLNK(m))
		return AP_FT_LINK;
	return AP_FT_OTHER;
}

static void
put_stat(struct ap_out *o, const struct stat *st)
{
	ap_put_u32(o, AP_TAG_TYPE, ftype(st->st_mode));
	ap_put_u64(o, AP_TAG_SIZE, (uint64_t)st->st_size);
	ap_put_u32(o, AP_TAG_MODE, (uint32_t)(st->st_mode & 07777));
	ap_put_u64(o, AP_TAG_MTIME,
	    (uint64_t)st->st_mtim.tv_sec * 1000000000ull + (uint64_t)st->st_mtim.tv_nsec);
}

/* The PUT or GET on c ended: RESULT{SIZE}, and the channel goes. */
static void
end_with_size(struct ag_chan *c)
{
	struct ap_out o = { ag_scratch, 0, 0 };

	ap_put_u64(&o, AP_TAG_SIZE, c->size);
	ag_send_frame(AP_T_RESULT, 0, c->id, o.buf, o.len);
	ag_chan_free(c);
}

/* The request's PATH: absolute, or a RESULT is sent and -1 returned. */
static int
req_path(uint32_t id, size_t nf, char *path, size_t n)
{
	if (ag_field_abs_path(ap_find(ag_fields, nf, AP_TAG_PATH), path, n) < 0) {
		ag_send_result(id, EINVAL, "PATH must be an absolute path");
		return -1;
	}
	return 0;
}

/* mkdir -p of path's parent directories. */
static int
make_parents(const char *path)
{
	char p[AP_MAX_STRING + 1];

	if (gsys_fmt(p, sizeof(p), "%s", path) < 0) {
		errno = ENAMETOOLONG;
		return -1;
	}
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return -1;
		*s = '/';
	}
	return 0;
}

/* A PUT of a tar stream to unpack into the directory `path`. */
static void
put_tree(uint32_t id, int root, const char *path)
{
	char msg[ATREE_MSG_MAX];
	struct atree *t;
	struct ag_chan *c = ag_chan_new(id, AG_CH_PUT);

	if (c == NULL) {
		ag_send_result(id, EAGAIN, "too many channels (%d)", AG_MAX_CHANNELS);
		return;
	}
	c->root = root;
	ag_fs_as(root);
	t = atree_new(path, msg, sizeof(msg));
	ag_fs_root();
	if (t == NULL) {
		ag_send_result(id, errno, "%s", msg);
		ag_chan_free(c);
		return;
	}
	c->tree = t;
	c->size = 0;
}

static void
tree_data(struct ag_chan *c, uint16_t flags, const unsigned char *p, size_t n)
{
	char msg[ATREE_MSG_MAX];
	uint64_t members = 0;
	int rc;

	ag_fs_as(c->root);
	rc = atree_feed(c->tree, p, n, msg, sizeof(msg));
	if (rc == 0 && (flags & AP_F_FIN))
		rc = atree_commit(c->tree, &members, msg, sizeof(msg));
	ag_fs_root();
	c->size += n;
	if (rc < 0) {
		ag_send_result(c->id, errno ? errno : EIO, "%s", msg);
		ag_chan_free(c);
		return;
	}
	if (flags & AP_F_FIN)
		end_with_size(c);
}

void
ag_put(uint32_t id, uint16_t flags, size_t nf)
{
	int root = (flags & AP_F_ROOT) != 0;
	char path[AP_MAX_STRING + 1];
	const struct ap_field *fm = ap_find(ag_fields, nf, AP_TAG_MODE);
	const struct ap_field *fo = ap_find(ag_fields, nf, AP_TAG_OFFSET);
	mode_t mode = fm != NULL ? (mode_t)(ap_u32(fm) & (root ? 07777 : 0777)) : 0644;
	int oflags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
	struct stat st;
	struct ag_chan *c;
	int fd, err = 0;
	const char *what = "open";

	if (req_path(id, nf, path, sizeof(path)) < 0)
		return;
	if (flags & AP_F_TREE) {
		put_tree(id, root, path);
		return;
	}
	if (fo != NULL && ap_u64(fo) > (uint64_t)LLONG_MAX) {
		ag_send_result(id, EINVAL, "offset out of range");
		return;
	}
	if (flags & AP_F_TRUNC)
		oflags |= O_TRUNC;
	if (flags & AP_F_EXCL)
		oflags |= O_EXCL;
	c = ag_chan_new(id, AG_CH_PUT);
	if (c == NULL) {
		ag_send_result(id, EAGAIN, "too many channels (%d)", AG_MAX_CHANNELS);
		return;
	}
	ag_fs_as(root);
	if ((flags & AP_F_PARENTS) && make_parents(path) < 0) {
		err = errno;
		what = "make parents";
		fd = -1;
	} else {
		fd = open(path, oflags, mode);
		if (fd < 0)
			err = errno;
	}
	if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
		err = EINVAL;
		what = "not a regular file";
		ag_close_fd(&fd);
	}
	if (fd >= 0 && fm != NULL && (st.st_mode & 07777) != mode && fchmod(fd, mode) < 0) {
		err = errno;
		what = "chmod";
		ag_close_fd(&fd);
	}
	ag_fs_root();
	if (fd < 0) {
		ag_send_result(id, err, "%s %.300s: %s", what, path, strerror(err));
		ag_chan_free(c);
		return;
	}
	c->file_fd = fd;
	c->pos = fo != NULL ? ap_u64(fo) : 0;
	c->size = 0;
}

void
ag_put_data(struct ag_chan *c, uint16_t flags, const unsigned char *p, size_t n)
{
	if (c->tree != NULL) {
		tree_data(c, flags, p, n);
		return;
	}
	while (n > 0) {
		ssize_t w = pwrite(c->file_fd, p, n, (off_t)c->pos);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			int err = w < 0 ? errno : EIO;

			ag_send_result(c->id, err, "write: %s", strerror(err));
			ag_chan_free(c);
			return;
		}
		p += w;
		n -= (size_t)w;
		c->pos += (uint64_t)w;
		c->size += (uint64_t)w;
	}
	if (flags & AP_F_FIN)
		end_with_size(c);
}

void
ag_get(uint32_t id, uint16_t flags, size_t nf)
{
	char path[AP_MAX_STRING + 1];
	const struct ap_field *fo = ap_find(ag_fields, nf, AP_TAG_OFFSET);
	const struct ap_field *fl = ap_find(ag_fields, nf, AP_TAG_LENGTH);
	struct stat st;
	struct ag_chan *c;
	int fd, err = 0;

	if (req_path(id, nf, path, sizeof(path)) < 0)
		return;
	ag_fs_as(flags & AP_F_ROOT);
	fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		err = errno;
	ag_fs_root();
	if (fd < 0) {
		ag_send_result(id, err, "open %.300s: %s", path, strerror(err));
		return;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		err = EINVAL;
		if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode))
			err = EISDIR;
		ag_send_result(id, err, "%.300s: not a regular file", path);
		close(fd);
		return;
	}
	c = ag_chan_new(id, AG_CH_GET);
	if (c == NULL) {
		ag_send_result(id, EAGAIN, "too many channels (%d)", AG_MAX_CHANNELS);
		close(fd);
		return;
	}
	c->file_fd = fd;
	c->size = (uint64_t)st.st_size;
	c->pos = fo != NULL ? ap_u64(fo) : 0;
	c->left = fl != NULL ? ap_u64(fl) : 0;
	c->to_end = c->left == 0;
}

int
ag_get_pump(struct ag_chan *c)
{
	size_t want = AP_MAX_PAYLOAD;
	unsigned char *dst;
	ssize_t r;

	if (c->window == 0 || ag_out_queued() >= AG_OUT_SOFT)
		return 0;
	if (want > c->window)
		want = (size_t)c->window;
	if (!c->to_end && want > c->left)
		want = (size_t)c->left;
	if (c->pos > (uint64_t)LLONG_MAX)
		want = 0;
	dst = want > 0 ? ag_out_room(AP_HDR_SIZE + want) : NULL;
	if (want > 0 && dst == NULL)
		return 0;
	r = want > 0 ? pread(c->file_fd, dst + AP_HDR_SIZE, want, (off_t)c->pos) : 0;
	if (r < 0 && errno == EINTR)
		return 1;
	if (r < 0) {
		int err = errno;

		ag_send_result(c->id, err, "read: %s", strerror(err));
		ag_chan_free(c);
		return 1;
	}
	if (r == 0) {
		end_with_size(c);
		return 1;
	}
	{
		struct ap_hdr h = { (uint32_t)r, AP_T_DATA, 0, c->id };

		ap_hdr_put(dst, &h);
	}
	ag_out_add(AP_HDR_SIZE + (size_t)r);
	c->window -= (uint64_t)r;
	c->pos += (uint64_t)r;
	if (!c->to_end)
		c->left -= (uint64_t)r;
	if (!c->to_end && c->left == 0)
		end_with_size(c);
	return 1;
}

void
ag_stat(uint32_t id, uint16_t flags, size_t nf)
{
	char path[AP_MAX_STRING + 1];
	struct ap_out o = { ag_scratch, 0, 0 };
	struct stat st;
	int r, err;

	if (req_path(id, nf, path, sizeof(path)) < 0)
		return;
	ag_fs_as(flags & AP_F_ROOT);
	r = lstat(path, &st);
	err = errno;
	ag_fs_root();
	if (r < 0) {
		ag_send_result(id, err, "stat %.300s: %s", path, strerror(err));
		return;
	}
	put_stat(&o, &st);
	ap_put_u32(&o, AP_TAG_UID, (uint32_t)st.st_uid);
	ap_put_u32(&o, AP_TAG_GID, (uint32_t)st.st_gid);
	ag_send_frame(AP_T_RESULT, 0, id, o.buf, o.len);
}

void
ag_list(uint32_t id, uint16_t flags, size_t nf)
{
	char path[AP_MAX_STRING + 1];
	struct ag_chan *c;
	DIR *d;
	int err;

	if (req_path(id, nf, path, sizeof(path)) < 0)
		return;
	ag_fs_as(flags & AP_F_ROOT);
	d = opendir(path);
	err = errno;
	ag_fs_root();
	if (d == NULL) {
		ag_send_result(id, err, "opendir %.300s: %s", path, strerror(err));
		return;
	}
	c = ag_chan_new(id, AG_CH_LIST);
	if (c == NULL) {
		ag_send_result(id, EAGAIN, "too many channels (%d)", AG_MAX_CHANNELS);
		closedir(d);
		return;
	}
	c->dir = d;
	c->root = (flags & AP_F_ROOT) != 0;
}

int
ag_list_pump(struct ag_chan *c)
{
	struct ap_out o = { ag_scratch, 0, 0 };
	struct dirent *e;
	struct stat st;
	long here;
	int r;

	if (ag_out_queued() >= AG_OUT_SOFT)
		return 0;
	here = telldir(c->dir);
	errno = 0;
	e = readdir(c->dir);
	if (e == NULL) {
		if (errno != 0)
			ag_send_result(c->id, errno, "readdir: %s", strerror(errno));
		else
			ag_send_frame(AP_T_RESULT, 0, c->id, NULL, 0);
		ag_chan_free(c);
		return 1;
	}
	if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
		return 1;
	ag_fs_as(c->root);
	r = fstatat(dirfd(c->dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW);
	ag_fs_root();
	if (r < 0)
		return 1; /* gone since readdir */
	ap_put_str(&o, AP_TAG_NAME, e->d_name);
	put_stat(&o, &st);
	if (o.len > c->window) {
		seekdir(c->dir, here); /* again once aasd grants more */
		return 0;
	}
	c->window -= o.len;
	ag_send_frame(AP_T_ENTRY, 0, c->id, o.buf, o.len);
	return 1;
}
