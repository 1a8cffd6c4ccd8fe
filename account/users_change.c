/* users_change.c - changing an account's address and deleting an
 * account (user_). */
#include <string.h>

#include "base/fmt.h"
#include "account/attempts.h"
#include "account/mailq.h"
#include "account/users_int.h"
#include "account/websess.h"

#define HOUR_S 3600
#define EMAIL_LINK_TTL_S (24 * 3600)

struct change_ctx {
	const struct config *cfg;
	const char *account, *old_email, *new_email, *addr;
	const char *hash; /* confirm: the link's */
	char *account_out;
};

static int
taken(PGconn *c, const char *email, const char *except, struct err *e)
{
	const char *p[2] = { email, except };
	PGresult *r = db_conn_query(c,
	    "SELECT 1 FROM accounts WHERE lower(email) = $1 AND id IS DISTINCT FROM $2::uuid", 2, p,
	    e);
	int n;

	if (r == NULL)
		return -1;
	n = PQntuples(r);
	PQclear(r);
	if (n > 0) {
		err_set_at(e, ERR_CONFLICT, "email", "An account with this e-mail address exists.");
		return -1;
	}
	return 0;
}

static int
request_tx(PGconn *c, void *arg, struct err *e)
{
	struct change_ctx *cx = arg;
	char token[USER_LINK_LEN + 1], url[CONFIG_STR_MAX + 128], body[2048];

	if (user_take_turn(c, "mail-ip", cx->addr, cx->cfg->signups_per_address, HOUR_S,
		"mails asked for from your network", e) < 0 ||
	    user_take_turn(c, "mail", cx->account, cx->cfg->mails_per_account, HOUR_S,
		"mails for this account", e) < 0 ||
	    user_lock_account(c, cx->account, e) < 0 ||
	    taken(c, cx->new_email, cx->account, e) < 0 ||
	    user_link_new(c, cx->cfg, cx->account, "email", EMAIL_LINK_TTL_S, cx->new_email, token,
		url, sizeof(url), e) < 0)
		return -1;
	if (fmt_err(e, "mail", body, sizeof(body),
		"Someone asked to move an aas account to this address.\n\n"
		"Open this link to confirm it:\n\n%s\n\n"
		"The link works once, for 24 hours. If it was not you, ignore this mail.\n",
		url) < 0 ||
	    mailq_put(c, cx->account, cx->new_email, "Confirm your new e-mail address for aas",
		body, e) < 0)
		return -1;
	return mailq_put(c, cx->account, cx->old_email, "Your aas e-mail address is changing",
	    "Someone asked to move your aas account to another e-mail address. It moves only "
	    "when the link sent to the new address is opened.\n\n"
	    "If it was not you, change your password now: someone knows it.\n",
	    e);
}

int
user_email_change_request(struct db *db, const struct config *cfg, const char *account,
    const char *password, const char *new_email_in, const char *addr, struct err *e)
{
	char old[USER_EMAIL_MAX + 1], email[USER_EMAIL_MAX + 1];
	struct change_ctx cx = { cfg, account, old, email, addr, NULL, NULL };

	if (user_email_norm(new_email_in, email, sizeof(email), e) < 0 ||
	    user_check_password(db, cfg, account, password, addr, old, sizeof(old), e) < 0)
		return -1;
	if (strcmp(old, email) == 0) {
		err_set_field(e, "email", "This is your address already.");
		return -1;
	}
	return db_tx(db, request_tx, &cx, e);
}

static int
confirm_tx(PGconn *c, void *arg, struct err *e)
{
	struct change_ctx *cx = arg;
	const char *ph[1] = { cx->hash };
	char email[USER_EMAIL_MAX + 1];
	PGresult *r;
	int rc;

	if (user_link_account(c, cx->hash, "email", cx->account_out, e) < 0 ||
	    user_lock_account(c, cx->account_out, e) < 0 || user_link_take(c, cx->hash, 1, e) < 0)
		return -1;
	r = db_conn_query(c, "SELECT new_email FROM email_links WHERE token_hash = $1", 1, ph, e);
	if (r == NULL)
		return -1;
	rc = db_get_str(r, 0, 0, email, sizeof(email), e);
	PQclear(r);
	if (rc < 0 || taken(c, email, cx->account_out, e) < 0)
		return -1;
	const char *p[2] = { cx->account_out, email };
	PGresult *old = db_conn_query(c, "SELECT email FROM accounts WHERE id = $1", 1, p, e);
	char was[USER_EMAIL_MAX + 1];

	if (old == NULL)
		return -1;
	rc = db_get_str(old, 0, 0, was, sizeof(was), e);
	PQclear(old);
	if (rc < 0 ||
	    db_conn_exec(c,
		"UPDATE accounts SET email = $2, email_verified_at = now() WHERE id = $1 "
		"AND deleted_at IS NULL",
		2, p, NULL, e) < 0 ||
	    user_links_void(c, cx->account_out, e) < 0)
		return -1;
	return mailq_put(c, cx->account_out, was, "Your aas e-mail address changed",
	    "Your aas account now uses another e-mail address. If you did not ask for this, "
	    "contact the operator of the service.\n",
	    e);
}

int
user_email_change_confirm(struct db *db, const struct config *cfg, const char *token,
    char account_id[ACCT_ID_LEN + 1], struct err *e)
{
	char hash[KEY_HASH_HEX_LEN + 1];
	struct change_ctx cx = { cfg, NULL, NULL, NULL, NULL, hash, account_id };

	if (user_token_hash(token, hash, e) < 0)
		return -1;
	return db_tx(db, confirm_tx, &cx, e);
}

struct delete_ctx {
	const char *account, *email;
};

static int
delete_tx(PGconn *c, void *arg, struct err *e)
{
	struct delete_ctx *dx = arg;
	const char *p[1] = { dx->account };
	char subject[ATT_SUBJECT_MAX + 1];
	const char *ps[1] = { subject };

	struct acct_disabled dis;

	/* Disabled first, in the same transaction (the account row is locked
	 * first there): no key works from the commit on, and every aasd stops
	 * the account's sandboxes, settling each. */
	if (acct_disable_in(c, dx->account, &dis, e) < 0 ||
	    db_conn_exec(c,
		"UPDATE accounts SET email = 'deleted-' || id || '@deleted.invalid', "
		"password_hash = NULL, deleted_at = coalesce(deleted_at, now()) WHERE id = $1",
		1, p, NULL, e) < 0 ||
	    db_conn_exec(c, "DELETE FROM email_links WHERE account_id = $1", 1, p, NULL, e) < 0 ||
	    db_conn_exec(c, "DELETE FROM mail_outbox WHERE account_id = $1 AND sent_at IS NULL", 1,
		p, NULL, e) < 0 ||
	    db_conn_exec(c,
		"UPDATE mail_outbox SET to_addr = 'deleted@deleted.invalid', subject = '' "
		"WHERE account_id = $1",
		1, p, NULL, e) < 0 ||
	    wsess_end_account(c, dx->account, e) < 0)
		return -1;
	if (att_subject(subject, sizeof(subject), "login", dx->email) == 0 &&
	    db_conn_exec(c, "DELETE FROM auth_events WHERE subject = $1", 1, ps, NULL, e) < 0)
		return -1;
	if (att_subject(subject, sizeof(subject), "mail", dx->account) == 0 &&
	    db_conn_exec(c, "DELETE FROM auth_events WHERE subject = $1", 1, ps, NULL, e) < 0)
		return -1;
	return 0;
}

int
user_delete(struct db *db, const struct config *cfg, const char *account, const char *password,
    const char *addr, struct err *e)
{
	char email[USER_EMAIL_MAX + 1];
	struct delete_ctx dx = { account, email };

	if (user_check_password(db, cfg, account, password, addr, email, sizeof(email), e) < 0)
		return -1;
	return db_tx(db, delete_tx, &dx, e);
}
