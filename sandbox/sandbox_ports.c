/* sandbox_ports.c - exposed ports (expose_port, list_ports), their
 * forwards made again on a sandbox's new QEMU, and the routing of preview
 * requests to them. */
#include "sandbox/sandbox_int.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/fmt.h"
#include "base/keys.h"
#include "base/log.h"
#include "base/num.h"
#include "sandbox/hosts.h"
#include "sandbox/preview.h"
#include "vmm/guest_listen.h"

static int
port_url(struct sbx *s, const char *id, int port, char *out, size_t n)
{
	const struct config *cfg = s->cfg;

	return preview_url(cfg->preview_scheme, cfg->preview_domain, id, port, out, n);
}

json_t *
sbx_ports_json(struct sbx *s, const char *id, struct err *e)
{
	struct store_port *ports;
	size_t n;
	json_t *arr;

	if (store_ports(s->db, id, &ports, &n, e) < 0)
		return NULL;
	arr = json_array();
	for (size_t i = 0; arr && i < n; i++) {
		char url[512];

		if (port_url(s, id, ports[i].port, url, sizeof(url)) < 0)
			continue;
		json_array_append_new(arr,
		    json_pack("{s:i, s:s, s:b, s:s}", "port", ports[i].port, "url", url, "public",
			ports[i].public, "created_at", ports[i].created_at));
	}
	free(ports);
	if (arr == NULL)
		err_set(e, ERR_INTERNAL, "out of memory");
	return arr;
}

json_t *
sbx_list_ports(struct sbx *s, const char *account, const char *id, struct err *e)
{
	struct store_row row;
	json_t *ports;

	if (store_load(s->db, account, id, &row, e) < 0)
		return NULL;
	ports = sbx_ports_json(s, id, e);
	return ports ? json_pack("{s:s, s:o}", "sandbox_id", id, "ports", ports) : NULL;
}

size_t
sbx_forward_again(struct sbx *s, const char *id, const char *host, int *ports, int *host_ports,
    size_t max)
{
	struct store_port *list = NULL;
	char address[64];
	size_t n = 0, done = 0;
	struct err e;

	err_clear(&e);
	if (hosts_address(s->db, host, address, sizeof(address), &e) < 0 ||
	    store_ports(s->db, id, &list, &n, &e) < 0) {
		log_warn("sandbox %s: its previews were not forwarded again: %s", id, e.msg);
		return 0;
	}
	for (size_t i = 0; i < n && done < max; i++) {
		err_clear(&e);
		if (orch_forward_add(s->orch, host, id, address, list[i].port, &host_ports[done],
			&e) < 0) {
			log_warn("sandbox %s: port %d not forwarded again: %s", id, list[i].port,
			    e.msg);
			continue;
		}
		ports[done++] = list[i].port;
	}
	free(list);
	return done;
}

/* A private port's answer gets its token and a signed URL that opens the
 * preview without it until the URL expires. */
static int
signed_url_add(struct sbx *s, const struct sbx_expose_req *req, const char *url, const char *token,
    const char *hash, json_t *out, struct err *e)
{
	long long exp = (long long)time(NULL) + s->cfg->preview_signed_ttl_s;
	char sig[PREVIEW_SIG_HEX + 1], signed_url[768], when[32];
	time_t t = (time_t)exp;
	struct tm tm;

	if (preview_sign(hash, req->sandbox_id, req->port, exp, sig, sizeof(sig)) < 0) {
		err_set(e, ERR_INTERNAL, "signing failed");
		return -1;
	}
	if (fmt_err(e, "signed URL", signed_url, sizeof(signed_url), "%s?%s=%lld&%s=%s", url,
		PREVIEW_Q_EXP, exp, PREVIEW_Q_SIG, sig) < 0)
		return -1;
	gmtime_r(&t, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	json_object_set_new(out, "token", json_string(token));
	json_object_set_new(out, "signed_url", json_string(signed_url));
	json_object_set_new(out, "signed_url_expires_at", json_string(when));
	return 0;
}

json_t *
sbx_expose_port(struct sbx *s, const char *account, const struct sbx_expose_req *req, struct err *e)
{
	const char *id = req->sandbox_id;
	int port = req->port;
	int public = req->public;
	char token[KEY_TEXT_LEN + 1], hash[KEY_HASH_HEX_LEN + 1] = "", url[512];
	char domain[64], address[64];
	struct store_row row;
	int host_port = 0, exists = 0, inserted = 0;
	json_t *out = NULL;

	if (sbx_running(s, account, id, &row, domain, sizeof(domain), e) == NULL)
		return NULL;
	if (strcmp(row.net, "none") == 0) {
		char why[300];
		sbx_net_available(s, why, sizeof(why));
		err_set(e, ERR_CONFLICT,
		    "sandbox %s has no network device, so no port can be"
		    " exposed (%s)",
		    id,
		    why[0] ? why :
			     "it was created while networking was"
			     " unavailable");
		return NULL;
	}
	if (port_url(s, id, port, url, sizeof(url)) < 0) {
		err_set(e, ERR_INTERNAL, "preview URL too long");
		return NULL;
	}
	if (store_port_exists(s->db, id, port, &exists, e) < 0)
		return NULL;
	if (exists) {
		err_set_at(e, ERR_CONFLICT, "port", "port: %d is already exposed at %s", port, url);
		return NULL;
	}
	{
		long long n;
		int cap = s->cfg->max_ports_per_sandbox;

		/* Each exposed port is a listener on the host: bounded per sandbox. */
		if (store_port_count(s->db, id, &n, e) < 0)
			return NULL;
		if (n >= cap) {
			err_set_at(e, ERR_LIMIT, "port",
			    "port: sandbox %s has %lld exposed ports, the most allowed "
			    "(AAS_MAX_PORTS_PER_SANDBOX=%d)",
			    id, n, cap);
			return NULL;
		}
	}
	if (!public) {
		/* Shown once; only the hash is kept. */
		memcpy(token, "aas_pt_", 7);
		if (key_random_hex(token + 7, sizeof(token) - 7, 20) < 0) {
			err_set(e, ERR_INTERNAL, "random generator failed");
			return NULL;
		}
		key_hash_hex(token, strlen(token), hash, sizeof(hash));
	}
	if (hosts_address(s->db, row.host, address, sizeof(address), e) < 0 ||
	    orch_forward_add(s->orch, row.host, id, address, port, &host_port, e) < 0)
		return NULL;
	if (store_port_insert(s->db, id, port, public, host_port, hash,
		s->cfg->max_ports_per_sandbox, &inserted, e) < 0 ||
	    !inserted) {
		struct err ignore;
		err_clear(&ignore);
		err_ignore(orch_forward_remove(s->orch, row.host, id, address, host_port, &ignore));
		if (e->kind == ERR_NONE)
			err_set_at(e, ERR_CONFLICT, "port",
			    "port: %d is already exposed at %s"
			    " (or the sandbox stopped)",
			    port, url);
		return NULL;
	}
	log_info("sandbox %s: port %d exposed (%s) via %s:%d", id, port,
	    public ? "public" : "private", address[0] ? address : ORCH_FORWARD_LOOPBACK, host_port);
	out = json_pack("{s:s, s:i, s:s, s:b}", "sandbox_id", id, "port", port, "url", url,
	    "public", public);
	if (out && !public && signed_url_add(s, req, url, token, hash, out, e) < 0) {
		json_decref(out);
		return NULL;
	}
	return out;
}

/* ---- preview requests ---- */

#define PREVIEW_PAUSED_MSG                                                       \
	"The sandbox is paused, so nothing inside it can answer. Resume it with" \
	" resume_sandbox, then reload."

static void
route_fail(struct preview_route *out, int status, const char *msg)
{
	out->status = status;
	fmt_cut(out->message, sizeof(out->message), "%s", msg);
}

/* Forwards listen on the loopback of the VM's host, which is this
 * machine only for local libvirt URIs. */
/* 0 allowed, else the status to answer. A valid signed URL also sets a
 * cookie so the page's own requests (scripts, images) pass. */
static int
preview_allowed(const char *scheme, const char *hash, const char *id, int port,
    const struct preview_ask *ask, struct preview_route *out)
{
	char exp[24], sig[PREVIEW_SIG_HEX + 2], cookie[128];
	const char *cname = preview_cookie_name(scheme), *pos = NULL;
	time_t now = time(NULL);
	int offered = 0;

	if (ask->token) {
		char th[KEY_HASH_HEX_LEN + 1];
		offered = 1;
		key_hash_hex(ask->token, strlen(ask->token), th, sizeof(th));
		if (key_hash_equal(th, hash))
			return 0;
	}
	if (ask->query && preview_query_get(ask->query, PREVIEW_Q_EXP, exp, sizeof(exp)) &&
	    preview_query_get(ask->query, PREVIEW_Q_SIG, sig, sizeof(sig))) {
		offered = 1;
		long long exp_at;
		if (preview_sig_valid(hash, id, port, exp, sig, now) &&
		    num_parse_ll(exp, &exp_at) == 0) {
			if (preview_cookie_value(scheme, exp, sig, exp_at - (long long)now,
				out->set_cookie, sizeof(out->set_cookie)) < 0)
				out->set_cookie[0] = '\0';
			return 0;
		}
	}
	/* Every cookie of the name is tried: another one cannot shadow it. */
	while (ask->cookie &&
	    preview_cookie_next(ask->cookie, cname, &pos, cookie, sizeof(cookie))) {
		char *dot = strchr(cookie, '.');
		offered = 1;
		if (dot) {
			*dot = '\0';
			if (preview_sig_valid(hash, id, port, cookie, dot + 1, now))
				return 0;
		}
	}
	return offered ? 403 : 401;
}

void
sbx_preview_route(struct sbx *s, const struct preview_ask *ask, struct preview_route *out)
{
	char label[128], id[PREVIEW_ID_MAX + 1];
	struct store_preview pv;
	struct err e;
	int port, st, found;

	if (!preview_under_domain(ask->host, s->cfg->preview_domain, label, sizeof(label)) ||
	    preview_parse_label(label, &port, id, sizeof(id)) < 0) {
		route_fail(out, 404,
		    "There is no preview at this address. Preview addresses look"
		    " like <port>-<sandbox_id>.<domain>; expose_port gives them.");
		return;
	}
	err_clear(&e);
	if (store_preview_lookup(s->db, id, port, &pv, &found, &e) < 0) {
		route_fail(out, 503,
		    "The preview service cannot reach its database; retry shortly.");
		return;
	}
	if (!found) {
		route_fail(out, 404,
		    "This preview does not exist: the port is not exposed, or"
		    " the sandbox was destroyed.");
		return;
	}
	if (strcmp(pv.state, "running") != 0) {
		route_fail(out, 503, PREVIEW_PAUSED_MSG);
		return;
	}
	out->upstream_port = pv.host_port;
	out->guest_port = port;
	/* Forwards listen on the host's private address; a host on this
	 * machine without one has them on the loopback. */
	if (pv.address[0] == '\0' && !orch_uri_this_machine(pv.host)) {
		route_fail(out, 502,
		    "This sandbox runs on a hypervisor host without a private address"
		    " (aasctl host add --preview-address), so its previews cannot be reached.");
		return;
	}
	if (fmt_buf(out->sandbox_id, sizeof(out->sandbox_id), "%s", id) < 0 ||
	    fmt_buf(out->account_id, sizeof(out->account_id), "%s", pv.account) < 0 ||
	    fmt_buf(out->upstream_address, sizeof(out->upstream_address), "%s",
		pv.address[0] ? pv.address : ORCH_FORWARD_LOOPBACK) < 0) {
		route_fail(out, 502,
		    "This preview's sandbox or host has a name too long to route.");
		return;
	}
	if (!pv.public &&
	    (st = preview_allowed(s->cfg->preview_scheme, pv.token_hash, id, port, ask, out)) !=
		0) {
		route_fail(out, st,
		    st == 401 ?
			"This preview is private. Send the token from"
			" expose_port in the x-aas-preview-token header, or open its signed URL." :
			"The preview token or signed URL is wrong or has expired.");
		return;
	}
}

void
sbx_preview_explain(struct sbx *s, const struct preview_route *r, char *msg, size_t n)
{
	struct store_row row;
	struct vm_host *h;
	char domain[64];
	struct err e;
	int port = r->guest_port, st = -1;

	memset(&row, 0, sizeof(row));
	err_clear(&e);
	h = sbx_running(s, r->account_id, r->sandbox_id, &row, domain, sizeof(domain), &e);
	if (h == NULL && e.kind == ERR_CONFLICT && strcmp(row.state, "destroyed") != 0 &&
	    strcmp(row.state, "destroying") != 0 && strcmp(row.state, "failed") != 0) {
		fmt_cut(msg, n, "%s", PREVIEW_PAUSED_MSG);
		return;
	}
	if (h != NULL)
		st = guest_listen_probe(h, domain, port, &e);
	switch (st) {
	case GUEST_LISTEN_NONE:
		fmt_cut(msg, n,
		    "Nothing is listening on port %d inside the sandbox. Start a server that"
		    " listens on 0.0.0.0:%d (for example: python3 -m http.server %d &), then"
		    " reload.",
		    port, port, port);
		break;
	case GUEST_LISTEN_LOOPBACK:
		fmt_cut(msg, n,
		    "A server listens on port %d inside the sandbox, but only on 127.0.0.1 (or"
		    " ::1), which a preview cannot reach. Make it listen on 0.0.0.0, then reload.",
		    port);
		break;
	case GUEST_LISTEN_ANY:
		fmt_cut(msg, n,
		    "The server on port %d inside the sandbox closed the connection without"
		    " answering: it may have crashed or refused the request. Look at its output"
		    " with get_command, then reload.",
		    port);
		break;
	default:
		fmt_cut(msg, n,
		    "Nothing is answering on port %d inside the sandbox, and the sandbox could"
		    " not be asked why. Start a server listening on 0.0.0.0:%d, then reload.",
		    port, port);
		break;
	}
}
