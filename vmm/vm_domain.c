/* vm_domain.c - the operations on one domain of a host (vm.h): start,
 * destroy, look, list, pause, save and restore. */
#include "vmm/vm.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libvirt/libvirt-qemu.h>
#include <libvirt/virterror.h>

#include "base/fmt.h"
#include "base/log.h"
#include "vmm/vm_int.h"

/* The memory cgroup limit of the domain's QEMU. Set on the paused domain
 * rather than in its XML: libvirt raises QEMU's locked-memory limit to a
 * <hard_limit> in the XML before exec, which needs CAP_SYS_RESOURCE. */
int
vm_set_memory_limit_kib(virDomainPtr d, unsigned long long kib, const char *name, struct err *e)
{
	virTypedParameter p;

	memset(&p, 0, sizeof(p));
	if (fmt_err(e, "parameter name", p.field, sizeof(p.field), "%s",
		VIR_DOMAIN_MEMORY_HARD_LIMIT) < 0)
		return -1;
	p.type = VIR_TYPED_PARAM_ULLONG;
	p.value.ul = kib;
	if (virDomainSetMemoryParameters(d, &p, 1, VIR_DOMAIN_AFFECT_LIVE) < 0) {
		err_set(e, ERR_UNAVAILABLE, "cannot limit the memory of VM %s: %s", name,
		    vm_last_error());
		return -1;
	}
	return 0;
}

static int
set_memory_limit(virDomainPtr d, unsigned mib, const char *name, struct err *e)
{
	return vm_set_memory_limit_kib(d, (unsigned long long)mib * 1024, name, e);
}

/* Lets go of what starting or restoring a domain held (d may be NULL):
 * the domain, its XML and the connection; returns rc. */
static int
start_end(virConnectPtr c, virDomainPtr d, char *xml, int rc)
{
	if (d)
		virDomainFree(d);
	free(xml);
	virConnectClose(c);
	return rc;
}

int
vm_start(struct vm_host *h, const struct vm_spec *spec, struct err *e)
{
	virConnectPtr c = vm_conn_or_err(h, e);
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
		err_set(e, ERR_UNAVAILABLE, "cannot start VM %s: %s", spec->name, vm_last_error());
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
		if (vm_console_attach_domain(h, d, spec->name, spec->console_log, spec->console_max,
			&ce) < 0)
			log_warn("vm %s: console not kept: %s", spec->name, ce.msg);
	}
	if (paused && virDomainResume(d) < 0) {
		err_set(e, ERR_UNAVAILABLE, "cannot start VM %s: %s", spec->name, vm_last_error());
		virDomainDestroy(d);
		vm_console_detach(h, spec->name);
		goto out;
	}
	rc = 0;
out:
	return start_end(c, d, xml, rc);
}

int
vm_monitor_hmp(struct vm_host *h, const char *name, const char *cmd, char *reply, size_t rn,
    struct err *e)
{
	virDomainPtr d = vm_domain_get(h, name, 0, e);
	char *answer = NULL;
	int rc = -1;

	if (d == NULL)
		return -1;
	if (virDomainQemuMonitorCommand(d, cmd, &answer, VIR_DOMAIN_QEMU_MONITOR_COMMAND_HMP) < 0) {
		err_set(e, ERR_UNAVAILABLE, "monitor of %s: %s", name, vm_last_error());
		goto out;
	}
	fmt_cut(reply, rn, "%s", answer ? answer : "");
	rc = 0;
out:
	free(answer);
	virDomainFree(d);
	return rc;
}

int
vm_destroy(struct vm_host *h, const char *name, struct err *e)
{
	virConnectPtr c = vm_conn_or_err(h, e);
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
			err_set(e, ERR_UNAVAILABLE, "cannot look up %s: %s", name, vm_last_error());
			rc = -1;
		}
	} else {
		if (virDomainDestroy(d) < 0) {
			virErrorPtr ve = virGetLastError();
			/* Gone in between: that is what we wanted. */
			if (ve == NULL || ve->code != VIR_ERR_NO_DOMAIN) {
				err_set(e, ERR_UNAVAILABLE, "cannot destroy %s: %s", name,
				    vm_last_error());
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
	struct err le;
	virDomainPtr d;
	int rc;

	err_clear(&le);
	d = vm_domain_get(h, name, 0, &le);
	if (d == NULL) {
		/* A domain not found is not running; an unreachable host is an error. */
		if (le.kind == ERR_NOT_FOUND)
			return 0;
		err_set(e, le.kind, "%s", le.msg);
		return -1;
	}
	rc = virDomainIsActive(d) == 1;
	virDomainFree(d);
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
	if ((c = vm_conn_or_err(h, e)) == NULL)
		return -1;
	count = virConnectListAllDomains(c, &doms, VIR_CONNECT_LIST_DOMAINS_ACTIVE);
	if (count < 0) {
		err_set(e, ERR_UNAVAILABLE, "cannot list domains on %s: %s", h->uri,
		    vm_last_error());
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
	if ((c = vm_conn_or_err(h, e)) == NULL)
		return -1;
	d = virDomainLookupByName(c, name);
	if (d == NULL) {
		err_set(e, ERR_NOT_FOUND, "no VM %s", name);
	} else if (virDomainGetInfo(d, &info) < 0) {
		err_set(e, ERR_UNAVAILABLE, "cannot read VM %s: %s", name, vm_last_error());
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

/* Runs `op` on domain `name` of h, with `arg`. */
static int
domain_op(struct vm_host *h, const char *name, int (*op)(virDomainPtr, const char *),
    const char *arg, const char *what, struct err *e)
{
	virDomainPtr d = vm_domain_get(h, name, 1, e);
	int rc = -1;

	if (d == NULL)
		return -1;
	if (op(d, arg) < 0)
		err_set(e, ERR_UNAVAILABLE, "cannot %s %s: %s", what, name, vm_last_error());
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
	virConnectPtr c = vm_conn_or_err(h, e);
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
		err_set(e, ERR_UNAVAILABLE, "cannot restore %s: %s", path, vm_last_error());
		goto out;
	}
	d = virDomainLookupByName(c, name);
	if (d == NULL) {
		err_set(e, ERR_UNAVAILABLE, "VM %s is gone after its restore", name);
		goto out;
	}
	if ((limit_kib > 0 && vm_set_memory_limit_kib(d, limit_kib, name, e) < 0) ||
	    virDomainResume(d) < 0) {
		if (e->kind == ERR_NONE)
			err_set(e, ERR_UNAVAILABLE, "cannot run %s: %s", name, vm_last_error());
		virDomainDestroy(d);
		goto out;
	}
	rc = 0;
out:
	return start_end(c, d, xml, rc);
}
