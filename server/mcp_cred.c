/* mcp_cred.c - the credential an MCP session is bound to. */
#include "server/mcp_cred.h"

#include <string.h>

#include "base/fmt.h"
#include "base/keys.h"
#include "server/auth.h"
#include "service/app.h"
#include "account/oauth.h"
#include "account/oauth_rules.h"

int
mcp_cred_id(struct app *app, struct http_req *req, char out[SESS_CRED_MAX + 1], struct err *e)
{
	const char *key, *why;
	size_t keylen;
	char hash[KEY_HASH_HEX_LEN + 1], grant[37];

	out[0] = '\0';
	if (auth_extract(http_header(req, "Authorization"), http_header(req, "x-api-key"), &key,
		&keylen, &why) != AUTH_KEY)
		return 0;
	if (oauth_access_shaped(key, keylen)) {
		if (oauth_access_grant(app->db, key, keylen, grant, e) < 0)
			return -1;
		return fmt_err(e, "credential", out, SESS_CRED_MAX + 1, "g:%s", grant);
	}
	key_hash_hex(key, keylen, hash, sizeof(hash));
	return fmt_err(e, "credential", out, SESS_CRED_MAX + 1, "k:%.32s", hash);
}

int
mcp_cred_may_use(const struct sess_info *s, const char *account, const char *cred)
{
	int has = account != NULL && *account;

	if (s->account_id[0] == '\0')
		return !has;
	if (!has || strcmp(s->account_id, account) != 0)
		return 0;
	/* A session older than the credential column: its account's. */
	return s->credential[0] == '\0' || (cred != NULL && strcmp(s->credential, cred) == 0);
}
