/* orch_files.c - each VM's files on the host and its user (orch.h): the
 * directory under $state/vms with its overlay disk and console, the user
 * from the pool its QEMU runs as, and what a VM that ended left behind. */
#include "vmm/orch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vmm/conlog.h"
#include "vmm/oomwatch.h"
#include "vmm/orch_int.h"
#include "vmm/orch_xml.h"
#include "vmm/uidpool.h"
#include "vmm/vpool.h"
#include "base/fcopy.h"
#include "base/fmt.h"
#include "base/log.h"

extern char **environ;

int
orch_vm_dir(struct orch *o, const char *id, char *out, size_t n)
{
	return fmt_buf(out, n, "%s/%s", o->vms_dir, id);
}

/* Where a paused VM's memory is kept (ORCH_SAVE_SUFFIX; with ".new"
 * while it is written). */
int
orch_save_path(struct orch *o, const char *id, const char *suffix, char *out, size_t n)
{
	return fmt_buf(out, n, "%s/%s" ORCH_SAVE_SUFFIX "%s", o->saved_dir, id, suffix);
}

int
orch_console_path(struct orch *o, const char *id, char *out, size_t n)
{
	return fmt_buf(out, n, "%s/%s/console.log", o->vms_dir, id);
}

int
orch_disk_path(struct orch *o, const char *id, char *out, size_t n)
{
	return fmt_buf(out, n, "%s/%s/disk.qcow2", o->vms_dir, id);
}

int
orch_too_long(struct err *e, const char *id)
{
	err_set(e, ERR_INVALID, "%.100s: a path or domain name too long", id);
	return -1;
}

char *
orch_console_tail(struct orch *o, const char *id, size_t max)
{
	char path[ORCH_PATH_MAX + 96];

	if (orch_console_path(o, id, path, sizeof(path)) < 0)
		return NULL;
	return conlog_tail(path, max);
}

/* ---- a VM's user and files ---- */

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

	if (orch_vm_dir(o, owner, dir, sizeof(dir)) < 0 || lstat(dir, &sb) == 0 || errno != ENOENT)
		return 0; /* in use, being made, or unknown: kept */
	if (orch_domain_name(owner, name, sizeof(name)) < 0 || runs_anywhere(o, name))
		return 0;
	if (uidpool_release(o->uids, uid, owner) == 0)
		log_info("vm: user %u of %s (gone) given back", (unsigned)uid, owner);
	return 0;
}

void
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

/* The overlay of VM `id` on pooled host h, a volume owned by its user. */
static int
make_pool_overlay(struct orch *o, struct vm_host *h, const char *id, uid_t uid, gid_t gid,
    char *disk, size_t dn, struct err *e)
{
	const struct orch_pool *pl = orch_pool_ready(o, h, e);
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

	if (orch_vm_dir(o, id, dir, sizeof(dir)) < 0 ||
	    fmt_buf(disk, dn, "%s/disk.qcow2", dir) < 0 ||
	    orch_console_path(o, id, console, cn) < 0)
		return orch_too_long(e, id);
	if ((mkdir(dir, 0711) < 0 && errno != EEXIST) || chown(dir, geteuid(), getegid()) < 0 ||
	    chmod(dir, 0711) < 0) {
		err_set(e, ERR_INTERNAL, "cannot create %s: %s", dir, strerror(errno));
		return -1;
	}
	/* After the directory: a claim whose directory is missing is a
	 * leftover orch_sweep_users may give back. */
	if (claim_user(o, id, accel, uid, gid, e) < 0)
		return -1;
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

/* The VM's directory on this machine, and its user once the VM is gone. */
static void
remove_local_files(struct orch *o, const char *id, int vm_gone)
{
	char dir[ORCH_PATH_MAX + 64], path[ORCH_PATH_MAX + 96];
	static const char *const files[] = { "disk.qcow2", "console.log", "console.log.new" };
	uint32_t uid;

	if (orch_save_path(o, id, "", path, sizeof(path)) == 0)
		unlink(path);
	if (orch_save_path(o, id, ".new", path, sizeof(path)) == 0)
		unlink(path);
	orch_xml_drop(o, id);
	if (orch_vm_dir(o, id, dir, sizeof(dir)) < 0) {
		log_warn("vm %.100s: a path too long; its files stay", id);
		return;
	}
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		if (fmt_buf(path, sizeof(path), "%s/%s", dir, files[i]) == 0)
			unlink(path);
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

	if (orch_domain_name(id, name, sizeof(name)) == 0) {
		vm_console_detach(h, name);
		oomwatch_take(o->oom, name);
	}
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
		if (!unowned(ctx, id) || orch_domain_name(id, name, sizeof(name)) < 0 ||
		    runs_anywhere(o, name))
			continue;
		log_warn("vm %s: files left with neither a domain nor a live row; removing them",
		    id);
		oomwatch_take(o->oom, name);
		remove_local_files(o, id, 1);
	}
	closedir(d);
}
