/* vm_agent.h - the aas-agent connection of each running domain
 * (vm_agent_): opened on first use, shared by every call on that domain,
 * reopened when its stream closed (aasd or the agent restarted), never
 * when the guest broke the protocol: that sandbox has to end. */
#ifndef AAS_VM_AGENT_H
#define AAS_VM_AGENT_H

#include <stddef.h>

#include "base/err.h"
#include "vmm/achan.h"
#include "vmm/vm.h"

/* Most domains with an open connection in one process. */
#define VM_AGENT_MAX 4096

/* A reference to domain `name`'s connection (achan_free it when done),
 * opening it when there is none. NULL with e set: ERR_NOT_FOUND when the
 * domain is gone, ERR_UNAVAILABLE (with the reason) when its guest broke
 * the protocol or the stream cannot be opened. */
struct achan *vm_agent_get(struct vm_host *h, const char *name, struct err *e);
/* Closes and forgets domain `name`'s connection (it was destroyed). */
void vm_agent_forget(struct vm_host *h, const char *name);
/* Why the guest of domain `name` lost its agent connection for good
 * ("" when it did not): the reason a sandbox ends with. */
int vm_agent_fault(struct vm_host *h, const char *name, char *why, size_t n);
/* Closes every connection of host h (before the host is closed). */
void vm_agent_forget_host(struct vm_host *h);

#endif
