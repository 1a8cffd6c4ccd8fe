/* fake_vmm.h - an in-memory hypervisor and guest for the sandbox
 * service's unit tests (fake_). Every vmm/ function the service calls is
 * redirected here at link time (-Wl,--wrap=..., see the Makefile), so the
 * real service, billing and base code run against:
 *   - hosts named by AAS_LIBVIRT_URI (comma-separated), always ready;
 *   - VMs that boot at once, can be lost (gone without a destroy) and are
 *     listed by orch_list while they run;
 *   - per VM, a file system of path -> bytes, forwards, and commands
 *     interpreted by a small table (fake_vmm.c, "commands"): true, false,
 *     exit N, echo X, echo X >&2, sleep N, yes | head -c N, cat, cat PATH,
 *     pwd, printenv NAME; anything else is "command not found" (127).
 * The state is process-wide and guarded by one lock (the service's
 * maintenance thread and reaper call in too); fake_vmm_reset clears it. */
#ifndef AAS_FAKE_VMM_H
#define AAS_FAKE_VMM_H

#include <stddef.h>

#include "vmm/vm_xml.h"

#define FAKE_MAX_HOSTS 4
#define FAKE_MAX_VMS 256   /* per test, destroyed ones included */
#define FAKE_MAX_FILES 128 /* per VM, command logs included */
#define FAKE_MAX_CMDS 64   /* per VM */
#define FAKE_MAX_FWDS 16   /* per VM */
#define FAKE_PATH_MAX 512  /* a guest path the fake keeps */
#define FAKE_ID_MAX 64
#define FAKE_FIRST_HOST_PORT 41000
#define FAKE_CONSOLE_MAX 256 /* bytes of a VM's console a test can set */

/* What the fake was asked to do since the last reset. */
struct fake_counts {
	int boots;
	int boot_failures;
	int destroys; /* orch_destroy calls, for any id */
	int forward_adds;
	int forward_removes;
	int lists; /* orch_list calls */
	int kills; /* commands stopped through agent_run */
	int netguard_checks;
	int migrations;       /* orch_migrate calls that moved a VM */
	int pauses;           /* orch_pause calls that saved a VM */
	int resumes;          /* orch_resume calls that restored one */
	int snapshots;        /* orch_snapshot calls that kept one */
	int snapshot_deletes; /* snapshots whose files went */
	int forks;            /* VMs started from a snapshot */
	int identities;       /* guest_new_identity calls */
};

/* One VM as the test sees it. */
struct fake_vm_info {
	int live;
	int vcpus;
	int memory_mib;
	enum vm_net net;
	int boots;
	int destroys;
	int paused;   /* out of reach (orch_detach) */
	int saved;    /* its memory saved, no domain (orch_pause) */
	int forwards; /* forwards in place */
	char host[512];
};

/* Forgets every VM and file and restores the defaults (ready, network
 * isolation in place, boots succeed). */
void fake_vmm_reset(void);
struct fake_counts fake_vmm_counts(void);
/* Waits until sandbox id's VM has been destroyed (a destroy's teardown
 * runs after its answer); -1 after timeout_ms. */
int fake_vm_wait_destroyed(const char *id, int timeout_ms);

/* A host's capacity as orch_host_stats reports it (0: the defaults, 64
 * GiB and 64 CPUs) and whether it answers; -1 for an unknown host. */
int fake_host_set(const char *uri, long long memory_mib, int vcpus, int unreachable);

/* What orch_net_rule_hash answers. */
#define FAKE_NET_RULE_HASH "00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee"

/* What the last orch_host_set_spare said (1 room, 0 none), then forgets
 * it; -1 when nothing was said since. */
int fake_spare_said(void);

/* Make the next `n` moves (orch_migrate) fail; the VM stays put. A move
 * that succeeds reports this pause. */
#define FAKE_MOVE_PAUSE_MS 42
void fake_migrate_fail(int n);

/* Make the next `n` boots fail (the row then fails and is refunded). */
void fake_vmm_fail_boots(int n);
/* The next n orch_detach calls fail. */
void fake_vmm_fail_detaches(int n);
/* The next n orch_pause / orch_resume calls fail; the VM stays as it was. */
void fake_vmm_fail_pauses(int n);
void fake_vmm_fail_resumes(int n);
/* The next n orch_snapshot calls fail before the save; the VM runs on. */
void fake_vmm_fail_snapshots(int n);
/* What orch_image_id answers. */
#define FAKE_IMAGE_ID "fake-image"
/* 1 (default): guest_run_wait gives a command's output to its sink at the
 * end, one chunk per stream; 0: never, as a transport that does not stream. */
void fake_vmm_set_sink(int on);
/* The host isolation rule: 1 in place (default), 0 missing. */
void fake_vmm_set_netguard(int ok);
/* What guest_listen_probe answers from now on (GUEST_LISTEN_*, default
 * NONE); -1: the guest cannot be asked. */
void fake_vmm_set_listen(int state);
/* 0 when the orchestrator is not ready (no image, no hypervisor). */
void fake_vmm_set_ready(int ready);

/* Called by orch_forward_add once a forward is in place (NULL: nothing),
 * so a test can act in that moment as a concurrent request would. */
typedef void (*fake_forward_fn)(void *ctx, const char *id, int guest_port);
void fake_vmm_on_forward(fake_forward_fn fn, void *ctx);

/* 0 and `out` for a VM the fake has seen (live or not), -1 otherwise. */
int fake_vm_info(const char *id, struct fake_vm_info *out);
/* The VM stops without anyone asking (crash, power-off from inside):
 * orch_list no longer shows it and every guest call fails. */
int fake_vm_lose(const char *id);
/* The same, by the host's kernel for going over its memory limit
 * (orch_vm_out_of_memory then says so, once). */
int fake_vm_lose_oom(const char *id);
/* What the VM's console ends with from now on (orch_console_tail), e.g.
 * the guest kernel's last words; -1 for an unknown VM. */
int fake_vm_set_console(const char *id, const char *text);
/* From now on the VM's guest agent has broken the protocol for `why`:
 * every guest call fails as vm_agent_get then does, and orch_agent_fault
 * says so (-1 for an unknown VM). */
int fake_vm_set_agent_fault(const char *id, const char *why);
/* A running domain of this service with no row behind it (left over by
 * an earlier run) on the first host. */
int fake_vm_add_orphan(const char *id);
/* The host port of a forward to `guest_port`, or -1 when there is none. */
int fake_vm_forward(const char *id, int guest_port);

/* Copies a guest file into `out` (at most n bytes): its length, or -1
 * when it does not exist. `mode` (may be NULL) gets its permission bits. */
long long fake_file_get(const char *id, const char *path, unsigned char *out, size_t n,
    unsigned *mode);
/* Puts a file straight into a VM (no service involved). */
int fake_file_put(const char *id, const char *path, const void *data, size_t len, unsigned mode);

#endif
