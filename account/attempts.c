/* attempts.c - sliding-window counters in PostgreSQL (att_). */
#include <string.h>

#include "base/fmt.h"
#include "account/attempts.h"

int
att_subject(char *out, size_t n, const char *kind, const char *value)
{
	return fmt_buf(out, n, "%s:%s", kind, value) < 0 || strlen(out) > ATT_SUBJECT_MAX ? -1 : 0;
}

int
att_lock(PGconn *c, const char *subject, struct err *e)
{
	const char *p[1] = { subject };

	return db_conn_exec(c, "SELECT pg_advisory_xact_lock(hashtextextended('att:' || $1, 0))", 1,
	    p, NULL, e);
}

int
att_record(PGconn *c, const char *subject, struct err *e)
{
	const char *p[1] = { subject };

	return db_conn_exec(c, "INSERT INTO auth_events(subject) VALUES ($1)", 1, p, NULL, e);
}

int
att_over(PGconn *c, const char *subject, int max, int window_s, long long *retry_after_s,
    struct err *e)
{
	char smax[16], swin[16];
	const char *p[3] = { subject, swin, smax };
	long long n = 0, retry = 0;
	PGresult *r;
	int rc = -1;

	if (fmt_err(e, "count", smax, sizeof(smax), "%d", max) < 0 ||
	    fmt_err(e, "window", swin, sizeof(swin), "%d", window_s) < 0)
		return -1;
	/* The newest `max` events: when there are that many, the oldest of
	 * them leaving the window is what lets the next one in. */
	r = db_conn_query(c,
	    "SELECT count(*), coalesce(ceil(extract(epoch FROM "
	    "  min(at) + make_interval(secs => $2::int) - now())), 0)::bigint "
	    "FROM (SELECT at FROM auth_events WHERE subject = $1 "
	    "      AND at > now() - make_interval(secs => $2::int) "
	    "      ORDER BY at DESC LIMIT $3::int) t",
	    3, p, e);
	if (r == NULL)
		return -1;
	if (db_get_ll(r, 0, 0, &n, e) < 0 || db_get_ll(r, 0, 1, &retry, e) < 0)
		goto out;
	*retry_after_s = retry > 0 ? retry : 1;
	rc = n >= max ? 1 : 0;
out:
	PQclear(r);
	return rc;
}

int
att_clear(PGconn *c, const char *subject, struct err *e)
{
	const char *p[1] = { subject };

	return db_conn_exec(c, "DELETE FROM auth_events WHERE subject = $1", 1, p, NULL, e);
}

int
att_forget_one(PGconn *c, const char *subject, struct err *e)
{
	const char *p[1] = { subject };

	return db_conn_exec(c,
	    "DELETE FROM auth_events WHERE ctid = (SELECT ctid FROM auth_events WHERE subject = $1 "
	    "ORDER BY at DESC LIMIT 1)",
	    1, p, NULL, e);
}

void
att_retry_text(long long s, char *out, size_t n)
{
	if (s < 60)
		fmt_cut(out, n, "in %lld second%s", s, s == 1 ? "" : "s");
	else
		fmt_cut(out, n, "in %lld minute%s", (s + 59) / 60, (s + 59) / 60 == 1 ? "" : "s");
}
