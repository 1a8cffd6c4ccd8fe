/* hlim.h - the HTTP front end's limits on clients (hlim_): open
 * connections per client address, the time a request may take to arrive,
 * and the request body bytes held in memory at once per account. The
 * connection table is fed by libmicrohttpd's accept policy and connection
 * notifications; a connection past its deadline has its socket shut down,
 * so libmicrohttpd closes it on its own thread. Thread-safe. */
#ifndef AAS_HLIM_H
#define AAS_HLIM_H

#include <stddef.h>
#include <sys/socket.h>

#define HLIM_GROUP_MAX 64 /* longest client address group ("a.b.c.d", "x:y::/64") */
#define HLIM_NAME_MAX 72  /* longest body budget name */

struct hlim;
struct hlim_conn;

struct hlim_limits {
	int max_conns_per_addr;   /* open connections of one address group */
	int recv_s;               /* a request's head and body arrive within this */
	long long min_recv_rate;  /* bytes a second past recv_s */
	int idle_s;               /* between requests of one connection */
	long long body_per_owner; /* body bytes held at once per owner */
	size_t max_conns;         /* connections in all (the table's size) */
};

/* NULL when out of memory. */
struct hlim *hlim_new(const struct hlim_limits *lim);
/* Frees the table. No operation is performed if `h` is NULL. */
void hlim_free(struct hlim *h);

/* The group a client address counts under: an IPv4 address as text (also
 * when IPv4-mapped), an IPv6 address as its /64 ("2001:db8:1:2::/64").
 * -1 for another family, or when it does not fit in out. */
int hlim_group(const struct sockaddr *sa, char *out, size_t n);
/* The same for an address in text; an unparsable one is copied, or is
 * "unknown" when it does not fit. */
void hlim_group_text(const char *addr, char *out, size_t n);

/* Accept policy: 1 when the address group has room for one more
 * connection, else 0 (the connection is refused unread). */
int hlim_accept(struct hlim *h, const struct sockaddr *sa);
/* A connection was accepted on socket `fd` from `sa`: its entry, or NULL
 * (out of memory, or over the limit after a race: the socket is shut down
 * at once). The caller keeps it as the connection's context. */
struct hlim_conn *hlim_started(struct hlim *h, int fd, const struct sockaddr *sa);
/* The connection is closing: its entry goes (NULL: nothing). */
void hlim_closed(struct hlim *h, struct hlim_conn *c);

/* A request's first line is in: its head and body must arrive within
 * recv_s (plus the time earned by its body's bytes). */
void hlim_request_begin(struct hlim *h, struct hlim_conn *c);
/* `n` body bytes arrived. */
void hlim_request_bytes(struct hlim *h, struct hlim_conn *c, size_t n);
/* The request is in (or answered without its body): no deadline now. */
void hlim_request_end(struct hlim *h, struct hlim_conn *c);
/* The request was answered: the next one's first line is due within
 * idle_s + recv_s. */
void hlim_request_done(struct hlim *h, struct hlim_conn *c);
/* The connection no longer carries HTTP requests (an upgrade, the
 * preview proxy): never swept. */
void hlim_exempt(struct hlim *h, struct hlim_conn *c);
/* The server stops reading (suspends the connection) and starts again:
 * the time between is not counted. */
void hlim_pause(struct hlim *h, struct hlim_conn *c);
void hlim_resume(struct hlim *h, struct hlim_conn *c);
/* Shuts down every connection past its deadline; returns how many. */
int hlim_sweep(struct hlim *h, long long now_ms);

/* Holds `bytes` more body bytes under `owner`: 0, or -1 when that would
 * pass body_per_owner (or the table is full). */
int hlim_body_take(struct hlim *h, const char *owner, long long bytes);
/* Gives back what hlim_body_take took. */
void hlim_body_give(struct hlim *h, const char *owner, long long bytes);
/* Bytes held under `owner` now. */
long long hlim_body_held(struct hlim *h, const char *owner);

#endif
