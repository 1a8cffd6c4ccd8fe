/* tar.c - the streaming tar checker and filter (and reader): the input's
 * blocks, its extended headers and each member through the rules. */
#include "base/tar.h"
#include "base/tar_int.h"
#include "base/tar_seen.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/fmt.h"

enum tar_state {
	ST_HEADER, /* the next block is a header */
	ST_ZERO1,  /* after one zero block */
	ST_EXT,    /* reading an extended header's data */
	ST_SPARSE, /* GNU sparse extension blocks of a member left out */
	ST_DATA,   /* member data, passed on or left out */
	ST_END,    /* after the end of the archive; the rest is ignored */
	ST_DONE,   /* finished */
	ST_FAILED,
};

/* A name or link target; len is the whole length, s holds at most
 * TAR_MAX_NAME bytes of it (a longer one is refused). */
struct tar_str {
	char s[TAR_MAX_NAME + 1];
	size_t len;
	int set;
};

struct tar_filter {
	struct tar_rules rules;
	struct tar_stats stats;
	enum tar_state state;
	unsigned char blk[TAR_BLOCK];
	size_t have;                                  /* bytes in blk */
	uint64_t offset;                              /* input bytes before blk */
	uint64_t members;                             /* members seen, passed on or left out */
	uint64_t blocks;                              /* blocks left of data (ST_DATA) */
	int pass;                                     /* ST_DATA: the data is passed on */
	uint64_t left;                                /* reader: data bytes of the member left */
	char ext_type;                                /* ST_EXT: 'x', 'L' or 'K' */
	size_t ext_len;                               /* ST_EXT: bytes of data */
	size_t ext_have;                              /* ST_EXT: bytes read */
	uint64_t ext_at;                              /* ST_EXT: input offset of its header */
	int pending;                                  /* extended headers wait for their member */
	struct tar_str path, linkpath, lname, lkname; /* from pax, 'L', 'K' */
	int has_size, sparse;
	uint64_t size;
	struct tar_str cur, curlink; /* the member being handled */
	struct tar_seen *seen;       /* what earlier members made (tar_seen.h) */
	struct err err;              /* the failure, repeated */
	unsigned char ext[TAR_MAX_PAX];
	unsigned char out[TAR_MAX_HEADER];
};

/* An octal or base-256 (GNU) number field; -1 when it is neither. */
static int
num_get(const unsigned char *p, size_t w, int64_t *out)
{
	uint64_t v = 0;
	size_t i = 0;

	if (p[0] == 0x80) {
		for (i = 1; i < w; i++) {
			if (v >> 55)
				return -1;
			v = v << 8 | p[i];
		}
		*out = (int64_t)v;
		return 0;
	}
	if (p[0] == 0xff) {
		v = ~(uint64_t)0;
		for (i = 1; i < w; i++) {
			if ((v >> 56) != 0xff)
				return -1;
			v = v << 8 | p[i];
		}
		if (!(v >> 63))
			return -1;
		*out = -(int64_t)(~v) - 1;
		return 0;
	}
	while (i < w && p[i] == ' ')
		i++;
	for (; i < w && p[i] >= '0' && p[i] <= '7'; i++) {
		if (v > ((uint64_t)INT64_MAX >> 3))
			return -1;
		v = v << 3 | (uint64_t)(p[i] - '0');
	}
	if (i < w && p[i] != ' ' && p[i] != '\0')
		return -1;
	*out = (int64_t)v;
	return 0;
}

struct tar_filter *
tar_filter_new(const struct tar_rules *r)
{
	struct tar_filter *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return NULL;
	if (r)
		f->rules = *r;
	f->state = ST_HEADER;
	err_clear(&f->err);
	if ((f->seen = tsn_new()) == NULL) {
		free(f);
		return NULL;
	}
	return f;
}

void
tar_filter_free(struct tar_filter *f)
{
	if (f == NULL)
		return;
	tsn_free(f->seen);
	free(f);
}

const struct tar_stats *
tar_filter_stats(const struct tar_filter *f)
{
	return &f->stats;
}

static int
repeat(struct tar_filter *f, struct err *e)
{
	err_set_at(e, f->err.kind, f->err.field, "%s", f->err.msg);
	return -1;
}

static int fail(struct tar_filter *f, struct err *e, enum err_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Fails the filter for good with this error. */
static int
fail(struct tar_filter *f, struct err *e, enum err_kind kind, const char *fmt, ...)
{
	char msg[sizeof(f->err.msg)];
	va_list ap;

	va_start(ap, fmt);
	err_ignore(fmt_vbuf(msg, sizeof(msg), fmt, ap)); /* for people: cut when long */
	va_end(ap);
	err_clear(&f->err);
	err_set_at(&f->err, kind, "member", "%s", msg);
	f->state = ST_FAILED;
	return repeat(f, e);
}

/* Fails naming the current member. */
static int
fail_member(struct tar_filter *f, struct err *e, enum err_kind kind, const char *why)
{
	char shown[TAR_SHOW_NAME + 8];

	tar_name_show(shown, sizeof(shown), f->cur.s, f->cur.len);
	return fail(f, e, kind, "member \"%s\": %s", shown, why);
}

/* The consumer (emit or member) failed: the filter fails with its error. */
static int
consumer_failed(struct tar_filter *f, struct err *e)
{
	if (e && e->kind != ERR_NONE) {
		f->err = *e;
	} else {
		err_clear(&f->err);
		err_set_at(&f->err, ERR_INTERNAL, "member", "tar: the consumer failed");
	}
	f->state = ST_FAILED;
	return repeat(f, e);
}

static int
emit_out(struct tar_filter *f, const void *p, size_t n, tar_emit_fn emit, void *ctx, struct err *e)
{
	return emit(ctx, p, n, e) == 0 ? 0 : consumer_failed(f, e);
}

static void
str_set(struct tar_str *s, const void *v, size_t n)
{
	size_t k = n < TAR_MAX_NAME ? n : TAR_MAX_NAME;

	memcpy(s->s, v, k);
	s->s[k] = '\0';
	s->len = n;
	s->set = 1;
}

/* Data of `size` bytes that follows: passed on or left out. */
static void
data_follows(struct tar_filter *f, uint64_t size, int pass)
{
	f->blocks = tar_blocks_of(size);
	f->pass = pass;
	f->left = pass ? size : 0;
	f->state = f->blocks > 0 ? ST_DATA : ST_HEADER;
}

/* Whole blocks of member data: to emit as they are, or (a reader) without
 * the padding after the member's last byte. */
static int
pass_data(struct tar_filter *f, const unsigned char *b, size_t bytes, tar_emit_fn emit, void *ctx,
    struct err *e)
{
	size_t n = bytes;

	if (!f->pass)
		return 0;
	if (f->rules.member) {
		n = f->left < bytes ? (size_t)f->left : bytes;
		f->left -= n;
		if (n == 0)
			return 0;
	}
	return emit_out(f, b, n, emit, ctx, e);
}

/* A reader's announcement of a member; a failure fails the filter. */
static int
announce(struct tar_filter *f, const struct tar_hdr *h, void *ctx, struct err *e)
{
	struct tar_member m = {
		.name = h->name,
		.name_len = h->name_len,
		.type = h->type,
		.link = h->link,
		.link_len = h->link_len,
		.mode = (unsigned)h->mode,
		.size = h->size,
		.mtime = (long long)h->mtime,
	};

	return f->rules.member(ctx, &m, e) == 0 ? 0 : consumer_failed(f, e);
}

/* A pax 'x' header's records, applied to the next member. */
static int
pax_apply(struct tar_filter *f, struct err *e)
{
	const char *p = (const char *)f->ext;
	size_t at = 0, len = f->ext_len;

	while (at < len) {
		size_t i = at, l = 0, d = 0, key, end;
		const char *eq;

		for (; i < len && p[i] >= '0' && p[i] <= '9'; i++, d++) {
			l = l * 10 + (size_t)(p[i] - '0');
			if (l > TAR_MAX_PAX)
				goto bad;
		}
		if (d == 0 || i >= len || p[i] != ' ' || l > len - at || l < d + 4)
			goto bad;
		end = at + l; /* one past the '\n' */
		key = i + 1;
		if (p[end - 1] != '\n' || key >= end - 1)
			goto bad;
		eq = memchr(p + key, '=', end - 1 - key);
		if (eq == NULL || eq == p + key)
			goto bad;
		size_t klen = (size_t)(eq - (p + key)), vlen = end - 1 - (key + klen + 1);
		const char *v = eq + 1;
		if (klen == 4 && memcmp(p + key, "path", 4) == 0) {
			if (vlen == 0)
				f->path.set = 0;
			else
				str_set(&f->path, v, vlen);
		} else if (klen == 8 && memcmp(p + key, "linkpath", 8) == 0) {
			if (vlen == 0)
				f->linkpath.set = 0;
			else
				str_set(&f->linkpath, v, vlen);
		} else if (klen == 4 && memcmp(p + key, "size", 4) == 0) {
			uint64_t s = 0;

			f->has_size = vlen > 0;
			for (size_t k = 0; k < vlen; k++) {
				if (v[k] < '0' || v[k] > '9' || s > ((uint64_t)INT64_MAX - 9) / 10)
					goto bad;
				s = s * 10 + (uint64_t)(v[k] - '0');
			}
			f->size = s;
		} else if (klen >= 11 && memcmp(p + key, "GNU.sparse.", 11) == 0) {
			f->sparse = 1;
		}
		at = end;
	}
	return 0;
bad:
	return fail(f, e, ERR_INVALID, "a malformed pax header record in the header at byte %llu",
	    (unsigned long long)f->ext_at);
}

/* The extended header's data is read: apply it. */
static int
ext_done(struct tar_filter *f, struct err *e)
{
	size_t n = f->ext_len;

	f->state = ST_HEADER;
	if (f->ext_type == 'x')
		return pax_apply(f, e);
	/* GNU writes the name and a NUL. */
	while (n > 0 && f->ext[n - 1] == '\0')
		n--;
	str_set(f->ext_type == 'L' ? &f->lname : &f->lkname, f->ext, n);
	return 0;
}

static void
ext_clear(struct tar_filter *f)
{
	f->pending = 0;
	f->path.set = f->linkpath.set = f->lname.set = f->lkname.set = 0;
	f->has_size = f->sparse = 0;
}

static int
is_zero(const unsigned char *b)
{
	for (size_t i = 0; i < TAR_BLOCK; i++)
		if (b[i] != 0)
			return 0;
	return 1;
}

/* The member's name and link target, from its extended headers or else
 * its ustar fields, into f->cur and f->curlink; the extended headers are
 * used up. */
static void
member_names(struct tar_filter *f, const unsigned char *b)
{
	int posix = memcmp(b + H_MAGIC, "ustar\0", 6) == 0;

	if (f->path.set) {
		f->cur = f->path;
	} else if (f->lname.set) {
		f->cur = f->lname;
	} else {
		size_t nl = strnlen((const char *)b + H_NAME, W_NAME);
		size_t pl = posix ? strnlen((const char *)b + H_PREFIX, W_PREFIX) : 0;
		char tmp[W_PREFIX + 1 + W_NAME];
		size_t k = 0;

		if (pl > 0) {
			memcpy(tmp, b + H_PREFIX, pl);
			tmp[pl] = '/';
			k = pl + 1;
		}
		memcpy(tmp + k, b + H_NAME, nl);
		str_set(&f->cur, tmp, k + nl);
	}
	if (f->linkpath.set)
		f->curlink = f->linkpath;
	else if (f->lkname.set)
		f->curlink = f->lkname;
	else
		str_set(&f->curlink, b + H_LINK, strnlen((const char *)b + H_LINK, W_NAME));
	ext_clear(f);
}

/* One more member, within max_members, and a file within
 * max_member_bytes; 0, or -1 with the filter failed. */
static int
member_limits(struct tar_filter *f, int is_reg, uint64_t size, struct err *e)
{
	char why[96];

	f->members++;
	if (f->rules.max_members > 0 && f->members > f->rules.max_members) {
		fmt_cut(why, sizeof(why), "more than %llu members",
		    (unsigned long long)f->rules.max_members);
		return fail_member(f, e, ERR_LIMIT, why);
	}
	if (is_reg && f->rules.max_member_bytes > 0 && size > f->rules.max_member_bytes) {
		fmt_cut(why, sizeof(why), "%llu bytes, more than the limit of %llu",
		    (unsigned long long)size, (unsigned long long)f->rules.max_member_bytes);
		return fail_member(f, e, ERR_LIMIT, why);
	}
	return 0;
}

/* The rule member h (its name cleaned; sparse: pax GNU.sparse.* keys
 * came with it) breaks, or NULL; a hard link's target is cleaned in h. */
static const char *
member_rule(struct tar_filter *f, struct tar_hdr *h, int sparse, char *why, size_t cap)
{
	char t = h->type;
	const char *rule = tar_type_rule(t, sparse, why, cap);

	if (rule == NULL)
		rule = tar_name_check(h->name, h->name_len, t == '5', "name", why, cap);
	if (rule == NULL && t == '2')
		rule = tar_link_check(h->name, h->name_len, h->link, h->link_len);
	if (rule == NULL && t == '1') {
		if (h->link_len <= TAR_MAX_NAME)
			tar_name_clean(&h->link, &h->link_len);
		rule = tar_name_check(h->link, h->link_len, 0, "hard link target", why, cap);
	}
	if (rule == NULL)
		rule = tsn_check(f->seen, h->name, h->name_len, t, h->link, h->link_len, why, cap);
	return rule;
}

/* A member that broke `rule`: an error, or (skip_bad) left out with its
 * data and, for a GNU sparse file, its extension blocks. */
static int
member_skip(struct tar_filter *f, const unsigned char *b, const char *rule, uint64_t size,
    struct err *e)
{
	if (!f->rules.skip_bad)
		return fail_member(f, e, ERR_INVALID, rule);
	f->stats.skipped++;
	data_follows(f, size, 0);
	if (b[H_TYPE] == 'S' && b[H_GNU_ISEXT] != 0)
		f->state = ST_SPARSE;
	return 0;
}

/* A member that passed: recorded, announced to a reader or its cleaned
 * header emitted, and counted. */
static int
member_pass(struct tar_filter *f, const struct tar_hdr *h, tar_emit_fn emit, void *ctx,
    struct err *e)
{
	ssize_t n;

	if (tsn_record(f->seen, h->name, h->name_len, h->type) < 0)
		return fail_member(f, e, ERR_LIMIT,
		    "more directories and links than the filter keeps");
	if (f->rules.member) {
		if (announce(f, h, ctx, e) < 0)
			return -1;
	} else {
		n = tar_hdr_write(f->out, sizeof(f->out), h, NULL);
		if (n < 0)
			return fail_member(f, e, ERR_INTERNAL, "no room for its header");
		if (emit_out(f, f->out, (size_t)n, emit, ctx, e) < 0)
			return -1;
	}
	switch (h->type) {
	case '5':
		f->stats.dirs++;
		break;
	case '2':
		f->stats.symlinks++;
		break;
	case '1':
		f->stats.hardlinks++;
		break;
	default:
		f->stats.files++;
		f->stats.bytes += h->size;
	}
	return 0;
}

/* A member's header block b (extended headers applied). */
static int
member(struct tar_filter *f, const unsigned char *b, uint64_t hsize, tar_emit_fn emit, void *ctx,
    struct err *e)
{
	char t = (char)b[H_TYPE], why[96];
	int ustar = memcmp(b + H_MAGIC, "ustar", 5) == 0;
	int is_reg = t == '0' || t == '\0' || t == '7', sparse = f->sparse;
	const char *rule;
	uint64_t size = f->has_size ? f->size : hsize;
	int64_t mode, uid, gid, mtime;
	struct tar_hdr h = { 0 };

	member_names(f, b);
	if (num_get(b + H_MODE, 8, &mode) < 0 || num_get(b + H_UID, 8, &uid) < 0 ||
	    num_get(b + H_GID, 8, &gid) < 0 || num_get(b + H_MTIME, 12, &mtime) < 0)
		return fail_member(f, e, ERR_INVALID, "a malformed number in its header");
	h.name = f->cur.s;
	h.name_len = f->cur.len;
	if (h.name_len <= TAR_MAX_NAME)
		tar_name_clean(&h.name, &h.name_len);
	if (h.name_len == 0 && f->cur.len > 0 && t == '5') {
		/* The archive's root directory itself. */
		data_follows(f, size, 0);
		return 0;
	}
	if (member_limits(f, is_reg, size, e) < 0)
		return -1;
	h.type = t;
	h.link = f->curlink.s;
	h.link_len = f->curlink.len;
	if ((rule = member_rule(f, &h, sparse, why, sizeof(why))) != NULL)
		return member_skip(f, b, rule, size, e);
	if (t != '1' && t != '2') {
		h.link = "";
		h.link_len = 0;
	}
	h.type = is_reg ? '0' : t;
	h.mode = mode & 07777 & ~06000;
	h.uid = uid;
	h.gid = gid;
	h.mtime = mtime;
	h.size = is_reg ? size : 0;
	h.uname = ustar ? b + H_UNAME : NULL;
	h.gname = ustar ? b + H_GNAME : NULL;
	if (member_pass(f, &h, emit, ctx, e) < 0)
		return -1;
	data_follows(f, size, is_reg);
	return 0;
}

static int
header(struct tar_filter *f, const unsigned char *b, tar_emit_fn emit, void *ctx, struct err *e)
{
	unsigned usum = 0;
	int ssum = 0;
	int64_t stored, size;
	char t = (char)b[H_TYPE];
	unsigned long long at = (unsigned long long)f->offset;

	if (is_zero(b)) {
		if (f->state == ST_ZERO1) {
			f->state = ST_END;
			return 0;
		}
		if (f->pending)
			return fail(f, e, ERR_INVALID,
			    "an extended header without a member at byte %llu", at);
		f->state = ST_ZERO1;
		return 0;
	}
	if (f->state == ST_ZERO1)
		return fail(f, e, ERR_INVALID, "a header after a zero block at byte %llu", at);
	for (size_t i = 0; i < TAR_BLOCK; i++) {
		unsigned char c = i >= H_CHKSUM && i < H_CHKSUM + 8 ? ' ' : b[i];

		usum += c;
		ssum += (signed char)c;
	}
	if (num_get(b + H_CHKSUM, 8, &stored) < 0 ||
	    (stored != (int64_t)usum && stored != (int64_t)ssum))
		return fail(f, e, ERR_INVALID, "not a tar header at byte %llu (bad checksum)", at);
	if (num_get(b + H_SIZE, 12, &size) < 0 || size < 0)
		return fail(f, e, ERR_INVALID, "a malformed size in the header at byte %llu", at);
	switch (t) {
	case 'x':
	case 'g':
		if ((uint64_t)size > TAR_MAX_PAX)
			return fail(f, e, ERR_LIMIT,
			    "a pax header of %lld bytes at byte %llu (at most %d)", (long long)size,
			    at, TAR_MAX_PAX);
		if (t == 'g') {
			/* Global values are not passed on, nor applied. */
			data_follows(f, (uint64_t)size, 0);
			return 0;
		}
		break;
	case 'L':
	case 'K':
		if ((uint64_t)size > TAR_MAX_LONGNAME)
			return fail(f, e, ERR_LIMIT,
			    "a GNU long name of %lld bytes at byte %llu (at most %d)",
			    (long long)size, at, TAR_MAX_LONGNAME);
		break;
	default:
		return member(f, b, (uint64_t)size, emit, ctx, e);
	}
	f->pending = 1;
	f->ext_type = t;
	f->ext_len = (size_t)size;
	f->ext_have = 0;
	f->ext_at = f->offset;
	f->state = ST_EXT;
	if (size == 0)
		return ext_done(f, e);
	return 0;
}

static int
block(struct tar_filter *f, const unsigned char *b, tar_emit_fn emit, void *ctx, struct err *e)
{
	size_t n;

	switch (f->state) {
	case ST_DATA:
		if (pass_data(f, b, TAR_BLOCK, emit, ctx, e) < 0)
			return -1;
		if (--f->blocks == 0)
			f->state = ST_HEADER;
		return 0;
	case ST_EXT:
		n = f->ext_len - f->ext_have;
		if (n > TAR_BLOCK)
			n = TAR_BLOCK;
		memcpy(f->ext + f->ext_have, b, n);
		f->ext_have += n;
		return f->ext_have == f->ext_len ? ext_done(f, e) : 0;
	case ST_SPARSE:
		if (b[H_GNU_EXT_ISEXT] == 0)
			f->state = f->blocks > 0 ? ST_DATA : ST_HEADER;
		return 0;
	default:
		return header(f, b, emit, ctx, e);
	}
}

int
tar_filter_push(struct tar_filter *f, const void *p, size_t n, tar_emit_fn emit, void *ctx,
    struct err *e)
{
	const unsigned char *b = p;

	if (f->state == ST_FAILED)
		return repeat(f, e);
	if (f->state == ST_DONE)
		return fail(f, e, ERR_INTERNAL, "tar: input after the end");
	while (n > 0 && f->state != ST_END) {
		if (f->have == 0 && f->state == ST_DATA && n >= TAR_BLOCK) {
			/* Whole blocks of data pass without a copy. */
			uint64_t k = n / TAR_BLOCK;
			size_t bytes;

			if (k > f->blocks)
				k = f->blocks;
			bytes = (size_t)k * TAR_BLOCK;
			if (pass_data(f, b, bytes, emit, ctx, e) < 0)
				return -1;
			f->blocks -= k;
			if (f->blocks == 0)
				f->state = ST_HEADER;
			b += bytes;
			n -= bytes;
			f->offset += bytes;
			continue;
		}
		size_t take = TAR_BLOCK - f->have < n ? TAR_BLOCK - f->have : n;

		memcpy(f->blk + f->have, b, take);
		f->have += take;
		b += take;
		n -= take;
		if (f->have < TAR_BLOCK)
			break;
		f->have = 0;
		if (block(f, f->blk, emit, ctx, e) < 0)
			return -1;
		f->offset += TAR_BLOCK;
	}
	return 0;
}

int
tar_filter_finish(struct tar_filter *f, tar_emit_fn emit, void *ctx, struct err *e)
{
	static const unsigned char end[TAR_END_BYTES];

	switch (f->state) {
	case ST_FAILED:
		return repeat(f, e);
	case ST_DONE:
		return fail(f, e, ERR_INTERNAL, "tar: finished twice");
	case ST_HEADER:
	case ST_ZERO1:
		if (f->have > 0)
			return fail(f, e, ERR_INVALID,
			    "the archive ends inside a block at byte %llu",
			    (unsigned long long)f->offset);
		if (f->pending)
			return fail(f, e, ERR_INVALID, "the archive ends after an extended header");
		break;
	case ST_EXT:
		return fail(f, e, ERR_INVALID, "the archive ends inside an extended header");
	case ST_DATA:
	case ST_SPARSE:
		return fail_member(f, e, ERR_INVALID, "the archive ends inside it");
	case ST_END:
		break;
	}
	if (f->rules.member == NULL && emit_out(f, end, sizeof(end), emit, ctx, e) < 0)
		return -1;
	f->state = ST_DONE;
	return 0;
}
