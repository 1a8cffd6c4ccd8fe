/* oomwatch.c - VMs stopped by their memory cgroup's limit (oomwatch.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "vmm/oomwatch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fmt.h"
#include "base/log.h"
#include "base/num.h"

#define OW_ROOT_MAX 256
#define OW_PATH_MAX 512                             /* a cgroup's path */
#define OW_DIR_MAX (OW_ROOT_MAX + OW_PATH_MAX + 64) /* with the mount point */
#define OW_TAG_STOP 0
#define OW_TAG_INOTIFY 1
#define OW_TAG_FIRST 2 /* v1 entries: OW_TAG_FIRST + index */

struct ow_entry {
	char name[OOMWATCH_NAME_MAX];
	int used;
	int efd, ofd; /* v1: the eventfd and memory.oom_control */
	int wd;       /* v2: the inotify watch on memory.events */
	char events[OW_DIR_MAX + 32];
	int oom;
};

struct oomwatch {
	char root[OW_ROOT_MAX];
	int epfd, ifd, stopfd;
	pthread_t thread;
	int started;
	pthread_mutex_t lock; /* entries */
	struct ow_entry e[OOMWATCH_MAX];
};

int
oomwatch_cgroup_of(const char *text, char *path, size_t n)
{
	const char *v2 = NULL;

	for (const char *line = text; line && *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		const char *c1 = memchr(line, ':', len);
		const char *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line)) : NULL;

		if (c2 != NULL) {
			size_t ctl = (size_t)(c2 - c1 - 1), plen = len - (size_t)(c2 + 1 - line);
			int is_memory = 0;

			/* v1 lists controllers comma-separated: "4:memory:/x". */
			for (const char *p = c1 + 1; p < c2;) {
				const char *comma = memchr(p, ',', (size_t)(c2 - p));
				size_t w = comma ? (size_t)(comma - p) : (size_t)(c2 - p);

				is_memory |= w == 6 && memcmp(p, "memory", 6) == 0;
				p += w + (comma != NULL);
			}
			if (is_memory || (ctl == 0 && v2 == NULL)) {
				if (plen == 0 || plen >= n || c2[1] != '/')
					return 0;
				memcpy(path, c2 + 1, plen);
				path[plen] = '\0';
				if (is_memory)
					return 1;
				v2 = path;
			}
		}
		line = end ? end + 1 : NULL;
	}
	return v2 != NULL ? 2 : 0;
}

long long
oomwatch_count(const char *text, const char *key)
{
	size_t k = strlen(key);

	for (const char *line = text; line && *line;) {
		const char *end = strchr(line, '\n');

		if (strncmp(line, key, k) == 0 && line[k] == ' ') {
			char num[24];
			size_t len = end ? (size_t)(end - line) : strlen(line);
			long long v;

			if (len - k - 1 >= sizeof(num))
				return -1;
			memcpy(num, line + k + 1, len - k - 1);
			num[len - k - 1] = '\0';
			return num_parse_ll(num, &v) == 0 && v >= 0 ? v : -1;
		}
		line = end ? end + 1 : NULL;
	}
	return -1;
}

/* At most n - 1 bytes of the file at `path`, NUL-terminated: their count,
 * or -1 when it cannot be opened or read or is empty. */
static ssize_t
read_text(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t r = fd >= 0 ? read(fd, buf, n - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (r <= 0)
		return -1;
	buf[r] = '\0';
	return r;
}

pid_t
oomwatch_qemu_pid(const char *name)
{
	char want[OOMWATCH_NAME_MAX + 16], path[64];
	static char cmd[65536];
	static pthread_mutex_t cmd_lock = PTHREAD_MUTEX_INITIALIZER;
	struct dirent *de;
	pid_t found = -1;
	DIR *d;

	if (fmt_buf(want, sizeof(want), "guest=%s,", name) < 0 || (d = opendir("/proc")) == NULL)
		return -1;
	pthread_mutex_lock(&cmd_lock);
	while (found < 0 && (de = readdir(d)) != NULL) {
		long long pid;
		ssize_t r;
		const char *base;

		if (num_parse_ll(de->d_name, &pid) < 0 || pid <= 1 ||
		    fmt_buf(path, sizeof(path), "/proc/%lld/cmdline", pid) < 0 ||
		    (r = read_text(path, cmd, sizeof(cmd))) < 0)
			continue;
		base = strrchr(cmd, '/');
		base = base ? base + 1 : cmd;
		if (strncmp(base, "qemu-system", 11) == 0 &&
		    memmem(cmd, (size_t)r, want, strlen(want)) != NULL)
			found = (pid_t)pid;
	}
	pthread_mutex_unlock(&cmd_lock);
	closedir(d);
	return found;
}

static void
entry_close(struct oomwatch *w, struct ow_entry *x)
{
	if (x->efd >= 0) {
		epoll_ctl(w->epfd, EPOLL_CTL_DEL, x->efd, NULL);
		close(x->efd);
	}
	if (x->ofd >= 0)
		close(x->ofd);
	if (x->wd >= 0)
		inotify_rm_watch(w->ifd, x->wd);
	x->efd = x->ofd = x->wd = -1;
}

/* v1: the eventfd fired for an OOM or for the cgroup's removal (or both,
 * which it adds up). While memory.oom_control can still be read, it was not
 * the removal. */
static void
v1_event(struct oomwatch *w, size_t i)
{
	struct ow_entry *x = &w->e[i];
	uint64_t count = 0;
	char buf[256];
	int alive;

	if (!x->used || x->efd < 0)
		return;
	if (read(x->efd, &count, sizeof(count)) != (ssize_t)sizeof(count))
		return;
	alive = pread(x->ofd, buf, sizeof(buf) - 1, 0) > 0;
	if (count >= 2 || alive) {
		if (!x->oom)
			log_warn("vm %s: out of memory in its cgroup", x->name);
		x->oom = 1;
	}
	if (count >= 2 || !alive)
		entry_close(w, x); /* removed: nothing more will come */
}

/* v2: memory.events changed; its oom_kill count says whether the kernel
 * killed (a full group also counts "max" events without killing). */
static void
v2_events(struct oomwatch *w)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t r = read(w->ifd, buf, sizeof(buf));

	for (ssize_t off = 0; r > 0 && off < r;) {
		const struct inotify_event *ev = (const void *)(buf + off);

		for (size_t i = 0; i < OOMWATCH_MAX; i++) {
			struct ow_entry *x = &w->e[i];
			char text[512];

			if (!x->used || x->wd != ev->wd)
				continue;
			if (ev->mask & IN_IGNORED) {
				x->wd = -1;
				break;
			}
			if (read_text(x->events, text, sizeof(text)) > 0 &&
			    oomwatch_count(text, "oom_kill") > 0 && !x->oom) {
				log_warn("vm %s: out of memory in its cgroup", x->name);
				x->oom = 1;
			}
			break;
		}
		off += (ssize_t)sizeof(*ev) + ev->len;
	}
}

static void *
watch_main(void *p)
{
	struct oomwatch *w = p;

	for (;;) {
		struct epoll_event evs[16];
		int n = epoll_wait(w->epfd, evs, 16, -1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return NULL;
		pthread_mutex_lock(&w->lock);
		for (int i = 0; i < n; i++) {
			uint64_t tag = evs[i].data.u64;

			if (tag == OW_TAG_STOP) {
				pthread_mutex_unlock(&w->lock);
				return NULL;
			}
			if (tag == OW_TAG_INOTIFY)
				v2_events(w);
			else if (tag - OW_TAG_FIRST < OOMWATCH_MAX)
				v1_event(w, (size_t)(tag - OW_TAG_FIRST));
		}
		pthread_mutex_unlock(&w->lock);
	}
}

struct oomwatch *
oomwatch_new(const char *cgroup_root, struct err *e)
{
	struct oomwatch *w = calloc(1, sizeof(*w));
	struct epoll_event ev = { .events = EPOLLIN };

	if (w == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	if (fmt_err(e, "cgroup root", w->root, sizeof(w->root), "%s", cgroup_root) < 0) {
		free(w);
		return NULL;
	}
	pthread_mutex_init(&w->lock, NULL);
	for (size_t i = 0; i < OOMWATCH_MAX; i++)
		w->e[i].efd = w->e[i].ofd = w->e[i].wd = -1;
	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	w->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (w->epfd < 0 || w->ifd < 0 || w->stopfd < 0)
		goto fail;
	ev.data.u64 = OW_TAG_STOP;
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->stopfd, &ev) < 0)
		goto fail;
	ev.data.u64 = OW_TAG_INOTIFY;
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->ifd, &ev) < 0)
		goto fail;
	if (pthread_create(&w->thread, NULL, watch_main, w) != 0)
		goto fail;
	w->started = 1;
	return w;
fail:
	err_set(e, ERR_INTERNAL, "oom watch: %s", strerror(errno));
	oomwatch_free(w);
	return NULL;
}

void
oomwatch_free(struct oomwatch *w)
{
	uint64_t one = 1;

	if (w == NULL)
		return;
	if (w->started && write(w->stopfd, &one, sizeof(one)) == (ssize_t)sizeof(one))
		pthread_join(w->thread, NULL);
	for (size_t i = 0; i < OOMWATCH_MAX; i++)
		if (w->e[i].used)
			entry_close(w, &w->e[i]);
	if (w->stopfd >= 0)
		close(w->stopfd);
	if (w->ifd >= 0)
		close(w->ifd);
	if (w->epfd >= 0)
		close(w->epfd);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

/* Registers x for v1 notifications in dir (the cgroup's directory). */
static int
add_v1(struct oomwatch *w, struct ow_entry *x, size_t i, const char *dir, struct err *e)
{
	char path[OW_DIR_MAX + 32], line[32];
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = OW_TAG_FIRST + i };
	int cfd = -1, rc = -1;

	if (fmt_err(e, "cgroup path", path, sizeof(path), "%s/memory.oom_control", dir) < 0)
		return -1;
	x->ofd = open(path, O_RDONLY | O_CLOEXEC);
	x->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (fmt_err(e, "cgroup path", path, sizeof(path), "%s/cgroup.event_control", dir) < 0)
		return -1;
	cfd = open(path, O_WRONLY | O_CLOEXEC);
	if (x->ofd < 0 || x->efd < 0 || cfd < 0)
		goto out;
	if (fmt_buf(line, sizeof(line), "%d %d", x->efd, x->ofd) < 0 ||
	    write(cfd, line, strlen(line)) != (ssize_t)strlen(line) ||
	    epoll_ctl(w->epfd, EPOLL_CTL_ADD, x->efd, &ev) < 0)
		goto out;
	rc = 0;
out:
	if (rc < 0)
		err_set(e, ERR_INTERNAL, "oom watch: %s: %s", path, strerror(errno));
	if (cfd >= 0)
		close(cfd);
	return rc;
}

int
oomwatch_add(struct oomwatch *w, const char *name, pid_t pid, struct err *e)
{
	char path[64], text[2048], cg[OW_PATH_MAX], dir[OW_DIR_MAX], root[OW_ROOT_MAX];
	struct ow_entry *x = NULL;
	size_t i;
	int kind, rc = -1;

	if (strlen(name) >= OOMWATCH_NAME_MAX) {
		err_set(e, ERR_INVALID, "oom watch: name too long");
		return -1;
	}
	if (fmt_buf(path, sizeof(path), "/proc/%d/cgroup", (int)pid) < 0 ||
	    read_text(path, text, sizeof(text)) < 0) {
		err_set(e, ERR_NOT_FOUND, "oom watch: no process %d", (int)pid);
		return -1;
	}
	kind = oomwatch_cgroup_of(text, cg, sizeof(cg));
	if (kind == 0) {
		err_set(e, ERR_UNAVAILABLE, "oom watch: process %d has no memory cgroup", (int)pid);
		return -1;
	}
	memcpy(root, w->root, sizeof(root));
	pthread_mutex_lock(&w->lock);
	for (i = 0; i < OOMWATCH_MAX && w->e[i].used; i++)
		;
	if (i == OOMWATCH_MAX) {
		err_set(e, ERR_LIMIT, "oom watch: %d VMs watched already", OOMWATCH_MAX);
		goto out;
	}
	x = &w->e[i];
	memcpy(x->name, name, strlen(name) + 1); /* fits: checked above */
	x->oom = 0;
	if (kind == 1) {
		if (fmt_err(e, "cgroup path", dir, sizeof(dir), "%s/memory%s", root, cg) < 0 ||
		    add_v1(w, x, i, dir, e) < 0)
			goto out;
	} else {
		struct stat sb;
		int pure;

		/* Pure v2 at the root; a hybrid host mounts it at unified/. */
		if (fmt_err(e, "cgroup path", dir, sizeof(dir), "%s/cgroup.controllers", root) < 0)
			goto out;
		pure = stat(dir, &sb) == 0;
		if (fmt_err(e, "cgroup path", x->events, sizeof(x->events), "%s%s%s/memory.events",
			root, pure ? "" : "/unified", cg) < 0)
			goto out;
		x->wd = inotify_add_watch(w->ifd, x->events, IN_MODIFY);
		if (x->wd < 0) {
			err_set(e, ERR_UNAVAILABLE, "oom watch: %s: %s", x->events,
			    strerror(errno));
			goto out;
		}
	}
	x->used = 1;
	rc = 0;
out:
	if (rc < 0 && x != NULL)
		entry_close(w, x);
	pthread_mutex_unlock(&w->lock);
	return rc;
}

int
oomwatch_take(struct oomwatch *w, const char *name)
{
	int oom = 0;

	if (w == NULL)
		return 0;
	pthread_mutex_lock(&w->lock);
	for (size_t i = 0; i < OOMWATCH_MAX; i++) {
		struct ow_entry *x = &w->e[i];

		if (!x->used || strcmp(x->name, name) != 0)
			continue;
		oom = x->oom;
		entry_close(w, x);
		x->used = 0;
		x->oom = 0;
		break;
	}
	pthread_mutex_unlock(&w->lock);
	return oom;
}

int
oomwatch_watching(struct oomwatch *w, const char *name)
{
	int found = 0;

	if (w == NULL)
		return 0;
	pthread_mutex_lock(&w->lock);
	for (size_t i = 0; i < OOMWATCH_MAX && !found; i++)
		found = w->e[i].used && strcmp(w->e[i].name, name) == 0;
	pthread_mutex_unlock(&w->lock);
	return found;
}
