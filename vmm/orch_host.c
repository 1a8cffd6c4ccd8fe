/* orch_host.c - the orchestrator's hypervisor hosts (orch.h): found by
 * URI, added while aasd runs, what kind each is (this machine's, with a
 * storage pool of its own, with room to spare), the guest image in a
 * pooled host's pool, and each host's capacity and use. */
#include "vmm/orch.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include <libvirt/virterror.h>

#include "vmm/orch_int.h"
#include "vmm/vpool.h"
#include "base/fmt.h"
#include "base/log.h"

/* The host of `uri`, or NULL with the error every operation reports. */
struct vm_host *
orch_host_or_err(struct orch *o, const char *uri, struct err *e)
{
	struct vm_host *h = orch_host_by_uri(o, uri);

	if (h == NULL)
		err_set(e, ERR_UNAVAILABLE, "unknown hypervisor host %s", uri);
	return h;
}

int
orch_host_idx(struct orch *o, const struct vm_host *h)
{
	for (size_t i = 0; i < o->n_hosts; i++)
		if (o->hosts[i] == h)
			return (int)i;
	return -1;
}

int
orch_is_pooled(struct orch *o, const struct vm_host *h)
{
	int i = orch_host_idx(o, h);

	return i >= 0 && atomic_load(&o->pooled[i]);
}

/* The image's volumes on pooled host h (uploaded and checked the first
 * time): its kernel, initrd and base paths there. */
const struct orch_pool *
orch_pool_ready(struct orch *o, struct vm_host *h, struct err *e)
{
	int i = orch_host_idx(o, h);
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
	if (fmt_err(e, "image id", id, sizeof(id), "%.16s", o->sha_base) < 0)
		goto fail;
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
	int i = orch_host_idx(o, h);

	return i < 0 || !atomic_load(&o->no_spare[i]);
}

/* ---- the host list ---- */

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
orch_uri_this_machine(const char *uri)
{
	const char *p = strstr(uri, "://");

	/* qemu:///..., qemu+unix:///...: no host name, so this machine. */
	return p != NULL && p[3] == '/';
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

/* ---- capacity and use ---- */

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
