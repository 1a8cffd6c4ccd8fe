/* vm_console.c - each domain's serial console copied into its bounded log
 * (conlog.h) from libvirt's event thread (vm.h: vm_console_attach). */
#include "vmm/vm.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "vmm/conlog.h"
#include "vmm/vm_int.h"

/* Bytes read from one console per wake-up of the event loop, so that one
 * flooding guest cannot keep it from the others (the rest is read on the
 * next round). */
#define VM_CONSOLE_BURST (256 * 1024)
#define VM_CONSOLE_CHUNK (16 * 1024)
/* After each read a console is not looked at for this long, so a guest
 * writing a byte at a time costs aasd at most 1000/VM_CONSOLE_PAUSE_MS
 * wake-ups a second; meanwhile its bytes wait in the pty (QEMU drops what
 * does not fit). */
#define VM_CONSOLE_PAUSE_MS 50
#define VM_CONSOLE_EVENTS \
	(VIR_STREAM_EVENT_READABLE | VIR_STREAM_EVENT_ERROR | VIR_STREAM_EVENT_HANGUP)

/* A domain's serial console being copied into its bounded log. */
struct vm_console {
	struct vm_console *next;
	char *name;
	virStreamPtr st;
	struct conlog *log;
	int ended;  /* the stream ended (the domain went); nothing more comes */
	int warned; /* a write failure was logged */
	int paused; /* not watched until the host's console timer fires */
};

/* The host's console timer: watches every paused console again. */
static void
console_resume(int timer, void *opaque)
{
	struct vm_host *h = opaque;

	pthread_mutex_lock(&h->con_lock);
	for (struct vm_console *c = h->consoles; c; c = c->next)
		if (c->paused && !c->ended) {
			virStreamEventUpdateCallback(c->st, VM_CONSOLE_EVENTS);
			c->paused = 0;
		}
	virEventUpdateTimeout(timer, -1);
	pthread_mutex_unlock(&h->con_lock);
}

/* The entry of `name` (con_lock held), or NULL. */
static struct vm_console *
console_find(struct vm_host *h, const char *name)
{
	for (struct vm_console *c = h->consoles; c; c = c->next)
		if (strcmp(c->name, name) == 0)
			return c;
	return NULL;
}

/* Runs on libvirt's event thread when a console has bytes or ended. The
 * entry is looked up by its stream under con_lock: one detached in the
 * meantime is simply not found. */
static void
console_event(virStreamPtr st, int events, void *opaque)
{
	struct vm_host *h = opaque;
	struct vm_console *c;
	char buf[VM_CONSOLE_CHUNK];
	int end = (events & (VIR_STREAM_EVENT_ERROR | VIR_STREAM_EVENT_HANGUP)) != 0;

	pthread_mutex_lock(&h->con_lock);
	for (c = h->consoles; c && c->st != st; c = c->next)
		;
	if (c == NULL || c->ended)
		goto out;
	for (size_t got = 0; got < VM_CONSOLE_BURST;) {
		int r = virStreamRecv(st, buf, sizeof(buf));
		struct err e;

		if (r == -2)
			break; /* drained */
		if (r <= 0) {
			end = 1;
			break;
		}
		got += (size_t)r;
		err_clear(&e);
		if (conlog_append(c->log, buf, (size_t)r, &e) < 0 && !c->warned) {
			log_warn("vm %s: %s (console output is dropped)", c->name, e.msg);
			c->warned = 1;
		}
	}
	if (end) {
		c->ended = 1;
		virStreamEventRemoveCallback(st);
	} else if (h->con_timer >= 0 && virStreamEventUpdateCallback(st, 0) == 0) {
		c->paused = 1;
		virEventUpdateTimeout(h->con_timer, VM_CONSOLE_PAUSE_MS);
	}
out:
	pthread_mutex_unlock(&h->con_lock);
}

static void
console_free(struct vm_console *c)
{
	if (c == NULL)
		return;
	if (c->st) {
		virStreamAbort(c->st);
		virStreamFree(c->st);
	}
	conlog_close(c->log);
	free(c->name);
	free(c);
}

/* Opens domain d's console and starts copying it (attach_lock held). */
static int
console_open(struct vm_host *h, virDomainPtr d, const char *name, const char *path, size_t max,
    struct err *e)
{
	struct vm_console *c = calloc(1, sizeof(*c));
	virConnectPtr conn = virDomainGetConnect(d);

	if (c == NULL || (c->name = strdup(name)) == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto fail;
	}
	c->st = virStreamNew(conn, VIR_STREAM_NONBLOCK);
	/* Never taken from another client: several aasd share a host, and the
	 * first to attach keeps the console (a stream stolen back and forth
	 * left an abort waiting on the daemon forever). A client that went
	 * away has released it. */
	if (c->st == NULL || virDomainOpenConsole(d, NULL, c->st, 0) < 0) {
		err_set(e, ERR_UNAVAILABLE, "console of %s: %s", name, vm_last_error());
		goto fail;
	}
	c->log = conlog_open(path, max, e);
	if (c->log == NULL)
		goto fail;
	pthread_mutex_lock(&h->con_lock);
	c->next = h->consoles;
	h->consoles = c;
	pthread_mutex_unlock(&h->con_lock);
	if (virStreamEventAddCallback(c->st, VM_CONSOLE_EVENTS, console_event, h, NULL) < 0) {
		err_set(e, ERR_UNAVAILABLE, "console of %s: %s", name, vm_last_error());
		vm_console_detach(h, name);
		return -1;
	}
	return 0;
fail:
	console_free(c);
	return -1;
}

/* Attaches the console of domain d unless it is already being copied. */
int
vm_console_attach_domain(struct vm_host *h, virDomainPtr d, const char *name, const char *path,
    size_t max, struct err *e)
{
	struct vm_console *c;
	int rc = 0;

	pthread_mutex_lock(&h->attach_lock);
	pthread_mutex_lock(&h->con_lock);
	c = console_find(h, name);
	int live = c && !c->ended;
	pthread_mutex_unlock(&h->con_lock);
	if (!live) {
		if (c)
			vm_console_detach(h, name);
		rc = console_open(h, d, name, path, max, e);
	}
	pthread_mutex_unlock(&h->attach_lock);
	return rc;
}

int
vm_console_attach(struct vm_host *h, const char *name, const char *path, size_t max, struct err *e)
{
	virDomainPtr d;
	int rc;

	pthread_mutex_lock(&h->con_lock);
	struct vm_console *cur = console_find(h, name);
	int live = cur && !cur->ended;
	pthread_mutex_unlock(&h->con_lock);
	if (live)
		return 0;
	if ((d = vm_domain_get(h, name, 0, e)) == NULL)
		return -1;
	rc = vm_console_attach_domain(h, d, name, path, max, e);
	virDomainFree(d);
	return rc;
}

void
vm_console_detach(struct vm_host *h, const char *name)
{
	struct vm_console **pp, *c = NULL;

	pthread_mutex_lock(&h->con_lock);
	for (pp = &h->consoles; *pp; pp = &(*pp)->next)
		if (strcmp((*pp)->name, name) == 0) {
			c = *pp;
			*pp = c->next;
			break;
		}
	pthread_mutex_unlock(&h->con_lock);
	if (c == NULL)
		return;
	if (!c->ended)
		virStreamEventRemoveCallback(c->st);
	console_free(c);
}

void
vm_console_host_init(struct vm_host *h)
{
	pthread_mutex_init(&h->con_lock, NULL);
	pthread_mutex_init(&h->attach_lock, NULL);
	h->con_timer = virEventAddTimeout(-1, console_resume, h, NULL);
}

void
vm_console_host_end(struct vm_host *h)
{
	while (h->consoles)
		vm_console_detach(h, h->consoles->name);
	if (h->con_timer >= 0)
		virEventRemoveTimeout(h->con_timer);
	pthread_mutex_destroy(&h->con_lock);
	pthread_mutex_destroy(&h->attach_lock);
}
