/* proxy_parse.c - the preview proxy's byte parsing (see proxy_parse.h). */
#include "server/proxy_parse.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int
header_is(const char *name, const char *want)
{
	return strcasecmp(name, want) == 0;
}

int
pxp_parse_head(char *head, size_t used, const char *method, int want_upgrade, struct pxp_resp *r)
{
	char *p = head, *end = head + used - 4, *line_end, *digits_end;
	long status;
	int chunked = 0;

	r->status = 0;
	r->n_hdr = 0;
	r->framing = PXP_FRAME_NONE;
	r->length = -1;
	r->upgrade = 0;
	*end = '\0';
	line_end = strstr(p, "\r\n");
	if (line_end)
		*line_end = '\0';
	if (strncmp(p, "HTTP/1.", 7) != 0 || strlen(p) < 12 || p[8] != ' ')
		return -1;
	/* Three digits, then the reason phrase or nothing. */
	status = strtol(p + 9, &digits_end, 10);
	if (digits_end != p + 12 || (*digits_end != ' ' && *digits_end != '\0') || status < 100 ||
	    status > 599)
		return -1;
	r->status = (int)status;
	p = line_end ? line_end + 2 : end;
	while (p < end && *p) {
		char *colon, *v;

		line_end = strstr(p, "\r\n");
		if (line_end)
			*line_end = '\0';
		colon = strchr(p, ':');
		if (colon == NULL || r->n_hdr >= PXP_MAX_HEADERS)
			return -1;
		*colon = '\0';
		v = colon + 1;
		/* A name is one token; a bare CR or LF ends no line here. */
		if (p[0] == '\0' || strpbrk(p, " \t\r\n") || strpbrk(v, "\r\n"))
			return -1;
		while (*v == ' ' || *v == '\t')
			v++;
		r->hname[r->n_hdr] = p;
		r->hval[r->n_hdr++] = v;
		if (header_is(p, "transfer-encoding") && strcasestr(v, "chunked"))
			chunked = 1;
		if (header_is(p, "content-length")) {
			char *e;
			long long l = strtoll(v, &e, 10);
			if (*e != '\0' || l < 0)
				return -1;
			r->length = l;
		}
		p = line_end ? line_end + 2 : end;
	}
	if (r->status == 101) {
		if (!want_upgrade)
			return -1;
		r->upgrade = 1;
		r->framing = PXP_FRAME_NONE;
	} else if (strcmp(method, "HEAD") == 0 || r->status < 200 || r->status == 204 ||
	    r->status == 304) {
		r->framing = PXP_FRAME_NONE;
		r->length = r->status == 204 || r->status < 200 ? 0 : r->length;
	} else if (chunked) {
		r->framing = PXP_FRAME_CHUNKED;
		r->length = -1;
	} else if (r->length >= 0) {
		r->framing = PXP_FRAME_LENGTH;
	} else {
		r->framing = PXP_FRAME_EOF;
	}
	return 0;
}

int
pxp_dechunk(struct pxp_dechunk *d, const char *buf, size_t n, pxp_put_fn *put, void *cls)
{
	for (size_t i = 0; i < n; i++) {
		char ch = buf[i];

		switch (d->st) {
		case PXP_CH_SIZE: {
			int v = ch >= '0' && ch <= '9' ? ch - '0' :
			    ch >= 'a' && ch <= 'f'     ? ch - 'a' + 10 :
			    ch >= 'A' && ch <= 'F'     ? ch - 'A' + 10 :
							 -1;
			if (v >= 0) {
				if (++d->digits > PXP_CHUNK_DIGITS)
					return -1;
				d->left = d->left * 16 + (unsigned)v;
			} else if (ch == ';' || ch == ' ' || ch == '\t') {
				d->st = PXP_CH_EXT;
			} else if (ch == '\r' && d->digits > 0) {
				d->st = PXP_CH_SIZE_LF;
			} else {
				return -1;
			}
			break;
		}
		case PXP_CH_EXT:
			if (ch == '\r')
				d->st = PXP_CH_SIZE_LF;
			break;
		case PXP_CH_SIZE_LF:
			if (ch != '\n')
				return -1;
			d->st = d->left == 0 ? PXP_CH_TRAILER : PXP_CH_DATA;
			break;
		case PXP_CH_DATA: {
			size_t k = n - i < d->left ? n - i : (size_t)d->left;
			if (put(cls, buf + i, k) < 0)
				return -1;
			d->left -= k;
			i += k - 1;
			if (d->left == 0)
				d->st = PXP_CH_DATA_CR;
			break;
		}
		case PXP_CH_DATA_CR:
			if (ch != '\r')
				return -1;
			d->st = PXP_CH_DATA_LF;
			break;
		case PXP_CH_DATA_LF:
			if (ch != '\n')
				return -1;
			d->st = PXP_CH_SIZE;
			d->digits = 0;
			d->left = 0;
			break;
		case PXP_CH_TRAILER: /* at the start of a trailer line */
			d->st = ch == '\r' ? PXP_CH_TRAILER_LF : PXP_CH_TRAILER_LINE;
			break;
		case PXP_CH_TRAILER_LINE:
			if (ch == '\n')
				d->st = PXP_CH_TRAILER;
			break;
		case PXP_CH_TRAILER_LF:
			if (ch != '\n')
				return -1;
			d->st = PXP_CH_DONE;
			return 1;
		case PXP_CH_DONE:
			return 1;
		}
	}
	return d->st == PXP_CH_DONE;
}

int
pxp_hop_by_hop(const char *name)
{
	static const char *const names[] = { "connection", "keep-alive", "proxy-connection", "te",
		"trailer", "transfer-encoding", "upgrade", "content-length", "expect",
		"x-forwarded-for", "x-forwarded-host", "x-forwarded-proto", "x-aas-preview-token",
		"host" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcasecmp(name, names[i]) == 0)
			return 1;
	return 0;
}

int
pxp_header_check(const char *key, const char *value)
{
	/* Header values never carry line breaks onward. */
	if (strpbrk(key, "\r\n:") || strpbrk(value, "\r\n"))
		return -1;
	if (pxp_hop_by_hop(key) && strcasecmp(key, "content-length") != 0)
		return 0;
	return 1;
}
