/* mailq.c - the mail outbox and its sending thread (mailq_). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/fmt.h"
#include "base/log.h"
#include "base/smtp.h"
#include "account/mailq.h"
#include "account/purge.h"

#define MAILQ_POLL_S 1
#define MAILQ_PRUNE_S 600
#define MAILQ_BATCH 16

int
mailq_put(PGconn *c, const char *account, const char *to, const char *subject, const char *body,
    struct err *e)
{
	const char *p[4] = { account, to, subject, body };

	if (strlen(body) > MAILQ_BODY_MAX) {
		err_set(e, ERR_INTERNAL, "mail body too long");
		return -1;
	}
	return db_conn_exec(c,
	    "INSERT INTO mail_outbox(account_id, to_addr, subject, body) VALUES ($1, $2, $3, $4)",
	    4, p, NULL, e);
}

json_t *
mailq_pending(struct db *db, int limit, struct err *e)
{
	char lim[16];
	const char *p[1] = { lim };
	json_t *out = NULL;
	PGresult *r;

	if (fmt_err(e, "limit", lim, sizeof(lim), "%d", limit) < 0)
		return NULL;
	r = db_query(db,
	    "SELECT id, to_addr, subject, body, "
	    "       to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), "
	    "       attempts, coalesce(last_error, '') "
	    "FROM mail_outbox WHERE sent_at IS NULL ORDER BY id LIMIT $1::int",
	    1, p, e);
	if (r == NULL)
		return NULL;
	out = json_array();
	for (int i = 0; out != NULL && i < PQntuples(r); i++) {
		long long id;
		int attempts;

		if (db_get_ll(r, i, 0, &id, e) < 0 || db_get_int(r, i, 5, &attempts, e) < 0) {
			json_decref(out);
			out = NULL;
			break;
		}
		json_array_append_new(out,
		    json_pack("{s:I,s:s,s:s,s:s,s:s,s:i,s:s}", "id", (json_int_t)id, "to",
			PQgetvalue(r, i, 1), "subject", PQgetvalue(r, i, 2), "body",
			PQgetvalue(r, i, 3), "created_at", PQgetvalue(r, i, 4), "attempts",
			attempts, "last_error", PQgetvalue(r, i, 6)));
	}
	PQclear(r);
	return out;
}

/* Claims the oldest due message for this aasd: pushed back by a delay
 * growing with its attempts (30 s, 1 min, ... at most an hour), so a
 * sender that dies mid-way only delays it. 0 with *id 0 when none. */
static int
claim(struct db *db, long long *id, char **to, char **subject, char **body, struct err *e)
{
	PGresult *r;
	int rc = -1;

	*id = 0;
	r = db_query(db,
	    "UPDATE mail_outbox SET attempts = attempts + 1, "
	    "  next_attempt_at = now() + "
	    "    make_interval(secs => least(3600, 30 * power(2, least(attempts, 7)))) "
	    "WHERE id = (SELECT id FROM mail_outbox WHERE sent_at IS NULL AND next_attempt_at <= now() "
	    "            ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) "
	    "RETURNING id, to_addr, subject, body",
	    0, NULL, e);
	if (r == NULL)
		return -1;
	if (PQntuples(r) == 0) {
		rc = 0;
		goto out;
	}
	if (db_get_ll(r, 0, 0, id, e) < 0)
		goto out;
	*to = strdup(PQgetvalue(r, 0, 1));
	*subject = strdup(PQgetvalue(r, 0, 2));
	*body = strdup(PQgetvalue(r, 0, 3));
	if (*to == NULL || *subject == NULL || *body == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	rc = 0;
out:
	PQclear(r);
	return rc;
}

int
mailq_send_due(struct db *db, const char *smtp_url, const char *from, int max, int *sent,
    struct err *e)
{
	*sent = 0;
	for (int i = 0; i < max; i++) {
		char *to = NULL, *subject = NULL, *body = NULL, sid[24];
		const char *p[2] = { sid, NULL };
		struct err se;
		long long id;
		int rc;

		rc = claim(db, &id, &to, &subject, &body, e);
		if (rc == 0 && id != 0 && fmt_err(e, "mail id", sid, sizeof(sid), "%lld", id) < 0)
			rc = -1;
		if (rc < 0 || id == 0) {
			free(to);
			free(subject);
			free(body);
			return rc;
		}
		err_clear(&se);
		const struct smtp_msg m = { from, to, subject, body, id };
		if (smtp_send(smtp_url, &m, MAILQ_SEND_TIMEOUT_S, &se) == 0) {
			/* The body holds a one-time link: it is not kept once sent. */
			rc = db_exec(db,
			    "UPDATE mail_outbox SET sent_at = now(), body = '', last_error = NULL "
			    "WHERE id = $1::bigint",
			    1, p, NULL, e);
			if (rc == 0)
				(*sent)++;
			log_info("mail %lld sent", id);
		} else {
			char msg[300];

			/* last_error holds at most 300 characters. */
			memcpy(msg, se.msg, sizeof(msg) - 1);
			msg[sizeof(msg) - 1] = '\0';
			p[1] = msg;
			rc = db_exec(db,
			    "UPDATE mail_outbox SET last_error = $2 WHERE id = $1::bigint", 2, p,
			    NULL, e);
			log_warn("mail %lld not sent: %s", id, se.msg);
		}
		free(to);
		free(subject);
		free(body);
		if (rc < 0)
			return -1;
	}
	return 0;
}

struct mailq {
	struct db *db;
	const struct config *cfg;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	atomic_int stop;
	int poked;
};

static void
prune(struct mailq *q)
{
	struct err e;

	/* Every kind of row whose time is over; each failure is logged. */
	err_clear(&e);
	err_ignore(purge_run(q->db, q->cfg, NULL, &e));
}

static void *
mailq_main(void *arg)
{
	struct mailq *q = arg;
	time_t last_prune = 0;

	pthread_mutex_lock(&q->lock);
	while (!q->stop) {
		struct timespec ts;

		pthread_mutex_unlock(&q->lock);
		if (q->cfg->smtp_url[0]) {
			struct err e;
			int sent;

			/* One at a time, so a stop waits for one message at most. */
			for (int i = 0; i < MAILQ_BATCH && !q->stop; i++) {
				err_clear(&e);
				if (mailq_send_due(q->db, q->cfg->smtp_url, q->cfg->mail_from, 1,
					&sent, &e) < 0) {
					log_warn("mail: %s", e.msg);
					break;
				}
				if (sent == 0)
					break;
			}
		}
		if (time(NULL) - last_prune >= MAILQ_PRUNE_S) {
			prune(q);
			last_prune = time(NULL);
		}
		pthread_mutex_lock(&q->lock);
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += MAILQ_POLL_S;
		while (!q->stop && !q->poked)
			if (pthread_cond_timedwait(&q->cond, &q->lock, &ts) == ETIMEDOUT)
				break;
		q->poked = 0;
	}
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

struct mailq *
mailq_start(struct db *db, const struct config *cfg, struct err *e)
{
	struct mailq *q = calloc(1, sizeof(*q));

	if (q == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	q->db = db;
	q->cfg = cfg;
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->cond, NULL);
	if (pthread_create(&q->thread, NULL, mailq_main, q) != 0) {
		err_set(e, ERR_INTERNAL, "cannot start the mail thread");
		pthread_mutex_destroy(&q->lock);
		pthread_cond_destroy(&q->cond);
		free(q);
		return NULL;
	}
	return q;
}

void
mailq_poke(struct mailq *q)
{
	if (q == NULL)
		return;
	pthread_mutex_lock(&q->lock);
	q->poked = 1;
	pthread_cond_signal(&q->cond);
	pthread_mutex_unlock(&q->lock);
}

void
mailq_stop(struct mailq *q)
{
	if (q == NULL)
		return;
	pthread_mutex_lock(&q->lock);
	q->stop = 1;
	pthread_cond_signal(&q->cond);
	pthread_mutex_unlock(&q->lock);
	pthread_join(q->thread, NULL);
	pthread_mutex_destroy(&q->lock);
	pthread_cond_destroy(&q->cond);
	free(q);
}
