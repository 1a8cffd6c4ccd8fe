/* orch_int.h - what the orchestrator's files share (orch.c: settings,
 * start-up and the isolation rule; orch_host.c: hosts; orch_files.c: each
 * VM's files and user; orch_vm.c: boots, forwards, moves, stops and
 * listings; orch_save.c: pauses, snapshots, forks and booted-image states;
 * orch_xml.c: the kept domain XML). Not for use outside vmm/orch*.c. */
#ifndef AAS_ORCH_INT_H
#define AAS_ORCH_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>

#include "base/config.h"
#include "vmm/netguard.h"
#include "vmm/orch.h"
#include "vmm/vpool.h"

struct uidpool;
struct oomwatch;

/* libvirt makes the VMs' channel sockets here (aasd's alone, 0700). */
#define ORCH_SOCKET_DIR "/run/aas-vm"
#define ORCH_SAVING_MAX 256 /* saves under way at once that are tracked */
#define ORCH_NAME_MAX 128   /* a domain name */

struct orch {
	/* From struct orch_config. */
	char libvirt_uri[ORCH_URI_LIST_MAX];
	char qemu_user[ORCH_USER_MAX];
	enum orch_virt virt;
	int boot_timeout_s;
	int kvm_probe_timeout_s;
	char net_allow[CONFIG_NET_ALLOW_MAX];
	char netguard_status[ORCH_PATH_MAX];
	size_t console_max;
	int bench_port;
	int memory_overhead_mib;
	int tb_cache_mib;
	char extra_args[ORCH_EXTRA_ARGS_MAX];

	/* Appended under `lock`, never removed before orch_free: a reader
	 * sees the first n_hosts entries complete. */
	struct vm_host *hosts[ORCH_MAX_HOSTS];
	_Atomic size_t n_hosts;
	struct orch_cpu_sample {
		unsigned long long idle, total;
	} cpu_prev[ORCH_MAX_HOSTS]; /* orch_host_stats' last reading, under cpu_lock */
	pthread_mutex_t cpu_lock;
	/* Hosts that keep the image and overlays in their own storage pool
	 * (vpool.h) rather than seeing aasd's files; set by the service from
	 * the host table. Their image volumes once checked, under pool_lock,
	 * which also makes one upload per host at a time. */
	atomic_int pooled[ORCH_MAX_HOSTS];
	atomic_int no_spare[ORCH_MAX_HOSTS]; /* orch_host_set_spare(0) was the last word */
	struct orch_pool {
		int ready;
		char kernel[VPOOL_PATH_MAX], initrd[VPOOL_PATH_MAX], base[VPOOL_PATH_MAX];
	} pools[ORCH_MAX_HOSTS];
	char sha_kernel[VPOOL_SHA256_HEX], sha_initrd[VPOOL_SHA256_HEX], sha_base[VPOOL_SHA256_HEX];
	int shas_known;
	pthread_mutex_t pool_lock;
	/* Domains being saved (a pause, a snapshot, a booted state): a
	 * domain listing does not copy their consoles again meanwhile. */
	pthread_mutex_t saving_lock;
	char saving[ORCH_SAVING_MAX][ORCH_NAME_MAX];
	char vms_dir[ORCH_PATH_MAX + 8];
	char saved_dir[ORCH_PATH_MAX + 8]; /* paused VMs' memory: aasd's alone */
	char image_id[ORCH_IMAGE_ID_MAX];  /* the image directory's own name */
	int boot_snapshots;                /* start VMs from booted-image snapshots */
	atomic_int building;               /* a booted-image snapshot is being made */
	pthread_t builder;
	atomic_int builder_started;
	char kernel[ORCH_PATH_MAX + 16], initrd[ORCH_PATH_MAX + 16], base[ORCH_PATH_MAX + 16];
	uid_t qemu_uid;       /* libvirt's probes' user, in the isolation rule */
	struct uidpool *uids; /* one user per VM */
	struct netguard_users users;
	struct oomwatch *oom; /* NULL: VMs stopped by their memory limit are not told apart */
	gid_t kvm_gid;        /* a KVM guest's QEMU group: /dev/kvm's */

	pthread_mutex_t lock;
	pthread_cond_t ready_cond;
	int ready; /* 1 ok, -1 failed, 0 still starting */
	struct err ready_err;
	enum vm_accel accel;
	char accel_reason[640];
	char secmodels[ORCH_SECMODELS_MAX]; /* libvirt's security drivers on the first host */
	pthread_t starter;
	int starter_started;
};

/* Boots VM `id` from its kernel and waits for its agent (cold). */
int orch_boot_with(struct orch *o, struct vm_host *h, const char *id, enum vm_accel accel,
    enum vm_net net, int vcpus, int mem, int timeout_ms, orch_progress_fn fn, void *ctx,
    struct err *e) AAS_MUST_CHECK;
/* The host and domain name of VM `id`, its agent channel and console
 * closed (a save or a destroy follows); NULL when the host is unknown. */
struct vm_host *orch_close_streams(struct orch *o, const char *uri, const char *id, char *name,
    size_t n, struct err *e);
/* The kernel command line of a new VM; -1 when it does not fit n. */
int orch_cmdline_for(const struct orch *o, enum vm_net net, char *out, size_t n) AAS_MUST_CHECK;
/* A VM's console log on this machine; -1 when it does not fit n. */
int orch_console_path(struct orch *o, const char *id, char *out, size_t n) AAS_MUST_CHECK;
/* Fills e (ERR_INVALID): a path or domain name of VM or snapshot `id`
 * did not fit. -1, to return. */
int orch_too_long(struct err *e, const char *id) AAS_FAILS;
/* 1 when `path` is a regular file. */
int orch_file_ok(const char *path);
/* The host of `uri`, or NULL with the error every operation reports. */
struct vm_host *orch_host_or_err(struct orch *o, const char *uri, struct err *e);
/* 1 when h keeps the image and overlays in its own storage pool. */
int orch_is_pooled(struct orch *o, const struct vm_host *h);
/* VM `id`'s directory, user and overlay disk over `from_disk` (the image's
 * when NULL), and where its console is kept. */
int orch_make_vm_files_from(struct orch *o, struct vm_host *h, const char *id, enum vm_accel accel,
    const char *from_disk, uid_t *uid, gid_t *gid, char *disk, size_t dn, char *console, size_t cn,
    struct err *e) AAS_MUST_CHECK;
/* Removes a VM's files, and its user once its domain is gone. */
void orch_remove_vm_files(struct orch *o, struct vm_host *h, const char *id, int vm_gone);
/* Where a paused VM's memory is kept (with ".new" while written); -1
 * when it does not fit n. */
int orch_save_path(struct orch *o, const char *id, const char *suffix, char *out,
    size_t n) AAS_MUST_CHECK;
/* Marks domain `name` as being saved (on) or no longer (off). */
void orch_saving_mark(struct orch *o, const char *name, int on);
/* Waits until the guest agent of domain `name` answers or `deadline` (ms). */
int orch_wait_agent(struct vm_host *h, const char *name, long long deadline,
    struct err *e) AAS_MUST_CHECK;
/* Domain `name` of VM `id` runs on h anew (a restore, a move): its console
 * is copied again into its file and its memory limit watched. */
void orch_follow(struct orch *o, struct vm_host *h, const char *id, const char *name,
    const char *after);
/* 1 unless the service said host h has no room for one more VM. */
int orch_host_spare(struct orch *o, const struct vm_host *h);
/* The index of host h in o->hosts, or -1. */
int orch_host_idx(struct orch *o, const struct vm_host *h);
/* The image's volumes on pooled host h (uploaded and checked the first
 * time), or NULL with e set. */
const struct orch_pool *orch_pool_ready(struct orch *o, struct vm_host *h, struct err *e);
/* VM `id`'s directory under $state/vms; -1 when it does not fit n. */
int orch_vm_dir(struct orch *o, const char *id, char *out, size_t n) AAS_MUST_CHECK;
/* Gives back the users of VMs whose directory and domain are both gone. */
void orch_sweep_users(struct orch *o);
/* The spec of domain `name` on h at this size: image, disk, console,
 * agent socket (in `agent`) and host resources; the caller sets its user,
 * network, command line and UUID. -1 when the socket's path does not fit
 * an. */
int orch_fill_spec(struct orch *o, struct vm_host *h, struct vm_spec *s, const char *name,
    enum vm_accel accel, int vcpus, int mem, const char *disk, const char *console, char *agent,
    size_t an) AAS_MUST_CHECK;
/* Drops booted-image states of other images (orch_new). */
void orch_drop_old_boot_snaps(struct orch *o);

#endif
