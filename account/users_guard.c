/* users_guard.c - answers that do not tell whether an address has an
 * account (user_): the notice a sign-up with a taken address mails. */
#include <string.h>

#include "base/fmt.h"
#include "account/mailq.h"
#include "account/users_int.h"

#define HOUR_S 3600

int
user_signup_taken(PGconn *c, const struct config *cfg, const char *email, struct err *e)
{
	char account[ACCT_ID_LEN + 1], body[2 * CONFIG_STR_MAX + 512];
	struct err quiet;
	int found;

	if ((found = user_account_of(c, email, account, e)) <= 0)
		return found;
	err_clear(&quiet);
	if (user_take_turn(c, "mail", account, cfg->mails_per_account, HOUR_S, "mails", &quiet) <
	    0) {
		if (quiet.kind == ERR_LIMIT)
			return 0;
		err_set(e, quiet.kind, "%s", quiet.msg);
		return -1;
	}
	if (fmt_err(e, "mail", body, sizeof(body),
		"Someone asked to create an aas account with this e-mail address, which has an "
		"account already. Nothing was changed.\n\n"
		"If it was you, log in at %s/login, or choose a new password at %s/reset.\n"
		"If it was not you, ignore this mail.\n",
		cfg->public_url, cfg->public_url) < 0)
		return -1;
	return mailq_put(c, account, email, "Your aas account", body, e);
}
