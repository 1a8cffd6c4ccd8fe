/* aread.c - frames out of a byte stream a guest controls. */
#include "vmm/aread.h"

#include <stdlib.h>
#include <string.h>

#include "base/fmt.h"

enum aread_mode {
	AREAD_SCAN, /* out of sync: skipping up to AP_SYNC */
	AREAD_MARK, /* in sync, inside an AP_SYNC at a frame boundary */
	AREAD_HDR,  /* in sync, reading a header */
	AREAD_BODY, /* reading a payload */
	AREAD_FAILED,
};

struct aread {
	aread_frame_fn frame;
	aread_sync_fn sync;
	void *ctx;
	enum aread_mode mode;
	int synced;
	size_t matched; /* bytes of AP_SYNC matched so far */
	size_t skipped; /* bytes skipped while out of sync */
	size_t have;    /* bytes of the current frame in buf */
	struct ap_hdr hdr;
	char reason[AREAD_REASON_MAX];
	unsigned char buf[AP_HDR_SIZE + AP_MAX_PAYLOAD];
};

static const unsigned char sync_bytes[] = AP_SYNC;

struct aread *
aread_new(aread_frame_fn frame, aread_sync_fn sync, void *ctx)
{
	struct aread *r = malloc(sizeof(*r));

	if (r == NULL)
		return NULL;
	memset(r, 0, offsetof(struct aread, buf));
	r->frame = frame;
	r->sync = sync;
	r->ctx = ctx;
	r->mode = AREAD_SCAN;
	return r;
}

void
aread_free(struct aread *r)
{
	free(r);
}

int
aread_synced(const struct aread *r)
{
	return r->synced;
}

const char *
aread_reason(const struct aread *r)
{
	return r->reason;
}

static int
fail(struct aread *r, const char *why)
{
	fmt_cut(r->reason, sizeof(r->reason), "%s", why);
	r->mode = AREAD_FAILED;
	return -1;
}

static void
synced(struct aread *r)
{
	r->synced = 1;
	r->skipped = 0;
	r->matched = 0;
	r->have = 0;
	r->mode = AREAD_HDR;
	if (r->sync)
		r->sync(r->ctx);
}

/* Out of sync: one byte. AP_SYNC's first byte occurs in it only once, so
 * a mismatch restarts the match at this byte. */
static int
scan_byte(struct aread *r, unsigned char b)
{
	if (b == sync_bytes[r->matched]) {
		if (++r->matched == AP_SYNC_LEN)
			synced(r);
		return 0;
	}
	r->skipped += r->matched;
	r->matched = b == sync_bytes[0] ? 1 : 0;
	if (r->matched == 0)
		r->skipped++;
	if (r->skipped > AP_SYNC_SCAN_MAX) {
		char why[AREAD_REASON_MAX];

		fmt_cut(why, sizeof(why), "no sync in the first %u bytes", AP_SYNC_SCAN_MAX);
		return fail(r, why);
	}
	return 0;
}

static int
deliver(struct aread *r)
{
	int rc = r->frame(r->ctx, &r->hdr, r->buf + AP_HDR_SIZE);

	r->have = 0;
	r->mode = AREAD_HDR;
	if (rc < 0) {
		r->reason[0] = '\0';
		r->mode = AREAD_FAILED;
		return -1;
	}
	return 0;
}

int
aread_feed(struct aread *r, const void *p, size_t n)
{
	const unsigned char *in = p;
	size_t i = 0;

	while (i < n) {
		switch (r->mode) {
		case AREAD_FAILED:
			return -1;
		case AREAD_SCAN:
			if (scan_byte(r, in[i++]) < 0)
				return -1;
			break;
		case AREAD_MARK:
			if (in[i++] != sync_bytes[r->matched])
				return fail(r, "broken sync marker between frames");
			if (++r->matched == AP_SYNC_LEN)
				synced(r);
			break;
		case AREAD_HDR: {
			if (r->have == 0 && in[i] == sync_bytes[0]) {
				r->mode = AREAD_MARK;
				r->matched = 1;
				i++;
				break;
			}
			size_t take = AP_HDR_SIZE - r->have;

			if (take > n - i)
				take = n - i;
			memcpy(r->buf + r->have, in + i, take);
			r->have += take;
			i += take;
			if (r->have < AP_HDR_SIZE)
				break;
			if (ap_hdr_get(r->buf, &r->hdr) < 0) {
				char why[AREAD_REASON_MAX];

				fmt_cut(why, sizeof(why), "frame of %lu bytes (at most %u)",
				    (unsigned long)r->hdr.len, AP_MAX_PAYLOAD);
				return fail(r, why);
			}
			r->mode = AREAD_BODY;
			if (r->hdr.len == 0 && deliver(r) < 0)
				return -1;
			break;
		}
		case AREAD_BODY: {
			size_t want = AP_HDR_SIZE + r->hdr.len - r->have;
			size_t take = want < n - i ? want : n - i;

			memcpy(r->buf + r->have, in + i, take);
			r->have += take;
			i += take;
			if (r->have == AP_HDR_SIZE + r->hdr.len && deliver(r) < 0)
				return -1;
			break;
		}
		}
	}
	return r->mode == AREAD_FAILED ? -1 : 0;
}

int
aread_fields(const struct ap_hdr *h, const unsigned char *p, struct ap_field *f, size_t *nf,
    char *why, size_t wn)
{
	const struct ap_field *n;

	if (ap_parse(p, h->len, f, AP_MAX_FIELDS, nf) < 0) {
		fmt_cut(why, wn, "malformed fields in frame type 0x%x", h->type);
		return -1;
	}
	switch (h->type) {
	case AP_T_HELLO:
		if (ap_find(f, *nf, AP_TAG_NONCE) == NULL) {
			fmt_cut(why, wn, "HELLO without a nonce");
			return -1;
		}
		break;
	case AP_T_STARTED:
		if (ap_find(f, *nf, AP_TAG_PID) == NULL) {
			fmt_cut(why, wn, "STARTED without a pid");
			return -1;
		}
		break;
	case AP_T_EXIT:
		if (ap_find(f, *nf, AP_TAG_CODE) == NULL) {
			fmt_cut(why, wn, "EXIT without a code");
			return -1;
		}
		break;
	case AP_T_ENTRY:
		n = ap_find(f, *nf, AP_TAG_NAME);
		if (n == NULL || ap_find(f, *nf, AP_TAG_TYPE) == NULL || n->n == 0 ||
		    memchr(n->p, '/', n->n) || (n->n == 1 && n->p[0] == '.') ||
		    (n->n == 2 && n->p[0] == '.' && n->p[1] == '.')) {
			fmt_cut(why, wn, "directory entry without a type or a plain name");
			return -1;
		}
		break;
	default:
		break;
	}
	return 0;
}
