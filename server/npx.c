/* npx.c - the forwarder's npm package (npx_). */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/embed.h"
#include "base/fmt.h"
#include "base/gzip.h"
#include "base/tar.h"
#include "base/version.h"
#include "server/npx.h"

#define NPX_MAX (1024 * 1024)
#define NPX_MTIME 1700000000LL /* a fixed time: the same aasd serves the same bytes */

struct npx {
	char *data;
	size_t len;
};

static int
add(struct buf *tar, const char *name, unsigned mode, const char *data, size_t len, struct err *e)
{
	char head[TAR_MAX_HEADER];
	static const char zero[TAR_BLOCK];
	ssize_t h = tar_header(head, sizeof(head), name, '0', mode, len, NPX_MTIME, e);

	if (h < 0)
		return -1;
	if (buf_append(tar, head, (size_t)h) < 0 || buf_append(tar, data, len) < 0 ||
	    buf_append(tar, zero, tar_pad(len)) < 0) {
		err_set(e, ERR_INTERNAL, "the package is too large");
		return -1;
	}
	return 0;
}

static int
add_json(struct buf *tar, const char *name, json_t *v, struct err *e)
{
	char *text = v ? json_dumps(v, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
	int rc;

	json_decref(v);
	if (text == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return -1;
	}
	rc = add(tar, name, 0644, text, strlen(text), e);
	free(text);
	return rc;
}

struct npx *
npx_new(const struct config *cfg, struct err *e)
{
	static const char end[TAR_END_BYTES];
	struct npx *n = calloc(1, sizeof(*n));
	struct buf tar, gz;
	size_t len = 0;

	if (n == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	buf_init(&tar, NPX_MAX);
	buf_init(&gz, NPX_MAX + 4096);
	/* npm reads the package from the directory "package/". */
	if (add_json(&tar, "package/package.json",
		json_pack("{s:s,s:s,s:s,s:{s:s},s:{s:s},s:[s,s]}", "name", "aas-mcp-remote",
		    "version", AAS_VERSION, "description",
		    "A local stdio MCP server that forwards to an aas service (AAS_API_KEY, "
		    "AAS_BASE_URL).",
		    "bin", "aas-mcp-remote", "bin/aas-mcp-remote.js", "engines", "node", ">=18",
		    "files", "bin", "config.json"),
		e) < 0 ||
	    add_json(&tar, "package/config.json",
		json_pack("{s:s,s:s}", "baseUrl", cfg->public_url, "dashboardUrl",
		    cfg->dashboard_url),
		e) < 0)
		goto fail;
	for (size_t i = 0; i < embed_npx_count; i++) {
		char name[128];

		if (fmt_err(e, "package file name", name, sizeof(name), "package/bin/%s",
			embed_npx[i].name) < 0 ||
		    add(&tar, name, 0755, embed_npx[i].data, embed_npx[i].len, e) < 0)
			goto fail;
	}
	if (buf_append(&tar, end, sizeof(end)) < 0 || gz_stored(&gz, tar.data, tar.len) < 0) {
		err_set(e, ERR_INTERNAL, "the package is too large");
		goto fail;
	}
	n->data = buf_steal(&gz, &len);
	n->len = len;
	buf_free(&tar);
	return n;
fail:
	buf_free(&tar);
	buf_free(&gz);
	free(n);
	return NULL;
}

void
npx_free(struct npx *n)
{
	if (n == NULL)
		return;
	free(n->data);
	free(n);
}

const char *
npx_bytes(const struct npx *n, size_t *len)
{
	*len = n->len;
	return n->data;
}

void
npx_handle(struct http_req *req, void *ctx)
{
	const struct npx *n = ctx;

	if (strcmp(http_method(req), "GET") != 0 && strcmp(http_method(req), "HEAD") != 0) {
		http_add_header(req, "Allow", "GET, HEAD");
		http_reply_error(req, 405, "method_not_allowed", "use GET");
		return;
	}
	http_add_header(req, "Cache-Control", "public, max-age=300");
	http_add_header(req, "Content-Disposition", "attachment; filename=\"mcp.tgz\"");
	http_reply_raw(req, 200, "application/gzip", n->data, n->len);
}
