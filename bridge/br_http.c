/* br_http.c - libcurl transfers with bounded bodies and timeouts. The key
 * travels only in the Authorization header; URLs and logs never hold it. */
#include "bridge/br_http.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>
#include <jansson.h>

#include "base/fmt.h"
#include "base/log.h"

struct br_http {
	char base[1024];
	char auth[300];
	long connect_timeout_s;
	long long max_response;
	CURLSH *share;
	pthread_mutex_t locks[CURL_LOCK_DATA_LAST];
};

struct sink {
	struct br_resp *r;
	size_t cap;
	long long max;
	int too_big;
	CURL *curl;
	const struct br_req *q; /* its write, when the answer is a 2xx */
	struct err werr;        /* write's failure */
	int write_failed;
};

static void
share_lock(CURL *c, curl_lock_data data, curl_lock_access access, void *p)
{
	struct br_http *h = p;

	(void)c;
	(void)access;
	pthread_mutex_lock(&h->locks[data]);
}

static void
share_unlock(CURL *c, curl_lock_data data, void *p)
{
	struct br_http *h = p;

	(void)c;
	pthread_mutex_unlock(&h->locks[data]);
}

struct br_http *
br_http_new(const struct br_config *cfg, struct err *e)
{
	struct br_http *h;

	if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) {
		err_set(e, ERR_INTERNAL, "libcurl failed to initialise");
		return NULL;
	}
	h = calloc(1, sizeof(*h));
	if (h == NULL) {
		curl_global_cleanup();
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	if (fmt_err(e, "AAS_BASE_URL", h->base, sizeof(h->base), "%s", cfg->base_url) < 0 ||
	    fmt_err(e, "AAS_API_KEY", h->auth, sizeof(h->auth), "Authorization: Bearer %s",
		cfg->api_key) < 0) {
		explicit_bzero(h->auth, sizeof(h->auth));
		free(h);
		curl_global_cleanup();
		return NULL;
	}
	h->connect_timeout_s = cfg->connect_timeout_s;
	h->max_response = cfg->max_response_bytes;
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&h->locks[i], NULL);
	h->share = curl_share_init();
	if (h->share != NULL) {
		curl_share_setopt(h->share, CURLSHOPT_LOCKFUNC, share_lock);
		curl_share_setopt(h->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
		curl_share_setopt(h->share, CURLSHOPT_USERDATA, h);
		curl_share_setopt(h->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
		curl_share_setopt(h->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
	}
	return h;
}

void
br_http_free(struct br_http *h)
{
	if (h == NULL)
		return;
	if (h->share)
		curl_share_cleanup(h->share);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_destroy(&h->locks[i]);
	explicit_bzero(h->auth, sizeof(h->auth));
	free(h);
	curl_global_cleanup();
}

const char *
br_http_base(const struct br_http *h)
{
	return h->base;
}

void
br_resp_clear(struct br_resp *r)
{
	if (r == NULL)
		return;
	free(r->body);
	memset(r, 0, sizeof(*r));
	r->file_size = -1;
	r->content_offset = -1;
}

static size_t
on_body(char *p, size_t size, size_t nmemb, void *ud)
{
	struct sink *s = ud;
	struct br_resp *r = s->r;
	size_t n = size * nmemb;
	long status = 0;

	if (s->q->write != NULL) {
		curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &status);
		if (status >= 200 && status <= 299) {
			if (s->q->write(s->q->write_ctx, p, n, &s->werr) < 0) {
				s->write_failed = 1;
				return 0; /* curl stops with CURLE_WRITE_ERROR */
			}
			return n;
		}
	}
	if ((long long)(r->len + n) > s->max) {
		s->too_big = 1;
		return 0; /* curl stops with CURLE_WRITE_ERROR */
	}
	if (r->len + n + 1 > s->cap) {
		size_t cap = s->cap ? s->cap : 16384;
		char *nb;
		while (cap < r->len + n + 1)
			cap *= 2;
		if ((long long)cap > s->max + 1)
			cap = (size_t)s->max + 1;
		nb = realloc(r->body, cap);
		if (nb == NULL)
			return 0;
		r->body = nb;
		s->cap = cap;
	}
	memcpy(r->body + r->len, p, n);
	r->len += n;
	r->body[r->len] = '\0';
	return n;
}

static long long
header_number(const char *line, size_t n, const char *name)
{
	size_t k = strlen(name);
	char val[32];
	size_t j = 0;
	char *end;
	long long v;

	if (n <= k || strncasecmp(line, name, k) != 0 || line[k] != ':')
		return -2;
	for (size_t i = k + 1; i < n && j < sizeof(val) - 1; i++)
		if (line[i] != ' ' && line[i] != '\t' && line[i] != '\r' && line[i] != '\n')
			val[j++] = line[i];
	val[j] = '\0';
	v = strtoll(val, &end, 10);
	return (j == 0 || *end != '\0' || v < 0) ? -1 : v;
}

static size_t
on_header(char *p, size_t size, size_t nmemb, void *ud)
{
	struct br_resp *r = ud;
	size_t n = size * nmemb;
	long long v;

	if ((v = header_number(p, n, "X-AAS-File-Size")) != -2)
		r->file_size = v;
	else if ((v = header_number(p, n, "X-AAS-Content-Offset")) != -2)
		r->content_offset = v;
	return n;
}

static int
on_progress(void *p, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	const atomic_int *cancel = p;

	(void)dt;
	(void)dn;
	(void)ut;
	(void)un;
	return cancel != NULL && atomic_load(cancel) ? 1 : 0;
}

enum err_kind
br_http_status_kind(long status)
{
	switch (status) {
	case 400:
	case 405:
	case 422:
		return ERR_INVALID;
	case 401:
		return ERR_UNAUTHORIZED;
	case 402:
		return ERR_PAYMENT;
	case 403:
		return ERR_FORBIDDEN;
	case 404:
		return ERR_NOT_FOUND;
	case 409:
		return ERR_CONFLICT;
	case 413:
	case 429:
		return ERR_LIMIT;
	case 502:
	case 503:
		return ERR_UNAVAILABLE;
	case 504:
		return ERR_TIMEOUT;
	default:
		return ERR_INTERNAL;
	}
}

/* {"error": {"code", "message", "field"}} into e; a body of any other
 * shape (a proxy's page, say) gives the status alone. */
static void
api_error(const struct br_resp *r, struct err *e)
{
	enum err_kind kind = br_http_status_kind(r->status);
	json_t *j = r->body ? json_loadb(r->body, r->len, 0, NULL) : NULL;
	json_t *eo = json_object_get(j, "error");
	const char *msg = json_string_value(json_object_get(eo, "message"));
	const char *field = json_string_value(json_object_get(eo, "field"));

	if (msg != NULL)
		err_set_at(e, kind, field, "%s", msg);
	else
		err_set(e, kind, "the aas API answered HTTP %ld", r->status);
	json_decref(j);
}

static void
transport_error(const struct br_http *h, const struct br_req *q, CURLcode rc, const char *detail,
    const struct sink *s, struct err *e)
{
	const char *d = *detail ? detail : curl_easy_strerror(rc);

	switch (rc) {
	case CURLE_ABORTED_BY_CALLBACK:
		err_set(e, ERR_CONFLICT, "cancelled");
		break;
	case CURLE_OPERATION_TIMEDOUT:
		err_set(e, ERR_TIMEOUT, "no answer from the aas API at %s within %ld s (%s)",
		    h->base, q->timeout_s, d);
		break;
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_GOT_NOTHING:
		err_set(e, ERR_UNAVAILABLE,
		    "cannot reach the aas API at %s: %s. Check AAS_BASE_URL "
		    "and that the service is running",
		    h->base, d);
		break;
	case CURLE_WRITE_ERROR:
		if (s->too_big) {
			err_set(e, ERR_LIMIT,
			    "the aas API's answer is larger than %lld bytes "
			    "(AAS_MAX_RESPONSE_MIB)",
			    s->max);
			break;
		}
		/* fall through */
	default:
		err_set(e, ERR_UNAVAILABLE, "request to the aas API failed: %s", d);
	}
}

/* Appends a header line; the list is kept whole when that fails. */
struct upload {
	const struct br_req *q;
	struct err e;
	int failed;
};

static size_t
on_read(char *buf, size_t size, size_t nitems, void *ud)
{
	struct upload *u = ud;
	ssize_t n = u->q->read(u->q->read_ctx, buf, size * nitems, &u->e);

	if (n < 0) {
		u->failed = 1;
		return CURL_READFUNC_ABORT;
	}
	return (size_t)n;
}

static int
add_header(struct curl_slist **list, const char *line)
{
	struct curl_slist *n = curl_slist_append(*list, line);

	if (n == NULL)
		return -1;
	*list = n;
	return 0;
}

int
br_http_do(struct br_http *h, const struct br_req *q, struct br_resp *r, struct err *e)
{
	struct curl_slist *hdrs = NULL;
	struct sink s;
	char detail[CURL_ERROR_SIZE] = "", ctype[160];
	int has_body = q->body != NULL || q->read != NULL || strcmp(q->method, "POST") == 0 ||
	    strcmp(q->method, "PUT") == 0;
	struct upload up = { .q = q };
	CURL *c;
	CURLcode rc;
	int ret = -1;

	memset(r, 0, sizeof(*r));
	r->file_size = -1;
	r->content_offset = -1;
	memset(&s, 0, sizeof(s));
	s.r = r;
	s.max = h->max_response;
	s.q = q;
	err_clear(&s.werr);
	c = curl_easy_init();
	if (c == NULL) {
		err_set(e, ERR_INTERNAL, "libcurl: cannot make a handle");
		return -1;
	}
	s.curl = c;
	if (fmt_err(e, "content type", ctype, sizeof(ctype), "Content-Type: %s",
		q->content_type ? q->content_type : "application/json") < 0)
		goto out;
	if (add_header(&hdrs, h->auth) < 0 || add_header(&hdrs, "Accept: application/json") < 0 ||
	    add_header(&hdrs, "Expect:") < 0 || /* no 100-continue round trip */
	    (has_body && add_header(&hdrs, ctype) < 0)) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	err_clear(&up.e);
	if (q->read != NULL) {
		/* No size given: HTTP/1.1 chunks. */
		curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(c, CURLOPT_READDATA, &up);
	} else if (has_body) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, q->body ? q->body : "");
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)q->body_len);
	}
	if (strcmp(q->method, "GET") != 0 && strcmp(q->method, "POST") != 0)
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, q->method);
	curl_easy_setopt(c, CURLOPT_URL, q->url);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "aas-mcp");
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, h->connect_timeout_s);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, q->timeout_s);
	curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, detail);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(c, CURLOPT_XFERINFODATA, (void *)q->cancel);
	curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	if (h->share)
		curl_easy_setopt(c, CURLOPT_SHARE, h->share);
	log_debug("api: %s %s", q->method, q->url);
	rc = curl_easy_perform(c);
	if (rc != CURLE_OK && up.failed) {
		*e = up.e;
		goto out;
	}
	if (rc != CURLE_OK && s.write_failed) {
		*e = s.werr;
		goto out;
	}
	if (rc != CURLE_OK) {
		transport_error(h, q, rc, detail, &s, e);
		goto out;
	}
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
	log_debug("api: %s %s -> %ld (%zu bytes)", q->method, q->url, r->status, r->len);
	if (r->status < 200 || r->status > 299) {
		api_error(r, e);
		goto out;
	}
	if (r->body == NULL && (r->body = calloc(1, 1)) == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	ret = 0;
out:
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(c);
	if (ret < 0) {
		long st = r->status;
		br_resp_clear(r);
		r->status = st;
	}
	return ret;
}
