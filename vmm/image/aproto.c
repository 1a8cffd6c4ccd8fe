/* aproto.c - frame headers and payload fields of the agent protocol. */
#include "vmm/image/aproto.h"

#include <string.h>

/* Width of each tag's value: 4 or 8 for integers, 0 for strings (-1 for
 * raw bytes; none yet), -2 for unknown tags. */
static int
tag_width(int tag)
{
	switch (tag) {
	case AP_TAG_MODE:
	case AP_TAG_TIMEOUT_S:
	case AP_TAG_ROWS:
	case AP_TAG_COLS:
	case AP_TAG_ERRNO:
	case AP_TAG_TYPE:
	case AP_TAG_UID:
	case AP_TAG_GID:
	case AP_TAG_PID:
	case AP_TAG_CODE:
	case AP_TAG_SIGNAL:
	case AP_TAG_VERSION:
		return 4;
	case AP_TAG_OFFSET:
	case AP_TAG_LENGTH:
	case AP_TAG_LOG_MAX:
	case AP_TAG_SIZE:
	case AP_TAG_MTIME:
	case AP_TAG_NONCE:
		return 8;
	case AP_TAG_ARG:
	case AP_TAG_ENV:
	case AP_TAG_CWD:
	case AP_TAG_PATH:
	case AP_TAG_LOG_OUT:
	case AP_TAG_LOG_ERR:
	case AP_TAG_EXIT_FILE:
	case AP_TAG_MESSAGE:
	case AP_TAG_NAME:
	case AP_TAG_BOOT_ID:
		return 0;
	default:
		return -2;
	}
}

static void
be32(unsigned char *o, uint32_t v)
{
	o[0] = (unsigned char)(v >> 24);
	o[1] = (unsigned char)(v >> 16);
	o[2] = (unsigned char)(v >> 8);
	o[3] = (unsigned char)v;
}

static uint32_t
rd32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

void
ap_hdr_put(unsigned char out[AP_HDR_SIZE], const struct ap_hdr *h)
{
	be32(out, h->len);
	out[4] = (unsigned char)(h->type >> 8);
	out[5] = (unsigned char)h->type;
	out[6] = (unsigned char)(h->flags >> 8);
	out[7] = (unsigned char)h->flags;
	be32(out + 8, h->chan);
}

int
ap_hdr_get(const unsigned char in[AP_HDR_SIZE], struct ap_hdr *h)
{
	h->len = rd32(in);
	h->type = (uint16_t)(in[4] << 8 | in[5]);
	h->flags = (uint16_t)(in[6] << 8 | in[7]);
	h->chan = rd32(in + 8);
	return h->len <= AP_MAX_PAYLOAD ? 0 : -1;
}

void
ap_put_bytes(struct ap_out *o, int tag, const void *p, size_t n)
{
	if (o->overflow || n > AP_MAX_PAYLOAD || o->len + 5 + n > AP_MAX_PAYLOAD) {
		o->overflow = 1;
		return;
	}
	o->buf[o->len] = (unsigned char)tag;
	be32(o->buf + o->len + 1, (uint32_t)n);
	if (n > 0)
		memcpy(o->buf + o->len + 5, p, n);
	o->len += 5 + n;
}

void
ap_put_str(struct ap_out *o, int tag, const char *s)
{
	size_t n = strlen(s);

	if (n > AP_MAX_STRING) {
		o->overflow = 1;
		return;
	}
	ap_put_bytes(o, tag, s, n);
}

void
ap_put_u32(struct ap_out *o, int tag, uint32_t v)
{
	unsigned char b[4];

	be32(b, v);
	ap_put_bytes(o, tag, b, sizeof(b));
}

void
ap_put_u64(struct ap_out *o, int tag, uint64_t v)
{
	unsigned char b[8];

	be32(b, (uint32_t)(v >> 32));
	be32(b + 4, (uint32_t)v);
	ap_put_bytes(o, tag, b, sizeof(b));
}

int
ap_parse(const unsigned char *p, size_t n, struct ap_field *fields, size_t max, size_t *count)
{
	size_t off = 0, k = 0;

	while (off < n) {
		uint32_t len;
		int w;

		if (n - off < 5 || k == max)
			return -1;
		w = tag_width(p[off]);
		len = rd32(p + off + 1);
		if (w == -2 || len > n - off - 5)
			return -1;
		if (w > 0 && len != (uint32_t)w)
			return -1;
		if (w == 0 && (len > AP_MAX_STRING || memchr(p + off + 5, '\0', len) != NULL))
			return -1;
		fields[k].tag = p[off];
		fields[k].p = p + off + 5;
		fields[k].n = len;
		k++;
		off += 5 + (size_t)len;
	}
	*count = k;
	return 0;
}

const struct ap_field *
ap_find(const struct ap_field *f, size_t count, int tag)
{
	for (size_t i = 0; i < count; i++)
		if (f[i].tag == tag)
			return &f[i];
	return NULL;
}

uint32_t
ap_u32(const struct ap_field *f)
{
	return f->n == 4 ? rd32(f->p) : 0;
}

uint64_t
ap_u64(const struct ap_field *f)
{
	if (f->n == 8)
		return (uint64_t)rd32(f->p) << 32 | rd32(f->p + 4);
	return f->n == 4 ? rd32(f->p) : 0;
}

int
ap_str(const struct ap_field *f, char *out, size_t n)
{
	if (f->n >= n)
		return -1;
	memcpy(out, f->p, f->n);
	out[f->n] = '\0';
	return 0;
}
