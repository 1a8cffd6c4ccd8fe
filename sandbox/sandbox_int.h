/* sandbox_int.h - what the sandbox service's files share (not a public
 * interface). */
#ifndef AAS_SANDBOX_INT_H
#define AAS_SANDBOX_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "vmm/orch.h"
#include "sandbox/catalog.h"
#include "sandbox/sandbox.h"
#include "sandbox/store.h"

#define SBX_ID_LEN STORE_ID_LEN
#define SBX_TEARDOWN_MAX 16 /* VMs torn down in the background at once; beyond, a destroy waits */
#define SBX_TEARDOWN_THREADS 2

struct sbx {
	struct sbx_env env;
	const struct config *cfg; /* env.cfg */
	struct db *db;            /* env.db */
	struct orch *orch;
	char instance[33];
	pthread_t maint;
	int maint_started;
	pthread_t mover; /* evacuations: apart, so a long move never holds up the heartbeat */
	int mover_started;
	atomic_int stop;
	atomic_int calls_stop; /* waiting calls end: the service is stopping */
	pthread_mutex_t wake_lock;
	pthread_cond_t wake;
	pthread_mutex_t cap_lock;
	json_t *capacity;
	struct reaper *reaper;
	/* Whether VMs may have a network device: the isolation rule was in
	 * place at the last check (under cap_lock, with the reason if not). */
	int net_ok;
	long long net_checked_ms;
	char net_why[300];
	/* Maintenance thread only: when the hosts were last polled, and since
	 * when each host (by orch index) has failed every poll (0: it
	 * answered the last one). */
	long long hosts_polled_ms;
	long long host_failing_since_ms[ORCH_MAX_HOSTS];
	/* The isolation rule's hash (orch_net_rule_hash): a VM with a
	 * network device goes only to a host that has it ("" before start). */
	char net_rule[72];
	/* VMs of destroyed sandboxes being torn down after the answer
	 * (sandbox_core.c): the pool that does it, and their ids (under
	 * teardown_lock) for reconcile to leave alone meanwhile. */
	struct work_pool *teardown;
	pthread_mutex_t teardown_lock;
	char tearing[SBX_TEARDOWN_MAX][SBX_ID_LEN + 1];
};

/* The files of the service form layers, lowest first: each calls into
 * the files of the sections before its own and none after it, so no two
 * call each other (tools/graph/loops.sh sandbox prints no loop).
 *   sandbox_net.c     the isolation rule's state, the device a VM gets
 *   sandbox_hosts.c   the hosts this aasd serves: polls, placement
 *   sandbox_core.c    the life of a row and its VM: boot, failure,
 *                     destroy, settlement, the teardown queue
 *   sandbox_ports.c, sandbox_io.c (< sandbox_cmd.c, sandbox_tree.c),
 *   sandbox_pty.c, sandbox_pause.c, sandbox_snap.c, sandbox_move.c
 *                     the features, over the core (the last three also
 *                     over sandbox_ports.c, for the forwards of a new QEMU)
 *   sandbox_maint.c   the maintenance thread: heartbeat, reconcile (each
 *                     feature's part of it), warm pool
 *   sandbox.c         the service itself (sbx_new starts both threads),
 *                     create, get, list, destroy */

/* ---- networking (sandbox_net.c) ---- */
/* Checks (and under AAS_NET=auto/on installs) the isolation rule. -1 only
 * when AAS_NET=on and the rule cannot be put in place. */
int sbx_net_init(struct sbx *s, struct err *e) AAS_MUST_CHECK;
/* Re-checks the rule (maintenance thread), reinstalling it if it went. */
void sbx_net_refresh(struct sbx *s);
/* 1 when VMs may get a network device now; else 0 and the reason. */
int sbx_net_available(struct sbx *s, char *why, size_t n);
/* The device a sandbox gets: nat for internet, isolated without; none
 * when networking is unavailable (internet then is an error). */
int sbx_net_for(struct sbx *s, int internet, enum vm_net *net, struct err *e) AAS_MUST_CHECK;
/* The net the warm pool boots with. */
enum vm_net sbx_net_pool(struct sbx *s);
/* The device a row's net names (nat, isolated; anything else: none). */
enum vm_net sbx_net_parse(const char *name);

/* ---- hosts (sandbox_hosts.c) ---- */
#define SBX_HOST_POLL_S 5 /* capacity and live use of each host */
/* Registers this aasd's hosts, opens the table's shared ones and polls
 * them all once, so placement knows their capacity. */
int sbx_hosts_init(struct sbx *s, struct err *e) AAS_MUST_CHECK;
/* Every SBX_HOST_POLL_S (at most AAS_HOST_DOWN_S / 3): opens hosts
 * added to the table and polls each, recording a host that is down
 * (hosts_report). 1 when it polled, for the caller to end the sandboxes
 * of the hosts down (sbx_end_host_lost); 0 when it was not yet time. */
int sbx_hosts_refresh(struct sbx *s, long long now_ms);
/* The URIs of the hosts this aasd has open, comma-separated. */
int sbx_hosts_csv(struct sbx *s, char *out, size_t n);
/* Tells the VM layer where host `uri` keeps disks, from its row now (a
 * boot does not wait for the next poll: a host just added with its own
 * storage pool must not be given a local disk). */
void sbx_host_storage(struct sbx *s, const char *uri);
/* Tells the VM layer whether host `uri` has room for one more VM of size
 * `sz` beyond its reservations (orch_host_set_spare). */
void sbx_host_spare(struct sbx *s, const char *uri, const struct cat_size *sz);
/* Inside a create's transaction: reserves `size` on the best host with
 * room (its URI into `host`, the reservation into `row`), among the hosts
 * with the isolation rule when `net` is a network device; ERR_CAPACITY
 * when none has room. */
int sbx_place(PGconn *c, struct sbx *s, const char *size, enum vm_net net, char *host, size_t n,
    struct store_new *row, struct err *e) AAS_MUST_CHECK;
/* The same among the hosts in `csv` (comma-separated URIs) only. */
int sbx_place_in(PGconn *c, struct sbx *s, const char *csv, const char *size, enum vm_net net,
    char *host, size_t n, struct store_new *row, struct err *e) AAS_MUST_CHECK;
/* The isolation rule a host must have for a VM with network `net`
 * (NULL: none needed), as hosts_reserve takes it. */
const char *sbx_rule_for(struct sbx *s, enum vm_net net);

/* ---- the core: a sandbox's row and VM (sandbox_core.c) ---- */
/* Tells the process that sandbox `id` ended here (sbx_env.ended). */
void sbx_ended(struct sbx *s, const char *id);
/* Tells every aasd's expiry reaper that an expiry time changed. */
void sbx_expiry_changed(struct sbx *s);
/* Forgets a sandbox's ports (its forwards went with its VM). */
void sbx_ports_drop(struct sbx *s, const char *id);
/* A running sandbox's row, domain name and host connection, or an error
 * saying why not. */
struct vm_host *sbx_running(struct sbx *s, const char *account, const char *id,
    struct store_row *row, char *domain, size_t dn, struct err *e);
/* Waits `seconds` or until the service stops; 1 when it stops. */
int sbx_sleep_or_stop(struct sbx *s, int seconds);
/* A sandbox that failed to boot, or whose VM stopped, ends as failed for
 * `end` with `reason`, settled once whoever gets there first. */
void sbx_mark_failed(struct sbx *s, const char *id, enum store_end end, const char *reason);
/* Boots the VM of a 'creating' row and moves it to running (or failed). */
int sbx_boot_row(struct sbx *s, const char *id, const char *host, const char *size, enum vm_net net,
    const struct sbx_progress *pg, struct err *e) AAS_MUST_CHECK;
/* The same from snapshot `snap` (NULL: a cold boot). */
int sbx_boot_row_from(struct sbx *s, const char *id, const char *host, const char *size,
    enum vm_net net, const char *snap, const struct sbx_progress *pg, struct err *e) AAS_MUST_CHECK;
/* Destroys a sandbox's VM, marks the row destroyed for `end` (unless it
 * already has an end reason) and settles it. */
int sbx_finish_destroy(struct sbx *s, const char *id, const char *host, enum store_end end,
    struct err *e) AAS_MUST_CHECK;
/* A user's destroy of a row marked destroying: settles it once its VM is
 * out of reach (orch_detach) and tears the VM down in the background; when
 * the VM cannot be detached or SBX_TEARDOWN_MAX are under way, as
 * sbx_finish_destroy. */
int sbx_destroy_detached(struct sbx *s, const char *id, const char *host, enum store_end end,
    struct err *e) AAS_MUST_CHECK;
/* Whether sandbox id's VM is being torn down in the background. */
int sbx_tearing_down(struct sbx *s, const char *id);
/* A live sandbox whose VM is gone (and, pausing or resuming, has no saved
 * memory either): failed as out_of_memory or guest_shutdown, settled, and
 * its files removed. */
void sbx_vm_lost(struct sbx *s, const char *host, const char *id);
/* Ends the live sandboxes of this aasd's hosts that are down (host_lost,
 * billed up to the last time the host answered). */
void sbx_end_host_lost(struct sbx *s);
#define SBX_AGENT_WHY_MAX 256
/* When sandbox `id`'s guest broke the agent protocol: ends the sandbox
 * (end reason agent_protocol, the reason into `why`) and returns 1; else
 * 0. */
int sbx_end_if_agent_fault(struct sbx *s, const char *id, const char *host, char *why, size_t n);
/* After a guest call on sandbox `id` failed with e: when its guest broke
 * the agent protocol, ends the sandbox (end reason agent_protocol, the
 * reason kept) and says so in e. Returns -1. */
int sbx_guest_failed(struct sbx *s, const char *id, const char *host, struct err *e) AAS_FAILS;

/* ---- exposed ports (sandbox_ports.c) ---- */
/* Most forwards a sandbox brings to a new QEMU (a move, a resume);
 * AAS_MAX_PORTS_PER_SANDBOX is less. */
#define SBX_FORWARDS_MAX 64
/* Exposed ports of a sandbox as a JSON array (new reference). */
json_t *sbx_ports_json(struct sbx *s, const char *id, struct err *e);
/* Sandbox `id`'s preview forwards again, on its new QEMU on `host`: the
 * same guest ports (into `ports`), new host ports (`host_ports`), the same
 * URLs; at most `max`. How many were added. */
size_t sbx_forward_again(struct sbx *s, const char *id, const char *host, int *ports,
    int *host_ports, size_t max);

/* ---- commands and files (sandbox_io.c; sandbox_cmd.c and sandbox_tree.c
 * above it) ---- */
/* The absolute form of a path argument (relative: under the home; NULL:
 * "path: required") and the running VM it is in, or NULL with e. */
struct vm_host *sbx_file_vm(struct sbx *s, const char *account, const char *id, const char *path,
    char *abs, size_t an, struct store_row *row, char *domain, size_t dn, struct err *e);
/* Background commands still marked running: asks the guest once each. */
void sbx_refresh_commands(struct sbx *s, const char *id, const char *host);
/* Asks the guest once about one command: its end (or that the agent
 * forgot it: failed) is recorded. 1 when it ended, 0 while it runs, -1
 * when the guest could not say. */
int sbx_poll_command(struct sbx *s, struct vm_host *h, const char *domain, const char *cmd_id,
    long pid);
/* cmd- and 16 of [a-z0-9]: the only command ids there are. */
int sbx_command_id_valid(const char *id);

/* ---- pause and resume (sandbox_pause.c) ---- */
/* Reconcile's end of a pause or resume whose aasd stopped (`state`
 * pausing or resuming; `runs`: whether its domain runs): whichever state
 * the VM is in is recorded, with its money, once. */
void sbx_reconcile_pause(struct sbx *s, const char *host, const char *id, const char *state,
    int runs);

/* ---- snapshots (sandbox_snap.c) ---- */
/* A 'snapshotting' sandbox whose aasd stopped. */
void sbx_reconcile_snapshot(struct sbx *s, const char *host, const char *id);
/* Ends the snapshots past their expiry. */
void sbx_snapshots_expire(struct sbx *s);

/* ---- evacuation (sandbox_move.c) ---- */
/* Moves some sandboxes off the evacuating hosts this aasd serves (live
 * migration to the host with the most headroom) and drops their warm VMs;
 * one that cannot move stays, with the reason on its row. */
void sbx_evacuate_round(struct sbx *s);
/* The mover thread: an evacuation round every SBX_MOVE_POLL_S. Its own
 * thread, so the heartbeat goes on during a move (a silent instance's
 * moves are settled by others). */
#define SBX_MOVE_POLL_S 2
void *sbx_move_main(void *arg);
/* Reconcile's end of a move whose aasd stopped (`here`: the VM of
 * sandbox `id` is still listed on its old host): recorded as done when
 * its VM is on `to` only, else as failed. */
void sbx_reconcile_move(struct sbx *s, const char *id, const char *to, int here);

/* ---- maintenance (sandbox_maint.c) ---- */
/* The maintenance thread: heartbeat, host polls, reconcile, warm pool,
 * snapshot expiry, every SBX_HEARTBEAT_S until the service stops. */
void *sbx_maint_main(void *arg);

#endif
