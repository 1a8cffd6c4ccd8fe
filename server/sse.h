/* sse.h - one Server-Sent Events response stream with a bounded buffer
 * (sse_). A producer thread appends events; libmicrohttpd reads them. When
 * the buffer is empty the connection is suspended, and the next append
 * resumes it, so an idle stream costs no CPU and pins no thread. */
#ifndef AAS_SSE_H
#define AAS_SSE_H

#include <stddef.h>

#include <microhttpd.h>

/* Unsent bytes a stream may hold: the largest tool result (a 4 MiB file
 * page as base64, twice: structured and as text) plus a margin. */
#define SSE_MAX_BUFFER (32u << 20)

/* Unsent bytes above which a stream's progress and output events are
 * dropped (and the drop announced once there is room again) instead of
 * queued: a client that reads slowly costs this much memory, no more,
 * and still gets the final result. */
#define SSE_MAX_PROGRESS_BACKLOG (1u << 20)

struct sse;

/* A stream with one reference, the producer's. */
struct sse *sse_new(void);
void sse_ref(struct sse *s);
void sse_unref(struct sse *s);

/* "event: message\ndata: <json>\n\n". -1 when the client is gone, the
 * stream is finished, or the buffer limit would be passed (the stream is
 * then failed: the client lost data and must not think otherwise). */
int sse_send_message(struct sse *s, const char *json, size_t len);
/* "event: <event>\ndata: <json>\n\n", as sse_send_message. */
int sse_send_event(struct sse *s, const char *event, const char *json, size_t len);
/* Bytes appended and not yet taken by the client: how far it is behind. */
size_t sse_pending(struct sse *s);
/* The SSE_MAX_PROGRESS_BACKLOG rule for one stream's progress or output
 * events: what was dropped, for the notice that says so. */
struct sse_gate {
	unsigned long dropped; /* events dropped since the last notice */
	double dropped_at;     /* the progress of the last one dropped */
};
/* 1 when an event may be sent now; 0 when the client is more than
 * SSE_MAX_PROGRESS_BACKLOG behind: the event is dropped and counted. */
int sse_gate_pass(struct sse *s, struct sse_gate *g, double progress);
/* A ": text" comment line, used as keep-alive. */
int sse_send_comment(struct sse *s, const char *text);
/* Ends the stream once the buffered data is sent. */
void sse_finish(struct sse *s);
/* 1 once libmicrohttpd is done with the stream (sent, or client gone). */
int sse_closed(struct sse *s);
/* fn(arg) runs once when the stream is over for good: libmicrohttpd freed
 * its response (all sent, client gone, shutdown), or the last reference
 * went without a response ever made. On whichever thread that happens;
 * it must not call back into this stream. Set once (a second call is
 * ignored); on a stream already over, fn runs at once. */
void sse_on_close(struct sse *s, void (*fn)(void *arg), void *arg);

/* The libmicrohttpd response reading this stream; it holds a reference.
 * `conn` is the connection it is queued on (needed to suspend/resume). */
struct MHD_Response *sse_response(struct sse *s, struct MHD_Connection *conn);

/* A ": keep-alive" comment on every open stream idle for idle_s
 * seconds; called periodically by the HTTP front end. */
void sse_keepalive_all(int idle_s);
/* Finishes every open stream (shutdown). */
void sse_finish_all(void);
/* Open streams, for metrics and tests. */
size_t sse_open_count(void);

#endif
