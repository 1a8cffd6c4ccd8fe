/* store_cmd.c - the statements on sandbox_commands. */
#include "sandbox/store_int.h"

#include <stdlib.h>
#include <string.h>

#include "base/fmt.h"

#define COMMAND_COLUMNS                                                                   \
	"id, command, background, state, exit_code, stdout_path, stderr_path, " STORE_TS( \
	    "started_at") ", " STORE_TS("ended_at")

#define COMMAND_TEXT_MAX 200 /* characters of a command shown in lists */

/* A command that kill_command signalled and that then ended by a signal
 * (exit code above 128) is 'killed', whichever request saw the end. */
#define CMD_END_STATE                                                           \
	"CASE WHEN $2 = 'exited' AND kill_signal IS NOT NULL AND $3::int > 128" \
	" THEN 'killed' ELSE $2 END"

struct cmd_tx {
	const char *const *p; /* id, sandbox, command, background, out, err */
	int bg_cap;
};

static const char cmd_insert_sql[] = "INSERT INTO sandbox_commands(id, sandbox_id, command,"
				     " background, state, stdout_path, stderr_path)"
				     " VALUES ($1, $2, $3, $4::boolean, 'running', $5, $6)";

/* The sandbox row first: every background start of the sandbox counts
 * and inserts in turn. */
static int
cmd_insert_tx(PGconn *c, void *arg, struct err *e)
{
	struct cmd_tx *t = arg;
	const char *sbx[1] = { t->p[1] };
	long long n;

	if (db_conn_exec(c, "SELECT 1 FROM sandboxes WHERE id = $1 FOR NO KEY UPDATE", 1, sbx, NULL,
		e) < 0)
		return -1;
	if (store_conn_count(c,
		"SELECT count(*) FROM sandbox_commands WHERE sandbox_id = $1 AND background"
		" AND state = 'running'",
		sbx[0], &n, e) < 0)
		return -1;
	if (n >= t->bg_cap) {
		err_set_at(e, ERR_LIMIT, "background",
		    "background: sandbox %s has %lld background commands running, the most "
		    "allowed (AAS_MAX_BACKGROUND_PER_SANDBOX=%d); wait for one to end",
		    t->p[1], n, t->bg_cap);
		return -1;
	}
	return db_conn_exec(c, cmd_insert_sql, 6, t->p, NULL, e);
}

int
store_cmd_insert(struct db *db, const char *cmd_id, const char *sandbox_id, const char *command,
    int background, int bg_cap, const char *out_path, const char *err_path, struct err *e)
{
	const char *p[6] = { cmd_id, sandbox_id, command, background ? "t" : "f", out_path,
		err_path };
	struct cmd_tx t = { p, bg_cap };

	if (!background)
		return db_exec(db, cmd_insert_sql, 6, p, NULL, e);
	return db_tx(db, cmd_insert_tx, &t, e);
}

int
store_cmd_set_pid(struct db *db, const char *cmd_id, long pid, struct err *e)
{
	char pids[24];
	const char *p[2] = { cmd_id, pids };

	if (fmt_err(e, "pid", pids, sizeof(pids), "%ld", pid) < 0)
		return -1;
	return db_exec(db, "UPDATE sandbox_commands SET guest_pid = $2::bigint WHERE id = $1", 2, p,
	    NULL, e);
}

int
store_cmd_end(struct db *db, const char *cmd_id, const char *state, int code, int only_running,
    struct err *e)
{
	char codes[16];
	const char *p[3] = { cmd_id, state, codes };

	if (fmt_err(e, "exit code", codes, sizeof(codes), "%d", code) < 0)
		return -1;
	if (only_running)
		return db_exec(db,
		    "UPDATE sandbox_commands SET state = " CMD_END_STATE ", ended_at = now(),"
		    " exit_code = CASE WHEN $2 = 'failed' THEN NULL ELSE $3::int END"
		    " WHERE id = $1 AND state = 'running'",
		    3, p, NULL, e);
	return db_exec(db,
	    "UPDATE sandbox_commands SET state = " CMD_END_STATE ", ended_at = now(),"
	    " exit_code = CASE WHEN $2 = 'running' THEN NULL ELSE $3::int END"
	    " WHERE id = $1",
	    3, p, NULL, e);
}

static int
cmd_pid_row(const PGresult *r, int i, void *elem, struct err *e)
{
	struct store_cmd_pid *c = elem;
	long long pid;

	if (db_get_str(r, i, 0, c->id, sizeof(c->id), e) < 0 || db_get_ll(r, i, 1, &pid, e) < 0)
		return -1;
	if (pid <= 0 || pid > 0x7fffffff)
		return 1;
	c->pid = (long)pid;
	return 0;
}

int
store_cmd_running(struct db *db, const char *sandbox_id, struct store_cmd_pid **cmds, size_t *n,
    struct err *e)
{
	const char *p[1] = { sandbox_id };

	return store_rows(db,
	    "SELECT id, guest_pid FROM sandbox_commands"
	    " WHERE sandbox_id = $1 AND state = 'running' AND guest_pid IS NOT NULL",
	    1, p, sizeof(**cmds), cmd_pid_row, (void **)cmds, n, e);
}

/* One row of COMMAND_COLUMNS; the command text cut to `cut` characters. */
static json_t *
command_json(const PGresult *r, int i, size_t cut)
{
	const char *cmd = PQgetvalue(r, i, 1);
	size_t len = strlen(cmd);
	json_t *cmdj = json_stringn(cmd, len > cut ? cut : len);

	return json_pack("{s:s, s:o, s:b, s:s, s:o, s:s, s:s, s:s, s:o}", "command_id",
	    PQgetvalue(r, i, 0), "command", cmdj ? cmdj : json_string("?"), "background",
	    strcmp(PQgetvalue(r, i, 2), "t") == 0, "state", PQgetvalue(r, i, 3), "exit_code",
	    store_int_or_null(r, i, 4), "stdout_path", PQgetvalue(r, i, 5), "stderr_path",
	    PQgetvalue(r, i, 6), "started_at", PQgetvalue(r, i, 7), "ended_at",
	    store_text_or_null(r, i, 8));
}

json_t *
store_cmd_recent_json(struct db *db, const char *sandbox_id, struct err *e)
{
	char lim[16];
	const char *p[2] = { sandbox_id, lim };
	PGresult *r;
	json_t *arr;

	if (fmt_err(e, "limit", lim, sizeof(lim), "%d", STORE_RECENT_COMMANDS) < 0)
		return NULL;
	r = db_query(db,
	    "SELECT " COMMAND_COLUMNS " FROM sandbox_commands"
	    " WHERE sandbox_id = $1 ORDER BY started_at DESC LIMIT $2::int",
	    2, p, e);
	if (r == NULL)
		return NULL;
	arr = json_array();
	for (int i = 0; arr && i < PQntuples(r); i++)
		json_array_append_new(arr, command_json(r, i, COMMAND_TEXT_MAX));
	PQclear(r);
	if (arr == NULL)
		err_set(e, ERR_INTERNAL, "out of memory");
	return arr;
}

json_t *
store_cmd_json(struct db *db, const char *sandbox_id, const char *cmd_id, struct err *e)
{
	const char *p[2] = { cmd_id, sandbox_id };
	PGresult *r = db_query_row(db,
	    "SELECT " COMMAND_COLUMNS " FROM sandbox_commands"
	    " WHERE id = $1 AND sandbox_id = $2",
	    2, p, e, ERR_NOT_FOUND, "command_id", "command_id: no command %s in %s", cmd_id,
	    sandbox_id);
	json_t *out;

	if (r == NULL)
		return NULL;
	if ((out = command_json(r, 0, (size_t)-1)) == NULL)
		err_set(e, ERR_INTERNAL, "out of memory");
	PQclear(r);
	return out;
}

int
store_cmd_background_count(struct db *db, const char *sandbox_id, long long *n, struct err *e)
{
	return store_count(db,
	    "SELECT count(*) FROM sandbox_commands WHERE sandbox_id = $1 AND background"
	    " AND state = 'running'",
	    sandbox_id, n, e);
}

int
store_cmd_trim(struct db *db, const char *sandbox_id, int keep, struct err *e)
{
	char keeps[16];
	const char *p[2] = { sandbox_id, keeps };

	if (fmt_err(e, "count", keeps, sizeof(keeps), "%d", keep) < 0)
		return -1;
	return db_exec(db,
	    "DELETE FROM sandbox_commands WHERE sandbox_id = $1 AND id IN (SELECT id FROM"
	    " sandbox_commands WHERE sandbox_id = $1 ORDER BY started_at DESC OFFSET $2::int)",
	    2, p, NULL, e);
}

static int
cmd_row(const PGresult *r, int i, void *elem, struct err *e)
{
	struct store_cmd *c = elem;
	long long pid;

	if (db_get_str(r, i, 0, c->id, sizeof(c->id), e) < 0 ||
	    db_get_str(r, i, 1, c->state, sizeof(c->state), e) < 0 ||
	    db_get_int_or(r, i, 2, -1, &c->exit_code, e) < 0 ||
	    db_get_ll_or(r, i, 3, 0, &pid, e) < 0 ||
	    db_get_str(r, i, 4, c->stdout_path, sizeof(c->stdout_path), e) < 0 ||
	    db_get_str(r, i, 5, c->stderr_path, sizeof(c->stderr_path), e) < 0 ||
	    db_get_int_or(r, i, 7, 0, &c->kill_signal, e) < 0)
		return -1;
	c->has_exit_code = !PQgetisnull(r, i, 2);
	c->pid = pid > 0 && pid <= 0x7fffffff ? (long)pid : 0;
	c->background = strcmp(PQgetvalue(r, i, 6), "t") == 0;
	return 0;
}

int
store_cmd_get(struct db *db, const char *sandbox_id, const char *cmd_id, struct store_cmd *out,
    struct err *e)
{
	const char *p[2] = { cmd_id, sandbox_id };
	struct store_cmd *rows = NULL;
	size_t n = 0;
	int rc = -1;

	if (store_rows(db,
		"SELECT id, state, exit_code, guest_pid, stdout_path, stderr_path, background,"
		" kill_signal FROM sandbox_commands WHERE id = $1 AND sandbox_id = $2",
		2, p, sizeof(*rows), cmd_row, (void **)&rows, &n, e) < 0)
		return -1;
	if (n != 1) {
		err_set_at(e, ERR_NOT_FOUND, "command_id", "command_id: no command %s in %s",
		    cmd_id, sandbox_id);
		goto out;
	}
	*out = rows[0];
	rc = 0;
out:
	free(rows);
	return rc;
}

int
store_cmd_set_kill(struct db *db, const char *cmd_id, int sig, struct err *e)
{
	char sigs[16];
	const char *p[2] = { cmd_id, sigs };

	if (fmt_err(e, "signal", sigs, sizeof(sigs), "%d", sig) < 0)
		return -1;
	return db_exec(db,
	    "UPDATE sandbox_commands SET kill_signal = $2::int WHERE id = $1 AND state = 'running'",
	    2, p, NULL, e);
}
