/* gzip.c - gzip with stored deflate blocks (gz_), RFC 1951 and 1952. */
#include "base/gzip.h"

#define GZ_BLOCK_MAX 65535 /* a stored block's largest length */

uint32_t
gz_crc32(uint32_t crc, const void *p, size_t n)
{
	const unsigned char *b = p;

	crc = ~crc;
	while (n--) {
		crc ^= *b++;
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
	}
	return ~crc;
}

static int
le32(struct buf *out, uint32_t v)
{
	unsigned char b[4] = { (unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
		(unsigned char)(v >> 24) };

	return buf_append(out, b, 4);
}

int
gz_stored(struct buf *out, const void *p, size_t n)
{
	/* Magic, deflate, no flags, no time, no extra flags, unknown OS. */
	static const unsigned char head[10] = { 0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255 };
	const unsigned char *b = p;
	size_t left = n;

	if (buf_append(out, head, sizeof(head)) < 0)
		return -1;
	do {
		size_t len = left > GZ_BLOCK_MAX ? GZ_BLOCK_MAX : left;
		/* BFINAL on the last block, BTYPE 00; then LEN and its complement. */
		unsigned char h[5] = { (unsigned char)(len == left), (unsigned char)len,
			(unsigned char)(len >> 8), (unsigned char)~len,
			(unsigned char)(~len >> 8) };

		if (buf_append(out, h, sizeof(h)) < 0 || buf_append(out, b, len) < 0)
			return -1;
		b += len;
		left -= len;
	} while (left > 0);
	return le32(out, gz_crc32(0, p, n)) < 0 || le32(out, (uint32_t)n) < 0 ? -1 : 0;
}
