/* orch_save.c - the orchestrator's saved VMs: pause and resume (the memory
 * kept in a file while the domain is gone), snapshots and forks (a saved
 * state and a frozen disk restored into new domains), and the image's
 * booted state each create may start from (orch_boot). */
#include "vmm/orch.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "vmm/guest.h"
#include "vmm/oomwatch.h"
#include "vmm/orch_int.h"
#include "vmm/orch_xml.h"
#include "vmm/saveimg.h"
#include "vmm/vm_agent.h"
#include "vmm/vm_xml.h"
#include "base/clock.h"
#include "base/fcopy.h"
#include "base/fmt.h"
#include "base/keys.h"
#include "base/log.h"

/* ---- pause and resume ---- */

/* A host whose files aasd sees: the saved memory lives in the VM's
 * directory. A pooled host's would have to live in its pool. */
static struct vm_host *
save_host(struct orch *o, const char *uri, struct err *e)
{
	struct vm_host *h = orch_host_or_err(o, uri, e);

	if (h != NULL && orch_is_pooled(o, h)) {
		err_set(e, ERR_UNAVAILABLE,
		    "pausing and snapshots are not available on a host that keeps its disks in its"
		    " own storage pool");
		return NULL;
	}
	return h;
}

/* A file written under the temporary name `tmp` kept as `path`: a file
 * under a final name is always whole (reconcile relies on it). */
static int
keep_as(const char *tmp, const char *path, struct err *e)
{
	if (rename(tmp, path) == 0)
		return 0;
	err_set(e, ERR_INTERNAL, "cannot keep %s: %s", path, strerror(errno));
	unlink(tmp);
	return -1;
}

/* VM `id` (domain `name`, its streams closed) saved into `tmp` and its
 * domain ended. On failure the VM runs on (libvirt lets a domain whose
 * save failed run), its console copied again, and `tmp` is gone. */
static int
save_stopped(struct orch *o, struct vm_host *h, const char *id, const char *name, const char *tmp,
    struct err *e)
{
	char console[ORCH_PATH_MAX + 96];
	struct err ignore;

	unlink(tmp);
	if (vm_save(h, name, tmp, e) < 0) {
		unlink(tmp);
		err_clear(&ignore);
		if ((orch_console_path(o, id, console, sizeof(console)) < 0 ?
			    orch_too_long(&ignore, id) :
			    vm_console_attach(h, name, console, o->console_max, &ignore)) < 0)
			log_debug("vm %s: %s", name, ignore.msg);
		return -1;
	}
	/* A call that raced the save may have opened them again meanwhile. */
	vm_agent_forget(h, name);
	vm_console_detach(h, name);
	oomwatch_take(o->oom, name);
	return 0;
}

int
orch_saved(struct orch *o, const char *id)
{
	char path[ORCH_PATH_MAX + 96], tmp[ORCH_PATH_MAX + 96];

	if (orch_save_path(o, id, "", path, sizeof(path)) < 0 ||
	    orch_save_path(o, id, ".new", tmp, sizeof(tmp)) < 0)
		return 0;
	if (orch_file_ok(path))
		return 1;
	/* libvirt ends a domain only once its save is complete: with the
	 * domain gone, a file its aasd did not live to rename is whole. */
	return orch_file_ok(tmp) && rename(tmp, path) == 0;
}

static int pause_vm(struct orch *o, const char *uri, const char *id, long long *bytes,
    struct err *e);

int
orch_pause(struct orch *o, const char *uri, const char *id, long long *bytes, struct err *e)
{
	char name[ORCH_NAME_MAX];
	int rc;

	if (orch_domain_name(id, name, sizeof(name)) < 0)
		return orch_too_long(e, id);
	orch_saving_mark(o, name, 1);
	rc = pause_vm(o, uri, id, bytes, e);
	orch_saving_mark(o, name, 0);
	return rc;
}

static int
pause_vm(struct orch *o, const char *uri, const char *id, long long *bytes, struct err *e)
{
	char name[128], tmp[ORCH_PATH_MAX + 96], path[ORCH_PATH_MAX + 96];
	struct vm_host *h = save_host(o, uri, e);
	struct stat sb;

	*bytes = 0;
	if (h == NULL)
		return -1;
	if (orch_save_path(o, id, ".new", tmp, sizeof(tmp)) < 0 ||
	    orch_save_path(o, id, "", path, sizeof(path)) < 0)
		return orch_too_long(e, id);
	if (orch_close_streams(o, uri, id, name, sizeof(name), e) == NULL)
		return -1;
	/* Written under a temporary name: a file under the final name is a
	 * complete save, whatever stopped in between (reconcile relies on it). */
	if (save_stopped(o, h, id, name, tmp, e) < 0)
		return -1;
	if (keep_as(tmp, path, e) < 0)
		return -1;
	if (stat(path, &sb) == 0)
		*bytes = (long long)sb.st_size;
	return 0;
}

int
orch_continue(struct orch *o, const char *uri, const char *id, struct err *e)
{
	char name[128], tmp[ORCH_PATH_MAX + 96];
	struct vm_host *h = orch_host_or_err(o, uri, e);
	struct err ignore;

	if (h == NULL)
		return -1;
	if (orch_domain_name(id, name, sizeof(name)) < 0 ||
	    orch_save_path(o, id, ".new", tmp, sizeof(tmp)) < 0)
		return orch_too_long(e, id);
	unlink(tmp);
	/* Refused when its vCPUs run already: that is the state wanted. */
	err_clear(&ignore);
	if (vm_resume(h, name, &ignore) < 0)
		log_debug("vm %s: %s", name, ignore.msg);
	return 0;
}

/* The running domain of VM `id` from the saved state at `path`, as the
 * XML aasd keeps for it describes (orch_xml.h), with its console copy and
 * memory watch; on failure it does not run. */
static int
restore_running(struct orch *o, struct vm_host *h, const char *id, const char *path, struct err *e)
{
	char name[ORCH_NAME_MAX];
	char *xml;
	int rc;

	if (orch_domain_name(id, name, sizeof(name)) < 0)
		return orch_too_long(e, id);
	if ((xml = orch_xml_load(o, id, e)) == NULL)
		return -1;
	rc = vm_restore(h, name, path, xml, e);
	free(xml);
	if (rc < 0)
		return -1;
	orch_follow(o, h, id, name, "restore");
	return 0;
}

int
orch_resume(struct orch *o, const char *uri, const char *id, struct err *e)
{
	char path[ORCH_PATH_MAX + 96];
	struct vm_host *h = save_host(o, uri, e);

	if (h == NULL)
		return -1;
	if (orch_save_path(o, id, "", path, sizeof(path)) < 0)
		return orch_too_long(e, id);
	if (!orch_file_ok(path)) {
		err_set(e, ERR_NOT_FOUND, "the saved memory of sandbox %s is missing", id);
		return -1;
	}
	if (restore_running(o, h, id, path, e) < 0)
		return -1;
	/* The domain runs: the file is of no more use. */
	unlink(path);
	return 0;
}

/* ---- snapshots and forks ---- */

/* A snapshot file's path: the saved directory, a name, a suffix. */
#define SNAP_PATH_MAX (ORCH_PATH_MAX + 200)

const char *
orch_image_id(struct orch *o)
{
	return o->image_id;
}

/* A snapshot's files, beside the paused VMs' in aasd's own directory; -1
 * when the path does not fit n. */
static int
snap_path(struct orch *o, const char *snap, const char *suffix, char *out, size_t n)
{
	return fmt_buf(out, n, "%s/%s%s", o->saved_dir, snap, suffix);
}

static long long
file_size(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0 ? (long long)sb.st_size : 0;
}

/* The disk of VM `id`, stopped, copied to the snapshot's .qcow2, and the
 * domain XML aasd keeps for it to the snapshot's .xml (first: a snapshot
 * whose disk is there is whole). */
static int
copy_disk(struct orch *o, const char *id, const char *snap, struct err *e)
{
	char disk[SNAP_PATH_MAX], tmp[SNAP_PATH_MAX], path[SNAP_PATH_MAX];

	if (orch_disk_path(o, id, disk, sizeof(disk)) < 0 ||
	    snap_path(o, snap, ".qcow2.new", tmp, sizeof(tmp)) < 0 ||
	    snap_path(o, snap, ".qcow2", path, sizeof(path)) < 0)
		return orch_too_long(e, snap);
	if (orch_xml_copy(o, id, snap, e) < 0)
		return -1;
	unlink(tmp);
	if (fcopy_path(disk, tmp, 0600, e) < 0)
		return -1;
	return keep_as(tmp, path, e);
}

void
orch_snapshot_delete(struct orch *o, const char *snap)
{
	static const char *const suffixes[] = { ORCH_SAVE_SUFFIX, ORCH_SAVE_SUFFIX ".new", ".qcow2",
		".qcow2.new" };
	char path[SNAP_PATH_MAX];

	for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++)
		if (snap_path(o, snap, suffixes[i], path, sizeof(path)) == 0)
			unlink(path);
	orch_xml_drop(o, snap);
}

static int snapshot_vm(struct orch *o, const char *uri, const char *id, const char *snap,
    long long *bytes, int *restarted, struct err *e);

int
orch_snapshot(struct orch *o, const char *uri, const char *id, const char *snap, long long *bytes,
    int *restarted, struct err *e)
{
	char name[ORCH_NAME_MAX];
	int rc;

	if (orch_domain_name(id, name, sizeof(name)) < 0)
		return orch_too_long(e, id);
	orch_saving_mark(o, name, 1);
	rc = snapshot_vm(o, uri, id, snap, bytes, restarted, e);
	orch_saving_mark(o, name, 0);
	return rc;
}

static int
snapshot_vm(struct orch *o, const char *uri, const char *id, const char *snap, long long *bytes,
    int *restarted, struct err *e)
{
	char name[128], tmp[SNAP_PATH_MAX], path[SNAP_PATH_MAX], disk[SNAP_PATH_MAX];
	struct vm_host *h = save_host(o, uri, e);
	struct err copy_err;
	int copied;

	*bytes = 0;
	*restarted = 0;
	if (h == NULL)
		return -1;
	if (snap_path(o, snap, ORCH_SAVE_SUFFIX ".new", tmp, sizeof(tmp)) < 0 ||
	    snap_path(o, snap, ORCH_SAVE_SUFFIX, path, sizeof(path)) < 0 ||
	    snap_path(o, snap, ".qcow2", disk, sizeof(disk)) < 0)
		return orch_too_long(e, snap);
	if (orch_close_streams(o, uri, id, name, sizeof(name), e) == NULL)
		return -1;
	if (save_stopped(o, h, id, name, tmp, e) < 0)
		return -1;
	/* Renamed before the VM runs again: a domain that runs beside a
	 * saved state under the final name was restored (reconcile). */
	if (rename(tmp, path) < 0) {
		err_set(&copy_err, ERR_INTERNAL, "cannot keep snapshot %s: %s", snap,
		    strerror(errno));
		copied = 0;
		memcpy(path, tmp, sizeof(path));
	} else {
		/* The domain has ended: its disk holds what its memory expects. */
		err_clear(&copy_err);
		copied = copy_disk(o, id, snap, &copy_err) == 0;
	}
	if (restore_running(o, h, id, path, e) < 0) {
		/* The sandbox's VM is lost (orch_vm_exists tells); a whole
		 * snapshot is kept all the same. */
		if (!copied)
			orch_snapshot_delete(o, snap);
		return -1;
	}
	*restarted = 1;
	if (!copied) {
		*e = copy_err;
		orch_snapshot_delete(o, snap);
		return -1;
	}
	*bytes = file_size(path) + file_size(disk);
	return 0;
}

int
orch_snapshot_whole(struct orch *o, const char *snap, long long *bytes)
{
	char save[SNAP_PATH_MAX], disk[SNAP_PATH_MAX], xml[SNAP_PATH_MAX];

	if (snap_path(o, snap, ORCH_SAVE_SUFFIX, save, sizeof(save)) < 0 ||
	    snap_path(o, snap, ".qcow2", disk, sizeof(disk)) < 0 ||
	    snap_path(o, snap, ORCH_XML_SUFFIX, xml, sizeof(xml)) < 0 || !orch_file_ok(save) ||
	    !orch_file_ok(disk) || !orch_file_ok(xml))
		return 0;
	if (bytes)
		*bytes = file_size(save) + file_size(disk);
	return 1;
}

/* How long a recovered domain may stay paused: libvirt winds down the job
 * an aasd killed mid-save left (cancels the migration to the file) on its
 * own time after it reconnects. */
#define RUN_AGAIN_MS 20000
#define RUN_AGAIN_STEP_MS 250

/* Makes a domain found after a crash run (it may be paused by the save or
 * restore its aasd did not live to finish). Best effort: a domain that
 * stays paused answers no call, which its sandbox's errors then say. */
static void
run_again(struct vm_host *h, const char *name)
{
	long long end = clock_ms() + RUN_AGAIN_MS;
	struct err e;

	for (;;) {
		err_clear(&e);
		if (vm_unpause(h, name, &e) == 0 || e.kind == ERR_NOT_FOUND)
			return;
		if (clock_ms() >= end) {
			log_warn("vm %s: stays paused after recovery: %s", name, e.msg);
			return;
		}
		clock_sleep_ms(RUN_AGAIN_STEP_MS);
	}
}

int
orch_snapshot_recover(struct orch *o, const char *uri, const char *id, const char *snap, int *kept,
    int *restarted, struct err *e)
{
	char name[128], tmp[SNAP_PATH_MAX], path[SNAP_PATH_MAX];
	char disk[SNAP_PATH_MAX];
	struct vm_host *h = save_host(o, uri, e);
	struct err ignore;
	int runs;

	*kept = *restarted = 0;
	if (h == NULL)
		return -1;
	if (orch_domain_name(id, name, sizeof(name)) < 0 ||
	    snap_path(o, snap, ORCH_SAVE_SUFFIX ".new", tmp, sizeof(tmp)) < 0 ||
	    snap_path(o, snap, ORCH_SAVE_SUFFIX, path, sizeof(path)) < 0 ||
	    snap_path(o, snap, ".qcow2", disk, sizeof(disk)) < 0)
		return orch_too_long(e, snap);
	if ((runs = vm_exists(h, name, e)) < 0)
		return -1;
	if (runs && !orch_file_ok(path)) {
		/* Stopped before its save ended: the same QEMU runs on. */
		run_again(h, name);
		orch_snapshot_delete(o, snap);
		return 0;
	}
	if (runs) {
		/* Restored from the saved state: a new QEMU, which a restore
		 * cut short may have left paused. */
		run_again(h, name);
		*restarted = 1;
		if (!(*kept = orch_snapshot_whole(o, snap, NULL)))
			orch_snapshot_delete(o, snap);
		return 0;
	}
	/* Gone: libvirt ends a domain only once its save is complete. */
	if (!orch_file_ok(path) && !(orch_file_ok(tmp) && rename(tmp, path) == 0)) {
		orch_snapshot_delete(o, snap);
		err_set(e, ERR_NOT_FOUND, "VM %s ended with no saved state", name);
		return -1;
	}
	*kept = orch_snapshot_whole(o, snap, NULL) || copy_disk(o, id, snap, &ignore) == 0;
	if (restore_running(o, h, id, path, e) < 0) {
		if (!*kept)
			orch_snapshot_delete(o, snap);
		return -1;
	}
	*restarted = 1;
	if (!*kept)
		orch_snapshot_delete(o, snap);
	return 0;
}

/* The source sandbox's id from a saved domain's <name>. */
static int
saved_source_id(const char *xml, char *out, size_t n)
{
	const char *p = strstr(xml, "<name>" ORCH_DOMAIN_PREFIX), *end;

	if (p == NULL)
		return -1;
	p += strlen("<name>" ORCH_DOMAIN_PREFIX);
	end = strstr(p, "</name>");
	if (end == NULL || end == p || (size_t)(end - p) >= n)
		return -1;
	memcpy(out, p, (size_t)(end - p));
	out[end - p] = '\0';
	return 0;
}

/* A new VM `id` on h from snapshot `snap` (a sandbox's, or an image's
 * booted state): a copy of its disk, its memory restored into a domain of
 * its own, its agent waited for. The copy's XML is the one aasd kept for
 * the snapshot, renamed; the save file's own is replaced by it. */
static int
restore_copy(struct orch *o, struct vm_host *h, const char *id, const char *snap,
    orch_progress_fn fn, void *ctx, struct err *e)
{
	char name[128], fork[SNAP_PATH_MAX], disk[SNAP_PATH_MAX], save[SNAP_PATH_MAX];
	char from_disk[SNAP_PATH_MAX], console[SNAP_PATH_MAX], from[64], uuid[40], genid[40];
	char *xml = NULL, *forked = NULL, *header = NULL;
	unsigned long long limit_kib;
	struct err ignore;
	uid_t uid;
	gid_t gid;
	int rc = -1, gone;

	if (orch_domain_name(id, name, sizeof(name)) < 0 ||
	    orch_save_path(o, id, ".fork", fork, sizeof(fork)) < 0 ||
	    snap_path(o, snap, ORCH_SAVE_SUFFIX, save, sizeof(save)) < 0 ||
	    snap_path(o, snap, ".qcow2", from_disk, sizeof(from_disk)) < 0)
		return orch_too_long(e, id);
	if ((xml = orch_xml_load(o, snap, e)) == NULL)
		return -1;
	if (saved_source_id(xml, from, sizeof(from)) < 0) {
		err_set(e, ERR_INTERNAL, "%s names no sandbox VM", save);
		goto out;
	}
	if (fn)
		fn(ctx, 1, 4, "copying the snapshot's disk");
	if (orch_make_vm_files_from(o, h, id, o->accel, from_disk, &uid, &gid, disk, sizeof(disk),
		console, sizeof(console), e) < 0)
		goto fail;
	if (orch_random_uuid(uuid, sizeof(uuid)) < 0 ||
	    orch_random_uuid(genid, sizeof(genid)) < 0 ||
	    (forked = vm_xml_for_fork(xml, from, id, (unsigned)uid, (unsigned)gid, uuid, genid)) ==
		NULL) {
		err_set(e, ERR_INTERNAL, "out of memory or no random numbers");
		goto fail;
	}
	unlink(fork);
	if (fn)
		fn(ctx, 2, 4, "restoring the snapshot's memory");
	if ((header = vm_xml_without_memtune(forked, &limit_kib)) == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto fail;
	}
	if (orch_xml_keep(o, id, forked, e) < 0 || saveimg_copy_as(save, fork, header, e) < 0)
		goto fail;
	if (restore_running(o, h, id, fork, e) < 0)
		goto fail;
	unlink(fork);
	if (fn)
		fn(ctx, 3, 4, "waiting for the guest agent");
	if (orch_wait_agent(h, name, clock_ms() + o->boot_timeout_s * 1000, e) < 0)
		goto fail;
	if (fn)
		fn(ctx, 4, 4, "guest agent answered");
	rc = 0;
	goto out;
fail:
	unlink(fork);
	err_clear(&ignore);
	vm_agent_forget(h, name);
	vm_console_detach(h, name);
	gone = vm_destroy(h, name, &ignore) == 0;
	orch_remove_vm_files(o, h, id, gone);
out:
	free(xml);
	free(forked);
	free(header);
	return rc;
}

int
orch_boot_snapshot(struct orch *o, const char *uri, const char *id, const char *snap,
    orch_progress_fn fn, void *ctx, struct err *e)
{
	struct vm_host *h = save_host(o, uri, e);

	if (h == NULL || orch_wait_ready(o, 60000, e) < 0)
		return -1;
	return restore_copy(o, h, id, snap, fn, ctx, e);
}

/* ---- booted-image snapshots ---- */

/* The name of the booted state of VMs made with these settings: the image,
 * the guest's command line and the domain's shape. Any change names
 * another, so a stale one is never restored. */
static int
boot_snap_name(struct orch *o, enum vm_net net, int vcpus, int mem, char *out, size_t n)
{
	char cmdline[sizeof(ORCH_CMDLINE) + 32 + ORCH_EXTRA_ARGS_MAX], what[1024];
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;

	/* The leading tag names the domain template's version. */
	if (orch_cmdline_for(o, net, cmdline, sizeof(cmdline)) < 0 ||
	    fmt_buf(what, sizeof(what), "xml2|%s|%s|%d|%d|%d|%d|%s", vm_accel_name(o->accel),
		cmdline, vcpus, mem, o->tb_cache_mib, o->bench_port, vm_net_name(net)) < 0)
		return -1;
	if (EVP_Digest(what, strlen(what), md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen < 8)
		return -1;
	/* The first 8 bytes of the hash, in hex. */
	return fmt_buf(out, n, "%s%.16s-%02x%02x%02x%02x%02x%02x%02x%02x", ORCH_BOOT_SNAP_PREFIX,
	    o->image_id, md[0], md[1], md[2], md[3], md[4], md[5], md[6], md[7]);
}

struct build_req {
	struct orch *o;
	struct vm_host *h;
	enum vm_net net;
	int vcpus, mem;
	char name[96];
};

/* The balloon's free page reporting gives the host back what the guest
 * freed (its boot's leftovers, the dropped page cache) a few seconds after
 * it was freed, and a save leaves out what was given back: a third of a
 * fresh guest's state. Waits until QEMU's resident memory stops falling,
 * between SETTLE_MIN_MS and SETTLE_MAX_MS. */
#define SETTLE_MIN_MS 3000
#define SETTLE_QUIET_MS 1000
#define SETTLE_MAX_MS 8000
#define SETTLE_STEP_MS 250

static void
settle_memory(struct vm_host *h, const char *dom)
{
	long long start = clock_ms(), quiet_since = start, now;
	unsigned long long low = 0;
	struct vm_stats st;
	struct err ignore;

	for (;;) {
		err_clear(&ignore);
		if (vm_stats(h, dom, &st, &ignore) < 0)
			return;
		now = clock_ms();
		if (low == 0 || st.rss_kib + 1024 < low) {
			low = st.rss_kib;
			quiet_since = now;
		}
		if ((now - start >= SETTLE_MIN_MS && now - quiet_since >= SETTLE_QUIET_MS) ||
		    now - start >= SETTLE_MAX_MS)
			return;
		clock_sleep_ms(SETTLE_STEP_MS);
	}
}

/* Boots a throw-away VM, waits for its agent, drops its page cache, lets
 * the freed memory go back to the host, and keeps its saved memory and
 * disk under `name`. */
static void *
build_main(void *arg)
{
	struct build_req *r = arg;
	struct orch *o = r->o;
	char id[64], dom[128], tmp[SNAP_PATH_MAX], path[SNAP_PATH_MAX];
	char disk[SNAP_PATH_MAX], dtmp[SNAP_PATH_MAX], own_disk[SNAP_PATH_MAX];
	long long t0 = clock_ms();
	struct err e, ignore;
	char r8[9];
	int gone, saved;

	err_clear(&e);
	/* A helper domain: the pid names it, so a crash's is cleaned up. */
	if (key_random_hex(r8, sizeof(r8), 4) < 0)
		goto out;
	if (fmt_buf(id, sizeof(id), "bootsnap-%s-%d", r8, (int)getpid()) < 0 ||
	    orch_domain_name(id, dom, sizeof(dom)) < 0 ||
	    snap_path(o, r->name, ORCH_SAVE_SUFFIX ".new", tmp, sizeof(tmp)) < 0 ||
	    snap_path(o, r->name, ORCH_SAVE_SUFFIX, path, sizeof(path)) < 0 ||
	    snap_path(o, r->name, ".qcow2.new", dtmp, sizeof(dtmp)) < 0 ||
	    snap_path(o, r->name, ".qcow2", disk, sizeof(disk)) < 0 ||
	    orch_disk_path(o, id, own_disk, sizeof(own_disk)) < 0) {
		orch_too_long(&e, r->name);
		goto out;
	}
	if (orch_boot_with(o, r->h, id, o->accel, r->net, r->vcpus, r->mem,
		o->boot_timeout_s * 1000, NULL, NULL, &e) < 0)
		goto out;
	err_clear(&ignore);
	/* What a new sandbox does not need: its state restores faster. */
	if (guest_drop_caches(r->h, dom, &ignore) < 0)
		log_debug("vm %s: %s", dom, ignore.msg);
	settle_memory(r->h, dom);
	orch_saving_mark(o, dom, 1);
	vm_agent_forget(r->h, dom);
	vm_console_detach(r->h, dom);
	oomwatch_take(o->oom, dom);
	unlink(tmp);
	unlink(dtmp);
	saved = vm_save(r->h, dom, tmp, &e);
	orch_saving_mark(o, dom, 0);
	/* The .save last: a booted state under its final name is whole. */
	if (saved < 0 || fcopy_path(own_disk, dtmp, 0600, &e) < 0 || rename(dtmp, disk) < 0 ||
	    orch_xml_rename(o, id, r->name, &e) < 0 || rename(tmp, path) < 0) {
		if (e.kind == ERR_NONE)
			err_set(&e, ERR_INTERNAL, "cannot keep %s: %s", r->name, strerror(errno));
		unlink(tmp);
		unlink(dtmp);
		unlink(disk);
		orch_xml_drop(o, r->name);
	}
	err_clear(&ignore);
	gone = vm_destroy(r->h, dom, &ignore) == 0 || ignore.kind == ERR_NOT_FOUND;
	orch_remove_vm_files(o, r->h, id, gone);
out:
	if (e.kind != ERR_NONE)
		log_warn("vm: no booted snapshot %s this time: %s", r->name, e.msg);
	else
		log_info("vm: booted snapshot %s made in %lld ms", r->name, clock_ms() - t0);
	free(r);
	atomic_store(&o->building, 0);
	return NULL;
}

/* Starts making the booted snapshot `name` in the background, one at a
 * time; a build under way, a host without room for its VM or a thread
 * that cannot start skips it (the next cold boot asks again). */
static void
build_later(struct orch *o, struct vm_host *h, const char *name, enum vm_net net, int vcpus,
    int mem)
{
	struct build_req *r;
	int idle = 0;

	if (!orch_host_spare(o, h)) {
		log_info("vm: booted snapshot %s not made now: %s has no room beyond its sandboxes",
		    name, vm_host_uri(h));
		return;
	}
	if (!atomic_compare_exchange_strong(&o->building, &idle, 1))
		return;
	if (atomic_load(&o->builder_started)) {
		pthread_join(o->builder, NULL);
		atomic_store(&o->builder_started, 0);
	}
	if ((r = calloc(1, sizeof(*r))) == NULL) {
		atomic_store(&o->building, 0);
		return;
	}
	r->o = o;
	r->h = h;
	r->net = net;
	r->vcpus = vcpus;
	r->mem = mem;
	if (fmt_buf(r->name, sizeof(r->name), "%s", name) < 0 ||
	    pthread_create(&o->builder, NULL, build_main, r) != 0) {
		free(r);
		atomic_store(&o->building, 0);
		return;
	}
	atomic_store(&o->builder_started, 1);
}

/* The booted snapshots of images other than this one go. */
void
orch_drop_old_boot_snaps(struct orch *o)
{
	char mine[ORCH_IMAGE_ID_MAX + 8], path[ORCH_PATH_MAX + 300];
	size_t plen = strlen(ORCH_BOOT_SNAP_PREFIX);
	struct dirent *de;
	DIR *d;

	if (fmt_buf(mine, sizeof(mine), "%s%.16s-", ORCH_BOOT_SNAP_PREFIX, o->image_id) < 0 ||
	    (d = opendir(o->saved_dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		size_t len = strlen(de->d_name);
		int partial = len > 4 && strcmp(de->d_name + len - 4, ".new") == 0;

		/* A build its aasd did not finish leaves .new files. */
		if (strncmp(de->d_name, ORCH_BOOT_SNAP_PREFIX, plen) != 0 ||
		    (strncmp(de->d_name, mine, strlen(mine)) == 0 && !partial) ||
		    fmt_buf(path, sizeof(path), "%s/%s", o->saved_dir, de->d_name) < 0)
			continue;
		if (unlink(path) == 0)
			log_info("vm: removed %s (%s)", de->d_name,
			    partial ? "a build that did not finish" : "made from another image");
	}
	closedir(d);
}

int
orch_boot(struct orch *o, const char *uri, const char *id, enum vm_net net, int vcpus,
    int memory_mib, orch_progress_fn fn, void *ctx, enum orch_booted *how, struct err *e)
{
	struct vm_host *h = orch_host_or_err(o, uri, e);
	char name[96];

	if (h == NULL)
		return -1;
	if (orch_wait_ready(o, 60000, e) < 0)
		return -1;
	if (how)
		*how = ORCH_BOOTED_COLD;
	if (o->boot_snapshots && !orch_is_pooled(o, h) &&
	    boot_snap_name(o, net, vcpus, memory_mib, name, sizeof(name)) == 0) {
		char save[SNAP_PATH_MAX], disk[SNAP_PATH_MAX], dom[128];
		struct err se;

		if (snap_path(o, name, ORCH_SAVE_SUFFIX, save, sizeof(save)) < 0 ||
		    snap_path(o, name, ".qcow2", disk, sizeof(disk)) < 0 ||
		    orch_domain_name(id, dom, sizeof(dom)) < 0)
			return orch_too_long(e, id);
		err_clear(&se);
		if (orch_file_ok(save) && orch_file_ok(disk)) {
			if (restore_copy(o, h, id, name, fn, ctx, &se) == 0 &&
			    guest_new_identity(h, dom, &se) == 0) {
				if (how)
					*how = ORCH_BOOTED_SNAPSHOT;
				return 0;
			}
			/* Unusable (a QEMU or libvirt that changed, say): a
			 * cold boot, and the state is made again. */
			log_warn("vm %s: booted snapshot %s not used: %s", id, name, se.msg);
			err_clear(&se);
			err_ignore(orch_destroy(o, uri, id, &se));
			unlink(save);
			unlink(disk);
			orch_xml_drop(o, name);
		}
		if (orch_boot_with(o, h, id, o->accel, net, vcpus, memory_mib,
			o->boot_timeout_s * 1000, fn, ctx, e) < 0)
			return -1;
		build_later(o, h, name, net, vcpus, memory_mib);
		return 0;
	}
	return orch_boot_with(o, h, id, o->accel, net, vcpus, memory_mib, o->boot_timeout_s * 1000,
	    fn, ctx, e);
}
