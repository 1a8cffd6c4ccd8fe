/* html.c - HTML escaping and href checks. */
#include "base/html.h"

#include <string.h>

/* The entity for a byte that needs one, or NULL. */
static const char *
entity(char c)
{
	switch (c) {
	case '&':
		return "&amp;";
	case '<':
		return "&lt;";
	case '>':
		return "&gt;";
	case '"':
		return "&quot;";
	case '\'':
		return "&#39;";
	default:
		return NULL;
	}
}

int
html_escape_n(struct buf *b, const char *s, size_t n)
{
	size_t run = 0; /* start of the bytes not yet appended */

	for (size_t i = 0; i < n; i++) {
		const char *ent = entity(s[i]);

		if (ent == NULL)
			continue;
		if (buf_append(b, s + run, i - run) < 0 || buf_append(b, ent, strlen(ent)) < 0)
			return -1;
		run = i + 1;
	}
	/* Also for n == 0, so an earlier failure is still reported. */
	return buf_append(b, n > 0 ? s + run : "", n - run);
}

int
html_escape(struct buf *b, const char *s)
{
	return s ? html_escape_n(b, s, strlen(s)) : html_escape_n(b, "", 0);
}

/* 1 when s starts with the lowercase `prefix`, ASCII letters in any case. */
static int
starts_nocase(const char *s, const char *prefix)
{
	for (; *prefix; s++, prefix++) {
		char c = *s >= 'A' && *s <= 'Z' ? (char)(*s - 'A' + 'a') : *s;

		if (c != *prefix)
			return 0;
	}
	return 1;
}

int
html_attr_url_ok(const char *url)
{
	if (url == NULL)
		return 0;
	if (url[0] == '/') {
		if (url[1] == '/' || url[1] == '\\')
			return 0;
	} else if (!starts_nocase(url, "http://") && !starts_nocase(url, "https://")) {
		return 0;
	}
	for (const unsigned char *p = (const unsigned char *)url; *p; p++)
		if (*p < 0x20 || *p == 0x7F || strchr(" \"'`\\<>", *p) != NULL)
			return 0;
	return 1;
}
