/* vm_int.h - what the vm module's pieces share (vm.c: the event loop and
 * host connections; vm_console.c: serial consoles; vm_domain.c: domain
 * operations; vm_migrate.c: live moves). Not for use outside them. */
#ifndef AAS_VM_INT_H
#define AAS_VM_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include <libvirt/libvirt.h>

#include "base/err.h"
#include "vmm/vm.h"

struct vm_console;

struct vm_host {
	char *uri;
	virConnectPtr conn;
	pthread_mutex_t lock;
	/* Set by libvirt's close callback, on the event thread, which never
	 * waits for `lock` (a reconnect holds it). */
	atomic_int closed;
	/* Under `lock`: when to try the next reconnect and the wait after
	 * that one (a dead host costs each call a failed connect at most once
	 * per backoff). */
	long long retry_at_ms;
	int backoff_ms;
	/* Consoles: con_lock guards the list and every entry's fields;
	 * attach_lock makes find-or-open one step per host. */
	pthread_mutex_t con_lock;
	pthread_mutex_t attach_lock;
	struct vm_console *consoles;
	int con_timer; /* resumes paused consoles; -1: none (no pausing) */
};

/* libvirt's last error message (a generic one when it has none). */
const char *vm_last_error(void);
/* h's connection (vm_host_conn), or NULL with ERR_UNAVAILABLE. */
virConnectPtr vm_conn_or_err(struct vm_host *h, struct err *e);
/* Domain `name` on h, or NULL with e set: ERR_UNAVAILABLE when h is
 * unreachable, ERR_NOT_FOUND "VM <name> is not running" (" on <uri>" with
 * `on_uri`) when it is not there. The domain holds its connection:
 * virDomainFree lets go of both. */
virDomainPtr vm_domain_get(struct vm_host *h, const char *name, int on_uri, struct err *e);
/* Sets the memory cgroup limit of domain d's QEMU (see vm_domain.c). */
int vm_set_memory_limit_kib(virDomainPtr d, unsigned long long kib, const char *name,
    struct err *e) AAS_MUST_CHECK;

/* Readies h's console list and its timer (vm_host_open). */
void vm_console_host_init(struct vm_host *h);
/* Stops copying every console of h and frees what vm_console_host_init
 * readied (vm_host_close). */
void vm_console_host_end(struct vm_host *h);
/* Copies the console of domain d into `path` unless it is being copied
 * already (vm_console_attach, for a domain in hand). */
int vm_console_attach_domain(struct vm_host *h, virDomainPtr d, const char *name, const char *path,
    size_t max, struct err *e) AAS_MUST_CHECK;

#endif
