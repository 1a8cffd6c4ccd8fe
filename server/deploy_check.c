/* deploy_check.c - aasd --check-deployment (deploy_check.h).
 *
 * Each check tries the thing itself where it can (a chown to a VM user, a
 * connection to libvirt and PostgreSQL, the isolation rule's status)
 * rather than reading configuration, so it answers for this process as
 * the unit starts it. A missing feature never switches itself off
 * silently: the line says what stops working and how to fix it. */
#include "server/deploy_check.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/config.h"
#include "base/db.h"
#include "vmm/netguard.h"
#include "vmm/netguard_status.h"
#include "vmm/vm.h"
#include "server/ngcli.h"
#include "base/fmt.h"

enum dc_status { DC_OK, DC_WARN, DC_MISSING };

struct dc_row {
	enum dc_status status;
	char detail[800];
	char fix[400];
};

typedef void (*dc_fn)(const struct config *cfg, struct dc_row *r);

static void
row_set(struct dc_row *r, enum dc_status st, const char *detail, const char *fix)
{
	r->status = st;
	fmt_cut(r->detail, sizeof(r->detail), "%.700s", detail);
	fmt_cut(r->fix, sizeof(r->fix), "%s", fix ? fix : "");
}

static void
check_database(const struct config *cfg, struct dc_row *r)
{
	struct err e;
	struct db *db;

	err_clear(&e);
	db = db_new(cfg->database_url, 1, &e);
	if (db == NULL || db_ping(db, &e) < 0)
		row_set(r, DC_MISSING, e.msg,
		    "AAS_DATABASE_URL must reach PostgreSQL as aasd's user (docs/operations.md, step 6)");
	else
		row_set(r, DC_OK, "PostgreSQL answers", NULL);
	db_free(db);
}

static void
check_libvirt(const struct config *cfg, struct dc_row *r)
{
	char list[sizeof(cfg->libvirt_uri)], info[128], detail[600] = "";
	size_t used = 0;
	struct err e;
	char *save = NULL;

	if (fmt_buf(list, sizeof(list), "%s", cfg->libvirt_uri) < 0) {
		row_set(r, DC_MISSING, "AAS_LIBVIRT_URI is too long", NULL);
		return;
	}
	for (char *uri = strtok_r(list, ",", &save); uri; uri = strtok_r(NULL, ",", &save)) {
		err_clear(&e);
		if (strncmp(uri, "qemu:///embed", 13) == 0) {
			row_set(r, DC_WARN, "qemu:///embed: the embedded driver, for development",
			    "production uses qemu:///system: QEMU outlives aasd's restarts there");
			return;
		}
		if (vm_host_probe(uri, info, sizeof(info), &e) < 0) {
			row_set(r, DC_MISSING, e.msg,
			    "libvirtd must run and aas be in its group (SupplementaryGroups=libvirt)");
			return;
		}
		/* A list cut short still reads; the URIs past it are left out. */
		fmt_cut(detail + used, sizeof(detail) - used, "%s%s: %s", used ? "; " : "", uri,
		    info);
		used += strlen(detail + used);
	}
	row_set(r, DC_OK, detail, NULL);
}

static void
check_accelerator(const struct config *cfg, struct dc_row *r)
{
	if (cfg->virt == CONFIG_VIRT_KVM)
		row_set(r, DC_OK, "AAS_VIRT=kvm", NULL);
	else if (cfg->virt == CONFIG_VIRT_TCG)
		row_set(r, DC_WARN,
		    "AAS_VIRT=tcg: every sandbox is emulated (several times slower)",
		    "AAS_VIRT=kvm on a host with /dev/kvm");
	else if (access("/dev/kvm", R_OK | W_OK) != 0)
		row_set(r, DC_WARN,
		    "AAS_VIRT=auto cannot see /dev/kvm here (PrivateDevices=yes hides it)",
		    "set AAS_VIRT=kvm: libvirt's QEMU opens /dev/kvm, not aasd");
	else
		row_set(r, DC_OK, "AAS_VIRT=auto, /dev/kvm present", NULL);
}

static void
check_image(const struct config *cfg, struct dc_row *r)
{
	static const char *const files[] = { "vmlinuz", "initrd.img", "base.qcow2" };
	char path[sizeof(cfg->image_dir) + 32], msg[sizeof(path) + 64];

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		if (fmt_buf(path, sizeof(path), "%s/%s", cfg->image_dir, files[i]) < 0)
			errno = ENAMETOOLONG;
		else if (access(path, R_OK) == 0)
			continue;
		fmt_cut(msg, sizeof(msg), "%s: %s", path, strerror(errno));
		row_set(r, DC_MISSING, msg,
		    "make image, then copy it to AAS_IMAGE_DIR readable by all (step 5)");
		return;
	}
	row_set(r, DC_OK, cfg->image_dir, NULL);
}

/* A file of aasd's own in the state directory, for the checks below. */
static int
scratch_file(const struct config *cfg, char *path, size_t n)
{
	int fd;

	if (fmt_buf(path, n, "%s/.check-deployment-XXXXXX", cfg->state_dir) < 0) {
		errno = ENAMETOOLONG;
		return -1;
	}
	fd = mkstemp(path);
	if (fd >= 0)
		close(fd);
	return fd < 0 ? -1 : 0;
}

static void
check_state_dir(const struct config *cfg, struct dc_row *r)
{
	char path[sizeof(cfg->state_dir) + 32], msg[sizeof(path) + 64];

	if (scratch_file(cfg, path, sizeof(path)) < 0) {
		fmt_cut(msg, sizeof(msg), "%s: %s", cfg->state_dir, strerror(errno));
		row_set(r, DC_MISSING, msg, "StateDirectory=aas makes /var/lib/aas aas's own");
		return;
	}
	unlink(path);
	row_set(r, DC_OK, cfg->state_dir, NULL);
}

static void
check_socket_dir(const struct config *cfg, struct dc_row *r)
{
	struct stat sb;

	(void)cfg;
	if (stat("/run/aas-vm", &sb) != 0 || !S_ISDIR(sb.st_mode) || sb.st_uid != geteuid() ||
	    access("/run/aas-vm", W_OK | X_OK) != 0)
		row_set(r, DC_MISSING, "/run/aas-vm is not a directory of aasd's own, writable",
		    "install deploy/aas-tmpfiles.conf and run systemd-tmpfiles --create (step 5)");
	else
		row_set(r, DC_OK, "/run/aas-vm", NULL);
}

/* Each VM's files go to a user of its own (CAP_CHOWN), and aasd reads
 * them back after (CAP_DAC_OVERRIDE): both tried on a scratch file. */
static void
check_vm_users(const struct config *cfg, struct dc_row *r)
{
	char path[sizeof(cfg->state_dir) + 32], msg[700];
	uid_t vm_uid = (uid_t)cfg->qemu_uids.first;
	int fd;

	if (scratch_file(cfg, path, sizeof(path)) < 0) {
		row_set(r, DC_MISSING, "no state directory to try in", "see state_dir");
		return;
	}
	if (chown(path, vm_uid, vm_uid) < 0) {
		fmt_cut(msg, sizeof(msg), "cannot hand a file to VM user %u: %s", (unsigned)vm_uid,
		    strerror(errno));
		row_set(r, DC_MISSING, msg,
		    "the unit's AmbientCapabilities=CAP_CHOWN CAP_DAC_OVERRIDE");
		goto out;
	}
	chmod(path, 0600);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fmt_cut(msg, sizeof(msg), "cannot read back a VM user's file: %s", strerror(errno));
		row_set(r, DC_MISSING, msg,
		    "the unit's AmbientCapabilities=CAP_CHOWN CAP_DAC_OVERRIDE");
		goto out;
	}
	close(fd);
	fmt_cut(msg, sizeof(msg), "VM files go to users %u-%u and back", (unsigned)vm_uid,
	    (unsigned)(vm_uid + cfg->qemu_uids.count - 1));
	row_set(r, DC_OK, msg, NULL);
out:
	unlink(path);
}

/* internet: true, previews and expose_port need a network device, which
 * sandboxes get only with the isolation rule in place. */
static void
check_isolation(const struct config *cfg, struct dc_row *r)
{
	struct netguard_users who;
	enum netguard_source by;
	struct err e;

	if (cfg->net == CONFIG_NET_OFF) {
		row_set(r, DC_WARN, "AAS_NET=off: no sandbox gets a network (internet, previews)",
		    "AAS_NET=auto with the isolation rule (aas-netguard.service)");
		return;
	}
	if (ngcli_users(cfg, &who) < 0) {
		row_set(r, DC_MISSING, "AAS_QEMU_USER names no user", "create aas-qemu (step 3)");
		return;
	}
	err_clear(&e);
	/* Read only: the rule is the watcher's (or the unit's) to install. */
	if (netguard_status_in_force(cfg->netguard_status, &who, cfg->net_allow,
		(long long)time(NULL), 0, &by, &e) < 0)
		row_set(r, DC_MISSING, e.msg,
		    "enable aas-netguard.service (root, CAP_NET_ADMIN only): it keeps the rule and "
		    "records it in AAS_NETGUARD_STATUS; without it no sandbox gets a network device");
	else
		row_set(r, DC_OK, "the isolation rule is in place: internet, expose_port, previews",
		    NULL);
}

/* 1 when /proc hides other users' processes (hidepid, as systemd's
 * ProtectProc=invisible or noaccess mounts it). */
static int
proc_hides_others(void)
{
	char line[1024];
	int hidden = 0;
	FILE *f = fopen("/proc/self/mountinfo", "r");

	while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
		const char *h = strstr(line, "hidepid=");

		if (strstr(line, " /proc ") != NULL && strstr(line, " - proc ") != NULL)
			hidden = h != NULL && strncmp(h + 8, "0", 1) != 0 &&
			    strncmp(h + 8, "off", 3) != 0;
	}
	if (f != NULL)
		fclose(f);
	return hidden;
}

/* Where libvirt puts VMs' memory cgroups on v1: machined's slice, or
 * "machine" on a host without systemd. */
#define V1_SLICE_SYSTEMD "/sys/fs/cgroup/memory/machine.slice"
#define V1_SLICE_PLAIN "/sys/fs/cgroup/memory/machine"

static void
check_cgroups(const struct config *cfg, struct dc_row *r)
{
	char buf[256] = "";
	FILE *f;

	(void)cfg;
	/* The watch finds each VM's QEMU, another user's process, in /proc. */
	if (proc_hides_others()) {
		row_set(r, DC_WARN,
		    "/proc hides other users' processes, so the VMs' QEMU cannot be found: a VM "
		    "stopped by its memory limit reads as a crash",
		    "ProtectProc=default in aasd.service");
		return;
	}
	f = fopen("/sys/fs/cgroup/cgroup.controllers", "r");
	if (f != NULL) {
		if (fgets(buf, sizeof(buf), f) == NULL)
			buf[0] = '\0';
		fclose(f);
	}
	if (strstr(buf, "memory") != NULL) {
		row_set(r, DC_OK, "cgroup v2 memory controller: the OOM reason is seen", NULL);
	} else if (access("/sys/fs/cgroup/memory/memory.oom_control", R_OK) == 0) {
		/* v1 is watched through an eventfd registered by a write to
		 * the VM's cgroup.event_control, which ProtectControlGroups=yes
		 * makes read-only but where the unit's ReadWritePaths= grants
		 * libvirt's machine slice: opened as the watch opens it, in the
		 * slice VMs go to (machine without systemd), nothing written. */
		const char *slice = access(V1_SLICE_SYSTEMD, F_OK) == 0 ? V1_SLICE_SYSTEMD :
		    access(V1_SLICE_PLAIN, F_OK) == 0                   ? V1_SLICE_PLAIN :
									  "/sys/fs/cgroup/memory";
		char path[128];
		int fd = -1;

		if (fmt_buf(path, sizeof(path), "%s/cgroup.event_control", slice) < 0)
			errno = ENAMETOOLONG;
		else
			fd = open(path, O_WRONLY | O_CLOEXEC);

		if (fd >= 0) {
			close(fd);
			row_set(r, DC_OK, "cgroup v1 memory controller: the OOM reason is seen",
			    NULL);
		} else {
			char why[200];

			fmt_cut(why, sizeof(why),
			    "cgroup v1: %.60s cannot be written (%s), so a VM stopped by its memory "
			    "limit reads as a crash",
			    path, strerror(errno));
			row_set(r, DC_WARN, why,
			    "ReadWritePaths=-" V1_SLICE_SYSTEMD
			    " in aasd.service (as deploy/ has it)");
		}
	} else
		row_set(r, DC_WARN, "no memory cgroup readable here: an OOM reads as a crash",
		    "a host with the memory controller (cgroup v2 or v1)");
}

static void
check_public(const struct config *cfg, struct dc_row *r)
{
	if (strncmp(cfg->public_url, "https://", 8) == 0)
		row_set(r, DC_OK, cfg->public_url, NULL);
	else
		row_set(r, DC_WARN, "AAS_PUBLIC_URL is not https: clients would send keys in clear",
		    "AAS_PUBLIC_URL=https://<API host> behind nginx (step 9)");
}

static void
check_previews(const struct config *cfg, struct dc_row *r)
{
	if (cfg->preview_domain[0] == '\0')
		row_set(r, DC_WARN, "AAS_PREVIEW_DOMAIN empty: preview URLs point at localhost",
		    "AAS_PREVIEW_DOMAIN=preview.example.com and the wildcard site in nginx");
	else if (strcmp(cfg->preview_scheme, "https") != 0)
		row_set(r, DC_WARN, "preview URLs are http", "AAS_PREVIEW_SCHEME=https");
	else
		row_set(r, DC_OK, cfg->preview_domain, NULL);
}

static void
check_mail(const struct config *cfg, struct dc_row *r)
{
	if (cfg->smtp_url[0] == '\0')
		row_set(r, DC_MISSING, "no AAS_SMTP_URL: sign-up and password reset send no mail",
		    "AAS_SMTP_URL and AAS_MAIL_FROM (deploy/aasd.env.example)");
	else
		row_set(r, DC_OK, "mail goes to AAS_SMTP_URL", NULL);
}

static void
check_metrics(const struct config *cfg, struct dc_row *r)
{
	if (cfg->metrics_token[0] == '\0')
		row_set(r, DC_WARN,
		    "no AAS_METRICS_TOKEN: /metrics answers anyone who reaches aasd",
		    "AAS_METRICS_TOKEN=<long random>");
	else
		row_set(r, DC_OK, "/metrics wants its token", NULL);
}

static void
check_payments(const struct config *cfg, struct dc_row *r)
{
	if (cfg->stripe_secret_key[0] == '\0')
		row_set(r, DC_WARN, "off: no AAS_STRIPE_SECRET_KEY, credit only by aasctl",
		    "AAS_STRIPE_SECRET_KEY and AAS_STRIPE_WEBHOOK_SECRET");
	else
		row_set(r, DC_OK, "Stripe Checkout", NULL);
}

static const struct {
	const char *name;
	dc_fn fn;
} checks[] = {
	{ "database", check_database },
	{ "libvirt", check_libvirt },
	{ "accelerator", check_accelerator },
	{ "image", check_image },
	{ "state_dir", check_state_dir },
	{ "vm_sockets", check_socket_dir },
	{ "vm_users", check_vm_users },
	{ "internet", check_isolation },
	{ "oom_reason", check_cgroups },
	{ "public_url", check_public },
	{ "previews", check_previews },
	{ "signup_mail", check_mail },
	{ "metrics", check_metrics },
	{ "payments", check_payments },
};

static const char *
env_get(const char *name)
{
	return getenv(name);
}

int
dcheck_main(void)
{
	static const char *const words[] = { "ok", "warn", "missing" };
	struct config *cfg = calloc(1, sizeof(*cfg));
	struct err e;
	int missing = 0;

	err_clear(&e);
	if (cfg == NULL || config_load(cfg, env_get, &e) < 0) {
		printf("missing  settings     %s\n", cfg ? e.msg : "out of memory");
		free(cfg);
		return 2;
	}
	printf("ok       settings     loaded, running as uid %u\n", (unsigned)geteuid());
	for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++) {
		struct dc_row r;

		memset(&r, 0, sizeof(r));
		checks[i].fn(cfg, &r);
		printf("%-8s %-12s %s\n", words[r.status], checks[i].name, r.detail);
		if (r.status != DC_OK && r.fix[0])
			printf("%-8s %-12s fix: %s\n", "", "", r.fix);
		missing += r.status == DC_MISSING;
	}
	printf("%d missing\n", missing);
	free(cfg);
	return missing ? 1 : 0;
}
