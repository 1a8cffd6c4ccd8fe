/* br_url.c - base URL normalisation and URL building. */
#include "bridge/br_url.h"

#include <stdlib.h>
#include <string.h>

#include "base/fmt.h"

struct br_url {
	char buf[BR_URL_MAX];
	size_t len;
	int has_query;
	int overflow;
};

static int
has_prefix(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

int
br_url_base(const char *origin, char *out, size_t n, int *had_v1, struct err *e)
{
	const char *host, *path;
	size_t len;

	*had_v1 = 0;
	if (origin == NULL || *origin == '\0') {
		err_set(e, ERR_INVALID, "AAS_BASE_URL is empty");
		return -1;
	}
	if (has_prefix(origin, "http://"))
		host = origin + 7;
	else if (has_prefix(origin, "https://"))
		host = origin + 8;
	else {
		err_set(e, ERR_INVALID, "AAS_BASE_URL must start with http:// or https://");
		return -1;
	}
	len = strlen(origin);
	while (len > (size_t)(host - origin) && origin[len - 1] == '/')
		len--;
	path = memchr(host, '/', len - (size_t)(host - origin));
	if (path == host || (path == NULL && len == (size_t)(host - origin))) {
		err_set(e, ERR_INVALID, "AAS_BASE_URL has no host");
		return -1;
	}
	if (strpbrk(origin, "?#@ \t\r\n") != NULL) {
		err_set(e, ERR_INVALID,
		    "AAS_BASE_URL must be an origin such as "
		    "http://127.0.0.1:8080 (no user, query or fragment)");
		return -1;
	}
	if (path != NULL) {
		size_t plen = len - (size_t)(path - origin);
		if (plen != 3 || strncmp(path, "/v1", 3) != 0) {
			err_set(e, ERR_INVALID,
			    "AAS_BASE_URL must be an origin such as "
			    "http://127.0.0.1:8080, without a path (/v1 is added)");
			return -1;
		}
		*had_v1 = 1;
	}
	if (fmt_buf(out, n, "%.*s%s", (int)len, origin, path != NULL ? "" : "/v1") < 0) {
		err_set(e, ERR_INVALID, "AAS_BASE_URL is too long");
		return -1;
	}
	return 0;
}

struct br_url *
br_url_new(const char *base)
{
	struct br_url *u = calloc(1, sizeof(*u));

	if (u == NULL)
		return NULL;
	if (fmt_buf(u->buf, sizeof(u->buf), "%s", base) < 0)
		u->overflow = 1;
	else
		u->len = strlen(u->buf);
	return u;
}

void
br_url_free(struct br_url *u)
{
	free(u);
}

static void
put_raw(struct br_url *u, const char *s)
{
	size_t n = strlen(s);

	if (u->overflow || u->len + n >= sizeof(u->buf)) {
		u->overflow = 1;
		return;
	}
	memcpy(u->buf + u->len, s, n + 1);
	u->len += n;
}

/* RFC 3986 unreserved characters pass; everything else is %XX. */
static void
put_escaped(struct br_url *u, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";

	for (; *s && !u->overflow; s++) {
		unsigned char c = (unsigned char)*s;
		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '.' || c == '_' || c == '~') {
			char one[2] = { (char)c, '\0' };
			put_raw(u, one);
		} else {
			char three[4] = { '%', hex[c >> 4], hex[c & 15], '\0' };
			put_raw(u, three);
		}
	}
}

void
br_url_seg(struct br_url *u, const char *seg)
{
	if (u == NULL)
		return;
	if (u->has_query) {
		u->overflow = 1; /* a path after the query is a bug */
		return;
	}
	put_raw(u, "/");
	put_escaped(u, seg);
}

void
br_url_query(struct br_url *u, const char *key, const char *value)
{
	if (u == NULL || value == NULL)
		return;
	put_raw(u, u->has_query ? "&" : "?");
	u->has_query = 1;
	put_escaped(u, key);
	put_raw(u, "=");
	put_escaped(u, value);
}

void
br_url_query_ll(struct br_url *u, const char *key, long long v)
{
	char num[32];

	if (u == NULL)
		return;
	if (fmt_buf(num, sizeof(num), "%lld", v) < 0)
		u->overflow = 1;
	else
		br_url_query(u, key, num);
}

void
br_url_query_json(struct br_url *u, const char *key, const json_t *v)
{
	if (json_is_string(v))
		br_url_query(u, key, json_string_value(v));
	else if (json_is_integer(v))
		br_url_query_ll(u, key, (long long)json_integer_value(v));
	else if (json_is_boolean(v))
		br_url_query(u, key, json_is_true(v) ? "true" : "false");
}

const char *
br_url_str(const struct br_url *u, struct err *e)
{
	if (u == NULL || u->overflow) {
		err_set(e, ERR_INVALID, "request URL longer than %d bytes", BR_URL_MAX);
		return NULL;
	}
	return u->buf;
}
