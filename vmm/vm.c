/* vm.c - libvirt's event loop and one connection per hypervisor host
 * (vm.h); the pieces vm_int.h names share its look-ups. */
#include "vmm/vm.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <libvirt/virterror.h>

#include "base/clock.h"
#include "base/fmt.h"
#include "base/log.h"
#include "vmm/vm_int.h"

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

const char *
vm_last_error(void)
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
			log_warn("vm: event loop: %s", vm_last_error());
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
	if (fmt_err(e, "libvirt log path", outputs, sizeof(outputs), "3:file:%s",
		log_path ? log_path : "/dev/null") < 0)
		return -1;
	setenv("LIBVIRT_LOG_OUTPUTS", outputs, 0);
	virSetErrorFunc(NULL, quiet_errors);
	if (virEventRegisterDefaultImpl() < 0) {
		err_set(e, ERR_INTERNAL, "libvirt event loop: %s", vm_last_error());
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
	const char *root = strstr(uri, "root="), *what = "AAS_LIBVIRT_URI: root path";
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
	if (fmt_err(e, what, path, sizeof(path), "%s/etc", dir) < 0)
		return -1;
	if ((mkdir(dir, 0755) < 0 && errno != EEXIST) ||
	    (mkdir(path, 0755) < 0 && errno != EEXIST)) {
		err_set(e, ERR_INTERNAL, "cannot create %s: %s", path, strerror(errno));
		return -1;
	}
	if (fmt_err(e, what, path, sizeof(path), "%s/etc/qemu.conf", dir) < 0)
		return -1;
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
	vm_console_host_init(h);
	h->conn = virConnectOpen(uri);
	if (h->conn == NULL) {
		err_set(e, ERR_UNAVAILABLE, "cannot open %s: %s", uri, vm_last_error());
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
		err_set(e, ERR_UNAVAILABLE, "cannot open %s: %s", uri, vm_last_error());
		return -1;
	}
	type = virConnectGetType(c);
	if (virConnectGetVersion(c, &version) < 0)
		version = 0;
	fmt_cut(info, n, "%s %lu.%lu.%lu", type ? type : "hypervisor", version / 1000000,
	    version / 1000 % 1000, version % 1000);
	virConnectClose(c);
	return 0;
}

void
vm_host_close(struct vm_host *h)
{
	if (h == NULL)
		return;
	vm_console_host_end(h);
	if (h->conn) {
		virConnectUnregisterCloseCallback(h->conn, conn_closed);
		virConnectClose(h->conn);
	}
	pthread_mutex_destroy(&h->lock);
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

virConnectPtr
vm_conn_or_err(struct vm_host *h, struct err *e)
{
	virConnectPtr c = vm_host_conn(h);

	if (c == NULL)
		err_set(e, ERR_UNAVAILABLE, "hypervisor %s unreachable", h->uri);
	return c;
}

virDomainPtr
vm_domain_get(struct vm_host *h, const char *name, int on_uri, struct err *e)
{
	virConnectPtr c = vm_conn_or_err(h, e);
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
