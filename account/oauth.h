/* oauth.h - OAuth 2.1 grants, codes and tokens in PostgreSQL (oauth_).
 * aasd is the authorization server; /v1/mcp is the resource the tokens
 * are for. Errors carry the OAuth error code in e->field
 * ("invalid_grant", "invalid_target", "invalid_client", ...).
 *
  * Lock order: a code or token row, then the account row (FOR KEY SHARE),
 * then the account's advisory lock ("oauth:<account>", att_lock), then
 * grant rows. */
#ifndef AAS_OAUTH_H
#define AAS_OAUTH_H

#include <jansson.h>

#include "base/config.h"
#include "base/db.h"
#include "account/accounts.h"
#include "account/oauth_rules.h"

/* What the token endpoint answers. */
struct oauth_tokens {
	char access[OAUTH_TOKEN_LEN + 1];
	char refresh[OAUTH_TOKEN_LEN + 1];
	int expires_in;
	char scope[OAUTH_SCOPE_MAX + 1];
};

/* The client `client_id` names: one registered here, or a metadata
 * document fetched from the URL (and kept five minutes), the fetch
 * counted against `quota` (at most 60 an hour each; ERR_LIMIT past it).
 * The dashboard counts a GET under the client's address and only its
 * own CSRF-checked POSTs under the account, so another site's links
 * cannot spend an account's fetches. ERR_INVALID with "invalid_client"
 * when there is none or its document is unusable. */
int oauth_client_find(struct db *db, const struct config *cfg, const char *client_id,
    const char *quota, struct oauth_client *out, struct err *e) AAS_MUST_CHECK;
/* Dynamic client registration (RFC 7591) from `addr` (limits are per
 * client address): the answer in *reply. */
int oauth_client_register(struct db *db, const struct config *cfg, json_t *metadata,
    const char *addr, json_t **reply, struct err *e) AAS_MUST_CHECK;

/* The account consents: a code for the client (single use, short). */
struct oauth_code_req {
	const char *account_id;
	const struct oauth_client *client;
	const char *redirect_uri;
	const char *challenge;
	const char *resource;
	const char *scope;
};
int oauth_code_issue(struct db *db, const struct config *cfg, const struct oauth_code_req *r,
    char code[OAUTH_CODE_LEN + 1], struct err *e) AAS_MUST_CHECK;
/* The token endpoint's two grants. `resource` may be "" (then the
 * grant's). A code shown twice revokes what it gave; so does a used
 * refresh token. */
int oauth_code_redeem(struct db *db, const struct config *cfg, const char *code,
    const char *client_id, const char *redirect_uri, const char *verifier, const char *resource,
    struct oauth_tokens *out, struct err *e) AAS_MUST_CHECK;
int oauth_refresh(struct db *db, const struct config *cfg, const char *refresh,
    const char *client_id, const char *resource, struct oauth_tokens *out,
    struct err *e) AAS_MUST_CHECK;
/* RFC 7009: a refresh token revokes its grant, an access token itself.
 * Unknown tokens are no error. */
int oauth_revoke_token(struct db *db, const char *token, const char *client_id,
    struct err *e) AAS_MUST_CHECK;

/* The account an access token is for, when it is live and its audience
 * is `resource`; ERR_UNAUTHORIZED otherwise (the message says why). */
int oauth_resolve_access(struct db *db, const char *token, size_t len, const char *resource,
    char account_id[ACCT_ID_LEN + 1], struct err *e) AAS_MUST_CHECK;

/* The grant an access token was made under (an MCP session is bound to
 * it, so a refreshed token keeps the session); ERR_UNAUTHORIZED when there
 * is no such access token. Whether it is live is oauth_resolve_access's. */
int oauth_access_grant(struct db *db, const char *token, size_t len, char grant_id[37],
    struct err *e) AAS_MUST_CHECK;

/* The account's connected applications (live grants), newest first. */
json_t *oauth_grants_list(struct db *db, const char *account_id, struct err *e);
/* Revokes one of them; ERR_NOT_FOUND when the account has no such grant. */
int oauth_grant_revoke(struct db *db, const char *account_id, const char *grant_id,
    struct err *e) AAS_MUST_CHECK;

#endif
