/* utf8.c - UTF-8 validation with replacement. */
#include "base/utf8.h"

#include <stdlib.h>
#include <string.h>

/* Length of the valid sequence at p (1-4), or 0 when invalid. */
static size_t
seq_len(const unsigned char *p, size_t avail)
{
	unsigned char c = p[0];
	size_t n;
	unsigned cp;

	if (c >= 0x01 && c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		n = 2, cp = c & 0x1F;
	else if (c >= 0xE0 && c <= 0xEF)
		n = 3, cp = c & 0x0F;
	else if (c >= 0xF0 && c <= 0xF4)
		n = 4, cp = c & 0x07;
	else
		return 0;
	if (avail < n)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xC0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3F);
	}
	if ((n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
	    (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
		return 0;
	return n;
}

char *
utf8_sanitize(const char *in, size_t len, size_t *out_len, size_t *replaced)
{
	const unsigned char *p = (const unsigned char *)in;
	char *out = malloc(len * 3 + 1);
	size_t i = 0, k = 0, bad = 0;

	if (out == NULL)
		return NULL;
	while (i < len) {
		size_t n = seq_len(p + i, len - i);
		if (n == 0) {
			memcpy(out + k, "\xEF\xBF\xBD", 3);
			k += 3;
			bad++;
			i++;
		} else {
			memcpy(out + k, p + i, n);
			k += n;
			i += n;
		}
	}
	out[k] = '\0';
	if (out_len)
		*out_len = k;
	if (replaced)
		*replaced = bad;
	return out;
}

size_t
utf8_whole_len(const char *in, size_t len)
{
	const unsigned char *p = (const unsigned char *)in;

	/* Look back over at most three continuation bytes for a lead byte. */
	for (size_t back = 1; back <= 4 && back <= len; back++) {
		unsigned char c = p[len - back];
		size_t need;

		if ((c & 0xC0) == 0x80)
			continue; /* continuation: keep looking */
		if (c >= 0xF0 && c <= 0xF4)
			need = 4;
		else if (c >= 0xE0 && c <= 0xEF)
			need = 3;
		else if (c >= 0xC2 && c <= 0xDF)
			need = 2;
		else
			return len; /* ASCII or invalid: nothing to wait for */
		return back < need ? len - back : len;
	}
	return len;
}

size_t
utf8_chars(const char *s, size_t len)
{
	size_t n = 0;

	for (size_t i = 0; i < len; i++)
		if (((unsigned char)s[i] & 0xC0) != 0x80)
			n++;
	return n;
}
