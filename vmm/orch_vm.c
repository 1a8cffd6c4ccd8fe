/* orch_vm.c - one VM's life on its host (orch.h): its domain described
 * and booted cold until its agent answers, its forwarded ports, a move to
 * another host, its stop, and what a listing finds of it. */
#include "vmm/orch.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "vmm/cgcaps.h"
#include "vmm/oomwatch.h"
#include "vmm/orch_int.h"
#include "vmm/orch_xml.h"
#include "vmm/uidpool.h"
#include "vmm/vm_agent.h"
#include "vmm/vpool.h"
#include "base/clock.h"
#include "base/fmt.h"
#include "base/keys.h"
#include "base/log.h"

int
orch_domain_name(const char *id, char *out, size_t n)
{
	if (fmt_buf(out, n, "%s%s", ORCH_DOMAIN_PREFIX, id) == 0)
		return 0;
	if (n > 0)
		out[0] = '\0';
	return -1;
}

/* The kernel command line of a new VM: the network mode, then the
 * configured extra words (tests and diagnostics). */
int
orch_cmdline_for(const struct orch *o, enum vm_net net, char *out, size_t n)
{
	const char *mode = net == VM_NET_NAT ? " aas.net=nat" :
	    net == VM_NET_ISOLATED           ? " aas.net=isolated" :
					       "";

	return fmt_buf(out, n, "%s%s%s%s", ORCH_CMDLINE, mode, o->extra_args[0] ? " " : "",
	    o->extra_args);
}

int
orch_fill_spec(struct orch *o, struct vm_host *h, struct vm_spec *s, const char *name,
    enum vm_accel accel, int vcpus, int mem, const char *disk, const char *console, char *agent,
    size_t an)
{
	int overhead, i = orch_host_idx(o, h);
	/* A pooled host's image volumes (made ready with its overlay). */
	const struct orch_pool *pl = i >= 0 && orch_is_pooled(o, h) ? &o->pools[i] : NULL;

	memset(s, 0, sizeof(*s));
	if (fmt_buf(agent, an, "%s/%s.agent", ORCH_SOCKET_DIR, name) < 0)
		return -1;
	s->name = name;
	s->accel = accel;
	s->vcpus = vcpus;
	s->memory_mib = mem;
	s->kernel = pl ? pl->kernel : o->kernel;
	s->initrd = pl ? pl->initrd : o->initrd;
	s->cmdline = ORCH_CMDLINE;
	s->disk = disk;
	s->console_log = console;
	s->console_max = o->console_max;
	s->agent_socket = agent;
	s->bench_port = o->bench_port;
	/* Host resources by size: CPU weight and block I/O weight in
	 * proportion to the vCPUs; CPU time capped at the vCPUs plus half a
	 * core for QEMU's own threads; memory at the guest's plus QEMU's. */
	s->cpu_shares = 1024u * (unsigned)vcpus;
	s->cpu_quota_us = 100000u * (unsigned)vcpus + 50000u;
	s->blkio_weight = vcpus >= 4 ? 1000u : 250u * (unsigned)vcpus;
	/* libvirt fails a domain whose weight the host cannot apply; on a
	 * remote host that is for its operator to provide. */
	if (orch_uri_this_machine(vm_host_uri(h)) && !cgcaps_this_machine_blkio_weight())
		s->blkio_weight = 0;
	/* A small translation cache (the default) keeps an idle TCG VM's
	 * QEMU to a quarter of what QEMU's own 1 GiB cache grows to. */
	if (accel == VM_ACCEL_TCG)
		s->tb_cache_mib = o->tb_cache_mib;
	overhead = o->memory_overhead_mib;
	if (overhead <= 0)
		overhead = accel == VM_ACCEL_KVM ? ORCH_OVERHEAD_KVM_MIB :
		    o->tb_cache_mib > 0          ? o->tb_cache_mib + ORCH_OVERHEAD_KVM_MIB :
						   ORCH_OVERHEAD_TCG_MIB;
	s->memory_limit_mib = (unsigned)mem + (unsigned)overhead;
	return 0;
}

/* Readiness: the guest's aas-agent answered the handshake on its port. */
int
orch_wait_agent(struct vm_host *h, const char *name, long long deadline, struct err *e)
{
	struct achan *c = vm_agent_get(h, name, e);
	struct err ignore;
	int rc;

	if (c == NULL) {
		if (e->kind == ERR_NOT_FOUND)
			err_set(e, ERR_UNAVAILABLE, "the VM stopped while booting");
		return -1;
	}
	rc = achan_wait_ready(c, deadline, e);
	if (rc < 0 && e->kind == ERR_TIMEOUT)
		err_set(e, ERR_TIMEOUT, "the guest agent did not answer in time");
	else if (rc < 0 && (err_clear(&ignore), vm_exists(h, name, &ignore)) == 0)
		err_set(e, ERR_UNAVAILABLE, "the VM stopped while booting");
	achan_free(c);
	return rc;
}

/* Watches the memory cgroup of domain `name`'s QEMU when it runs on this
 * machine, so a stop by its memory limit is told apart. Any URI without
 * a host name (qemu:///system, or qemu+unix:///system?socket=... for a
 * daemon on a socket of its own) has its QEMU here. */
static void
watch_memory(struct orch *o, struct vm_host *h, const char *name)
{
	struct err e;
	pid_t pid;

	if (o->oom == NULL || !orch_uri_this_machine(vm_host_uri(h)) ||
	    oomwatch_watching(o->oom, name))
		return;
	err_clear(&e);
	pid = oomwatch_qemu_pid(name);
	if (pid < 0 || oomwatch_add(o->oom, name, pid, &e) < 0)
		log_debug("vm %s: its memory limit is not watched: %s", name,
		    pid < 0 ? "no QEMU process found" : e.msg);
}

void
orch_follow(struct orch *o, struct vm_host *h, const char *id, const char *name, const char *after)
{
	char console[ORCH_PATH_MAX + 96];
	struct err ce;

	err_clear(&ce);
	if ((orch_console_path(o, id, console, sizeof(console)) < 0 ?
		    orch_too_long(&ce, id) :
		    vm_console_attach(h, name, console, o->console_max, &ce)) < 0)
		log_warn("vm %s: console not copied after the %s: %s", name, after, ce.msg);
	watch_memory(o, h, name);
}

static int
make_vm_files(struct orch *o, struct vm_host *h, const char *id, enum vm_accel accel, uid_t *uid,
    gid_t *gid, char *disk, size_t dn, char *console, size_t cn, struct err *e)
{
	return orch_make_vm_files_from(o, h, id, accel, NULL, uid, gid, disk, dn, console, cn, e);
}

int
orch_boot_with(struct orch *o, struct vm_host *h, const char *id, enum vm_accel accel,
    enum vm_net net, int vcpus, int mem, int timeout_ms, orch_progress_fn fn, void *ctx,
    struct err *e)
{
	char disk[ORCH_PATH_MAX + 96], console[ORCH_PATH_MAX + 96], name[128], agent[160];
	char cmdline[sizeof(ORCH_CMDLINE) + 32 + ORCH_EXTRA_ARGS_MAX], uuid[40];
	struct vm_spec spec;
	struct err ignore;
	uid_t uid;
	gid_t gid;
	int gone;

	if (orch_domain_name(id, name, sizeof(name)) < 0 ||
	    orch_cmdline_for(o, net, cmdline, sizeof(cmdline)) < 0)
		return orch_too_long(e, id);
	if (orch_random_uuid(uuid, sizeof(uuid)) < 0) {
		err_set(e, ERR_INTERNAL, "no random numbers");
		return -1;
	}
	if (fn)
		fn(ctx, 1, 4, "preparing the disk");
	if (make_vm_files(o, h, id, accel, &uid, &gid, disk, sizeof(disk), console, sizeof(console),
		e) < 0)
		goto fail;
	if (orch_fill_spec(o, h, &spec, name, accel, vcpus, mem, disk, console, agent,
		sizeof(agent)) < 0) {
		orch_too_long(e, id);
		goto fail;
	}
	spec.uid = uid;
	spec.gid = gid;
	spec.net = net;
	spec.cmdline = cmdline;
	spec.uuid = uuid;
	if (fn)
		fn(ctx, 2, 4, "starting the VM");
	/* Kept before it runs: a restore of this VM starts from this XML. */
	if (orch_xml_keep_spec(o, id, &spec, e) < 0 || vm_start(h, &spec, e) < 0)
		goto fail;
	watch_memory(o, h, name);
	if (fn)
		fn(ctx, 3, 4, "booting the kernel");
	if (orch_wait_agent(h, name, clock_ms() + timeout_ms, e) < 0)
		goto fail;
	if (fn)
		fn(ctx, 4, 4, "guest agent answered");
	return 0;
fail:
	err_clear(&ignore);
	vm_agent_forget(h, name); /* before the destroy, as in orch_destroy */
	vm_console_detach(h, name);
	gone = vm_destroy(h, name, &ignore) == 0;
	orch_remove_vm_files(o, h, id, gone);
	return -1;
}

/* ---- forwards ---- */

/* A port free right now on `address` (the kernel's choice) when that
 * address is this machine's, else a random one from the ephemeral range.
 * QEMU may still lose a race for it; the caller retries. */
static int
pick_port(const char *address)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -1;
	char r[5];

	if (fd >= 0 && inet_pton(AF_INET, address, &sa.sin_addr) == 1 &&
	    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
		port = ntohs(sa.sin_port);
	if (fd >= 0)
		close(fd);
	if (port <= 0 && key_random_hex(r, sizeof(r), 2) == 0) {
		char *end;
		long v = strtol(r, &end, 16);

		if (*end == '\0')
			port = 32768 + (int)(v % 28000);
	}
	return port;
}

int
orch_forward_add(struct orch *o, const char *uri, const char *id, const char *address,
    int guest_port, int *host_port, struct err *e)
{
	struct vm_host *h = orch_host_or_err(o, uri, e);
	char name[128], cmd[160], reply[256];
	struct in_addr a;

	if (h == NULL)
		return -1;
	if (address == NULL || address[0] == '\0')
		address = ORCH_FORWARD_LOOPBACK;
	if (inet_pton(AF_INET, address, &a) != 1) {
		err_set(e, ERR_INVALID, "forward address %s is not an IPv4 address", address);
		return -1;
	}
	if (orch_domain_name(id, name, sizeof(name)) < 0)
		return orch_too_long(e, id);
	for (int attempt = 0; attempt < 8; attempt++) {
		int hp = pick_port(address);

		if (hp <= 0)
			continue;
		if (fmt_err(e, "forward command", cmd, sizeof(cmd), "hostfwd_add %s tcp:%s:%d-:%d",
			VM_NETDEV_ID, address, hp, guest_port) < 0 ||
		    vm_monitor_hmp(h, name, cmd, reply, sizeof(reply), e) < 0)
			return -1;
		/* QEMU answers nothing on success, a sentence on failure. */
		if (reply[strspn(reply, " \r\n")] == '\0') {
			*host_port = hp;
			return 0;
		}
		reply[strcspn(reply, "\r\n")] = '\0';
		log_debug("vm %s: %s: %s", name, cmd, reply);
		if (strstr(reply, "not found") != NULL || strstr(reply, "unknown") != NULL) {
			err_set(e, ERR_UNAVAILABLE, "sandbox has no network device (%s)", reply);
			return -1;
		}
	}
	err_set(e, ERR_UNAVAILABLE, "could not find a free port for the forward");
	return -1;
}

int
orch_forward_remove(struct orch *o, const char *uri, const char *id, const char *address,
    int host_port, struct err *e)
{
	struct vm_host *h = orch_host_or_err(o, uri, e);
	char name[128], cmd[160], reply[256];

	if (h == NULL)
		return -1;
	if (address == NULL || address[0] == '\0')
		address = ORCH_FORWARD_LOOPBACK;
	if (orch_domain_name(id, name, sizeof(name)) < 0)
		return orch_too_long(e, id);
	if (fmt_err(e, "forward command", cmd, sizeof(cmd), "hostfwd_remove %s tcp:%s:%d",
		VM_NETDEV_ID, address, host_port) < 0)
		return -1;
	return vm_monitor_hmp(h, name, cmd, reply, sizeof(reply), e);
}

/* ---- saves under way, stop and detach ---- */

/* Domain `name` is being saved (on) or no longer (off). A full table
 * leaves it unmarked: the listing's console copy is then only less
 * careful, as before the table existed. */
void
orch_saving_mark(struct orch *o, const char *name, int on)
{
	pthread_mutex_lock(&o->saving_lock);
	for (size_t i = 0; i < ORCH_SAVING_MAX; i++) {
		char *slot = o->saving[i];

		if (on && slot[0] == '\0') {
			/* A name that does not fit is left unmarked, as with a full table. */
			if (fmt_buf(slot, ORCH_NAME_MAX, "%s", name) < 0)
				slot[0] = '\0';
			break;
		}
		if (!on && strcmp(slot, name) == 0) {
			slot[0] = '\0';
			break;
		}
	}
	pthread_mutex_unlock(&o->saving_lock);
}

static int
saving_has(struct orch *o, const char *name)
{
	int found = 0;

	pthread_mutex_lock(&o->saving_lock);
	for (size_t i = 0; i < ORCH_SAVING_MAX && !found; i++)
		found = strcmp(o->saving[i], name) == 0;
	pthread_mutex_unlock(&o->saving_lock);
	return found;
}

/* The domain's host, with its agent and console streams closed while the
 * domain still runs: libvirt 9.0 deadlocks when a stream is aborted while
 * another thread frees the ended domain's devices (seen in a reconcile's
 * domain listing racing a destroy). */
struct vm_host *
orch_close_streams(struct orch *o, const char *uri, const char *id, char *name, size_t n,
    struct err *e)
{
	struct vm_host *h = orch_host_or_err(o, uri, e);

	if (h == NULL)
		return NULL;
	if (orch_domain_name(id, name, n) < 0) {
		orch_too_long(e, id);
		return NULL;
	}
	vm_agent_forget(h, name);
	vm_console_detach(h, name);
	return h;
}

int
orch_destroy(struct orch *o, const char *uri, const char *id, struct err *e)
{
	char name[128];
	struct vm_host *h = orch_close_streams(o, uri, id, name, sizeof(name), e);

	if (h == NULL || vm_destroy(h, name, e) < 0)
		return -1;
	orch_remove_vm_files(o, h, id, 1);
	return 0;
}

int
orch_detach(struct orch *o, const char *uri, const char *id, struct err *e)
{
	char name[128];
	struct vm_host *h = orch_close_streams(o, uri, id, name, sizeof(name), e);

	if (h == NULL)
		return -1;
	if (vm_suspend(h, name, e) < 0) {
		if (e->kind != ERR_NOT_FOUND)
			return -1;
		err_clear(e);
	}
	return 0;
}

/* ---- moves ---- */

/* A move between two pooled hosts: the guest pauses (QEMU flushes its
 * disk), its overlay is copied volume to volume through the two libvirt
 * connections, the memory follows as between hosts that share the disk,
 * and the guest runs again on the new host. The pause lasts the copy and
 * the migration. On failure the guest runs on where it was. */
static int
move_pooled(struct orch *o, struct vm_host *src, struct vm_host *dst, const char *id,
    const char *name, const char *base, long long *pause_ms, struct err *e)
{
	uid_t uid = (uid_t)uidpool_find(o->uids, id);
	gid_t gid = o->accel == VM_ACCEL_KVM && o->kvm_gid != (gid_t)-1 ? o->kvm_gid : (gid_t)uid;
	virConnectPtr sc = NULL, dc = NULL;
	char disk[VPOOL_PATH_MAX];
	long long t0, ignored_pause;
	struct err ignore;
	int rc = -1, copied = 0;

	if (uid == 0) {
		err_set(e, ERR_INTERNAL, "VM %s has no user of its own", id);
		return -1;
	}
	/* The image first, while the guest still runs (an upload takes a
	 * while the first time). */
	if (orch_pool_ready(o, dst, e) == NULL)
		return -1;
	if ((sc = vm_host_conn(src)) == NULL || (dc = vm_host_conn(dst)) == NULL) {
		err_set(e, ERR_UNAVAILABLE, "a hypervisor is unreachable");
		goto out;
	}
	if (vm_suspend(src, name, e) < 0)
		goto out;
	t0 = clock_ms();
	if (vpool_overlay_copy(sc, dc, id, uid, gid, disk, sizeof(disk), e) < 0)
		goto resume;
	copied = 1;
	if (vm_migrate(src, dst, name, 1, ORCH_SOCKET_DIR, base, &ignored_pause, e) < 0)
		goto resume;
	/* A domain paused when it left stays paused where it arrives. */
	if (vm_resume(dst, name, e) < 0)
		log_warn("vm %s: %s", name, e->msg);
	err_clear(e);
	*pause_ms = clock_ms() - t0;
	err_clear(&ignore);
	if (vpool_overlay_delete(sc, id, &ignore) < 0)
		log_warn("vm %s: its old overlay on %s stays: %s", name, vm_host_uri(src),
		    ignore.msg);
	rc = 0;
	goto out;
resume:
	err_clear(&ignore);
	if (copied && vpool_overlay_delete(dc, id, &ignore) < 0)
		log_warn("vm %s: a copy of its overlay on %s stays: %s", name, vm_host_uri(dst),
		    ignore.msg);
	err_clear(&ignore);
	if (vm_resume(src, name, &ignore) < 0)
		log_warn("vm %s: %s", name, ignore.msg);
out:
	if (sc)
		virConnectClose(sc);
	if (dc)
		virConnectClose(dc);
	return rc;
}

int
orch_migrate(struct orch *o, const char *from, const char *to, const char *id, long long *pause_ms,
    struct err *e)
{
	struct vm_host *src = orch_host_or_err(o, from, e), *dst;
	char name[128], base[160], tag[9];

	if (src == NULL || (dst = orch_host_or_err(o, to, e)) == NULL)
		return -1;
	if (src == dst) {
		err_set(e, ERR_INVALID, "sandbox %s is on %s already", id, to);
		return -1;
	}
	if (orch_domain_name(id, name, sizeof(name)) < 0)
		return orch_too_long(e, id);
	/* Hosts that see aasd's files share the disk. Between two pooled
	 * hosts aasd copies it (libvirt 9 would copy it through QEMU's own
	 * connections, NBD, which the isolation rule stops and the tunnel
	 * cannot carry): see move_pooled. */
	if (orch_is_pooled(o, src) != orch_is_pooled(o, dst)) {
		err_set(e, ERR_UNAVAILABLE,
		    "a VM cannot move between a host with its own storage pool and one that"
		    " shares aasd's files");
		return -1;
	}
	/* Sockets named anew: the old ones go with the old domain. */
	if (key_random_hex(tag, sizeof(tag), 4) < 0) {
		err_set(e, ERR_INTERNAL, "random generator failed");
		return -1;
	}
	if (fmt_buf(base, sizeof(base), "%s-%s", name, tag) < 0)
		return orch_too_long(e, id);
	if (orch_is_pooled(o, src)) {
		if (move_pooled(o, src, dst, id, name, base, pause_ms, e) < 0)
			return -1;
	} else if (vm_migrate(src, dst, name, 1, ORCH_SOCKET_DIR, base, pause_ms, e) < 0) {
		return -1;
	}
	/* The source's streams ended with its QEMU; the next call opens the
	 * agent on the new host, and the console copy goes on in its file. */
	vm_agent_forget(src, name);
	vm_console_detach(src, name);
	oomwatch_take(o->oom, name);
	orch_follow(o, dst, id, name, "move");
	return 0;
}

/* ---- listing and state ---- */

int
orch_list(struct orch *o, const char *uri, char ***ids, size_t *n, struct err *e)
{
	struct vm_host *h = orch_host_or_err(o, uri, e);
	size_t plen = strlen(ORCH_DOMAIN_PREFIX);

	if (h == NULL)
		return -1;
	if (vm_list(h, ORCH_DOMAIN_PREFIX, ids, n, e) < 0)
		return -1;
	/* Domain names to ids, in place. */
	for (size_t i = 0; i < *n; i++) {
		char path[ORCH_PATH_MAX + 96], dir[ORCH_PATH_MAX + 64];
		struct stat sb;
		struct err ce;
		/* A VM found again (this process did not start it, e.g. after
		 * a restart) gets its console copied from now on. Only where
		 * its directory still exists: a VM being removed gets none. */
		int named = orch_vm_dir(o, (*ids)[i] + plen, dir, sizeof(dir)) == 0 &&
		    orch_console_path(o, (*ids)[i] + plen, path, sizeof(path)) == 0;

		err_clear(&ce);
		/* Nor one being saved: libvirt 9.0 hangs when the save ends a
		 * domain whose console stream is open (the pause closed it,
		 * a listing must not open it again). */
		if (named && stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode) &&
		    !saving_has(o, (*ids)[i]) &&
		    vm_console_attach(h, (*ids)[i], path, o->console_max, &ce) < 0)
			log_debug("vm %s: %s", (*ids)[i], ce.msg);
		if (named && stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode))
			watch_memory(o, h, (*ids)[i]);
		memmove((*ids)[i], (*ids)[i] + plen, strlen((*ids)[i]) - plen + 1);
	}
	return 0;
}

/* The host of sandbox `id` and its domain name, or NULL with `e` set. */
static struct vm_host *
domain_of(struct orch *o, const char *uri, const char *id, char *domain, size_t n, struct err *e)
{
	struct vm_host *h = orch_host_or_err(o, uri, e);

	if (h != NULL && orch_domain_name(id, domain, n) < 0) {
		orch_too_long(e, id);
		return NULL;
	}
	return h;
}

int
orch_vm_out_of_memory(struct orch *o, const char *id)
{
	char name[128];

	return orch_domain_name(id, name, sizeof(name)) == 0 && oomwatch_take(o->oom, name);
}

int
orch_vm_exists(struct orch *o, const char *uri, const char *id, struct err *e)
{
	char domain[64];
	struct vm_host *h = domain_of(o, uri, id, domain, sizeof(domain), e);

	return h ? vm_exists(h, domain, e) : -1;
}

int
orch_vm_stats(struct orch *o, const char *uri, const char *id, struct vm_stats *out, struct err *e)
{
	char domain[64];
	struct vm_host *h = domain_of(o, uri, id, domain, sizeof(domain), e);

	return h ? vm_stats(h, domain, out, e) : -1;
}

void
orch_ids_free(char **ids, size_t n)
{
	vm_names_free(ids, n);
}

int
orch_agent_fault(struct orch *o, const char *uri, const char *id, char *why, size_t n)
{
	struct vm_host *h = orch_host_by_uri(o, uri);
	char name[128];

	if (n > 0)
		why[0] = '\0';
	if (h == NULL || orch_domain_name(id, name, sizeof(name)) < 0)
		return 0;
	return vm_agent_fault(h, name, why, n);
}
