/* test_service_oauth.c - OAuth grants, codes and tokens over PostgreSQL:
 * a code redeemed once with the right verifier gives tokens for the
 * resource it was made for; a wrong verifier spends the code; a second
 * redemption revokes what the first gave; refresh tokens rotate and a
 * used one revokes the grant; grants are bounded per account and each
 * account sees and revokes only its own. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/sha.h>

#include "base/keys.h"
#include "account/oauth.h"
#include "tests/unit/service_fixture.h"

#define RESOURCE "https://aas.test/v1/mcp"
#define REDIRECT "http://127.0.0.1:4000/callback"
/* RFC 7636's shape: a verifier and its S256 challenge. */
#define VERIFIER "dBjftJeZ4CVP-mJ92K0rC1w8qEFRHHZUrZ9wUPMM9bo"
#define CHALLENGE "8Q0rTA_h4l-YESj7ZckioigulOHR2kzD3URegmp3gew"

static void
client_for(struct sfx *s, struct oauth_client *cl)
{
	char addr[64];
	json_t *reply = NULL,
	       *meta = json_pack("{s:s, s:[s]}", "client_name", "unit client", "redirect_uris",
		   REDIRECT);
	struct err e;

	/* A fresh address each time: registrations are limited per address. */
	snprintf(addr, sizeof(addr), "unit-%s", s->account);
	err_clear(&e);
	if (oauth_client_register(s->app->db, &s->app->cfg, meta, addr, &reply, &e) < 0)
		fail_msg("register: %s", e.msg);
	assert_int_equal(oauth_client_find(s->app->db, &s->app->cfg,
			     json_string_value(json_object_get(reply, "client_id")), s->account, cl,
			     &e),
	    0);
	assert_true(cl->registered);
	assert_string_equal(cl->name, "unit client");
	json_decref(reply);
	json_decref(meta);
}

static void
code_for(struct sfx *s, const char *account, const struct oauth_client *cl, char code[])
{
	struct oauth_code_req r = { account, cl, REDIRECT, CHALLENGE, RESOURCE, OAUTH_SCOPE };
	struct err e;

	err_clear(&e);
	if (oauth_code_issue(s->app->db, &s->app->cfg, &r, code, &e) < 0)
		fail_msg("code: %s", e.msg);
}

static void
tokens_for(struct sfx *s, const char *account, const struct oauth_client *cl,
    struct oauth_tokens *t)
{
	char code[OAUTH_CODE_LEN + 1];
	struct err e;

	code_for(s, account, cl, code);
	err_clear(&e);
	if (oauth_code_redeem(s->app->db, &s->app->cfg, code, cl->id, REDIRECT, VERIFIER, "", t,
		&e) < 0)
		fail_msg("redeem: %s", e.msg);
}

static int
resolves(struct sfx *s, const char *token, const char *resource, struct err *e)
{
	char account[ACCT_ID_LEN + 1];

	err_clear(e);
	if (oauth_resolve_access(s->app->db, token, strlen(token), resource, account, e) < 0)
		return 0;
	assert_string_equal(account, s->account);
	return 1;
}

static void
test_code_gives_tokens_for_its_resource(void **state)
{
	struct sfx *s = *state;
	struct oauth_client cl;
	struct oauth_tokens t;
	struct err e;

	client_for(s, &cl);
	tokens_for(s, s->account, &cl, &t);
	assert_int_equal(strncmp(t.access, OAUTH_ACCESS_PREFIX, 7), 0);
	assert_int_equal(strncmp(t.refresh, OAUTH_REFRESH_PREFIX, 7), 0);
	assert_int_equal(t.expires_in, s->app->cfg.oauth_access_ttl_s);
	assert_true(resolves(s, t.access, RESOURCE, &e));
	/* Another audience, a refresh token, a key's shape: refused. */
	assert_false(resolves(s, t.access, "https://other.test/v1/mcp", &e));
	assert_int_equal(e.kind, ERR_UNAUTHORIZED);
	assert_non_null(strstr(e.msg, "another resource"));
	assert_false(resolves(s, t.refresh, RESOURCE, &e));
	/* Expired. */
	{
		char hash[KEY_HASH_HEX_LEN + 1];
		const char *p[1] = { hash };

		key_hash_hex(t.access, strlen(t.access), hash, sizeof(hash));
		assert_int_equal(
		    db_exec(s->app->db,
			"UPDATE oauth_tokens SET expires_at = now() - interval '1 second'"
			" WHERE token_hash = $1",
			1, p, NULL, &e),
		    0);
	}
	assert_false(resolves(s, t.access, RESOURCE, &e));
	assert_non_null(strstr(e.msg, "expired"));
}

static void
test_wrong_verifier_spends_the_code(void **state)
{
	struct sfx *s = *state;
	struct oauth_client cl;
	struct oauth_tokens t;
	char code[OAUTH_CODE_LEN + 1];
	struct err e;

	client_for(s, &cl);
	code_for(s, s->account, &cl, code);
	err_clear(&e);
	assert_int_equal(oauth_code_redeem(s->app->db, &s->app->cfg, code, cl.id, REDIRECT,
			     "wrong-verifier-wrong-verifier-wrong-verifier", "", &t, &e),
	    -1);
	assert_string_equal(e.field, "invalid_grant");
	assert_non_null(strstr(e.msg, "code_verifier"));
	err_clear(&e);
	assert_int_equal(oauth_code_redeem(s->app->db, &s->app->cfg, code, cl.id, REDIRECT,
			     VERIFIER, "", &t, &e),
	    -1);
	assert_string_equal(e.field, "invalid_grant");
	/* Another redirect URI or client, or another resource, are refused too. */
	code_for(s, s->account, &cl, code);
	err_clear(&e);
	assert_int_equal(oauth_code_redeem(s->app->db, &s->app->cfg, code, cl.id,
			     "http://127.0.0.1:4000/other", VERIFIER, "", &t, &e),
	    -1);
	code_for(s, s->account, &cl, code);
	err_clear(&e);
	assert_int_equal(oauth_code_redeem(s->app->db, &s->app->cfg, code, cl.id, REDIRECT,
			     VERIFIER, "https://other.test/v1/mcp", &t, &e),
	    -1);
	assert_string_equal(e.field, "invalid_target");
}

static void
test_reused_code_revokes_its_grant(void **state)
{
	struct sfx *s = *state;
	struct oauth_client cl;
	struct oauth_tokens t, t2;
	char code[OAUTH_CODE_LEN + 1];
	struct err e;

	client_for(s, &cl);
	code_for(s, s->account, &cl, code);
	err_clear(&e);
	assert_int_equal(oauth_code_redeem(s->app->db, &s->app->cfg, code, cl.id, REDIRECT,
			     VERIFIER, RESOURCE, &t, &e),
	    0);
	assert_true(resolves(s, t.access, RESOURCE, &e));
	assert_int_equal(oauth_code_redeem(s->app->db, &s->app->cfg, code, cl.id, REDIRECT,
			     VERIFIER, RESOURCE, &t2, &e),
	    -1);
	assert_non_null(strstr(e.msg, "used before"));
	assert_false(resolves(s, t.access, RESOURCE, &e));
	err_clear(&e);
	assert_int_equal(oauth_refresh(s->app->db, &s->app->cfg, t.refresh, cl.id, "", &t2, &e),
	    -1);
}

static void
test_refresh_rotates_and_a_used_one_revokes(void **state)
{
	struct sfx *s = *state;
	struct oauth_client cl;
	struct oauth_tokens t, t2, t3;
	struct err e;

	client_for(s, &cl);
	tokens_for(s, s->account, &cl, &t);
	err_clear(&e);
	/* Only the client it was issued to may use it. */
	assert_int_equal(oauth_refresh(s->app->db, &s->app->cfg, t.refresh, "aas_client_other", "",
			     &t2, &e),
	    -1);
	err_clear(&e);
	assert_int_equal(oauth_refresh(s->app->db, &s->app->cfg, t.refresh, cl.id, "", &t2, &e), 0);
	assert_string_not_equal(t2.refresh, t.refresh);
	assert_true(resolves(s, t2.access, RESOURCE, &e));
	assert_true(resolves(s, t.access, RESOURCE, &e)); /* live until it expires */
	err_clear(&e);
	assert_int_equal(oauth_refresh(s->app->db, &s->app->cfg, t.refresh, cl.id, "", &t3, &e),
	    -1);
	assert_non_null(strstr(e.msg, "used before"));
	assert_false(resolves(s, t2.access, RESOURCE, &e));
	err_clear(&e);
	assert_int_equal(oauth_refresh(s->app->db, &s->app->cfg, t2.refresh, cl.id, "", &t3, &e),
	    -1);
}

static void
test_grants_are_the_accounts_own_and_bounded(void **state)
{
	struct sfx *s = *state;
	struct oauth_client cl;
	struct oauth_tokens t;
	char code[OAUTH_CODE_LEN + 1];
	json_t *list;
	const char *id;
	struct err e;

	client_for(s, &cl);
	tokens_for(s, s->account, &cl, &t);
	/* A new consent by the same client replaces its grant. */
	tokens_for(s, s->account, &cl, &t);
	err_clear(&e);
	list = oauth_grants_list(s->app->db, s->account, &e);
	assert_int_equal(json_array_size(list), 1);
	id = json_string_value(json_object_get(json_array_get(list, 0), "id"));
	assert_string_equal(json_string_value(json_object_get(json_array_get(list, 0),
				"client_name")),
	    "unit client");
	/* The other account neither sees nor revokes it. */
	json_t *theirs = oauth_grants_list(s->app->db, s->other, &e);
	assert_int_equal(json_array_size(theirs), 0);
	json_decref(theirs);
	assert_int_equal(oauth_grant_revoke(s->app->db, s->other, id, &e), -1);
	assert_int_equal(e.kind, ERR_NOT_FOUND);
	assert_true(resolves(s, t.access, RESOURCE, &e));
	err_clear(&e);
	assert_int_equal(oauth_grant_revoke(s->app->db, s->account, id, &e), 0);
	assert_false(resolves(s, t.access, RESOURCE, &e));
	json_decref(list);

	/* At the bound, a consent for another client is refused. */
	s->app->cfg.oauth_grants_per_account = 1;
	tokens_for(s, s->account, &cl, &t);
	{
		struct oauth_client other;
		struct oauth_code_req r = { s->account, &other, REDIRECT, CHALLENGE, RESOURCE,
			OAUTH_SCOPE };

		client_for(s, &other);
		err_clear(&e);
		assert_int_equal(oauth_code_issue(s->app->db, &s->app->cfg, &r, code, &e), -1);
		assert_int_equal(e.kind, ERR_LIMIT);
	}
}

static void
test_registration_is_limited_per_address(void **state)
{
	struct sfx *s = *state;
	json_t *meta = json_pack("{s:[s]}", "redirect_uris", REDIRECT), *reply;
	char addr[64];
	struct err e;
	int ok = 0;

	snprintf(addr, sizeof(addr), "limit-%s", s->account);
	s->app->cfg.oauth_registrations_per_address = 3;
	for (int i = 0; i < 5; i++) {
		err_clear(&e);
		reply = NULL;
		if (oauth_client_register(s->app->db, &s->app->cfg, meta, addr, &reply, &e) == 0)
			ok++;
		else
			assert_int_equal(e.kind, ERR_LIMIT);
		json_decref(reply);
	}
	assert_int_equal(ok, 3);
	json_decref(meta);
}

static long long
tokens_of_grant(struct sfx *s, const char *token)
{
	char hash[KEY_HASH_HEX_LEN + 1];

	key_hash_hex(token, strlen(token), hash, sizeof(hash));
	return sfx_ll(s,
	    "SELECT count(*) FROM oauth_tokens WHERE grant_id ="
	    " (SELECT grant_id FROM oauth_tokens WHERE token_hash = $1)",
	    hash);
}

static void
test_tokens_per_grant_are_bounded(void **state)
{
	struct sfx *s = *state;
	struct oauth_client cl;
	struct oauth_tokens t, next;
	struct err e;

	client_for(s, &cl);
	tokens_for(s, s->account, &cl, &t);
	for (int i = 0; i < 40; i++) {
		err_clear(&e);
		if (oauth_refresh(s->app->db, &s->app->cfg, t.refresh, cl.id, "", &next, &e) < 0)
			fail_msg("refresh %d: %s", i, e.msg);
		t = next;
	}
	/* 5 access tokens, the live refresh token, 10 used ones kept. */
	assert_true(tokens_of_grant(s, t.access) <= 16);
	assert_true(resolves(s, t.access, RESOURCE, &e));
	/* Revoking the access token ends it alone; the refresh token its grant. */
	err_clear(&e);
	assert_int_equal(oauth_revoke_token(s->app->db, t.access, cl.id, &e), 0);
	assert_false(resolves(s, t.access, RESOURCE, &e));
	assert_int_equal(oauth_refresh(s->app->db, &s->app->cfg, t.refresh, cl.id, "", &next, &e),
	    0);
	assert_true(resolves(s, next.access, RESOURCE, &e));
	err_clear(&e);
	assert_int_equal(oauth_revoke_token(s->app->db, next.refresh, cl.id, &e), 0);
	assert_false(resolves(s, next.access, RESOURCE, &e));
}

static void
test_disabled_account_gets_nothing(void **state)
{
	struct sfx *s = *state;
	struct oauth_client cl;
	struct oauth_tokens t, t2;
	struct acct_disabled d;
	char code[OAUTH_CODE_LEN + 1];
	struct err e;

	client_for(s, &cl);
	tokens_for(s, s->account, &cl, &t);
	code_for(s, s->account, &cl, code);
	err_clear(&e);
	assert_int_equal(acct_disable(s->app->db, s->account, &d, &e), 0);
	assert_false(resolves(s, t.access, RESOURCE, &e));
	err_clear(&e);
	assert_int_equal(oauth_code_redeem(s->app->db, &s->app->cfg, code, cl.id, REDIRECT,
			     VERIFIER, "", &t2, &e),
	    -1);
	assert_non_null(strstr(e.msg, "disabled"));
	/* Enabled again, its grants stay revoked (as its keys do). */
	err_clear(&e);
	assert_int_equal(acct_enable(s->app->db, s->account, &e), 0);
	assert_false(resolves(s, t.access, RESOURCE, &e));
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, sfx_setup, sfx_teardown)

int
main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_code_gives_tokens_for_its_resource),
		T(test_wrong_verifier_spends_the_code),
		T(test_reused_code_revokes_its_grant),
		T(test_refresh_rotates_and_a_used_one_revokes),
		T(test_grants_are_the_accounts_own_and_bounded),
		T(test_registration_is_limited_per_address),
		T(test_tokens_per_grant_are_bounded),
		T(test_disabled_account_gets_nothing),
	};

	return cmocka_run_group_tests(tests, sfx_group_setup, sfx_group_teardown);
}
