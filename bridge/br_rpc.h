/* br_rpc.h - the MCP server on stdio (br_rpc_): initialize, ping,
 * tools/list and notifications on the reading thread, tools/call on a
 * small pool of workers so that ping and cancellation are answered while
 * calls run. */
#ifndef AAS_BR_RPC_H
#define AAS_BR_RPC_H

#include "bridge/br_config.h"
#include "bridge/br_http.h"
#include "base/err.h"

struct br_rpc;

struct br_rpc *br_rpc_new(const struct br_config *cfg, struct br_http *http, int in_fd, int out_fd,
    struct err *e);
void br_rpc_free(struct br_rpc *r);

/* Serves until stdin ends (calls in progress finish) or until
 * br_rpc_stop (calls in progress are cancelled). */
int br_rpc_run(struct br_rpc *r);

/* Async-signal-safe: asks br_rpc_run to return soon. */
void br_rpc_stop(struct br_rpc *r);

#endif
