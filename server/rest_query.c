/* rest_query.c - query strings of the REST API. */
#include "server/rest_query.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/num.h"

/* Decodes [s, s+n) into out (room for n + 1 bytes). Returns the decoded
 * length, or -1 on a bad escape or an escaped NUL. */
static long
decode(const char *s, size_t n, char *out)
{
	size_t j = 0;

	for (size_t i = 0; i < n; i++) {
		if (s[i] == '+') {
			out[j++] = ' ';
		} else if (s[i] == '%') {
			int hi, lo;
			if (i + 2 >= n)
				return -1;
			hi = num_hex_digit(s[i + 1]);
			lo = num_hex_digit(s[i + 2]);
			if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
				return -1;
			out[j++] = (char)(hi * 16 + lo);
			i += 2;
		} else {
			out[j++] = s[i];
		}
	}
	out[j] = '\0';
	return (long)j;
}

json_t *
rest_query_parse_body(const char *body, size_t len, struct err *e)
{
	char *copy;
	json_t *form;

	if (len > 0 && memchr(body, '\0', len) != NULL) {
		err_set_field(e, "form", "the form holds a NUL byte");
		return NULL;
	}
	copy = malloc(len + 1);
	if (copy == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	if (len > 0)
		memcpy(copy, body, len);
	copy[len] = '\0';
	form = rest_query_parse(copy, e);
	free(copy);
	return form;
}

json_t *
rest_query_parse(const char *qs, struct err *e)
{
	json_t *out = json_object();
	const char *p = qs ? qs : "";
	char *name = NULL, *value = NULL;
	size_t count = 0;

	if (out == NULL)
		goto oom;
	while (*p) {
		size_t len = strcspn(p, "&");
		const char *eq = memchr(p, '=', len);
		size_t nlen = eq ? (size_t)(eq - p) : len;
		size_t vlen = eq ? len - nlen - 1 : 0;
		long dn, dv;
		json_t *v;

		if (len == 0) {
			p++;
			continue;
		}
		name = malloc(nlen + 1);
		value = malloc(vlen + 1);
		if (name == NULL || value == NULL)
			goto oom;
		dn = decode(p, nlen, name);
		if (dn <= 0) {
			if (dn == 0)
				err_set_field(e, "query", "query string: a parameter has no name");
			else
				err_set_field(e, "query",
				    "query string: a parameter name is badly encoded");
			goto fail;
		}
		if (++count > REST_QUERY_MAX_PARAMS) {
			err_set_field(e, "query", "query string: more than %d parameters",
			    REST_QUERY_MAX_PARAMS);
			goto fail;
		}
		if (json_object_get(out, name) != NULL) {
			err_set_field(e, name, "%.60s: given more than once", name);
			goto fail;
		}
		dv = decode(eq ? eq + 1 : "", vlen, value);
		if (dv < 0) {
			err_set_field(e, name, "%.60s: bad %%-encoding", name);
			goto fail;
		}
		v = json_stringn(value, (size_t)dv);
		if (v == NULL || json_object_set_new(out, name, v) < 0) {
			err_set_field(e, name, "%.60s: not valid UTF-8", name);
			goto fail;
		}
		free(name);
		free(value);
		name = value = NULL;
		p += len;
		if (*p == '&')
			p++;
	}
	return out;
oom:
	err_set(e, ERR_INTERNAL, "out of memory");
fail:
	free(name);
	free(value);
	json_decref(out);
	return NULL;
}

int
rest_query_int(const char *s, long long *out)
{
	return num_parse_ll(s, out);
}

static int
allowed_name(const char *const *allowed, const char *name)
{
	for (; allowed && *allowed; allowed++)
		if (strcmp(*allowed, name) == 0)
			return 1;
	return 0;
}

/* The JSON type a property takes: "integer", "boolean" or "string". */
static const char *
prop_type(const json_t *schema, const char *name)
{
	const json_t *t = json_object_get(json_object_get(json_object_get(schema, "properties"),
					      name),
	    "type");
	size_t i;
	const json_t *it;

	if (json_is_string(t))
		return json_string_value(t);
	json_array_foreach(t, i, it) {
		if (json_is_string(it) && strcmp(json_string_value(it), "null") != 0)
			return json_string_value(it);
	}
	return "string";
}

json_t *
rest_query_args(const json_t *query, const char *const *allowed, const json_t *schema,
    struct err *e)
{
	json_t *out = json_object();
	const char *name;
	json_t *val;

	if (out == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	json_object_foreach((json_t *)query, name, val) {
		const char *s = json_string_value(val);
		const char *type = prop_type(schema, name);
		json_t *v;
		long long n;

		if (!allowed_name(allowed, name)) {
			err_set_field(e, name, "%.60s: unknown query parameter", name);
			goto fail;
		}
		if (strcmp(type, "integer") == 0) {
			if (rest_query_int(s, &n) < 0) {
				err_set_field(e, name, "%.60s: not an integer: '%.40s'", name, s);
				goto fail;
			}
			v = json_integer((json_int_t)n);
		} else if (strcmp(type, "boolean") == 0) {
			if (strcmp(s, "true") != 0 && strcmp(s, "false") != 0) {
				err_set_field(e, name, "%.60s: must be true or false", name);
				goto fail;
			}
			v = json_boolean(strcmp(s, "true") == 0);
		} else {
			v = json_incref(val);
		}
		if (json_object_set_new(out, name, v) < 0) {
			err_set(e, ERR_INTERNAL, "out of memory");
			goto fail;
		}
	}
	return out;
fail:
	json_decref(out);
	return NULL;
}
