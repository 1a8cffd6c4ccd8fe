/* task_cut.c - shortening a task's result to its cap. */
#include "service/task_cut.h"

#include <stdlib.h>
#include <string.h>

#include "base/fmt.h"

#define CUT_ROUNDS 32   /* shortenings tried before the result is replaced */
#define CUT_KEEP_MIN 64 /* strings this short are left whole */
#define CUT_SLACK 1024  /* room kept for the note and the marker */
#define CUT_FIELDS 8    /* cut places named in the marker */
#define CUT_PATH 128
#define CUT_STRINGS 64 /* strings cut in one round */

/* The longest strings of a result, longest kept when there are more. A
 * path only names the place for people in the marker, never looked up
 * again: a cut one still points there. */
struct strs {
	size_t n;
	struct str {
		json_t *v;
		size_t len;
		char path[CUT_PATH];
	} at[CUT_STRINGS];
};

static void
add_str(struct strs *l, json_t *v, const char *path)
{
	size_t len = json_string_length(v), min = 0;

	if (len <= CUT_KEEP_MIN)
		return;
	if (l->n == CUT_STRINGS) {
		for (size_t i = 1; i < l->n; i++)
			if (l->at[i].len < l->at[min].len)
				min = i;
		if (l->at[min].len >= len)
			return;
	} else {
		min = l->n++;
	}
	l->at[min].v = v;
	l->at[min].len = len;
	fmt_cut(l->at[min].path, sizeof(l->at[min].path), "%s", path);
}

/* The strings under `v` (at `path`) into l. */
static void
find_strings(json_t *v, const char *path, struct strs *l)
{
	char sub[CUT_PATH];
	const char *k;
	json_t *x;
	size_t i;

	if (json_is_string(v)) {
		add_str(l, v, path);
	} else if (json_is_object(v)) {
		json_object_foreach(v, k, x) {
			fmt_cut(sub, sizeof(sub), "%s%s%s", path, *path ? "." : "", k);
			find_strings(x, sub, l);
		}
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, x) {
			fmt_cut(sub, sizeof(sub), "%s[%zu]", path, i);
			find_strings(x, sub, l);
		}
	}
}

/* Sets s to the first `keep` bytes of v, cut back to a UTF-8 boundary. */
static int
set_prefix(json_t *s, const char *v, size_t keep)
{
	while (keep > 0 && ((unsigned char)v[keep] & 0xC0) == 0x80)
		keep--;
	return json_string_setn(s, v, keep);
}

/* The content's first text item made the JSON of structuredContent again. */
static void
resync_text(json_t *res, json_t *structured)
{
	json_t *first = json_array_get(json_object_get(res, "content"), 0);
	char *text;

	if (structured == NULL || !json_is_string(json_object_get(first, "text")))
		return;
	text = json_dumps(structured, JSON_COMPACT);
	if (text)
		json_object_set_new(first, "text", json_string(text));
	free(text);
}

/* The note and the marker of a cut result. */
static void
mark(json_t *res, size_t orig, size_t cap, json_t *fields)
{
	json_t *content = json_object_get(res, "content"), *meta = json_object_get(res, "_meta");
	char note[400];

	fmt_cut(note, sizeof(note),
	    "[This result was cut: its JSON had %zu bytes, more than the %zu a task keeps "
	    "(AAS_TASK_RESULT_MAX_BYTES); the longest strings were shortened. Ask for less "
	    "output, or write it to a file and read the file in parts.]",
	    orig, cap);
	if (!json_is_array(content)) {
		content = json_array();
		json_object_set_new(res, "content", content);
	}
	json_array_append_new(content, json_pack("{s:s,s:s}", "type", "text", "text", note));
	if (!json_is_object(meta)) {
		meta = json_object();
		json_object_set_new(res, "_meta", meta);
	}
	json_object_set_new(meta, TASK_CUT_META,
	    json_pack("{s:I,s:I,s:O}", "bytes", (json_int_t)orig, "limit", (json_int_t)cap,
		"fields", fields));
}

/* A result too unlike the usual shape to shorten: its note alone. */
static char *
replaced(size_t orig, size_t cap, json_t *fields)
{
	json_t *res = json_pack("{s:[],s:b}", "content", "isError", 1);
	char *text = NULL;

	if (res) {
		mark(res, orig, cap, fields);
		text = json_dumps(res, JSON_COMPACT);
	}
	json_decref(res);
	return text;
}

/* The compact JSON's length of res (its text resynced), or 0. */
static size_t
json_len(json_t *res, json_t *structured)
{
	char *text;
	size_t n;

	resync_text(res, structured);
	text = json_dumps(res, JSON_COMPACT);
	n = text ? strlen(text) : 0;
	free(text);
	return n;
}

/* Notes where a cut was, once, up to CUT_FIELDS places. */
static void
note_field(json_t *fields, const char *path)
{
	size_t i;
	json_t *f;

	if (json_array_size(fields) >= CUT_FIELDS || *path == '\0')
		return;
	json_array_foreach(fields, i, f)
		if (strcmp(json_string_value(f), path) == 0)
			return;
	json_array_append_new(fields, json_string(path));
}

/* Bytes the strings lose when each is cut to `keep`. */
static size_t
dropped(const struct strs *l, size_t keep)
{
	size_t d = 0;

	for (size_t i = 0; i < l->n; i++)
		d += l->at[i].len > keep ? l->at[i].len - keep : 0;
	return d;
}

/* The longest length every string may keep so that `drop` bytes go. */
static size_t
level(const struct strs *l, size_t drop)
{
	size_t lo = CUT_KEEP_MIN, hi = 0;

	for (size_t i = 0; i < l->n; i++)
		hi = l->at[i].len > hi ? l->at[i].len : hi;
	if (dropped(l, lo) <= drop)
		return lo;
	while (lo + 1 < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (dropped(l, mid) >= drop)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* Cuts the longest strings under `work` to one length, so that res's
 * JSON loses about `over` bytes: what the strings' bytes take in the JSON
 * is measured (the JSON with them empty). The new length of the JSON, or
 * 0 when nothing is left to shorten (or out of memory). */
static size_t
cut_round(json_t *res, json_t *structured, json_t *work, size_t len, size_t over, json_t *fields)
{
	struct strs l = { 0 };
	char *saved[CUT_STRINGS] = { NULL };
	size_t without, total = 0, keep, out = 0;

	find_strings(work, structured ? "structuredContent" : "", &l);
	for (size_t i = 0; i < l.n; i++) {
		if ((saved[i] = malloc(l.at[i].len + 1)) == NULL)
			goto out;
		memcpy(saved[i], json_string_value(l.at[i].v), l.at[i].len + 1);
		total += l.at[i].len;
	}
	if (l.n == 0)
		goto out;
	for (size_t i = 0; i < l.n; i++)
		json_string_set(l.at[i].v, "");
	without = json_len(res, structured);
	/* The strings' bytes to drop for `over` bytes of JSON, rounded up,
	 * and a character's more for each. */
	keep = level(&l,
	    (size_t)(((unsigned long long)over * total + (len - without) - 1) /
		(len > without ? len - without : 1)) +
		4 * l.n);
	for (size_t i = 0; i < l.n; i++) {
		if (l.at[i].len > keep)
			note_field(fields, l.at[i].path);
		if (set_prefix(l.at[i].v, saved[i], l.at[i].len > keep ? keep : l.at[i].len) < 0)
			goto out;
	}
	out = json_len(res, structured);
out:
	for (size_t i = 0; i < l.n; i++)
		free(saved[i]);
	return out;
}

/* Shortens strings of `res` (under structuredContent when it has one)
 * until its JSON fits `cap`, marked; or its note alone. */
static char *
shrink(json_t *res, json_t *structured, size_t orig, size_t cap, json_t *fields)
{
	size_t len = orig, target = cap - CUT_SLACK;
	char *text;

	for (int round = 0; round < CUT_ROUNDS && len > target; round++)
		len = cut_round(res, structured, structured ? structured : res, len, len - target,
		    fields);
	if (len == 0 || len > target)
		return replaced(orig, cap, fields);
	mark(res, orig, cap, fields);
	text = json_dumps(res, JSON_COMPACT);
	if (text == NULL || strlen(text) <= cap)
		return text;
	free(text);
	return replaced(orig, cap, fields);
}

char *
task_cut(const json_t *result, size_t cap, size_t *len, int *cut)
{
	char *text = json_dumps(result, JSON_COMPACT);
	json_t *res = NULL, *fields = NULL;
	size_t orig;

	*cut = 0;
	if (text == NULL || (orig = strlen(text)) <= cap)
		goto out;
	free(text);
	text = NULL;
	*cut = 1;
	res = json_deep_copy(result);
	fields = json_array();
	if (res == NULL || fields == NULL)
		goto out;
	if (cap < TASK_CUT_MIN_CAP)
		cap = TASK_CUT_MIN_CAP;
	{
		json_t *sc = json_object_get(res, "structuredContent");

		text = shrink(res, json_is_object(sc) ? sc : NULL, orig, cap, fields);
	}
out:
	json_decref(res);
	json_decref(fields);
	if (text)
		*len = strlen(text);
	return text;
}
