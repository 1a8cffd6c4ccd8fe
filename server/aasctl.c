/* aasctl.c - admin CLI: accounts, API keys, hosts, schema. Talks to PostgreSQL
 * directly with the same configuration as aasd. Prints JSON. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/crypto.h>

#include "account/accounts.h"
#include "service/app.h"
#include "sandbox/hosts.h"
#include "sandbox/store.h"
#include "base/clock.h"
#include "base/config.h"
#include "billing/ledger.h"
#include "sandbox/usage.h"
#include "account/mailq.h"
#include "base/log.h"
#include "base/num.h"

#define AASCTL_MAX_LEDGER 1000 /* ledger entries one command prints */

static const char usage[] =
    "usage: aasctl COMMAND [options]\n"
    "  migrate                                   apply database migrations\n"
    "  account create --email E                  new account and its first API key\n"
    "  account list\n"
    "  account disable --account ID              revoke its keys, end its sessions; every aasd\n"
    "                                            stops its sandboxes (settled) within a second\n"
    "  account enable --account ID               let it in again (its keys stay revoked)\n"
    "  key create --account ID [--name N]        new API key (shown once)\n"
    "  key list --account ID\n"
    "  key revoke --key KEY_ID\n"
    "  credit grant --account ID --amount N --reason R   add N micro-USD of credit\n"
    "  ledger --account ID [--limit N]           credit movements, newest first\n"
    "  host add URI [--name N] [--memory-overcommit R] [--cpu-overcommit R]\n"
    "           [--preview-address A]            register a hypervisor host, or change one\n"
    "           [--isolation-rule HASH]          (HASH: aasd --netguard-rules-hash of the\n"
    "           [--storage shared|pool]           rule installed there; storage: whether it\n"
    "                                            sees aasd's files, or keeps its own pool)\n"
    "  host list                                 state, capacity, reservations, live use\n"
    "  host drain HOST | host undrain HOST       stop / resume placing sandboxes there\n"
    "  host evacuate HOST [--wait S]             drain it and move its sandboxes to other\n"
    "                                            hosts (live migration); waits S seconds\n"
    "                                            (600) and lists those that cannot move\n"
    "  host remove HOST                          forget a host with no live sandboxes\n"
    "                                            (HOST: a host's name or URI)\n"
    "  mail pending [--limit N]                  mail not sent yet, with its text (links\n"
    "                                            included), for operators without SMTP\n"
    "  dev-key --email E --file F                reuse the key in F if it still works,\n"
    "                                            else create account/key and write F (0600)\n"
    "Configuration: the AAS_* environment variables aasd reads (docs/configuration.md).\n";

static const char *
env_get(const char *name)
{
	return getenv(name);
}

static const char *
opt(int argc, char **argv, const char *name)
{
	for (int i = 0; i + 1 < argc; i++)
		if (strcmp(argv[i], name) == 0)
			return argv[i + 1];
	return NULL;
}

static int
print_json(json_t *v)
{
	char *s = json_dumps(v, JSON_INDENT(2));

	json_decref(v);
	if (s == NULL)
		return 1;
	puts(s);
	free(s);
	return 0;
}

static int
fail(const struct err *e)
{
	json_t *v = json_pack("{s:{s:s, s:s}}", "error", "code", err_kind_name(e->kind), "message",
	    e->msg);
	char *s = json_dumps(v, JSON_INDENT(2));

	fprintf(stderr, "%s\n", s ? s : e->msg);
	free(s);
	json_decref(v);
	return 1;
}

/* The usage on stderr: a command or option missing. */
static int
bad_usage(void)
{
	fputs(usage, stderr);
	return 2;
}

static json_t *
key_json(const char *account_id, const struct acct_new_key *k)
{
	return json_pack("{s:s, s:s, s:s, s:s, s:s}", "account_id", account_id, "key_id", k->key_id,
	    "api_key", k->key, "prefix", k->prefix, "note",
	    "The key is shown only now; store it safely.");
}

static int
read_key_file(const char *path, char *out, size_t outsz)
{
	FILE *f = fopen(path, "r");
	size_t n;

	if (f == NULL)
		return -1;
	n = fread(out, 1, outsz - 1, f);
	fclose(f);
	out[n] = '\0';
	out[strcspn(out, "\r\n")] = '\0';
	return 0;
}

static int
write_key_file(const char *path, const char *key)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	size_t n = strlen(key);
	int ok;

	if (fd < 0)
		return -1;
	ok = write(fd, key, n) == (ssize_t)n && write(fd, "\n", 1) == 1;
	return close(fd) == 0 && ok ? 0 : -1;
}

/* The development account never runs dry: below the free credit it is
 * topped up to it (a ledger grant like any other). */
static int
dev_top_up(struct app *app, const char *account_id, struct err *e)
{
	const char *p[1] = { account_id };
	PGresult *r;
	long long balance;
	int64_t after;
	int rc;

	r = db_query(app->db, "SELECT balance FROM accounts WHERE id = $1", 1, p, e);
	if (r == NULL)
		return -1;
	rc = db_get_ll(r, 0, 0, &balance, e);
	PQclear(r);
	if (rc < 0)
		return -1;
	if (balance >= app->cfg.free_credit)
		return 0;
	return bill_grant(app->db, account_id, app->cfg.free_credit - balance,
	    "development top-up (make run)", &after, e);
}

/* Development convenience: one stable key per machine, kept in a 0600
 * file under the state directory, re-created only when it stops working. */
static int
cmd_dev_key(struct app *app, const char *email, const char *file, struct err *e)
{
	char key[256] = "", account_id[ACCT_ID_LEN + 1];
	struct acct_new_key nk;

	if (read_key_file(file, key, sizeof(key)) == 0 &&
	    acct_resolve_key(app->db, key, strlen(key), account_id, e) == 0) {
		OPENSSL_cleanse(key, sizeof(key));
		if (dev_top_up(app, account_id, e) < 0)
			return fail(e);
		return print_json(json_pack("{s:s, s:s, s:b}", "account_id", account_id, "key_file",
		    file, "reused", 1));
	}
	err_clear(e);
	if (acct_find_by_email(app->db, email, account_id, e) == 0) {
		if (acct_key_create(app->db, account_id, "dev", &nk, e) < 0)
			return fail(e);
	} else {
		if (e->kind != ERR_NOT_FOUND)
			return fail(e);
		err_clear(e);
		if (acct_create(app->db, email, app->cfg.free_credit, account_id, &nk, e) < 0)
			return fail(e);
	}
	if (write_key_file(file, nk.key) < 0) {
		err_set(e, ERR_INTERNAL, "cannot write %s", file);
		return fail(e);
	}
	OPENSSL_cleanse(&nk, sizeof(nk));
	return print_json(json_pack("{s:s, s:s, s:b}", "account_id", account_id, "key_file", file,
	    "reused", 0));
}

/* An overcommit option: 0 when absent, -1 when not a plain ratio. */
static int
ratio_opt(int argc, char **argv, const char *name, double *out, struct err *e)
{
	const char *v = opt(argc, argv, name);

	*out = 0;
	if (v == NULL)
		return 0;
	if (num_parse_decimal(v, out) < 0 || *out <= 0) {
		err_set_field(e, name + 2, "%s: a ratio such as 1 or 1.5", name);
		return -1;
	}
	return 0;
}

#define EVACUATE_WAIT_DEFAULT_S 600
#define EVACUATE_WAIT_MAX_S 86400

/* Starts an evacuation and waits until nothing waits or moves; exit 0
 * when every sandbox moved, 1 when some could not (listed), or the wait
 * ran out. */
static int
cmd_evacuate(struct app *app, int argc, char **argv, const char *host, struct err *e)
{
	const char *w = opt(argc, argv, "--wait");
	long long wait_s = EVACUATE_WAIT_DEFAULT_S, deadline;
	json_t *v = NULL;

	if (w && (num_parse_ll(w, &wait_s) < 0 || wait_s < 0 || wait_s > EVACUATE_WAIT_MAX_S)) {
		err_set_field(e, "wait", "--wait: seconds, 0 to %d", EVACUATE_WAIT_MAX_S);
		return fail(e);
	}
	if (hosts_evacuate(app->db, host, e) < 0)
		return fail(e);
	deadline = clock_ms() + wait_s * 1000;
	for (;;) {
		long long waiting, moving;

		json_decref(v);
		if ((v = hosts_evacuation_json(app->db, host, e)) == NULL)
			return fail(e);
		waiting = json_integer_value(json_object_get(v, "waiting"));
		moving = json_integer_value(json_object_get(v, "moving"));
		if ((waiting == 0 && moving == 0) || clock_ms() >= deadline)
			break;
		/* The serving aasd looks for work every few seconds. */
		struct timespec ts = { 0, 500 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	int done = json_integer_value(json_object_get(v, "waiting")) == 0 &&
	    json_integer_value(json_object_get(v, "moving")) == 0 &&
	    json_array_size(json_object_get(v, "not_moved")) == 0;
	print_json(v);
	return done ? 0 : 1;
}

static int
cmd_host(struct app *app, int argc, char **argv, struct err *e)
{
	const char *sub = argc > 2 ? argv[2] : "";
	const char *arg = argc > 3 && argv[3][0] != '-' ? argv[3] : NULL;
	json_t *v;

	if (strcmp(sub, "list") == 0) {
		v = hosts_list_json(app->db, e);
		return v ? print_json(v) : fail(e);
	}
	if (arg == NULL)
		return bad_usage();
	if (strcmp(sub, "add") == 0) {
		struct hosts_options o = { .name = opt(argc, argv, "--name"),
			.preview_address = opt(argc, argv, "--preview-address"),
			.isolation_rule = opt(argc, argv, "--isolation-rule"),
			.storage = opt(argc, argv, "--storage") };
		if (ratio_opt(argc, argv, "--memory-overcommit", &o.memory_overcommit, e) < 0 ||
		    ratio_opt(argc, argv, "--cpu-overcommit", &o.cpu_overcommit, e) < 0)
			return fail(e);
		v = hosts_add(app->db, arg, &o, e);
		return v ? print_json(v) : fail(e);
	}
	if (strcmp(sub, "drain") == 0 || strcmp(sub, "undrain") == 0) {
		int drain = strcmp(sub, "drain") == 0;
		if (hosts_set_draining(app->db, arg, drain, e) < 0)
			return fail(e);
		return print_json(json_pack("{s:s, s:b}", "host", arg, "draining", drain));
	}
	if (strcmp(sub, "evacuate") == 0)
		return cmd_evacuate(app, argc, argv, arg, e);
	if (strcmp(sub, "remove") == 0) {
		if (hosts_remove(app->db, arg, e) < 0)
			return fail(e);
		return print_json(json_pack("{s:s, s:b}", "host", arg, "removed", 1));
	}
	return bad_usage();
}

/* --limit: 100 when absent, else 1 to AASCTL_MAX_LEDGER; -1 otherwise. */
static int
limit_opt(int argc, char **argv, long long *out, struct err *e)
{
	const char *lim = opt(argc, argv, "--limit");

	*out = 100;
	if (lim && (num_parse_ll(lim, out) < 0 || *out < 1 || *out > AASCTL_MAX_LEDGER)) {
		err_set_field(e, "limit", "limit: a whole number from 1 to %d", AASCTL_MAX_LEDGER);
		return -1;
	}
	return 0;
}

/* An --account option naming an account id: 0, or -1 when it does not. */
static int
account_opt_valid(const char *acct, struct err *e)
{
	if (!acct_id_valid(acct)) {
		err_set_field(e, "account", "account: not an account id");
		return -1;
	}
	return 0;
}

static int
cmd_migrate(struct app *app, int argc, char **argv, struct err *e)
{
	(void)app;
	(void)argc;
	(void)argv;
	(void)e;
	return print_json(json_pack("{s:b}", "migrated", 1));
}

static int
cmd_dev_key_opts(struct app *app, int argc, char **argv, struct err *e)
{
	const char *email = opt(argc, argv, "--email");
	const char *file = opt(argc, argv, "--file");

	if (email == NULL || file == NULL)
		return bad_usage();
	return cmd_dev_key(app, email, file, e);
}

static int
cmd_account_create(struct app *app, int argc, char **argv, struct err *e)
{
	const char *email = opt(argc, argv, "--email");
	char account_id[ACCT_ID_LEN + 1];
	struct acct_new_key nk;
	json_t *v;

	if (email == NULL)
		return bad_usage();
	if (acct_create(app->db, email, app->cfg.free_credit, account_id, &nk, e) < 0)
		return fail(e);
	v = key_json(account_id, &nk);
	json_object_set_new(v, "email", json_string(email));
	OPENSSL_cleanse(&nk, sizeof(nk));
	return print_json(v);
}

static int
cmd_account_list(struct app *app, int argc, char **argv, struct err *e)
{
	json_t *v = acct_list(app->db, e);

	(void)argc;
	(void)argv;
	return v ? print_json(v) : fail(e);
}

static int
cmd_account_disable(struct app *app, int argc, char **argv, struct err *e)
{
	const char *acct = opt(argc, argv, "--account");
	struct acct_disabled d;
	long long live;

	if (acct == NULL)
		return bad_usage();
	if (store_disable_account(app->db, acct, &d, &live, e) < 0)
		return fail(e);
	return print_json(json_pack("{s:s, s:b, s:b, s:I, s:I, s:I}", "account_id", acct,
	    "disabled", 1, "already_disabled", d.already, "keys_revoked",
	    (json_int_t)d.keys_revoked, "sessions_ended", (json_int_t)d.sessions_ended,
	    "sandboxes_stopping", (json_int_t)live));
}

static int
cmd_account_enable(struct app *app, int argc, char **argv, struct err *e)
{
	const char *acct = opt(argc, argv, "--account");

	if (acct == NULL)
		return bad_usage();
	if (acct_enable(app->db, acct, e) < 0)
		return fail(e);
	return print_json(json_pack("{s:s, s:b, s:s}", "account_id", acct, "disabled", 0, "note",
	    "Its keys stay revoked; create a new one with key create."));
}

static int
cmd_key_create(struct app *app, int argc, char **argv, struct err *e)
{
	const char *acct = opt(argc, argv, "--account");
	struct acct_new_key nk;
	json_t *v;

	if (acct == NULL)
		return bad_usage();
	if (acct_key_create(app->db, acct, opt(argc, argv, "--name"), &nk, e) < 0)
		return fail(e);
	v = key_json(acct, &nk);
	OPENSSL_cleanse(&nk, sizeof(nk));
	return print_json(v);
}

static int
cmd_key_list(struct app *app, int argc, char **argv, struct err *e)
{
	const char *acct = opt(argc, argv, "--account");
	json_t *v;

	if (acct == NULL)
		return bad_usage();
	v = acct_key_list(app->db, acct, e);
	return v ? print_json(v) : fail(e);
}

static int
cmd_key_revoke(struct app *app, int argc, char **argv, struct err *e)
{
	const char *key_id = opt(argc, argv, "--key");

	if (key_id == NULL)
		return bad_usage();
	if (acct_key_revoke(app->db, key_id, e) < 0)
		return fail(e);
	return print_json(json_pack("{s:s, s:b}", "key_id", key_id, "revoked", 1));
}

static int
cmd_credit_grant(struct app *app, int argc, char **argv, struct err *e)
{
	const char *acct = opt(argc, argv, "--account");
	const char *amount = opt(argc, argv, "--amount");
	const char *reason = opt(argc, argv, "--reason");
	long long n;
	int64_t balance;

	if (acct == NULL || amount == NULL || reason == NULL)
		return bad_usage();
	if (num_parse_ll(amount, &n) < 0) {
		err_set_field(e, "amount", "amount: not a whole number of micro-USD");
		return fail(e);
	}
	if (account_opt_valid(acct, e) < 0)
		return fail(e);
	if (bill_grant(app->db, acct, n, reason, &balance, e) < 0)
		return fail(e);
	return print_json(json_pack("{s:s, s:I, s:I}", "account_id", acct, "granted", (json_int_t)n,
	    "balance", (json_int_t)balance));
}

static int
cmd_ledger(struct app *app, int argc, char **argv, struct err *e)
{
	const char *acct = opt(argc, argv, "--account");
	int64_t next;
	long long l;
	json_t *v;

	if (acct == NULL)
		return bad_usage();
	if (account_opt_valid(acct, e) < 0 || limit_opt(argc, argv, &l, e) < 0)
		return fail(e);
	v = usage_ledger_json(app->db, acct, (int)l, 0, &next, e);
	return v ? print_json(v) : fail(e);
}

static int
cmd_mail_pending(struct app *app, int argc, char **argv, struct err *e)
{
	long long l;
	json_t *v;

	if (limit_opt(argc, argv, &l, e) < 0)
		return fail(e);
	v = mailq_pending(app->db, (int)l, e);
	return v ? print_json(v) : fail(e);
}

/* The commands: the first word, the second ("" for none looked at), and
 * what runs them (the exit status). */
static const struct command {
	const char *what, *sub;
	int (*run)(struct app *app, int argc, char **argv, struct err *e);
} commands[] = {
	{ "migrate", "", cmd_migrate },
	{ "dev-key", "", cmd_dev_key_opts },
	{ "account", "create", cmd_account_create },
	{ "account", "list", cmd_account_list },
	{ "account", "disable", cmd_account_disable },
	{ "account", "enable", cmd_account_enable },
	{ "key", "create", cmd_key_create },
	{ "key", "list", cmd_key_list },
	{ "credit", "grant", cmd_credit_grant },
	{ "ledger", "", cmd_ledger },
	{ "key", "revoke", cmd_key_revoke },
	{ "host", "", cmd_host },
	{ "mail", "pending", cmd_mail_pending },
};

static int
run(struct app *app, int argc, char **argv, struct err *e)
{
	const char *sub = argc > 2 ? argv[2] : "";

	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		const struct command *c = &commands[i];

		if (strcmp(argv[1], c->what) == 0 &&
		    (c->sub[0] == '\0' || strcmp(sub, c->sub) == 0))
			return c->run(app, argc, argv, e);
	}
	return bad_usage();
}

int
main(int argc, char **argv)
{
	struct config cfg;
	struct err e;
	struct app *app;
	int rc;

	if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
		fputs(usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	err_clear(&e);
	if (config_load(&cfg, env_get, &e) < 0) {
		fprintf(stderr, "aasctl: config: %s\n", e.msg);
		return 1;
	}
	log_set_level(LOG_LEVEL_WARN);
	cfg.db_pool_size = 1;
	app = app_new(&cfg, 0, &e);
	if (app == NULL)
		return fail(&e);
	rc = run(app, argc, argv, &e);
	app_free(app);
	return rc;
}
