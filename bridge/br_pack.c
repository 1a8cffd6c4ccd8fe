/* br_pack.c - a tar stream made on demand: per member its header
 * (base/tar), its content read from the local file in pieces, the padding;
 * then the end of the archive. A file that shrank meanwhile is padded with
 * zeros and one that grew is cut at its listed size (the archive stays
 * well formed; a warning says so). */
#include "bridge/br_pack.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bridge/br_local.h"
#include "base/tar.h"

enum phase { PH_START, PH_HEADER, PH_DATA, PH_PAD, PH_END, PH_DONE };

struct br_pack {
	char *root;
	const struct br_entry **v;
	size_t n, cap, next;
	uint64_t content;
	enum phase ph;
	char hdr[TAR_MAX_HEADER];
	size_t hdr_len, hdr_off;
	int fd;
	uint64_t left;  /* content bytes of the current member still to give */
	size_t zeros;   /* padding (or end blocks) still to give */
	int short_read; /* the current file ended early */
	const struct br_entry *cur;
	void (*on_member)(void *ctx, size_t done, size_t total, const char *rel);
	void *on_member_ctx;
	json_t *changed; /* names of files that changed size */
};

struct br_pack *
br_pack_new(const char *root)
{
	struct br_pack *p = calloc(1, sizeof(*p));

	if (p == NULL)
		return NULL;
	p->fd = -1;
	p->root = strdup(root);
	p->changed = json_array();
	if (p->root == NULL || p->changed == NULL) {
		br_pack_free(p);
		return NULL;
	}
	return p;
}

void
br_pack_free(struct br_pack *p)
{
	if (p == NULL)
		return;
	if (p->fd >= 0)
		close(p->fd);
	json_decref(p->changed);
	free(p->v);
	free(p->root);
	free(p);
}

int
br_pack_add(struct br_pack *p, const struct br_entry *en, struct err *e)
{
	if (en->type != 'f' && en->type != 'd') {
		err_set(e, ERR_INTERNAL, "pack: %s is neither a file nor a directory", en->rel);
		return -1;
	}
	if (p->n == BR_PACK_MAX_MEMBERS) {
		err_set(e, ERR_LIMIT, "pack: more than %d members", BR_PACK_MAX_MEMBERS);
		return -1;
	}
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 256;
		const struct br_entry **v = realloc(p->v, cap * sizeof(*v));

		if (v == NULL) {
			err_set(e, ERR_INTERNAL, "out of memory");
			return -1;
		}
		p->v = v;
		p->cap = cap;
	}
	p->v[p->n++] = en;
	if (en->type == 'f' && en->size > 0)
		p->content += (uint64_t)en->size;
	return 0;
}

size_t
br_pack_count(const struct br_pack *p)
{
	return p->n;
}

uint64_t
br_pack_content_bytes(const struct br_pack *p)
{
	return p->content;
}

void
br_pack_on_member(struct br_pack *p,
    void (*fn)(void *ctx, size_t done, size_t total, const char *rel), void *ctx)
{
	p->on_member = fn;
	p->on_member_ctx = ctx;
}

void
br_pack_warnings(struct br_pack *p, json_t *warnings)
{
	size_t i;
	json_t *v;

	json_array_foreach(p->changed, i, v)
		br_warn(warnings, "%s: changed while it was sent; run the sync again",
		    json_string_value(v));
}

/* The next member's header, its file opened. */
static int
start_member(struct br_pack *p, struct err *e)
{
	const struct br_entry *en = p->v[p->next];
	uint64_t size = en->type == 'f' && en->size > 0 ? (uint64_t)en->size : 0;
	ssize_t k;

	if (p->on_member)
		p->on_member(p->on_member_ctx, p->next, p->n, en->rel);
	if (en->type == 'f' && (p->fd = br_local_open(p->root, en, e)) < 0)
		return -1;
	k = tar_header(p->hdr, sizeof(p->hdr), en->rel, en->type == 'd' ? '5' : '0',
	    en->mode & 07777, size, en->mtime, e);
	if (k < 0)
		return -1;
	p->cur = en;
	p->hdr_len = (size_t)k;
	p->hdr_off = 0;
	p->left = size;
	p->short_read = 0;
	p->zeros = tar_pad(size);
	p->next++;
	p->ph = PH_HEADER;
	return 0;
}

static ssize_t
give_data(struct br_pack *p, unsigned char *buf, size_t n, struct err *e)
{
	ssize_t r = 0;

	if (n > p->left)
		n = (size_t)p->left;
	if (!p->short_read) {
		do
			r = read(p->fd, buf, n);
		while (r < 0 && errno == EINTR);
		if (r < 0) {
			err_set_field(e, "local_path", "local_path: cannot read %s: %s",
			    p->cur->rel, strerror(errno));
			return -1;
		}
		if (r == 0) {
			p->short_read = 1;
			json_array_append_new(p->changed, json_string(p->cur->rel));
		}
	}
	if (p->short_read) {
		memset(buf, 0, n);
		r = (ssize_t)n;
	}
	p->left -= (uint64_t)r;
	return r;
}

static void
end_member(struct br_pack *p)
{
	char probe;

	if (p->fd >= 0) {
		/* Bytes past the listed size: it grew. */
		if (!p->short_read && read(p->fd, &probe, 1) == 1)
			json_array_append_new(p->changed, json_string(p->cur->rel));
		close(p->fd);
		p->fd = -1;
	}
	p->ph = PH_PAD;
}

ssize_t
br_pack_read(struct br_pack *p, void *out, size_t n, struct err *e)
{
	unsigned char *buf = out;
	size_t got = 0, k;

	while (got < n && p->ph != PH_DONE) {
		switch (p->ph) {
		case PH_START:
			if (p->next < p->n) {
				if (start_member(p, e) < 0)
					return -1;
			} else {
				p->ph = PH_END;
				p->zeros = TAR_END_BYTES;
			}
			break;
		case PH_HEADER:
			k = p->hdr_len - p->hdr_off;
			if (k > n - got)
				k = n - got;
			memcpy(buf + got, p->hdr + p->hdr_off, k);
			p->hdr_off += k;
			got += k;
			if (p->hdr_off == p->hdr_len)
				p->ph = PH_DATA;
			break;
		case PH_DATA:
			if (p->left > 0) {
				ssize_t r = give_data(p, buf + got, n - got, e);
				if (r < 0)
					return -1;
				got += (size_t)r;
			}
			if (p->left == 0)
				end_member(p);
			break;
		case PH_PAD:
		case PH_END:
			k = p->zeros < n - got ? p->zeros : n - got;
			memset(buf + got, 0, k);
			p->zeros -= k;
			got += k;
			if (p->zeros == 0)
				p->ph = p->ph == PH_END ? PH_DONE : PH_START;
			break;
		case PH_DONE:
			break;
		}
	}
	return (ssize_t)got;
}
