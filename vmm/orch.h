/* orch.h - the VM orchestrator (orch_): hosts, guest image, accelerator
 * choice, and the life of one VM: overlay disk, start, wait for the guest
 * agent, destroy. It knows nothing of accounts or billing. */
#ifndef AAS_ORCH_H
#define AAS_ORCH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/err.h"
#include "vmm/vm.h"

#define ORCH_DOMAIN_PREFIX "aas-"
/* Kernel command line of every sandbox VM. */
#define ORCH_CMDLINE "console=ttyS0 root=/dev/vda rw quiet panic=-1"

/* Longest directory path or host list it takes (longer ones are refused). */
#define ORCH_PATH_MAX 512
#define ORCH_URI_LIST_MAX 512
#define ORCH_USER_MAX 64

/* How the accelerator is chosen. */
enum orch_virt {
	ORCH_VIRT_AUTO, /* KVM when a probe guest boots with it, else TCG */
	ORCH_VIRT_KVM,
	ORCH_VIRT_TCG,
};

/* What the orchestrator needs; orch_new copies it. */
struct orch_config {
	const char *libvirt_uri; /* comma-separated libvirt URIs, one per host */
	enum orch_virt virt;
	const char *image_dir;         /* vmlinuz, initrd.img, base.qcow2 */
	const char *state_dir;         /* vms/ (overlays, consoles) and log/ go here */
	const char *qemu_user;         /* libvirt's QEMU probes run as this user */
	uint32_t vm_uid_first;         /* each VM's QEMU runs as a user of its own */
	uint32_t vm_uid_count;         /* from these (uidpool.h) */
	int tb_cache_mib;              /* TCG translation cache; 0: QEMU's default */
	int memory_overhead_mib;       /* QEMU's host memory beyond the guest's;
	                                * 0: ORCH_OVERHEAD_TCG_MIB or _KVM_ */
	int boot_timeout_s;            /* start to first guest-agent answer */
	int kvm_probe_timeout_s;       /* the same for the KVM probe guest (auto) */
	const char *net_allow;         /* private ranges guests may reach (netguard.h) */
	const char *netguard_status;   /* the rule watcher's status file (netguard_status.h) */
	size_t console_max_bytes;      /* a VM's console kept on the host (conlog.h) */
	const char *guest_kernel_args; /* appended to new VMs' command line (tests) */
	int bench_port;                /* add VM_BENCH_PORT_NAME to new domains */
	int boot_snapshots;            /* start VMs from booted snapshots (orch_boot) */
};

/* Host memory a VM's QEMU may use beyond its guest memory, by default:
 * under TCG QEMU's translation cache (1 GiB at most by default) and QEMU
 * itself; under KVM QEMU itself. */
#define ORCH_OVERHEAD_TCG_MIB 1280 /* with QEMU's own translation cache size */
#define ORCH_OVERHEAD_KVM_MIB 256  /* QEMU itself; also beyond a set TCG cache */

/* Longest extra kernel command line (base/config.c checks its words). */
#define ORCH_EXTRA_ARGS_MAX 256

/* Console bound when the configuration gives none in range. */
#define ORCH_CONSOLE_DEFAULT (1u << 20)

struct orch;

typedef void (*orch_progress_fn)(void *ctx, double progress, double total, const char *message);

/* Opens every host and starts choosing the accelerator in the background
 * (a probe boot under ORCH_VIRT_AUTO takes seconds). */
struct orch *orch_new(const struct orch_config *cfg, struct err *e);
void orch_free(struct orch *o);

/* Waits up to timeout_ms for start-up to finish. 0 when VMs can be made;
 * -1 with the reason (no image, no hypervisor) otherwise. */
int orch_wait_ready(struct orch *o, int timeout_ms, struct err *e) AAS_MUST_CHECK;
/* "kvm", "tcg", or NULL while undecided. */
const char *orch_accel(struct orch *o);
/* Why KVM is not used (empty when it is). */
const char *orch_accel_reason(struct orch *o);
size_t orch_host_count(struct orch *o);

/* How VMs are confined, for /healthz: each VM's QEMU runs as its own user
 * from the range; `secmodels` names libvirt's security drivers on the
 * first host ("dac"; "apparmor,dac" where a MAC profile is applied too;
 * empty until start-up is over). */
#define ORCH_SECMODELS_MAX 64
struct orch_confinement {
	uint32_t vm_uid_first, vm_uid_count;
	char secmodels[ORCH_SECMODELS_MAX];
};
void orch_confinement(struct orch *o, struct orch_confinement *out);
const char *orch_host_uri_at(struct orch *o, size_t i);
struct vm_host *orch_host_by_uri(struct orch *o, const char *uri);

/* Opens `uri` as one more host (at most ORCH_MAX_HOSTS); 0 when it is
 * open, already or now. Hosts are never closed before orch_free. */
#define ORCH_MAX_HOSTS 16
int orch_host_add(struct orch *o, const char *uri, struct err *e) AAS_MUST_CHECK;
/* 1 for a URI only one process can use (libvirt's embedded and test
 * drivers): such a host is never opened by an aasd it was not given to. */
int orch_uri_private(const char *uri);

/* A host's capacity and live use, as libvirt reports them. */
struct orch_host_stats {
	long long memory_mib;
	int vcpus;
	long long free_memory_mib; /* -1: unknown */
	double cpu_busy;           /* 0..1 since the previous call; -1: unknown */
	long long disk_free_mib;   /* where overlays live (a pooled host: its pool); -1: unknown */
	int domains;               /* running domains, aas's or not */
};
int orch_host_stats(struct orch *o, const char *uri, struct orch_host_stats *out,
    struct err *e) AAS_MUST_CHECK;

/* How orch_boot started a VM. */
enum orch_booted {
	ORCH_BOOTED_COLD,     /* its kernel booted */
	ORCH_BOOTED_SNAPSHOT, /* restored from the image's booted snapshot */
};
/* Booted snapshots: $state/saved/<prefix><image>-<settings>.save and
 * .qcow2, one per image, VM shape, network mode and guest command line. */
#define ORCH_BOOT_SNAP_PREFIX "boot-"

/* Creates the overlay, starts the domain ORCH_DOMAIN_PREFIX<id> on `uri`
 * and waits for its guest agent. Reports progress through fn. With
 * boot_snapshots, a host whose files aasd sees starts it from the booted
 * snapshot of the same image and settings when there is one (with a fresh
 * identity, guest_new_identity), else boots it cold and makes that
 * snapshot in the background (one at a time) for the next. *how (when not
 * NULL) says which. */
int orch_boot(struct orch *o, const char *uri, const char *id, enum vm_net net, int vcpus,
    int memory_mib, orch_progress_fn fn, void *ctx, enum orch_booted *how,
    struct err *e) AAS_MUST_CHECK;
/* Adds a forward from <address>:<host_port> on the VM's host (a free
 * port, chosen here) to guest_port inside the VM. `address`: an IPv4
 * address of that host the gateway reaches (its private address); NULL or
 * "" for ORCH_FORWARD_LOOPBACK. */
#define ORCH_FORWARD_LOOPBACK "127.0.0.1"
int orch_forward_add(struct orch *o, const char *uri, const char *id, const char *address,
    int guest_port, int *host_port, struct err *e) AAS_MUST_CHECK;
int orch_forward_remove(struct orch *o, const char *uri, const char *id, const char *address,
    int host_port, struct err *e) AAS_MUST_CHECK;
/* Whether host `uri` keeps the image and the overlays in its own storage
 * pool (vpool.h) instead of seeing aasd's files (the default for a host
 * not on this machine). */
void orch_host_set_pooled(struct orch *o, const char *uri, int pooled);
/* Whether host `uri` has room, beyond the service's reservations, for one
 * more VM of the size about to boot there (the default until told): the
 * throw-away VM that makes the image's booted state is reserved nowhere,
 * so it starts only then. */
void orch_host_set_spare(struct orch *o, const char *uri, int spare);
/* 1 when `uri` names a libvirt on this machine (qemu:///..., a unix
 * socket): such hosts see this machine's files. */
int orch_uri_this_machine(const char *uri);
/* Live-migrates sandbox `id`'s VM from host `from` to host `to` (see
 * vm_migrate). Its console copy and agent connection follow; forwards do
 * not (the caller adds them on the new host). *pause_ms: how long the
 * guest was paused (-1: not known). On failure the VM runs on where it
 * was. */
int orch_migrate(struct orch *o, const char *from, const char *to, const char *id,
    long long *pause_ms, struct err *e) AAS_MUST_CHECK;
/* Destroys the domain and deletes its overlay and console log. Idempotent. */
int orch_destroy(struct orch *o, const char *uri, const char *id, struct err *e) AAS_MUST_CHECK;
/* Puts a VM out of reach before orch_destroy: its agent and console
 * streams close and its vCPUs stop (its memory stays until the destroy).
 * A VM that does not run counts as done. */
int orch_detach(struct orch *o, const char *uri, const char *id, struct err *e) AAS_MUST_CHECK;
/* Pause: the VM's memory and device state go to $state/saved/<id>.save
 * (a directory only aasd's user can write: libvirt starts the domain the
 * file describes) and the domain ends (its host memory is free; its disk,
 * user and directory stay). *bytes: the file's size. On failure the VM
 * runs on. Not on a host with its own storage pool (ERR_UNAVAILABLE). */
#define ORCH_SAVE_SUFFIX ".save"
int orch_pause(struct orch *o, const char *uri, const char *id, long long *bytes,
    struct err *e) AAS_MUST_CHECK;
/* Resume: the domain starts again from that file, on the same host,
 * processes and open files as they were; its console copy goes on and the
 * file goes. Its clock (guest_set_clock) and forwards are the caller's. */
int orch_resume(struct orch *o, const char *uri, const char *id, struct err *e) AAS_MUST_CHECK;
/* After a save that stopped half-way (its aasd did): the VM's vCPUs run
 * again and the partial file goes. */
int orch_continue(struct orch *o, const char *uri, const char *id, struct err *e) AAS_MUST_CHECK;
/* 1 when VM `id`, whose domain does not run, has a complete saved state
 * (a pause that finished, whether or not its aasd lived to say so). */
int orch_saved(struct orch *o, const char *id);
/* What names the guest image VMs start from (its recipe hash): a snapshot
 * taken from another image cannot start (its disk is an overlay on it). */
#define ORCH_IMAGE_ID_MAX 80
const char *orch_image_id(struct orch *o);
/* Snapshot `snap` of VM `id`: its memory and device state and a copy of
 * its disk, taken while the domain is stopped, kept in aasd's saved
 * directory as <snap>.save and <snap>.qcow2; the VM then runs on from
 * that state on a new QEMU (its clock and forwards are the caller's).
 * *bytes: the two files' size. *restarted: 1 once the VM runs on a new
 * QEMU (its forwards are gone), also when the snapshot failed after its
 * save. On failure no snapshot file is left unless the restore failed (the
 * VM is lost, orch_vm_exists tells, and a whole snapshot stays). */
int orch_snapshot(struct orch *o, const char *uri, const char *id, const char *snap,
    long long *bytes, int *restarted, struct err *e) AAS_MUST_CHECK;
/* After a snapshot whose aasd stopped: the VM runs again (*restarted: on a
 * new QEMU) and *kept says whether the snapshot is whole (else its files
 * are gone). ERR_NOT_FOUND when the VM ended with no saved state. */
int orch_snapshot_recover(struct orch *o, const char *uri, const char *id, const char *snap,
    int *kept, int *restarted, struct err *e) AAS_MUST_CHECK;
/* 1 when both files of snapshot `snap` are there (*bytes: their size). */
int orch_snapshot_whole(struct orch *o, const char *snap, long long *bytes);
void orch_snapshot_delete(struct orch *o, const char *snap);
/* A new VM `id` on `uri` from snapshot `snap`: a copy of its disk, its
 * memory restored into a domain of its own (name, UUID, generation ID,
 * user, sockets), then its guest agent waited for. Its identity inside the
 * guest is the caller's (guest_new_identity). */
int orch_boot_snapshot(struct orch *o, const char *uri, const char *id, const char *snap,
    orch_progress_fn fn, void *ctx, struct err *e) AAS_MUST_CHECK;
#define ORCH_SWEEP_MAX 4096 /* VM directories looked at per sweep */
/* Removes the directories under $state/vms left by a VM that ended while
 * its aasd did (a crash in the middle of a teardown): those that
 * unowned(ctx, id) says belong to no live sandbox and whose domain runs on
 * none of the hosts (a host that cannot tell keeps them). Their users are
 * given back. Pooled hosts' overlay volumes are not looked for. */
void orch_sweep_dirs(struct orch *o, int (*unowned)(void *ctx, const char *id), void *ctx);
/* Ids (not domain names) of this service's running domains on `uri`;
 * free them with orch_ids_free. */
int orch_list(struct orch *o, const char *uri, char ***ids, size_t *n,
    struct err *e) AAS_MUST_CHECK;
void orch_ids_free(char **ids, size_t n);
/* 1 when sandbox `id`'s VM was stopped by the kernel for going over its
 * memory limit on the host (its size's memory plus the overhead), as seen
 * while it ran on this machine; 0 otherwise. Asked once its VM is gone. */
int orch_vm_out_of_memory(struct orch *o, const char *id);
/* 1 when sandbox `id`'s domain exists on `uri`, 0 when not, -1 on error. */
int orch_vm_exists(struct orch *o, const char *uri, const char *id, struct err *e) AAS_MUST_CHECK;
/* CPU, memory and host RSS of sandbox `id`'s domain. */
int orch_vm_stats(struct orch *o, const char *uri, const char *id, struct vm_stats *out,
    struct err *e) AAS_MUST_CHECK;
/* Checks the host isolation rule for the QEMU users and installs it when
 * it is missing or outdated (netguard). */
int orch_net_ensure(struct orch *o, struct err *e) AAS_MUST_CHECK;
/* 1 when the rule orch_net_ensure checks is the one in force for `uri`'s
 * QEMUs: a libvirt of this machine's own network (qemu:///...). */
int orch_uri_net_checked_here(const char *uri);
/* Hex SHA-256 of that rule's text (what `aasd --netguard-rules` prints):
 * a host whose operator recorded this hash has this very rule installed
 * (hosts.isolation_rule). */
int orch_net_rule_hash(struct orch *o, char *out, size_t n);
/* Last `max` bytes of the VM's serial console (malloc'd) or NULL. The
 * console is kept in $state/vms/<id>/console.log, at most
 * console_max_bytes of its newest output, until orch_destroy. */
char *orch_console_tail(struct orch *o, const char *id, size_t max);
/* 1 with the reason in `why` when the guest of sandbox `id` on `uri`
 * broke the agent protocol (its connection is failed for good and the
 * sandbox has to end), else 0. */
int orch_agent_fault(struct orch *o, const char *uri, const char *id, char *why, size_t n);
/* Path of the VM's overlay disk (for tests and diagnostics); -1 when it
 * does not fit n. */
int orch_disk_path(struct orch *o, const char *id, char *out, size_t n) AAS_MUST_CHECK;
/* The libvirt domain name of sandbox `id`: 0, or -1 when it does not fit
 * n (out is then "", which names no domain). */
int orch_domain_name(const char *id, char *out, size_t n);

#endif
