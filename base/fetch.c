/* fetch.c - a bounded HTTPS GET that refuses private addresses (fetch_). */
#include "base/fetch.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

static int
v4_private(uint32_t a)
{
	return (a >> 24) == 0 || (a >> 24) == 10 || (a >> 24) == 127 ||
	    (a & 0xffc00000u) == 0x64400000u || /* 100.64/10, carrier NAT */
	    (a & 0xffff0000u) == 0xa9fe0000u || /* 169.254/16 */
	    (a & 0xfff00000u) == 0xac100000u || /* 172.16/12 */
	    (a & 0xffffff00u) == 0xc0000000u || /* 192.0.0/24 */
	    (a & 0xffff0000u) == 0xc0a80000u || /* 192.168/16 */
	    (a & 0xfffe0000u) == 0xc6120000u || /* 198.18/15 */
	    (a >> 28) >= 0xe;                   /* multicast, reserved, broadcast */
}

int
fetch_addr_private(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return v4_private(ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr));
	if (sa->sa_family == AF_INET6) {
		const unsigned char *b = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
		static const unsigned char zero[10];

		/* ::ffff:a.b.c.d and ::a.b.c.d are IPv4 addresses. */
		if (memcmp(b, zero, 10) == 0 &&
		    ((b[10] == 0xff && b[11] == 0xff) || (b[10] == 0 && b[11] == 0)))
			return v4_private((uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 |
			    (uint32_t)b[14] << 8 | b[15]);
		/* ::ffff:0:a.b.c.d (SIIT) carries an IPv4 address too. */
		if (memcmp(b, zero, 8) == 0 && b[8] == 0xff && b[9] == 0xff && b[10] == 0 &&
		    b[11] == 0)
			return v4_private((uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 |
			    (uint32_t)b[14] << 8 | b[15]);
		return b[0] == 0xff ||                         /* multicast */
		    (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0) || /* fec0::/10, site-local */
		    (b[0] == 0x20 && b[1] == 0x02) ||          /* 2002::/16, 6to4 */
		    (b[0] == 0x01 && b[1] == 0x00 && memcmp(b + 2, zero, 6) == 0) || /* 100::/64 */
		    (b[0] & 0xfe) == 0xfc ||                                         /* fc00::/7 */
		    (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) ||                       /* fe80::/10 */
		    (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8) ||
		    (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b); /* NAT64 */
	}
	return 1;
}

struct sink {
	struct buf *out;
	int too_large;
};

static size_t
write_cb(char *p, size_t size, size_t n, void *arg)
{
	struct sink *s = arg;

	if (buf_append(s->out, p, size * n) < 0) {
		s->too_large = 1;
		return 0;
	}
	return size * n;
}

struct gate {
	int allow_local;
	int refused;
};

/* Runs with the address curl is about to connect to, after DNS: the
 * check holds whatever the name resolved to. */
static curl_socket_t
open_cb(void *arg, curlsocktype purpose, struct curl_sockaddr *a)
{
	struct gate *g = arg;

	(void)purpose;
	if (!g->allow_local && fetch_addr_private(&a->addr)) {
		g->refused = 1;
		return CURL_SOCKET_BAD;
	}
	return socket(a->family, a->socktype, a->protocol);
}

int
fetch_get(const char *url, const struct fetch_opts *o, struct buf *out, struct err *e)
{
	struct curl_slist *hdr = NULL;
	struct sink s = { out, 0 };
	struct gate g = { o->allow_local, 0 };
	CURL *h = curl_easy_init();
	long status = 0;
	CURLcode cc;
	int rc = -1;

	hdr = curl_slist_append(NULL, "Accept: application/json");
	if (h == NULL || hdr == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	/* Without the protocol limit nothing else here would hold. */
	if (curl_easy_setopt(h, CURLOPT_URL, url) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, o->allow_local ? "http,https" : "https") !=
		CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, open_cb) != CURLE_OK) {
		err_set(e, ERR_INTERNAL, "libcurl cannot limit protocols or addresses");
		goto out;
	}
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "aas");
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
	curl_easy_setopt(h, CURLOPT_OPENSOCKETDATA, &g);
	curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)o->max_bytes);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, (long)o->timeout_s);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, (long)o->timeout_s);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
	cc = curl_easy_perform(h);
	if (g.refused) {
		err_set(e, ERR_FORBIDDEN, "its address is on a private or local network");
		goto out;
	}
	if (s.too_large || cc == CURLE_FILESIZE_EXCEEDED) {
		err_set(e, ERR_LIMIT, "it is larger than %zu bytes", o->max_bytes);
		goto out;
	}
	if (cc != CURLE_OK) {
		err_set(e, ERR_UNAVAILABLE, "it could not be fetched (%s)", curl_easy_strerror(cc));
		goto out;
	}
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	if (status != 200) {
		err_set(e, ERR_UNAVAILABLE, "it answered HTTP %ld", status);
		goto out;
	}
	rc = 0;
out:
	curl_slist_free_all(hdr);
	if (h)
		curl_easy_cleanup(h);
	return rc;
}
