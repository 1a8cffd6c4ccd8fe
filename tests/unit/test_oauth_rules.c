/* test_oauth_rules.c - the OAuth checks that need no database: PKCE
 * S256, redirect URIs (https, loopback http with any port, an app's own
 * scheme), client metadata documents and registrations, scopes, token
 * shapes, and the addresses a metadata document may not be fetched from. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <arpa/inet.h>
#include <cmocka.h>
#include <netinet/in.h>

#include "base/fetch.h"
#include "account/oauth_rules.h"

static void
test_pkce(void **state)
{
	(void)state;
	assert_true(oauth_pkce_ok("dBjftJeZ4CVP-mJ92K0rC1w8qEFRHHZUrZ9wUPMM9bo",
	    "8Q0rTA_h4l-YESj7ZckioigulOHR2kzD3URegmp3gew"));
	assert_false(oauth_pkce_ok("dBjftJeZ4CVP-mJ92K0rC1w8qEFRHHZUrZ9wUPMM9bX",
	    "8Q0rTA_h4l-YESj7ZckioigulOHR2kzD3URegmp3gew"));
	/* Too short, a character outside the alphabet, a plain challenge. */
	assert_false(oauth_pkce_ok("short", "8Q0rTA_h4l-YESj7ZckioigulOHR2kzD3URegmp3gew"));
	assert_false(oauth_pkce_ok("dBjftJeZ4CVP-mJ92K0rC1w8qEFRHHZUrZ9wUPMM9b!",
	    "8Q0rTA_h4l-YESj7ZckioigulOHR2kzD3URegmp3gew"));
	assert_false(oauth_pkce_ok("dBjftJeZ4CVP-mJ92K0rC1w8qEFRHHZUrZ9wUPMM9bo",
	    "dBjftJeZ4CVP-mJ92K0rC1w8qEFRHHZUrZ9wUPMM9bo"));
	assert_false(oauth_pkce_ok(NULL, "8Q0rTA_h4l-YESj7ZckioigulOHR2kzD3URegmp3gew"));
	assert_false(oauth_challenge_valid("8Q0rTA_h4l-YESj7ZckioigulOHR2kzD3URegmp3ge="));
	assert_false(oauth_challenge_valid(""));
}

static void
test_redirect_uris(void **state)
{
	(void)state;
	assert_true(oauth_redirect_valid("https://app.example/cb"));
	assert_true(oauth_redirect_valid("http://127.0.0.1:3000/callback"));
	assert_true(oauth_redirect_valid("http://localhost/cb"));
	assert_true(oauth_redirect_valid("http://[::1]:9/cb"));
	assert_true(oauth_redirect_valid("com.example.app:/oauth"));
	assert_false(oauth_redirect_valid("http://app.example/cb"));
	assert_false(oauth_redirect_valid("https://app.example/cb#frag"));
	assert_false(oauth_redirect_valid("javascript:alert(1)"));
	assert_false(oauth_redirect_valid("data:text/html,x"));
	assert_false(oauth_redirect_valid("https://user@app.example/cb"));
	assert_false(oauth_redirect_valid("https://app.example/c b"));
	assert_false(oauth_redirect_valid("https://app.example/\"><script>"));
	assert_false(oauth_redirect_valid("http://127.0.0.1.evil.example/cb"));
	assert_false(oauth_redirect_valid(""));

	struct oauth_client cl = { .n_redirects = 2 };

	snprintf(cl.redirects[0], sizeof(cl.redirects[0]), "http://127.0.0.1:3000/callback");
	snprintf(cl.redirects[1], sizeof(cl.redirects[1]), "https://app.example/cb");
	/* A loopback redirect may come back on any port (RFC 8252 7.3). */
	assert_true(oauth_redirect_registered(&cl, "http://127.0.0.1:51234/callback"));
	assert_true(oauth_redirect_registered(&cl, "http://127.0.0.1/callback"));
	assert_false(oauth_redirect_registered(&cl, "http://127.0.0.1:51234/other"));
	assert_false(oauth_redirect_registered(&cl, "http://localhost:3000/callback"));
	assert_true(oauth_redirect_registered(&cl, "https://app.example/cb"));
	assert_false(oauth_redirect_registered(&cl, "https://app.example:444/cb"));
	assert_false(oauth_redirect_registered(&cl, "https://app.example/cb/"));
	assert_false(oauth_redirect_registered(&cl, NULL));
}

static void
test_client_id_urls(void **state)
{
	(void)state;
	assert_true(oauth_client_id_is_url("https://app.example/oauth/client.json", 0));
	assert_false(oauth_client_id_is_url("https://app.example/", 0));
	assert_false(oauth_client_id_is_url("https://app.example", 0));
	assert_false(oauth_client_id_is_url("https://app.example/a/../b.json", 0));
	assert_false(oauth_client_id_is_url("https://app.example/c.json#x", 0));
	assert_false(oauth_client_id_is_url("https://app.example/c.json?x=1", 0));
	assert_false(oauth_client_id_is_url("https://u@app.example/c.json", 0));
	assert_false(oauth_client_id_is_url("http://127.0.0.1:8/c.json", 0));
	assert_true(oauth_client_id_is_url("http://127.0.0.1:8/c.json", 1));
	assert_false(oauth_client_id_is_url("http://app.example/c.json", 1));
	assert_false(oauth_client_id_is_url("https://app.example/a/%2E%2e/c.json", 0));
}

static json_t *
doc(const char *text)
{
	json_error_t je;
	json_t *j = json_loads(text, 0, &je);

	if (j == NULL)
		fail_msg("bad test JSON: %s", je.text);
	return j;
}

static int
parses(const char *id, const char *text, struct oauth_client *cl, struct err *e)
{
	json_t *j = doc(text);
	int rc;

	err_clear(e);
	rc = oauth_client_parse(id, j, cl, e);
	json_decref(j);
	return rc == 0;
}

static void
test_client_metadata(void **state)
{
	struct oauth_client cl;
	struct err e;

	(void)state;
	assert_true(parses("https://a.example/c.json",
	    "{\"client_id\":\"https://a.example/c.json\",\"client_name\":\"App\","
	    "\"redirect_uris\":[\"https://a.example/cb\",\"http://127.0.0.1/cb\"]}",
	    &cl, &e));
	assert_string_equal(cl.name, "App");
	assert_int_equal(cl.n_redirects, 2);
	assert_string_equal(cl.id, "https://a.example/c.json");
	/* A document must name itself, carry no secret, list usable URIs. */
	assert_false(parses("https://a.example/c.json",
	    "{\"client_id\":\"https://b.example/c.json\",\"redirect_uris\":[\"https://a.example/cb\"]}",
	    &cl, &e));
	assert_string_equal(e.field, "invalid_client_metadata");
	assert_false(parses("https://a.example/c.json",
	    "{\"client_id\":\"https://a.example/c.json\",\"token_endpoint_auth_method\":"
	    "\"client_secret_basic\",\"redirect_uris\":[\"https://a.example/cb\"]}",
	    &cl, &e));
	assert_false(parses(NULL, "{\"redirect_uris\":[]}", &cl, &e));
	assert_string_equal(e.field, "invalid_redirect_uri");
	assert_false(parses(NULL, "{\"redirect_uris\":[\"http://a.example/cb\"]}", &cl, &e));
	assert_false(parses(NULL, "{\"redirect_uris\":[1]}", &cl, &e));
	assert_false(parses(NULL,
	    "{\"redirect_uris\":[\"https://a/1\",\"https://a/2\",\"https://a/3\",\"https://a/4\","
	    "\"https://a/5\",\"https://a/6\",\"https://a/7\",\"https://a/8\",\"https://a/9\","
	    "\"https://a/10\",\"https://a/11\"]}",
	    &cl, &e));
	assert_false(parses(NULL,
	    "{\"redirect_uris\":[\"https://a.example/cb\"],\"grant_types\":[\"client_credentials\"]}",
	    &cl, &e));
	assert_false(parses(NULL,
	    "{\"redirect_uris\":[\"https://a.example/cb\"],\"client_name\":\"a\\nb\"}", &cl, &e));
	/* A right-to-left override or a zero-width space could disguise a name. */
	assert_false(parses(NULL,
	    "{\"redirect_uris\":[\"https://a.example/cb\"],\"client_name\":\"evil\\u202egoog\"}",
	    &cl, &e));
	assert_false(parses(NULL,
	    "{\"redirect_uris\":[\"https://a.example/cb\"],\"client_name\":\"Cl\\u200baude\"}", &cl,
	    &e));
	assert_true(parses(NULL,
	    "{\"redirect_uris\":[\"https://a.example/cb\"],\"client_name\":\"Zoë's agent\"}", &cl,
	    &e));
	assert_false(parses(NULL,
	    "{\"redirect_uris\":[\"https://a.example/cb\"],\"client_uri\":\"javascript:x\"}", &cl,
	    &e));
	/* A registration may leave the name out and ask for a secret (it gets none). */
	assert_true(parses(NULL,
	    "{\"redirect_uris\":[\"https://a.example/cb\"],\"token_endpoint_auth_method\":"
	    "\"client_secret_basic\",\"grant_types\":[\"authorization_code\",\"refresh_token\"]}",
	    &cl, &e));
	assert_string_equal(cl.name, "an unnamed application");
	assert_false(parses(NULL, "[]", &cl, &e));
}

static void
test_scopes_and_shapes(void **state)
{
	(void)state;
	assert_true(oauth_scope_ok(""));
	assert_true(oauth_scope_ok("mcp"));
	assert_true(oauth_scope_ok("mcp  mcp"));
	assert_false(oauth_scope_ok("mcp admin"));
	assert_false(oauth_scope_ok("mc"));
	assert_true(oauth_access_shaped(
	    "aas_at_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", 71));
	assert_false(oauth_access_shaped(
	    "aas_rt_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", 71));
	assert_false(oauth_access_shaped(
	    "aas_at_0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef", 71));
	assert_false(oauth_access_shaped("aas_sk_x", 8));
}

static int
private4(const char *a)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };

	assert_int_equal(inet_pton(AF_INET, a, &sa.sin_addr), 1);
	return fetch_addr_private((const struct sockaddr *)&sa);
}

static int
private6(const char *a)
{
	struct sockaddr_in6 sa = { .sin6_family = AF_INET6 };

	assert_int_equal(inet_pton(AF_INET6, a, &sa.sin6_addr), 1);
	return fetch_addr_private((const struct sockaddr *)&sa);
}

static void
test_private_addresses(void **state)
{
	(void)state;
	assert_true(private4("127.0.0.1"));
	assert_true(private4("10.1.2.3"));
	assert_true(private4("172.20.0.1"));
	assert_true(private4("192.168.1.1"));
	assert_true(private4("169.254.169.254"));
	assert_true(private4("100.64.0.1"));
	assert_true(private4("0.0.0.0"));
	assert_true(private4("224.0.0.1"));
	assert_false(private4("93.184.215.14"));
	assert_false(private4("172.32.0.1"));
	assert_true(private6("::1"));
	assert_true(private6("::"));
	assert_true(private6("fe80::1"));
	assert_true(private6("fd00::1"));
	assert_true(private6("::ffff:127.0.0.1"));
	assert_true(private6("::ffff:169.254.169.254"));
	assert_true(private6("fec0::1"));
	assert_true(private6("2002:7f00:1::1"));
	assert_true(private6("::ffff:0:a9fe:a9fe"));
	assert_true(private6("100::1"));
	assert_false(private6("2606:4700::1111"));
	assert_false(private6("::ffff:93.184.215.14"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pkce),
		cmocka_unit_test(test_redirect_uris),
		cmocka_unit_test(test_client_id_urls),
		cmocka_unit_test(test_client_metadata),
		cmocka_unit_test(test_scopes_and_shapes),
		cmocka_unit_test(test_private_addresses),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
