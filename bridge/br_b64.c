/* br_b64.c - base64 for read_file/write_file payloads. */
#include "bridge/br_b64.h"

#include <stdint.h>
#include <stdlib.h>

static const char alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *
br_b64_encode(const unsigned char *in, size_t len)
{
	size_t n = (len + 2) / 3 * 4, k = 0;
	char *out;

	if (len > SIZE_MAX / 2)
		return NULL;
	out = malloc(n + 1);
	if (out == NULL)
		return NULL;
	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16;
		if (i + 1 < len)
			v |= (uint32_t)in[i + 1] << 8;
		if (i + 2 < len)
			v |= in[i + 2];
		out[k++] = alphabet[(v >> 18) & 63];
		out[k++] = alphabet[(v >> 12) & 63];
		out[k++] = i + 1 < len ? alphabet[(v >> 6) & 63] : '=';
		out[k++] = i + 2 < len ? alphabet[v & 63] : '=';
	}
	out[k] = '\0';
	return out;
}

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

/* Four characters into up to three bytes; '=' only at the end of the last
 * group. Returns the bytes written or -1. */
static int
decode_quad(const char *q, int last, unsigned char *dst)
{
	int v[4], pad = 0;
	uint32_t w;

	for (int j = 0; j < 4; j++) {
		if (q[j] == '=' && last && j >= 2) {
			v[j] = 0;
			pad++;
		} else if (pad || (v[j] = value_of(q[j])) < 0) {
			return -1;
		}
	}
	w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
	dst[0] = (unsigned char)(w >> 16);
	dst[1] = (unsigned char)(w >> 8);
	dst[2] = (unsigned char)w;
	return 3 - pad;
}

unsigned char *
br_b64_decode(const char *in, size_t len, size_t *out_len)
{
	unsigned char *out;
	size_t k = 0;

	if (len % 4 != 0 || (out = malloc(len / 4 * 3 + 1)) == NULL)
		return NULL;
	for (size_t i = 0; i < len; i += 4) {
		int n = decode_quad(in + i, i + 4 == len, out + k);
		if (n < 0) {
			free(out);
			return NULL;
		}
		k += (size_t)n;
	}
	out[k] = '\0';
	*out_len = k;
	return out;
}
