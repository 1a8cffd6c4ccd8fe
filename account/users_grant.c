/* users_grant.c - the free credit of a verified address (user_): once
 * per mailbox (its address normalised), and at most so many a day per
 * sign-up network and per e-mail domain; past those the account is kept
 * and the grant withheld. */
#include <arpa/inet.h>
#include <string.h>

#include "base/fmt.h"
#include "base/keys.h"
#include "billing/ledger.h"
#include "account/attempts.h"
#include "account/users_int.h"

#define DAY_S 86400

/* Mail providers shared by strangers: their domain says nothing about
 * who signs up, so only the network counts there. */
static const char *const shared_domains[] = { "gmail.com", "googlemail.com", "outlook.com",
	"hotmail.com", "live.com", "yahoo.com", "icloud.com", "me.com", "proton.me",
	"protonmail.com", "gmx.de", "gmx.net", "web.de", "aol.com", "mail.ru", "yandex.ru",
	"qq.com", "163.com" };

static int
is_shared(const char *domain)
{
	for (size_t i = 0; i < sizeof(shared_domains) / sizeof(shared_domains[0]); i++)
		if (strcmp(domain, shared_domains[i]) == 0)
			return 1;
	return 0;
}

int
user_email_canon(const char *email, char *out, size_t n, struct err *e)
{
	const char *at = strrchr(email, '@');
	const char *domain = at ? at + 1 : "";
	int gmail = strcmp(domain, "gmail.com") == 0 || strcmp(domain, "googlemail.com") == 0;
	size_t o = 0;

	if (at == NULL || n == 0)
		return fmt_err(e, "e-mail address", out, n, "%s", email);
	for (const char *p = email; p < at && *p != '+' && o + 1 < n; p++)
		if (!(gmail && *p == '.'))
			out[o++] = *p;
	out[o] = '\0';
	/* A local part cut short has filled out: the domain then does not fit. */
	return fmt_err(e, "e-mail address", out + o, n - o, "@%s", gmail ? "gmail.com" : domain);
}

int
user_signup_net(const char *addr, char *out, size_t n, struct err *e)
{
	char host[USER_ADDR_MAX + 1];
	struct in_addr a4;
	struct in6_addr a6;
	char text[INET6_ADDRSTRLEN];

	if (fmt_err(e, "client address", host, sizeof(host), "%s", addr) < 0)
		return -1;
	host[strcspn(host, "/")] = '\0'; /* an IPv6 client comes as its /64 */
	if (inet_pton(AF_INET, host, &a4) == 1) {
		unsigned char *b = (unsigned char *)&a4.s_addr;

		return fmt_err(e, "client network", out, n, "%u.%u.%u.0/24", b[0], b[1], b[2]);
	}
	if (inet_pton(AF_INET6, host, &a6) == 1) {
		memset(a6.s6_addr + 6, 0, 10);
		if (inet_ntop(AF_INET6, &a6, text, sizeof(text)) != NULL)
			return fmt_err(e, "client network", out, n, "%s/48", text);
	}
	return fmt_err(e, "client network", out, n, "%s", host);
}

/* The account's address as typed (lower case) and normalised, and its
 * sign-up network ("" when none). */
static int
grant_subjects(PGconn *c, const char *account, char *email, char *canon, size_t cn, char *net,
    size_t nn, struct err *e)
{
	const char *p[1] = { account };
	PGresult *r;
	int rc;

	r = db_conn_query(c,
	    "SELECT lower(email), coalesce(signup_net, '') FROM accounts WHERE id = $1", 1, p, e);
	if (r == NULL)
		return -1;
	rc = db_get_str(r, 0, 0, email, USER_EMAIL_MAX + 1, e) < 0 ||
		db_get_str(r, 0, 1, net, nn, e) < 0 ?
	    -1 :
	    0;
	PQclear(r);
	return rc < 0 ? -1 : user_email_canon(email, canon, cn, e);
}

/* 1 when the mailbox had its grant: under its normalised address, or
 * under the address as typed (the key grants had before normalising). */
static int
grant_had(PGconn *c, const char *email, const char *canon, char *key, size_t kn, struct err *e)
{
	char hash[KEY_HASH_HEX_LEN + 1], old[KEY_HASH_HEX_LEN + 32];
	const char *p[2] = { key, old };
	PGresult *r;
	int had;

	key_hash_hex(email, strlen(email), hash, sizeof(hash));
	if (fmt_err(e, "ledger key", old, sizeof(old), "grant:email:%s", hash) < 0)
		return -1;
	key_hash_hex(canon, strlen(canon), hash, sizeof(hash));
	if (fmt_err(e, "ledger key", key, kn, "grant:email:%s", hash) < 0)
		return -1;
	r = db_conn_query(c, "SELECT 1 FROM ledger WHERE idempotency_key IN ($1, $2)", 2, p, e);
	if (r == NULL)
		return -1;
	had = PQntuples(r) > 0;
	PQclear(r);
	return had;
}

/* 1 when `kind`:`value` had fewer than max grants today (its lock held
 * to the transaction's end), 0 when not, -1 on an error. Only grant
 * paths take these subjects, always with the account locked first. */
static int
grant_room(PGconn *c, const char *kind, const char *value, int max, struct err *e)
{
	char subject[ATT_SUBJECT_MAX + 1];
	long long retry;
	int over;

	if (att_subject(subject, sizeof(subject), kind, value) < 0)
		return 1; /* nothing to count under */
	if (att_lock(c, subject, e) < 0)
		return -1;
	over = att_over(c, subject, max, DAY_S, &retry, e);
	return over < 0 ? -1 : !over;
}

static int
grant_count(PGconn *c, const char *kind, const char *value, struct err *e)
{
	char subject[ATT_SUBJECT_MAX + 1];

	if (att_subject(subject, sizeof(subject), kind, value) < 0)
		return 0;
	return att_record(c, subject, e);
}

int
user_grant_free(PGconn *c, const struct config *cfg, const char *account, int *granted,
    struct err *e)
{
	char email[USER_EMAIL_MAX + 1], canon[USER_EMAIL_MAX + 1], net[USER_ADDR_MAX + 1];
	char key[KEY_HASH_HEX_LEN + 32];
	const char *domain;
	int room = 1, had, shared;

	*granted = 0;
	if (cfg->free_credit <= 0)
		return 0;
	if (grant_subjects(c, account, email, canon, sizeof(canon), net, sizeof(net), e) < 0)
		return -1;
	/* Keyed by the mailbox, not the account: deleting an account and
	 * signing up again, or a +tag or dots (gmail), grants nothing more. */
	had = grant_had(c, email, canon, key, sizeof(key), e);
	if (had != 0)
		return had < 0 ? -1 : 0;
	domain = strrchr(canon, '@') ? strrchr(canon, '@') + 1 : "";
	shared = is_shared(domain);
	if (net[0])
		room = grant_room(c, "grant-net", net, cfg->free_grants_per_network, e);
	if (room == 1 && !shared)
		room = grant_room(c, "grant-domain", domain, cfg->free_grants_per_domain, e);
	if (room <= 0) {
		*granted = room < 0 ? 0 : -1;
		return room < 0 ? -1 : 0;
	}
	if (bill_post(c, account, NULL, "grant", cfg->free_credit, -1,
		"free credit for new accounts", key, NULL, granted, e) < 0)
		return -1;
	if (*granted &&
	    ((net[0] && grant_count(c, "grant-net", net, e) < 0) ||
		(!shared && grant_count(c, "grant-domain", domain, e) < 0)))
		return -1;
	return 0;
}
