/* web.h - the dashboard (web_): sign-up, login, e-mail links, API keys,
 * connection snippets and settings, as server-rendered pages with a
 * little plain JavaScript, served from assets compiled into aasd. Every
 * page has a strict Content-Security-Policy (no inline script) and is
 * never framed; every form carries a CSRF token; sessions live in a
 * host-only cookie, so preview hosts never receive it. */
#ifndef AAS_WEB_H
#define AAS_WEB_H

#include <stddef.h>

#include "server/http.h"

struct app;
struct mailq;
struct web;

struct pty_hub;
/* `pty` (may be NULL) issues the tickets of the terminal page. */
struct web *web_new(struct app *app, struct mailq *mq, struct pty_hub *pty);
void web_free(struct web *w);
/* The routes (at most WEB_ROUTES) into out; returns how many. */
#define WEB_ROUTES 32
size_t web_routes(struct web *w, struct http_route *out, size_t max);

/* The client a request's per-address limits count under: the peer, or
 * X-Real-IP from a loopback peer when `trust_x_real_ip` (a reverse proxy
 * on this machine); an IPv6 address as its /64. */
void web_client_addr(struct http_req *req, int trust_x_real_ip, char *out, size_t n);

#endif
