/* br_catalog.c - tool list from the two embedded catalogues. */
#include "bridge/br_catalog.h"

#include <string.h>

#include "base/embed.h"
#include "base/jsonschema.h"

static json_t *catalogue; /* {"tools": [...]}, $refs resolved */

static json_t *
load(const struct embed_file *f, const char *what, struct err *e)
{
	json_error_t jerr;
	json_t *j = json_loadb(f->data, f->len, 0, &jerr);

	if (j == NULL)
		err_set(e, ERR_INTERNAL, "%s: %s (line %d)", what, jerr.text, jerr.line);
	return j;
}

static int
listed(const char *name, const char *const *served, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(served[i], name) == 0)
			return 1;
	return 0;
}

int
br_catalog_init(const char *const *served, size_t n_served, struct err *e)
{
	json_t *server = NULL, *bridge = NULL, *all = NULL, *tools = NULL, *it;
	const json_t *defs;
	size_t i;
	int rc = -1;

	if (embed_tools_count != 1 || embed_bridge_tools_count != 1) {
		err_set(e, ERR_INTERNAL, "tool catalogue missing");
		return -1;
	}
	if ((server = load(&embed_tools[0], "tools.json", e)) == NULL ||
	    (bridge = load(&embed_bridge_tools[0], "bridge_tools.json", e)) == NULL)
		goto out;
	/* The bridge's tools use the server's $defs (sandbox_id, path). */
	defs = json_object_get(server, "$defs");
	all = jsv_resolve_refs(json_object_get(server, "tools"), defs);
	tools = json_array();
	if (all == NULL || tools == NULL) {
		err_set(e, ERR_INTERNAL, "tools.json: bad $ref");
		goto out;
	}
	json_array_foreach(all, i, it) {
		if (listed(json_string_value(json_object_get(it, "name")), served, n_served))
			json_array_append(tools, it);
	}
	if (json_array_size(tools) != n_served) {
		err_set(e, ERR_INTERNAL, "tools.json lacks a tool the bridge forwards");
		goto out;
	}
	json_decref(all);
	all = jsv_resolve_refs(json_object_get(bridge, "tools"), defs);
	if (all == NULL || json_array_extend(tools, all) < 0) {
		err_set(e, ERR_INTERNAL, "bridge_tools.json: bad $ref");
		goto out;
	}
	catalogue = json_pack("{s:O}", "tools", tools);
	if (catalogue == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	rc = 0;
out:
	json_decref(server);
	json_decref(bridge);
	json_decref(all);
	json_decref(tools);
	return rc;
}

void
br_catalog_cleanup(void)
{
	json_decref(catalogue);
	catalogue = NULL;
}

json_t *
br_catalog_list(void)
{
	return json_incref(catalogue);
}

size_t
br_catalog_count(void)
{
	return json_array_size(json_object_get(catalogue, "tools"));
}

const json_t *
br_catalog_input_schema(const char *name)
{
	size_t i;
	json_t *it;

	json_array_foreach(json_object_get(catalogue, "tools"), i, it) {
		if (strcmp(json_string_value(json_object_get(it, "name")), name) == 0)
			return json_object_get(it, "inputSchema");
	}
	return NULL;
}
