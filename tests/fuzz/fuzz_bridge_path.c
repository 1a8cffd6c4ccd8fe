/* fuzz_bridge_path.c - the sync tools' path and plan code (bridge/br_path.h,
 * bridge/br_plan.h, bridge/br_tree.h) on what a sandbox's listing or a
 * client's arguments can hold. Newline-separated fields: exclude patterns
 * (a JSON array), a root, a path, a sandbox_path argument, then listing
 * entries "<type><size>,<mtime>,<rel>" one per line, sent through the
 * plan against a local tree of the same entries. */
#include <string.h>

#include <jansson.h>

#include "base/err.h"
#include "bridge/br_path.h"
#include "bridge/br_plan.h"
#include "bridge/br_tree.h"
#include "tests/fuzz/fuzz.h"

#define FUZZ_BR_ENTRIES 8

static void
paths(const char *root, const char *path, const char *sbx, size_t n)
{
	char *out = malloc(n);
	const char *below;
	struct err e;

	if (out == NULL)
		return;
	(void)br_path_within(root, path);
	if (br_path_rel_ok(path)) {
		FUZZ_CHECK(path[0] != '/' && br_path_depth(path) >= 1);
		if (br_path_join(root, path, out, n) == 0)
			FUZZ_CHECK(strlen(out) < n);
	}
	below = br_path_below(root, path);
	if (below)
		FUZZ_CHECK(br_path_rel_ok(below) && below >= path && below < path + strlen(path));
	err_clear(&e);
	if (br_path_sandbox_dir(sbx, out, n, &e) == 0) {
		FUZZ_CHECK(out[0] == '/' && strlen(out) < n && strstr(out, "/../") == NULL);
		FUZZ_CHECK(strstr(out, "//") == NULL);
	} else {
		FUZZ_CHECK(e.msg[0] != '\0' || n < 64);
	}
	int q = br_sh_quote(path, out, n);
	FUZZ_CHECK(q < 0 || ((size_t)q < n && strlen(out) == (size_t)q && out[0] == '\''));
	free(out);
}

/* "<type><size>,<mtime>,<rel>" into en (rel borrowed); -1 when malformed. */
static int
entry(char *line, struct br_entry *en)
{
	char *c1, *c2, *end1, *end2;

	if (line[0] == '\0')
		return -1;
	c1 = strchr(line + 1, ',');
	c2 = c1 ? strchr(c1 + 1, ',') : NULL;
	if (c2 == NULL)
		return -1;
	*c1 = *c2 = '\0';
	memset(en, 0, sizeof(*en));
	en->type = line[0];
	en->size = strtoll(line + 1, &end1, 10);
	en->mtime = strtoll(c1 + 1, &end2, 10);
	if (*end1 != '\0' || *end2 != '\0')
		return -1;
	en->mode = 0644;
	en->rel = c2 + 1;
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_fields ff;
	struct br_excl *x = NULL;
	struct br_tree *src = NULL, *dst = NULL;
	struct br_entry ents[FUZZ_BR_ENTRIES];
	size_t n_ent = 0;
	json_t *pats;
	struct err e;
	long long t;

	if (fuzz_split(data, size, FUZZ_MAX_FIELDS, &ff) < 0)
		return 0;
	pats = json_loadb(ff.f[0], ff.len[0], 0, NULL);
	err_clear(&e);
	x = br_excl_new(pats, &e); /* NULL (no JSON) means the defaults */
	json_decref(pats);
	paths(ff.f[1], ff.f[2], ff.f[3], ff.len[3] % 300 + 1);
	if (x) {
		(void)br_excl_match(x, ff.f[2]);
		(void)br_excl_match(x, ff.f[1]);
	}
	(void)br_time_parse(ff.f[3], &t);

	src = br_tree_new(FUZZ_BR_ENTRIES);
	dst = br_tree_new(FUZZ_BR_ENTRIES);
	if (src == NULL || dst == NULL)
		goto out;
	for (size_t k = 4; k < FUZZ_MAX_FIELDS; k++) {
		struct br_entry en;
		if (entry(ff.f[k], &en) < 0)
			continue;
		err_clear(&e);
		/* A listing's names are taken only when clean, as the sync does. */
		if (!br_path_rel_ok(en.rel))
			continue;
		ents[n_ent++] = en;
		err_ignore(br_tree_add(k % 2 ? src : dst, &en, &e));
	}
	br_tree_sort(src);
	br_tree_sort(dst);
	for (size_t i = 0; i < n_ent; i++) {
		const struct br_entry *s = br_tree_find(src, ents[i].rel);
		const struct br_entry *d = br_tree_find(dst, ents[i].rel);
		if (s)
			(void)br_plan_file(s, d);
		if (d && x)
			(void)br_plan_extra(src, d, x);
	}
out:
	br_tree_free(src);
	br_tree_free(dst);
	br_excl_free(x);
	free(ff.buf);
	return 0;
}
