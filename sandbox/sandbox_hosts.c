/* sandbox_hosts.c - the service's side of the host table: the hosts this
 * aasd opens, their polls, and placement inside a create. */
#include "sandbox/sandbox_int.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/fmt.h"
#include "base/log.h"
#include "sandbox/catalog.h"
#include "sandbox/hosts.h"
#include "sandbox/place.h"
#include "sandbox/reaper.h"
#include "sandbox/store.h"

/* Tells the VM layer where host `uri` keeps disks: its row's choice, or
 * its own storage pool for a host not on this machine. */
void
sbx_host_storage(struct sbx *s, const char *uri)
{
	struct err e;
	int pooled;

	err_clear(&e);
	pooled = hosts_storage(s->db, uri, &e);
	if (pooled == -2)
		return; /* database trouble: as it was */
	orch_host_set_pooled(s->orch, uri, pooled >= 0 ? pooled : !orch_uri_this_machine(uri));
}

void
sbx_host_spare(struct sbx *s, const char *uri, const struct cat_size *sz)
{
	struct place_need need = { .memory_mib = sz->memory_mib, .vcpus = sz->vcpus };
	struct err e;
	int fits;

	err_clear(&e);
	fits = hosts_fits(s->db, uri, &need, &e);
	if (fits < 0)
		log_debug("hosts: %s: %s", uri, e.msg);
	else
		orch_host_set_spare(s->orch, uri, fits);
}

/* Opens the shared hosts of the table that this aasd has not opened yet;
 * 1 when one was added. A host that cannot be opened now is tried at the
 * next refresh (its state comes from the aasd that can reach it). */
static int
open_shared(struct sbx *s)
{
	struct err e;
	char *list, *save = NULL;
	int added = 0;

	err_clear(&e);
	list = hosts_shared_uris(s->db, &e);
	if (list == NULL)
		return 0;
	for (char *u = strtok_r(list, ",", &save); u; u = strtok_r(NULL, ",", &save)) {
		size_t before = orch_host_count(s->orch);
		err_clear(&e);
		if (orch_host_add(s->orch, u, &e) < 0) {
			log_warn("hosts: cannot open %s: %s", u, e.msg);
		} else if (orch_host_count(s->orch) > before) {
			sbx_host_storage(s, u);
			added = 1;
		}
	}
	free(list);
	return added;
}

int
sbx_hosts_csv(struct sbx *s, char *out, size_t n)
{
	size_t len = 0;

	out[0] = '\0';
	for (size_t i = 0; i < orch_host_count(s->orch); i++) {
		if (fmt_buf(out + len, n - len, "%s%s", len ? "," : "",
			orch_host_uri_at(s->orch, i)) < 0)
			return -1;
		len += strlen(out + len);
	}
	return 0;
}

/* A host is called down only by an aasd whose own polls have all failed
 * for AAS_HOST_DOWN_S, and only when nobody saw it answer meanwhile: one
 * failed poll after a long pause of this thread (a slow boot of a warm
 * VM) is not a lost host. */
static void
poll_hosts(struct sbx *s)
{
	long long now = clock_ms();

	for (size_t i = 0; i < orch_host_count(s->orch) && i < ORCH_MAX_HOSTS; i++) {
		const char *uri = orch_host_uri_at(s->orch, i);
		long long *since = &s->host_failing_since_ms[i];
		struct orch_host_stats st;
		struct err e, re;
		int long_enough;

		err_clear(&e);
		err_clear(&re);
		sbx_host_storage(s, uri);
		if (orch_host_stats(s->orch, uri, &st, &e) == 0) {
			*since = 0;
			if (hosts_report(s->db, uri, &st, NULL, 0, &re) < 0)
				log_warn("hosts: %s: %s", uri, re.msg);
			/* A host of this machine has the rule aasd checks. */
			if (orch_uri_net_checked_here(uri) &&
			    hosts_set_isolation(s->db, uri,
				sbx_net_available(s, NULL, 0) ? s->net_rule : NULL, &re) < 0)
				log_warn("hosts: %s: %s", uri, re.msg);
			continue;
		}
		if (*since == 0)
			*since = now;
		long_enough = now - *since >= s->cfg->host_down_s * 1000LL;
		log_warn("hosts: %s: %s", uri, e.msg);
		if (hosts_report(s->db, uri, NULL, e.msg, long_enough ? s->cfg->host_down_s : -1,
			&re) < 0)
			log_warn("hosts: %s: %s", uri, re.msg);
	}
}

int
sbx_hosts_init(struct sbx *s, struct err *e)
{
	for (size_t i = 0; i < orch_host_count(s->orch); i++)
		if (hosts_register(s->db, orch_host_uri_at(s->orch, i), e) < 0)
			return -1;
	open_shared(s);
	/* Capacity is known before the first create. */
	poll_hosts(s);
	s->hosts_polled_ms = clock_ms();
	return 0;
}

int
sbx_hosts_refresh(struct sbx *s, long long now_ms)
{
	char csv[ORCH_MAX_HOSTS * 260];
	struct err e;

	int every_s = s->cfg->host_down_s / 3;

	if (every_s > SBX_HOST_POLL_S)
		every_s = SBX_HOST_POLL_S;
	if (now_ms - s->hosts_polled_ms < every_s * 1000LL)
		return 0;
	s->hosts_polled_ms = now_ms;
	err_clear(&e);
	if (open_shared(s) && s->reaper && sbx_hosts_csv(s, csv, sizeof(csv)) == 0 &&
	    reap_set_hosts(s->reaper, csv, &e) < 0)
		log_warn("hosts: %s", e.msg);
	poll_hosts(s);
	return 1;
}

const char *
sbx_rule_for(struct sbx *s, enum vm_net net)
{
	return net == VM_NET_NONE ? NULL : s->net_rule;
}

int
sbx_place(PGconn *c, struct sbx *s, const char *size, enum vm_net net, char *host, size_t n,
    struct store_new *row, struct err *e)
{
	char csv[ORCH_MAX_HOSTS * 260];

	if (sbx_hosts_csv(s, csv, sizeof(csv)) < 0) {
		err_set(e, ERR_INTERNAL, "placement: bad host list");
		return -1;
	}
	return sbx_place_in(c, s, csv, size, net, host, n, row, e);
}

int
sbx_place_in(PGconn *c, struct sbx *s, const char *csv, const char *size, enum vm_net net,
    char *host, size_t n, struct store_new *row, struct err *e)
{
	const struct cat_size *sz = cat_find(size);
	char uris[ORCH_MAX_HOSTS * 270];
	struct place_need need;
	int rc;

	if (sz == NULL || db_array_literal(csv, uris, sizeof(uris)) < 0) {
		err_set(e, ERR_INTERNAL, "placement: bad size or host list");
		return -1;
	}
	need.memory_mib = sz->memory_mib;
	need.vcpus = sz->vcpus;
	rc = hosts_reserve(c, uris, &need, sbx_rule_for(s, net), host, n, e);
	if (rc < 0)
		return -1;
	/* Hosts that take no network device were not looked at: said so. */
	if (rc == 0 && net != VM_NET_NONE &&
	    (rc = hosts_count_without_rule(c, uris, sbx_rule_for(s, net), e)) != 0) {
		if (rc > 0)
			err_set(e, ERR_CAPACITY,
			    "no capacity for size %s with a network device right now: the hosts that"
			    " can isolate sandbox networks are full; try again in %d s, a smaller size,"
			    " or internet: false",
			    size, HOSTS_RETRY_AFTER_S);
		return -1;
	}
	if (rc == 0) {
		err_set(e, ERR_CAPACITY,
		    "no capacity for size %s right now: every host is full; try again in %d s"
		    " or a smaller size",
		    size, HOSTS_RETRY_AFTER_S);
		return -1;
	}
	row->host = host;
	row->reserved_memory_mib = sz->memory_mib;
	row->reserved_vcpus = sz->vcpus;
	return 0;
}
