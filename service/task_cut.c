/* task_cut.c - shortening a task's result to its cap. */
#include "service/task_cut.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CUT_ROUNDS 32   /* shortenings tried before the result is replaced */
#define CUT_KEEP_MIN 64 /* strings this short are left whole */
#define CUT_SLACK 1024  /* room kept for the note and the marker */
#define CUT_FIELDS 8    /* cut places named in the marker */
#define CUT_PATH 128

struct longest {
	json_t *str;
	size_t len;
	char path[CUT_PATH];
};

/* The longest string under `v` (at `path`) into *best. */
static void
find_longest(json_t *v, const char *path, struct longest *best)
{
	char sub[CUT_PATH];
	const char *k;
	json_t *x;
	size_t i;

	if (json_is_string(v) && json_string_length(v) > best->len) {
		best->str = v;
		best->len = json_string_length(v);
		snprintf(best->path, sizeof(best->path), "%s", path);
	} else if (json_is_object(v)) {
		json_object_foreach(v, k, x) {
			snprintf(sub, sizeof(sub), "%s%s%s", path, *path ? "." : "", k);
			find_longest(x, sub, best);
		}
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, x) {
			snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
			find_longest(x, sub, best);
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

	snprintf(note, sizeof(note),
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

/* Shortens the longest string under `work` so that res's JSON loses about
 * `over` bytes: how many bytes the string's own take is measured (the JSON
 * with it empty), and it keeps the share that fits. The new length of the
 * JSON, or 0 when nothing is left to shorten (or out of memory). */
static size_t
cut_longest(json_t *res, json_t *structured, json_t *work, size_t len, size_t over, json_t *fields)
{
	struct longest best = { NULL, CUT_KEEP_MIN, "" };
	size_t without, share, drop, keep;
	char *saved;

	find_longest(work, structured ? "structuredContent" : "", &best);
	if (best.str == NULL || (saved = malloc(best.len + 1)) == NULL)
		return 0;
	memcpy(saved, json_string_value(best.str), best.len + 1);
	note_field(fields, best.path);
	json_string_set(best.str, "");
	without = json_len(res, structured);
	share = len > without ? len - without : best.len;
	/* Bytes of the string to drop, rounded up, and a character's more. */
	drop = (size_t)(((unsigned long long)over * best.len + share - 1) / share) + 4;
	keep = best.len > drop + CUT_KEEP_MIN ? best.len - drop : CUT_KEEP_MIN;
	if (set_prefix(best.str, saved, keep) < 0) {
		free(saved);
		return 0;
	}
	free(saved);
	return json_len(res, structured);
}

/* Shortens strings of `res` (under structuredContent when it has one)
 * until its JSON fits `cap`, marked; or its note alone. */
static char *
shrink(json_t *res, json_t *structured, size_t orig, size_t cap, json_t *fields)
{
	size_t len = orig, target = cap - CUT_SLACK;
	char *text;

	for (int round = 0; round < CUT_ROUNDS && len > target; round++)
		len = cut_longest(res, structured, structured ? structured : res, len, len - target,
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
