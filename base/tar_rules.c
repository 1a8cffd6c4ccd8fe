/* tar_rules.c - the rules a tar member's name, link target and type keep
 * (base/tar.h lists them), for the filter and the header writer alike. */
#include "base/tar_int.h"

#include <string.h>

#include "base/fmt.h"

/* Drops a leading "./" (repeated) and a lone ".". */
void
tar_name_clean(const char **s, size_t *len)
{
	while (*len >= 2 && (*s)[0] == '.' && (*s)[1] == '/') {
		*s += 2;
		*len -= 2;
	}
	if (*len == 1 && (*s)[0] == '.')
		*len = 0;
}

/* NULL when s (len bytes) is a clean relative name, else the rule it
 * breaks, worded with `what` ("name"). */
const char *
tar_name_check(const char *s, size_t len, int is_dir, const char *what, char *why, size_t cap)
{
	size_t start = 0;

	if (len == 0) {
		fmt_cut(why, cap, "an empty %s", what);
		return why;
	}
	if (len > TAR_MAX_NAME) {
		fmt_cut(why, cap, "a %s longer than %d bytes", what, TAR_MAX_NAME);
		return why;
	}
	if (memchr(s, '\0', len) != NULL) {
		fmt_cut(why, cap, "a NUL in a %s", what);
		return why;
	}
	if (s[0] == '/') {
		fmt_cut(why, cap, "an absolute %s", what);
		return why;
	}
	for (size_t i = 0; i <= len; i++) {
		if (i < len && s[i] != '/')
			continue;
		if (i == start && !(is_dir && i == len && len > 0)) {
			fmt_cut(why, cap, "an empty component in a %s", what);
			return why;
		}
		if (i - start == 2 && s[start] == '.' && s[start + 1] == '.') {
			fmt_cut(why, cap, "\"..\" in a %s", what);
			return why;
		}
		start = i + 1;
	}
	return NULL;
}

/* NULL when the symlink `name` -> `t` stays inside the archive root,
 * resolved lexically from the link's directory, and its ".." components
 * all come first (they climb only the link's own directory, which is a
 * real one by base/tar_seen.h's rules); else the rule broken. A target
 * that leaves the root is named so before one with a late "..". */
const char *
tar_link_check(const char *name, size_t nlen, const char *t, size_t tlen)
{
	size_t depth = 0, start = 0;
	int down = 0; /* a name component came before */
	const char *late = NULL;

	if (tlen == 0)
		return "an empty symlink target";
	if (tlen > TAR_MAX_NAME)
		return "a symlink target longer than 4095 bytes";
	if (memchr(t, '\0', tlen) != NULL)
		return "a NUL in a symlink target";
	if (t[0] == '/')
		return "an absolute symlink target";
	/* The link's directory: its name's components but the last (a
	 * checked name has no "..", no empty component). */
	for (size_t i = 0; i < nlen; i++) {
		if (name[i] != '/')
			continue;
		if (!(i - start == 1 && name[start] == '.'))
			depth++;
		start = i + 1;
	}
	start = 0;
	for (size_t i = 0; i <= tlen; i++) {
		size_t n;

		if (i < tlen && t[i] != '/')
			continue;
		n = i - start;
		if (n == 2 && t[start] == '.' && t[start + 1] == '.') {
			if (depth == 0)
				return "a symlink target outside the archive";
			depth--;
			if (down)
				late = "a symlink target with \"..\" after a name";
		} else if (n > 0 && !(n == 1 && t[start] == '.')) {
			depth++;
			down = 1;
		}
		start = i + 1;
	}
	return late;
}

/* s shown in a message: printable ASCII, others as '?', cut. */
void
tar_name_show(char *out, size_t cap, const char *s, size_t len)
{
	size_t k = 0, n = len < TAR_SHOW_NAME ? len : TAR_SHOW_NAME;

	if (n > TAR_MAX_NAME)
		n = TAR_MAX_NAME;
	for (size_t i = 0; i < n && k + 1 < cap; i++) {
		unsigned char c = (unsigned char)s[i];

		out[k++] = c >= 0x20 && c < 0x7f && c != '"' && c != '\\' ? (char)c : '?';
	}
	if (len > n && k + 4 < cap) {
		memcpy(out + k, "...", 3);
		k += 3;
	}
	out[k] = '\0';
}

const char *
tar_type_rule(char t, int sparse, char *why, size_t cap)
{
	switch (t) {
	case '0':
	case '\0':
	case '7':
		return sparse ? "a sparse file" : NULL;
	case '1':
	case '2':
	case '5':
		return NULL;
	case '3':
	case '4':
		return "a device node";
	case '6':
		return "a FIFO";
	case 'S':
		return "a sparse file";
	case 'V':
		return "a volume header";
	case 'M':
		return "a multivolume continuation";
	default:
		if (t >= 0x21 && t < 0x7f)
			fmt_cut(why, cap, "an unknown member type '%c'", t);
		else
			fmt_cut(why, cap, "an unknown member type 0x%02x", (unsigned char)t);
		return why;
	}
}
