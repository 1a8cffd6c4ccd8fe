/* store.h - every statement on the sandbox tables (store_): sandboxes,
 * sandbox_commands, sandbox_ports and the instances' heartbeats. The
 * sandbox service decides; the store reads and writes rows, with
 * parameters only, and parses every value it reads back.
 *
 * Lock order (every path that locks more than one row): the account row
 * first (FOR UPDATE), then host rows (a create's placement, by id,
 * sandbox/hosts.h), then sandbox rows, then ledger inserts. Functions
 * taking a PGconn run inside the caller's transaction. */
#ifndef AAS_STORE_H
#define AAS_STORE_H

#include <stddef.h>

#include <jansson.h>
#include <libpq-fe.h>

#include "base/db.h"
#include "account/accounts.h"
#include "base/err.h"

#define STORE_ID_LEN 20 /* "sbx-" + 16 */
#define STORE_HOST_MAX 512
#define STORE_RECENT_COMMANDS 20

/* What the service needs of a sandbox row to act on it. */
struct store_row {
	char id[STORE_ID_LEN + 1];
	char state[16];
	char size[8];
	char host[STORE_HOST_MAX];
	char net[16]; /* nat, isolated or none */
};

/* Row states, as SQL lists: every state of a sandbox that has not ended;
 * those with a VM on their host (what its reservation counts); those that
 * count against an account's live sandboxes. */
#define STORE_LIVE_STATES \
	"('creating', 'running', 'destroying', 'pausing', 'paused', 'resuming', 'snapshotting')"
#define STORE_VM_STATES \
	"('creating', 'running', 'destroying', 'pausing', 'resuming', 'snapshotting')"
#define STORE_ACTIVE_STATES \
	"('creating', 'running', 'pausing', 'paused', 'resuming', 'snapshotting')"

/* 1 for a state a pause, resume or snapshot under way holds for seconds. */
int store_state_moving(const char *state);
/* Why sandbox `id` is not in the state `want` a move needs: the
 * ERR_CONFLICT a caller sees (or ERR_NOT_FOUND). */
void store_wrong_state(struct db *db, const char *id, const char *account, const char *want,
    struct err *e);

/* ---- reading sandboxes ---- */

/* A sandbox of `account` (NULL: any, for maintenance). ERR_NOT_FOUND
 * naming sandbox_id when there is none. */
int store_load(struct db *db, const char *account, const char *id, struct store_row *row,
    struct err *e) AAS_MUST_CHECK;
/* The tools' "sandbox" object of one sandbox of `account`. */
json_t *store_sandbox_json(struct db *db, const char *account, const char *id, struct err *e);
/* list_sandboxes: {sandboxes, next_cursor}, newest first. `state` NULL for
 * any, "live" for creating or running; `cursor` NULL for the first page. */
json_t *store_list_json(struct db *db, const char *account, const char *state, const char *cursor,
    int limit, struct err *e);
/* 1 when `id` has a live row (creating, running or destroying). */
int store_is_live(struct db *db, const char *id, int *live, struct err *e) AAS_MUST_CHECK;
/* *ended = 1 when sandbox id has no row, or ended more than `seconds` ago. */
int store_ended_before(struct db *db, const char *id, int seconds, int *ended,
    struct err *e) AAS_MUST_CHECK;

/* ---- creating ---- */

/* Live sandboxes of an account, counted inside the caller's transaction
 * after it locked the account row. */
int store_live_count(PGconn *c, const char *account, long long *live, struct err *e) AAS_MUST_CHECK;
/* acct_disable, and in the same transaction the account's live sandboxes
 * counted into *live: those its reapers are left to stop. */
int store_disable_account(struct db *db, const char *account, struct acct_disabled *out,
    long long *live, struct err *e) AAS_MUST_CHECK;

struct store_new {
	const char *account; /* NULL: a warm-pool VM */
	const char *name;
	const char *metadata; /* JSON object text */
	const char *size;
	const char *host;
	const char *domain;
	const char *owner; /* this instance */
	int timeout_min;
	const char *net;
	int minute_s;
	int reserved_memory_mib; /* on its host while it lives (sandbox/hosts.h) */
	int reserved_vcpus;
	const char *from_snapshot; /* NULL: a VM booted from the image */
};

/* Claims a warm VM of n->size and n->net for n->account: 1 and its id and
 * host when one was free, 0 when none. */
int store_claim_warm(PGconn *c, const struct store_new *n, char *id, char *host,
    struct err *e) AAS_MUST_CHECK;
/* The row of a new VM, 'creating', before the VM exists. */
int store_insert_creating(PGconn *c, const char *id, const struct store_new *n,
    struct err *e) AAS_MUST_CHECK;
int store_insert_pool(PGconn *c, const char *id, const struct store_new *n,
    struct err *e) AAS_MUST_CHECK;

/* ---- state changes ---- */

/* Why a sandbox ended (the end_reason column; schema/006_end_reason.sql
 * holds the same list). */
enum store_end {
	STORE_END_DESTROYED,        /* its account destroyed it */
	STORE_END_EXPIRED,          /* its paid time ran out */
	STORE_END_GUEST_SHUTDOWN,   /* the VM stopped from inside, or crashed */
	STORE_END_OUT_OF_MEMORY,    /* the guest kernel gave up for lack of memory */
	STORE_END_BOOT_FAILED,      /* the VM never became ready */
	STORE_END_HOST_LOST,        /* the host or the service went away while it started */
	STORE_END_POOL_SURPLUS,     /* a warm VM the pool no longer needed */
	STORE_END_ACCOUNT_DISABLED, /* its account was disabled (aasctl account disable) */
	STORE_END_AGENT_PROTOCOL,   /* its guest agent broke the protocol (flood, garbage) */
};

/* The column's value of `end`. */
const char *store_end_name(enum store_end end);

/* creating -> running; *won is 0 when the row was no longer creating. */
int store_mark_running(struct db *db, const char *id, const char *accel, const char *boot,
    int minute_s, int *won, struct err *e) AAS_MUST_CHECK;
/* A live sandbox of `account` (NULL: any) moves to destroying, owned by
 * `owner`, so reconcile leaves it to its owner; its end reason becomes
 * `end` unless it already had one. */
int store_mark_destroying(struct db *db, const char *id, const char *account, const char *owner,
    enum store_end end, struct err *e) AAS_MUST_CHECK;
/* A live row ends, inside the caller's transaction (settle_end): `state`
 * destroyed or failed, at now() (destroyed_at or failed_at), with a text
 * reason or NULL. `end` is recorded unless the row already has an end
 * reason (set when it was claimed for destroying). */
int store_conn_mark_ended(PGconn *c, const char *id, const char *state, enum store_end end,
    const char *reason, struct err *e) AAS_MUST_CHECK;
/* Every aasd's reaper sleeps until the nearest expiry; this wakes them. */
int store_expiry_changed(struct db *db, struct err *e) AAS_MUST_CHECK;

/* ---- commands ---- */

/* A background command is added only while the sandbox has fewer than
 * `bg_cap` running (ERR_LIMIT naming AAS_MAX_BACKGROUND_PER_SANDBOX),
 * counted and inserted under the sandbox row's lock; `bg_cap` is unused
 * for the others. */
int store_cmd_insert(struct db *db, const char *cmd_id, const char *sandbox_id, const char *command,
    int background, int bg_cap, const char *out_path, const char *err_path,
    struct err *e) AAS_MUST_CHECK;
/* Running background commands of a sandbox. */
int store_cmd_background_count(struct db *db, const char *sandbox_id, long long *n,
    struct err *e) AAS_MUST_CHECK;
/* Forgets all but the newest `keep` commands of a sandbox. */
int store_cmd_trim(struct db *db, const char *sandbox_id, int keep, struct err *e) AAS_MUST_CHECK;
int store_cmd_set_pid(struct db *db, const char *cmd_id, long pid, struct err *e) AAS_MUST_CHECK;
/* The command ended (`state` exited, timed_out or failed) with `code`;
 * `state` running records nothing but keeps it running. An exit by a
 * signal after kill_command is recorded as killed. With
 * `only_running`, a command already ended is left as it is. */
int store_cmd_end(struct db *db, const char *cmd_id, const char *state, int code, int only_running,
    struct err *e) AAS_MUST_CHECK;

struct store_cmd_pid {
	char id[24];
	long pid;
};
/* Background commands of a sandbox still marked running (malloc'd). */
int store_cmd_running(struct db *db, const char *sandbox_id, struct store_cmd_pid **cmds, size_t *n,
    struct err *e) AAS_MUST_CHECK;
/* One command of a sandbox, typed. */
struct store_cmd {
	char id[24];
	char state[16]; /* running, exited, timed_out, killed, failed */
	int exit_code;  /* when has_exit_code */
	int has_exit_code;
	long pid; /* the guest's, 0 when unknown */
	int background;
	int kill_signal; /* sent by kill_command; 0: none */
	char stdout_path[256];
	char stderr_path[256];
};
/* ERR_NOT_FOUND naming command_id when the sandbox has no such command. */
int store_cmd_get(struct db *db, const char *sandbox_id, const char *cmd_id, struct store_cmd *out,
    struct err *e) AAS_MUST_CHECK;
/* Notes the signal kill_command sends to a running command. */
int store_cmd_set_kill(struct db *db, const char *cmd_id, int sig, struct err *e) AAS_MUST_CHECK;
/* The most recent commands of a sandbox as a JSON array. */
json_t *store_cmd_recent_json(struct db *db, const char *sandbox_id, struct err *e);
/* One command as its status object (without log sizes). ERR_NOT_FOUND
 * naming command_id when the sandbox has no such command. */
json_t *store_cmd_json(struct db *db, const char *sandbox_id, const char *cmd_id, struct err *e);

/* ---- exposed ports ---- */

struct store_port {
	int port;
	int public;
	char created_at[40];
};
int store_ports(struct db *db, const char *sandbox_id, struct store_port **ports, size_t *n,
    struct err *e) AAS_MUST_CHECK;
int store_port_count(struct db *db, const char *sandbox_id, long long *n,
    struct err *e) AAS_MUST_CHECK;
int store_port_exists(struct db *db, const char *sandbox_id, int port, int *exists,
    struct err *e) AAS_MUST_CHECK;
/* Adds the port unless the sandbox has `cap` already (ERR_LIMIT naming
 * AAS_MAX_PORTS_PER_SANDBOX): counted and inserted under the sandbox
 * row's lock, so parallel exposes cannot pass the cap together.
 * *inserted is 0 when the port was taken meanwhile or the sandbox stopped. */
int store_port_insert(struct db *db, const char *sandbox_id, int port, int public, int host_port,
    const char *token_hash, int cap, int *inserted, struct err *e) AAS_MUST_CHECK;
int store_ports_drop(struct db *db, const char *sandbox_id, struct err *e) AAS_MUST_CHECK;

/* Where a preview request goes: the exposed port of a running sandbox. */
struct store_preview {
	int host_port;
	int public;
	char token_hash[72];
	char host[STORE_HOST_MAX];
	char address[64]; /* the host's private address; "" when none */
	char account[37]; /* uuid text */
	char state[16];   /* running, or a pause state (pausing, paused, resuming) */
};
/* 1 and `out` when the port is exposed on a running or paused sandbox of
 * an account that is not disabled, else 0. */
int store_preview_lookup(struct db *db, const char *sandbox_id, int port, struct store_preview *out,
    int *found, struct err *e) AAS_MUST_CHECK;

/* ---- money on a sandbox row (inside the caller's transaction, after
 * the account row was locked) ---- */

struct store_paid {
	char account[40]; /* "" for a warm VM */
	char state[16];
	int paid_minutes;
	long long price;
	long long charged;
	long long refunded;
	int minutes_used; /* when settled */
	int settled;
	long long ran_ms;  /* from ready to its end, or to now, less the pauses */
	long long life_ms; /* from ready to expiry */
	/* Pauses (schema/018_pause.sql). */
	int storage_billed;      /* paused: storage due since storage_from */
	long long storage_ms;    /* from storage_from to the end, or to now */
	long long storage_price; /* per minute, recorded at the pause */
	int pauses, resumes;     /* how many began (ledger keys) */
	long long resume_charge; /* what a resume under way paid */
	int resume_minutes;      /* ... for these minutes */
	long long expires_in_ms; /* from now to expiry (negative: past) */
};

/* The account a sandbox belongs to ("" for a warm VM), unlocked: what
 * the caller locks first. ERR_NOT_FOUND when there is no such sandbox. */
int store_account_of(PGconn *c, const char *id, char *account, size_t n,
    struct err *e) AAS_MUST_CHECK;
/* Locks a sandbox row (of `account`, or any when NULL) and reads its money. */
int store_lock_paid(PGconn *c, const char *id, const char *account, struct store_paid *out,
    struct err *e) AAS_MUST_CHECK;
/* The price and first charge of a new sandbox. */
int store_set_paid(PGconn *c, const char *id, long long price, int minutes, long long cost,
    struct err *e) AAS_MUST_CHECK;
/* More paid minutes: expires_at moves by minutes x minute_s; the new
 * expiry (ISO 8601) into `expires`. */
int store_add_paid(PGconn *c, const char *id, int minutes, long long cost, int minute_s,
    char *expires, size_t n, struct err *e) AAS_MUST_CHECK;
/* The final settlement: minutes_used, `refund` added to refunded, and
 * `storage` (a paused sandbox's last storage charge) to charged. */
int store_mark_settled(PGconn *c, const char *id, int used, long long refund, long long storage,
    struct err *e) AAS_MUST_CHECK;
/* store_expiry_changed inside a transaction: sent when it commits. */
int store_expiry_changed_tx(PGconn *c, struct err *e) AAS_MUST_CHECK;

/* get_usage: the account's newest sandboxes with what each cost. */
json_t *store_usage_json(struct db *db, const char *account, int limit, struct err *e);

/* ---- expiry ---- */

struct store_due {
	char id[STORE_ID_LEN + 1];
	char host[STORE_HOST_MAX];
	char end_reason[24]; /* expired or account_disabled */
};
/* Claims up to `max` running sandboxes on `hosts` (a PostgreSQL text
 * array literal) that expired or whose account is disabled, for `owner`,
 * moving them to destroying with that end reason (malloc'd). */
int store_claim_due(struct db *db, const char *hosts, const char *owner, int max,
    struct store_due **due, size_t *n, struct err *e) AAS_MUST_CHECK;
/* Claims the live sandboxes on those of `hosts` that are down (at most
 * 200 a call), moving them to destroying for `owner` with end reason
 * host_lost unless they had one. */
int store_claim_host_lost(struct db *db, const char *hosts, const char *owner,
    struct store_due **due, size_t *n, struct err *e) AAS_MUST_CHECK;
/* Milliseconds until the nearest expiry on `hosts`; `none` when nothing
 * runs there. */
int store_next_expiry_ms(struct db *db, const char *hosts, long long none, long long *ms,
    struct err *e) AAS_MUST_CHECK;
/* Live sandboxes by state: creating, running, destroying. */
int store_count_live(struct db *db, long long counts[3], struct err *e) AAS_MUST_CHECK;

/* ---- maintenance ---- */

struct store_host_row {
	char id[STORE_ID_LEN + 1];
	char state[16];
	int owner_dead;                 /* no instance has claimed it for dead_s */
	char moving_to[STORE_HOST_MAX]; /* "" unless it is being moved */
	int mover_dead;                 /* ... by an instance silent for dead_s */
};
/* Live rows on `host` (malloc'd), as instance `self` sees them: a move
 * `self` owns is never dead to it, however late its own heartbeat (its
 * maintenance thread can be slower than dead_s while a move runs). */
int store_host_rows(struct db *db, const char *host, const char *self, int dead_s,
    struct store_host_row **rows, size_t *n, struct err *e) AAS_MUST_CHECK;
/* Warm VMs of a size on `hosts` (a text[] literal): how many have `net`,
 * and how many running ones have another net. */
int store_pool_counts(struct db *db, const char *size, const char *hosts, const char *net,
    long long *have, long long *stale, struct err *e) AAS_MUST_CHECK;
/* Takes the newest surplus warm VM on `hosts` for destruction: 1 and its
 * id and host, or 0. */
int store_pool_take_surplus(struct db *db, const char *size, const char *hosts, const char *owner,
    const char *net, char *id, char *host, size_t hn, struct err *e) AAS_MUST_CHECK;
/* Live sandboxes of accounts, and warm VMs per size (small, medium, large). */
int store_capacity(struct db *db, long long *live, long long warm[3], struct err *e) AAS_MUST_CHECK;
int store_heartbeat(struct db *db, const char *instance, const char *uris,
    struct err *e) AAS_MUST_CHECK;

/* ---- pauses (store_pause.c) ---- */

/* running -> pausing for `owner`, from now (paused_at); the host into
 * `host`. ERR_CONFLICT naming the state when it is not running (or is
 * moving), ERR_NOT_FOUND when the account has no such sandbox. */
int store_pause_begin(struct db *db, const char *id, const char *account, const char *owner,
    char *host, size_t hn, struct err *e) AAS_MUST_CHECK;
/* pausing -> running: the VM could not be saved and runs on. */
int store_pause_undo(struct db *db, const char *id, struct err *e) AAS_MUST_CHECK;
/* A pause or resume this aasd could not record: reconcile finishes it
 * from what is on the host, as for an aasd that stopped. */
int store_disown(struct db *db, const char *id, struct err *e) AAS_MUST_CHECK;
/* In the pause's money transaction: pausing -> paused, `paid_minutes`
 * the compute minutes it keeps, `refund` added to refunded, storage
 * billed from paused_at at `storage_price`. */
int store_conn_mark_paused(PGconn *c, const char *id, int paid_minutes, long long refund,
    long long storage_price, struct err *e) AAS_MUST_CHECK;
/* In the resume's money transaction: paused -> resuming for `owner`,
 * `minutes` more paid for `compute`, `storage` charged up to now. */
int store_conn_mark_resuming(PGconn *c, const char *id, const char *owner, int minutes,
    long long compute, long long storage, struct err *e) AAS_MUST_CHECK;
/* In a failed resume's transaction: resuming -> paused, its compute back
 * (the caller posted the refund). */
int store_conn_resume_undo(PGconn *c, const char *id, struct err *e) AAS_MUST_CHECK;
/* resuming -> running, with the preview forwards' new host ports; *won
 * is 0 when the row was no longer resuming. */
int store_resume_done(struct db *db, const char *id, const int *ports, const int *host_ports,
    size_t n, int *won, struct err *e) AAS_MUST_CHECK;

/* ---- moves (store_move.c): evacuating a host ---- */

struct store_move {
	char id[STORE_ID_LEN + 1];
	char host[STORE_HOST_MAX];
	char net[16];
	int reserved_memory_mib, reserved_vcpus;
};
/* Takes a warm VM on an evacuating host among `hosts` (a text[] literal)
 * for destruction as pool surplus: 1 with its id and host, or 0. */
int store_move_pool_take(struct db *db, const char *hosts, const char *owner, char *id, char *host,
    size_t hn, struct err *e) AAS_MUST_CHECK;
/* The next tenant sandbox to move off an evacuating host among `hosts`:
 * running, not moving, not refused before. 1 and it, or 0. */
int store_move_next(struct db *db, const char *hosts, struct store_move *out,
    struct err *e) AAS_MUST_CHECK;
/* In the transaction that reserved room on `to` (after the host rows):
 * marks the sandbox as moving there; *won is 0 when it stopped running,
 * left `from` or is moved by someone else already. */
int store_move_claim(PGconn *c, const char *id, const char *from, const char *to, const char *owner,
    int *won, struct err *e) AAS_MUST_CHECK;
/* The move to `to` is over: the row's host becomes `to` and its preview
 * forwards the new host ports in `host_ports` (one per entry of `ports`);
 * `pause_ms`: how long its guest paused at the switch (-1: not known).
 * Recorded whatever became of the claim meanwhile (the VM is on `to` now);
 * *won is 0 when the sandbox stopped running (its VM on `to` is nobody's). */
int store_move_done(struct db *db, const char *id, const char *to, long long pause_ms,
    const int *ports, const int *host_ports, size_t n, int *won, struct err *e) AAS_MUST_CHECK;
/* The move failed: the sandbox stays where it was with the reason, and is
 * not tried again until the next evacuate. */
int store_move_failed(struct db *db, const char *id, const char *why, struct err *e) AAS_MUST_CHECK;

/* ---- snapshots (store_snap.c) ---- */

#define STORE_SNAP_ID_LEN 20 /* "snp-" and 16 base36 characters */
#define STORE_IMAGE_MAX 80

struct store_snap_new {
	const char *id, *account, *name, *sandbox_id, *host, *size, *net, *image;
	int keep_minutes;
	long long storage_price, charged;
};

struct store_snap {
	char id[STORE_SNAP_ID_LEN + 1];
	char account[40];
	char sandbox_id[STORE_ID_LEN + 1];
	char host[STORE_HOST_MAX];
	char size[8];
	char net[16];
	char image[STORE_IMAGE_MAX];
	char state[16];
	int keep_minutes;
	long long charged;
	long long left_ms; /* until it expires */
};

struct store_snap_due {
	char id[STORE_SNAP_ID_LEN + 1];
	char account[40];
};

/* ERR_NOT_FOUND naming snapshot_id. */
void store_snap_not_found(const char *snap, struct err *e);
/* Snapshots of `account` not deleted (the per-account cap counts them). */
int store_conn_snap_count(PGconn *c, const char *account, long long *n,
    struct err *e) AAS_MUST_CHECK;
/* running -> snapshotting, owned by `owner`; ERR_CONFLICT otherwise. */
int store_conn_mark_snapshotting(PGconn *c, const char *id, const char *account, const char *owner,
    struct err *e) AAS_MUST_CHECK;
int store_conn_snap_insert(PGconn *c, const struct store_snap_new *n, struct err *e) AAS_MUST_CHECK;
/* The account's snapshot, not deleted (locked FOR UPDATE when asked: after
 * the account and sandbox rows); ERR_NOT_FOUND otherwise. Under the
 * account row's lock a plain read is stable: every change of a snapshot
 * locks its account first. */
int store_conn_snap_read(PGconn *c, const char *account, const char *snap, int for_update,
    struct store_snap *out, struct err *e) AAS_MUST_CHECK;
/* The snapshot sandbox `sandbox_id` is being taken: 1 with it, 0 none. */
int store_snap_saving(struct db *db, const char *sandbox_id, struct store_snap *out,
    struct err *e) AAS_MUST_CHECK;
/* saving -> ready with its size on disk. */
int store_conn_snap_ready(PGconn *c, const char *snap, long long bytes,
    struct err *e) AAS_MUST_CHECK;
/* -> deleted, for `reason` (deleted, expired, failed, image_changed),
 * `refunded` given back. */
int store_conn_snap_end(PGconn *c, const char *snap, const char *reason, long long refunded,
    struct err *e) AAS_MUST_CHECK;
/* snapshotting -> running; its forwards rebound when `ports` is not NULL
 * (its VM runs on a new QEMU). */
int store_conn_snap_sandbox_back(PGconn *c, const char *sandbox_id, const int *ports,
    const int *host_ports, size_t n, struct err *e) AAS_MUST_CHECK;
/* A snapshot whose end could not be recorded: left to reconcile. */
int store_snap_disown(struct db *db, const char *sandbox_id, struct err *e) AAS_MUST_CHECK;
json_t *store_snap_json(struct db *db, const char *account, const char *snap, struct err *e);
/* The account's snapshots not deleted, newest first (at most 1000; the
 * per-account cap is far below). */
json_t *store_snap_list_json(struct db *db, const char *account, struct err *e);
/* Up to `max` ready snapshots past their expiry. */
int store_snap_due(struct db *db, struct store_snap_due *due, size_t max, size_t *n,
    struct err *e) AAS_MUST_CHECK;

#endif
