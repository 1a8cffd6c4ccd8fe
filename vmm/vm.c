/* vm.c - libvirt connections and domain operations. */
#include "vmm/vm.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <libvirt/libvirt-qemu.h>
#include <libvirt/virterror.h>

#include "base/clock.h"
#include "base/log.h"
#include "vmm/conlog.h"

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

static void console_resume(int timer, void *opaque);

static pthread_t event_thread;
static atomic_int events_running;
static atomic_int events_stop;
static int wake_timer = -1;

/* libvirt prints errors itself unless told otherwise; ours are reported
 * once, where they happen, through struct err. */
static void
quiet_errors(void *ud, virErrorPtr err)
{
	(void)ud;
	(void)err;
}

static const char *
last_error(void)
{
	virErrorPtr e = virGetLastError();

	return e && e->message ? e->message : "unknown libvirt error";
}

static void
wake(int timer, void *opaque)
{
	(void)timer;
	(void)opaque;
}

static void *
event_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&events_stop))
		if (virEventRunDefaultImpl() < 0)
			log_warn("vm: event loop: %s", last_error());
	return NULL;
}

int
vm_events_start(const char *log_path, struct err *e)
{
	char outputs[1100];

	if (atomic_load(&events_running))
		return 0;
	/* libvirt would print its log (agent "not connected" while a guest
	 * boots, "taint" notices) on our stderr; keep it in a file instead. */
	snprintf(outputs, sizeof(outputs), "3:file:%s", log_path ? log_path : "/dev/null");
	setenv("LIBVIRT_LOG_OUTPUTS", outputs, 0);
	virSetErrorFunc(NULL, quiet_errors);
	if (virEventRegisterDefaultImpl() < 0) {
		err_set(e, ERR_INTERNAL, "libvirt event loop: %s", last_error());
		return -1;
	}
	/* A periodic timer wakes the loop so that it sees the stop flag. */
	wake_timer = virEventAddTimeout(500, wake, NULL, NULL);
	if (pthread_create(&event_thread, NULL, event_main, NULL) != 0) {
		err_set(e, ERR_INTERNAL, "cannot start the libvirt event thread");
		return -1;
	}
	atomic_store(&events_running, 1);
	return 0;
}

void
vm_events_stop(void)
{
	if (!atomic_load(&events_running))
		return;
	atomic_store(&events_stop, 1);
	pthread_join(event_thread, NULL);
	if (wake_timer >= 0)
		virEventRemoveTimeout(wake_timer);
	atomic_store(&events_running, 0);
}

/* For the embedded driver: its root must exist and hold a qemu.conf that
 * makes it work without virtlogd. */
static int
prepare_embed_root(const char *uri, const char *qemu_user, struct err *e)
{
	const char *root = strstr(uri, "root=");
	char dir[1024], path[1100];
	size_t len;
	FILE *f;

	if (strncmp(uri, "qemu:///embed", 13) != 0)
		return 0;
	if (root == NULL || root[5] != '/') {
		err_set(e, ERR_INVALID,
		    "AAS_LIBVIRT_URI: qemu:///embed needs root=<absolute path>");
		return -1;
	}
	root += 5;
	len = strcspn(root, "&");
	if (len >= sizeof(dir)) {
		err_set(e, ERR_INVALID, "AAS_LIBVIRT_URI: root path too long");
		return -1;
	}
	memcpy(dir, root, len);
	dir[len] = '\0';
	snprintf(path, sizeof(path), "%s/etc", dir);
	if ((mkdir(dir, 0755) < 0 && errno != EEXIST) ||
	    (mkdir(path, 0755) < 0 && errno != EEXIST)) {
		err_set(e, ERR_INTERNAL, "cannot create %s: %s", path, strerror(errno));
		return -1;
	}
	snprintf(path, sizeof(path), "%s/etc/qemu.conf", dir);
	f = fopen(path, "w");
	if (f == NULL) {
		err_set(e, ERR_INTERNAL, "cannot write %s: %s", path, strerror(errno));
		return -1;
	}
	fprintf(f,
	    "# written by aasd at start; edits are overwritten\n"
	    "stdio_handler = \"file\"\n"
	    "user = \"%s\"\n"
	    "group = \"%s\"\n"
	    "dynamic_ownership = 0\n"
	    "remember_owner = 0\n"
	    "max_processes = %d\n",
	    qemu_user, qemu_user, VM_MAX_PROCESSES);
	if (fclose(f) != 0) {
		err_set(e, ERR_INTERNAL, "cannot write %s", path);
		return -1;
	}
	return 0;
}

#define VM_KEEPALIVE_S 5     /* a silent remote connection is probed this often */
#define VM_KEEPALIVE_COUNT 3 /* and given up after this many unanswered probes */
#define VM_BACKOFF_FIRST_MS 500
#define VM_BACKOFF_MAX_MS 30000

static void
conn_closed(virConnectPtr c, int reason, void *opaque)
{
	struct vm_host *h = opaque;

	(void)c;
	log_warn("vm: connection to %s closed (%s)", h->uri,
	    reason == VIR_CONNECT_CLOSE_REASON_KEEPALIVE ? "no keepalive answer" :
		reason == VIR_CONNECT_CLOSE_REASON_EOF   ? "end of file" :
		reason == VIR_CONNECT_CLOSE_REASON_ERROR ? "error" :
							   "client");
	atomic_store(&h->closed, 1);
}

/* Keepalive and the close callback on a new connection, where the driver
 * has them (a remote one; the embedded driver has neither). */
static void
watch_conn(struct vm_host *h, virConnectPtr c)
{
	if (virConnectSetKeepAlive(c, VM_KEEPALIVE_S, VM_KEEPALIVE_COUNT) < 0 ||
	    virConnectRegisterCloseCallback(c, conn_closed, h, NULL) < 0)
		virResetLastError();
}

struct vm_host *
vm_host_open(const char *uri, const char *qemu_user, struct err *e)
{
	struct vm_host *h;

	if (prepare_embed_root(uri, qemu_user, e) < 0)
		return NULL;
	h = calloc(1, sizeof(*h));
	if (h == NULL || (h->uri = strdup(uri)) == NULL) {
		free(h);
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&h->lock, NULL);
	pthread_mutex_init(&h->con_lock, NULL);
	pthread_mutex_init(&h->attach_lock, NULL);
	h->con_timer = virEventAddTimeout(-1, console_resume, h, NULL);
	h->conn = virConnectOpen(uri);
	if (h->conn == NULL) {
		err_set(e, ERR_UNAVAILABLE, "cannot open %s: %s", uri, last_error());
		vm_host_close(h);
		return NULL;
	}
	watch_conn(h, h->conn);
	return h;
}

int
vm_host_probe(const char *uri, char *info, size_t n, struct err *e)
{
	virConnectPtr c = virConnectOpen(uri);
	unsigned long version = 0;
	const char *type;

	if (c == NULL) {
		err_set(e, ERR_UNAVAILABLE, "cannot open %s: %s", uri, last_error());
		return -1;
	}
	type = virConnectGetType(c);
	if (virConnectGetVersion(c, &version) < 0)
		version = 0;
	snprintf(info, n, "%s %lu.%lu.%lu", type ? type : "hypervisor", version / 1000000,
	    version / 1000 % 1000, version % 1000);
	virConnectClose(c);
	return 0;
}

void
vm_host_close(struct vm_host *h)
{
	if (h == NULL)
		return;
	while (h->consoles)
		vm_console_detach(h, h->consoles->name);
	if (h->con_timer >= 0)
		virEventRemoveTimeout(h->con_timer);
	if (h->conn) {
		virConnectUnregisterCloseCallback(h->conn, conn_closed);
		virConnectClose(h->conn);
	}
	pthread_mutex_destroy(&h->lock);
	pthread_mutex_destroy(&h->con_lock);
	pthread_mutex_destroy(&h->attach_lock);
	free(h->uri);
	free(h);
}

const char *
vm_host_uri(const struct vm_host *h)
{
	return h->uri;
}

/* The connection, reopened if libvirt reports it dead (remote hosts). */
virConnectPtr
vm_host_conn(struct vm_host *h)
{
	virConnectPtr c;

	pthread_mutex_lock(&h->lock);
	if (h->conn && (atomic_load(&h->closed) || virConnectIsAlive(h->conn) != 1)) {
		log_warn("vm: connection to %s lost; reconnecting", h->uri);
		virConnectUnregisterCloseCallback(h->conn, conn_closed);
		virConnectClose(h->conn);
		h->conn = NULL;
		atomic_store(&h->closed, 0);
		h->retry_at_ms = 0;
	}
	if (h->conn == NULL && clock_ms() >= h->retry_at_ms) {
		h->conn = virConnectOpen(h->uri);
		if (h->conn != NULL) {
			h->backoff_ms = 0;
			watch_conn(h, h->conn);
		} else {
			h->backoff_ms = h->backoff_ms == 0         ? VM_BACKOFF_FIRST_MS :
			    h->backoff_ms >= VM_BACKOFF_MAX_MS / 2 ? VM_BACKOFF_MAX_MS :
								     h->backoff_ms * 2;
			h->retry_at_ms = clock_ms() + h->backoff_ms;
		}
	}
	c = h->conn;
	if (c)
		virConnectRef(c);
	pthread_mutex_unlock(&h->lock);
	return c;
}

/* h's connection (vm_host_conn), or NULL with ERR_UNAVAILABLE. */
static virConnectPtr
conn_or_err(struct vm_host *h, struct err *e)
{
	virConnectPtr c = vm_host_conn(h);

	if (c == NULL)
		err_set(e, ERR_UNAVAILABLE, "hypervisor %s unreachable", h->uri);
	return c;
}

/* Domain `name` on h, or NULL with e set: ERR_UNAVAILABLE when h is
 * unreachable, ERR_NOT_FOUND "VM <name> is not running" (" on <uri>" with
 * `on_uri`) when it is not there. The domain holds its connection:
 * virDomainFree lets go of both. */
static virDomainPtr
domain_get(struct vm_host *h, const char *name, int on_uri, struct err *e)
{
	virConnectPtr c = conn_or_err(h, e);
	virDomainPtr d;

	if (c == NULL)
		return NULL;
	d = virDomainLookupByName(c, name);
	if (d == NULL && on_uri)
		err_set(e, ERR_NOT_FOUND, "VM %s is not running on %s", name, h->uri);
	else if (d == NULL)
		err_set(e, ERR_NOT_FOUND, "VM %s is not running", name);
	virConnectClose(c);
	return d;
}

/* ---- serial consoles ---- */

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
		err_set(e, ERR_UNAVAILABLE, "console of %s: %s", name, last_error());
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
		err_set(e, ERR_UNAVAILABLE, "console of %s: %s", name, last_error());
		vm_console_detach(h, name);
		return -1;
	}
	return 0;
fail:
	console_free(c);
	return -1;
}

/* Attaches the console of domain d unless it is already being copied. */
static int
console_attach_domain(struct vm_host *h, virDomainPtr d, const char *name, const char *path,
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
	if ((d = domain_get(h, name, 0, e)) == NULL)
		return -1;
	rc = console_attach_domain(h, d, name, path, max, e);
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

/* The memory cgroup limit of the domain's QEMU. Set on the paused domain
 * rather than in its XML: libvirt raises QEMU's locked-memory limit to a
 * <hard_limit> in the XML before exec, which needs CAP_SYS_RESOURCE. */
static int
set_memory_limit_kib(virDomainPtr d, unsigned long long kib, const char *name, struct err *e)
{
	virTypedParameter p;

	memset(&p, 0, sizeof(p));
	snprintf(p.field, sizeof(p.field), "%s", VIR_DOMAIN_MEMORY_HARD_LIMIT);
	p.type = VIR_TYPED_PARAM_ULLONG;
	p.value.ul = kib;
	if (virDomainSetMemoryParameters(d, &p, 1, VIR_DOMAIN_AFFECT_LIVE) < 0) {
		err_set(e, ERR_UNAVAILABLE, "cannot limit the memory of VM %s: %s", name,
		    last_error());
		return -1;
	}
	return 0;
}

static int
set_memory_limit(virDomainPtr d, unsigned mib, const char *name, struct err *e)
{
	return set_memory_limit_kib(d, (unsigned long long)mib * 1024, name, e);
}

int
vm_start(struct vm_host *h, const struct vm_spec *spec, struct err *e)
{
	virConnectPtr c = conn_or_err(h, e);
	virDomainPtr d = NULL;
	char *xml = NULL;
	int rc = -1, paused;

	if (c == NULL)
		return -1;
	xml = vm_xml_build(spec, e);
	if (xml == NULL)
		goto out;
	/* Paused until its memory is bounded and its console is being read,
	 * so that the first lines (the ones a failed boot is explained by)
	 * are not lost. */
	paused = spec->console_log != NULL || spec->memory_limit_mib > 0;
	d = virDomainCreateXML(c, xml, paused ? VIR_DOMAIN_START_PAUSED : VIR_DOMAIN_NONE);
	if (d == NULL) {
		err_set(e, ERR_UNAVAILABLE, "cannot start VM %s: %s", spec->name, last_error());
		goto out;
	}
	if (spec->memory_limit_mib > 0 &&
	    set_memory_limit(d, spec->memory_limit_mib, spec->name, e) < 0) {
		virDomainDestroy(d);
		goto out;
	}
	if (spec->console_log) {
		struct err ce;

		err_clear(&ce);
		/* A VM whose console is not read still works: QEMU drops the
		 * output of a pty nobody holds. */
		if (console_attach_domain(h, d, spec->name, spec->console_log, spec->console_max,
			&ce) < 0)
			log_warn("vm %s: console not kept: %s", spec->name, ce.msg);
	}
	if (paused && virDomainResume(d) < 0) {
		err_set(e, ERR_UNAVAILABLE, "cannot start VM %s: %s", spec->name, last_error());
		virDomainDestroy(d);
		vm_console_detach(h, spec->name);
		goto out;
	}
	rc = 0;
out:
	if (d)
		virDomainFree(d);
	free(xml);
	virConnectClose(c);
	return rc;
}

int
vm_monitor_hmp(struct vm_host *h, const char *name, const char *cmd, char *reply, size_t rn,
    struct err *e)
{
	virDomainPtr d = domain_get(h, name, 0, e);
	char *answer = NULL;
	int rc = -1;

	if (d == NULL)
		return -1;
	if (virDomainQemuMonitorCommand(d, cmd, &answer, VIR_DOMAIN_QEMU_MONITOR_COMMAND_HMP) < 0) {
		err_set(e, ERR_UNAVAILABLE, "monitor of %s: %s", name, last_error());
		goto out;
	}
	snprintf(reply, rn, "%s", answer ? answer : "");
	rc = 0;
out:
	free(answer);
	virDomainFree(d);
	return rc;
}

int
vm_destroy(struct vm_host *h, const char *name, struct err *e)
{
	virConnectPtr c = conn_or_err(h, e);
	virDomainPtr d;
	int rc = 0;

	if (c == NULL)
		return -1;
	d = virDomainLookupByName(c, name);
	if (d == NULL) {
		virErrorPtr ve = virGetLastError();

		/* Not there is what we wanted; not knowing is not (the
		 * caller would give its user back while it may still run). */
		if (ve != NULL && ve->code != VIR_ERR_NO_DOMAIN) {
			err_set(e, ERR_UNAVAILABLE, "cannot look up %s: %s", name, last_error());
			rc = -1;
		}
	} else {
		if (virDomainDestroy(d) < 0) {
			virErrorPtr ve = virGetLastError();
			/* Gone in between: that is what we wanted. */
			if (ve == NULL || ve->code != VIR_ERR_NO_DOMAIN) {
				err_set(e, ERR_UNAVAILABLE, "cannot destroy %s: %s", name,
				    last_error());
				rc = -1;
			}
		}
		virDomainFree(d);
	}
	virConnectClose(c);
	return rc;
}

int
vm_exists(struct vm_host *h, const char *name, struct err *e)
{
	virConnectPtr c = conn_or_err(h, e);
	virDomainPtr d;
	int rc;

	if (c == NULL)
		return -1;
	d = virDomainLookupByName(c, name);
	rc = d != NULL && virDomainIsActive(d) == 1;
	if (d)
		virDomainFree(d);
	virConnectClose(c);
	return rc;
}

void
vm_names_free(char **names, size_t n)
{
	for (size_t i = 0; names && i < n; i++)
		free(names[i]);
	free(names);
}

int
vm_list(struct vm_host *h, const char *prefix, char ***names, size_t *n, struct err *e)
{
	virConnectPtr c;
	virDomainPtr *doms = NULL;
	int count;
	size_t k = 0;
	char **out = NULL;

	*names = NULL;
	*n = 0;
	if ((c = conn_or_err(h, e)) == NULL)
		return -1;
	count = virConnectListAllDomains(c, &doms, VIR_CONNECT_LIST_DOMAINS_ACTIVE);
	if (count < 0) {
		err_set(e, ERR_UNAVAILABLE, "cannot list domains on %s: %s", h->uri, last_error());
		virConnectClose(c);
		return -1;
	}
	out = calloc((size_t)count + 1, sizeof(*out));
	for (int i = 0; i < count; i++) {
		const char *nm = virDomainGetName(doms[i]);
		if (out && nm && strncmp(nm, prefix, strlen(prefix)) == 0)
			out[k++] = strdup(nm);
		virDomainFree(doms[i]);
	}
	free(doms);
	virConnectClose(c);
	if (out == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return -1;
	}
	*names = out;
	*n = k;
	return 0;
}

int
vm_stats(struct vm_host *h, const char *name, struct vm_stats *out, struct err *e)
{
	virConnectPtr c;
	virDomainPtr d;
	virDomainInfo info;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	if ((c = conn_or_err(h, e)) == NULL)
		return -1;
	d = virDomainLookupByName(c, name);
	if (d == NULL) {
		err_set(e, ERR_NOT_FOUND, "no VM %s", name);
	} else if (virDomainGetInfo(d, &info) < 0) {
		err_set(e, ERR_UNAVAILABLE, "cannot read VM %s: %s", name, last_error());
	} else {
		out->running = info.state == VIR_DOMAIN_RUNNING;
		out->cpu_time_ns = info.cpuTime;
		out->memory_kib = info.memory;
		out->max_memory_kib = info.maxMem;
		virDomainMemoryStatStruct ms[VIR_DOMAIN_MEMORY_STAT_NR];
		int n = virDomainMemoryStats(d, ms, VIR_DOMAIN_MEMORY_STAT_NR, 0);
		for (int i = 0; i < n; i++)
			if (ms[i].tag == VIR_DOMAIN_MEMORY_STAT_RSS)
				out->rss_kib = ms[i].val;
		rc = 0;
	}
	if (d)
		virDomainFree(d);
	virConnectClose(c);
	return rc;
}

/* The domain's migratable XML ready for dst (vm_xml_for_move), and its
 * memory limit. */
static char *
migratable_xml(virDomainPtr d, const char *dir, const char *base, unsigned long long *limit_kib)
{
	char *xml = virDomainGetXMLDesc(d, VIR_DOMAIN_XML_MIGRATABLE);
	char *moved = xml ? vm_xml_for_move(xml, dir, base, limit_kib) : NULL;

	free(xml);
	return moved;
}

/* How long the guest was paused by the move that brought domain d here
 * (libvirt's completed-job statistics on the destination), -1 when not
 * known. */
static long long
move_pause_ms(virDomainPtr d)
{
	virTypedParameterPtr params = NULL;
	int np = 0, type = 0;
	unsigned long long v = 0;
	long long ms = -1;

	if (virDomainGetJobStats(d, &type, &params, &np, VIR_DOMAIN_JOB_STATS_COMPLETED) < 0) {
		virResetLastError();
		return -1;
	}
	if (virTypedParamsGetULLong(params, np, VIR_DOMAIN_JOB_DOWNTIME, &v) == 1)
		ms = (long long)v;
	virTypedParamsFree(params, np);
	return ms;
}

int
vm_migrate(struct vm_host *src, struct vm_host *dst, const char *name, int shared_storage,
    const char *socket_dir, const char *socket_base, long long *pause_ms, struct err *e)
{
	virConnectPtr dc = NULL;
	virTypedParameterPtr params = NULL;
	virDomainPtr d = NULL, moved = NULL;
	unsigned long long limit_kib = 0;
	int np = 0, maxp = 0, rc = -1;
	char *xml = NULL;
	/* Live: the guest runs while its memory is copied and pauses only for
	 * the last dirty pages; auto-converge slows a guest that dirties
	 * memory faster than it can be sent, so the move ends. Peer to peer
	 * and tunnelled: the source's libvirt opens dst itself and the memory
	 * travels inside that connection (its TLS or ssh), so no QEMU opens a
	 * socket to another machine, which the isolation rule would stop. */
	unsigned flags = VIR_MIGRATE_LIVE | VIR_MIGRATE_AUTO_CONVERGE | VIR_MIGRATE_PEER2PEER |
	    VIR_MIGRATE_TUNNELLED;

	if ((d = domain_get(src, name, 1, e)) == NULL)
		goto out;
	xml = migratable_xml(d, socket_dir, socket_base, &limit_kib);
	if (xml == NULL ||
	    virTypedParamsAddString(&params, &np, &maxp, VIR_MIGRATE_PARAM_DEST_XML, xml) < 0) {
		err_set(e, ERR_UNAVAILABLE, "cannot describe %s for its move: %s", name,
		    last_error());
		goto out;
	}
	/* Files that are the same on both hosts are safe to share whatever
	 * their cache mode: QEMU hands the image over at the switch. */
	flags |= shared_storage ? VIR_MIGRATE_UNSAFE : VIR_MIGRATE_NON_SHARED_INC;
	if (virDomainMigrateToURI3(d, dst->uri, params, (unsigned)np, flags) < 0) {
		err_set(e, ERR_UNAVAILABLE, "cannot move %s to %s: %s", name, dst->uri,
		    last_error());
		goto out;
	}
	rc = 0;
	*pause_ms = -1;
	if ((dc = vm_host_conn(dst)) != NULL && (moved = virDomainLookupByName(dc, name)) != NULL)
		*pause_ms = move_pause_ms(moved);
	/* Moved: a limit that cannot be set again is reported, and the VM
	 * runs on without it rather than not at all. */
	if (limit_kib > 0 && (moved == NULL || set_memory_limit_kib(moved, limit_kib, name, e) < 0))
		log_warn("vm %s: no memory limit after its move to %s: %s", name, dst->uri,
		    e->msg[0] ? e->msg : last_error());
	err_clear(e);
out:
	if (moved)
		virDomainFree(moved);
	if (d)
		virDomainFree(d);
	virTypedParamsFree(params, np);
	free(xml);
	if (dc)
		virConnectClose(dc);
	return rc;
}

/* Runs `op` on domain `name` of h, with `arg`. */
static int
domain_op(struct vm_host *h, const char *name, int (*op)(virDomainPtr, const char *),
    const char *arg, const char *what, struct err *e)
{
	virDomainPtr d = domain_get(h, name, 1, e);
	int rc = -1;

	if (d == NULL)
		return -1;
	if (op(d, arg) < 0)
		err_set(e, ERR_UNAVAILABLE, "cannot %s %s: %s", what, name, last_error());
	else
		rc = 0;
	virDomainFree(d);
	return rc;
}

static int
suspend_op(virDomainPtr d, const char *unused)
{
	(void)unused;
	return virDomainSuspend(d);
}

static int
resume_op(virDomainPtr d, const char *unused)
{
	(void)unused;
	return virDomainResume(d);
}

/* The domain is restored running whatever state it was saved in. */
static int
save_op(virDomainPtr d, const char *path)
{
	return virDomainSaveFlags(d, path, NULL, VIR_DOMAIN_SAVE_RUNNING);
}

int
vm_suspend(struct vm_host *h, const char *name, struct err *e)
{
	return domain_op(h, name, suspend_op, NULL, "pause", e);
}

int
vm_resume(struct vm_host *h, const char *name, struct err *e)
{
	return domain_op(h, name, resume_op, NULL, "resume", e);
}

/* Resumes a paused domain and leaves a running one so; any other state
 * gets libvirt's own refusal from virDomainResume. */
static int
unpause_op(virDomainPtr d, const char *unused)
{
	int state = VIR_DOMAIN_NOSTATE, reason = 0;

	(void)unused;
	if (virDomainGetState(d, &state, &reason, 0) == 0 && state == VIR_DOMAIN_RUNNING)
		return 0;
	return virDomainResume(d);
}

int
vm_unpause(struct vm_host *h, const char *name, struct err *e)
{
	return domain_op(h, name, unpause_op, NULL, "run again", e);
}

int
vm_save(struct vm_host *h, const char *name, const char *path, struct err *e)
{
	if (domain_op(h, name, save_op, path, "save", e) < 0)
		return -1;
	/* libvirt makes it so already (0600, its own user, which is aasd's
	 * under the embedded driver); said again, in case it did not. */
	if (chown(path, geteuid(), getegid()) < 0 || chmod(path, 0600) < 0) {
		err_set(e, ERR_INTERNAL, "cannot keep %s to aasd: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

int
vm_restore(struct vm_host *h, const char *name, const char *path, const char *kept, struct err *e)
{
	virConnectPtr c = conn_or_err(h, e);
	unsigned long long limit_kib = 0;
	char *xml = NULL;
	virDomainPtr d = NULL;
	int rc = -1;

	if (c == NULL)
		return -1;
	/* The memory limit as at start: set on the paused domain, not in
	 * its XML (see set_memory_limit_kib). */
	if ((xml = vm_xml_without_memtune(kept, &limit_kib)) == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	/* aasd's own XML, never the one in the file: libvirt checks that the
	 * two describe the same machine and starts the domain from ours. */
	if (virDomainRestoreFlags(c, path, xml, VIR_DOMAIN_SAVE_PAUSED) < 0) {
		err_set(e, ERR_UNAVAILABLE, "cannot restore %s: %s", path, last_error());
		goto out;
	}
	d = virDomainLookupByName(c, name);
	if (d == NULL) {
		err_set(e, ERR_UNAVAILABLE, "VM %s is gone after its restore", name);
		goto out;
	}
	if ((limit_kib > 0 && set_memory_limit_kib(d, limit_kib, name, e) < 0) ||
	    virDomainResume(d) < 0) {
		if (e->kind == ERR_NONE)
			err_set(e, ERR_UNAVAILABLE, "cannot run %s: %s", name, last_error());
		virDomainDestroy(d);
		goto out;
	}
	rc = 0;
out:
	if (d)
		virDomainFree(d);
	free(xml);
	virConnectClose(c);
	return rc;
}
