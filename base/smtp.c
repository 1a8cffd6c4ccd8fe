/* smtp.c - SMTP sending through libcurl (smtp_). */
#include <arpa/inet.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "base/fmt.h"
#include "base/smtp.h"

static int
header_ok(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
			return 0;
	return 1;
}

int
smtp_address(const char *from, char *out, size_t n)
{
	const char *lt = strchr(from, '<'), *gt;
	size_t len;

	if (lt == NULL) {
		lt = from;
		gt = from + strlen(from);
	} else {
		lt++;
		gt = strchr(lt, '>');
		if (gt == NULL)
			return -1;
	}
	len = (size_t)(gt - lt);
	if (len < 3 || len >= n || memchr(lt, '@', len) == NULL)
		return -1;
	memcpy(out, lt, len);
	out[len] = '\0';
	return 0;
}

int
smtp_url_loopback(const char *url)
{
	const char *p = strstr(url, "://"), *at, *end;
	char host[256];
	struct in_addr a4;
	size_t n;

	if (p == NULL)
		return 0;
	p += 3;
	end = p + strcspn(p, "/?#");
	/* user:password@ comes before the host. */
	at = memchr(p, '@', (size_t)(end - p));
	if (at)
		p = at + 1;
	if (*p == '[') {
		n = strcspn(++p, "]");
	} else {
		n = strcspn(p, ":/?#");
	}
	if (n == 0 || n >= sizeof(host))
		return 0;
	memcpy(host, p, n);
	host[n] = '\0';
	if (strcmp(host, "localhost") == 0 || strcmp(host, "::1") == 0)
		return 1;
	return inet_pton(AF_INET, host, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127;
}

int
smtp_format(const struct smtp_msg *m, long long now_s, struct buf *out, struct err *e)
{
	char date[64], addr[256];
	time_t t = (time_t)now_s;
	struct tm tm;
	const char *host;

	if (!header_ok(m->from) || !header_ok(m->to) || !header_ok(m->subject)) {
		err_set(e, ERR_INVALID, "mail header with a line break or a non-ASCII byte");
		return -1;
	}
	if (smtp_address(m->from, addr, sizeof(addr)) < 0) {
		err_set(e, ERR_INVALID, "mail sender without an address");
		return -1;
	}
	host = strchr(addr, '@') + 1; /* the Message-ID's host, whole */
	gmtime_r(&t, &tm);
	strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S +0000", &tm);
	buf_printf(out,
	    "From: %s\r\nTo: %s\r\nSubject: %s\r\nDate: %s\r\n"
	    "Message-ID: <%lld.%lld@%s>\r\nMIME-Version: 1.0\r\n"
	    "Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n",
	    m->from, m->to, m->subject, date, now_s, m->id, host);
	for (const char *p = m->body; *p; p++) {
		if (*p == '\r')
			continue;
		if (*p == '\n')
			buf_append(out, "\r\n", 2);
		else
			buf_append(out, p, 1);
	}
	if (out->len > 0 && (out->len < 2 || memcmp(out->data + out->len - 2, "\r\n", 2) != 0))
		buf_append(out, "\r\n", 2);
	if (out->failed) {
		err_set(e, ERR_LIMIT, "mail larger than %d bytes", SMTP_MAX_MESSAGE);
		return -1;
	}
	return 0;
}

struct upload {
	const char *p;
	size_t left;
};

static size_t
read_cb(char *dst, size_t size, size_t nmemb, void *arg)
{
	struct upload *u = arg;
	size_t n = size * nmemb;

	if (n > u->left)
		n = u->left;
	memcpy(dst, u->p, n);
	u->p += n;
	u->left -= n;
	return n;
}

int
smtp_send(const char *url, const struct smtp_msg *m, int timeout_s, struct err *e)
{
	struct buf text;
	char from[258], to[258], addr[256];
	struct curl_slist *rcpt = NULL;
	struct upload u;
	CURL *h = NULL;
	CURLcode cc;
	int rc = -1;

	buf_init(&text, SMTP_MAX_MESSAGE);
	if (smtp_format(m, (long long)time(NULL), &text, e) < 0)
		goto out;
	if (smtp_address(m->from, addr, sizeof(addr)) < 0 ||
	    fmt_err(e, "mail sender", from, sizeof(from), "<%s>", addr) < 0 ||
	    fmt_err(e, "mail recipient", to, sizeof(to), "<%s>", m->to) < 0)
		goto out;
	rcpt = curl_slist_append(NULL, to);
	h = curl_easy_init();
	if (h == NULL || rcpt == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	u.p = text.data;
	u.left = text.len;
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "smtp,smtps");
	curl_easy_setopt(h, CURLOPT_MAIL_FROM, from);
	curl_easy_setopt(h, CURLOPT_MAIL_RCPT, rcpt);
	curl_easy_setopt(h, CURLOPT_READFUNCTION, read_cb);
	curl_easy_setopt(h, CURLOPT_READDATA, &u);
	curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
	curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)text.len);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, (long)timeout_s);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, (long)timeout_s);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	/* TLS always (STARTTLS, or smtps:// from the start), but to a server
	 * on this machine: mail holds one-time links, and a STARTTLS that can
	 * be stripped would hand them out. */
	curl_easy_setopt(h, CURLOPT_USE_SSL,
	    (long)(smtp_url_loopback(url) ? CURLUSESSL_TRY : CURLUSESSL_ALL));
	cc = curl_easy_perform(h);
	if (cc != CURLE_OK) {
		long code = 0;

		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
		err_set(e, ERR_UNAVAILABLE, "smtp: %s (reply %ld)", curl_easy_strerror(cc), code);
		goto out;
	}
	rc = 0;
out:
	if (h != NULL)
		curl_easy_cleanup(h);
	curl_slist_free_all(rcpt);
	buf_free(&text);
	return rc;
}
