/* vm_migrate.c - a running domain moved live to another host (vm.h:
 * vm_migrate), peer to peer and tunnelled through libvirt. */
#include "vmm/vm.h"

#include <stdlib.h>

#include <libvirt/virterror.h>

#include "base/log.h"
#include "vmm/vm_int.h"

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

	if ((d = vm_domain_get(src, name, 1, e)) == NULL)
		goto out;
	xml = migratable_xml(d, socket_dir, socket_base, &limit_kib);
	if (xml == NULL ||
	    virTypedParamsAddString(&params, &np, &maxp, VIR_MIGRATE_PARAM_DEST_XML, xml) < 0) {
		err_set(e, ERR_UNAVAILABLE, "cannot describe %s for its move: %s", name,
		    vm_last_error());
		goto out;
	}
	/* Files that are the same on both hosts are safe to share whatever
	 * their cache mode: QEMU hands the image over at the switch. */
	flags |= shared_storage ? VIR_MIGRATE_UNSAFE : VIR_MIGRATE_NON_SHARED_INC;
	if (virDomainMigrateToURI3(d, dst->uri, params, (unsigned)np, flags) < 0) {
		err_set(e, ERR_UNAVAILABLE, "cannot move %s to %s: %s", name, dst->uri,
		    vm_last_error());
		goto out;
	}
	rc = 0;
	*pause_ms = -1;
	if ((dc = vm_host_conn(dst)) != NULL && (moved = virDomainLookupByName(dc, name)) != NULL)
		*pause_ms = move_pause_ms(moved);
	/* Moved: a limit that cannot be set again is reported, and the VM
	 * runs on without it rather than not at all. */
	if (limit_kib > 0 &&
	    (moved == NULL || vm_set_memory_limit_kib(moved, limit_kib, name, e) < 0))
		log_warn("vm %s: no memory limit after its move to %s: %s", name, dst->uri,
		    e->msg[0] ? e->msg : vm_last_error());
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
