/* vm.h - one libvirt connection per hypervisor host (vm.c), and the
 * domain operations the orchestrator needs (vm_): start, look and stop
 * (vm_domain.c), serial consoles (vm_console.c), live moves
 * (vm_migrate.c). */
#ifndef AAS_VM_H
#define AAS_VM_H

#include <stddef.h>
#include <stdint.h>

#include <libvirt/libvirt.h>

#include "base/err.h"
#include "vmm/vm_xml.h"

struct vm_host;

struct vm_stats {
	int running;
	unsigned long long cpu_time_ns;
	unsigned long memory_kib; /* guest memory in use */
	unsigned long max_memory_kib;
	unsigned long long rss_kib; /* QEMU's resident memory on the host */
};

/* Starts libvirt's default event loop in its own thread; once per
 * process, before the first vm_host_open. libvirt's own log (warnings and
 * up) goes to `log_path` (NULL: nowhere); errors reach callers as struct
 * err in any case. */
int vm_events_start(const char *log_path, struct err *e) AAS_MUST_CHECK;
void vm_events_stop(void);

/* Threads and processes one VM's QEMU may have (RLIMIT_NPROC, qemu.conf's
 * max_processes): counted per user, and every VM has its own. */
#define VM_MAX_PROCESSES 256

/* Opens a host. For qemu:///embed URIs the embedded root's qemu.conf is
 * written first (no daemon is involved): libvirt's probes run as
 * `qemu_user`, each domain as the user its spec names, and libvirt leaves
 * file ownership alone (the orchestrator hands each VM's files to its
 * user itself). */
struct vm_host *vm_host_open(const char *uri, const char *qemu_user, struct err *e);
void vm_host_close(struct vm_host *h);
/* Opens `uri` once and closes it again: 0 with the hypervisor's name and
 * version in `info`, or -1 with libvirt's reason. */
int vm_host_probe(const char *uri, char *info, size_t n, struct err *e) AAS_MUST_CHECK;
const char *vm_host_uri(const struct vm_host *h);
virConnectPtr vm_host_conn(struct vm_host *h);

/* Starts a transient domain from the spec. With spec->console_log, the
 * serial console is copied into that file, at most spec->console_max
 * bytes of it (the newest, see conlog.h), from the first byte on. */
int vm_start(struct vm_host *h, const struct vm_spec *spec, struct err *e) AAS_MUST_CHECK;
/* Copies a running domain's serial console into `path` (at most `max`
 * bytes) unless it is being copied already: for domains found again after
 * a restart. The copy runs on libvirt's event thread, as fast as the guest
 * writes, and ends when the domain does. */
int vm_console_attach(struct vm_host *h, const char *name, const char *path, size_t max,
    struct err *e) AAS_MUST_CHECK;
/* Stops copying a domain's console and closes its log (the file stays).
 * No operation when it is not being copied. */
void vm_console_detach(struct vm_host *h, const char *name);
/* Destroys a domain; one that does not exist counts as destroyed. */
int vm_destroy(struct vm_host *h, const char *name, struct err *e) AAS_MUST_CHECK;
/* 1 when a domain of that name is running, 0 when not, -1 on error. */
int vm_exists(struct vm_host *h, const char *name, struct err *e) AAS_MUST_CHECK;
/* Names of running domains starting with `prefix` (malloc'd array of
 * malloc'd strings; free with vm_names_free). */
int vm_list(struct vm_host *h, const char *prefix, char ***names, size_t *n,
    struct err *e) AAS_MUST_CHECK;
void vm_names_free(char **names, size_t n);
/* One human-monitor command (e.g. hostfwd_add); QEMU's answer, empty on
 * success for most commands, is copied to reply (truncated to rn). */
int vm_monitor_hmp(struct vm_host *h, const char *name, const char *cmd, char *reply, size_t rn,
    struct err *e) AAS_MUST_CHECK;
int vm_stats(struct vm_host *h, const char *name, struct vm_stats *out,
    struct err *e) AAS_MUST_CHECK;

/* Live-migrates running domain `name` from src to dst. src's libvirt
 * connects to dst by dst's URI (hosts reach each other's libvirt by the
 * URIs aasd uses), and the memory goes through that connection. With
 * `shared_storage` the disk files are the same on both (one machine, or a
 * shared file system) and are not copied; without, they are copied to
 * files dst must already have. The unix sockets of the domain's
 * channels in `socket_dir` get the file names `socket_base`.<suffix> on
 * dst (the suffixes kept). *pause_ms: how long the guest was paused at
 * the switch (-1: not known). The domain runs on at src when the move
 * fails. */
int vm_migrate(struct vm_host *src, struct vm_host *dst, const char *name, int shared_storage,
    const char *socket_dir, const char *socket_base, long long *pause_ms,
    struct err *e) AAS_MUST_CHECK;

/* Pauses a running domain (QEMU flushes its disks as it stops), and lets
 * it run again. */
int vm_suspend(struct vm_host *h, const char *name, struct err *e) AAS_MUST_CHECK;
int vm_resume(struct vm_host *h, const char *name, struct err *e) AAS_MUST_CHECK;
/* Resumes `name` if it is paused (a job an earlier aasd left half done can
 * leave it so); 0 when it runs. */
int vm_unpause(struct vm_host *h, const char *name, struct err *e) AAS_MUST_CHECK;
/* Saves a running domain's memory and device state into `path` (a file
 * on the host, left owned by aasd's user, mode 0600) and ends the domain.
 * With the remote driver `path` is on the daemon's machine and its owner
 * is libvirtd's. */
int vm_save(struct vm_host *h, const char *name, const char *path, struct err *e) AAS_MUST_CHECK;
/* Starts domain `name` again from such a file, running, as `kept` (aasd's
 * own domain XML for it, vm_xml_with_limit) describes: its user, devices,
 * disks and memory limit. The XML in the file is never used (a QEMU held
 * the file open for writing while it saved); libvirt refuses a file whose
 * machine does not match `kept`. */
int vm_restore(struct vm_host *h, const char *name, const char *path, const char *kept,
    struct err *e) AAS_MUST_CHECK;

#endif
