/* tasks.h - tool calls run as MCP tasks (task_), the
 * io.modelcontextprotocol/tasks extension. A task is a row in mcp_tasks:
 * the call runs on a thread of the aasd that started it, and its outcome
 * (the CallToolResult) is written there, so any aasd on the database
 * answers tasks/get, also after the first one stopped. A cancel reaches
 * the running call through a notification ("t:<id>") wherever it runs.
  * Bounds: TASKS_MAX_RUNNING per process, TASKS_MAX_PER_ACCOUNT working
 * tasks per account; outcomes are kept TASK_TTL_S, each cut to
 * AAS_TASK_RESULT_MAX_BYTES (service/task_cut.h), and an account keeps at
 * most AAS_TASK_BYTES_PER_ACCOUNT of them (each counting its result's
 * bytes and TASK_ROW_BYTES; a working one the most its result may take).
 * Expired rows go (account/purge.h, and the account's own at each start).
 * A task whose aasd stopped while it ran (no heartbeat for TASK_STALE_S)
 * reads as failed. */
#ifndef AAS_TASKS_H
#define AAS_TASKS_H

#include <jansson.h>

#include "base/err.h"
#include "service/app.h"
#include "service/tools.h"

#define TASK_ID_LEN 29 /* "task-" and 24 of [a-z0-9] */
#define TASKS_MAX_RUNNING 64
#define TASKS_MAX_PER_ACCOUNT 8
#define TASK_TTL_S 3600
#define TASK_POLL_MS 1000   /* the interval suggested to pollers */
#define TASK_BEAT_S 5       /* a running task's aasd marks it alive this often */
#define TASK_STALE_S 30     /* a working task unmarked this long is failed */
#define TASK_ROW_BYTES 1024 /* what a task row counts beside its result */

struct tasks;

struct tasks *tasks_new(struct app *app, struct err *e);
/* Cancels what still runs here and waits for it (a few seconds at most). */
void tasks_free(struct tasks *t);
/* Starts a prepared call (taken) as a task of `account`; its id into id.
 * ERR_LIMIT when this process or the account runs too many, or the
 * account's task storage is full (the message names the setting). */
int tasks_start(struct tasks *t, const char *account, const char *tool, struct tool_call *call,
    char id[TASK_ID_LEN + 1], struct err *e) AAS_MUST_CHECK;
/* The task as the extension shows it: taskId, status, statusMessage,
 * createdAt, lastUpdatedAt, ttlMs, pollIntervalMs, and result (the
 * CallToolResult) once completed. ERR_NOT_FOUND for an unknown, expired
 * or other account's task. */
json_t *tasks_get(struct tasks *t, const char *account, const char *id, struct err *e);
/* Asks the call to stop, wherever it runs; a finished task is left as it
 * is. ERR_NOT_FOUND as tasks_get. */
int tasks_cancel(struct tasks *t, const char *account, const char *id,
    struct err *e) AAS_MUST_CHECK;
/* A "t:<id>" notification: cancels the call if it runs here. */
void tasks_notice(struct tasks *t, const char *id);
/* 1 when `id` has the shape of a task id. */
int tasks_id_valid(const char *id);

#endif
