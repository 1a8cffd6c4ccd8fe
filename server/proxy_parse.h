/* proxy_parse.h - the preview proxy's byte parsing (pxp_): the upstream's
 * response head, its chunked body, and the checks on request headers
 * passed on to the upstream. Pure functions, no I/O; proxy.c calls them. */
#ifndef AAS_PROXY_PARSE_H
#define AAS_PROXY_PARSE_H

#include <stddef.h>

#define PXP_MAX_HEADERS 128
#define PXP_CHUNK_DIGITS 15 /* hex digits of one chunk size */

enum pxp_framing { PXP_FRAME_NONE, PXP_FRAME_LENGTH, PXP_FRAME_CHUNKED, PXP_FRAME_EOF };

/* A response head, split in place. */
struct pxp_resp {
	int status;
	const char *hname[PXP_MAX_HEADERS], *hval[PXP_MAX_HEADERS];
	size_t n_hdr;
	enum pxp_framing framing;
	long long length; /* Content-Length, or -1 */
	int upgrade;      /* a 101 the client asked for */
};

/* Splits the head in head[0..used) (ending with CRLF CRLF; the last four
 * bytes are overwritten) into the status and headers, and picks the body
 * framing for a request with `method` (want_upgrade: the client asked to
 * upgrade). 0, or -1 for a head the proxy refuses: no status line, a
 * header line without a colon, an empty name or one holding blanks, a
 * bare CR or LF in a name or value, a bad Content-Length, more than
 * PXP_MAX_HEADERS headers, or a 101 nobody asked for. */
int pxp_parse_head(char *head, size_t used, const char *method, int want_upgrade,
    struct pxp_resp *r);

enum pxp_chunk_state {
	PXP_CH_SIZE,
	PXP_CH_EXT,
	PXP_CH_SIZE_LF,
	PXP_CH_DATA,
	PXP_CH_DATA_CR,
	PXP_CH_DATA_LF,
	PXP_CH_TRAILER,
	PXP_CH_TRAILER_LF,
	PXP_CH_TRAILER_LINE,
	PXP_CH_DONE
};

/* A chunked decoder; start it zeroed. */
struct pxp_dechunk {
	enum pxp_chunk_state st;
	unsigned long long left;
	int digits;
};

/* Where decoded body bytes go: 0, or -1 to stop. */
typedef int pxp_put_fn(void *cls, const char *data, size_t n);

/* Feeds chunked bytes through d: 1 when the body is complete, 0 for more,
 * -1 on a malformed body or when `put` failed. */
int pxp_dechunk(struct pxp_dechunk *d, const char *buf, size_t n, pxp_put_fn *put, void *cls);

/* 1 for a hop-by-hop header (or one the proxy sets itself). */
int pxp_hop_by_hop(const char *name);

/* What becomes of a client's request header on its way upstream: -1 when
 * it must refuse the request (a line break or colon where none may be),
 * 0 to leave it out, 1 to pass it on. */
int pxp_header_check(const char *key, const char *value);

#endif
