/* users.c - sign-up, verification, login and password reset (user_). */
#include <ctype.h>
#include <string.h>

#include "base/fmt.h"
#include "base/keys.h"
#include "base/passwd.h"
#include "billing/ledger.h"
#include "account/attempts.h"
#include "account/mailq.h"
#include "account/users.h"
#include "account/users_int.h"
#include "account/websess.h"

#define RESET_TTL_S 3600
#define HOUR_S 3600

void
user_params(const struct config *cfg, struct pw_params *p)
{
	p->t_cost = (uint32_t)cfg->argon2_t_cost;
	p->m_kib = (uint32_t)cfg->argon2_m_kib;
	p->lanes = (uint32_t)cfg->argon2_lanes;
}

int
user_email_norm(const char *in, char *out, size_t n, struct err *e)
{
	size_t len;
	const char *at;

	while (*in == ' ' || *in == '\t')
		in++;
	len = strlen(in);
	while (len > 0 && (in[len - 1] == ' ' || in[len - 1] == '\t'))
		len--;
	at = memchr(in, '@', len);
	if (len < 3 || len > USER_EMAIL_MAX || len >= n || at == NULL || at == in ||
	    at == in + len - 1 || memchr(at + 1, '@', len - (size_t)(at + 1 - in)) != NULL ||
	    memchr(at, '.', len - (size_t)(at - in)) == NULL) {
		err_set_field(e, "email", "Enter an e-mail address such as name@example.com.");
		return -1;
	}
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)in[i];

		if (c <= 0x20 || c >= 0x7f || c == '<' || c == '>' || c == '"' || c == '\\' ||
		    c == ',' || c == ';') {
			err_set_field(e, "email",
			    "An e-mail address has no spaces, quotes or brackets.");
			return -1;
		}
		out[i] = (char)tolower(c);
	}
	out[len] = '\0';
	return 0;
}

/* A new single-use link of `purpose` for the account, its token in
 * `token`; returns the mail's URL in `url`. */
int
user_link_new(PGconn *c, const struct config *cfg, const char *account, const char *purpose,
    int ttl_s, const char *new_email, char token[USER_LINK_LEN + 1], char *url, size_t un,
    struct err *e)
{
	char hash[KEY_HASH_HEX_LEN + 1], ttl[16];
	const char *p[5] = { hash, account, purpose, ttl, new_email };
	const char *page = strcmp(purpose, "verify") == 0 ? "verify" :
	    strcmp(purpose, "email") == 0                 ? "email/confirm" :
							    "reset/confirm";

	if (key_random_hex(token, USER_LINK_LEN + 1, USER_LINK_LEN / 2) < 0) {
		err_set(e, ERR_INTERNAL, "no randomness");
		return -1;
	}
	key_hash_hex(token, USER_LINK_LEN, hash, sizeof(hash));
	if (fmt_err(e, "link lifetime", ttl, sizeof(ttl), "%d", ttl_s) < 0 ||
	    fmt_err(e, "link URL", url, un, "%s/%s?code=%s", cfg->public_url, page, token) < 0)
		return -1;
	return db_conn_exec(c,
	    "INSERT INTO email_links(token_hash, account_id, purpose, expires_at, new_email) "
	    "VALUES ($1, $2, $3, now() + make_interval(secs => $4::int), $5)",
	    5, p, NULL, e);
}

void
user_money_text(long long micro, char *out, size_t n)
{
	fmt_cut(out, n, "$%lld.%02lld", micro / 1000000, (micro % 1000000) / 10000);
}

static int
mail_verify(PGconn *c, const struct config *cfg, const char *account, const char *email,
    struct err *e)
{
	char token[USER_LINK_LEN + 1], url[CONFIG_STR_MAX + 128], body[2048], credit[32];

	if (user_link_new(c, cfg, account, "verify", cfg->link_ttl_s, NULL, token, url, sizeof(url),
		e) < 0)
		return -1;
	user_money_text(cfg->free_credit, credit, sizeof(credit));
	if (fmt_err(e, "mail", body, sizeof(body),
		"Welcome to aas.\n\n"
		"Open this link to verify your e-mail address%s%s:\n\n%s\n\n"
		"The link works once, for %d hours. If you did not sign up, ignore this mail.\n",
		cfg->free_credit > 0 ? " and receive your free credit of " : "",
		cfg->free_credit > 0 ? credit : "", url, (cfg->link_ttl_s + 3599) / 3600) < 0)
		return -1;
	return mailq_put(c, account, email, "Verify your e-mail address for aas", body, e);
}

/* ERR_LIMIT with the retry delay when `subject` is over `max` events in
 * `window_s`; else counts one more. */
int
user_take_turn(PGconn *c, const char *kind, const char *value, int max, int window_s,
    const char *what, struct err *e)
{
	char subject[ATT_SUBJECT_MAX + 1], when[48];
	long long retry;
	int over;

	if (att_subject(subject, sizeof(subject), kind, value) < 0) {
		err_set(e, ERR_INVALID, "value too long");
		return -1;
	}
	if (att_lock(c, subject, e) < 0)
		return -1;
	over = att_over(c, subject, max, window_s, &retry, e);
	if (over < 0)
		return -1;
	if (over) {
		att_retry_text(retry, when, sizeof(when));
		err_set(e, ERR_LIMIT, "Too many %s. Try again %s.", what, when);
		return -1;
	}
	return att_record(c, subject, e);
}

int
user_account_of(PGconn *c, const char *email, char account[ACCT_ID_LEN + 1], struct err *e)
{
	const char *p[1] = { email };
	PGresult *r = db_conn_query(c,
	    "SELECT id FROM accounts WHERE lower(email) = $1 AND disabled_at IS NULL "
	    "ORDER BY created_at LIMIT 1",
	    1, p, e);
	int rc;

	if (r == NULL)
		return -1;
	rc = PQntuples(r) != 1 ? 0 : db_get_str(r, 0, 0, account, ACCT_ID_LEN + 1, e) == 0 ? 1 : -1;
	PQclear(r);
	return rc;
}

struct signup_ctx {
	const struct config *cfg;
	const char *email, *addr, *hash;
	char *account_id;
};

static int
signup_gate_tx(PGconn *c, void *arg, struct err *e)
{
	struct signup_ctx *sx = arg;

	return user_take_turn(c, "signup-ip", sx->addr, sx->cfg->signups_per_address, HOUR_S,
	    "sign-ups from your network", e);
}

static int
signup_tx(PGconn *c, void *arg, struct err *e)
{
	struct signup_ctx *sx = arg;
	char net[USER_ADDR_MAX + 1];
	const char *p[3] = { sx->email, sx->hash, net };
	PGresult *r;
	int rc;

	sx->account_id[0] = '\0';
	if (user_signup_net(sx->addr, net, sizeof(net), e) < 0)
		return -1;
	r = db_conn_query(c,
	    "INSERT INTO accounts(email, password_hash, signup_net) SELECT $1, $2, $3 "
	    "WHERE NOT EXISTS (SELECT 1 FROM accounts WHERE lower(email) = $1) RETURNING id",
	    3, p, e);
	if (r == NULL)
		return -1;
	if (PQntuples(r) == 0) {
		PQclear(r);
		/* Answered as a new account: the owner hears of it instead. */
		return user_signup_taken(c, sx->cfg, sx->email, e);
	}
	rc = db_get_str(r, 0, 0, sx->account_id, ACCT_ID_LEN + 1, e);
	PQclear(r);
	if (rc < 0)
		return -1;
	return mail_verify(c, sx->cfg, sx->account_id, sx->email, e);
}

int
user_signup(struct db *db, const struct config *cfg, const char *email_in, const char *password,
    const char *addr, char account_id[ACCT_ID_LEN + 1], struct err *e)
{
	char email[USER_EMAIL_MAX + 1], hash[PW_ENCODED_MAX];
	char acct[ACCT_ID_LEN + 8], client[USER_ADDR_MAX + 8];
	struct pw_params pp;
	struct pw_who who;
	struct signup_ctx sx = { cfg, email, addr, hash, account_id };

	account_id[0] = '\0';
	if (user_email_norm(email_in, email, sizeof(email), e) < 0 ||
	    pw_policy_check(password, strlen(password), email, e) < 0)
		return -1;
	/* The limit before the slow hash; the hash whether or not the
	 * address has an account, so the time does not tell. */
	if (db_tx(db, signup_gate_tx, &sx, e) < 0)
		return -1;
	user_params(cfg, &pp);
	if (user_who(&who, acct, sizeof(acct), client, sizeof(client), NULL, addr, e) < 0 ||
	    pw_hash_as(&who, &pp, password, strlen(password), hash, sizeof(hash), e) < 0)
		return -1;
	return db_tx(db, signup_tx, &sx, e);
}

/* Reads which account a live link of `purpose` belongs to, without a
 * lock (the lock order takes the account first). */
int
user_link_account(PGconn *c, const char *hash, const char *purpose, char *account, struct err *e)
{
	const char *p[2] = { hash, purpose };
	PGresult *r;
	int rc;

	r = db_conn_query_row(c,
	    "SELECT account_id FROM email_links WHERE token_hash = $1 AND purpose = $2", 2, p, e,
	    ERR_NOT_FOUND, NULL, "This link is not valid. Check that the whole link was opened.");
	if (r == NULL)
		return -1;
	rc = db_get_str(r, 0, 0, account, ACCT_ID_LEN + 1, e);
	PQclear(r);
	return rc;
}

/* With the account locked: locks the link and checks it is live;
 * `use` marks it used. */
int
user_link_take(PGconn *c, const char *hash, int use, struct err *e)
{
	const char *p[1] = { hash };
	PGresult *r;
	int used, expired, rc = -1;

	r = db_conn_query(c,
	    "SELECT used_at IS NOT NULL, expires_at <= now() FROM email_links "
	    "WHERE token_hash = $1 FOR UPDATE",
	    1, p, e);
	if (r == NULL)
		return -1;
	if (db_get_bool(r, 0, 0, &used, e) < 0 || db_get_bool(r, 0, 1, &expired, e) < 0)
		goto out;
	if (used) {
		err_set(e, ERR_CONFLICT, "This link was used already. Each link works once.");
		goto out;
	}
	if (expired) {
		err_set(e, ERR_TIMEOUT, "This link expired. Ask for a new one.");
		goto out;
	}
	rc = use ? db_conn_exec(c, "UPDATE email_links SET used_at = now() WHERE token_hash = $1",
		       1, p, NULL, e) :
		   0;
out:
	PQclear(r);
	return rc;
}

int
user_lock_account(PGconn *c, const char *account, struct err *e)
{
	const char *p[1] = { account };
	PGresult *r = db_conn_query_row(c, "SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE", 1, p,
	    e, ERR_NOT_FOUND, NULL, "no such account");

	if (r == NULL)
		return -1;
	PQclear(r);
	return 0;
}

int
user_token_hash(const char *token, char hash[KEY_HASH_HEX_LEN + 1], struct err *e)
{
	size_t n = strlen(token);

	for (size_t i = 0; i < n; i++)
		if (!isxdigit((unsigned char)token[i]) || isupper((unsigned char)token[i]))
			n = 0;
	if (n != USER_LINK_LEN) {
		err_set(e, ERR_NOT_FOUND,
		    "This link is not valid. Check that the whole link was opened.");
		return -1;
	}
	key_hash_hex(token, n, hash, KEY_HASH_HEX_LEN + 1);
	return 0;
}

struct verify_ctx {
	const struct config *cfg;
	const char *hash;
	char *account_id;
	int *granted;
};

int
user_links_void(PGconn *c, const char *account, struct err *e)
{
	const char *p[1] = { account };

	return db_conn_exec(c,
	    "UPDATE email_links SET used_at = now() WHERE account_id = $1 "
	    "AND purpose IN ('reset', 'email') AND used_at IS NULL",
	    1, p, NULL, e);
}

static int
verify_tx(PGconn *c, void *arg, struct err *e)
{
	struct verify_ctx *vx = arg;
	const char *p[1] = { vx->account_id };

	if (user_link_account(c, vx->hash, "verify", vx->account_id, e) < 0 ||
	    user_lock_account(c, vx->account_id, e) < 0 || user_link_take(c, vx->hash, 1, e) < 0 ||
	    db_conn_exec(c,
		"UPDATE accounts SET email_verified_at = coalesce(email_verified_at, now()) "
		"WHERE id = $1",
		1, p, NULL, e) < 0)
		return -1;
	return user_grant_free(c, vx->cfg, vx->account_id, vx->granted, e);
}

int
user_verify(struct db *db, const struct config *cfg, const char *token,
    char account_id[ACCT_ID_LEN + 1], int *granted, struct err *e)
{
	char hash[KEY_HASH_HEX_LEN + 1];
	struct verify_ctx vx = { cfg, hash, account_id, granted };

	if (user_token_hash(token, hash, e) < 0)
		return -1;
	return db_tx(db, verify_tx, &vx, e);
}

struct resend_ctx {
	const struct config *cfg;
	const char *account, *addr;
};

static int
resend_tx(PGconn *c, void *arg, struct err *e)
{
	struct resend_ctx *rx = arg;
	const char *p[1] = { rx->account };
	char email[USER_EMAIL_MAX + 1];
	PGresult *r;
	int verified, rc;

	if (user_take_turn(c, "mail-ip", rx->addr, rx->cfg->signups_per_address, HOUR_S,
		"mails asked for from your network", e) < 0 ||
	    user_take_turn(c, "mail", rx->account, rx->cfg->mails_per_account, HOUR_S,
		"mails for this account", e) < 0)
		return -1;
	r = db_conn_query(c,
	    "SELECT email, email_verified_at IS NOT NULL FROM accounts WHERE id = $1", 1, p, e);
	if (r == NULL)
		return -1;
	rc = db_get_str(r, 0, 0, email, sizeof(email), e) < 0 ||
		db_get_bool(r, 0, 1, &verified, e) < 0 ?
	    -1 :
	    0;
	PQclear(r);
	if (rc < 0)
		return -1;
	if (verified) {
		err_set(e, ERR_CONFLICT, "This e-mail address is verified already.");
		return -1;
	}
	return mail_verify(c, rx->cfg, rx->account, email, e);
}

int
user_resend(struct db *db, const struct config *cfg, const char *account, const char *addr,
    struct err *e)
{
	struct resend_ctx rx = { cfg, account, addr };

	return db_tx(db, resend_tx, &rx, e);
}

struct login_ctx {
	const struct config *cfg;
	const char *email, *addr;
	char *account_id;
	char hash[PW_ENCODED_MAX];
	int found, disabled, failed, unchecked;
};

/* The three subjects a login counts under: its e-mail from this client
 * (the lockout), its client (any e-mail) and its e-mail from anywhere
 * (a bound on guessing from many clients). The pair is hashed: an e-mail
 * and an address together may be longer than a subject. */
static int
login_subjects(const struct login_ctx *lx, char *by_pair, char *by_addr, char *by_email,
    struct err *e)
{
	char pair[USER_EMAIL_MAX + USER_ADDR_MAX + 2], hash[KEY_HASH_HEX_LEN + 1];

	if (fmt_err(e, "e-mail address or client address", pair, sizeof(pair), "%s|%s", lx->email,
		lx->addr) < 0)
		return -1;
	key_hash_hex(pair, strlen(pair), hash, sizeof(hash));
	if (att_subject(by_pair, ATT_SUBJECT_MAX + 1, "login-from", hash) < 0 ||
	    att_subject(by_addr, ATT_SUBJECT_MAX + 1, "login-ip", lx->addr) < 0 ||
	    att_subject(by_email, ATT_SUBJECT_MAX + 1, "login", lx->email) < 0) {
		err_set(e, ERR_INVALID, "e-mail address or client address too long");
		return -1;
	}
	return 0;
}

/* 1 (with the message in e) when one of the login's subjects is over
 * its limit, 0 when none is, -1 on an error. Failures from one client
 * lock that client out of that e-mail only; the owner elsewhere still
 * logs in. The e-mail's bound over every client lasts AAS_LOCKOUT_S and
 * a password reset (which logs in) passes it. */
static int
login_locked(PGconn *c, const struct login_ctx *lx, const char *by_pair, const char *by_addr,
    const char *by_email, struct err *e)
{
	const struct config *cfg = lx->cfg;
	char when[48];
	long long retry;
	int over;

	over = att_over(c, by_addr, cfg->login_failures_per_address, cfg->lockout_s, &retry, e);
	if (over == 0)
		over = att_over(c, by_pair, cfg->login_failures, cfg->lockout_s, &retry, e);
	if (over != 0) {
		if (over > 0) {
			att_retry_text(retry, when, sizeof(when));
			err_set(e, ERR_LIMIT,
			    "Too many failed logins. Login is locked; try again %s.", when);
		}
		return over;
	}
	over = att_over(c, by_email, cfg->login_failures_per_email, cfg->lockout_s, &retry, e);
	if (over > 0) {
		att_retry_text(retry, when, sizeof(when));
		err_set(e, ERR_LIMIT,
		    "Too many failed logins for this e-mail address. Login is locked; try again "
		    "%s, or reset your password to log in now.",
		    when);
	}
	return over;
}

/* Before the password is checked: the lockouts, then the attempt is
 * counted as a failure (so logins sent at once cannot all pass a count
 * that is written only after their slow hash), then the account. */
static int
login_gate_tx(PGconn *c, void *arg, struct err *e)
{
	struct login_ctx *lx = arg;
	char by_pair[ATT_SUBJECT_MAX + 1], by_addr[ATT_SUBJECT_MAX + 1];
	char by_email[ATT_SUBJECT_MAX + 1];
	const char *p[1] = { lx->email };
	PGresult *r;

	if (login_subjects(lx, by_pair, by_addr, by_email, e) < 0 || att_lock(c, by_email, e) < 0 ||
	    att_lock(c, by_pair, e) < 0 || att_lock(c, by_addr, e) < 0)
		return -1;
	if (login_locked(c, lx, by_pair, by_addr, by_email, e) != 0)
		return -1;
	if (att_record(c, by_addr, e) < 0 || att_record(c, by_pair, e) < 0 ||
	    att_record(c, by_email, e) < 0)
		return -1;
	r = db_conn_query(c,
	    "SELECT id, coalesce(password_hash, ''), disabled_at IS NOT NULL FROM accounts "
	    "WHERE lower(email) = $1 ORDER BY created_at LIMIT 1",
	    1, p, e);
	if (r == NULL)
		return -1;
	lx->found = PQntuples(r) == 1;
	if (lx->found &&
	    (db_get_str(r, 0, 0, lx->account_id, ACCT_ID_LEN + 1, e) < 0 ||
		db_get_str(r, 0, 1, lx->hash, sizeof(lx->hash), e) < 0 ||
		db_get_bool(r, 0, 2, &lx->disabled, e) < 0)) {
		PQclear(r);
		return -1;
	}
	PQclear(r);
	return 0;
}

/* After it: a success clears the e-mail's failures (from this client
 * and from all) and takes back the client's one; an attempt that could
 * not be checked takes back all three. */
static int
login_result_tx(PGconn *c, void *arg, struct err *e)
{
	struct login_ctx *lx = arg;
	char by_pair[ATT_SUBJECT_MAX + 1], by_addr[ATT_SUBJECT_MAX + 1];
	char by_email[ATT_SUBJECT_MAX + 1];

	if (lx->failed)
		return 0;
	if (login_subjects(lx, by_pair, by_addr, by_email, e) < 0 ||
	    att_forget_one(c, by_addr, e) < 0)
		return -1;
	if (lx->unchecked)
		return att_forget_one(c, by_pair, e) < 0 ? -1 : att_forget_one(c, by_email, e);
	return att_clear(c, by_pair, e) < 0 ? -1 : att_clear(c, by_email, e);
}

int
user_login(struct db *db, const struct config *cfg, const char *email_in, const char *password,
    const char *addr, char account_id[ACCT_ID_LEN + 1], struct err *e)
{
	char email[USER_EMAIL_MAX + 1], acct[USER_EMAIL_MAX + 8], client[USER_ADDR_MAX + 8];
	struct login_ctx lx;
	struct pw_who who;
	struct pw_params pp;
	struct err pe, ignore;
	int v;
	size_t plen = strlen(password);

	if (user_email_norm(email_in, email, sizeof(email), e) < 0)
		return -1;
	memset(&lx, 0, sizeof(lx));
	lx.cfg = cfg;
	lx.email = email;
	lx.addr = addr;
	lx.account_id = account_id;
	if (db_tx(db, login_gate_tx, &lx, e) < 0)
		return -1;
	user_params(cfg, &pp);
	/* The hash turns are counted under the address typed (an account or
	 * not, the same) and the client. */
	if (user_who(&who, acct, sizeof(acct), client, sizeof(client), email, addr, e) < 0)
		return -1;
	err_clear(&pe);
	if (lx.found && lx.hash[0] != '\0' && plen <= PW_PASSWORD_MAX)
		v = pw_verify_as(&who, lx.hash, password, plen, &pe);
	else /* the same work, so the time does not tell whether it exists */
		v = pw_burn_as(&who, &pp, password, plen < PW_PASSWORD_MAX ? plen : PW_PASSWORD_MAX,
		    &pe);
	lx.unchecked = v < 0 && (pe.kind == ERR_UNAVAILABLE || pe.kind == ERR_LIMIT);
	lx.failed = v != 1 && !lx.unchecked;
	if (db_tx(db, login_result_tx, &lx, e) < 0)
		return -1;
	if (lx.unchecked) {
		err_set(e, pe.kind, "Too many logins at this moment. Try again in a few seconds.");
		return -1;
	}
	if (lx.failed) {
		err_set(e, ERR_UNAUTHORIZED, "Wrong e-mail address or password.");
		return -1;
	}
	if (lx.disabled) {
		err_set(e, ERR_FORBIDDEN, "This account is disabled. Contact the operator.");
		return -1;
	}
	err_clear(&ignore);
	if (pw_needs_rehash(lx.hash, &pp)) {
		/* Parameters were raised since: the new hash takes them. */
		char hash[PW_ENCODED_MAX];
		const char *p[2] = { account_id, hash };

		if (pw_hash_as(&who, &pp, password, plen, hash, sizeof(hash), &ignore) == 0)
			err_ignore(db_exec(db,
			    "UPDATE accounts SET password_hash = $2 WHERE id = $1", 2, p, NULL,
			    &ignore));
	}
	return 0;
}

struct reset_ctx {
	const struct config *cfg;
	const char *email, *addr, *hash, *pwhash;
	char *account_id;
	int revoke_keys;
};

static int
reset_request_tx(PGconn *c, void *arg, struct err *e)
{
	struct reset_ctx *rx = arg;
	char account[ACCT_ID_LEN + 1], token[USER_LINK_LEN + 1], url[CONFIG_STR_MAX + 128];
	char body[2048];
	int found;

	if (user_take_turn(c, "mail-ip", rx->addr, rx->cfg->signups_per_address, HOUR_S,
		"mails asked for from your network", e) < 0)
		return -1;
	if ((found = user_account_of(c, rx->email, account, e)) <= 0)
		return found;
	/* Over the account's allowance the request is quietly dropped: the
	 * page must not tell whether the address has an account. */
	{
		struct err quiet;

		err_clear(&quiet);
		if (user_take_turn(c, "mail", account, rx->cfg->mails_per_account, HOUR_S, "mails",
			&quiet) < 0) {
			if (quiet.kind == ERR_LIMIT)
				return 0;
			err_set(e, quiet.kind, "%s", quiet.msg);
			return -1;
		}
	}
	if (user_link_new(c, rx->cfg, account, "reset", RESET_TTL_S, NULL, token, url, sizeof(url),
		e) < 0)
		return -1;
	if (fmt_err(e, "mail", body, sizeof(body),
		"Someone asked to reset the password of your aas account.\n\n"
		"Open this link to choose a new password:\n\n%s\n\n"
		"The link works once, for one hour. If it was not you, ignore this mail: your "
		"password stays as it is.\n",
		url) < 0)
		return -1;
	return mailq_put(c, account, rx->email, "Reset your aas password", body, e);
}

int
user_reset_request(struct db *db, const struct config *cfg, const char *email_in, const char *addr,
    struct err *e)
{
	char email[USER_EMAIL_MAX + 1];
	struct reset_ctx rx = { cfg, email, addr, NULL, NULL, NULL, 0 };

	if (user_email_norm(email_in, email, sizeof(email), e) < 0)
		return -1;
	return db_tx(db, reset_request_tx, &rx, e);
}

struct check_ctx {
	const char *hash, *purpose;
};

static int
link_check_tx(PGconn *c, void *arg, struct err *e)
{
	struct check_ctx *kx = arg;
	char account[ACCT_ID_LEN + 1];

	if (user_link_account(c, kx->hash, kx->purpose, account, e) < 0 ||
	    user_lock_account(c, account, e) < 0)
		return -1;
	return user_link_take(c, kx->hash, 0, e);
}

int
user_link_check(struct db *db, const char *token, const char *purpose, struct err *e)
{
	char hash[KEY_HASH_HEX_LEN + 1];
	struct check_ctx kx = { hash, purpose };

	if (user_token_hash(token, hash, e) < 0)
		return -1;
	return db_tx(db, link_check_tx, &kx, e);
}

int
user_reset_check(struct db *db, const char *token, struct err *e)
{
	return user_link_check(db, token, "reset", e);
}

static int
reset_confirm_tx(PGconn *c, void *arg, struct err *e)
{
	struct reset_ctx *rx = arg;
	const char *p[2] = { rx->account_id, rx->pwhash };

	int granted;

	/* Every other reset or address-change link goes with the old password. */
	if (user_link_account(c, rx->hash, "reset", rx->account_id, e) < 0 ||
	    user_lock_account(c, rx->account_id, e) < 0 || user_link_take(c, rx->hash, 1, e) < 0 ||
	    db_conn_exec(c,
		"UPDATE accounts SET password_hash = $2, "
		"email_verified_at = coalesce(email_verified_at, now()) WHERE id = $1",
		2, p, NULL, e) < 0 ||
	    user_links_void(c, rx->account_id, e) < 0 ||
	    user_grant_free(c, rx->cfg, rx->account_id, &granted, e) < 0 ||
	    user_grants_end(c, rx->account_id, e) < 0 ||
	    (rx->revoke_keys && user_keys_end(c, rx->account_id, NULL, e) < 0))
		return -1;
	return wsess_end_account(c, rx->account_id, e);
}

int
user_reset_confirm(struct db *db, const struct config *cfg, const struct user_reset *rs,
    char account_id[ACCT_ID_LEN + 1], struct err *e)
{
	char hash[KEY_HASH_HEX_LEN + 1], pwhash[PW_ENCODED_MAX];
	char acct[ACCT_ID_LEN + 8], client[USER_ADDR_MAX + 8];
	struct reset_ctx rx = { cfg, NULL, rs->addr, hash, pwhash, account_id, rs->revoke_keys };
	const char *token = rs->token, *password = rs->password;
	struct pw_params pp;
	struct pw_who who;

	const char *ph[1] = { hash };
	char email[USER_EMAIL_MAX + 1] = "";
	PGresult *r;
	int rc;

	if (user_token_hash(token, hash, e) < 0 || user_reset_check(db, token, e) < 0)
		return -1;
	/* The policy's rule on the address's local part holds here too. */
	r = db_query(db,
	    "SELECT a.email FROM email_links l JOIN accounts a ON a.id = l.account_id "
	    "WHERE l.token_hash = $1",
	    1, ph, e);
	if (r == NULL)
		return -1;
	rc = PQntuples(r) == 1 ? db_get_str(r, 0, 0, email, sizeof(email), e) : 0;
	PQclear(r);
	if (rc < 0 || pw_policy_check(password, strlen(password), email, e) < 0)
		return -1;
	user_params(cfg, &pp);
	if (user_who(&who, acct, sizeof(acct), client, sizeof(client), NULL, rs->addr, e) < 0 ||
	    pw_hash_as(&who, &pp, password, strlen(password), pwhash, sizeof(pwhash), e) < 0)
		return -1;
	return db_tx(db, reset_confirm_tx, &rx, e);
}

struct change_ctx {
	const char *account, *pwhash;
};

static int
change_tx(PGconn *c, void *arg, struct err *e)
{
	struct change_ctx *cx = arg;
	const char *p[2] = { cx->account, cx->pwhash };

	if (user_lock_account(c, cx->account, e) < 0 ||
	    db_conn_exec(c, "UPDATE accounts SET password_hash = $2 WHERE id = $1", 2, p, NULL, e) <
		0 ||
	    user_links_void(c, cx->account, e) < 0 || user_grants_end(c, cx->account, e) < 0)
		return -1;
	return wsess_end_account(c, cx->account, e);
}

int
user_password_change(struct db *db, const struct config *cfg, const char *account,
    const char *old_password, const char *new_password, const char *addr, struct err *e)
{
	char email[USER_EMAIL_MAX + 1], pwhash[PW_ENCODED_MAX];
	char acct[ACCT_ID_LEN + 8], client[USER_ADDR_MAX + 8];
	struct change_ctx cx = { account, pwhash };
	struct pw_params pp;
	struct pw_who who;

	if (user_check_password(db, cfg, account, old_password, addr, email, sizeof(email), e) <
		0 ||
	    pw_policy_check(new_password, strlen(new_password), email, e) < 0)
		return -1;
	user_params(cfg, &pp);
	if (user_who(&who, acct, sizeof(acct), client, sizeof(client), account, addr, e) < 0 ||
	    pw_hash_as(&who, &pp, new_password, strlen(new_password), pwhash, sizeof(pwhash), e) <
		0)
		return -1;
	return db_tx(db, change_tx, &cx, e);
}
