/* fuzz_oauth_client.c - a client's metadata from bytes (a Client ID
 * Metadata Document fetched from a URL a stranger chose, or a dynamic
 * registration): account/oauth_rules.c. The first line is the client_id
 * (empty: a registration), the rest the JSON. Checks: what is accepted
 * names itself as asked, has 1 to OAUTH_REDIRECTS_MAX redirect URIs that
 * each pass oauth_redirect_valid, and a name without control bytes. */
#include <jansson.h>

#include "base/err.h"
#include "account/oauth_rules.h"
#include "tests/fuzz/fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_fields ff;
	struct oauth_client cl;
	json_error_t je;
	json_t *doc;
	struct err e;
	const char *id;

	if (fuzz_split(data, size, 2, &ff) < 0)
		return 0;
	id = ff.f[0][0] ? ff.f[0] : NULL;
	doc = json_loadb(ff.f[1], ff.len[1], JSON_REJECT_DUPLICATES, &je);
	err_clear(&e);
	if (doc != NULL && oauth_client_parse(id, doc, &cl, &e) == 0) {
		FUZZ_CHECK(id == NULL || strcmp(cl.id, id) == 0);
		FUZZ_CHECK(cl.n_redirects >= 1 && cl.n_redirects <= OAUTH_REDIRECTS_MAX);
		for (int i = 0; i < cl.n_redirects; i++) {
			FUZZ_CHECK(oauth_redirect_valid(cl.redirects[i]));
			FUZZ_CHECK(oauth_redirect_registered(&cl, cl.redirects[i]));
		}
		for (const char *p = cl.name; *p; p++)
			FUZZ_CHECK((unsigned char)*p >= ' ' && *p != 127);
		FUZZ_CHECK(strlen(cl.name) > 0);
	} else if (doc != NULL) {
		FUZZ_CHECK(e.kind == ERR_INVALID && e.field[0] != '\0');
	}
	json_decref(doc);
	free(ff.buf);
	return 0;
}
