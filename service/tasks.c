/* tasks.c - MCP tasks: rows in PostgreSQL, calls on threads (task_). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/fmt.h"
#include "base/keys.h"
#include "base/log.h"
#include "account/accounts.h"
#include "service/task_cut.h"
#include "service/tasks.h"

#define STR_(x) #x
#define STR(x) STR_(x)
/* A working task marked alive after this is still running somewhere. */
#define ALIVE_SINCE "now() - make_interval(secs => " STR(TASK_STALE_S) ")"

struct running {
	char id[TASK_ID_LEN + 1];
	char account[ACCT_ID_LEN + 1];
	atomic_int cancelled;
	struct tool_call *call;
	struct tasks *t;
	struct running *next;
};

struct tasks {
	struct app *app;
	pthread_mutex_t lock;
	pthread_cond_t idle;
	struct running *list;
	int n;
	/* The heartbeat thread: marks this process's running tasks alive. */
	pthread_t beat;
	int beating;
	int stopping;
	pthread_cond_t wake;
};

/* The most a task's result may take (AAS_TASK_RESULT_MAX_BYTES, within
 * what the account may keep at all). */
static long long
result_cap(const struct config *cfg)
{
	long long room = cfg->task_bytes_per_account - TASK_ROW_BYTES;

	return cfg->task_result_max_bytes < room ? cfg->task_result_max_bytes : room;
}

/* n bytes as the settings' documentation says them: MiB, KiB or bytes. */
static void
bytes_text(long long n, char *out, size_t size)
{
	if (n % 1048576 == 0)
		fmt_cut(out, size, "%lld MiB", n / 1048576);
	else if (n % 1024 == 0)
		fmt_cut(out, size, "%lld KiB", n / 1024);
	else
		fmt_cut(out, size, "%lld bytes", n);
}

/* Marks the tasks running here alive, every TASK_BEAT_S until stopped. */
static void *
beat_main(void *arg)
{
	struct tasks *t = arg;
	/* "{" + up to TASKS_MAX_RUNNING ids and commas + "}" */
	char ids[TASKS_MAX_RUNNING * (TASK_ID_LEN + 1) + 3];
	struct timespec until;
	struct err e;

	pthread_mutex_lock(&t->lock);
	while (!t->stopping) {
		size_t len = 0;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += TASK_BEAT_S;
		while (!t->stopping && pthread_cond_timedwait(&t->wake, &t->lock, &until) == 0)
			;
		if (t->stopping || t->list == NULL)
			continue;
		ids[len++] = '{';
		for (struct running *r = t->list; r; r = r->next) {
			memcpy(ids + len, r->id, TASK_ID_LEN);
			len += TASK_ID_LEN;
			ids[len++] = r->next ? ',' : '}';
		}
		ids[len] = '\0';
		pthread_mutex_unlock(&t->lock);
		{
			const char *p[1] = { ids };

			err_clear(&e);
			if (db_exec(t->app->db,
				"UPDATE mcp_tasks SET heartbeat_at = now() "
				"WHERE id = ANY($1::text[]) AND status = 'working'",
				1, p, NULL, &e) < 0)
				log_warn("tasks: heartbeat not recorded: %s", e.msg);
		}
		pthread_mutex_lock(&t->lock);
	}
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

int
tasks_id_valid(const char *id)
{
	if (id == NULL || strlen(id) != TASK_ID_LEN || strncmp(id, "task-", 5) != 0)
		return 0;
	for (const char *p = id + 5; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9')))
			return 0;
	return 1;
}

struct tasks *
tasks_new(struct app *app, struct err *e)
{
	struct tasks *t = calloc(1, sizeof(*t));

	if (t == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	t->app = app;
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->idle, NULL);
	pthread_cond_init(&t->wake, NULL);
	if (pthread_create(&t->beat, NULL, beat_main, t) != 0) {
		err_set(e, ERR_INTERNAL, "cannot start the task heartbeat");
		pthread_cond_destroy(&t->wake);
		pthread_cond_destroy(&t->idle);
		pthread_mutex_destroy(&t->lock);
		free(t);
		return NULL;
	}
	t->beating = 1;
	return t;
}

void
tasks_free(struct tasks *t)
{
	struct timespec until;

	if (t == NULL)
		return;
	pthread_mutex_lock(&t->lock);
	t->stopping = 1;
	pthread_cond_broadcast(&t->wake);
	pthread_mutex_unlock(&t->lock);
	if (t->beating)
		pthread_join(t->beat, NULL);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	pthread_mutex_lock(&t->lock);
	for (struct running *r = t->list; r; r = r->next)
		atomic_store(&r->cancelled, 1);
	while (t->n > 0)
		if (pthread_cond_timedwait(&t->idle, &t->lock, &until) != 0)
			break;
	if (t->n > 0) {
		/* Threads still inside a call keep their own pointer: leak t. */
		log_warn("tasks: %d still running at stop", t->n);
		pthread_mutex_unlock(&t->lock);
		return;
	}
	pthread_mutex_unlock(&t->lock);
	pthread_mutex_destroy(&t->lock);
	pthread_cond_destroy(&t->idle);
	pthread_cond_destroy(&t->wake);
	free(t);
}

static void
finish(struct running *r, json_t *result)
{
	struct tasks *t = r->t;
	int cancelled = atomic_load(&r->cancelled), cut = 0;
	size_t len = 0;
	char *text = result ? task_cut(result, (size_t)result_cap(&t->app->cfg), &len, &cut) : NULL;
	const char *status = cancelled ? "cancelled" : text ? "completed" : "failed";
	const char *msg = cancelled ? "cancelled" : text ? NULL : "the call produced no result";
	char bytes[24];
	const char *p[5] = { r->id, status, cancelled ? NULL : text, msg, bytes };
	struct err e;

	if (cut)
		log_info("task %s: result cut to %zu bytes (AAS_TASK_RESULT_MAX_BYTES)", r->id,
		    len);
	err_clear(&e);
	if (fmt_err(&e, "stored bytes", bytes, sizeof(bytes), "%zu",
		(cancelled || text == NULL ? 0 : len) + TASK_ROW_BYTES) < 0 ||
	    db_exec(t->app->db,
		"UPDATE mcp_tasks SET status = $2, result = $3::jsonb, status_message = $4, "
		"stored_bytes = $5::bigint, updated_at = now() WHERE id = $1 AND status = 'working'",
		5, p, NULL, &e) < 0)
		log_warn("task %s: outcome not recorded: %s", r->id, e.msg);
	free(text);
}

static void *
task_main(void *arg)
{
	struct running *r = arg;
	struct tasks *t = r->t;
	struct call_ctx cx;
	json_t *res;

	memset(&cx, 0, sizeof(cx));
	cx.app = t->app;
	cx.account_id = r->account;
	cx.request_id = r->id;
	cx.cancelled = &r->cancelled;
	res = tools_call_prepared(&cx, r->call);
	finish(r, res);
	json_decref(res);
	tool_call_free(r->call);
	pthread_mutex_lock(&t->lock);
	for (struct running **pp = &t->list; *pp; pp = &(*pp)->next)
		if (*pp == r) {
			*pp = r->next;
			break;
		}
	t->n--;
	pthread_cond_broadcast(&t->idle);
	pthread_mutex_unlock(&t->lock);
	free(r);
	return NULL;
}

struct start_tx {
	const struct config *cfg;
	const char *const *p; /* id, account, tool, ttl, reserved bytes */
};

/* With the account row locked (the lock order's first row), so two
 * creates of one account count each other: the account's expired tasks
 * go, then its working tasks and its stored bytes are checked and the
 * new row reserves the most its result may take. */
static int
start_tx(PGconn *c, void *arg, struct err *e)
{
	struct start_tx *x = arg;
	long long working, held, reserve = result_cap(x->cfg) + TASK_ROW_BYTES;
	PGresult *r;
	int rc;

	r = db_conn_query(c, "SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE", 1, x->p + 1, e);
	if (r == NULL)
		return -1;
	PQclear(r);
	if (db_conn_exec(c,
		"DELETE FROM mcp_tasks WHERE id IN (SELECT id FROM mcp_tasks "
		"WHERE account_id = $1 AND expires_at <= now() LIMIT 1000)",
		1, x->p + 1, NULL, e) < 0)
		return -1;
	r = db_conn_query(c,
	    "SELECT count(*) FILTER (WHERE status = 'working' AND heartbeat_at > " ALIVE_SINCE "), "
	    "coalesce(sum(stored_bytes), 0) FROM mcp_tasks WHERE account_id = $1",
	    1, x->p + 1, e);
	if (r == NULL)
		return -1;
	rc = db_get_ll(r, 0, 0, &working, e) < 0 || db_get_ll(r, 0, 1, &held, e) < 0 ? -1 : 0;
	PQclear(r);
	if (rc < 0)
		return -1;
	if (working >= TASKS_MAX_PER_ACCOUNT) {
		err_set(e, ERR_LIMIT, "at most %d tasks of an account run at once",
		    TASKS_MAX_PER_ACCOUNT);
		return -1;
	}
	if (held + reserve > x->cfg->task_bytes_per_account) {
		char limit[32];

		bytes_text(x->cfg->task_bytes_per_account, limit, sizeof(limit));
		err_set(e, ERR_LIMIT,
		    "task storage for this account is full (%s, AAS_TASK_BYTES_PER_ACCOUNT): "
		    "%lld bytes are held by finished tasks, kept until they expire %d s after they "
		    "started, and by running ones; try again when older tasks expire, or call the "
		    "tool without a task",
		    limit, held, TASK_TTL_S);
		return -1;
	}
	return db_conn_exec(c,
	    "INSERT INTO mcp_tasks(id, account_id, tool, status, expires_at, stored_bytes) "
	    "VALUES ($1, $2, $3, 'working', now() + make_interval(secs => $4::int), $5::bigint)",
	    5, x->p, NULL, e);
}

int
tasks_start(struct tasks *t, const char *account, const char *tool, struct tool_call *call,
    char id[TASK_ID_LEN + 1], struct err *e)
{
	char rnd[25], ttl[16], reserve[24];
	const char *p[5] = { id, account, tool, ttl, reserve };
	struct start_tx x = { &t->app->cfg, p };
	struct running *r = NULL;
	pthread_attr_t attr;
	pthread_t th;
	int rc = -1;

	if (key_random_base36(rnd, 24) < 0) {
		err_set(e, ERR_INTERNAL, "no randomness");
		goto out;
	}
	if (fmt_err(e, "task id", id, TASK_ID_LEN + 1, "task-%s", rnd) < 0 ||
	    fmt_err(e, "task lifetime", ttl, sizeof(ttl), "%d", TASK_TTL_S) < 0 ||
	    fmt_err(e, "task reserve", reserve, sizeof(reserve), "%lld",
		result_cap(&t->app->cfg) + TASK_ROW_BYTES) < 0)
		goto out;
	r = calloc(1, sizeof(*r));
	if (r == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	memcpy(r->id, id, sizeof(r->id));
	if (fmt_err(e, "account id", r->account, sizeof(r->account), "%s", account) < 0)
		goto out;
	pthread_mutex_lock(&t->lock);
	if (t->n >= TASKS_MAX_RUNNING) {
		pthread_mutex_unlock(&t->lock);
		err_set(e, ERR_LIMIT, "this server runs %d tasks already; try again later",
		    TASKS_MAX_RUNNING);
		goto out;
	}
	t->n++;
	pthread_mutex_unlock(&t->lock);
	if (db_tx(t->app->db, start_tx, &x, e) < 0)
		goto undo;
	r->call = call;
	r->t = t;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_mutex_lock(&t->lock);
	r->next = t->list;
	t->list = r;
	if (pthread_create(&th, &attr, task_main, r) != 0) {
		t->list = r->next;
		pthread_mutex_unlock(&t->lock);
		pthread_attr_destroy(&attr);
		err_ignore(db_exec(t->app->db, "DELETE FROM mcp_tasks WHERE id = $1", 1, p, NULL,
		    e));
		err_set(e, ERR_UNAVAILABLE, "cannot start the task");
		goto undo;
	}
	pthread_mutex_unlock(&t->lock);
	pthread_attr_destroy(&attr);
	rc = 0;
	r = NULL; /* the thread's now */
	goto out;
undo:
	pthread_mutex_lock(&t->lock);
	t->n--;
	pthread_mutex_unlock(&t->lock);
out:
	free(r);
	return rc;
}

json_t *
tasks_get(struct tasks *t, const char *account, const char *id, struct err *e)
{
	const char *p[2] = { id, account };
	json_t *out = NULL;
	PGresult *r;

	if (!tasks_id_valid(id)) {
		err_set_field(e, "taskId", "no such task");
		return NULL;
	}
	/* Its aasd stopped while it ran: what it did is lost, say so. */
	if (db_exec(t->app->db,
		"UPDATE mcp_tasks SET status = 'failed', updated_at = now(), status_message = "
		"'the server running this task stopped before it ended; its outcome is lost' "
		"WHERE id = $1 AND account_id = $2 AND status = 'working' "
		"AND heartbeat_at < now() - make_interval(secs => " STR(TASK_STALE_S) ")",
		2, p, NULL, e) < 0)
		return NULL;
	r = db_query_row(t->app->db,
	    "SELECT status, status_message, result::text, "
	    "  to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), "
	    "  to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), "
	    "  greatest(0, extract(epoch FROM expires_at - now()) * 1000)::bigint "
	    "FROM mcp_tasks WHERE id = $1 AND account_id = $2 AND expires_at > now()",
	    2, p, e, ERR_INVALID, "taskId", "no such task (unknown, expired or not yours)");
	if (r == NULL)
		return NULL;
	{
		long long ttl = 0;
		const char *msg = db_get_text(r, 0, 1), *res = db_get_text(r, 0, 2);

		if (db_get_ll(r, 0, 5, &ttl, e) < 0)
			goto out;
		out = json_pack("{s:s,s:s,s:s,s:s,s:I,s:i}", "taskId", id, "status",
		    PQgetvalue(r, 0, 0), "createdAt", PQgetvalue(r, 0, 3), "lastUpdatedAt",
		    PQgetvalue(r, 0, 4), "ttlMs", (json_int_t)ttl, "pollIntervalMs", TASK_POLL_MS);
		if (out && msg)
			json_object_set_new(out, "statusMessage", json_string(msg));
		if (out && res && strcmp(PQgetvalue(r, 0, 0), "completed") == 0)
			json_object_set_new(out, "result", json_loads(res, 0, NULL));
		if (out && strcmp(PQgetvalue(r, 0, 0), "failed") == 0)
			json_object_set_new(out, "error",
			    json_pack("{s:i,s:s}", "code", -32603, "message",
				msg ? msg : "failed"));
	}
out:
	PQclear(r);
	return out;
}

int
tasks_cancel(struct tasks *t, const char *account, const char *id, struct err *e)
{
	const char *p[2] = { id, account };
	long n = 0;

	if (!tasks_id_valid(id)) {
		err_set_field(e, "taskId", "no such task");
		return -1;
	}
	if (db_exec(t->app->db,
		"SELECT pg_notify('aas_invalidate', 't:' || id) FROM mcp_tasks "
		"WHERE id = $1 AND account_id = $2 AND expires_at > now()",
		2, p, &n, e) < 0)
		return -1;
	if (n != 1) {
		err_set_field(e, "taskId", "no such task (unknown, expired or not yours)");
		return -1;
	}
	/* Here at once; elsewhere through the notice. */
	tasks_notice(t, id);
	return 0;
}

void
tasks_notice(struct tasks *t, const char *id)
{
	if (t == NULL)
		return;
	pthread_mutex_lock(&t->lock);
	for (struct running *r = t->list; r; r = r->next)
		if (strcmp(r->id, id) == 0)
			atomic_store(&r->cancelled, 1);
	pthread_mutex_unlock(&t->lock);
}
