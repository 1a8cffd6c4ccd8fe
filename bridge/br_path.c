/* br_path.c - path rules of the sync tools. */
#include "bridge/br_path.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "base/fmt.h"

#define BR_EXCL_MAX 64

struct br_excl {
	size_t n;
	char *pat[BR_EXCL_MAX];
	int anchored[BR_EXCL_MAX]; /* the pattern holds '/' */
};

static const char *const default_excludes[] = { ".git", "node_modules", "__pycache__" };

static int
excl_add(struct br_excl *x, const char *p, struct err *e)
{
	int rooted = *p == '/';
	size_t len;
	char *s;

	while (*p == '/')
		p++;
	len = strlen(p);
	while (len > 0 && p[len - 1] == '/')
		len--;
	if (len == 0) {
		err_set_field(e, "excludes", "excludes: a pattern must name something");
		return -1;
	}
	if (x->n >= BR_EXCL_MAX) {
		err_set_field(e, "excludes", "excludes: at most %d patterns", BR_EXCL_MAX);
		return -1;
	}
	s = strndup(p, len);
	if (s == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return -1;
	}
	x->pat[x->n] = s;
	x->anchored[x->n] = rooted || strchr(s, '/') != NULL;
	x->n++;
	return 0;
}

struct br_excl *
br_excl_new(const json_t *patterns, struct err *e)
{
	struct br_excl *x = calloc(1, sizeof(*x));
	size_t i;
	json_t *it;
	int rc = 0;

	if (x == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	if (patterns == NULL) {
		for (i = 0; i < sizeof(default_excludes) / sizeof(default_excludes[0]) && rc == 0;
		     i++)
			rc = excl_add(x, default_excludes[i], e);
	} else {
		json_array_foreach(patterns, i, it) {
			if (!json_is_string(it)) {
				err_set_field(e, "excludes", "excludes: patterns are strings");
				rc = -1;
			}
			if (rc < 0 || (rc = excl_add(x, json_string_value(it), e)) < 0)
				break;
		}
	}
	if (rc < 0) {
		br_excl_free(x);
		return NULL;
	}
	return x;
}

void
br_excl_free(struct br_excl *x)
{
	if (x == NULL)
		return;
	for (size_t i = 0; i < x->n; i++)
		free(x->pat[i]);
	free(x);
}

void
br_excl_names(const struct br_excl *x, char *out, size_t n)
{
	size_t len = 0, count = 0;

	if (n == 0)
		return;
	out[0] = '\0';
	for (size_t i = 0; i < x->n && count < 32; i++) {
		size_t k = strlen(x->pat[i]);

		int plain = 1;

		for (size_t j = 0; j < k; j++)
			plain &= (unsigned char)x->pat[i][j] >= 0x20 && x->pat[i][j] != 0x7f &&
			    x->pat[i][j] != ',';
		if (x->anchored[i] || k == 0 || k > 255 || !plain || len + (len > 0) + k + 1 > n)
			continue;
		if (len > 0)
			out[len++] = ',';
		memcpy(out + len, x->pat[i], k + 1);
		len += k;
		count++;
	}
}

int
br_excl_match(const struct br_excl *x, const char *rel)
{
	char prefix[4096];
	size_t len = strlen(rel);

	if (len >= sizeof(prefix))
		len = sizeof(prefix) - 1;
	/* Each directory on the way down, then rel itself. */
	for (size_t end = 0; end <= len; end++) {
		if (end < len && rel[end] != '/')
			continue;
		size_t start = end;
		while (start > 0 && rel[start - 1] != '/')
			start--;
		memcpy(prefix, rel, end);
		prefix[end] = '\0';
		for (size_t i = 0; i < x->n; i++) {
			const char *subject = x->anchored[i] ? prefix : prefix + start;
			if (fnmatch(x->pat[i], subject, x->anchored[i] ? FNM_PATHNAME : 0) == 0)
				return 1;
		}
	}
	return 0;
}

int
br_path_within(const char *root, const char *path)
{
	size_t n = strlen(root);

	if (strcmp(root, "/") == 0)
		return path[0] == '/';
	return strncmp(root, path, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

int
br_path_rel_ok(const char *rel)
{
	const char *p = rel;

	if (*rel == '\0' || *rel == '/')
		return 0;
	while (*p) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);
		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return 0;
		if (slash == NULL)
			break;
		p = slash + 1;
		if (*p == '\0')
			return 0; /* trailing slash */
	}
	return 1;
}

const char *
br_path_below(const char *root, const char *entry)
{
	size_t n = strlen(root);
	const char *rest;

	if (strcmp(root, "/") == 0)
		rest = entry[0] == '/' ? entry + 1 : NULL;
	else if (strncmp(root, entry, n) == 0 && entry[n] == '/')
		rest = entry + n + 1;
	else
		rest = NULL;
	return rest != NULL && br_path_rel_ok(rest) ? rest : NULL;
}

int
br_path_join(const char *dir, const char *rel, char *out, size_t n)
{
	if (strcmp(dir, "/") == 0)
		return fmt_buf(out, n, "/%s", rel);
	return fmt_buf(out, n, "%s/%s", dir, rel);
}

int
br_path_sandbox_dir(const char *p, char *out, size_t n, struct err *e)
{
	size_t k = fmt_buf(out, n, "%s", p[0] == '/' ? "/" : BR_SANDBOX_HOME) < 0 ? n : strlen(out);

	while (k < n && *p) {
		const char *slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - p) : strlen(p);
		if (len == 2 && p[0] == '.' && p[1] == '.') {
			err_set_field(e, "sandbox_path", "sandbox_path: '..' is not allowed");
			return -1;
		}
		if (len > 0 && !(len == 1 && p[0] == '.')) {
			int need_slash = k > 1; /* not after the root's own '/' */
			if (k + (size_t)need_slash + len + 1 > n) {
				k = n;
				break;
			}
			if (need_slash)
				out[k++] = '/';
			memcpy(out + k, p, len);
			k += len;
			out[k] = '\0';
		}
		p = slash ? slash + 1 : p + len;
	}
	if (k >= n) {
		err_set_field(e, "sandbox_path", "sandbox_path: too long");
		return -1;
	}
	return 0;
}

int
br_path_depth(const char *rel)
{
	int d = 1;

	for (; *rel; rel++)
		d += *rel == '/';
	return d;
}

int
br_sh_quote(const char *s, char *out, size_t n)
{
	size_t k = 0;

	if (n < 3)
		return -1;
	out[k++] = '\'';
	for (; *s; s++) {
		if (*s == '\'') {
			/* close, an escaped quote, reopen */
			if (k + 4 >= n)
				return -1;
			memcpy(out + k, "'\\''", 4);
			k += 4;
		} else {
			if (k + 1 >= n)
				return -1;
			out[k++] = *s;
		}
	}
	if (k + 2 > n)
		return -1;
	out[k++] = '\'';
	out[k] = '\0';
	return (int)k;
}
