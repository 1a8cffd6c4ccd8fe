/* br_b64.c - base64 for read_file/write_file payloads. */
#include "br_b64.h"

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

unsigned char *
br_b64_decode(const char *in, size_t len, size_t *out_len)
{
	unsigned char *out;
	size_t k = 0;

	if (len % 4 != 0)
		return NULL;
	out = malloc(len / 4 * 3 + 1);
	if (out == NULL)
		return NULL;
	for (size_t i = 0; i < len; i += 4) {
		int last = i + 4 == len;
		int pad = 0, v[4];
		for (int j = 0; j < 4; j++) {
			if (in[i + j] == '=' && last && j >= 2) {
				v[j] = 0;
				pad++;
				continue;
			}
			v[j] = pad ? -1 : value_of(in[i + j]);
			if (v[j] < 0)
				goto bad;
		}
		uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 |
		    (uint32_t)v[2] << 6 | (uint32_t)v[3];
		out[k++] = (unsigned char)(w >> 16);
		if (pad < 2)
			out[k++] = (unsigned char)(w >> 8);
		if (pad < 1)
			out[k++] = (unsigned char)w;
	}
	out[k] = '\0';
	*out_len = k;
	return out;
bad:
	free(out);
	return NULL;
}
