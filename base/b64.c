/* b64.c - standard base64 with padding (RFC 4648 section 4). */
#include "base/b64.h"

#include <stdint.h>
#include <stdlib.h>

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *
b64_encode(const void *in, size_t len)
{
	const unsigned char *p = in;
	char *out;
	size_t k = 0;

	if (len > B64_MAX_RAW)
		return NULL;
	out = malloc(B64_ENCODED_LEN(len) + 1);
	if (out == NULL)
		return NULL;
	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16;

		if (i + 1 < len)
			v |= (uint32_t)p[i + 1] << 8;
		if (i + 2 < len)
			v |= p[i + 2];
		out[k++] = alphabet[(v >> 18) & 63];
		out[k++] = alphabet[(v >> 12) & 63];
		out[k++] = i + 1 < len ? alphabet[(v >> 6) & 63] : '=';
		out[k++] = i + 2 < len ? alphabet[v & 63] : '=';
	}
	out[k] = '\0';
	return out;
}

/* The 6-bit value of one letter, or -1 (also for '=' and NUL). */
static int
value_of(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

int
b64_decode(const char *in, size_t len, unsigned char *out, size_t cap, size_t *out_len,
    struct err *e)
{
	size_t pad = 0, need, k = 0;

	if (len % 4 != 0) {
		err_set(e, ERR_INVALID, "not valid base64: length %zu is not a multiple of 4", len);
		return -1;
	}
	/* A third '=' is caught below as a bad character. */
	if (len >= 4 && in[len - 1] == '=')
		pad = in[len - 2] == '=' ? 2 : 1;
	need = B64_DECODED_MAX(len) - pad;
	if (need > cap) {
		err_set(e, ERR_LIMIT, "base64 text decodes to %zu bytes, more than %zu", need, cap);
		return -1;
	}
	for (size_t i = 0; i < len; i += 4) {
		size_t take = i + 4 == len ? 4 - pad : 4;
		uint32_t w = 0;

		for (size_t j = 0; j < take; j++) {
			int v = value_of(in[i + j]);

			if (v < 0) {
				err_set(e, ERR_INVALID,
				    "not valid base64: bad character at offset %zu", i + j);
				return -1;
			}
			w |= (uint32_t)v << (18 - 6 * j);
		}
		/* take letters carry take - 1 whole bytes; the bits left over
		 * under the padding must be zero, or two texts would decode
		 * to the same bytes. */
		if (take < 4 && (w & ((1u << (8 * (4 - take))) - 1)) != 0) {
			err_set(e, ERR_INVALID,
			    "not valid base64: nonzero bits before the padding");
			return -1;
		}
		out[k++] = (unsigned char)(w >> 16);
		if (take > 2)
			out[k++] = (unsigned char)(w >> 8);
		if (take > 3)
			out[k++] = (unsigned char)w;
	}
	*out_len = k;
	return 0;
}
