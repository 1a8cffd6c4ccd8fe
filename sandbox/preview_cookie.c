/* preview_cookie.c - Set-Cookie headers from a sandbox, host-only or
 * refused. */
#include "sandbox/preview_cookie.h"

#include <string.h>
#include <strings.h>

#include "sandbox/preview.h"

/* The value of the Domain attribute at p (len bytes, blanks trimmed in
 * front): *val and *vlen, blanks trimmed; 0 when it is another attribute. */
static int
domain_value(const char *p, size_t len, const char **val, size_t *vlen)
{
	size_t i = 6;

	if (len < 6 || strncasecmp(p, "domain", 6) != 0)
		return 0;
	while (i < len && (p[i] == ' ' || p[i] == '\t'))
		i++;
	if (i < len && p[i] != '=')
		return 0; /* "Domains=x": another name */
	if (i < len)
		i++;
	while (i < len && (p[i] == ' ' || p[i] == '\t'))
		i++;
	while (len > i && (p[len - 1] == ' ' || p[len - 1] == '\t'))
		len--;
	*val = p + i;
	*vlen = len - i;
	return 1;
}

/* 1 when the Domain value names the host itself. */
static int
is_own_host(const char *v, size_t vlen, const char *host)
{
	size_t hlen = strcspn(host, ":");

	if (vlen > 0 && v[0] == '.') {
		v++;
		vlen--;
	}
	return vlen > 0 && vlen == hlen && strncasecmp(v, host, hlen) == 0;
}

enum pvc_verdict
pvc_filter(const char *set_cookie, const char *host, char *out, size_t n)
{
	const char *p = strchr(set_cookie, ';');

	/* Every Domain attribute after the name=value part must be the host's. */
	while (p != NULL) {
		const char *a = p + 1, *v;
		size_t al, vlen;

		while (*a == ' ' || *a == '\t')
			a++;
		al = strcspn(a, ";");
		if (domain_value(a, al, &v, &vlen) && (host == NULL || !is_own_host(v, vlen, host)))
			return PVC_DROP;
		p = strchr(a, ';');
	}
	return preview_set_cookie_strip_domain(set_cookie, out, n) < 0 ? PVC_TOO_LONG : PVC_KEEP;
}
