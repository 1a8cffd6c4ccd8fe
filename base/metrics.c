/* metrics.c - fixed-size counters and histograms, and their rendering. */
#include "base/metrics.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/buf.h"
#include "base/fmt.h"
#include "base/version.h"

#define METRICS_MAX_TEXT (4 * 1024 * 1024)
#define HIST_MAX_BUCKETS 16
#define N_KINDS (ERR_INTERNAL + 1)
#define RELAXED memory_order_relaxed

typedef atomic_ullong counter;

/* Buckets hold their own observations (not cumulative); rendering sums
 * them, so _count always equals the +Inf bucket. The last slot is above
 * every bound. */
struct hist {
	counter bucket[HIST_MAX_BUCKETS + 1];
	counter sum_us;
};

static const int statuses[] = { 200, 201, 202, 204, 301, 302, 304, 400, 401, 402, 403, 404, 405,
	406, 408, 409, 410, 413, 414, 415, 422, 429, 500, 501, 502, 503, 504 };
#define N_STATUS (sizeof(statuses) / sizeof(statuses[0]))

static const char *const methods[] = { "initialize", "ping", "tools/list", "tools/call",
	"notifications/initialized", "notifications/cancelled", "other" };
#define N_METHODS (sizeof(methods) / sizeof(methods[0]))

static const char *const agent_kinds[METRICS_AGENT_N] = { "timeout", "unavailable", "bad_reply",
	"error_reply" };

/* Tool calls range from milliseconds (file reads) to minutes (commands). */
static const double tool_bounds[] = { 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
	60, 120, 300 };
#define N_TOOL_BOUNDS (sizeof(tool_bounds) / sizeof(tool_bounds[0]))
/* Boots take under a second with KVM and several seconds under TCG. */
static const double boot_bounds[] = { 0.25, 0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 60, 120 };
#define N_BOOT_BOUNDS (sizeof(boot_bounds) / sizeof(boot_bounds[0]))

_Static_assert(N_TOOL_BOUNDS <= HIST_MAX_BUCKETS, "tool buckets");
_Static_assert(N_BOOT_BOUNDS <= HIST_MAX_BUCKETS, "boot buckets");

/* Labels: written at start, read without a lock once their count is
 * published (release/acquire). Route 0 is "unmatched"; the slot after
 * the table is "other". */
static char route_names[METRICS_MAX_ROUTES][128] = { "unmatched" };
static atomic_int n_routes = 1;
static char tool_names[METRICS_MAX_TOOLS][64];
static atomic_int n_tools;

static counter http_reqs[METRICS_MAX_ROUTES + 1][N_STATUS + 1];
static counter mcp_msgs[N_METHODS];
static counter tool_calls[METRICS_MAX_TOOLS + 1][N_KINDS];
static struct hist tool_hist[METRICS_MAX_TOOLS + 1];
static counter boots[2]; /* failed, ok */
static struct hist boot_hist;
static counter agent_errors[METRICS_AGENT_N];
static counter charged, refunded;

/* ---- registration ---- */

int
metrics_route_label(const char *pattern)
{
	int n = atomic_load(&n_routes);

	for (int i = 1; i < n; i++)
		if (strcmp(route_names[i], pattern) == 0)
			return i;
	if (n >= METRICS_MAX_ROUTES ||
	    fmt_buf(route_names[n], sizeof(route_names[n]), "%s", pattern) < 0)
		return METRICS_MAX_ROUTES;
	atomic_store_explicit(&n_routes, n + 1, memory_order_release);
	return n;
}

void
metrics_tool_label(const char *name)
{
	int n = atomic_load(&n_tools);

	for (int i = 0; i < n; i++)
		if (strcmp(tool_names[i], name) == 0)
			return;
	if (n >= METRICS_MAX_TOOLS || fmt_buf(tool_names[n], sizeof(tool_names[n]), "%s", name) < 0)
		return;
	atomic_store_explicit(&n_tools, n + 1, memory_order_release);
}

static int
tool_index(const char *name)
{
	int n = atomic_load_explicit(&n_tools, memory_order_acquire);

	for (int i = 0; name != NULL && i < n; i++)
		if (strcmp(tool_names[i], name) == 0)
			return i;
	return METRICS_MAX_TOOLS;
}

/* ---- increments ---- */

static void
hist_observe(struct hist *h, const double *bounds, size_t nb, double s)
{
	size_t b = 0;

	if (s < 0)
		s = 0;
	while (b < nb && s > bounds[b])
		b++;
	atomic_fetch_add_explicit(&h->bucket[b], 1, RELAXED);
	atomic_fetch_add_explicit(&h->sum_us, (unsigned long long)(s * 1e6 + 0.5), RELAXED);
}

void
metrics_http_request(int route, int status)
{
	size_t s = 0;

	if (route < 0 || route > METRICS_MAX_ROUTES)
		route = METRICS_MAX_ROUTES;
	while (s < N_STATUS && statuses[s] != status)
		s++;
	atomic_fetch_add_explicit(&http_reqs[route][s], 1, RELAXED);
}

void
metrics_mcp_message(const char *method)
{
	size_t i = 0;

	while (i < N_METHODS - 1 && (method == NULL || strcmp(methods[i], method) != 0))
		i++;
	atomic_fetch_add_explicit(&mcp_msgs[i], 1, RELAXED);
}

void
metrics_tool_call(const char *tool, enum err_kind result)
{
	if ((int)result < 0 || result >= N_KINDS)
		result = ERR_INTERNAL;
	atomic_fetch_add_explicit(&tool_calls[tool_index(tool)][result], 1, RELAXED);
}

void
metrics_tool_duration(const char *tool, double seconds)
{
	hist_observe(&tool_hist[tool_index(tool)], tool_bounds, N_TOOL_BOUNDS, seconds);
}

void
metrics_boot(int ok, double seconds)
{
	atomic_fetch_add_explicit(&boots[ok ? 1 : 0], 1, RELAXED);
	if (ok)
		hist_observe(&boot_hist, boot_bounds, N_BOOT_BOUNDS, seconds);
}

void
metrics_agent_error(enum metrics_agent_error kind)
{
	if ((int)kind >= 0 && kind < METRICS_AGENT_N)
		atomic_fetch_add_explicit(&agent_errors[kind], 1, RELAXED);
}

void
metrics_credits_charged(int64_t microusd)
{
	if (microusd > 0)
		atomic_fetch_add_explicit(&charged, (unsigned long long)microusd, RELAXED);
}

void
metrics_credits_refunded(int64_t microusd)
{
	if (microusd > 0)
		atomic_fetch_add_explicit(&refunded, (unsigned long long)microusd, RELAXED);
}

double
metrics_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static unsigned long long
get(counter *c)
{
	return atomic_load_explicit(c, RELAXED);
}

void
metrics_reset(void)
{
	for (size_t r = 0; r <= METRICS_MAX_ROUTES; r++)
		for (size_t s = 0; s <= N_STATUS; s++)
			atomic_store(&http_reqs[r][s], 0);
	for (size_t i = 0; i < N_METHODS; i++)
		atomic_store(&mcp_msgs[i], 0);
	for (size_t t = 0; t <= METRICS_MAX_TOOLS; t++) {
		for (size_t k = 0; k < N_KINDS; k++)
			atomic_store(&tool_calls[t][k], 0);
		for (size_t b = 0; b <= HIST_MAX_BUCKETS; b++)
			atomic_store(&tool_hist[t].bucket[b], 0);
		atomic_store(&tool_hist[t].sum_us, 0);
	}
	for (size_t b = 0; b <= HIST_MAX_BUCKETS; b++)
		atomic_store(&boot_hist.bucket[b], 0);
	atomic_store(&boot_hist.sum_us, 0);
	atomic_store(&boots[0], 0);
	atomic_store(&boots[1], 0);
	for (size_t i = 0; i < METRICS_AGENT_N; i++)
		atomic_store(&agent_errors[i], 0);
	atomic_store(&charged, 0);
	atomic_store(&refunded, 0);
	atomic_store(&n_routes, 1);
	atomic_store(&n_tools, 0);
}

/* ---- rendering ---- */

/* A label value with \, " and newline escaped, as the format requires. */
static void
sb_label(struct buf *b, const char *name, const char *value)
{
	char esc[300];
	size_t j = 0;

	for (const char *p = value; *p && j < sizeof(esc) - 3; p++) {
		if (*p == '\\' || *p == '"') {
			esc[j++] = '\\';
			esc[j++] = *p;
		} else if (*p == '\n') {
			esc[j++] = '\\';
			esc[j++] = 'n';
		} else {
			esc[j++] = *p;
		}
	}
	esc[j] = '\0';
	buf_printf(b, "%s=\"%s\"", name, esc);
}

static void
family(struct buf *b, const char *name, const char *type, const char *help)
{
	buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void
render_hist(struct buf *b, const char *name, const char *label, const char *value, struct hist *h,
    const double *bounds, size_t nb)
{
	unsigned long long cum = 0;

	for (size_t i = 0; i <= nb; i++) {
		cum += get(&h->bucket[i]);
		buf_printf(b, "%s_bucket{", name);
		if (label) {
			sb_label(b, label, value);
			buf_printf(b, ",");
		}
		if (i < nb)
			buf_printf(b, "le=\"%g\"} %llu\n", bounds[i], cum);
		else
			buf_printf(b, "le=\"+Inf\"} %llu\n", cum);
	}
	buf_printf(b, "%s_sum", name);
	if (label) {
		buf_printf(b, "{");
		sb_label(b, label, value);
		buf_printf(b, "}");
	}
	buf_printf(b, " %.6f\n%s_count", (double)get(&h->sum_us) / 1e6, name);
	if (label) {
		buf_printf(b, "{");
		sb_label(b, label, value);
		buf_printf(b, "}");
	}
	buf_printf(b, " %llu\n", cum);
}

static const char *
route_name(int r, int n)
{
	return r < n ? route_names[r] : "other";
}

static const char *
tool_name(int t, int n)
{
	return t < n ? tool_names[t] : "other";
}

static void
render_http(struct buf *b)
{
	int n = atomic_load_explicit(&n_routes, memory_order_acquire);

	family(b, "aas_http_requests_total", "counter",
	    "HTTP requests answered, by matched route pattern and status.");
	for (int r = 0; r <= METRICS_MAX_ROUTES; r++) {
		if (r >= n && r < METRICS_MAX_ROUTES)
			continue;
		for (size_t s = 0; s <= N_STATUS; s++) {
			unsigned long long v = get(&http_reqs[r][s]);
			char st[16] = "other";
			if (v == 0 ||
			    (s < N_STATUS && fmt_buf(st, sizeof(st), "%d", statuses[s]) < 0))
				continue;
			buf_printf(b, "aas_http_requests_total{");
			sb_label(b, "route", route_name(r, n));
			buf_printf(b, ",");
			sb_label(b, "status", st);
			buf_printf(b, "} %llu\n", v);
		}
	}
	family(b, "aas_mcp_messages_total", "counter",
	    "JSON-RPC messages received on /v1/mcp, by method.");
	for (size_t i = 0; i < N_METHODS; i++) {
		buf_printf(b, "aas_mcp_messages_total{");
		sb_label(b, "method", methods[i]);
		buf_printf(b, "} %llu\n", get(&mcp_msgs[i]));
	}
}

static void
render_tools(struct buf *b)
{
	int n = atomic_load_explicit(&n_tools, memory_order_acquire);

	family(b, "aas_tool_calls_total", "counter",
	    "tools/call requests answered, by tool and result (ok or the error kind).");
	for (int t = 0; t <= METRICS_MAX_TOOLS; t++) {
		if (t >= n && t < METRICS_MAX_TOOLS)
			continue;
		for (int k = 0; k < N_KINDS; k++) {
			unsigned long long v = get(&tool_calls[t][k]);
			if (v == 0)
				continue;
			buf_printf(b, "aas_tool_calls_total{");
			sb_label(b, "tool", tool_name(t, n));
			buf_printf(b, ",");
			sb_label(b, "result", err_kind_name((enum err_kind)k));
			buf_printf(b, "} %llu\n", v);
		}
	}
	family(b, "aas_tool_call_duration_seconds", "histogram",
	    "Time a tool's handler ran, by tool.");
	for (int t = 0; t <= METRICS_MAX_TOOLS; t++) {
		unsigned long long any = 0;
		if (t >= n && t < METRICS_MAX_TOOLS)
			continue;
		for (size_t i = 0; i <= N_TOOL_BOUNDS; i++)
			any += get(&tool_hist[t].bucket[i]);
		if (any > 0)
			render_hist(b, "aas_tool_call_duration_seconds", "tool", tool_name(t, n),
			    &tool_hist[t], tool_bounds, N_TOOL_BOUNDS);
	}
}

static void
render_vms(struct buf *b)
{
	family(b, "aas_sandbox_boots_total", "counter",
	    "VM boots finished, by result (ok: the guest agent answered).");
	buf_printf(b, "aas_sandbox_boots_total{result=\"ok\"} %llu\n", get(&boots[1]));
	buf_printf(b, "aas_sandbox_boots_total{result=\"failed\"} %llu\n", get(&boots[0]));
	family(b, "aas_sandbox_boot_duration_seconds", "histogram",
	    "Time from the start of a VM's creation to its guest agent's first answer.");
	render_hist(b, "aas_sandbox_boot_duration_seconds", NULL, NULL, &boot_hist, boot_bounds,
	    N_BOOT_BOUNDS);
	family(b, "aas_guest_agent_errors_total", "counter",
	    "Guest agent commands that failed, by kind (boot-time pings excluded).");
	for (int k = 0; k < METRICS_AGENT_N; k++) {
		buf_printf(b, "aas_guest_agent_errors_total{");
		sb_label(b, "kind", agent_kinds[k]);
		buf_printf(b, "} %llu\n", get(&agent_errors[k]));
	}
	family(b, "aas_credits_charged_microusd_total", "counter",
	    "Credit charged to accounts by this process, in micro-USD.");
	buf_printf(b, "aas_credits_charged_microusd_total %llu\n", get(&charged));
	family(b, "aas_credits_refunded_microusd_total", "counter",
	    "Credit refunded to accounts by this process, in micro-USD.");
	buf_printf(b, "aas_credits_refunded_microusd_total %llu\n", get(&refunded));
}

static void
render_hosts(struct buf *b, const struct metrics_gauges *g)
{
	size_t n = g->n_hosts < METRICS_MAX_HOSTS ? g->n_hosts : METRICS_MAX_HOSTS;

	family(b, "aas_host_up", "gauge", "1 when the host answered its last poll.");
	for (size_t i = 0; i < n; i++)
		buf_printf(b, "aas_host_up{host=\"%s\"} %d\n", g->hosts[i].name, g->hosts[i].up);
	family(b, "aas_host_draining", "gauge", "1 while no new sandbox may go to the host.");
	for (size_t i = 0; i < n; i++)
		buf_printf(b, "aas_host_draining{host=\"%s\"} %d\n", g->hosts[i].name,
		    g->hosts[i].draining);
	family(b, "aas_host_memory_mib", "gauge",
	    "Host memory in MiB: its RAM, reserved by live sandboxes, free now.");
	for (size_t i = 0; i < n; i++) {
		const struct metrics_host *h = &g->hosts[i];
		buf_printf(b, "aas_host_memory_mib{host=\"%s\",kind=\"capacity\"} %lld\n", h->name,
		    h->memory_mib);
		buf_printf(b, "aas_host_memory_mib{host=\"%s\",kind=\"reserved\"} %lld\n", h->name,
		    h->reserved_memory_mib);
		if (h->free_memory_mib >= 0)
			buf_printf(b, "aas_host_memory_mib{host=\"%s\",kind=\"free\"} %lld\n",
			    h->name, h->free_memory_mib);
	}
	family(b, "aas_host_vcpus", "gauge", "Host CPUs, and vCPUs reserved by live sandboxes.");
	for (size_t i = 0; i < n; i++) {
		buf_printf(b, "aas_host_vcpus{host=\"%s\",kind=\"capacity\"} %lld\n",
		    g->hosts[i].name, g->hosts[i].vcpus);
		buf_printf(b, "aas_host_vcpus{host=\"%s\",kind=\"reserved\"} %lld\n",
		    g->hosts[i].name, g->hosts[i].reserved_vcpus);
	}
	family(b, "aas_host_cpu_busy_ratio", "gauge", "Share of the host's CPU time busy (0-1).");
	for (size_t i = 0; i < n; i++)
		if (g->hosts[i].cpu_busy >= 0)
			buf_printf(b, "aas_host_cpu_busy_ratio{host=\"%s\"} %.3f\n",
			    g->hosts[i].name, g->hosts[i].cpu_busy);
	family(b, "aas_host_sandboxes", "gauge", "Live sandboxes on the host (warm VMs left out).");
	for (size_t i = 0; i < n; i++)
		buf_printf(b, "aas_host_sandboxes{host=\"%s\"} %lld\n", g->hosts[i].name,
		    g->hosts[i].sandboxes);
}

static void
render_gauges(struct buf *b, const struct metrics_gauges *g)
{
	static const char *const states[] = { "creating", "running", "destroying" };
	static const char *const sizes[] = { "small", "medium", "large" };

	if (g && g->have_database) {
		family(b, "aas_database_up", "gauge",
		    "1 when the database answered this scrape's query.");
		buf_printf(b, "aas_database_up %d\n", g->database_up ? 1 : 0);
	}
	if (g && g->have_sandboxes) {
		family(b, "aas_sandboxes", "gauge",
		    "Live sandboxes of the whole service (warm-pool VMs included), by state.");
		for (int i = 0; i < 3; i++)
			buf_printf(b, "aas_sandboxes{state=\"%s\"} %lld\n", states[i],
			    g->sandboxes[i]);
	}
	if (g && g->have_pool) {
		family(b, "aas_warm_pool_ready", "gauge",
		    "Pre-booted VMs waiting to be claimed, by size.");
		for (int i = 0; i < 3; i++)
			buf_printf(b, "aas_warm_pool_ready{size=\"%s\"} %lld\n", sizes[i],
			    g->pool_ready[i]);
		family(b, "aas_warm_pool_target", "gauge",
		    "Pre-booted VMs the pool is configured to keep (AAS_WARM_POOL), by size.");
		for (int i = 0; i < 3; i++)
			buf_printf(b, "aas_warm_pool_target{size=\"%s\"} %lld\n", sizes[i],
			    g->pool_target[i]);
	}
	if (g && g->have_teardowns) {
		family(b, "aas_sandbox_teardowns", "gauge",
		    "VMs of destroyed sandboxes this process is still tearing down.");
		buf_printf(b, "aas_sandbox_teardowns %lld\n", g->teardowns);
	}
	if (g && g->n_hosts > 0)
		render_hosts(b, g);
}

char *
metrics_render(const struct metrics_gauges *g, size_t *len)
{
	struct buf b;

	buf_init(&b, METRICS_MAX_TEXT);
	family(&b, "aas_build_info", "gauge", "Version of this aasd; always 1.");
	buf_printf(&b, "aas_build_info{version=\"%s\"} 1\n", AAS_VERSION);
	render_http(&b);
	render_tools(&b);
	render_vms(&b);
	render_gauges(&b, g);
	return buf_steal(&b, len);
}
