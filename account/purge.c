/* purge.c - the batched deletes of rows whose time is over. */
#include "account/purge.h"

#include <string.h>

#include "base/fmt.h"
#include "base/log.h"

/* A statement's settings beside $1, the batch. */
enum purge_arg { ARG_NONE, ARG_ANON_IDLE, ARG_IDLE, ARG_WEB_IDLE, ARG_WEB_ABS, ARG_LINK_TTL };

struct purge_kind {
	const char *name;
	const char *sql;
	enum purge_arg args[2];
};

#define CLAIM " LIMIT $1::int FOR UPDATE SKIP LOCKED)"

static const struct purge_kind kinds[PURGE_KINDS] = {
	{ "mcp_tasks",
	    "DELETE FROM mcp_tasks WHERE id IN (SELECT id FROM mcp_tasks"
	    " WHERE expires_at < now()" CLAIM,
	    { ARG_NONE, ARG_NONE } },
	/* Ended, or idle past their bound (anonymous or an account's). */
	{ "mcp_sessions",
	    "DELETE FROM mcp_sessions WHERE id IN (SELECT id FROM mcp_sessions"
	    " WHERE ended_at IS NOT NULL OR last_seen_at < now() - make_interval(secs =>"
	    " CASE WHEN account_id IS NULL THEN $2::int ELSE $3::int END)" CLAIM,
	    { ARG_ANON_IDLE, ARG_IDLE } },
	/* A day after they ended, idled out or reached their absolute age. */
	{ "web_sessions",
	    "DELETE FROM web_sessions WHERE id_hash IN (SELECT id_hash FROM web_sessions"
	    " WHERE ended_at < now() - interval '1 day'"
	    " OR last_seen_at < now() - make_interval(secs => $2::int) - interval '1 day'"
	    " OR created_at < now() - make_interval(secs => $3::int) - interval '1 day'" CLAIM,
	    { ARG_WEB_IDLE, ARG_WEB_ABS } },
	/* A day after they expired (till then a click says "expired"). */
	{ "email_links",
	    "DELETE FROM email_links WHERE token_hash IN (SELECT token_hash FROM email_links"
	    " WHERE expires_at < now() - interval '1 day'" CLAIM,
	    { ARG_NONE, ARG_NONE } },
	/* Sent a day ago (the body is blanked at once), or never sent and
	 * older than any link it may carry. */
	{ "mail_outbox",
	    "DELETE FROM mail_outbox WHERE id IN (SELECT id FROM mail_outbox"
	    " WHERE sent_at < now() - interval '1 day'"
	    " OR created_at < now() - make_interval(secs => $2::int) - interval '1 day'" CLAIM,
	    { ARG_LINK_TTL, ARG_NONE } },
	/* Limit events count over a day at most. */
	{ "auth_events",
	    "DELETE FROM auth_events WHERE ctid = ANY(ARRAY(SELECT ctid FROM auth_events"
	    " WHERE at < now() - interval '1 day' LIMIT $1::int FOR UPDATE SKIP LOCKED))",
	    { ARG_NONE, ARG_NONE } },
	/* Kept ten minutes past their expiry to recognise a replay. */
	{ "oauth_codes",
	    "DELETE FROM oauth_codes WHERE code_hash IN (SELECT code_hash FROM oauth_codes"
	    " WHERE expires_at < now() - interval '10 minutes'" CLAIM,
	    { ARG_NONE, ARG_NONE } },
	{ "oauth_tokens",
	    "DELETE FROM oauth_tokens WHERE token_hash IN (SELECT token_hash FROM oauth_tokens"
	    " WHERE expires_at < now()" CLAIM,
	    { ARG_NONE, ARG_NONE } },
	/* Revoked a month ago, with nothing left that names them. */
	{ "oauth_grants",
	    "DELETE FROM oauth_grants WHERE id IN (SELECT g.id FROM oauth_grants g"
	    " WHERE g.revoked_at < now() - interval '30 days'"
	    " AND NOT EXISTS (SELECT 1 FROM oauth_tokens t WHERE t.grant_id = g.id)"
	    " AND NOT EXISTS (SELECT 1 FROM oauth_codes c WHERE c.grant_id = g.id)" CLAIM,
	    { ARG_NONE, ARG_NONE } },
	/* Registered or fetched a day ago, and no grant names them. */
	{ "oauth_clients",
	    "DELETE FROM oauth_clients WHERE client_id IN (SELECT c.client_id FROM oauth_clients c"
	    " WHERE ((c.kind = 'registered' AND c.created_at < now() - interval '1 day')"
	    " OR (c.kind = 'document' AND c.fetched_at < now() - interval '1 day'))"
	    " AND NOT EXISTS (SELECT 1 FROM oauth_grants g WHERE g.client_id = c.client_id)" CLAIM,
	    { ARG_NONE, ARG_NONE } },
};

const char *
purge_kind_name(int i)
{
	return i >= 0 && i < PURGE_KINDS ? kinds[i].name : NULL;
}

static int
arg_value(const struct config *cfg, enum purge_arg a)
{
	switch (a) {
	case ARG_ANON_IDLE:
		return cfg->anon_session_idle_s;
	case ARG_IDLE:
		return cfg->session_idle_s;
	case ARG_WEB_IDLE:
		return cfg->web_idle_s;
	case ARG_WEB_ABS:
		return cfg->web_absolute_s;
	case ARG_LINK_TTL:
		return cfg->link_ttl_s;
	case ARG_NONE:
		break;
	}
	return 0;
}

/* Deletes one kind's rows, batch after batch; how many into *n. */
static int
purge_kind(struct db *db, const struct config *cfg, const struct purge_kind *k, long *n,
    struct err *e)
{
	char v[3][16];
	const char *p[3] = { v[0], v[1], v[2] };
	int np = 1;

	*n = 0;
	if (fmt_err(e, "batch size", v[0], sizeof(v[0]), "%d", PURGE_BATCH) < 0)
		return -1;
	for (int i = 0; i < 2 && k->args[i] != ARG_NONE; i++)
		if (fmt_err(e, "age", v[np++], sizeof(v[0]), "%d", arg_value(cfg, k->args[i])) < 0)
			return -1;
	for (int round = 0; round < PURGE_ROUNDS; round++) {
		long got = 0;

		if (db_exec(db, k->sql, np, p, &got, e) < 0)
			return -1;
		*n += got;
		if (got < PURGE_BATCH)
			break;
	}
	return 0;
}

int
purge_run(struct db *db, const struct config *cfg, struct purge_counts *out, struct err *e)
{
	struct purge_counts c;
	int rc = 0;

	memset(&c, 0, sizeof(c));
	for (int i = 0; i < PURGE_KINDS; i++) {
		struct err ke;

		err_clear(&ke);
		if (purge_kind(db, cfg, &kinds[i], &c.deleted[i], &ke) < 0) {
			log_warn("purge: %s: %s", kinds[i].name, ke.msg);
			if (rc == 0)
				*e = ke;
			rc = -1;
		}
		c.total += c.deleted[i];
		if (c.deleted[i] > 0)
			log_info("purge: %ld %s rows", c.deleted[i], kinds[i].name);
	}
	if (out)
		*out = c;
	return rc;
}
