/* preview_cookie.h - what becomes of a Set-Cookie header a sandbox's web
 * server sends through the preview proxy (pvc_). A browser whose preview
 * domain is on the Public Suffix List refuses a cookie for the parent
 * domain itself; this is the same rule applied before the browser sees it,
 * for the headers (script in the page is only bound by the list). */
#ifndef AAS_PREVIEW_COOKIE_H
#define AAS_PREVIEW_COOKIE_H

#include <stddef.h>

enum pvc_verdict {
	PVC_TOO_LONG = -1, /* it does not fit `out` */
	PVC_DROP = 0,      /* a Domain attribute names another domain: refused */
	PVC_KEEP = 1,      /* passed on as `out` */
};

/* For the preview host `host` (the request's Host, a ":port" ignored): a
 * cookie without a Domain attribute, or whose every Domain attribute
 * names `host` itself (a leading dot and case ignored), is kept and its
 * Domain attributes dropped, so it is host-only; any Domain attribute
 * naming something else (the preview domain, a sibling, the dashboard's,
 * an empty value) drops the whole header. */
enum pvc_verdict pvc_filter(const char *set_cookie, const char *host, char *out, size_t n);

#endif
