/* config.h - service configuration, read once at start from environment
 * variables described by a single table (config_table.c). */
#ifndef AAS_CONFIG_H
#define AAS_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define CONFIG_MAX_ORIGINS 16
#define CONFIG_MAX_TOPUPS 8
#define CONFIG_STR_MAX 512
/* Ranges in AAS_NET_ALLOW, and the length of its canonical form. */
#define CONFIG_MAX_NET_ALLOW 32
#define CONFIG_NET_ALLOW_MAX (CONFIG_MAX_NET_ALLOW * 44)

/* A range of uids, AAS_QEMU_UIDS. */
#define CONFIG_UIDS_MAX 65536
struct config_uids {
	uint32_t first, count;
};

struct config {
	char listen_host[64];
	int listen_port;
	char state_dir[CONFIG_STR_MAX]; /* absolute after config_load */
	char database_url[CONFIG_STR_MAX];
	char public_url[CONFIG_STR_MAX]; /* no trailing slash */
	char dashboard_url[CONFIG_STR_MAX];
	char allowed_origins_raw[CONFIG_STR_MAX];
	char allowed_origins[CONFIG_MAX_ORIGINS][128];
	size_t n_allowed_origins;
	char metrics_token[128]; /* empty: /metrics needs no token */
	int log_level;
	int http_threads;
	int workers;
	int max_calls_per_account;
	int max_queued_per_account;
	int queue_wait_s;
	long long max_body_bytes;
	long long max_json_body_bytes;
	long long max_body_buffer_per_account;
	int max_conns_per_addr;
	int request_recv_s;
	long long min_recv_rate;
	long long max_file_bytes;
	long long max_tree_entries;
	long long max_anon_body_bytes;
	int db_pool_size;
	int conn_timeout_s;
	int sse_keepalive_s;
	int session_idle_s;
	int anon_session_idle_s;
	int max_anon_sessions;
	int max_sessions_per_account;
	int max_streams_per_session;
	int max_streams_per_account;
	/* Money is integer micro-USD everywhere. */
	long long free_credit;
	int free_grants_per_network;
	int free_grants_per_domain;
	int minute_s; /* length of a billed minute */
	long long price_small;
	long long price_medium;
	long long price_large;
	long long price_storage; /* a paused sandbox or a snapshot, per minute */
	/* VMs */
	char libvirt_uri[CONFIG_STR_MAX]; /* comma-separated hosts */
	int virt;                         /* enum config_virt */
	char image_dir[CONFIG_STR_MAX];
	char qemu_user[64];
	struct config_uids qemu_uids; /* one per VM */
	int vm_memory_overhead_mib;   /* 0: by accelerator */
	int tcg_tb_cache_mib;         /* AAS_TCG_TB_CACHE_MIB; 0: QEMU's default */
	int warm_pool[3];             /* small, medium, large */
	char warm_pool_raw[128];
	int boot_timeout_s;
	int console_max_bytes;
	int bench_port;
	char guest_kernel_args[256]; /* words for new VMs' kernel (tests only) */
	int kvm_probe_timeout_s;
	int reconcile_s;
	int sweep_grace_s;
	int host_down_s; /* AAS_HOST_DOWN_S */
	long long max_output_bytes;
	long long task_result_max_bytes;  /* AAS_TASK_RESULT_MAX_BYTES */
	long long task_bytes_per_account; /* AAS_TASK_BYTES_PER_ACCOUNT */
	int max_wait_s;                   /* get_command's wait_seconds cap */
	int max_live_sandboxes;
	int boot_snapshots;        /* start VMs from booted-image snapshots */
	int max_snapshots;         /* per account */
	int snapshot_keep_min;     /* default keep_minutes */
	int snapshot_max_keep_min; /* largest keep_minutes */
	int max_ports_per_sandbox;
	int max_background_per_sandbox;
	int max_commands_kept;
	int max_lifetime_min;
	int default_timeout_min;
	/* Networking and previews */
	int net;                              /* enum config_net */
	char net_allow[CONFIG_NET_ALLOW_MAX]; /* canonical CIDRs, comma-separated */
	char netguard_status[CONFIG_STR_MAX]; /* the watcher's status file; "" none */
	int netguard_watch_s;                 /* the watcher's period */
	char preview_domain[256];             /* host[:port], lower case */
	char preview_scheme[8];
	int preview_signed_ttl_s;
	int preview_max_conns;
	int max_preview_conns_per_sandbox;
	int max_preview_conns_per_account;
	int preview_timeout_s;
	int max_pty;
	int max_pty_per_account;
	int pty_idle_s;
	int pty_ticket_ttl_s;
	/* Self-service */
	char smtp_url[CONFIG_STR_MAX];
	char mail_from[256];
	int argon2_t_cost;
	int argon2_m_kib;
	int argon2_lanes;
	int password_hashes;
	int password_hashes_per_client;
	int web_idle_s;
	int web_absolute_s;
	int web_sessions_per_account;
	int login_failures;
	int login_failures_per_address;
	int login_failures_per_email;
	int lockout_s;
	int signups_per_address;
	int mails_per_account;
	int link_ttl_s;
	int trust_x_real_ip;
	int checkouts_per_hour;
	int checkouts_open;
	char stripe_secret_key[256];
	char stripe_webhook_secret[256];
	char stripe_api_url[CONFIG_STR_MAX];
	char topup_usd[64];
	int topups[CONFIG_MAX_TOPUPS]; /* whole USD, from topup_usd */
	int n_topups;
	int oauth;
	int oauth_access_ttl_s;
	int oauth_refresh_ttl_s;
	int oauth_code_ttl_s;
	int oauth_grants_per_account;
	int oauth_registrations_per_address;
	int oauth_local_documents;
};

enum config_virt { CONFIG_VIRT_AUTO, CONFIG_VIRT_KVM, CONFIG_VIRT_TCG };
enum config_net { CONFIG_NET_AUTO, CONFIG_NET_ON, CONFIG_NET_OFF };

/* Fills `cfg` from the environment through `getenv_fn` (getenv in the
 * daemon, a fake in tests). On a bad value returns -1 with a message that
 * names the variable. */
int config_load(struct config *cfg, const char *(*getenv_fn)(const char *),
    struct err *e) AAS_MUST_CHECK;

/* Writes the documented table (name, default, meaning) to `fp`-like sink. */
typedef void config_emit_fn(const char *name, const char *def, const char *help, void *ctx);
void config_print_table(config_emit_fn *emit, void *ctx);

/* Writes the canonical form of one CIDR ("10.1.0.0/16", "fd00::/8"; a bare
 * address is /32 or /128) to `out`. Returns 4 or 6 (the family), or -1 for
 * anything else: junk, a prefix length out of range, bits set past it. */
int config_cidr_canon(const char *s, char *out, size_t n);

/* Origin allow-list check. NULL or empty origin (non-browser) is allowed. */
int config_origin_allowed(const struct config *cfg, const char *origin);

#endif
