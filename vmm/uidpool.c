/* uidpool.c - per-VM uids claimed by files (see uidpool.h). */
#include "vmm/uidpool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fmt.h"
#include "base/num.h"

#define UIDPOOL_PATH_MAX 600

struct uidpool {
	char dir[UIDPOOL_PATH_MAX];
	uint32_t first, count;
	pthread_mutex_t lock; /* next and tmp_seq */
	uint32_t next;        /* offset in the range where the next search starts */
	unsigned long tmp_seq;
};

static int
owner_ok(const char *s)
{
	size_t n = 0;

	for (; s[n]; n++) {
		char c = s[n];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			c == '-' || c == '_' || c == '.'))
			return 0;
	}
	return n > 0 && n < UIDPOOL_OWNER_MAX;
}

struct uidpool *
uidpool_new(const char *dir, uint32_t first, uint32_t count, struct err *e)
{
	struct uidpool *p;

	if (count == 0 || count > UIDPOOL_MAX_COUNT || first == 0 ||
	    (uint64_t)first + count > 0x7fffffffu || strlen(dir) + 16 >= UIDPOOL_PATH_MAX) {
		err_set(e, ERR_INVALID, "uid pool: bad range or directory");
		return NULL;
	}
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		err_set(e, ERR_INTERNAL, "cannot create %s: %s", dir, strerror(errno));
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (p == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	memcpy(p->dir, dir, strlen(dir) + 1); /* fits: checked above */
	p->first = first;
	p->count = count;
	pthread_mutex_init(&p->lock, NULL);
	return p;
}

void
uidpool_free(struct uidpool *p)
{
	if (p == NULL)
		return;
	pthread_mutex_destroy(&p->lock);
	free(p);
}

/* Claim file of uid; -1 when it does not fit n. */
static int
claim_path(const struct uidpool *p, uint32_t uid, char *out, size_t n)
{
	return fmt_buf(out, n, "%s/%u", p->dir, (unsigned)uid);
}

/* The owner in claim file `path` (0), or -1 when it is missing or unreadable. */
static int
read_owner(const char *path, char *owner, size_t n)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	ssize_t r;

	if (fd < 0)
		return -1;
	r = read(fd, owner, n - 1);
	close(fd);
	if (r <= 0)
		return -1;
	owner[r] = '\0';
	owner[strcspn(owner, "\n")] = '\0';
	return 0;
}

int
uidpool_claim(struct uidpool *p, const char *owner, uint32_t *uid, struct err *e)
{
	char tmp[UIDPOOL_PATH_MAX + 64], path[UIDPOOL_PATH_MAX + 16], line[UIDPOOL_OWNER_MAX + 1];
	uint32_t start;
	unsigned long seq;
	int fd, rc = -1;

	if (!owner_ok(owner)) {
		err_set(e, ERR_INVALID, "uid pool: bad owner");
		return -1;
	}
	pthread_mutex_lock(&p->lock);
	start = p->next;
	seq = p->tmp_seq++;
	pthread_mutex_unlock(&p->lock);
	/* The claim is written whole before it has its name. */
	if (fmt_err(e, "uid pool: claim path", tmp, sizeof(tmp), "%s/.new-%ld-%lu", p->dir,
		(long)getpid(), seq) < 0 ||
	    fmt_err(e, "uid pool: owner", line, sizeof(line), "%s\n", owner) < 0)
		return -1;
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		err_set(e, ERR_INTERNAL, "uid pool: cannot write %s: %s", tmp, strerror(errno));
		return -1;
	}
	if (write(fd, line, strlen(line)) != (ssize_t)strlen(line)) {
		err_set(e, ERR_INTERNAL, "uid pool: cannot write %s", tmp);
		close(fd);
		goto out;
	}
	close(fd);
	for (uint32_t i = 0; i < p->count; i++) {
		uint32_t off = (start + i) % p->count;

		if (claim_path(p, p->first + off, path, sizeof(path)) < 0) {
			err_set(e, ERR_INTERNAL, "uid pool: claim path too long");
			goto out;
		}
		if (link(tmp, path) == 0) {
			*uid = p->first + off;
			pthread_mutex_lock(&p->lock);
			p->next = (off + 1) % p->count;
			pthread_mutex_unlock(&p->lock);
			rc = 0;
			goto out;
		}
		if (errno != EEXIST) {
			err_set(e, ERR_INTERNAL, "uid pool: cannot claim %s: %s", path,
			    strerror(errno));
			goto out;
		}
	}
	err_set(e, ERR_LIMIT, "every VM user (%u from %u) is in use", (unsigned)p->count,
	    (unsigned)p->first);
out:
	unlink(tmp);
	return rc;
}

int
uidpool_release(struct uidpool *p, uint32_t uid, const char *owner)
{
	char path[UIDPOOL_PATH_MAX + 16], held[UIDPOOL_OWNER_MAX + 1];

	if (uid < p->first || uid - p->first >= p->count ||
	    claim_path(p, uid, path, sizeof(path)) < 0)
		return -1;
	/* Nobody else can claim it while the file exists, so reading and then
	 * removing it cannot remove someone else's claim. */
	if (read_owner(path, held, sizeof(held)) < 0 || strcmp(held, owner) != 0)
		return -1;
	return unlink(path) == 0 ? 0 : -1;
}

/* A claim file's uid from its name, or 0 for any other name. */
static uint32_t
name_uid(const struct uidpool *p, const char *name)
{
	long long v;

	if (num_parse_ll(name, &v) < 0 || v < p->first || v - p->first >= p->count)
		return 0;
	return (uint32_t)v;
}

size_t
uidpool_each(struct uidpool *p, uidpool_each_fn *fn, void *ctx)
{
	char path[UIDPOOL_PATH_MAX + 16], owner[UIDPOOL_OWNER_MAX + 1];
	DIR *d = opendir(p->dir);
	struct dirent *de;
	size_t seen = 0;

	if (d == NULL)
		return 0;
	while ((de = readdir(d)) != NULL) {
		uint32_t uid = name_uid(p, de->d_name);

		if (uid == 0 || claim_path(p, uid, path, sizeof(path)) < 0 ||
		    read_owner(path, owner, sizeof(owner)) < 0)
			continue;
		seen++;
		if (fn != NULL && fn(ctx, uid, owner) != 0)
			break;
	}
	closedir(d);
	return seen;
}

struct find_ctx {
	const char *owner;
	uint32_t uid;
};

static int
find_one(void *ctx, uint32_t uid, const char *owner)
{
	struct find_ctx *f = ctx;

	if (strcmp(owner, f->owner) != 0)
		return 0;
	f->uid = uid;
	return 1;
}

uint32_t
uidpool_find(struct uidpool *p, const char *owner)
{
	struct find_ctx f = { owner, 0 };

	uidpool_each(p, find_one, &f);
	return f.uid;
}
