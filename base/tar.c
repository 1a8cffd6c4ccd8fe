/* tar.c - a streaming tar checker and filter, and a ustar/pax writer. */
#include "base/tar.h"
#include "base/tar_seen.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Offsets and widths in a ustar header block. */
#define H_NAME 0
#define H_MODE 100
#define H_UID 108
#define H_GID 116
#define H_SIZE 124
#define H_MTIME 136
#define H_CHKSUM 148
#define H_TYPE 156
#define H_LINK 157
#define H_MAGIC 257
#define H_UNAME 265
#define H_GNAME 297
#define H_PREFIX 345
#define H_GNU_ISEXT 482     /* GNU sparse header: extension blocks follow */
#define H_GNU_EXT_ISEXT 504 /* in such an extension block: another follows */
#define W_NAME 100
#define W_PREFIX 155
#define W_OWNER 32

/* Bytes of a name shown in an error message. */
#define TAR_SHOW_NAME 120

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

/* The fields of a header to write. */
struct hdr {
	const char *name, *link;
	size_t name_len, link_len;
	char type;
	int64_t mode, uid, gid, mtime;
	uint64_t size;
	const unsigned char *uname, *gname; /* W_OWNER bytes each, or NULL */
};

/* ---- numbers ---- */

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

/* v into a field of w bytes: octal with a NUL when it fits, else
 * base-256 (read by GNU tar, libarchive and busybox). */
static void
num_put(unsigned char *p, size_t w, int64_t v)
{
	uint64_t u = (uint64_t)v;

	if (v >= 0 && (w - 1) * 3 < 64 && u < (uint64_t)1 << ((w - 1) * 3)) {
		char tmp[24];

		snprintf(tmp, sizeof(tmp), "%0*llo", (int)(w - 1), (unsigned long long)u);
		memcpy(p, tmp, w - 1);
		p[w - 1] = '\0';
		return;
	}
	for (size_t i = w - 1; i >= 1; i--) {
		p[i] = (unsigned char)(u & 0xff);
		u >>= 8;
		if (v < 0)
			u |= (uint64_t)0xff << 56;
	}
	p[0] = v < 0 ? 0xff : 0x80;
}

static uint64_t
blocks_of(uint64_t size)
{
	return size / TAR_BLOCK + (size % TAR_BLOCK != 0);
}

size_t
tar_pad(uint64_t size)
{
	return (size_t)((TAR_BLOCK - size % TAR_BLOCK) % TAR_BLOCK);
}

/* ---- names ---- */

/* Drops a leading "./" (repeated) and a lone ".". */
static void
name_clean(const char **s, size_t *len)
{
	while (*len >= 2 && (*s)[0] == '.' && (*s)[1] == '/') {
		*s += 2;
		*len -= 2;
	}
	if (*len == 1 && (*s)[0] == '.')
		*len = 0;
}

/* NULL when s (len bytes) is a clean relative name, else the rule it
 * breaks, worded with `what` ("name"). */
static const char *
name_check(const char *s, size_t len, int is_dir, const char *what, char *why, size_t cap)
{
	size_t start = 0;

	if (len == 0) {
		snprintf(why, cap, "an empty %s", what);
		return why;
	}
	if (len > TAR_MAX_NAME) {
		snprintf(why, cap, "a %s longer than %d bytes", what, TAR_MAX_NAME);
		return why;
	}
	if (memchr(s, '\0', len) != NULL) {
		snprintf(why, cap, "a NUL in a %s", what);
		return why;
	}
	if (s[0] == '/') {
		snprintf(why, cap, "an absolute %s", what);
		return why;
	}
	for (size_t i = 0; i <= len; i++) {
		if (i < len && s[i] != '/')
			continue;
		if (i == start && !(is_dir && i == len && len > 0)) {
			snprintf(why, cap, "an empty component in a %s", what);
			return why;
		}
		if (i - start == 2 && s[start] == '.' && s[start + 1] == '.') {
			snprintf(why, cap, "\"..\" in a %s", what);
			return why;
		}
		start = i + 1;
	}
	return NULL;
}

/* NULL when the symlink `name` -> `t` stays inside the archive root,
 * resolved lexically from the link's directory; else the rule broken. */
static const char *
link_check(const char *name, size_t nlen, const char *t, size_t tlen)
{
	size_t depth = 0, start = 0;

	if (tlen == 0)
		return "an empty symlink target";
	if (tlen > TAR_MAX_NAME)
		return "a symlink target longer than 4095 bytes";
	if (memchr(t, '\0', tlen) != NULL)
		return "a NUL in a symlink target";
	if (t[0] == '/')
		return "an absolute symlink target";
	/* The link's directory: its name's components but the last (a
	 * checked name has no "..", no empty component). */
	for (size_t i = 0; i < nlen; i++) {
		if (name[i] != '/')
			continue;
		if (!(i - start == 1 && name[start] == '.'))
			depth++;
		start = i + 1;
	}
	start = 0;
	for (size_t i = 0; i <= tlen; i++) {
		size_t n;

		if (i < tlen && t[i] != '/')
			continue;
		n = i - start;
		if (n == 2 && t[start] == '.' && t[start + 1] == '.') {
			if (depth == 0)
				return "a symlink target outside the archive";
			depth--;
		} else if (n > 0 && !(n == 1 && t[start] == '.')) {
			depth++;
		}
		start = i + 1;
	}
	return NULL;
}

/* s shown in a message: printable ASCII, others as '?', cut. */
static void
name_show(char *out, size_t cap, const char *s, size_t len)
{
	size_t k = 0, n = len < TAR_SHOW_NAME ? len : TAR_SHOW_NAME;

	if (n > TAR_MAX_NAME)
		n = TAR_MAX_NAME;
	for (size_t i = 0; i < n && k + 1 < cap; i++) {
		unsigned char c = (unsigned char)s[i];

		out[k++] = c >= 0x20 && c < 0x7f && c != '"' && c != '\\' ? (char)c : '?';
	}
	if (len > n && k + 4 < cap) {
		memcpy(out + k, "...", 3);
		k += 3;
	}
	out[k] = '\0';
}

/* ---- writing headers ---- */

static void
hdr_checksum(unsigned char *b)
{
	unsigned sum = 0;
	char tmp[8];

	memset(b + H_CHKSUM, ' ', 8);
	for (size_t i = 0; i < TAR_BLOCK; i++)
		sum += b[i];
	snprintf(tmp, sizeof(tmp), "%06o", sum);
	memcpy(b + H_CHKSUM, tmp, 7);
	b[H_CHKSUM + 7] = ' ';
}

static void
hdr_block(unsigned char *b, const struct hdr *h, const char *name, size_t nlen, const char *prefix,
    size_t plen, const char *link, size_t llen)
{
	memset(b, 0, TAR_BLOCK);
	memcpy(b + H_NAME, name, nlen);
	num_put(b + H_MODE, 8, h->mode);
	num_put(b + H_UID, 8, h->uid);
	num_put(b + H_GID, 8, h->gid);
	num_put(b + H_SIZE, 12, (int64_t)h->size);
	num_put(b + H_MTIME, 12, h->mtime);
	b[H_TYPE] = (unsigned char)h->type;
	memcpy(b + H_LINK, link, llen);
	memcpy(b + H_MAGIC,
	    "ustar\0"
	    "00",
	    8);
	if (h->uname)
		memcpy(b + H_UNAME, h->uname, W_OWNER);
	if (h->gname)
		memcpy(b + H_GNAME, h->gname, W_OWNER);
	num_put(b + 329, 8, 0);
	num_put(b + 337, 8, 0);
	memcpy(b + H_PREFIX, prefix, plen);
	hdr_checksum(b);
}

static size_t
digits(size_t v)
{
	size_t d = 1;

	for (; v >= 10; v /= 10)
		d++;
	return d;
}

/* One pax record "<len> key=value\n" at out (room checked by the
 * caller's bound); its length, which counts its own digits. */
static size_t
pax_record(char *out, const char *key, const char *v, size_t vlen)
{
	size_t klen = strlen(key), base = klen + vlen + 3, d = digits(base), len;
	char num[24];

	if (digits(base + d) > d)
		d++;
	len = base + d;
	snprintf(num, sizeof(num), "%zu", len);
	memcpy(out, num, d);
	out[d] = ' ';
	memcpy(out + d + 1, key, klen);
	out[d + 1 + klen] = '=';
	memcpy(out + d + 2 + klen, v, vlen);
	out[len - 1] = '\n';
	return len;
}

/* The header(s) of h into out: a pax 'x' header first when the name or
 * link does not fit ustar. Bytes written, or -1 with e. */
static ssize_t
hdr_write(unsigned char *out, size_t cap, const struct hdr *h, struct err *e)
{
	size_t split = 0, rec = 0, at;
	int pax_path = 0, pax_link = h->link_len > W_NAME;

	if (h->name_len > W_NAME) {
		/* The longest prefix that leaves a non-empty name of <= 100. */
		size_t i = h->name_len - 1 < W_PREFIX ? h->name_len - 1 : W_PREFIX;

		for (; i > 0; i--)
			if (h->name[i] == '/' && h->name_len - i - 1 <= W_NAME &&
			    h->name_len - i - 1 > 0)
				break;
		split = i;
		pax_path = split == 0;
	}
	if (pax_path)
		rec += h->name_len + 32;
	if (pax_link)
		rec += h->link_len + 32;
	if (cap < TAR_BLOCK * 2 + blocks_of(rec) * TAR_BLOCK) {
		err_set(e, ERR_LIMIT, "tar header: %zu bytes of room are too few", cap);
		return -1;
	}
	at = 0;
	if (pax_path || pax_link) {
		struct hdr x = { .type = 'x', .mode = 0644, .mtime = h->mtime };
		char *r = (char *)out + TAR_BLOCK;
		size_t n = 0;

		if (pax_path)
			n += pax_record(r + n, "path", h->name, h->name_len);
		if (pax_link)
			n += pax_record(r + n, "linkpath", h->link, h->link_len);
		x.size = n;
		memset(r + n, 0, tar_pad(n));
		/* The ustar fields under a pax record hold a fixed name: a
		 * reader that ignores pax still gets a harmless one. */
		hdr_block(out, &x, "././@PaxHeader", 14, "", 0, "", 0);
		at = TAR_BLOCK + n + tar_pad(n);
	}
	if (pax_path)
		hdr_block(out + at, h, "@PaxPath", 8, "", 0, pax_link ? "" : h->link,
		    pax_link ? 0 : h->link_len);
	else if (split > 0)
		hdr_block(out + at, h, h->name + split + 1, h->name_len - split - 1, h->name, split,
		    pax_link ? "" : h->link, pax_link ? 0 : h->link_len);
	else
		hdr_block(out + at, h, h->name, h->name_len, "", 0, pax_link ? "" : h->link,
		    pax_link ? 0 : h->link_len);
	return (ssize_t)(at + TAR_BLOCK);
}

ssize_t
tar_header(char *out, size_t cap, const char *name, char type, unsigned mode, uint64_t size,
    long long mtime, struct err *e)
{
	struct hdr h = { 0 };
	char why[96], shown[TAR_SHOW_NAME + 8];
	size_t len = name ? strlen(name) : 0;

	if (type != '0' && type != '5') {
		err_set_at(e, ERR_INVALID, "type", "tar header: type '%c' is not '0' or '5'",
		    type >= 0x20 && type < 0x7f ? type : '?');
		return -1;
	}
	if (name == NULL)
		name = "";
	name_clean(&name, &len);
	if (name_check(name, len, type == '5', "name", why, sizeof(why)) != NULL) {
		name_show(shown, sizeof(shown), name, len);
		err_set_at(e, ERR_INVALID, "name", "tar header \"%s\": %s", shown, why);
		return -1;
	}
	h.name = name;
	h.name_len = len;
	h.link = "";
	h.type = type;
	h.mode = mode & 07777 & ~06000u;
	h.size = type == '0' ? size : 0;
	h.mtime = mtime;
	return hdr_write((unsigned char *)out, cap, &h, e);
}

/* ---- the filter ---- */

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
	va_list ap;

	f->err.kind = kind;
	snprintf(f->err.field, sizeof(f->err.field), "member");
	va_start(ap, fmt);
	vsnprintf(f->err.msg, sizeof(f->err.msg), fmt, ap);
	va_end(ap);
	f->state = ST_FAILED;
	return repeat(f, e);
}

/* Fails naming the current member. */
static int
fail_member(struct tar_filter *f, struct err *e, enum err_kind kind, const char *why)
{
	char shown[TAR_SHOW_NAME + 8];

	name_show(shown, sizeof(shown), f->cur.s, f->cur.len);
	return fail(f, e, kind, "member \"%s\": %s", shown, why);
}

/* The consumer (emit or member) failed: the filter fails with its error. */
static int
consumer_failed(struct tar_filter *f, struct err *e)
{
	if (e && e->kind != ERR_NONE) {
		f->err = *e;
	} else {
		f->err.kind = ERR_INTERNAL;
		snprintf(f->err.field, sizeof(f->err.field), "member");
		snprintf(f->err.msg, sizeof(f->err.msg), "tar: the consumer failed");
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
	f->blocks = blocks_of(size);
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
announce(struct tar_filter *f, const struct hdr *h, void *ctx, struct err *e)
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

/* The rule a member's type breaks, or NULL. */
static const char *
type_rule(char t, int sparse, char *why, size_t cap)
{
	switch (t) {
	case '0':
	case '\0':
	case '7':
		return sparse ? "a sparse file" : NULL;
	case '1':
	case '2':
	case '5':
		return NULL;
	case '3':
	case '4':
		return "a device node";
	case '6':
		return "a FIFO";
	case 'S':
		return "a sparse file";
	case 'V':
		return "a volume header";
	case 'M':
		return "a multivolume continuation";
	default:
		if (t >= 0x21 && t < 0x7f)
			snprintf(why, cap, "an unknown member type '%c'", t);
		else
			snprintf(why, cap, "an unknown member type 0x%02x", (unsigned char)t);
		return why;
	}
}

/* A member's header block b (extended headers applied). */
static int
member(struct tar_filter *f, const unsigned char *b, uint64_t hsize, tar_emit_fn emit, void *ctx,
    struct err *e)
{
	char t = (char)b[H_TYPE], why[96];
	int ustar = memcmp(b + H_MAGIC, "ustar", 5) == 0;
	int posix = memcmp(b + H_MAGIC, "ustar\0", 6) == 0;
	int is_reg = t == '0' || t == '\0' || t == '7', sparse = f->sparse;
	const char *rule, *name, *link;
	size_t nlen, llen;
	uint64_t size = f->has_size ? f->size : hsize;
	int64_t mode, uid, gid, mtime;
	struct hdr h = { 0 };
	ssize_t n;

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
	if (num_get(b + H_MODE, 8, &mode) < 0 || num_get(b + H_UID, 8, &uid) < 0 ||
	    num_get(b + H_GID, 8, &gid) < 0 || num_get(b + H_MTIME, 12, &mtime) < 0)
		return fail_member(f, e, ERR_INVALID, "a malformed number in its header");

	name = f->cur.s;
	nlen = f->cur.len;
	if (nlen <= TAR_MAX_NAME)
		name_clean(&name, &nlen);
	if (nlen == 0 && f->cur.len > 0 && t == '5') {
		/* The archive's root directory itself. */
		data_follows(f, size, 0);
		return 0;
	}
	f->members++;
	if (f->rules.max_members > 0 && f->members > f->rules.max_members) {
		snprintf(why, sizeof(why), "more than %llu members",
		    (unsigned long long)f->rules.max_members);
		return fail_member(f, e, ERR_LIMIT, why);
	}
	if (is_reg && f->rules.max_member_bytes > 0 && size > f->rules.max_member_bytes) {
		snprintf(why, sizeof(why), "%llu bytes, more than the limit of %llu",
		    (unsigned long long)size, (unsigned long long)f->rules.max_member_bytes);
		return fail_member(f, e, ERR_LIMIT, why);
	}
	rule = type_rule(t, sparse, why, sizeof(why));
	if (rule == NULL)
		rule = name_check(name, nlen, t == '5', "name", why, sizeof(why));
	link = f->curlink.s;
	llen = f->curlink.len;
	if (rule == NULL && t == '2' && (rule = link_check(name, nlen, link, llen)) == NULL)
		rule = tsn_target_rule(link, llen);
	if (rule == NULL && t == '1') {
		if (llen <= TAR_MAX_NAME)
			name_clean(&link, &llen);
		rule = name_check(link, llen, 0, "hard link target", why, sizeof(why));
	}
	if (rule == NULL)
		rule = tsn_check(f->seen, name, nlen, t, link, llen, why, sizeof(why));
	if (rule != NULL) {
		if (!f->rules.skip_bad)
			return fail_member(f, e, ERR_INVALID, rule);
		f->stats.skipped++;
		data_follows(f, size, 0);
		if (t == 'S' && b[H_GNU_ISEXT] != 0)
			f->state = ST_SPARSE;
		return 0;
	}
	if (tsn_record(f->seen, name, nlen, t) < 0)
		return fail_member(f, e, ERR_LIMIT,
		    "more directories and links than the filter keeps");
	h.name = name;
	h.name_len = nlen;
	h.link = t == '1' || t == '2' ? link : "";
	h.link_len = t == '1' || t == '2' ? llen : 0;
	h.type = is_reg ? '0' : t;
	h.mode = mode & 07777 & ~06000;
	h.uid = uid;
	h.gid = gid;
	h.mtime = mtime;
	h.size = is_reg ? size : 0;
	h.uname = ustar ? b + H_UNAME : NULL;
	h.gname = ustar ? b + H_GNAME : NULL;
	if (f->rules.member) {
		if (announce(f, &h, ctx, e) < 0)
			return -1;
	} else {
		n = hdr_write(f->out, sizeof(f->out), &h, NULL);
		if (n < 0)
			return fail_member(f, e, ERR_INTERNAL, "no room for its header");
		if (emit_out(f, f->out, (size_t)n, emit, ctx, e) < 0)
			return -1;
	}
	switch (t) {
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
		f->stats.bytes += size;
	}
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
