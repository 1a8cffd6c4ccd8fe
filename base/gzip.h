/* gzip.h - a gzip member of stored (uncompressed) deflate blocks (gz_):
 * enough to hand out a small archive any gzip reader accepts, without a
 * compression library. */
#ifndef AAS_GZIP_H
#define AAS_GZIP_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

/* The CRC-32 (IEEE 802.3) of n bytes, continuing from `crc` (0 to start). */
uint32_t gz_crc32(uint32_t crc, const void *p, size_t n);
/* Appends the gzip form of the n bytes at p to out: 0, or -1 when out
 * cannot hold it. */
int gz_stored(struct buf *out, const void *p, size_t n);

#endif
