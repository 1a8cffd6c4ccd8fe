/* orch.c - the orchestrator's life (orch.h): its settings checked and
 * kept, its start-up (VM users, state directories, hosts opened, then the
 * accelerator chosen in the background), readiness, the end; and the host
 * isolation rule it keeps for the VMs' users. The hosts are orch_host.c,
 * each VM's files orch_files.c, a VM's life orch_vm.c, saved VMs
 * orch_save.c; orch_int.h is what they share. */
#include "vmm/orch.h"

#include <errno.h>
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "vmm/conlog.h"
#include "vmm/netguard.h"
#include "vmm/netguard_status.h"
#include "vmm/oomwatch.h"
#include "vmm/orch_int.h"
#include "vmm/uidpool.h"
#include "vmm/vm_agent.h"
#include "base/clock.h"
#include "base/config.h"
#include "base/fmt.h"
#include "base/keys.h"
#include "base/log.h"
#include "base/num.h"

#define ORCH_STARTER_JOIN_S 20 /* a stopping aasd waits this long for the start-up */

/* ---- start-up: the accelerator ---- */

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
	if (fmt_buf(id, sizeof(id), "warmup-%d", (int)getpid()) < 0 ||
	    orch_domain_name(id, name, sizeof(name)) < 0)
		return;
	if (orch_make_vm_files_from(o, h, id, VM_ACCEL_TCG, NULL, &uid, &gid, disk, sizeof(disk),
		console, sizeof(console), &e) < 0 ||
	    orch_fill_spec(o, h, &spec, name, VM_ACCEL_TCG, 1, 128, disk, console, agent,
		sizeof(agent)) < 0) {
		orch_remove_vm_files(o, h, id, 1);
		return;
	}
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
		    used + (size_t)(end - m) + 2 < sizeof(o->secmodels)) {
			if (fmt_buf(o->secmodels + used, sizeof(o->secmodels) - used, "%s%.*s",
				used ? "," : "", (int)(end - m), m) < 0) {
				o->secmodels[used] = '\0';
				break;
			}
			used += strlen(o->secmodels + used);
		}
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
		fmt_cut(o->accel_reason, sizeof(o->accel_reason), "AAS_VIRT=tcg");
		warm_up_libvirt(o, o->hosts[0]);
	} else if (o->virt == ORCH_VIRT_KVM) {
		o->accel = VM_ACCEL_KVM;
		warm_up_libvirt(o, o->hosts[0]);
	} else if (access("/dev/kvm", R_OK | W_OK) != 0) {
		o->accel = VM_ACCEL_TCG;
		fmt_cut(o->accel_reason, sizeof(o->accel_reason), "/dev/kvm is not usable");
		warm_up_libvirt(o, o->hosts[0]);
	} else {
		/* /dev/kvm existing proves little (nested hosts hang guests):
		 * only a guest that boots and answers proves KVM works. */
		char id[48];
		if (fmt_err(&e, "probe id", id, sizeof(id), "kvmprobe-%d", (int)getpid()) == 0 &&
		    orch_boot_with(o, o->hosts[0], id, VM_ACCEL_KVM, VM_NET_NONE, 1, 256,
			o->kvm_probe_timeout_s * 1000, NULL, NULL, &e) == 0) {
			o->accel = VM_ACCEL_KVM;
			err_ignore(orch_destroy(o, vm_host_uri(o->hosts[0]), id, &e));
		} else {
			o->accel = VM_ACCEL_TCG;
			fmt_cut(o->accel_reason, sizeof(o->accel_reason),
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

/* ---- start-up: settings, users and hosts ---- */

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
			fmt_cut(what, wn, "%s gives %s the ids from %lld", path, line, a);
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
		fmt_cut(what, sizeof(what), "it holds %s's uid", o->qemu_user);
	setpwent();
	while (what[0] == '\0' && (pw = getpwent()) != NULL)
		if (apart(first, count, pw->pw_uid, 1) < 0)
			fmt_cut(what, sizeof(what), "user %.64s has uid %u", pw->pw_name,
			    (unsigned)pw->pw_uid);
	endpwent();
	setgrent();
	while (what[0] == '\0' && (gr = getgrent()) != NULL)
		if (apart(first, count, gr->gr_gid, 1) < 0)
			fmt_cut(what, sizeof(what), "group %.64s has gid %u", gr->gr_name,
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

	if (fmt_err(e, "libvirt URI list", list, sizeof(list), "%s", o->libvirt_uri) < 0)
		return -1;
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
 * to (build.sh names it by its recipe's hash; "current" is a link). -1
 * with e set when it does not fit. */
static int
set_image_id(struct orch *o, const char *image_dir, struct err *e)
{
	char *real = realpath(image_dir, NULL);
	const char *base = real ? strrchr(real, '/') : NULL;
	int rc = fmt_err(e, "image directory name", o->image_id, sizeof(o->image_id), "%s",
	    base && base[1] ? base + 1 : image_dir);

	free(real);
	return rc;
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

/* The settings o keeps, and the image's files; -1 with e set when one
 * does not fit. */
static int
copy_config(struct orch *o, const struct orch_config *cfg, struct err *e)
{
	o->virt = cfg->virt;
	o->boot_timeout_s = cfg->boot_timeout_s;
	o->kvm_probe_timeout_s = cfg->kvm_probe_timeout_s;
	o->console_max = cfg->console_max_bytes;
	o->bench_port = cfg->bench_port;
	o->memory_overhead_mib = cfg->memory_overhead_mib;
	o->tb_cache_mib = cfg->tb_cache_mib;
	if (o->console_max < CONLOG_MIN_BYTES || o->console_max > CONLOG_MAX_BYTES)
		o->console_max = ORCH_CONSOLE_DEFAULT;
	o->boot_snapshots = cfg->boot_snapshots;
	if (fmt_err(e, "libvirt URI list", o->libvirt_uri, sizeof(o->libvirt_uri), "%s",
		cfg->libvirt_uri) < 0 ||
	    fmt_err(e, "QEMU user", o->qemu_user, sizeof(o->qemu_user), "%s", cfg->qemu_user) < 0 ||
	    fmt_err(e, "network allow-list", o->net_allow, sizeof(o->net_allow), "%s",
		cfg->net_allow ? cfg->net_allow : "") < 0 ||
	    fmt_err(e, "isolation rule status file", o->netguard_status, sizeof(o->netguard_status),
		"%s", cfg->netguard_status ? cfg->netguard_status : "") < 0 ||
	    fmt_err(e, "guest kernel arguments", o->extra_args, sizeof(o->extra_args), "%s",
		cfg->guest_kernel_args ? cfg->guest_kernel_args : "") < 0 ||
	    fmt_err(e, "state directory", o->vms_dir, sizeof(o->vms_dir), "%s/vms",
		cfg->state_dir) < 0 ||
	    fmt_err(e, "image directory", o->kernel, sizeof(o->kernel), "%s/vmlinuz",
		cfg->image_dir) < 0 ||
	    fmt_err(e, "image directory", o->initrd, sizeof(o->initrd), "%s/initrd.img",
		cfg->image_dir) < 0 ||
	    fmt_err(e, "image directory", o->base, sizeof(o->base), "%s/base.qcow2",
		cfg->image_dir) < 0)
		return -1;
	return set_image_id(o, cfg->image_dir, e);
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
	if (fmt_err(e, "state directory", o->saved_dir, sizeof(o->saved_dir), "%s/saved",
		state_dir) < 0)
		return -1;
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
	if (fmt_err(e, "state directory", dir, sizeof(dir), "%s/uids", cfg->state_dir) < 0)
		return -1;
	kvm = getgrnam("kvm");
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

	if (fmt_err(e, "state directory", logdir, sizeof(logdir), "%s/log", state_dir) < 0 ||
	    fmt_err(e, "state directory", lvlog, sizeof(lvlog), "%s/libvirt.log", logdir) < 0)
		return -1;
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
	pthread_mutex_init(&o->lock, NULL);
	pthread_mutex_init(&o->cpu_lock, NULL);
	pthread_mutex_init(&o->pool_lock, NULL);
	pthread_mutex_init(&o->saving_lock, NULL);
	pthread_cond_init(&o->ready_cond, NULL);
	if (copy_config(o, cfg, e) < 0 || make_state_dirs(o, cfg->state_dir, e) < 0 ||
	    set_up_users(o, cfg, e) < 0 || make_socket_dir(e) < 0 ||
	    open_libvirt(o, cfg->state_dir, e) < 0)
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

/* ---- lifetime and readiness ---- */

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
	struct timespec ts = clock_cond_deadline(timeout_ms);
	int ready;

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
		memcpy(out->secmodels, o->secmodels, sizeof(out->secmodels));
	pthread_mutex_unlock(&o->lock);
}

/* ---- the host isolation rule ---- */

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
