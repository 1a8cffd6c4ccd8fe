/* tar_write.c - ustar headers, with a pax header for a name or link that
 * ustar cannot hold: the filter's cleaned headers and tar_header's. */
#include "base/tar_int.h"

#include <string.h>

/* v as n digits in base (8 or 10) at p, zero-padded: the callers' bounds
 * keep v within n digits, so nothing is cut and no NUL is written. */
static void
digits_put(unsigned char *p, size_t n, uint64_t v, unsigned base)
{
	for (size_t i = n; i-- > 0; v /= base)
		p[i] = (unsigned char)('0' + v % base);
}

/* v into a field of w bytes: octal with a NUL when it fits, else
 * base-256 (read by GNU tar, libarchive and busybox). */
static void
num_put(unsigned char *p, size_t w, int64_t v)
{
	uint64_t u = (uint64_t)v;

	if (v >= 0 && (w - 1) * 3 < 64 && u < (uint64_t)1 << ((w - 1) * 3)) {
		digits_put(p, w - 1, u, 8);
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

uint64_t
tar_blocks_of(uint64_t size)
{
	return size / TAR_BLOCK + (size % TAR_BLOCK != 0);
}

size_t
tar_pad(uint64_t size)
{
	return (size_t)((TAR_BLOCK - size % TAR_BLOCK) % TAR_BLOCK);
}

static void
hdr_checksum(unsigned char *b)
{
	unsigned sum = 0;

	memset(b + H_CHKSUM, ' ', 8);
	for (size_t i = 0; i < TAR_BLOCK; i++)
		sum += b[i]; /* at most 512 * 255, six octal digits */
	digits_put(b + H_CHKSUM, 6, sum, 8);
	b[H_CHKSUM + 6] = '\0';
	b[H_CHKSUM + 7] = ' ';
}

static void
hdr_block(unsigned char *b, const struct tar_hdr *h, const char *name, size_t nlen,
    const char *prefix, size_t plen, const char *link, size_t llen)
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

	if (digits(base + d) > d)
		d++;
	len = base + d;
	digits_put((unsigned char *)out, d, len, 10);
	out[d] = ' ';
	memcpy(out + d + 1, key, klen);
	out[d + 1 + klen] = '=';
	memcpy(out + d + 2 + klen, v, vlen);
	out[len - 1] = '\n';
	return len;
}

/* The header(s) of h into out: a pax 'x' header first when the name or
 * link does not fit ustar. Bytes written, or -1 with e. */
ssize_t
tar_hdr_write(unsigned char *out, size_t cap, const struct tar_hdr *h, struct err *e)
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
	if (cap < TAR_BLOCK * 2 + tar_blocks_of(rec) * TAR_BLOCK) {
		err_set(e, ERR_LIMIT, "tar header: %zu bytes of room are too few", cap);
		return -1;
	}
	at = 0;
	if (pax_path || pax_link) {
		struct tar_hdr x = { .type = 'x', .mode = 0644, .mtime = h->mtime };
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
	struct tar_hdr h = { 0 };
	char why[96], shown[TAR_SHOW_NAME + 8];
	size_t len = name ? strlen(name) : 0;

	if (type != '0' && type != '5') {
		err_set_at(e, ERR_INVALID, "type", "tar header: type '%c' is not '0' or '5'",
		    type >= 0x20 && type < 0x7f ? type : '?');
		return -1;
	}
	if (name == NULL)
		name = "";
	tar_name_clean(&name, &len);
	if (tar_name_check(name, len, type == '5', "name", why, sizeof(why)) != NULL) {
		tar_name_show(shown, sizeof(shown), name, len);
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
	return tar_hdr_write((unsigned char *)out, cap, &h, e);
}
