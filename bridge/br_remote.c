/* br_remote.c - sandbox side of the sync tools. */
#include "bridge/br_remote.h"

#include <stdlib.h>
#include <string.h>

#include "base/fmt.h"

#define LIST_DEPTH 10   /* list_files' deepest */
#define LIST_LIMIT 5000 /* list_files' most entries */
#define SCAN_MAX_LEVELS 64
#define BATCH_MAX 60000 /* under run_command's 65536-character command */
#define BATCH_TIMEOUT_S 120

/* ---- listing ---- */

static json_t *
list(struct br_call *c, const char *sbx, const char *dir, int depth, struct err *e)
{
	struct br_url *u = br_api_url(c, "sandboxes", sbx, "files", NULL);
	json_t *j;

	br_url_query(u, "path", dir);
	br_url_query_ll(u, "depth", depth);
	br_url_query_ll(u, "limit", LIST_LIMIT);
	j = br_api_json(c, "GET", u, NULL, c->cfg->request_timeout_s, e);
	br_url_free(u);
	if (j != NULL && !json_is_array(json_object_get(j, "entries"))) {
		err_set(e, ERR_INTERNAL, "list_files answered without entries");
		json_decref(j);
		return NULL;
	}
	return j;
}

static char
type_char(const char *t)
{
	if (t == NULL)
		return 'o';
	if (strcmp(t, "file") == 0)
		return 'f';
	if (strcmp(t, "directory") == 0)
		return 'd';
	if (strcmp(t, "symlink") == 0)
		return 'l';
	return 'o';
}

struct rscan {
	struct br_call *c;
	const char *sbx;
	const struct br_excl *x;
	struct br_tree *t;
};

static int scan_dir(struct rscan *s, const char *dir, const char *prefix, int level, struct err *e);

static int
scan_entry(struct rscan *s, const char *dir, const char *prefix, const json_t *it, int depth,
    int level, struct err *e)
{
	const char *path = json_string_value(json_object_get(it, "path"));
	const char *mode = json_string_value(json_object_get(it, "mode"));
	const char *below = path ? br_path_below(dir, path) : NULL;
	struct br_entry en;
	char rel[8192];

	if (below == NULL) {
		err_set_at(e, ERR_FORBIDDEN, "sandbox_path",
		    "sandbox_path: the listing of %s "
		    "names '%s', which is not a clean path below it; refusing it",
		    dir, path ? path : "(none)");
		return -1;
	}
	if (fmt_buf(rel, sizeof(rel), "%s%s%s", prefix, *prefix ? "/" : "", below) < 0) {
		err_set_field(e, "sandbox_path", "sandbox_path: a path below %s is too long", dir);
		return -1;
	}
	if (br_excl_match(s->x, rel))
		return 0;
	memset(&en, 0, sizeof(en));
	en.rel = rel;
	en.type = type_char(json_string_value(json_object_get(it, "type")));
	en.size = (long long)json_integer_value(json_object_get(it, "size"));
	en.mode = 0644;
	if (mode != NULL) {
		char *end;
		unsigned long m = strtoul(mode, &end, 8);

		/* A mode that is not octal counts as none. */
		if (end != mode && *end == '\0')
			en.mode = (unsigned)m & 07777;
	}
	if (br_time_parse(json_string_value(json_object_get(it, "mtime")), &en.mtime) < 0)
		en.mtime = -1; /* unknown: never equal, so the file is sent */
	if (br_tree_add(s->t, &en, e) < 0)
		return -1;
	/* The listing stopped at this depth; what is below needs its own. */
	if (en.type == 'd' && br_path_depth(below) >= depth)
		return scan_dir(s, path, rel, level + 1, e);
	return 0;
}

static int
scan_dir(struct rscan *s, const char *dir, const char *prefix, int level, struct err *e)
{
	int depth = LIST_DEPTH, rc = 0;
	json_t *j, *it;
	size_t i;

	if (level > SCAN_MAX_LEVELS) {
		err_set_field(e, "sandbox_path", "sandbox_path: nested too deeply");
		return -1;
	}
	if ((j = list(s->c, s->sbx, dir, depth, e)) == NULL)
		return -1;
	if (json_is_true(json_object_get(j, "truncated"))) {
		/* Too much below: one level at a time, skipping excluded
		 * directories (a big node_modules, say) without listing them. */
		json_decref(j);
		depth = 1;
		if ((j = list(s->c, s->sbx, dir, depth, e)) == NULL)
			return -1;
		if (json_is_true(json_object_get(j, "truncated"))) {
			err_set_at(e, ERR_LIMIT, "sandbox_path",
			    "sandbox_path: %s holds more than "
			    "%d entries, more than one listing gives",
			    dir, LIST_LIMIT);
			json_decref(j);
			return -1;
		}
	}
	json_array_foreach(json_object_get(j, "entries"), i, it) {
		if ((rc = scan_entry(s, dir, prefix, it, depth, level, e)) < 0)
			break;
	}
	json_decref(j);
	return rc;
}

int
br_remote_scan(struct br_call *c, const char *sbx, const char *root, const struct br_excl *x,
    struct br_tree *t, int *missing, struct err *e)
{
	struct rscan s = { c, sbx, x, t };
	struct err first;

	if (missing)
		*missing = 0;
	err_clear(&first);
	if (scan_dir(&s, root, "", 0, &first) == 0)
		return 0;
	if (missing && first.kind == ERR_NOT_FOUND && br_tree_count(t) == 0) {
		*missing = 1;
		return 0;
	}
	*e = first;
	return -1;
}

/* ---- bytes ---- */

static ssize_t
pack_read(void *ctx, void *buf, size_t n, struct err *e)
{
	return br_pack_read(ctx, buf, n, e);
}

int
br_remote_put_tree(struct br_call *c, const char *sbx, const char *dir, struct br_pack *p,
    struct err *e)
{
	struct br_url *u = br_api_url(c, "sandboxes", sbx, "tree", NULL);
	/* The usual bound, and time for the bytes at a slow 1 MB/s. */
	long timeout = c->cfg->request_timeout_s + (long)(br_pack_content_bytes(p) / 1000000);
	json_t *j;

	br_url_query(u, "path", dir);
	j = br_api_put_stream(c, u, "application/x-tar", pack_read, p, timeout, e);
	br_url_free(u);
	json_decref(j);
	return j ? 0 : -1;
}

int
br_remote_get_tree(struct br_call *c, const char *sbx, const char *dir, const char *exclude,
    int (*write)(void *ctx, const void *p, size_t n, struct err *e), void *ctx, long timeout_s,
    struct err *e)
{
	struct br_url *u = br_api_url(c, "sandboxes", sbx, "tree", NULL);
	int rc;

	br_url_query(u, "path", dir);
	if (exclude && *exclude)
		br_url_query(u, "exclude", exclude);
	rc = br_api_get_stream(c, u, timeout_s, write, ctx, e);
	br_url_free(u);
	return rc;
}

int
br_remote_get(struct br_call *c, const char *sbx, const char *path, long long offset, size_t length,
    struct br_resp *r, struct err *e)
{
	struct br_url *u = br_api_url(c, "sandboxes", sbx, "files", "content", NULL);
	int rc;

	br_url_query(u, "path", path);
	br_url_query_ll(u, "offset", offset);
	br_url_query_ll(u, "length", (long long)length);
	rc = br_api_get_bytes(c, u, c->cfg->request_timeout_s, r, e);
	br_url_free(u);
	return rc;
}

/* ---- batched shell work ---- */

struct br_batch {
	struct br_call *c;
	char sbx[64];
	char buf[BATCH_MAX];
	size_t len;
	long marks;
};

static const char batch_head[] = "set -e\n";

struct br_batch *
br_batch_new(struct br_call *c, const char *sbx, struct err *e)
{
	struct br_batch *b = calloc(1, sizeof(*b));

	if (b == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	b->c = c;
	if (fmt_err(e, "sandbox_id", b->sbx, sizeof(b->sbx), "%s", sbx) < 0) {
		free(b);
		return NULL;
	}
	return b;
}

void
br_batch_free(struct br_batch *b)
{
	free(b);
}

long
br_batch_marks(const struct br_batch *b)
{
	return b->marks;
}

static long
count_marks(const char *out)
{
	long n = 0;

	for (const char *p = out; p && *p;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		n += len == 1 && p[0] == '+';
		p = nl ? nl + 1 : NULL;
	}
	return n;
}

int
br_batch_flush(struct br_batch *b, struct err *e)
{
	struct br_url *u;
	json_t *body, *res;
	const json_t *code;
	int rc = -1;

	if (b->len == 0)
		return 0;
	u = br_api_url(b->c, "sandboxes", b->sbx, "commands", NULL);
	body = json_pack("{s:s#, s:i}", "command", b->buf, (int)b->len, "timeout_seconds",
	    BATCH_TIMEOUT_S);
	res = body ? br_api_json(b->c, "POST", u, body, BATCH_TIMEOUT_S + 40, e) : NULL;
	if (body == NULL)
		err_set(e, ERR_INTERNAL, "out of memory");
	b->len = 0;
	if (res == NULL)
		goto out;
	code = json_object_get(res, "exit_code");
	if (!json_is_integer(code) || json_integer_value(code) != 0) {
		const char *msg = json_string_value(json_object_get(res, "stderr"));
		err_set(e, ERR_INTERNAL, "updating files in the sandbox failed (exit %lld): %.300s",
		    json_is_integer(code) ? (long long)json_integer_value(code) : -1LL,
		    msg && *msg ? msg : json_string_value(json_object_get(res, "state")));
		goto out;
	}
	b->marks += count_marks(json_string_value(json_object_get(res, "stdout")));
	rc = 0;
out:
	json_decref(body);
	json_decref(res);
	br_url_free(u);
	return rc;
}

int
br_batch_add(struct br_batch *b, const char *verb, const char *path, const char *tail,
    struct err *e)
{
	char quoted[4 * 4096 + 8];
	size_t need, room;
	int q = br_sh_quote(path, quoted, sizeof(quoted));

	if (q < 0) {
		err_set_field(e, "sandbox_path", "sandbox_path: a path is too long");
		return -1;
	}
	need = strlen(verb) + 1 + (size_t)q + strlen(tail) + 2;
	if (b->len + need >= sizeof(b->buf) && br_batch_flush(b, e) < 0)
		return -1;
	if (b->len == 0) {
		memcpy(b->buf, batch_head, sizeof(batch_head) - 1);
		b->len = sizeof(batch_head) - 1;
	}
	room = sizeof(b->buf) - b->len;
	if (need >= room || fmt_buf(b->buf + b->len, room, "%s %s%s\n", verb, quoted, tail) < 0) {
		err_set_field(e, "sandbox_path", "sandbox_path: a path is too long");
		return -1;
	}
	b->len += strlen(b->buf + b->len);
	return 0;
}
