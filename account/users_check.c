/* users_check.c - the current-password check of a logged-in account
 * (user_): counted and limited as a login is, so a stolen dashboard
 * session cannot guess the password without bound. */
#include <string.h>

#include "base/fmt.h"
#include "account/attempts.h"
#include "account/users_int.h"

struct check_ctx {
	const struct config *cfg;
	const char *account, *addr;
	char email[USER_EMAIL_MAX + 1];
	char hash[PW_ENCODED_MAX];
	int failed, unchecked;
};

/* The subjects a login of the account's address counts under. */
static int
check_subjects(const struct check_ctx *cx, char *by_email, char *by_addr, struct err *e)
{
	if (att_subject(by_email, ATT_SUBJECT_MAX + 1, "login", cx->email) < 0 ||
	    att_subject(by_addr, ATT_SUBJECT_MAX + 1, "login-ip", cx->addr) < 0) {
		err_set(e, ERR_INVALID, "e-mail address or client address too long");
		return -1;
	}
	return 0;
}

/* Reads the account, then as login_gate_tx: the lockouts, and the check
 * counted as a failure before its slow hash. */
static int
check_gate_tx(PGconn *c, void *arg, struct err *e)
{
	struct check_ctx *cx = arg;
	char by_email[ATT_SUBJECT_MAX + 1], by_addr[ATT_SUBJECT_MAX + 1], when[48];
	const char *p[1] = { cx->account };
	long long retry;
	PGresult *r;
	int over, rc;

	r = db_conn_query_row(c,
	    "SELECT coalesce(password_hash, ''), lower(email) FROM accounts WHERE id = $1 "
	    "AND deleted_at IS NULL",
	    1, p, e, ERR_NOT_FOUND, NULL, "no such account");
	if (r == NULL)
		return -1;
	rc = db_get_str(r, 0, 0, cx->hash, sizeof(cx->hash), e) < 0 ||
		db_get_str(r, 0, 1, cx->email, sizeof(cx->email), e) < 0 ?
	    -1 :
	    0;
	PQclear(r);
	if (rc < 0)
		return -1;
	if (check_subjects(cx, by_email, by_addr, e) < 0 || att_lock(c, by_email, e) < 0 ||
	    att_lock(c, by_addr, e) < 0)
		return -1;
	over = att_over(c, by_addr, cx->cfg->login_failures_per_address, cx->cfg->lockout_s, &retry,
	    e);
	if (over == 0)
		over = att_over(c, by_email, cx->cfg->login_failures, cx->cfg->lockout_s, &retry,
		    e);
	if (over < 0)
		return -1;
	if (over) {
		att_retry_text(retry, when, sizeof(when));
		err_set(e, ERR_LIMIT,
		    "Too many wrong passwords. Password checks are locked; try again %s.", when);
		return -1;
	}
	return att_record(c, by_addr, e) < 0 ? -1 : att_record(c, by_email, e);
}

/* As login_result_tx: a success clears the address's failures and takes
 * back the client's one; a check that could not run takes back both. */
static int
check_result_tx(PGconn *c, void *arg, struct err *e)
{
	struct check_ctx *cx = arg;
	char by_email[ATT_SUBJECT_MAX + 1], by_addr[ATT_SUBJECT_MAX + 1];

	if (cx->failed)
		return 0;
	if (check_subjects(cx, by_email, by_addr, e) < 0 || att_forget_one(c, by_addr, e) < 0)
		return -1;
	return cx->unchecked ? att_forget_one(c, by_email, e) : att_clear(c, by_email, e);
}

int
user_who(struct pw_who *who, char *acct, size_t an, char *client, size_t cn, const char *account,
    const char *addr, struct err *e)
{
	if (fmt_err(e, "account name", acct, an, "acct:%s", account ? account : "") < 0 ||
	    fmt_err(e, "client address", client, cn, "addr:%s", addr ? addr : "") < 0)
		return -1;
	who->tag[0] = account && *account ? acct : NULL;
	who->tag[1] = addr && *addr ? client : NULL;
	return 0;
}

int
user_check_password(struct db *db, const struct config *cfg, const char *account,
    const char *password, const char *addr, char *email, size_t n, struct err *e)
{
	struct check_ctx cx;
	char acct[ACCT_ID_LEN + 8], client[USER_ADDR_MAX + 8];
	struct pw_who who;
	struct err pe;
	size_t plen = strlen(password);
	int v = 0;

	memset(&cx, 0, sizeof(cx));
	cx.cfg = cfg;
	cx.account = account;
	cx.addr = addr;
	if (db_tx(db, check_gate_tx, &cx, e) < 0)
		return -1;
	if (user_who(&who, acct, sizeof(acct), client, sizeof(client), account, addr, e) < 0)
		return -1;
	err_clear(&pe);
	if (cx.hash[0] != '\0' && plen <= PW_PASSWORD_MAX)
		v = pw_verify_as(&who, cx.hash, password, plen, &pe);
	cx.unchecked = v < 0 && (pe.kind == ERR_UNAVAILABLE || pe.kind == ERR_LIMIT);
	cx.failed = v != 1 && !cx.unchecked;
	if (db_tx(db, check_result_tx, &cx, e) < 0)
		return -1;
	if (cx.unchecked) {
		err_set(e, pe.kind,
		    "Too many password checks at this moment. Try again in a few seconds.");
		return -1;
	}
	if (cx.failed) {
		err_set_field(e, "current", "The current password is not right.");
		return -1;
	}
	return fmt_err(e, "e-mail address", email, n, "%s", cx.email);
}
