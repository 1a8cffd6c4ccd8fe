/* oauth_client.c - OAuth clients: metadata documents fetched from a
 * client_id URL, dynamic registration, and the hourly limits on both
 * (oauth_). */
#include "account/oauth.h"

#include <string.h>
#include <time.h>

#include "base/fetch.h"
#include "base/fmt.h"
#include "base/keys.h"
#include "account/attempts.h"

#define REGISTERED_PREFIX "aas_client_"
#define DOC_REFETCH_S 300 /* a kept document is used this long */
#define DOCS_PER_HOUR 60  /* document fetches one quota causes an hour */

/* ---- limits ---- */

/* One event of `kind`:`value` counted against max per window_s, check
 * and count in one step (att_lock). */
struct limit_tx {
	const char *kind, *value;
	int max, window_s;
	long long retry_s;
	int over;
};

static int
limit_tx(PGconn *c, void *arg, struct err *e)
{
	struct limit_tx *t = arg;
	char subj[ATT_SUBJECT_MAX + 1];
	int over;

	if (att_subject(subj, sizeof(subj), t->kind, t->value) < 0) {
		err_set(e, ERR_INVALID, "limit subject too long");
		return -1;
	}
	if (att_lock(c, subj, e) < 0)
		return -1;
	over = att_over(c, subj, t->max, t->window_s, &t->retry_s, e);
	if (over < 0)
		return -1;
	t->over = over;
	return over ? 0 : att_record(c, subj, e);
}

/* 0 when under the limit (the event is counted), -1 with ERR_LIMIT and
 * `code` as the OAuth error when over it. */
static int
limit_take(struct db *db, const char *kind, const char *value, int max, const char *code,
    const char *what, struct err *e)
{
	struct limit_tx t = { kind, value, max, 3600, 0, 0 };
	char retry[64];

	if (db_tx(db, limit_tx, &t, e) < 0)
		return -1;
	if (!t.over)
		return 0;
	att_retry_text(t.retry_s, retry, sizeof(retry));
	err_set_at(e, ERR_LIMIT, code, "too many %s; try again %s", what, retry);
	return -1;
}

/* ---- clients ---- */

static int
client_from_row(PGresult *r, struct oauth_client *out, struct err *e)
{
	json_t *uris, *u;
	json_error_t je;
	size_t i;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (db_get_str(r, 0, 0, out->id, sizeof(out->id), e) < 0 ||
	    db_get_str(r, 0, 1, out->name, sizeof(out->name), e) < 0 ||
	    db_get_str(r, 0, 2, out->uri, sizeof(out->uri), e) < 0)
		return -1;
	out->registered = strcmp(db_get_text(r, 0, 3), "registered") == 0;
	uris = json_loads(db_get_text(r, 0, 4), 0, &je);
	if (!json_is_array(uris)) {
		json_decref(uris);
		err_set(e, ERR_INTERNAL, "a client's redirect_uris are not an array");
		return -1;
	}
	json_array_foreach(uris, i, u)
		if (rc == 0 && json_is_string(u) && out->n_redirects < OAUTH_REDIRECTS_MAX)
			rc = fmt_err(e, "redirect URI", out->redirects[out->n_redirects++],
			    OAUTH_URI_MAX + 1, "%s", json_string_value(u));
	json_decref(uris);
	return rc;
}

/* The kept row of client_id; 0 found, 1 none (or, for a document, too
 * old to use), -1 error. */
static int
client_load(struct db *db, const char *client_id, struct oauth_client *out, struct err *e)
{
	char age[16];
	const char *p2[2] = { client_id, age };
	PGresult *r;
	int rc = 1;

	if (fmt_err(e, "age", age, sizeof(age), "%d", DOC_REFETCH_S) < 0)
		return -1;
	r = db_query(db,
	    "SELECT client_id, client_name, coalesce(client_uri, ''), kind, redirect_uris::text"
	    " FROM oauth_clients WHERE client_id = $1"
	    " AND (kind = 'registered' OR fetched_at > now() - make_interval(secs => $2::int))",
	    2, p2, e);
	if (r == NULL)
		return -1;
	if (PQntuples(r) == 1)
		rc = client_from_row(r, out, e) < 0 ? -1 : 0;
	PQclear(r);
	return rc;
}

static int
client_store(struct db *db, const struct oauth_client *cl, const char *kind, const char *by,
    struct err *e)
{
	json_t *uris = oauth_client_redirects_json(cl);
	char *text = uris ? json_dumps(uris, JSON_COMPACT) : NULL;
	const char *p[6] = { cl->id, kind, cl->name, cl->uri[0] ? cl->uri : NULL, text, by };
	int rc = -1;

	if (text == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	rc = db_exec(db,
	    "INSERT INTO oauth_clients(client_id, kind, client_name, client_uri, redirect_uris,"
	    " registered_by) VALUES ($1, $2, $3, $4, $5::jsonb, $6)"
	    " ON CONFLICT (client_id) DO UPDATE SET client_name = EXCLUDED.client_name,"
	    " client_uri = EXCLUDED.client_uri, redirect_uris = EXCLUDED.redirect_uris,"
	    " fetched_at = now() WHERE oauth_clients.kind = 'document'",
	    6, p, NULL, e);
out:
	free(text);
	json_decref(uris);
	return rc;
}

static int
client_fetch(struct db *db, const struct config *cfg, const char *client_id,
    struct oauth_client *out, struct err *e)
{
	struct fetch_opts o = { OAUTH_DOC_MAX, 5, cfg->oauth_local_documents };
	struct buf body;
	struct err fe;
	json_error_t je;
	json_t *doc = NULL;
	int rc = -1;

	buf_init(&body, OAUTH_DOC_MAX);
	err_clear(&fe);
	if (fetch_get(client_id, &o, &body, &fe) < 0) {
		err_set_at(e, ERR_INVALID, "invalid_client",
		    "the client's metadata document at its client_id URL is unusable: %s", fe.msg);
		goto out;
	}
	doc = json_loadb(body.data ? body.data : "", body.len, JSON_REJECT_DUPLICATES, &je);
	if (doc == NULL) {
		err_set_at(e, ERR_INVALID, "invalid_client",
		    "the client's metadata document is not JSON (line %d: %s)", je.line, je.text);
		goto out;
	}
	if (oauth_client_parse(client_id, doc, out, &fe) < 0) {
		err_set_at(e, ERR_INVALID, "invalid_client", "the client's metadata document: %s",
		    fe.msg);
		goto out;
	}
	/* Copies nobody connected with go after a day. */
	if (db_exec(db,
		"DELETE FROM oauth_clients c WHERE kind = 'document'"
		" AND fetched_at < now() - interval '1 day' AND NOT EXISTS"
		" (SELECT 1 FROM oauth_grants g WHERE g.client_id = c.client_id)",
		0, NULL, NULL, e) < 0)
		goto out;
	rc = client_store(db, out, "document", NULL, e);
out:
	json_decref(doc);
	buf_free(&body);
	return rc;
}

int
oauth_client_find(struct db *db, const struct config *cfg, const char *client_id, const char *quota,
    struct oauth_client *out, struct err *e)
{
	int rc;

	if (client_id == NULL || *client_id == '\0' || strlen(client_id) > OAUTH_CLIENT_ID_MAX) {
		err_set_at(e, ERR_INVALID, "invalid_client", "client_id is missing or too long");
		return -1;
	}
	if (strncmp(client_id, REGISTERED_PREFIX, strlen(REGISTERED_PREFIX)) != 0 &&
	    !oauth_client_id_is_url(client_id, cfg->oauth_local_documents)) {
		err_set_at(e, ERR_INVALID, "invalid_client",
		    "client_id must be an https URL of a client metadata document, or an id this "
		    "service registered");
		return -1;
	}
	rc = client_load(db, client_id, out, e);
	if (rc <= 0) {
		if (rc == 0)
			return 0;
		return -1;
	}
	if (strncmp(client_id, REGISTERED_PREFIX, strlen(REGISTERED_PREFIX)) == 0) {
		err_set_at(e, ERR_INVALID, "invalid_client",
		    "no client is registered as client_id");
		return -1;
	}
	/* Each fetch is a request to a URL a stranger chose, on a worker: a
	 * quota (a client address, or an account) makes a bounded number an
	 * hour. */
	if (limit_take(db, "oauth_fetch", quota, DOCS_PER_HOUR, "temporarily_unavailable",
		"client documents fetched", e) < 0)
		return -1;
	return client_fetch(db, cfg, client_id, out, e);
}

int
oauth_client_register(struct db *db, const struct config *cfg, json_t *metadata, const char *addr,
    json_t **reply, struct err *e)
{
	struct oauth_client cl;
	char hex[33];
	json_t *r;

	*reply = NULL;
	if (oauth_client_parse(NULL, metadata, &cl, e) < 0 ||
	    limit_take(db, "oauth_register", addr, cfg->oauth_registrations_per_address,
		"invalid_client_metadata", "clients registered from this address", e) < 0)
		return -1;
	if (key_random_hex(hex, sizeof(hex), 16) < 0) {
		err_set(e, ERR_INTERNAL, "no randomness");
		return -1;
	}
	if (fmt_err(e, "client_id", cl.id, sizeof(cl.id), REGISTERED_PREFIX "%s", hex) < 0)
		return -1;
	cl.registered = 1;
	/* Registrations never used for a day go: strangers may register. */
	if (db_exec(db,
		"DELETE FROM oauth_clients c WHERE kind = 'registered'"
		" AND created_at < now() - interval '1 day' AND NOT EXISTS"
		" (SELECT 1 FROM oauth_grants g WHERE g.client_id = c.client_id)",
		0, NULL, NULL, e) < 0 ||
	    client_store(db, &cl, "registered", addr, e) < 0)
		return -1;
	r = json_pack("{s:s, s:I, s:s, s:o, s:[ss], s:[s], s:s}", "client_id", cl.id,
	    "client_id_issued_at", (json_int_t)time(NULL), "client_name", cl.name, "redirect_uris",
	    oauth_client_redirects_json(&cl), "grant_types", "authorization_code", "refresh_token",
	    "response_types", "code", "token_endpoint_auth_method", "none");
	if (r && cl.uri[0])
		json_object_set_new(r, "client_uri", json_string(cl.uri));
	if (r == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return -1;
	}
	*reply = r;
	return 0;
}
