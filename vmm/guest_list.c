/* guest_list.c - a guest's directory tree listed as the sandbox user
 * (guest.h: guest_list_files): a walk of the agent's LIST calls, depth
 * first, names in order. */
#include "vmm/guest.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vmm/achan.h"
#include "vmm/guest_int.h"
#include "vmm/vm_agent.h"
#include "base/clock.h"
#include "base/fmt.h"

#define GUEST_LIST_NAME_MAX 4096

struct name_st {
	char *name;
	struct achan_stat st;
};

struct dir_buf {
	struct name_st *v;
	size_t n, cap, max;
	int truncated;
};

static int
collect(void *ctx, const char *name, const struct achan_stat *st, struct err *e)
{
	struct dir_buf *d = ctx;

	if (d->n == d->max) {
		d->truncated = 1;
		return 1;
	}
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 64;
		struct name_st *v = realloc(d->v, cap * sizeof(*v));

		if (v == NULL) {
			err_set(e, ERR_INTERNAL, "out of memory");
			return -1;
		}
		d->v = v;
		d->cap = cap;
	}
	d->v[d->n].name = strdup(name);
	if (d->v[d->n].name == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return -1;
	}
	d->v[d->n++].st = *st;
	return 0;
}

static int
by_name(const void *a, const void *b)
{
	return strcmp(((const struct name_st *)a)->name, ((const struct name_st *)b)->name);
}

static void
dir_buf_clear(struct dir_buf *d)
{
	for (size_t i = 0; i < d->n; i++)
		free(d->v[i].name);
	free(d->v);
}

static const char *
type_name(enum achan_ftype t)
{
	switch (t) {
	case ACHAN_FT_FILE:
		return "file";
	case ACHAN_FT_DIR:
		return "directory";
	case ACHAN_FT_LINK:
		return "symlink";
	default:
		return "other";
	}
}

static json_t *
entry_json(const char *path, const struct achan_stat *st)
{
	char mode[8], when[32];
	time_t mt = (time_t)(st->mtime_ns / 1000000000);
	struct tm tm;

	if (fmt_buf(mode, sizeof(mode), "%04o", st->mode & 07777) < 0)
		return NULL;
	if (gmtime_r(&mt, &tm) == NULL)
		memset(&tm, 0, sizeof(tm));
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	return json_pack("{s:s%, s:s, s:I, s:s, s:s}", "path", path, strlen(path), "type",
	    type_name(st->type), "size", (json_int_t)st->size, "mode", mode, "mtime", when);
}

struct walk {
	struct achan *c;
	json_t *out;
	int limit;
	int truncated;
	long long deadline;
};

static int
walk_dir(struct walk *w, const char *dir, int level, int depth, struct err *e)
{
	struct dir_buf d = { NULL, 0, 0, 0, 0 };
	int rc = -1;

	d.max = (size_t)(w->limit - (int)json_array_size(w->out)) + 1;
	if (achan_list(w->c, dir, collect, &d, w->deadline, e) < 0)
		goto out;
	/* An empty directory has no array at all (qsort wants one). */
	if (d.n > 1)
		qsort(d.v, d.n, sizeof(*d.v), by_name);
	for (size_t i = 0; i < d.n; i++) {
		char path[GUEST_LIST_NAME_MAX];
		json_t *j;

		if ((int)json_array_size(w->out) >= w->limit) {
			w->truncated = 1;
			break;
		}
		if (fmt_buf(path, sizeof(path), "%s%s%s", dir,
			dir[strlen(dir) - 1] == '/' ? "" : "/", d.v[i].name) < 0)
			continue; /* deeper than any path a tool can name */
		j = entry_json(path, &d.v[i].st);
		if (j == NULL || json_array_append_new(w->out, j) < 0) {
			err_set(e, ERR_INTERNAL, "out of memory");
			goto out;
		}
		if (d.v[i].st.type == ACHAN_FT_DIR && level < depth) {
			struct err sub;

			/* An unreadable subdirectory is listed, not entered. */
			err_clear(&sub);
			if (walk_dir(w, path, level + 1, depth, &sub) < 0 &&
			    (sub.kind == ERR_UNAVAILABLE || sub.kind == ERR_TIMEOUT ||
				sub.kind == ERR_INTERNAL)) {
				*e = sub;
				goto out;
			}
		}
	}
	if (d.truncated)
		w->truncated = 1;
	rc = 0;
out:
	dir_buf_clear(&d);
	return rc;
}

json_t *
guest_list_files(struct vm_host *h, const char *dom, const char *path, int depth, int limit,
    int *truncated, struct err *e)
{
	struct walk w = { NULL, json_array(), limit, 0, clock_ms() + GUEST_SHORT_OP_MS };

	*truncated = 0;
	if (w.out == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	if ((w.c = vm_agent_get(h, dom, e)) == NULL || walk_dir(&w, path, 1, depth, e) < 0) {
		achan_free(w.c);
		json_decref(w.out);
		guest_file_error(e);
		return NULL;
	}
	achan_free(w.c);
	*truncated = w.truncated;
	return w.out;
}
