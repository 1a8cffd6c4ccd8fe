/* orch.c - VM orchestration over libvirt. */
#include "vmm/orch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <libvirt/virterror.h>

#include "vmm/agent.h"
#include "vmm/conlog.h"
#include "vmm/netguard.h"
#include "vmm/netguard_status.h"
#include "vmm/oomwatch.h"
#include "vmm/orch_int.h"
#include "vmm/orch_xml.h"
#include "vmm/uidpool.h"
#include "vmm/vm_agent.h"
#include "vmm/vpool.h"
#include "base/keys.h"
#include "base/clock.h"
#include "base/fcopy.h"
#include "base/config.h"
#include "base/log.h"
#include "base/num.h"

#define ORCH_STARTER_JOIN_S 20 /* a stopping aasd waits this long for the start-up */
#define ORCH_SOCKET_DIR "/run/aas-vm"

extern char **environ;

/* The host of `uri`, or NULL with the error every operation reports. */
struct vm_host *
orch_host_or_err(struct orch *o, const char *uri, struct err *e)
{
	struct vm_host *h = orch_host_by_uri(o, uri);

	if (h == NULL)
		err_set(e, ERR_UNAVAILABLE, "unknown hypervisor host %s", uri);
	return h;
}

void
orch_domain_name(const char *id, char *out, size_t n)
{
	snprintf(out, n, "%s%s", ORCH_DOMAIN_PREFIX, id);
}

static void
vm_dir(struct orch *o, const char *id, char *out, size_t n)
{
	snprintf(out, n, "%s/%s", o->vms_dir, id);
}

/* Where a paused VM's memory is kept (ORCH_SAVE_SUFFIX; with ".new"
 * while it is written). */
void
orch_save_path(struct orch *o, const char *id, const char *suffix, char *out, size_t n)
{
	snprintf(out, n, "%s/%s" ORCH_SAVE_SUFFIX "%s", o->saved_dir, id, suffix);
}

void
orch_console_path(struct orch *o, const char *id, char *out, size_t n)
{
	snprintf(out, n, "%s/%s/console.log", o->vms_dir, id);
}

void
orch_disk_path(struct orch *o, const char *id, char *out, size_t n)
{
	snprintf(out, n, "%s/%s/disk.qcow2", o->vms_dir, id);
}

/* Runs a program and waits; stdout/stderr go to /dev/null. */
static int
run_quiet(char *const argv[], struct err *e)
{
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int st = 0, rc;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0) {
		err_set(e, ERR_INTERNAL, "cannot run %s: %s", argv[0], strerror(rc));
		return -1;
	}
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		err_set(e, ERR_INTERNAL, "%s failed", argv[0]);
		return -1;
	}
	return 0;
}

int
orch_file_ok(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0;
}

/* Whether domain `name` runs on any of the hosts; a host that cannot
 * tell counts as running it. */
static int
runs_anywhere(struct orch *o, const char *name)
{
	for (size_t i = 0; i < o->n_hosts; i++) {
		struct err e;

		err_clear(&e);
		if (vm_exists(o->hosts[i], name, &e) != 0)
			return 1;
	}
	return 0;
}

/* Gives back the users of VMs whose directory and domain are both gone
 * (their aasd stopped between the two). */
static int
sweep_one(void *ctx, uint32_t uid, const char *owner)
{
	struct orch *o = ctx;
	char dir[ORCH_PATH_MAX + 64], name[ORCH_USER_MAX + 160];
	struct stat sb;

	vm_dir(o, owner, dir, sizeof(dir));
	if (lstat(dir, &sb) == 0 || errno != ENOENT)
		return 0; /* in use, being made, or unknown: kept */
	orch_domain_name(owner, name, sizeof(name));
	if (runs_anywhere(o, name))
		return 0;
	if (uidpool_release(o->uids, uid, owner) == 0)
		log_info("vm: user %u of %s (gone) given back", (unsigned)uid, owner);
	return 0;
}

static void
orch_sweep_users(struct orch *o)
{
	uidpool_each(o->uids, sweep_one, o);
}

/* The user and group VM `id`'s QEMU runs as: a uid of its own from the
 * pool; its own gid under TCG, /dev/kvm's group under KVM (the one thing
 * that group opens; every VM file is its owner's only). */
static int
claim_user(struct orch *o, const char *id, enum vm_accel accel, uid_t *uid, gid_t *gid,
    struct err *e)
{
	uint32_t u = 0;

	if (uidpool_claim(o->uids, id, &u, e) < 0) {
		if (e->kind != ERR_LIMIT)
			return -1;
		/* Claims of VMs that ended while no aasd was there to give
		 * them back are only found by looking. */
		err_clear(e);
		orch_sweep_users(o);
		if (uidpool_claim(o->uids, id, &u, e) < 0)
			return -1;
	}
	*uid = (uid_t)u;
	*gid = accel == VM_ACCEL_KVM && o->kvm_gid != (gid_t)-1 ? o->kvm_gid : (gid_t)u;
	return 0;
}

static int
host_idx(struct orch *o, const struct vm_host *h)
{
	for (size_t i = 0; i < o->n_hosts; i++)
		if (o->hosts[i] == h)
			return (int)i;
	return -1;
}

int
orch_is_pooled(struct orch *o, const struct vm_host *h)
{
	int i = host_idx(o, h);

	return i >= 0 && atomic_load(&o->pooled[i]);
}

/* The image's volumes on pooled host h (uploaded and checked the first
 * time): its kernel, initrd and base paths there. */
static const struct orch_pool *
pool_ready(struct orch *o, struct vm_host *h, struct err *e)
{
	int i = host_idx(o, h);
	struct orch_pool *pl = i >= 0 ? &o->pools[i] : NULL;
	virConnectPtr c = NULL;
	char id[17];

	if (pl == NULL) {
		err_set(e, ERR_INTERNAL, "unknown host");
		return NULL;
	}
	pthread_mutex_lock(&o->pool_lock);
	if (pl->ready)
		goto out;
	if (!o->shas_known) {
		if (vpool_sha256_file(o->kernel, o->sha_kernel, sizeof(o->sha_kernel), e) < 0 ||
		    vpool_sha256_file(o->initrd, o->sha_initrd, sizeof(o->sha_initrd), e) < 0 ||
		    vpool_sha256_file(o->base, o->sha_base, sizeof(o->sha_base), e) < 0)
			goto fail;
		o->shas_known = 1;
	}
	/* Volumes are named by the base's hash: a new image gets new ones. */
	snprintf(id, sizeof(id), "%.16s", o->sha_base);
	const struct vpool_file files[3] = {
		{ o->kernel, o->sha_kernel, "vmlinuz" },
		{ o->initrd, o->sha_initrd, "initrd.img" },
		{ o->base, o->sha_base, "base.qcow2" },
	};
	char *paths[3] = { pl->kernel, pl->initrd, pl->base };
	if ((c = vm_host_conn(h)) == NULL) {
		err_set(e, ERR_UNAVAILABLE, "hypervisor %s unreachable", vm_host_uri(h));
		goto fail;
	}
	for (int k = 0; k < 3; k++)
		if (vpool_file_ensure(c, id, &files[k], paths[k], VPOOL_PATH_MAX, e) < 0)
			goto fail;
	pl->ready = 1;
	log_info("vm: image %s ready in the storage pool of %s", id, vm_host_uri(h));
out:
	pthread_mutex_unlock(&o->pool_lock);
	if (c)
		virConnectClose(c);
	return pl;
fail:
	pthread_mutex_unlock(&o->pool_lock);
	if (c)
		virConnectClose(c);
	return NULL;
}

/* The index of the host of `uri`, or -1. */
static int
uri_idx(struct orch *o, const char *uri)
{
	for (size_t i = 0; i < o->n_hosts; i++)
		if (strcmp(vm_host_uri(o->hosts[i]), uri) == 0)
			return (int)i;
	return -1;
}

void
orch_host_set_pooled(struct orch *o, const char *uri, int pooled)
{
	int i = uri_idx(o, uri);

	if (i >= 0)
		atomic_store(&o->pooled[i], pooled != 0);
}

void
orch_host_set_spare(struct orch *o, const char *uri, int spare)
{
	int i = uri_idx(o, uri);

	if (i >= 0)
		atomic_store(&o->no_spare[i], spare == 0);
}

int
orch_host_spare(struct orch *o, const struct vm_host *h)
{
	int i = host_idx(o, h);

	return i < 0 || !atomic_load(&o->no_spare[i]);
}

/* The overlay of VM `id` on pooled host h, a volume owned by its user. */
static int
make_pool_overlay(struct orch *o, struct vm_host *h, const char *id, uid_t uid, gid_t gid,
    char *disk, size_t dn, struct err *e)
{
	const struct orch_pool *pl = pool_ready(o, h, e);
	virConnectPtr c;
	int rc;

	if (pl == NULL)
		return -1;
	if ((c = vm_host_conn(h)) == NULL) {
		err_set(e, ERR_UNAVAILABLE, "hypervisor %s unreachable", vm_host_uri(h));
		return -1;
	}
	rc = vpool_overlay_create(c, id, pl->base, uid, gid, disk, dn, e);
	virConnectClose(c);
	return rc;
}

/* Per-VM directory: aasd's (0711: QEMU may only pass through it), with the
 * overlay in it owned by the VM's own user, mode 0600, and the console log
 * aasd writes (vm_start's console copy; QEMU never sees it). A VM's user
 * can neither read another VM's overlay nor plant anything where aasd
 * writes. */
int
orch_make_vm_files_from(struct orch *o, struct vm_host *h, const char *id, enum vm_accel accel,
    const char *from_disk, uid_t *uid, gid_t *gid, char *disk, size_t dn, char *console, size_t cn,
    struct err *e)
{
	char dir[ORCH_PATH_MAX + 64];

	vm_dir(o, id, dir, sizeof(dir));
	if ((mkdir(dir, 0711) < 0 && errno != EEXIST) || chown(dir, geteuid(), getegid()) < 0 ||
	    chmod(dir, 0711) < 0) {
		err_set(e, ERR_INTERNAL, "cannot create %s: %s", dir, strerror(errno));
		return -1;
	}
	/* After the directory: a claim whose directory is missing is a
	 * leftover orch_sweep_users may give back. */
	if (claim_user(o, id, accel, uid, gid, e) < 0)
		return -1;
	snprintf(disk, dn, "%s/disk.qcow2", dir);
	orch_console_path(o, id, console, cn);
	/* A console left by an earlier VM of this id is not this one's. */
	unlink(console);
	unlink(disk);
	/* A pooled host keeps the overlay; the console copy stays here. */
	if (orch_is_pooled(o, h))
		return make_pool_overlay(o, h, id, *uid, *gid, disk, dn, e);
	char *argv[] = { "qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", o->base,
		disk, NULL };
	/* A snapshot's disk is an overlay on the same image: copied whole. */
	if (from_disk ? fcopy_path(from_disk, disk, 0600, e) < 0 : run_quiet(argv, e) < 0)
		return -1;
	/* chmod first: once the VM's user owns it, only CAP_FOWNER (which
	 * the unit does not give) could change its mode. */
	if (chmod(disk, 0600) < 0 || chown(disk, *uid, *gid) < 0) {
		err_set(e, ERR_INTERNAL, "cannot hand %s to uid %u: %s", disk, (unsigned)*uid,
		    strerror(errno));
		return -1;
	}
	return 0;
}

static int
make_vm_files(struct orch *o, struct vm_host *h, const char *id, enum vm_accel accel, uid_t *uid,
    gid_t *gid, char *disk, size_t dn, char *console, size_t cn, struct err *e)
{
	return orch_make_vm_files_from(o, h, id, accel, NULL, uid, gid, disk, dn, console, cn, e);
}

/* The VM's directory on this machine, and its user once the VM is gone. */
static void
remove_local_files(struct orch *o, const char *id, int vm_gone)
{
	char dir[ORCH_PATH_MAX + 64], path[ORCH_PATH_MAX + 96];
	static const char *const files[] = { "disk.qcow2", "console.log", "console.log.new" };
	uint32_t uid;

	orch_save_path(o, id, "", path, sizeof(path));
	unlink(path);
	orch_save_path(o, id, ".new", path, sizeof(path));
	unlink(path);
	orch_xml_drop(o, id);
	vm_dir(o, id, dir, sizeof(dir));
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
		unlink(path);
	}
	if (rmdir(dir) < 0 && errno != ENOENT) {
		log_warn("vm %s: cannot remove %s: %s", id, dir, strerror(errno));
		return;
	}
	if (vm_gone && (uid = uidpool_find(o->uids, id)) != 0)
		uidpool_release(o->uids, uid, id);
}

/* Stops the console copy of VM `id` on h and removes its files; gives its
 * user back when `vm_gone` (the domain is known to be destroyed: its QEMU
 * has exited). */
void
orch_remove_vm_files(struct orch *o, struct vm_host *h, const char *id, int vm_gone)
{
	char name[128];

	orch_domain_name(id, name, sizeof(name));
	vm_console_detach(h, name);
	oomwatch_take(o->oom, name);
	if (orch_is_pooled(o, h)) {
		virConnectPtr c = vm_host_conn(h);
		struct err e;

		err_clear(&e);
		if (c == NULL || vpool_overlay_delete(c, id, &e) < 0)
			log_warn("vm %s: its overlay on %s stays: %s", id, vm_host_uri(h),
			    c ? e.msg : "host unreachable");
		if (c)
			virConnectClose(c);
	}
	remove_local_files(o, id, vm_gone);
}

void
orch_sweep_dirs(struct orch *o, int (*unowned)(void *ctx, const char *id), void *ctx)
{
	DIR *d = opendir(o->vms_dir);
	struct dirent *de;
	size_t seen = 0;

	if (d == NULL)
		return;
	while ((de = readdir(d)) != NULL && seen < ORCH_SWEEP_MAX) {
		char id[72], name[128];
		size_t len = strlen(de->d_name);

		if (strncmp(de->d_name, "sbx-", 4) != 0 || len >= sizeof(id))
			continue;
		seen++;
		memcpy(id, de->d_name, len + 1); /* fits: checked above */
		if (!unowned(ctx, id))
			continue;
		orch_domain_name(id, name, sizeof(name));
		if (runs_anywhere(o, name))
			continue;
		log_warn("vm %s: files left with neither a domain nor a live row; removing them",
		    id);
		oomwatch_take(o->oom, name);
		remove_local_files(o, id, 1);
	}
	closedir(d);
}

static void
agent_socket_path(const char *name, char *out, size_t n)
{
	snprintf(out, n, "%s/%s.agent", ORCH_SOCKET_DIR, name);
}

/* The kernel command line of a new VM: the network mode, then the
 * configured extra words (tests and diagnostics). */
void
orch_cmdline_for(const struct orch *o, enum vm_net net, char *out, size_t n)
{
	const char *mode = net == VM_NET_NAT ? " aas.net=nat" :
	    net == VM_NET_ISOLATED           ? " aas.net=isolated" :
					       "";

	snprintf(out, n, "%s%s%s%s", ORCH_CMDLINE, mode, o->extra_args[0] ? " " : "",
	    o->extra_args);
}

static void
fill_spec(struct orch *o, struct vm_host *h, struct vm_spec *s, const char *name,
    enum vm_accel accel, int vcpus, int mem, const char *disk, const char *console, char *agent,
    size_t an)
{
	int overhead, i = host_idx(o, h);
	/* A pooled host's image volumes (made ready with its overlay). */
	const struct orch_pool *pl = i >= 0 && orch_is_pooled(o, h) ? &o->pools[i] : NULL;

	agent_socket_path(name, agent, an);
	memset(s, 0, sizeof(*s));
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

	orch_console_path(o, id, console, sizeof(console));
	err_clear(&ce);
	if (vm_console_attach(h, name, console, o->console_max, &ce) < 0)
		log_warn("vm %s: console not copied after the %s: %s", name, after, ce.msg);
	watch_memory(o, h, name);
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

	orch_domain_name(id, name, sizeof(name));
	if (orch_random_uuid(uuid, sizeof(uuid)) < 0) {
		err_set(e, ERR_INTERNAL, "no random numbers");
		return -1;
	}
	if (fn)
		fn(ctx, 1, 4, "preparing the disk");
	if (make_vm_files(o, h, id, accel, &uid, &gid, disk, sizeof(disk), console, sizeof(console),
		e) < 0)
		goto fail;
	fill_spec(o, h, &spec, name, accel, vcpus, mem, disk, console, agent, sizeof(agent));
	spec.uid = uid;
	spec.gid = gid;
	spec.net = net;
	orch_cmdline_for(o, net, cmdline, sizeof(cmdline));
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

/* ---- start-up: accelerator ---- */

static void
set_ready(struct orch *o, int ready, const struct err *e)
{
	pthread_mutex_lock(&o->lock);
	o->ready = ready;
	if (e)
		o->ready_err = *e;
	pthread_cond_broadcast(&o->ready_cond);
	pthread_mutex_unlock(&o->lock);
}

/* libvirt re-probes QEMU on the first domain start of a process; a paused
 * throw-away domain pays that here instead of in a user's create. */
static void
warm_up_libvirt(struct orch *o, struct vm_host *h)
{
	char id[32], name[64], disk[ORCH_PATH_MAX + 96], console[ORCH_PATH_MAX + 96], agent[160];
	struct vm_spec spec;
	struct err e;
	char *xml;
	virConnectPtr c;
	uid_t uid;
	gid_t gid;
	int gone = 1;

	err_clear(&e);
	snprintf(id, sizeof(id), "warmup-%d", (int)getpid());
	orch_domain_name(id, name, sizeof(name));
	if (make_vm_files(o, h, id, VM_ACCEL_TCG, &uid, &gid, disk, sizeof(disk), console,
		sizeof(console), &e) < 0) {
		orch_remove_vm_files(o, h, id, 1);
		return;
	}
	fill_spec(o, h, &spec, name, VM_ACCEL_TCG, 1, 128, disk, console, agent, sizeof(agent));
	spec.uid = uid;
	spec.gid = gid;
	xml = vm_xml_build(&spec, &e);
	c = vm_host_conn(h);
	if (xml && c) {
		virDomainPtr d = virDomainCreateXML(c, xml, VIR_DOMAIN_START_PAUSED);
		if (d) {
			gone = virDomainDestroy(d) == 0;
			virDomainFree(d);
		}
	}
	if (c)
		virConnectClose(c);
	free(xml);
	orch_remove_vm_files(o, h, id, gone);
}

/* The security drivers libvirt applies to the first host's domains, from
 * its capabilities ("<secmodel><model>dac</model>..."), comma-separated:
 * "dac" alone means ownership only, no AppArmor or SELinux profile. */
static void
read_secmodels(struct orch *o)
{
	virConnectPtr c = vm_host_conn(o->hosts[0]);
	char *caps = c ? virConnectGetCapabilities(c) : NULL;
	size_t used = 0;

	o->secmodels[0] = '\0';
	for (const char *p = caps; p && (p = strstr(p, "<secmodel>")) != NULL;) {
		const char *m = strstr(p, "<model>"), *end = m ? strstr(m, "</model>") : NULL;
		const char *close = strstr(p, "</secmodel>");

		if (m == NULL || end == NULL || close == NULL || m > close)
			break;
		m += strlen("<model>");
		if (end - m > 0 && end - m < 32 && strncmp(m, "none", 4) != 0 &&
		    used + (size_t)(end - m) + 2 < sizeof(o->secmodels))
			used += (size_t)snprintf(o->secmodels + used, sizeof(o->secmodels) - used,
			    "%s%.*s", used ? "," : "", (int)(end - m), m);
		p = close;
	}
	free(caps);
	if (c)
		virConnectClose(c);
}

static void *
starter_main(void *p)
{
	struct orch *o = p;
	struct err e;
	long long t0 = clock_ms();

	err_clear(&e);
	if (o->virt == ORCH_VIRT_TCG) {
		o->accel = VM_ACCEL_TCG;
		snprintf(o->accel_reason, sizeof(o->accel_reason), "AAS_VIRT=tcg");
		warm_up_libvirt(o, o->hosts[0]);
	} else if (o->virt == ORCH_VIRT_KVM) {
		o->accel = VM_ACCEL_KVM;
		warm_up_libvirt(o, o->hosts[0]);
	} else if (access("/dev/kvm", R_OK | W_OK) != 0) {
		o->accel = VM_ACCEL_TCG;
		snprintf(o->accel_reason, sizeof(o->accel_reason), "/dev/kvm is not usable");
		warm_up_libvirt(o, o->hosts[0]);
	} else {
		/* /dev/kvm existing proves little (nested hosts hang guests):
		 * only a guest that boots and answers proves KVM works. */
		char id[48];
		snprintf(id, sizeof(id), "kvmprobe-%d", (int)getpid());
		if (orch_boot_with(o, o->hosts[0], id, VM_ACCEL_KVM, VM_NET_NONE, 1, 256,
			o->kvm_probe_timeout_s * 1000, NULL, NULL, &e) == 0) {
			o->accel = VM_ACCEL_KVM;
			orch_destroy(o, vm_host_uri(o->hosts[0]), id, &e);
		} else {
			o->accel = VM_ACCEL_TCG;
			snprintf(o->accel_reason, sizeof(o->accel_reason),
			    "KVM probe guest failed: %s", e.msg);
		}
		err_clear(&e);
	}
	log_info("vm: accelerator %s%s%s (decided in %lld ms)", vm_accel_name(o->accel),
	    o->accel_reason[0] ? "; " : "", o->accel_reason, clock_ms() - t0);
	orch_sweep_users(o);
	read_secmodels(o);
	set_ready(o, 1, NULL);
	return NULL;
}

/* -1 when [first, first + count) meets [a, a + n). */
static int
apart(uint64_t first, uint64_t count, uint64_t a, uint64_t n)
{
	return a + n <= first || a >= first + count ? 0 : -1;
}

/* -1 when a range in /etc/subuid or /etc/subgid ("name:start:count")
 * meets the VM users. */
static int
subid_overlap(const char *path, uint32_t first, uint32_t count, char *what, size_t wn)
{
	FILE *f = fopen(path, "r");
	char line[256];
	int rc = 0;

	if (f == NULL)
		return 0;
	while (rc == 0 && fgets(line, sizeof(line), f) != NULL) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		long long a, n;

		if (c2 == NULL)
			continue;
		*c2 = '\0';
		c2[1 + strcspn(c2 + 1, "\n")] = '\0';
		if (num_parse_ll(c1 + 1, &a) < 0 || num_parse_ll(c2 + 1, &n) < 0 || a < 0 || n < 0)
			continue;
		if (apart(first, count, (uint64_t)a, (uint64_t)n) < 0) {
			*c1 = '\0';
			snprintf(what, wn, "%s gives %s the ids from %lld", path, line, a);
			rc = -1;
		}
	}
	fclose(f);
	return rc;
}

/* The VM users must be nobody else's: no account, no group, no range of
 * subordinate ids (a container's users), not the QEMU user of probes. */
static int
check_vm_users(struct orch *o, uint32_t first, uint32_t count, struct err *e)
{
	char what[300] = "";
	struct passwd *pw;
	struct group *gr;

	if (apart(first, count, o->qemu_uid, 1) < 0)
		snprintf(what, sizeof(what), "it holds %s's uid", o->qemu_user);
	setpwent();
	while (what[0] == '\0' && (pw = getpwent()) != NULL)
		if (apart(first, count, pw->pw_uid, 1) < 0)
			snprintf(what, sizeof(what), "user %.64s has uid %u", pw->pw_name,
			    (unsigned)pw->pw_uid);
	endpwent();
	setgrent();
	while (what[0] == '\0' && (gr = getgrent()) != NULL)
		if (apart(first, count, gr->gr_gid, 1) < 0)
			snprintf(what, sizeof(what), "group %.64s has gid %u", gr->gr_name,
			    (unsigned)gr->gr_gid);
	endgrent();
	if (what[0] == '\0')
		subid_overlap("/etc/subuid", first, count, what, sizeof(what));
	if (what[0] == '\0')
		subid_overlap("/etc/subgid", first, count, what, sizeof(what));
	if (what[0] != '\0') {
		err_set_field(e, "AAS_QEMU_UIDS", "AAS_QEMU_UIDS %u-%u is not free: %s",
		    (unsigned)first, (unsigned)(first + count - 1), what);
		return -1;
	}
	return 0;
}

static int
resolve_qemu_user(struct orch *o, struct err *e)
{
	struct passwd *pw = getpwnam(o->qemu_user);

	if (pw == NULL) {
		err_set_field(e, "AAS_QEMU_USER", "AAS_QEMU_USER: no user %s", o->qemu_user);
		return -1;
	}
	o->qemu_uid = pw->pw_uid;
	return 0;
}

static int
open_hosts(struct orch *o, struct err *e)
{
	char list[ORCH_URI_LIST_MAX];
	char *save = NULL;

	snprintf(list, sizeof(list), "%s", o->libvirt_uri);
	for (char *uri = strtok_r(list, ",", &save); uri; uri = strtok_r(NULL, ",", &save)) {
		while (*uri == ' ')
			uri++;
		if (*uri == '\0')
			continue;
		if (o->n_hosts >= ORCH_MAX_HOSTS) {
			err_set_field(e, "AAS_LIBVIRT_URI", "AAS_LIBVIRT_URI: at most %d hosts",
			    ORCH_MAX_HOSTS);
			return -1;
		}
		o->hosts[o->n_hosts] = vm_host_open(uri, o->qemu_user, e);
		if (o->hosts[o->n_hosts] == NULL)
			return -1;
		o->n_hosts++;
	}
	if (o->n_hosts == 0) {
		err_set_field(e, "AAS_LIBVIRT_URI", "AAS_LIBVIRT_URI: no host");
		return -1;
	}
	return 0;
}

/* -1 when a string setting is missing or does not fit `max` bytes with
 * its NUL. */
static int
check_setting(const char *v, size_t max, const char *what, struct err *e)
{
	if (v == NULL || strlen(v) >= max) {
		err_set(e, ERR_INVALID, "%s: %s", what, v ? "too long" : "not set");
		return -1;
	}
	return 0;
}

/* The image's identity: the name of the directory image_dir resolves
 * to (build.sh names it by its recipe's hash; "current" is a link). */
static void
set_image_id(struct orch *o, const char *image_dir)
{
	char *real = realpath(image_dir, NULL);
	const char *base = real ? strrchr(real, '/') : NULL;

	snprintf(o->image_id, sizeof(o->image_id), "%s", base && base[1] ? base + 1 : image_dir);
	free(real);
}

/* -1 with e set when a setting is missing or too long: every path below
 * is sized for directories shorter than ORCH_PATH_MAX. */
static int
check_config(const struct orch_config *cfg, struct err *e)
{
	if (check_setting(cfg->libvirt_uri, ORCH_URI_LIST_MAX, "libvirt URI list", e) < 0 ||
	    check_setting(cfg->qemu_user, ORCH_USER_MAX, "QEMU user", e) < 0 ||
	    check_setting(cfg->image_dir, ORCH_PATH_MAX, "image directory", e) < 0 ||
	    check_setting(cfg->state_dir, ORCH_PATH_MAX, "state directory", e) < 0 ||
	    check_setting(cfg->net_allow ? cfg->net_allow : "", CONFIG_NET_ALLOW_MAX,
		"network allow-list", e) < 0 ||
	    check_setting(cfg->netguard_status ? cfg->netguard_status : "", ORCH_PATH_MAX,
		"isolation rule status file", e) < 0)
		return -1;
	return 0;
}

/* The settings o keeps, and the image's files. */
static void
copy_config(struct orch *o, const struct orch_config *cfg)
{
	snprintf(o->libvirt_uri, sizeof(o->libvirt_uri), "%s", cfg->libvirt_uri);
	snprintf(o->qemu_user, sizeof(o->qemu_user), "%s", cfg->qemu_user);
	o->virt = cfg->virt;
	o->boot_timeout_s = cfg->boot_timeout_s;
	o->kvm_probe_timeout_s = cfg->kvm_probe_timeout_s;
	snprintf(o->net_allow, sizeof(o->net_allow), "%s", cfg->net_allow ? cfg->net_allow : "");
	snprintf(o->netguard_status, sizeof(o->netguard_status), "%s",
	    cfg->netguard_status ? cfg->netguard_status : "");
	o->console_max = cfg->console_max_bytes;
	o->bench_port = cfg->bench_port;
	o->memory_overhead_mib = cfg->memory_overhead_mib;
	o->tb_cache_mib = cfg->tb_cache_mib;
	if (cfg->guest_kernel_args != NULL)
		snprintf(o->extra_args, sizeof(o->extra_args), "%s", cfg->guest_kernel_args);
	if (o->console_max < CONLOG_MIN_BYTES || o->console_max > CONLOG_MAX_BYTES)
		o->console_max = ORCH_CONSOLE_DEFAULT;
	snprintf(o->vms_dir, sizeof(o->vms_dir), "%s/vms", cfg->state_dir);
	snprintf(o->kernel, sizeof(o->kernel), "%s/vmlinuz", cfg->image_dir);
	snprintf(o->initrd, sizeof(o->initrd), "%s/initrd.img", cfg->image_dir);
	snprintf(o->base, sizeof(o->base), "%s/base.qcow2", cfg->image_dir);
	set_image_id(o, cfg->image_dir);
	o->boot_snapshots = cfg->boot_snapshots;
}

/* $state/vms and $state/saved, and no booted-image state of another
 * image left in the latter. */
static int
make_state_dirs(struct orch *o, const char *state_dir, struct err *e)
{
	if (mkdir(o->vms_dir, 0755) < 0 && errno != EEXIST) {
		err_set(e, ERR_INTERNAL, "cannot create %s: %s", o->vms_dir, strerror(errno));
		return -1;
	}
	/* Not in the VM's directory: the saved memory and the domain XML a
	 * restore starts from (orch_xml.h, its devices and user) are aasd's
	 * alone. */
	snprintf(o->saved_dir, sizeof(o->saved_dir), "%s/saved", state_dir);
	if ((mkdir(o->saved_dir, 0700) < 0 && errno != EEXIST) || chmod(o->saved_dir, 0700) < 0) {
		err_set(e, ERR_INTERNAL, "cannot create %s: %s", o->saved_dir, strerror(errno));
		return -1;
	}
	orch_drop_old_boot_snaps(o);
	return 0;
}

/* The QEMU users: libvirt's probes' user, the range each VM takes one
 * from (checked to be nobody else's), /dev/kvm's group, and the watch
 * on their memory limits. */
static int
set_up_users(struct orch *o, const struct orch_config *cfg, struct err *e)
{
	char dir[ORCH_PATH_MAX + 16];
	struct group *kvm;
	struct err we;

	if (resolve_qemu_user(o, e) < 0 ||
	    check_vm_users(o, cfg->vm_uid_first, cfg->vm_uid_count, e) < 0)
		return -1;
	kvm = getgrnam("kvm");
	snprintf(dir, sizeof(dir), "%s/uids", cfg->state_dir);
	o->uids = uidpool_new(dir, cfg->vm_uid_first, cfg->vm_uid_count, e);
	if (o->uids == NULL)
		return -1;
	o->kvm_gid = kvm != NULL ? kvm->gr_gid : (gid_t)-1;
	err_clear(&we);
	o->oom = oomwatch_new("/sys/fs/cgroup", &we);
	if (o->oom == NULL)
		log_warn("vm: %s; VMs stopped by their memory limit will show as stopped "
			 "unexpectedly",
		    we.msg);
	o->users.user = (uint32_t)o->qemu_uid;
	o->users.first = cfg->vm_uid_first;
	o->users.count = cfg->vm_uid_count;
	return 0;
}

/* libvirt makes the VMs' channel sockets in ORCH_SOCKET_DIR and hands
 * QEMU their descriptors: no VM's user needs the path, so none can reach
 * another VM's agent through it. */
static int
make_socket_dir(struct err *e)
{
	if ((mkdir(ORCH_SOCKET_DIR, 0700) < 0 && errno != EEXIST) ||
	    chown(ORCH_SOCKET_DIR, geteuid(), getegid()) < 0 || chmod(ORCH_SOCKET_DIR, 0700) < 0) {
		err_set(e, ERR_INTERNAL, "cannot prepare %s: %s", ORCH_SOCKET_DIR, strerror(errno));
		return -1;
	}
	return 0;
}

/* libvirt's event loop, its log in $state/log, and every host opened. */
static int
open_libvirt(struct orch *o, const char *state_dir, struct err *e)
{
	char lvlog[ORCH_PATH_MAX + 32], logdir[ORCH_PATH_MAX + 8];

	snprintf(lvlog, sizeof(lvlog), "%s/log/libvirt.log", state_dir);
	snprintf(logdir, sizeof(logdir), "%s/log", state_dir);
	mkdir(logdir, 0755);
	if (vm_events_start(lvlog, e) < 0 || open_hosts(o, e) < 0)
		return -1;
	return 0;
}

struct orch *
orch_new(const struct orch_config *cfg, struct err *e)
{
	struct orch *o;

	if (check_config(cfg, e) < 0)
		return NULL;
	o = calloc(1, sizeof(*o));
	if (o == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	copy_config(o, cfg);
	pthread_mutex_init(&o->lock, NULL);
	pthread_mutex_init(&o->cpu_lock, NULL);
	pthread_mutex_init(&o->pool_lock, NULL);
	pthread_mutex_init(&o->saving_lock, NULL);
	pthread_cond_init(&o->ready_cond, NULL);
	if (make_state_dirs(o, cfg->state_dir, e) < 0 || set_up_users(o, cfg, e) < 0 ||
	    make_socket_dir(e) < 0 || open_libvirt(o, cfg->state_dir, e) < 0)
		goto fail;
	if (!orch_file_ok(o->kernel) || !orch_file_ok(o->initrd) || !orch_file_ok(o->base)) {
		/* The service still runs (and says why); VM tools answer this. */
		struct err ie;
		err_clear(&ie);
		err_set(&ie, ERR_UNAVAILABLE, "no guest image in %s (run make image)",
		    cfg->image_dir);
		log_warn("vm: %s", ie.msg);
		set_ready(o, -1, &ie);
		return o;
	}
	if (pthread_create(&o->starter, NULL, starter_main, o) != 0) {
		err_set(e, ERR_INTERNAL, "cannot start the VM start-up thread");
		goto fail;
	}
	o->starter_started = 1;
	return o;
fail:
	orch_free(o);
	return NULL;
}

void
orch_free(struct orch *o)
{
	if (o == NULL)
		return;
	if (o->starter_started) {
		struct timespec ts;

		/* libvirt's first QEMU probe can hang in the child it forks
		 * (seen under the sanitizer build): a stopping aasd does not
		 * wait for it. What the starter uses stays allocated; the
		 * process is ending. */
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += ORCH_STARTER_JOIN_S;
		if (pthread_timedjoin_np(o->starter, NULL, &ts) != 0) {
			log_error("vm: the VM layer's start-up did not finish in %d s; "
				  "leaving it behind",
			    ORCH_STARTER_JOIN_S);
			return;
		}
	}
	if (atomic_load(&o->builder_started))
		pthread_join(o->builder, NULL);
	for (size_t i = 0; i < o->n_hosts; i++) {
		vm_agent_forget_host(o->hosts[i]);
		vm_host_close(o->hosts[i]);
	}
	oomwatch_free(o->oom);
	uidpool_free(o->uids);
	pthread_mutex_destroy(&o->lock);
	pthread_mutex_destroy(&o->cpu_lock);
	pthread_mutex_destroy(&o->pool_lock);
	pthread_mutex_destroy(&o->saving_lock);
	pthread_cond_destroy(&o->ready_cond);
	free(o);
}

int
orch_wait_ready(struct orch *o, int timeout_ms, struct err *e)
{
	struct timespec ts;
	int ready;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += timeout_ms / 1000;
	ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&o->lock);
	while (o->ready == 0)
		if (pthread_cond_timedwait(&o->ready_cond, &o->lock, &ts) != 0)
			break;
	ready = o->ready;
	if (ready < 0)
		err_set(e, o->ready_err.kind, "%s", o->ready_err.msg);
	else if (ready == 0)
		err_set(e, ERR_UNAVAILABLE, "the VM layer is still starting; retry shortly");
	pthread_mutex_unlock(&o->lock);
	return ready == 1 ? 0 : -1;
}

const char *
orch_accel(struct orch *o)
{
	int ready;

	pthread_mutex_lock(&o->lock);
	ready = o->ready;
	pthread_mutex_unlock(&o->lock);
	return ready == 1 ? vm_accel_name(o->accel) : NULL;
}

const char *
orch_accel_reason(struct orch *o)
{
	return o->accel_reason;
}

void
orch_confinement(struct orch *o, struct orch_confinement *out)
{
	memset(out, 0, sizeof(*out));
	out->vm_uid_first = o->users.first;
	out->vm_uid_count = o->users.count;
	pthread_mutex_lock(&o->lock);
	if (o->ready == 1)
		snprintf(out->secmodels, sizeof(out->secmodels), "%s", o->secmodels);
	pthread_mutex_unlock(&o->lock);
}

size_t
orch_host_count(struct orch *o)
{
	return o->n_hosts;
}

const char *
orch_host_uri_at(struct orch *o, size_t i)
{
	return i < o->n_hosts ? vm_host_uri(o->hosts[i]) : NULL;
}

struct vm_host *
orch_host_by_uri(struct orch *o, const char *uri)
{
	int i = uri_idx(o, uri);

	return i >= 0 ? o->hosts[i] : NULL;
}

/* 1 when `uri` names another machine (an authority after "://"). */
static int
uri_remote(const char *uri)
{
	const char *p = strstr(uri, "://");

	return p != NULL && p[3] != '/' && p[3] != '\0';
}

int
orch_uri_private(const char *uri)
{
	return strncmp(uri, "test:", 5) == 0 || strstr(uri, ":///embed") != NULL;
}

int
orch_host_add(struct orch *o, const char *uri, struct err *e)
{
	struct vm_host *h;
	int rc = -1;

	pthread_mutex_lock(&o->lock);
	h = orch_host_by_uri(o, uri);
	pthread_mutex_unlock(&o->lock);
	if (h != NULL)
		return 0;
	/* Opened without the lock (a remote host can take seconds, and start-up
	 * and every create read under it); only the maintenance thread adds
	 * hosts, so nobody adds the same one meanwhile. */
	h = vm_host_open(uri, o->qemu_user, e);
	if (h == NULL)
		return -1;
	pthread_mutex_lock(&o->lock);
	if (o->n_hosts >= ORCH_MAX_HOSTS) {
		err_set(e, ERR_LIMIT, "at most %d hosts", ORCH_MAX_HOSTS);
		goto out;
	}
	o->hosts[o->n_hosts] = h;
	h = NULL;
	o->n_hosts++;
	log_info("vm: host %s added", uri);
	rc = 0;
out:
	pthread_mutex_unlock(&o->lock);
	vm_host_close(h);
	return rc;
}

/* The host's CPU busy share since the previous call, or -1 when this is
 * the first reading or the driver has no CPU statistics. */
static double
cpu_busy_since(struct orch *o, size_t i, virConnectPtr c)
{
	virNodeCPUStatsPtr params = NULL;
	int n = 0;
	unsigned long long idle = 0, total = 0;
	double busy = -1;

	if (virNodeGetCPUStats(c, VIR_NODE_CPU_STATS_ALL_CPUS, NULL, &n, 0) < 0 || n <= 0 || n > 16)
		return -1;
	params = calloc((size_t)n, sizeof(*params));
	if (params == NULL)
		return -1;
	if (virNodeGetCPUStats(c, VIR_NODE_CPU_STATS_ALL_CPUS, params, &n, 0) < 0)
		goto out;
	for (int k = 0; k < n; k++) {
		if (strcmp(params[k].field, VIR_NODE_CPU_STATS_IDLE) == 0 ||
		    strcmp(params[k].field, VIR_NODE_CPU_STATS_IOWAIT) == 0)
			idle += params[k].value;
		if (strcmp(params[k].field, VIR_NODE_CPU_STATS_UTILIZATION) != 0)
			total += params[k].value;
	}
	pthread_mutex_lock(&o->cpu_lock);
	if (o->cpu_prev[i].total != 0 && total > o->cpu_prev[i].total &&
	    idle >= o->cpu_prev[i].idle) {
		double dt = (double)(total - o->cpu_prev[i].total);
		double di = (double)(idle - o->cpu_prev[i].idle);
		busy = di >= dt ? 0 : 1 - di / dt;
	}
	o->cpu_prev[i].idle = idle;
	o->cpu_prev[i].total = total;
	pthread_mutex_unlock(&o->cpu_lock);
out:
	free(params);
	return busy;
}

int
orch_host_stats(struct orch *o, const char *uri, struct orch_host_stats *out, struct err *e)
{
	virNodeInfo info;
	virConnectPtr c = NULL;
	unsigned long long free_bytes;
	int i = uri_idx(o, uri), rc = -1, n;

	memset(out, 0, sizeof(*out));
	out->free_memory_mib = -1;
	out->cpu_busy = -1;
	out->disk_free_mib = -1;
	if (i < 0) {
		err_set(e, ERR_NOT_FOUND, "no host %s", uri);
		return -1;
	}
	c = vm_host_conn(o->hosts[i]);
	if (c == NULL || virNodeGetInfo(c, &info) < 0) {
		err_set(e, ERR_UNAVAILABLE, "%s: no node information: %s", uri,
		    virGetLastErrorMessage());
		goto out;
	}
	out->memory_mib = (long long)(info.memory / 1024);
	out->vcpus = (int)info.cpus;
	free_bytes = virNodeGetFreeMemory(c);
	if (free_bytes > 0)
		out->free_memory_mib = (long long)(free_bytes >> 20);
	out->cpu_busy = cpu_busy_since(o, (size_t)i, c);
	n = virConnectNumOfDomains(c);
	out->domains = n > 0 ? n : 0;
	if (atomic_load(&o->pooled[i])) {
		/* Where its overlays live: its pool, once aasd made it. */
		virStoragePoolPtr p = virStoragePoolLookupByName(c, VPOOL_NAME);
		virStoragePoolInfo pi;

		if (p != NULL && virStoragePoolGetInfo(p, &pi) == 0)
			out->disk_free_mib = (long long)(pi.available >> 20);
		if (p != NULL)
			virStoragePoolFree(p);
		else
			virResetLastError();
	} else if (!uri_remote(uri)) {
		struct statvfs sv;
		if (statvfs(o->vms_dir, &sv) == 0)
			out->disk_free_mib = (long long)((unsigned long long)sv.f_bavail *
				sv.f_frsize >>
			    20);
	}
	rc = 0;
out:
	if (c)
		virConnectClose(c);
	return rc;
}

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
	orch_domain_name(id, name, sizeof(name));
	for (int attempt = 0; attempt < 8; attempt++) {
		int hp = pick_port(address);

		if (hp <= 0)
			continue;
		snprintf(cmd, sizeof(cmd), "hostfwd_add %s tcp:%s:%d-:%d", VM_NETDEV_ID, address,
		    hp, guest_port);
		if (vm_monitor_hmp(h, name, cmd, reply, sizeof(reply), e) < 0)
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
	orch_domain_name(id, name, sizeof(name));
	snprintf(cmd, sizeof(cmd), "hostfwd_remove %s tcp:%s:%d", VM_NETDEV_ID, address, host_port);
	return vm_monitor_hmp(h, name, cmd, reply, sizeof(reply), e);
}

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
			snprintf(slot, ORCH_NAME_MAX, "%s", name);
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
	orch_domain_name(id, name, n);
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

int
orch_uri_this_machine(const char *uri)
{
	const char *p = strstr(uri, "://");

	/* qemu:///..., qemu+unix:///...: no host name, so this machine. */
	return p != NULL && p[3] == '/';
}

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
	if (pool_ready(o, dst, e) == NULL)
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
	orch_domain_name(id, name, sizeof(name));
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
	snprintf(base, sizeof(base), "%s-%s", name, tag);
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
		vm_dir(o, (*ids)[i] + plen, dir, sizeof(dir));
		orch_console_path(o, (*ids)[i] + plen, path, sizeof(path));
		err_clear(&ce);
		/* Nor one being saved: libvirt 9.0 hangs when the save ends a
		 * domain whose console stream is open (the pause closed it,
		 * a listing must not open it again). */
		if (stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode) && !saving_has(o, (*ids)[i]) &&
		    vm_console_attach(h, (*ids)[i], path, o->console_max, &ce) < 0)
			log_debug("vm %s: %s", (*ids)[i], ce.msg);
		if (stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode))
			watch_memory(o, h, (*ids)[i]);
		memmove((*ids)[i], (*ids)[i] + plen, strlen((*ids)[i]) - plen + 1);
	}
	return 0;
}

char *
orch_console_tail(struct orch *o, const char *id, size_t max)
{
	char path[ORCH_PATH_MAX + 96];

	orch_console_path(o, id, path, sizeof(path));
	return conlog_tail(path, max);
}

int
orch_net_ensure(struct orch *o, struct err *e)
{
	enum netguard_source by;
	struct err own;

	err_clear(&own);
	if (netguard_status_in_force(o->netguard_status, &o->users, o->net_allow,
		(long long)time(NULL), 1, &by, &own) == 0)
		return 0;
	if (by == NETGUARD_BY_WATCHER || geteuid() == 0 || o->netguard_status[0] == '\0') {
		*e = own;
		return -1;
	}
	/* No status yet, and nftables does not answer aasd: the watcher is
	 * what is missing. */
	err_set(e, own.kind,
	    "%.300s; without CAP_NET_ADMIN aasd cannot read nftables: run `aasd --netguard-watch` as "
	    "root (deploy/aas-netguard.service), which records the rule's state in %.120s",
	    own.msg, o->netguard_status);
	return -1;
}

int
orch_uri_net_checked_here(const char *uri)
{
	return strncmp(uri, "qemu:///", 8) == 0;
}

int
orch_net_rule_hash(struct orch *o, char *out, size_t n)
{
	char rules[NETGUARD_RULES_MAX];

	if (netguard_ruleset(&o->users, o->net_allow, rules, sizeof(rules)) < 0 ||
	    n < KEY_HASH_HEX_LEN + 1)
		return -1;
	key_hash_hex(rules, strlen(rules), out, n);
	return 0;
}

/* The host of sandbox `id` and its domain name, or NULL with `e` set. */
static struct vm_host *
domain_of(struct orch *o, const char *uri, const char *id, char *domain, size_t n, struct err *e)
{
	struct vm_host *h = orch_host_or_err(o, uri, e);

	if (h != NULL)
		orch_domain_name(id, domain, n);
	return h;
}

int
orch_vm_out_of_memory(struct orch *o, const char *id)
{
	char name[128];

	orch_domain_name(id, name, sizeof(name));
	return oomwatch_take(o->oom, name);
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
	if (h == NULL)
		return 0;
	orch_domain_name(id, name, sizeof(name));
	return vm_agent_fault(h, name, why, n);
}
