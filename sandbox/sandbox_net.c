/* sandbox_net.c - sandbox networking: the isolation rule's state and the
 * network device each VM gets. Exposed ports are in sandbox_ports.c. */
#include "sandbox/sandbox_int.h"

#include <string.h>

#include "base/clock.h"
#include "base/fmt.h"
#include "base/log.h"

/* A boot trusts a check at most this old, either way: a rule flushed
 * since is seen before a VM gets a device, one put back (or a watcher
 * started) soon after. */
#define NET_CHECK_MAX_AGE_MS 5000

static void
net_set(struct sbx *s, int ok, const char *why)
{
	pthread_mutex_lock(&s->cap_lock);
	if (s->net_ok != ok || strcmp(s->net_why, why) != 0) {
		if (ok)
			log_info("net: isolation rule in place; sandboxes get a network device");
		else
			log_warn("net: sandboxes get no network device: %s", why);
	}
	s->net_ok = ok;
	s->net_checked_ms = clock_ms();
	fmt_cut(s->net_why, sizeof(s->net_why), "%s", why);
	pthread_mutex_unlock(&s->cap_lock);
}

int
sbx_net_init(struct sbx *s, struct err *e)
{
	struct err ne;

	if (s->cfg->net == CONFIG_NET_OFF) {
		net_set(s, 0, "networking is switched off on this server (AAS_NET=off)");
		return 0;
	}
	err_clear(&ne);
	if (orch_net_ensure(s->orch, &ne) == 0) {
		net_set(s, 1, "");
		return 0;
	}
	net_set(s, 0, ne.msg);
	if (s->cfg->net == CONFIG_NET_ON) {
		err_set(e, ERR_UNAVAILABLE, "AAS_NET=on but %s", ne.msg);
		return -1;
	}
	return 0;
}

void
sbx_net_refresh(struct sbx *s)
{
	struct err ne;

	if (s->cfg->net == CONFIG_NET_OFF)
		return;
	err_clear(&ne);
	if (orch_net_ensure(s->orch, &ne) == 0)
		net_set(s, 1, "");
	else
		net_set(s, 0, ne.msg);
}

int
sbx_net_available(struct sbx *s, char *why, size_t n)
{
	int ok, stale;

	pthread_mutex_lock(&s->cap_lock);
	stale = clock_ms() - s->net_checked_ms > NET_CHECK_MAX_AGE_MS;
	pthread_mutex_unlock(&s->cap_lock);
	if (stale)
		sbx_net_refresh(s);
	pthread_mutex_lock(&s->cap_lock);
	ok = s->net_ok;
	if (why)
		fmt_cut(why, n, "%s", s->net_why);
	pthread_mutex_unlock(&s->cap_lock);
	return ok;
}

int
sbx_net_state(struct sbx *s, char *why, size_t n)
{
	return sbx_net_available(s, why, n);
}

int
sbx_net_for(struct sbx *s, int internet, enum vm_net *net, struct err *e)
{
	char why[300];

	if (sbx_net_available(s, why, sizeof(why))) {
		*net = internet ? VM_NET_NAT : VM_NET_ISOLATED;
		return 0;
	}
	if (internet) {
		err_set_at(e, ERR_UNAVAILABLE, "internet",
		    "internet: sandbox networking is unavailable on this server (%s);"
		    " create with internet: false for a sandbox without a network",
		    why);
		return -1;
	}
	*net = VM_NET_NONE;
	return 0;
}

enum vm_net
sbx_net_pool(struct sbx *s)
{
	return sbx_net_available(s, NULL, 0) ? VM_NET_NAT : VM_NET_NONE;
}

enum vm_net
sbx_net_parse(const char *name)
{
	if (strcmp(name, "nat") == 0)
		return VM_NET_NAT;
	if (strcmp(name, "isolated") == 0)
		return VM_NET_ISOLATED;
	return VM_NET_NONE;
}
