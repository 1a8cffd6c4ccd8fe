/* metrics.h - the process's counters and histograms (metrics_), rendered
 * in the Prometheus text exposition format 0.0.4.
 *
 * One registry per process. Every increment is a relaxed atomic on a fixed
 * array: no lock, no allocation, cheap enough for the HTTP hot path. Label
 * values come from fixed lists (routes and tools registered at start, HTTP
 * statuses, error kinds); anything else lands in an "other" series, so the
 * number of series is bounded. Labels never carry ids, keys or accounts. */
#ifndef AAS_METRICS_H
#define AAS_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define METRICS_MAX_ROUTES 32
#define METRICS_MAX_TOOLS 24

/* Label registration, at start before serving. Returns the index to pass
 * to metrics_http_request (the "other" index when the table is full). */
int metrics_route_label(const char *pattern);
/* Tools are counted by name; a name never registered counts as "other". */
void metrics_tool_label(const char *name);

/* Index of requests that matched no route (route="unmatched"). */
#define METRICS_ROUTE_UNMATCHED 0

void metrics_http_request(int route, int status);
/* JSON-RPC messages by method (a fixed list; others count as "other"). */
void metrics_mcp_message(const char *method);
/* A tools/call answered: result is ERR_NONE for success, else the kind. */
void metrics_tool_call(const char *tool, enum err_kind result);
/* How long a tool's handler ran. */
void metrics_tool_duration(const char *tool, double seconds);
/* A VM boot ended: create to guest agent answering. */
void metrics_boot(int ok, double seconds);

enum metrics_agent_error {
	METRICS_AGENT_TIMEOUT,     /* no answer in time */
	METRICS_AGENT_UNAVAILABLE, /* channel not connected, or libvirt refused */
	METRICS_AGENT_BAD_REPLY,   /* an answer that is not JSON */
	METRICS_AGENT_ERROR_REPLY, /* the agent answered with an error */
	METRICS_AGENT_N
};
void metrics_agent_error(enum metrics_agent_error kind);

/* Credit movements that committed, in micro-USD. */
void metrics_credits_charged(int64_t microusd);
void metrics_credits_refunded(int64_t microusd);

/* Monotonic seconds, for durations. */
double metrics_now(void);

#define METRICS_MAX_HOSTS 64
/* One hypervisor host as the hosts table holds it. */
struct metrics_host {
	char name[256]; /* the table's check keeps quotes, backslashes and spaces out */
	int up, draining;
	long long memory_mib, reserved_memory_mib, free_memory_mib; /* free: -1 unknown */
	long long vcpus, reserved_vcpus, sandboxes;
	double cpu_busy; /* -1 unknown */
};

/* Values read at scrape time by the caller (from the database or the
 * sandbox service); a family whose `have_` flag is 0 is left out. */
struct metrics_gauges {
	int have_database;
	int database_up;
	int have_sandboxes;
	long long sandboxes[3]; /* creating, running, destroying */
	int have_pool;
	long long pool_ready[3]; /* small, medium, large */
	long long pool_target[3];
	int have_teardowns;
	long long teardowns; /* this process's VMs being torn down after a destroy's answer */
	size_t n_hosts;      /* 0: the family is left out */
	struct metrics_host hosts[METRICS_MAX_HOSTS];
};

/* The whole exposition, malloc'd and NUL-terminated (caller frees); NULL
 * when out of memory. */
char *metrics_render(const struct metrics_gauges *g, size_t *len);

/* Clears counters and registered labels (unit tests). */
void metrics_reset(void);

#endif
