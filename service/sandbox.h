/* sandbox.h - the sandbox service (sbx_): one implementation of every
 * sandbox operation, used by the MCP tools (and the REST API). Rows in
 * PostgreSQL, VMs through the orchestrator, everything scoped to the
 * calling account: another account's sandbox is "not found". */
#ifndef AAS_SANDBOX_H
#define AAS_SANDBOX_H

#include <stdatomic.h>

#include <jansson.h>

#include "service/app.h"
#include "base/err.h"

struct sbx;
struct orch;

/* How a long operation reports progress and learns it was cancelled. */
struct sbx_progress {
	void (*fn)(void *ctx, double progress, double total, const char *message);
	void *ctx;
	const atomic_int *cancel;
};

/* Starts the orchestrator and the maintenance thread (heartbeat,
 * reconcile, warm pool). */
struct sbx *sbx_new(struct app *app, struct err *e);
void sbx_free(struct sbx *s);
struct orch *sbx_orch(struct sbx *s);

/* Arguments are the tools' validated argument objects. */
json_t *sbx_create(struct sbx *s, const char *account, const json_t *args,
    const struct sbx_progress *pg, struct err *e);
json_t *sbx_get(struct sbx *s, const char *account, const json_t *args, struct err *e);
json_t *sbx_list(struct sbx *s, const char *account, const json_t *args, struct err *e);
json_t *sbx_destroy(struct sbx *s, const char *account, const json_t *args, struct err *e);
json_t *sbx_run(struct sbx *s, const char *account, const json_t *args,
    const struct sbx_progress *pg, struct err *e);
json_t *sbx_write_file(struct sbx *s, const char *account, const json_t *args,
    struct err *e);
json_t *sbx_read_file(struct sbx *s, const char *account, const json_t *args,
    struct err *e);
json_t *sbx_list_files(struct sbx *s, const char *account, const json_t *args,
    struct err *e);
/* expose_port: a forward into the VM and a preview URL (sandbox_net.c). */
json_t *sbx_expose_port(struct sbx *s, const char *account, const json_t *args,
    struct err *e);
/* {sandbox_id, ports: [...]} of one sandbox of the account. */
json_t *sbx_list_ports(struct sbx *s, const char *account, const json_t *args,
    struct err *e);

/* Decides where a preview request goes (the proxy's resolver): the
 * forward of an exposed port of a running sandbox, after the private
 * preview's credential is checked. */
struct preview_ask;
struct preview_route;
void sbx_preview_route(struct sbx *s, const struct preview_ask *ask, struct preview_route *out);
/* One command of a sandbox (args: sandbox_id, command_id): its state and
 * exit code (a running background command is asked about first), log
 * paths and, while the sandbox runs, the logs' sizes. */
json_t *sbx_command_status(struct sbx *s, const char *account, const json_t *args,
    struct err *e);

/* Live capacity (refreshed by the maintenance thread): accelerator, hosts,
 * live sandboxes, warm VMs per size. New reference. */
json_t *sbx_capacity(struct sbx *s);

/* One reconcile pass (also run periodically): domains without a live row
 * are destroyed, live rows without a domain fail. Exposed for tests. */
int sbx_reconcile(struct sbx *s, struct err *e);

#endif
