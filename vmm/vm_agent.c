/* vm_agent.c - one aas-agent connection per running domain. */
#include "vmm/vm_agent.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define VM_AGENT_NAME_MAX 128

struct entry {
	struct entry *next;
	struct vm_host *h;
	char name[VM_AGENT_NAME_MAX];
	struct achan *c;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct entry *entries;
static size_t n_entries;

static struct entry *
find(struct vm_host *h, const char *name)
{
	for (struct entry *x = entries; x; x = x->next)
		if (x->h == h && strcmp(x->name, name) == 0)
			return x;
	return NULL;
}

static void
unlink_entry(struct entry *x)
{
	for (struct entry **p = &entries; *p; p = &(*p)->next)
		if (*p == x) {
			*p = x->next;
			n_entries--;
			return;
		}
}

static struct achan *
open_agent(struct vm_host *h, const char *name, struct err *e)
{
	virConnectPtr conn = vm_host_conn(h);
	virDomainPtr d;
	struct achan *c;

	if (conn == NULL) {
		err_set(e, ERR_UNAVAILABLE, "hypervisor %s unreachable", vm_host_uri(h));
		return NULL;
	}
	d = virDomainLookupByName(conn, name);
	if (d == NULL) {
		err_set(e, ERR_NOT_FOUND, "the VM %s is gone", name);
		virConnectClose(conn);
		return NULL;
	}
	c = achan_open(conn, d, e);
	virDomainFree(d);
	virConnectClose(conn);
	return c;
}

struct achan *
vm_agent_get(struct vm_host *h, const char *name, struct err *e)
{
	struct entry *x;
	struct achan *c = NULL, *stale = NULL;
	char why[256];

	if (strlen(name) >= VM_AGENT_NAME_MAX) {
		err_set(e, ERR_INVALID, "domain name too long");
		return NULL;
	}
	/* Opening under the lock keeps one connection per domain; it is a
	 * local socket or one RPC, not a wait on the guest. */
	pthread_mutex_lock(&lock);
	x = find(h, name);
	if (x && achan_state(x->c) < 0) {
		if (achan_guest_at_fault(x->c)) {
			err_set(e, ERR_UNAVAILABLE, "the guest agent broke the protocol: %s",
			    achan_failure(x->c, why, sizeof(why)));
			goto out;
		}
		stale = x->c; /* the stream closed: open again */
		x->c = NULL;
	}
	if (x == NULL && n_entries >= VM_AGENT_MAX) {
		err_set(e, ERR_LIMIT, "too many agent connections (%d)", VM_AGENT_MAX);
		goto out;
	}
	if (x == NULL || x->c == NULL) {
		struct achan *fresh = open_agent(h, name, e);

		if (fresh == NULL) {
			if (x) {
				unlink_entry(x);
				free(x);
			}
			goto out;
		}
		if (x == NULL) {
			x = calloc(1, sizeof(*x));
			if (x == NULL) {
				achan_free(fresh);
				err_set(e, ERR_INTERNAL, "out of memory");
				goto out;
			}
			x->h = h;
			memcpy(x->name, name, strlen(name) + 1); /* fits: checked above */
			x->next = entries;
			entries = x;
			n_entries++;
		}
		x->c = fresh;
	}
	c = achan_ref(x->c);
out:
	pthread_mutex_unlock(&lock);
	achan_free(stale);
	return c;
}

int
vm_agent_fault(struct vm_host *h, const char *name, char *why, size_t n)
{
	struct entry *x;
	int fault = 0;

	if (n > 0)
		why[0] = '\0';
	pthread_mutex_lock(&lock);
	x = find(h, name);
	if (x && x->c && achan_state(x->c) < 0 && achan_guest_at_fault(x->c)) {
		achan_failure(x->c, why, n);
		fault = 1;
	}
	pthread_mutex_unlock(&lock);
	return fault;
}

void
vm_agent_forget(struct vm_host *h, const char *name)
{
	struct entry *x;

	pthread_mutex_lock(&lock);
	x = find(h, name);
	if (x)
		unlink_entry(x);
	pthread_mutex_unlock(&lock);
	if (x) {
		achan_close(x->c);
		achan_free(x->c);
		free(x);
	}
}

void
vm_agent_forget_host(struct vm_host *h)
{
	struct entry *gone = NULL;

	pthread_mutex_lock(&lock);
	for (struct entry **p = &entries; *p;) {
		struct entry *x = *p;

		if (x->h == h) {
			*p = x->next;
			n_entries--;
			x->next = gone;
			gone = x;
		} else {
			p = &x->next;
		}
	}
	pthread_mutex_unlock(&lock);
	while (gone) {
		struct entry *x = gone;

		gone = x->next;
		achan_close(x->c);
		achan_free(x->c);
		free(x);
	}
}
