/* achan_file.c - files in the guest over the agent connection
 * (vmm/achan.h, "files"): PUT, GET, STAT and LIST, each a request on a
 * channel of its own. */
#include "vmm/achan.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/achan_int.h"

static uint16_t
file_flags(int flags)
{
	return (flags & ACHAN_PUT_TRUNC ? AP_F_TRUNC : 0) |
	    (flags & ACHAN_PUT_PARENTS ? AP_F_PARENTS : 0) |
	    (flags & ACHAN_PUT_EXCL ? AP_F_EXCL : 0) | (flags & ACHAN_AS_ROOT ? AP_F_ROOT : 0) |
	    (flags & ACHAN_PUT_TREE ? AP_F_TREE : 0);
}

static int
path_payload(struct ap_out *o, const char *path, struct err *e)
{
	if (path == NULL || path[0] != '/' || strlen(path) > AP_MAX_STRING) {
		err_set(e, ERR_INVALID, "path must be absolute and at most %d bytes",
		    AP_MAX_STRING);
		return -1;
	}
	ap_put_str(o, AP_TAG_PATH, path);
	return 0;
}

/* A file request on a channel of its own: the payload it sends (the path
 * first, then a few numbers) and room for the fields of its answer. */
struct freq {
	struct achan *c;
	struct achan_chan *ch; /* NULL until freq_send */
	long long deadline_ms;
	unsigned char pl[AP_MAX_STRING + 64];
	struct ap_out o;
	struct ap_field *f;
	size_t nf;
};

/* Starts a request on path: 0, or -1 with e set (a path that is not
 * absolute or too long, no memory). freq_end is due either way. */
static int
freq_begin(struct freq *q, struct achan *c, const char *path, long long deadline_ms, struct err *e)
{
	q->c = c;
	q->ch = NULL;
	q->deadline_ms = deadline_ms;
	q->o = (struct ap_out){ .buf = q->pl };
	q->f = NULL;
	if (path_payload(&q->o, path, e) < 0)
		return -1;
	q->f = achan_fields_new(e);
	return q->f ? 0 : -1;
}

/* Opens the request's channel and sends the payload as `kind`: what
 * achan_chan_send returns (1: the agent has answered already). */
static int
freq_send(struct freq *q, int kind, uint16_t flags, struct err *e)
{
	q->ch = achan_chan_open(q->c, kind, q->deadline_ms, e);
	if (q->ch == NULL)
		return -1;
	return achan_chan_send(q->c, q->ch, (uint16_t)kind, flags, q->o.buf, q->o.len,
	    q->deadline_ms, e);
}

/* Frees the fields and gives the channel up. */
static void
freq_end(struct freq *q)
{
	free(q->f);
	achan_chan_release(q->c, q->ch);
}

int
achan_put(struct achan *c, const char *path, unsigned mode, int flags, uint64_t offset,
    achan_read_fn read_fn, void *ctx, uint64_t *written, long long deadline_ms, struct err *e)
{
	struct freq q;
	unsigned char *buf = NULL;
	struct achan_frame_in *res = NULL;
	int r, rc = -1;

	if (freq_begin(&q, c, path, deadline_ms, e) < 0)
		goto out;
	if (mode)
		ap_put_u32(&q.o, AP_TAG_MODE, mode);
	if (offset)
		ap_put_u64(&q.o, AP_TAG_OFFSET, offset);
	buf = malloc(AP_MAX_PAYLOAD);
	if (buf == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	r = freq_send(&q, AP_T_PUT, file_flags(flags), e);
	while (r == 0) {
		ssize_t n = read_fn(ctx, buf, AP_MAX_PAYLOAD, e);

		if (n < 0)
			goto out;
		r = achan_chan_send(c, q.ch, AP_T_DATA, n == 0 ? AP_F_FIN : 0, buf, (size_t)n,
		    deadline_ms, e);
		if (n == 0)
			break;
	}
	if (r < 0 || achan_wait_result(c, q.ch, deadline_ms, &res, q.f, &q.nf, path, e) < 0 ||
	    achan_result_check(q.f, q.nf, path, e) < 0)
		goto out;
	const struct ap_field *fs = ap_find(q.f, q.nf, AP_TAG_SIZE);
	if (written)
		*written = fs ? ap_u64(fs) : 0;
	rc = 0;
out:
	free(res);
	free(buf);
	freq_end(&q);
	return rc;
}

/* A large GET's window grows to ACHAN_GET_WINDOW with a WINDOW frame
 * queued on the channel itself, so that it reaches the agent after the
 * GET that opens the channel (any agent takes WINDOW on a GET). The
 * credit counts here first: the agent cannot use it before it arrives. */
static int
get_widen(struct achan *c, struct achan_chan *ch, uint64_t length, long long deadline_ms,
    struct err *e)
{
	uint64_t want = length == 0 || length > ACHAN_GET_WINDOW ? ACHAN_GET_WINDOW : length;
	unsigned char pl[16];
	struct ap_out o = { .buf = pl };

	if (want <= AP_WINDOW_INIT)
		return 0;
	ap_put_u64(&o, AP_TAG_SIZE, want - AP_WINDOW_INIT);
	pthread_mutex_lock(&c->lock);
	ch->window += want - AP_WINDOW_INIT;
	pthread_mutex_unlock(&c->lock);
	return achan_chan_send(c, ch, AP_T_WINDOW, 0, o.buf, o.len, deadline_ms, e) < 0 ? -1 : 0;
}

int
achan_get(struct achan *c, const char *path, int flags, uint64_t offset, uint64_t length,
    achan_write_fn write_fn, void *ctx, uint64_t *total, long long deadline_ms, struct err *e)
{
	struct freq q;
	int rc = -1;

	if (freq_begin(&q, c, path, deadline_ms, e) < 0)
		goto out;
	if (offset)
		ap_put_u64(&q.o, AP_TAG_OFFSET, offset);
	if (length)
		ap_put_u64(&q.o, AP_TAG_LENGTH, length);
	if (freq_send(&q, AP_T_GET, file_flags(flags & ACHAN_AS_ROOT), e) < 0 ||
	    get_widen(c, q.ch, length, deadline_ms, e) < 0)
		goto out;
	for (;;) {
		struct achan_frame_in *fr = NULL;

		if (achan_chan_reply(c, q.ch, deadline_ms, &fr, path, e) < 0)
			goto out;
		if (fr->type == AP_T_DATA) {
			int w = fr->len ? write_fn(ctx, fr->p, fr->len, e) : 0;
			free(fr);
			if (w < 0)
				goto out;
			continue;
		}
		if (fr->type != AP_T_RESULT) {
			free(fr);
			continue;
		}
		if (ap_parse(fr->p, fr->len, q.f, AP_MAX_FIELDS, &q.nf) < 0 ||
		    achan_result_check(q.f, q.nf, path, e) < 0) {
			err_set(e, ERR_INTERNAL, "%s: malformed result", path);
			free(fr);
			goto out;
		}
		const struct ap_field *fs = ap_find(q.f, q.nf, AP_TAG_SIZE);
		if (total)
			*total = fs ? ap_u64(fs) : 0;
		free(fr);
		rc = 0;
		break;
	}
out:
	freq_end(&q);
	return rc;
}

static enum achan_ftype
ftype(uint32_t t)
{
	switch (t) {
	case AP_FT_FILE:
		return ACHAN_FT_FILE;
	case AP_FT_DIR:
		return ACHAN_FT_DIR;
	case AP_FT_LINK:
		return ACHAN_FT_LINK;
	default:
		return ACHAN_FT_OTHER;
	}
}

static void
stat_fill(const struct ap_field *f, size_t nf, struct achan_stat *st)
{
	const struct ap_field *x;

	memset(st, 0, sizeof(*st));
	if ((x = ap_find(f, nf, AP_TAG_TYPE)))
		st->type = ftype(ap_u32(x));
	if ((x = ap_find(f, nf, AP_TAG_SIZE)))
		st->size = ap_u64(x);
	if ((x = ap_find(f, nf, AP_TAG_MODE)))
		st->mode = ap_u32(x);
	if ((x = ap_find(f, nf, AP_TAG_MTIME)))
		st->mtime_ns = (int64_t)ap_u64(x);
	if ((x = ap_find(f, nf, AP_TAG_UID)))
		st->uid = ap_u32(x);
	if ((x = ap_find(f, nf, AP_TAG_GID)))
		st->gid = ap_u32(x);
}

int
achan_stat(struct achan *c, const char *path, int flags, struct achan_stat *st,
    long long deadline_ms, struct err *e)
{
	struct freq q;
	struct achan_frame_in *res = NULL;
	int rc = -1;

	if (freq_begin(&q, c, path, deadline_ms, e) == 0)
		rc = achan_simple_call(c, AP_T_STAT, file_flags(flags & ACHAN_AS_ROOT), &q.o,
		    deadline_ms, path, &res, q.f, &q.nf, e);
	if (rc == 0)
		stat_fill(q.f, q.nf, st);
	free(res);
	freq_end(&q);
	return rc;
}

/* Hands the entries of one block (records of u32 length + payload, each
 * checked on arrival) to fn: 0 to go on, 1 when fn stopped, -1. */
static int
list_block(const struct achan_frame_in *fr, struct ap_field *f, achan_entry_fn fn, void *ctx,
    const char *path, struct err *e)
{
	char name[AP_MAX_STRING + 1];
	size_t off = 0, nf;

	while (off + 4 <= fr->len) {
		const unsigned char *q = fr->p + off;
		uint32_t n = (uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 | (uint32_t)q[2] << 8 |
		    q[3];
		struct achan_stat st;
		const struct ap_field *fnm;

		if (n > fr->len - off - 4 || ap_parse(q + 4, n, f, AP_MAX_FIELDS, &nf) < 0 ||
		    (fnm = ap_find(f, nf, AP_TAG_NAME)) == NULL ||
		    ap_str(fnm, name, sizeof(name)) < 0) {
			err_set(e, ERR_INTERNAL, "%s: malformed entry", path);
			return -1;
		}
		off += 4 + (size_t)n;
		stat_fill(f, nf, &st);
		int r = fn(ctx, name, &st, e);
		if (r != 0)
			return r;
	}
	return 0;
}

int
achan_list(struct achan *c, const char *path, achan_entry_fn fn, void *ctx, long long deadline_ms,
    struct err *e)
{
	struct freq q;
	int r, rc = -1;

	if (freq_begin(&q, c, path, deadline_ms, e) < 0 || freq_send(&q, AP_T_LIST, 0, e) < 0)
		goto out;
	for (;;) {
		struct achan_frame_in *fr = NULL;

		if (achan_chan_reply(c, q.ch, deadline_ms, &fr, path, e) < 0)
			goto out;
		if (fr->type == AP_T_RESULT) {
			if (ap_parse(fr->p, fr->len, q.f, AP_MAX_FIELDS, &q.nf) < 0)
				err_set(e, ERR_INTERNAL, "%s: malformed answer", path);
			else
				rc = achan_result_check(q.f, q.nf, path, e);
			free(fr);
			break;
		}
		if (fr->type != AP_T_ENTRY) {
			free(fr);
			continue;
		}
		r = list_block(fr, q.f, fn, ctx, path, e);
		free(fr);
		if (r < 0)
			goto out;
		if (r == 1) {
			rc = 0;
			break;
		}
	}
out:
	freq_end(&q);
	return rc;
}
