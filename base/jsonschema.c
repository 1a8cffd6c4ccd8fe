/* jsonschema.c - a small, strict JSON Schema subset validator. */
#include "base/jsonschema.h"

#include <math.h>
#include <stdarg.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "base/fmt.h"
#include "base/utf8.h"

#define JSV_MAX_DEPTH 32

static int validate(const json_t *schema, const json_t *v, const char *path, int depth,
    struct err *e);

static const char *
type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "object";
	case JSON_ARRAY:
		return "array";
	case JSON_STRING:
		return "string";
	case JSON_INTEGER:
		return "integer";
	case JSON_REAL:
		return "number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "boolean";
	case JSON_NULL:
		return "null";
	}
	return "unknown";
}

/* A schema's own limit with no fraction, printed as digits. */
static int
is_integral(const json_t *v)
{
	if (json_is_integer(v))
		return 1;
	if (json_is_real(v)) {
		double d = json_real_value(v);
		return isfinite(d) && d == floor(d) && fabs(d) < 9.0e15;
	}
	return 0;
}

/* "integer" is a JSON integer only: handlers read it with
 * json_integer_value, which gives 0 for a real such as 60.0 or 1e3. */
static int
type_matches(const char *t, const json_t *v)
{
	if (strcmp(t, "object") == 0)
		return json_is_object(v);
	if (strcmp(t, "array") == 0)
		return json_is_array(v);
	if (strcmp(t, "string") == 0)
		return json_is_string(v);
	if (strcmp(t, "integer") == 0)
		return json_is_integer(v);
	if (strcmp(t, "number") == 0)
		return json_is_number(v);
	if (strcmp(t, "boolean") == 0)
		return json_is_boolean(v);
	if (strcmp(t, "null") == 0)
		return json_is_null(v);
	return 0;
}

/* Appends to a NUL-terminated buffer of size n; drops what does not fit. */
static void
append(char *buf, size_t n, const char *more)
{
	size_t len = strlen(buf);

	if (len < n)
		fmt_cut(buf + len, n - len, "%s", more);
}

static const char *
display_path(const char *path)
{
	return *path ? path : "arguments";
}

static int fail(struct err *e, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int
fail(struct err *e, const char *path, const char *fmt, ...)
{
	char msg[400];
	va_list ap;

	va_start(ap, fmt);
	err_ignore(fmt_vbuf(msg, sizeof(msg), fmt, ap)); /* for people: cut when long */
	va_end(ap);
	err_set_field(e, display_path(path), "%s: %s", display_path(path), msg);
	return -1;
}

/* What v is, for "must be <want>, not <what>". Where an integer was
 * wanted, a real is named by its form: 60.0 is not an integer either. */
static const char *
what_is(const json_t *v, int want_integer)
{
	if (want_integer && json_is_real(v))
		return "a number with a fraction part or exponent";
	return type_name(v);
}

static int
check_type(const json_t *schema, const json_t *v, const char *path, struct err *e)
{
	const json_t *t = json_object_get(schema, "type");
	char want[96] = "";
	int want_integer = 0;
	size_t i;
	const json_t *it;

	if (t == NULL)
		return 0;
	if (json_is_string(t)) {
		if (type_matches(json_string_value(t), v))
			return 0;
		want_integer = strcmp(json_string_value(t), "integer") == 0;
		return fail(e, path, "must be %s, not %s", json_string_value(t),
		    what_is(v, want_integer));
	}
	json_array_foreach(t, i, it) {
		const char *name = json_string_value(it);

		if (name == NULL)
			continue;
		if (type_matches(name, v))
			return 0;
		if (strcmp(name, "integer") == 0)
			want_integer = 1;
		if (want[0] != '\0')
			append(want, sizeof(want), " or ");
		append(want, sizeof(want), name);
	}
	return fail(e, path, "must be %s, not %s", want, what_is(v, want_integer));
}

/* A pattern that fails says what the value is for (the schema's
 * description, when it has one), so the caller learns the fix, not only
 * the rule. */
static int
check_pattern(const char *pattern, const char *what, const char *s, const char *path, struct err *e)
{
	regex_t re;
	int rc;

	if (regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB) != 0) {
		err_set(e, ERR_INTERNAL, "bad pattern in tool schema");
		return -1;
	}
	rc = regexec(&re, s, 0, NULL, 0);
	regfree(&re);
	if (rc != 0 && what != NULL)
		return fail(e, path, "does not match the pattern %s (%s)", pattern, what);
	if (rc != 0)
		return fail(e, path, "does not match the pattern %s", pattern);
	return 0;
}

static int
check_string(const json_t *schema, const json_t *v, const char *path, struct err *e)
{
	const char *s = json_string_value(v);
	size_t bytes = json_string_length(v);
	size_t len;
	const json_t *k;

	if (memchr(s, '\0', bytes) != NULL)
		return fail(e, path, "must not contain a NUL character");
	len = utf8_chars(s, bytes); /* jansson guarantees valid UTF-8 */
	if ((k = json_object_get(schema, "minLength")) && len < (size_t)json_integer_value(k))
		return fail(e, path, "must be at least %lld character%s long",
		    (long long)json_integer_value(k), json_integer_value(k) == 1 ? "" : "s");
	if ((k = json_object_get(schema, "maxLength")) && len > (size_t)json_integer_value(k))
		return fail(e, path, "must be at most %lld character%s long",
		    (long long)json_integer_value(k), json_integer_value(k) == 1 ? "" : "s");
	if ((k = json_object_get(schema, "pattern")) &&
	    check_pattern(json_string_value(k),
		json_string_value(json_object_get(schema, "description")), s, path, e) < 0)
		return -1;
	return 0;
}

/* "must be <bound> <limit>"; limits print exactly: 4194304, not
 * 4.1943e+06. */
static int
fail_limit(struct err *e, const char *path, const char *bound, const json_t *k)
{
	if (is_integral(k))
		return fail(e, path, "must be %s %lld", bound, (long long)json_number_value(k));
	return fail(e, path, "must be %s %.17g", bound, json_number_value(k));
}

static int
check_number(const json_t *schema, const json_t *v, const char *path, struct err *e)
{
	double d = json_number_value(v);
	const json_t *k;

	if ((k = json_object_get(schema, "minimum")) && d < json_number_value(k))
		return fail_limit(e, path, "at least", k);
	if ((k = json_object_get(schema, "maximum")) && d > json_number_value(k))
		return fail_limit(e, path, "at most", k);
	return 0;
}

static int
check_enum(const json_t *schema, const json_t *v, const char *path, struct err *e)
{
	const json_t *en = json_object_get(schema, "enum");
	const json_t *it;
	size_t i;
	char list[256] = "";

	if (en == NULL)
		return 0;
	json_array_foreach(en, i, it) {
		char *txt;

		if (json_equal(it, v))
			return 0;
		txt = json_is_string(it) ? strdup(json_string_value(it)) :
					   json_dumps(it, JSON_COMPACT | JSON_ENCODE_ANY);
		if (txt) {
			if (i > 0)
				append(list, sizeof(list), ", ");
			append(list, sizeof(list), txt);
		}
		free(txt);
	}
	return fail(e, path, "must be one of: %s", list);
}

/* The path only names the place in messages (err.field keeps its first
 * 63 bytes), never looked up again: a cut one still points there. */
static void
child_path(char *out, size_t n, const char *path, const char *key)
{
	fmt_cut(out, n, "%s%s%s", path, *path ? "." : "", key);
}

/* As child_path, for the i-th item of an array. */
static void
item_path(char *out, size_t n, const char *path, size_t i)
{
	fmt_cut(out, n, "%s[%zu]", display_path(path), i);
}

/* An unknown field names the known ones (as many as fit), so a caller
 * that guessed a name sees the right one. */
static int
unknown_field(const json_t *props, const char *sub, struct err *e)
{
	char known[240] = "";
	size_t len = 0;
	const char *key;
	const json_t *val;

	json_object_foreach((json_t *)props, key, val) {
		size_t k = strlen(key);

		(void)val;
		if (len + k + 8 >= sizeof(known)) { /* room for ", ..." after it */
			memcpy(known + len, ", ...", 6);
			break;
		}
		if (len > 0) {
			memcpy(known + len, ", ", 2);
			len += 2;
		}
		memcpy(known + len, key, k + 1);
		len += k;
	}
	if (len == 0)
		err_set_field(e, sub, "%s: unknown field (none are taken here)", sub);
	else
		err_set_field(e, sub, "%s: unknown field (the fields are: %s)", sub, known);
	return -1;
}

static int
check_object(const json_t *schema, const json_t *v, const char *path, int depth, struct err *e)
{
	const json_t *props = json_object_get(schema, "properties");
	const json_t *addl = json_object_get(schema, "additionalProperties");
	const json_t *names = json_object_get(schema, "propertyNames");
	const json_t *req = json_object_get(schema, "required");
	const json_t *k, *val;
	const char *key;
	size_t i;
	char sub[256];

	if ((k = json_object_get(schema, "maxProperties")) &&
	    json_object_size(v) > (size_t)json_integer_value(k))
		return fail(e, path, "must have at most %lld entries",
		    (long long)json_integer_value(k));
	json_array_foreach(req, i, k) {
		if (json_object_get(v, json_string_value(k)) == NULL) {
			child_path(sub, sizeof(sub), path, json_string_value(k));
			err_set_field(e, sub, "%s: required field is missing", sub);
			return -1;
		}
	}
	json_object_foreach((json_t *)v, key, val) {
		const json_t *ps = props ? json_object_get(props, key) : NULL;
		json_t *keystr;
		int rc;

		child_path(sub, sizeof(sub), path, key);
		if (names) {
			keystr = json_string(key);
			rc = keystr ? validate(names, keystr, sub, depth + 1, e) : -1;
			json_decref(keystr);
			if (rc < 0) {
				/* Report the bad name itself, not its value. */
				if (e->kind == ERR_NONE)
					err_set(e, ERR_INTERNAL, "out of memory");
				return -1;
			}
		}
		if (ps == NULL) {
			if (json_is_false(addl))
				return unknown_field(props, sub, e);
			if (json_is_object(addl))
				ps = addl;
		}
		if (ps && validate(ps, val, sub, depth + 1, e) < 0)
			return -1;
	}
	return 0;
}

static int
check_array(const json_t *schema, const json_t *v, const char *path, int depth, struct err *e)
{
	const json_t *items = json_object_get(schema, "items");
	const json_t *k, *it;
	size_t i;
	char sub[256];

	if ((k = json_object_get(schema, "minItems")) &&
	    json_array_size(v) < (size_t)json_integer_value(k))
		return fail(e, path, "must have at least %lld items",
		    (long long)json_integer_value(k));
	if ((k = json_object_get(schema, "maxItems")) &&
	    json_array_size(v) > (size_t)json_integer_value(k))
		return fail(e, path, "must have at most %lld items",
		    (long long)json_integer_value(k));
	if (items == NULL)
		return 0;
	json_array_foreach(v, i, it) {
		item_path(sub, sizeof(sub), path, i);
		if (validate(items, it, sub, depth + 1, e) < 0)
			return -1;
	}
	return 0;
}

/* anyOf: the value matches one of the branches at least; the first
 * branch's error is the one reported when none does. */
static int
check_any_of(const json_t *schema, const json_t *v, const char *path, int depth, struct err *e)
{
	const json_t *any = json_object_get(schema, "anyOf"), *branch;
	struct err first, scratch;
	size_t i;

	if (!json_is_array(any) || json_array_size(any) == 0)
		return 0;
	err_clear(&first);
	json_array_foreach(any, i, branch) {
		err_clear(&scratch);
		if (validate(branch, v, path, depth + 1, &scratch) == 0)
			return 0;
		if (i == 0)
			first = scratch;
	}
	if (e->kind == ERR_NONE)
		*e = first; /* the first error wins */
	return -1;
}

static int
validate(const json_t *schema, const json_t *v, const char *path, int depth, struct err *e)
{
	if (depth > JSV_MAX_DEPTH)
		return fail(e, path, "is nested too deeply");
	if (!json_is_object(schema))
		return 0;
	if (check_type(schema, v, path, e) < 0 || check_enum(schema, v, path, e) < 0 ||
	    check_any_of(schema, v, path, depth, e) < 0)
		return -1;
	switch (json_typeof(v)) {
	case JSON_STRING:
		return check_string(schema, v, path, e);
	case JSON_INTEGER:
	case JSON_REAL:
		return check_number(schema, v, path, e);
	case JSON_OBJECT:
		return check_object(schema, v, path, depth, e);
	case JSON_ARRAY:
		return check_array(schema, v, path, depth, e);
	default:
		return 0;
	}
}

/* NUL is refused in every string, also where no sub-schema applies. */
static int
check_no_nul(const json_t *v, const char *path, int depth, struct err *e)
{
	char sub[256];
	const char *key;
	const json_t *it;
	size_t i;

	if (depth > JSV_MAX_DEPTH)
		return fail(e, path, "is nested too deeply");
	switch (json_typeof(v)) {
	case JSON_STRING:
		if (memchr(json_string_value(v), '\0', json_string_length(v)) != NULL)
			return fail(e, path, "must not contain a NUL character");
		return 0;
	case JSON_OBJECT:
		json_object_foreach((json_t *)v, key, it) {
			child_path(sub, sizeof(sub), path, key);
			if (check_no_nul(it, sub, depth + 1, e) < 0)
				return -1;
		}
		return 0;
	case JSON_ARRAY:
		json_array_foreach(v, i, it) {
			item_path(sub, sizeof(sub), path, i);
			if (check_no_nul(it, sub, depth + 1, e) < 0)
				return -1;
		}
		return 0;
	default:
		return 0;
	}
}

int
jsv_validate(const json_t *schema, const json_t *value, const char *path, struct err *e)
{
	if (path == NULL)
		path = "";
	if (validate(schema, value, path, 0, e) < 0)
		return -1;
	return check_no_nul(value, path, 0, e);
}

/* Copies of $defs entries are made so every published schema stands
 * alone; sibling keys of the $ref are laid over the copy. */
static json_t *
resolve_refs(const json_t *node, const json_t *defs, int depth)
{
	json_t *out;

	if (depth > JSV_MAX_DEPTH)
		return NULL;
	if (json_is_array(node)) {
		size_t i;
		json_t *it;
		out = json_array();
		json_array_foreach(node, i, it) {
			json_t *r = resolve_refs(it, defs, depth + 1);
			if (r == NULL) {
				json_decref(out);
				return NULL;
			}
			json_array_append_new(out, r);
		}
		return out;
	}
	if (!json_is_object(node))
		return json_deep_copy(node);
	const json_t *ref = json_object_get(node, "$ref");
	if (ref) {
		const char *s = json_string_value(ref);
		const json_t *target;
		if (s == NULL || strncmp(s, "#/$defs/", 8) != 0 ||
		    (target = json_object_get(defs, s + 8)) == NULL)
			return NULL;
		out = resolve_refs(target, defs, depth + 1);
	} else {
		out = json_object();
	}
	if (out == NULL)
		return NULL;
	const char *key;
	json_t *val;
	json_object_foreach((json_t *)node, key, val) {
		if (strcmp(key, "$ref") == 0)
			continue;
		json_t *r = resolve_refs(val, defs, depth + 1);
		if (r == NULL) {
			json_decref(out);
			return NULL;
		}
		json_object_set_new(out, key, r);
	}
	return out;
}

json_t *
jsv_resolve_refs(const json_t *node, const json_t *defs)
{
	return resolve_refs(node, defs, 0);
}
