/* config.c - struct config from the environment by the one table of
 * variables (config_table.c): each value in its kind's form, then the
 * derived defaults; and the Origin allow-list. */
#include "base/config.h"
#include "base/config_int.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/fmt.h"
#include "base/log.h"
#include "base/num.h"
#include "base/smtp.h"

static int
set_listen(struct config *cfg, const char *v)
{
	const char *colon = strrchr(v, ':');
	long long port;
	size_t hlen;

	if (colon == NULL || colon == v)
		return -1;
	hlen = (size_t)(colon - v);
	if (v[0] == '[') {
		if (hlen < 3 || v[hlen - 1] != ']')
			return -1;
		v++;
		hlen -= 2;
	}
	if (hlen >= sizeof(cfg->listen_host) || memchr(v, ']', hlen) != NULL ||
	    memchr(v, '[', hlen) != NULL)
		return -1;
	/* A colon in the host only inside brackets (an IPv6 address). */
	if (v == colon - hlen && memchr(v, ':', hlen) != NULL)
		return -1;
	if (num_parse_ll(colon + 1, &port) < 0 || port < 1 || port > 65535)
		return -1;
	memcpy(cfg->listen_host, v, hlen);
	cfg->listen_host[hlen] = '\0';
	cfg->listen_port = (int)port;
	return 0;
}

static int
valid_http_url(const char *v)
{
	const char *host;

	if (strncmp(v, "http://", 7) == 0)
		host = v + 7;
	else if (strncmp(v, "https://", 8) == 0)
		host = v + 8;
	else
		return 0;
	if (*host == '\0' || *host == '/' || *host == ':')
		return 0;
	for (const char *p = v; *p; p++)
		if (!isgraph((unsigned char)*p))
			return 0;
	return 1;
}

static int
set_origins(struct config *cfg, const char *v)
{
	const char *p = v;

	cfg->n_allowed_origins = 0;
	while (*p) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		char tmp[128];

		while (len > 0 && isspace((unsigned char)*p)) {
			p++;
			len--;
		}
		while (len > 0 && isspace((unsigned char)p[len - 1]))
			len--;
		if (len > 0) {
			if (len >= sizeof(tmp) || cfg->n_allowed_origins >= CONFIG_MAX_ORIGINS)
				return -1;
			memcpy(tmp, p, len);
			tmp[len] = '\0';
			if (strcmp(tmp, "*") != 0 && !valid_http_url(tmp))
				return -1;
			if (len > 1 && tmp[len - 1] == '/')
				tmp[len - 1] = '\0';
			memcpy(cfg->allowed_origins[cfg->n_allowed_origins++], tmp, len + 1);
		}
		if (end == NULL)
			break;
		p = end + 1;
	}
	return 0;
}

static int
set_pool(struct config *cfg, const char *v)
{
	static const char *const names[] = { "small", "medium", "large" };
	const char *p = v;

	memset(cfg->warm_pool, 0, sizeof(cfg->warm_pool));
	while (*p) {
		size_t len = strcspn(p, ",");
		const char *eq = memchr(p, '=', len);
		int found = 0;
		long long n;
		char num[16];

		if (eq == NULL || (size_t)(p + len - eq - 1) >= sizeof(num) ||
		    p + len - eq - 1 == 0)
			return -1;
		memcpy(num, eq + 1, (size_t)(p + len - eq - 1));
		num[p + len - eq - 1] = '\0';
		if (num_parse_ll(num, &n) < 0 || n < 0 || n > 64)
			return -1;
		for (size_t i = 0; i < 3; i++) {
			if ((size_t)(eq - p) == strlen(names[i]) &&
			    strncmp(p, names[i], (size_t)(eq - p)) == 0) {
				cfg->warm_pool[i] = (int)n;
				found = 1;
			}
		}
		if (!found)
			return -1;
		p += len;
		if (*p == ',')
			p++;
	}
	return 0;
}

int
config_cidr_canon(const char *s, char *out, size_t n)
{
	unsigned char a[16];
	char addr[INET6_ADDRSTRLEN + 1], text[INET6_ADDRSTRLEN];
	const char *slash = strchr(s, '/');
	size_t alen = slash ? (size_t)(slash - s) : strlen(s);
	int fam, bits;
	long long len;

	if (alen == 0 || alen >= sizeof(addr))
		return -1;
	memcpy(addr, s, alen);
	addr[alen] = '\0';
	fam = strchr(addr, ':') ? AF_INET6 : AF_INET;
	bits = fam == AF_INET6 ? 128 : 32;
	if (inet_pton(fam, addr, a) != 1)
		return -1;
	len = bits;
	if (slash != NULL && (num_parse_ll(slash + 1, &len) < 0 || len < 0 || len > bits))
		return -1;
	/* "10.1.2.3/8" is most likely a mistake: say so rather than guess. */
	for (int i = (int)len; i < bits; i++)
		if (a[i / 8] & (0x80 >> (i % 8)))
			return -1;
	if (inet_ntop(fam, a, text, sizeof(text)) == NULL)
		return -1;
	if (fmt_buf(out, n, "%s/%lld", text, len) < 0)
		return -1;
	return fam == AF_INET6 ? 6 : 4;
}

/* AAS_NET_ALLOW: every range checked, kept in canonical form. */
/* "FIRST-LAST": below 1000 are system users, from 2^31 - 1 on uids are
 * unsafe for tools that read them as signed. */
static int
set_uids(char *field, const char *v)
{
	struct config_uids *u = (struct config_uids *)(void *)field;
	const char *dash = strchr(v, '-');
	char first[16];
	long long a, b;

	if (dash == NULL || dash == v || (size_t)(dash - v) >= sizeof(first))
		return -1;
	memcpy(first, v, (size_t)(dash - v));
	first[dash - v] = '\0';
	if (num_parse_ll(first, &a) < 0 || num_parse_ll(dash + 1, &b) < 0 || a < 1000 || b < a ||
	    b >= 2147483647LL || b - a + 1 > CONFIG_UIDS_MAX)
		return -1;
	u->first = (uint32_t)a;
	u->count = (uint32_t)(b - a + 1);
	return 0;
}

static int
set_cidrs(char *field, size_t size, const char *v)
{
	const char *p = v;
	size_t used = 0, count = 0;

	field[0] = '\0';
	while (*p) {
		size_t len = strcspn(p, ",");
		char item[64], canon[64];
		size_t b = 0, l = len;

		while (b < l && isspace((unsigned char)p[b]))
			b++;
		while (l > b && isspace((unsigned char)p[l - 1]))
			l--;
		if (l - b >= sizeof(item) || l == b || ++count > CONFIG_MAX_NET_ALLOW)
			return -1;
		memcpy(item, p + b, l - b);
		item[l - b] = '\0';
		if (config_cidr_canon(item, canon, sizeof(canon)) < 0 ||
		    used + strlen(canon) + 2 > size ||
		    fmt_buf(field + used, size - used, "%s%s", used ? "," : "", canon) < 0)
			return -1;
		used += strlen(field + used);
		p += len;
		if (*p == ',' && *++p == '\0')
			return -1;
	}
	return 0;
}

/* AAS_GUEST_KERNEL_ARGS: only words this list knows reach a kernel. */
static int
set_guest_args(char *field, size_t size, const char *v)
{
	static const char *const allowed[] = {
		"aas.agent_test=oversize",
		"aas.agent_test=garbage",
		"aas.agent_test=flood",
		"aas.agent_test=silent",
		"aas.agent_test=stall",
	};
	const char *p = v;

	if (strlen(v) >= size)
		return -1;
	while (*p) {
		size_t len = strcspn(p, " ");
		int ok = 0;

		for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
			ok |= strlen(allowed[i]) == len && strncmp(p, allowed[i], len) == 0;
		if (!ok)
			return -1;
		p += len;
		if (*p == ' ' && *++p == '\0')
			return -1;
	}
	memcpy(field, v, strlen(v) + 1);
	return 0;
}

/* v into a string field of `size` bytes; -1 when it does not fit. */
static int
copy_in(char *field, size_t size, const char *v)
{
	size_t len = strlen(v);

	if (len >= size)
		return -1;
	memcpy(field, v, len + 1);
	return 0;
}

/* The int field becomes the index of v in words (n of them, in the
 * order of their enum); -1 when v is none of them. */
static int
set_word(char *field, const char *const *words, size_t n, const char *v)
{
	for (size_t i = 0; i < n; i++) {
		if (strcmp(v, words[i]) == 0) {
			*(int *)(void *)field = (int)i;
			return 0;
		}
	}
	return -1;
}

static int
apply_entry(struct config *cfg, const struct cfg_entry *ent, const char *v)
{
	static const char *const virts[] = {
		[CONFIG_VIRT_AUTO] = "auto",
		[CONFIG_VIRT_KVM] = "kvm",
		[CONFIG_VIRT_TCG] = "tcg",
	};
	static const char *const nets[] = {
		[CONFIG_NET_AUTO] = "auto",
		[CONFIG_NET_ON] = "on",
		[CONFIG_NET_OFF] = "off",
	};
	char *field = (char *)cfg + ent->off;
	long long n;
	enum log_level lvl;

	switch (ent->kind) {
	case CFG_STR:
	case CFG_DIR:
		return copy_in(field, ent->size, v);
	case CFG_URL:
		if ((*v != '\0' && !valid_http_url(v)) || copy_in(field, ent->size, v) < 0)
			return -1;
		/* One canonical form: no trailing slash. */
		for (size_t l = strlen(field); l > 0 && field[l - 1] == '/'; l--)
			field[l - 1] = '\0';
		return 0;
	case CFG_INT:
	case CFG_LLONG:
		if (num_parse_ll(v, &n) < 0 || n < ent->min || n > ent->max)
			return -1;
		if (ent->kind == CFG_INT)
			*(int *)(void *)field = (int)n;
		else
			*(long long *)(void *)field = n;
		return 0;
	case CFG_LISTEN:
		return set_listen(cfg, v);
	case CFG_LOGLEVEL:
		if (log_parse_level(v, &lvl) < 0)
			return -1;
		*(int *)(void *)field = (int)lvl;
		return 0;
	case CFG_ORIGINS:
		return copy_in(field, ent->size, v) < 0 ? -1 : set_origins(cfg, v);
	case CFG_VIRT:
		return set_word(field, virts, sizeof(virts) / sizeof(virts[0]), v);
	case CFG_GUEST_ARGS:
		return set_guest_args(field, ent->size, v);
	case CFG_POOL:
		return copy_in(field, ent->size, v) < 0 ? -1 : set_pool(cfg, v);
	case CFG_NET:
		return set_word(field, nets, sizeof(nets) / sizeof(nets[0]), v);
	case CFG_SCHEME:
		if (strcmp(v, "http") != 0 && strcmp(v, "https") != 0)
			return -1;
		return copy_in(field, ent->size, v);
	case CFG_CIDRS:
		return set_cidrs(field, ent->size, v);
	case CFG_UIDS:
		return set_uids(field, v);
	}
	return -1;
}

static const char *
expected_form(const struct cfg_entry *ent, char *buf, size_t n)
{
	switch (ent->kind) {
	case CFG_INT:
	case CFG_LLONG:
		fmt_cut(buf, n, "an integer from %lld to %lld", ent->min, ent->max);
		break;
	case CFG_LISTEN:
		fmt_cut(buf, n, "host:port with port 1-65535");
		break;
	case CFG_URL:
		fmt_cut(buf, n, "an http:// or https:// URL");
		break;
	case CFG_LOGLEVEL:
		fmt_cut(buf, n, "one of error, warn, info, debug");
		break;
	case CFG_ORIGINS:
		fmt_cut(buf, n, "comma-separated http(s) origins (at most %d)", CONFIG_MAX_ORIGINS);
		break;
	case CFG_VIRT:
		fmt_cut(buf, n, "one of auto, kvm, tcg");
		break;
	case CFG_POOL:
		fmt_cut(buf, n, "size=count pairs, e.g. small=2,medium=1 (count 0-64)");
		break;
	case CFG_NET:
		fmt_cut(buf, n, "one of auto, on, off");
		break;
	case CFG_SCHEME:
		fmt_cut(buf, n, "http or https");
		break;
	case CFG_CIDRS:
		fmt_cut(buf, n, "comma-separated CIDRs such as 10.1.0.0/16,fd00::/8 (at most %d)",
		    CONFIG_MAX_NET_ALLOW);
		break;
	case CFG_GUEST_ARGS:
		fmt_cut(buf, n,
		    "empty or aas.agent_test=MODE (oversize, garbage, flood, silent, stall)");
		break;
	case CFG_UIDS:
		fmt_cut(buf, n,
		    "FIRST-LAST with 1000 <= FIRST <= LAST < 2147483647, at most %u uids",
		    (unsigned)CONFIG_UIDS_MAX);
		break;
	default:
		fmt_cut(buf, n, "a string shorter than %zu bytes", ent->size);
		break;
	}
	return buf;
}

/* AAS_STATE_DIR made absolute from the working directory. */
static int
state_dir_absolute(struct config *cfg, struct err *e)
{
	char cwd[CONFIG_STR_MAX];
	char tmp[CONFIG_STR_MAX];

	if (cfg->state_dir[0] == '/')
		return 0;
	if (getcwd(cwd, sizeof(cwd)) == NULL) {
		err_set(e, ERR_INVALID, "AAS_STATE_DIR: cannot resolve the working directory");
		return -1;
	}
	if (fmt_err(e, "AAS_STATE_DIR: path", tmp, sizeof(tmp), "%s/%s", cwd, cfg->state_dir) < 0)
		return -1;
	memcpy(cfg->state_dir, tmp, strlen(tmp) + 1);
	return 0;
}

/* An empty `field` (size bytes) of variable `name` becomes before, mid
 * and after one after the other; -1 with e when that does not fit. */
static int
derive(char *field, size_t size, const char *name, const char *before, const char *mid,
    const char *after, struct err *e)
{
	if (field[0] != '\0')
		return 0;
	if (fmt_buf(field, size, "%s%s%s", before, mid, after) < 0) {
		err_set(e, ERR_INVALID, "%s: derived value too long", name);
		return -1;
	}
	return 0;
}

/* The values whose default is made from others: the database, the
 * hypervisor and the image under the state directory, the public URL
 * from the listener, the dashboard under the public URL. */
static int
derive_defaults(struct config *cfg, struct err *e)
{
	const char *state = cfg->state_dir;

	if (derive(cfg->database_url, sizeof(cfg->database_url), "AAS_DATABASE_URL",
		"postgresql:///aas?host=", state, "/run&user=aas", e) < 0 ||
	    derive(cfg->libvirt_uri, sizeof(cfg->libvirt_uri), "AAS_LIBVIRT_URI",
		"qemu:///embed?root=", state, "/libvirt", e) < 0 ||
	    derive(cfg->image_dir, sizeof(cfg->image_dir), "AAS_IMAGE_DIR", "", state,
		"/images/current", e) < 0)
		return -1;
	if (cfg->public_url[0] == '\0') {
		int v6 = strchr(cfg->listen_host, ':') != NULL;
		if (fmt_err(e, "AAS_PUBLIC_URL: derived value", cfg->public_url,
			sizeof(cfg->public_url), "http://%s%s%s:%d", v6 ? "[" : "",
			cfg->listen_host, v6 ? "]" : "", cfg->listen_port) < 0)
			return -1;
	}
	/* The service's own dashboard: auth errors point new users there. */
	return derive(cfg->dashboard_url, sizeof(cfg->dashboard_url), "AAS_DASHBOARD_URL", "",
	    cfg->public_url, "/signup", e);
}

/* Top-up amounts: whole dollars, a few, each within reason. */
static int
parse_topups(struct config *cfg, struct err *e)
{
	const char *p = cfg->topup_usd;

	cfg->n_topups = 0;
	while (*p) {
		long long v = 0;
		const char *q = p;

		while (*q >= '0' && *q <= '9' && v <= 1000)
			v = v * 10 + (*q++ - '0');
		if (q == p || v < 1 || v > 1000 || (*q != ',' && *q != '\0') ||
		    (*q == ',' && q[1] == '\0') || cfg->n_topups >= CONFIG_MAX_TOPUPS) {
			err_set_field(e, "AAS_TOPUP_USD",
			    "AAS_TOPUP_USD: up to %d whole-dollar amounts from 1 to 1000, "
			    "comma-separated",
			    CONFIG_MAX_TOPUPS);
			return -1;
		}
		cfg->topups[cfg->n_topups++] = (int)v;
		p = *q ? q + 1 : q;
	}
	return 0;
}

/* The sender is one printable address, the mail server an smtp(s) URL. */
static int
check_mail(const struct config *cfg, struct err *e)
{
	char addr[256];
	int printable = 1;

	for (const char *q = cfg->mail_from; *q; q++)
		printable &= (unsigned char)*q >= 0x20 && (unsigned char)*q <= 0x7e;
	if (!printable || smtp_address(cfg->mail_from, addr, sizeof(addr)) < 0) {
		err_set_field(e, "AAS_MAIL_FROM",
		    "AAS_MAIL_FROM: expected an address, as name@host or Name <name@host>");
		return -1;
	}
	if (cfg->smtp_url[0] && strncmp(cfg->smtp_url, "smtp://", 7) != 0 &&
	    strncmp(cfg->smtp_url, "smtps://", 8) != 0) {
		err_set_field(e, "AAS_SMTP_URL",
		    "AAS_SMTP_URL: expected smtp://host:port or smtps://host:port");
		return -1;
	}
	return 0;
}

/* AAS_PREVIEW_DOMAIN: localhost:<listen port> when empty, else a host
 * name with an optional :port, in lower case (host names compare
 * case-insensitively: keep one form). */
static int
preview_domain(struct config *cfg, struct err *e)
{
	if (cfg->preview_domain[0] == '\0' &&
	    fmt_err(e, "AAS_PREVIEW_DOMAIN: derived value", cfg->preview_domain,
		sizeof(cfg->preview_domain), "localhost:%d", cfg->listen_port) < 0)
		return -1;
	for (char *p = cfg->preview_domain; *p; p++) {
		*p = (char)tolower((unsigned char)*p);
		if (!isalnum((unsigned char)*p) && *p != '.' && *p != '-' && *p != ':') {
			err_set_field(e, "AAS_PREVIEW_DOMAIN",
			    "AAS_PREVIEW_DOMAIN: expected a host name with an optional :port");
			return -1;
		}
	}
	if (cfg->preview_domain[0] == '.' || cfg->preview_domain[0] == ':') {
		err_set_field(e, "AAS_PREVIEW_DOMAIN",
		    "AAS_PREVIEW_DOMAIN: expected a host name with an optional :port");
		return -1;
	}
	return 0;
}

/* What the table's entries leave: derived defaults, and the values whose
 * form depends on more than one variable or on more than their kind. */
static int
finish_defaults(struct config *cfg, struct err *e)
{
	if (state_dir_absolute(cfg, e) < 0 || derive_defaults(cfg, e) < 0 ||
	    parse_topups(cfg, e) < 0 || check_mail(cfg, e) < 0 || preview_domain(cfg, e) < 0)
		return -1;
	return 0;
}

int
config_load(struct config *cfg, const char *(*getenv_fn)(const char *), struct err *e)
{
	memset(cfg, 0, sizeof(*cfg));
	for (size_t i = 0; i < config_table_len; i++) {
		const struct cfg_entry *ent = &config_table[i];
		const char *v = getenv_fn(ent->name);
		char form[96];

		for (size_t j = 0; v == NULL && j < config_aliases_len; j++)
			if (strcmp(config_aliases[j].now, ent->name) == 0)
				v = getenv_fn(config_aliases[j].old);
		if (v == NULL)
			v = ent->def;
		if (apply_entry(cfg, ent, v) < 0) {
			err_set_field(e, ent->name, "%s: invalid value; expected %s", ent->name,
			    expected_form(ent, form, sizeof(form)));
			return -1;
		}
	}
	return finish_defaults(cfg, e);
}

/* Loopback origins are always the developer's own browser. */
static int
origin_is_loopback(const char *origin)
{
	static const char *const hosts[] = { "localhost", "127.0.0.1", "[::1]" };
	const char *p;

	if (strncmp(origin, "http://", 7) == 0)
		p = origin + 7;
	else if (strncmp(origin, "https://", 8) == 0)
		p = origin + 8;
	else
		return 0;
	for (size_t i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++) {
		size_t hl = strlen(hosts[i]);
		if (strncasecmp(p, hosts[i], hl) == 0 && (p[hl] == '\0' || p[hl] == ':')) {
			const char *q = p + hl;
			if (*q == '\0')
				return 1;
			q++;
			if (*q == '\0')
				return 0;
			for (; *q; q++)
				if (!isdigit((unsigned char)*q))
					return 0;
			return 1;
		}
	}
	return 0;
}

int
config_origin_allowed(const struct config *cfg, const char *origin)
{
	if (origin == NULL || *origin == '\0')
		return 1;
	if (cfg->n_allowed_origins == 0)
		return origin_is_loopback(origin) || strcasecmp(origin, cfg->public_url) == 0;
	for (size_t i = 0; i < cfg->n_allowed_origins; i++) {
		if (strcmp(cfg->allowed_origins[i], "*") == 0 ||
		    strcasecmp(cfg->allowed_origins[i], origin) == 0)
			return 1;
	}
	return 0;
}
