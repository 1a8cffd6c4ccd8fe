/* mcp_int.h - what the MCP transport (mcp.c, mcp_caller.c, mcp_post.c,
 * mcp_stream.c) and its method handlers (mcp_rpc.c, mcp_era.c) share; not
 * a public interface. */
#ifndef AAS_MCP_INT_H
#define AAS_MCP_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "base/jsonrpc.h"
#include "base/tally.h"
#include "server/mcp.h"
#include "account/session.h"

#define MCP_MAX_INFLIGHT 4096
#define MCP_MAX_GET_STREAMS 1024
#define MCP_MAX_BATCH 64
#define MCP_STREAM_RETRY_S 5 /* Retry-After when a stream cap is reached */

/* A tools/call in progress, findable by notifications/cancelled. */
struct inflight {
	char session[SESS_ID_LEN + 1];
	char *id_json;
	atomic_int cancelled;
	struct inflight *next;
};

/* A GET stream, ended when its session is deleted here. */
struct get_stream {
	char session[SESS_ID_LEN + 1];
	char account[ACCT_ID_LEN + 1]; /* the session's account; "" when none */
	struct sse *sse;
	struct get_stream *next;
};

struct mcp {
	struct app *app;
	pthread_mutex_t lock;
	struct inflight *inflight;
	size_t n_inflight;
	struct get_stream *streams;
	size_t n_streams;
	/* Open GET streams per "s:<session>" and per "a:<account>" (or
	 * "anon" for streams opened without a key), capped by
	 * AAS_MAX_STREAMS_PER_SESSION and AAS_MAX_STREAMS_PER_ACCOUNT. */
	struct tally *held;
};

/* Work handed from the HTTP thread to a worker. */
struct mcp_job {
	struct mcp *m;
	json_t *body; /* parsed message or batch */
	char session[SESS_ID_LEN + 1];
	int has_session;
	int stateless; /* a 2026-07-28 request */
	enum { JOB_POST, JOB_GET, JOB_DELETE } kind;
};

/* One request's context while its messages are handled. */
struct call_env {
	struct mcp *m;
	struct http_req *req;               /* NULL once the reply was sent */
	const char *account_id;             /* NULL: anonymous */
	char credential[SESS_CRED_MAX + 1]; /* its id (server/mcp_cred.h); "" without */
	struct sess_info sess;
	const char *session_id;
	int in_batch;
	int stateless; /* 2026-07-28: results carry resultType and serverInfo */
};

/* The 2026-07-28 revision (mcp_era.c). */
#define MCP_META_VERSION "io.modelcontextprotocol/protocolVersion"
#define MCP_META_CAPS "io.modelcontextprotocol/clientCapabilities"
#define MCP_META_CLIENT "io.modelcontextprotocol/clientInfo"
#define MCP_META_SERVER "io.modelcontextprotocol/serverInfo"
#define MCP_LIST_TTL_MS 300000 /* how long a client may keep tools/list */
#define MCP_EXT_TASKS "io.modelcontextprotocol/tasks"

/* 1 when the request is of the stateless revision: its _meta or its
 * MCP-Protocol-Version header names one (initialize never is). */
int mcp_era_stateless(struct http_req *req, json_t *body);
/* On the HTTP thread: the revision's header and _meta rules. Answers 400
 * (and returns -1) for an unsupported version, a missing or mismatched
 * header, missing _meta, or a batch. */
int mcp_era_check(struct http_req *req, json_t *body);
/* The server's instructions (initialize and server/discover). */
const char *mcp_instructions(void);
/* serverInfo.icons: the service's one icon, by URL (new reference); NULL
 * when the URL does not fit. */
json_t *mcp_icons(const struct config *cfg);
/* server/discover's result. */
json_t *mcp_era_discover(void);
/* tools/list's result under the revision. */
json_t *mcp_era_tools_list(void);
/* Marks a result of the revision (resultType, serverInfo); takes and
 * returns it. */
json_t *mcp_era_result(json_t *result);
/* Tasks (io.modelcontextprotocol/tasks): 1 when the client opted in on
 * this request and the call may run long (create_sandbox, a run_command
 * in the foreground). */
int mcp_era_wants_task(json_t *params, const char *tool, json_t *args);
struct tool;
/* Starts the call as a task and answers with it (resultType "task"). */
json_t *mcp_era_task_call(struct call_env *env, struct rpc_msg *msg, const struct tool *tool,
    json_t *args);
/* tasks/get, tasks/update, tasks/cancel. */
json_t *mcp_era_task_method(struct call_env *env, struct rpc_msg *msg);
/* 1 for the extension's methods: tasks/get, tasks/cancel, tasks/update. */
int mcp_era_is_task_method(const char *method);

/* ---- mcp_caller.c ---- */

/* Resolves the caller's key into account_id (ACCT_ID_LEN + 1 bytes;
 * *has_account 0 without a key): 0, or -1 after replying (401, or 503
 * when the key could not be checked). */
int mcp_caller_auth(struct http_req *req, struct mcp *m, char *account_id, int *has_account);
/* Without a credential: 0 when the message (or batch) may go on, -1 after
 * answering 401 with the OAuth challenge (OAuth on, and a call that needs
 * a credential). */
int mcp_caller_refuse_anonymous(struct http_req *req, struct mcp *m, json_t *body);
/* Replies for a session that cannot be used: 503 when the database did
 * not answer, the limit's status, else 404 as for an unknown session. */
void mcp_caller_session_refused(struct http_req *req, const struct err *e);
/* Loads the job's session into env (binding an anonymous one to the
 * caller's credential): 0, or -1 after replying. */
int mcp_caller_session(struct http_req *req, struct mcp *m, struct mcp_job *job,
    struct call_env *env, int has_account);

/* ---- mcp_post.c ---- */

/* 1 when the message is an initialize request. */
int mcp_post_is_initialize(json_t *body);
/* Answers the job's message or batch (202 when nothing is owed; nothing
 * when the answer went out as a stream). */
void mcp_post_reply(struct http_req *req, struct mcp_job *job, struct call_env *env);
/* 1 when the job can be answered on the HTTP thread: a cheap message of a
 * session cached here, from a caller known without the database. */
int mcp_post_inline(struct http_req *req, struct mcp *m, struct mcp_job *job);

/* ---- mcp_stream.c ---- */

/* Opens a GET stream of the session for the account (NULL: the shared
 * anonymous caps), or replies 503, 429 or 500. */
void mcp_stream_open(struct http_req *req, struct mcp *m, const char *session, const char *account);

/* ---- mcp_rpc.c ---- */

/* Handles one JSON-RPC message. Returns the response (NULL for
 * notifications and when the reply went out as a stream). `new_session`
 * receives the id minted by initialize (NULL where none may be made). */
json_t *mcp_handle_message(struct call_env *env, json_t *raw, char *new_session, int *streamed);

#endif
