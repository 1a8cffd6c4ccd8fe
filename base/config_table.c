/* config_table.c - the one table of variables: each one's name, default,
 * kind, bounds, where it lands in struct config and what it means (what
 * aasd --config-table prints). */
#include "base/config_int.h"

#define F(field) offsetof(struct config, field), sizeof(((struct config *)0)->field)

/* Settings that were renamed: the old name still works when the new one
 * is not set. */
const struct config_alias config_aliases[] = {
	{ "AAS_MAX_CALLS_PER_KEY", "AAS_MAX_CALLS_PER_ACCOUNT" },
	{ "AAS_MAX_QUEUED_PER_KEY", "AAS_MAX_QUEUED_PER_ACCOUNT" },
};

const struct cfg_entry config_table[] = {
	{ "AAS_LISTEN", CFG_LISTEN, "127.0.0.1:8080", 0, 0, F(listen_host),
	    "Address and port the HTTP server binds (host:port)." },
	{ "AAS_STATE_DIR", CFG_DIR, "var", 0, 0, F(state_dir),
	    "Directory for runtime state (database socket, images, VMs); made absolute at start." },
	{ "AAS_DATABASE_URL", CFG_STR, "", 0, 0, F(database_url),
	    "libpq connection string; empty means the private cluster: postgresql:///aas?host=<state>/run&user=aas." },
	{ "AAS_PUBLIC_URL", CFG_URL, "", 0, 0, F(public_url),
	    "Origin clients use to reach the service; empty means http://<AAS_LISTEN>." },
	{ "AAS_DASHBOARD_URL", CFG_STR, "", 0, 0, F(dashboard_url),
	    "Where users get API keys, shown by get_service_info and in auth errors; empty means "
	    "the service's own sign-up page, <AAS_PUBLIC_URL>/signup." },
	{ "AAS_ALLOWED_ORIGINS", CFG_ORIGINS, "", 0, 0, F(allowed_origins_raw),
	    "Comma-separated browser Origins allowed; empty allows loopback origins and AAS_PUBLIC_URL." },
	{ "AAS_METRICS_TOKEN", CFG_STR, "", 0, 0, F(metrics_token),
	    "Bearer token GET /metrics requires; empty serves /metrics to anyone who reaches the listener." },
	{ "AAS_LOG_LEVEL", CFG_LOGLEVEL, "info", 0, 0, F(log_level),
	    "error, warn, info or debug." },
	{ "AAS_HTTP_THREADS", CFG_INT, "2", 1, 64, F(http_threads),
	    "HTTP event-loop threads (epoll thread pool)." },
	{ "AAS_WORKERS", CFG_INT, "128", 1, 1024, F(workers),
	    "Threads for slow work (tool calls); HTTP threads never wait on it." },
	{ "AAS_MAX_CALLS_PER_ACCOUNT", CFG_INT, "8", 1, 1024, F(max_calls_per_account),
	    "Calls of one account (all its API keys, OAuth tokens and dashboard sessions together; "
	    "without a credential, of one client address) running at once; more wait their turn, "
	    "accounts taking turns. Old name: AAS_MAX_CALLS_PER_KEY." },
	{ "AAS_MAX_QUEUED_PER_ACCOUNT", CFG_INT, "32", 1, 4096, F(max_queued_per_account),
	    "Calls of one account (or of one client address without a credential) waiting to run; "
	    "beyond this they are answered 429 busy. Old name: AAS_MAX_QUEUED_PER_KEY." },
	{ "AAS_QUEUE_WAIT_S", CFG_INT, "30", 1, 600, F(queue_wait_s),
	    "A waiting call that cannot start within this many seconds is answered 429 busy "
	    "with Retry-After." },
	{ "AAS_MAX_BODY_BYTES", CFG_LLONG, "16777216", 1024, 268435456, F(max_body_bytes),
	    "Largest request body accepted; larger ones get 413 "
	    "(REST file uploads have AAS_MAX_FILE_BYTES instead)." },
	{ "AAS_MAX_JSON_BODY_BYTES", CFG_LLONG, "4194304", 1024, 268435456, F(max_json_body_bytes),
	    "Largest body of a REST route that takes JSON (every one but the file and tree uploads, "
	    "which stream); larger ones get 413. AAS_MAX_BODY_BYTES when that is smaller. /v1/mcp, "
	    "which carries write_file content, keeps AAS_MAX_BODY_BYTES." },
	{ "AAS_MAX_BODY_BUFFER_PER_ACCOUNT", CFG_LLONG, "67108864", 65536, 17179869184LL,
	    F(max_body_buffer_per_account),
	    "Request body bytes held in memory at once for one account (or, without a credential, "
	    "one client address), over all its connections; a body that would pass it gets 413 "
	    "before it is read. Streamed uploads hold at most 1 MiB each and count that." },
	{ "AAS_MAX_CONNS_PER_ADDR", CFG_INT, "64", 1, 65536, F(max_conns_per_addr),
	    "Open HTTP connections from one client address (an IPv4 address, an IPv6 /64); more are "
	    "closed as soon as they are accepted. Loopback is not exempt." },
	{ "AAS_REQUEST_RECV_S", CFG_INT, "30", 1, 3600, F(request_recv_s),
	    "Seconds a client has to send a request's head and body (however slowly each byte "
	    "comes); a larger body earns one more second per AAS_MIN_RECV_RATE bytes. Past it the "
	    "connection is closed. Time the server spends not reading (waiting on a worker) is not "
	    "counted." },
	{ "AAS_MIN_RECV_RATE", CFG_LLONG, "65536", 1, 1073741824, F(min_recv_rate),
	    "Bytes a second a client must keep up, past AAS_REQUEST_RECV_S, to send a large body." },
	{ "AAS_MAX_FILE_BYTES", CFG_LLONG, "4294967296", 1073741824, 1099511627776LL,
	    F(max_file_bytes),
	    "Largest file moved in one REST request (PUT and GET /v1/sandboxes/{id}/files/content, "
	    "streamed with bounded memory); a larger upload gets 413 before any byte reaches the "
	    "sandbox when its Content-Length says so, or as soon as a chunked body passes it. "
	    "MCP write_file and read_file keep their 8 MiB / 4 MiB limits. A tree "
	    "(PUT and GET /v1/sandboxes/{id}/tree) carries at most this much archive." },
	{ "AAS_MAX_TREE_ENTRIES", CFG_LLONG, "200000", 1, 100000000, F(max_tree_entries),
	    "Members of one tar stream unpacked by PUT /v1/sandboxes/{id}/tree; more is "
	    "refused (400) and nothing in the directory changes." },
	{ "AAS_MAX_ANON_BODY_BYTES", CFG_LLONG, "65536", 1024, 16777216, F(max_anon_body_bytes),
	    "Largest request body without an API key (anonymous MCP requests, routes that need "
	    "no key); larger ones get 413. A route that needs a key checks it before reading "
	    "the body." },
	{ "AAS_DB_POOL", CFG_INT, "8", 1, 128, F(db_pool_size),
	    "PostgreSQL connections kept open." },
	{ "AAS_CONN_TIMEOUT_S", CFG_INT, "120", 5, 86400, F(conn_timeout_s),
	    "Idle HTTP connection timeout in seconds." },
	{ "AAS_SSE_KEEPALIVE_S", CFG_INT, "15", 1, 300, F(sse_keepalive_s),
	    "An idle SSE stream gets a keep-alive comment this often, in seconds." },
	{ "AAS_SESSION_IDLE_S", CFG_INT, "86400", 60, 2592000, F(session_idle_s),
	    "An MCP session unused this long ends." },
	{ "AAS_ANON_SESSION_IDLE_S", CFG_INT, "300", 120, 86400, F(anon_session_idle_s),
	    "An MCP session opened without a key ends when unused this long, and is deleted." },
	{ "AAS_MAX_ANON_SESSIONS", CFG_INT, "10000", 10, 10000000, F(max_anon_sessions),
	    "MCP sessions opened without a key kept at once; a new one deletes the least "
	    "recently used beyond this." },
	{ "AAS_MAX_SESSIONS_PER_ACCOUNT", CFG_INT, "1000", 1, 1000000, F(max_sessions_per_account),
	    "Open MCP sessions one account may have; initialize beyond it is refused." },
	{ "AAS_MAX_STREAMS_PER_SESSION", CFG_INT, "4", 1, 1024, F(max_streams_per_session),
	    "GET /v1/mcp streams one MCP session may hold open on one aasd; more get 429." },
	{ "AAS_MAX_STREAMS_PER_ACCOUNT", CFG_INT, "64", 1, 65536, F(max_streams_per_account),
	    "GET /v1/mcp streams one account may hold open on one aasd (all sessions opened "
	    "without a key share one such allowance); more get 429." },
	{ "AAS_FREE_CREDIT", CFG_LLONG, "200000", 0, 1000000000000LL, F(free_credit),
	    "Credit granted once per mailbox when its address is verified, in micro-USD." },
	{ "AAS_FREE_GRANTS_PER_NETWORK", CFG_INT, "3", 1, 1000000, F(free_grants_per_network),
	    "Free credit grants per day to accounts signed up from one network (IPv4 /24, IPv6 "
	    "/48); later verified accounts get none (docs/billing.md)." },
	{ "AAS_FREE_GRANTS_PER_DOMAIN", CFG_INT, "10", 1, 1000000, F(free_grants_per_domain),
	    "Free credit grants per day to addresses of one e-mail domain (shared providers such as "
	    "gmail.com are not counted per domain)." },
	{ "AAS_BILLING_MINUTE_S", CFG_INT, "60", 1, 60, F(minute_s),
	    "Seconds in a billed minute (60 in production; tests shorten it to see expiry quickly)." },
	{ "AAS_PRICE_SMALL", CFG_LLONG, "500", 0, 100000000, F(price_small),
	    "Price of a small sandbox per started minute, in micro-USD." },
	{ "AAS_PRICE_MEDIUM", CFG_LLONG, "2000", 0, 100000000, F(price_medium),
	    "Price of a medium sandbox per started minute, in micro-USD." },
	{ "AAS_PRICE_LARGE", CFG_LLONG, "8000", 0, 100000000, F(price_large),
	    "Price of a large sandbox per started minute, in micro-USD." },
	{ "AAS_PRICE_STORAGE", CFG_LLONG, "20", 0, 100000000, F(price_storage),
	    "Price of a paused sandbox (its saved memory and disk), and of a snapshot, per started minute, in micro-USD; compute is not billed while paused." },
	{ "AAS_LIBVIRT_URI", CFG_STR, "", 0, 0, F(libvirt_uri),
	    "Hypervisor hosts (comma-separated libvirt URIs); empty means qemu:///embed?root=<state>/libvirt (no daemon)." },
	{ "AAS_VIRT", CFG_VIRT, "auto", 0, 0, F(virt),
	    "auto (boot a KVM probe guest at start, fall back to TCG), kvm or tcg." },
	{ "AAS_IMAGE_DIR", CFG_STR, "", 0, 0, F(image_dir),
	    "Guest image (base.qcow2, vmlinuz, initrd.img); empty means <state>/images/current (make image)." },
	{ "AAS_QEMU_USER", CFG_STR, "aas-qemu", 0, 0, F(qemu_user),
	    "User of libvirt's own QEMU probes (qemu.conf's user; created by deploy/install-deps.sh); VMs run as users of their own, AAS_QEMU_UIDS." },
	{ "AAS_QEMU_UIDS", CFG_UIDS, "3000000-3001023", 0, 0, F(qemu_uids),
	    "Users (FIRST-LAST) the VMs' QEMUs run as, one per VM, none shared with anything else: no account, group or /etc/subuid range may use them. The isolation rule matches them." },
	{ "AAS_VM_MEMORY_OVERHEAD_MIB", CFG_INT, "0", 0, 65536, F(vm_memory_overhead_mib),
	    "Host memory a VM's QEMU may use beyond its size's guest memory; past it the VM is stopped and ends as out_of_memory. 0 means the translation cache plus 256 under TCG (1280 when AAS_TCG_TB_CACHE_MIB is 0) and 256 under KVM." },
	{ "AAS_TCG_TB_CACHE_MIB", CFG_INT, "64", 0, 4096, F(tcg_tb_cache_mib),
	    "Under TCG, each VM's translation cache (QEMU's translated guest code), in MiB; 0 leaves QEMU's default of up to 1 GiB. 64 measured as fast as the default for shell, Python and Perl work, at a quarter of the host memory (docs/benchmarks.md)." },
	{ "AAS_WARM_POOL", CFG_POOL, "", 0, 0, F(warm_pool_raw),
	    "Pre-booted VMs kept per size, e.g. small=2,medium=1; empty means none." },
	{ "AAS_BOOT_TIMEOUT_S", CFG_INT, "120", 5, 3600, F(boot_timeout_s),
	    "A VM whose guest agent has not answered this long after start has failed." },
	{ "AAS_CONSOLE_MAX_BYTES", CFG_INT, "1048576", 4096, 67108864, F(console_max_bytes),
	    "Newest serial console output kept per VM on the host (the guest writes it; older output is dropped)." },
	{ "AAS_BENCH_PORT", CFG_INT, "0", 0, 1, F(bench_port),
	    "1 gives new VMs a second virtio-serial port, org.aas.bench.0, used only by make bench for its raw port baseline; 0 (the default) leaves it out." },
	{ "AAS_GUEST_KERNEL_ARGS", CFG_GUEST_ARGS, "", 0, 0, F(guest_kernel_args),
	    "For tests and diagnostics only: words added to new VMs' kernel command line; the one "
	    "word allowed is aas.agent_test=MODE (oversize, garbage, flood, silent or stall), which "
	    "makes the guest agent break the protocol that way." },
	{ "AAS_KVM_PROBE_TIMEOUT_S", CFG_INT, "15", 1, 600, F(kvm_probe_timeout_s),
	    "With AAS_VIRT=auto, how long the KVM probe guest may take to answer." },
	{ "AAS_HOST_DOWN_S", CFG_INT, "60", 3, 86400, F(host_down_s),
	    "A hypervisor host that has not answered for this many seconds is down: its sandboxes end as host_lost, billed up to the last time it answered, and no new sandbox goes there." },
	{ "AAS_RECONCILE_S", CFG_INT, "30", 0, 3600, F(reconcile_s),
	    "How often VMs and database rows are reconciled, in seconds (also at start); 0 turns it off." },
	{ "AAS_SWEEP_GRACE_S", CFG_INT, "30", 1, 86400, F(sweep_grace_s),
	    "Reconcile removes a VM directory (overlay, console log) whose domain runs on no host once its sandbox ended this many seconds ago; the wait leaves alone a teardown another aasd sharing the state directory has under way." },
	{ "AAS_MAX_OUTPUT_BYTES", CFG_LLONG, "4194304", 1024, 8388608, F(max_output_bytes),
	    "Hard cap on run_command's max_output_bytes per stream." },
	{ "AAS_TASK_RESULT_MAX_BYTES", CFG_LLONG, "1048576", 4096, 16777216,
	    F(task_result_max_bytes),
	    "Largest result an MCP task keeps, in bytes of its JSON; a bigger one is cut (its "
	    "longest strings shortened) and says so in its _meta (aas/truncated)." },
	{ "AAS_TASK_BYTES_PER_ACCOUNT", CFG_LLONG, "67108864", 65536, 17179869184LL,
	    F(task_bytes_per_account),
	    "Bytes of task results one account may keep at once (each task counts its result and "
	    "1 KiB for its row; a running one the most its result may take); beyond it new tasks "
	    "are refused until older ones expire." },
	{ "AAS_MAX_WAIT_SECONDS", CFG_INT, "60", 1, 600, F(max_wait_s),
	    "Longest get_command waits for new output (its wait_seconds is capped to this)." },
	{ "AAS_MAX_LIVE_SANDBOXES", CFG_INT, "5", 1, 10000, F(max_live_sandboxes),
	    "Sandboxes one account may have alive at once." },
	{ "AAS_BOOT_SNAPSHOTS", CFG_INT, "1", 0, 1, F(boot_snapshots),
	    "1: a new sandbox starts from a saved booted VM of the same image and settings (made in the background after the first cold boot of each), with a fresh identity; 0: every sandbox boots its kernel." },
	{ "AAS_MAX_SNAPSHOTS", CFG_INT, "5", 0, 1000, F(max_snapshots),
	    "Snapshots one account may keep at once (snapshot_sandbox); 0 turns snapshots off." },
	{ "AAS_SNAPSHOT_KEEP_MIN", CFG_INT, "1440", 1, 525600, F(snapshot_keep_min),
	    "How long a snapshot is kept when snapshot_sandbox gives no keep_minutes (its storage is charged up front)." },
	{ "AAS_SNAPSHOT_MAX_KEEP_MIN", CFG_INT, "10080", 1, 525600, F(snapshot_max_keep_min),
	    "Longest keep_minutes snapshot_sandbox accepts." },
	{ "AAS_MAX_PORTS_PER_SANDBOX", CFG_INT, "16", 1, 1024, F(max_ports_per_sandbox),
	    "Ports one sandbox may expose (each is a listener on its host)." },
	{ "AAS_MAX_BACKGROUND_PER_SANDBOX", CFG_INT, "16", 1, 1024, F(max_background_per_sandbox),
	    "Background commands one sandbox may have running at once." },
	{ "AAS_MAX_COMMANDS_KEPT", CFG_INT, "1000", 10, 1000000, F(max_commands_kept),
	    "Commands of one sandbox kept on record; older ones are forgotten." },
	{ "AAS_MAX_LIFETIME_MIN", CFG_INT, "1440", 1, 43200, F(max_lifetime_min),
	    "Longest total lifetime of a sandbox, in minutes." },
	{ "AAS_DEFAULT_TIMEOUT_MIN", CFG_INT, "30", 1, 43200, F(default_timeout_min),
	    "Lifetime of a sandbox when create_sandbox names none, in minutes." },
	{ "AAS_NET", CFG_NET, "auto", 0, 0, F(net),
	    "Sandbox networking: auto (install and check the host isolation rule; no network device when that fails), on (refuse to start without it) or off (never a network device)." },
	{ "AAS_NETGUARD_STATUS", CFG_STR, "/run/aas-netguard/status", 0, 0, F(netguard_status),
	    "Where `aasd --netguard-watch` (root, deploy/aas-netguard.service) records the "
	    "isolation rule's state; an aasd without CAP_NET_ADMIN reads it instead of nftables "
	    "while it exists. Empty: aasd checks nftables itself." },
	{ "AAS_NETGUARD_WATCH_S", CFG_INT, "5", 1, 300, F(netguard_watch_s),
	    "How often `aasd --netguard-watch` checks the isolation rule (and puts it back when "
	    "it is gone); aasd trusts its status for three such periods." },
	{ "AAS_NET_ALLOW", CFG_CIDRS, "", 0, 0, F(net_allow),
	    "Comma-separated CIDRs (IPv4 or IPv6) sandboxes may reach although private: RFC 1918, 100.64.0.0/10 and fc00::/7 are refused by default (the host itself and link-local stay refused)." },
	{ "AAS_PREVIEW_DOMAIN", CFG_STR, "", 0, 0, F(preview_domain),
	    "Domain whose subdomains <port>-<sandbox_id>.<domain> reach exposed ports; empty means localhost:<listen port>." },
	{ "AAS_PREVIEW_SCHEME", CFG_SCHEME, "http", 0, 0, F(preview_scheme),
	    "Scheme of preview URLs (https behind a TLS front)." },
	{ "AAS_PREVIEW_SIGNED_TTL_S", CFG_INT, "3600", 1, 604800, F(preview_signed_ttl_s),
	    "Lifetime of a private preview's signed URL, in seconds." },
	{ "AAS_PREVIEW_MAX_CONNS", CFG_INT, "256", 1, 65536, F(preview_max_conns),
	    "Preview requests proxied at once (each holds one thread); more get 503." },
	{ "AAS_MAX_PREVIEW_CONNS_PER_SANDBOX", CFG_INT, "32", 1, 65536,
	    F(max_preview_conns_per_sandbox),
	    "Preview requests proxied at once to one sandbox, in this process; more get 429." },
	{ "AAS_MAX_PREVIEW_CONNS_PER_ACCOUNT", CFG_INT, "64", 1, 65536,
	    F(max_preview_conns_per_account),
	    "Preview requests proxied at once to one account's sandboxes, in this process; more get 429." },
	{ "AAS_PREVIEW_TIMEOUT_S", CFG_INT, "300", 1, 86400, F(preview_timeout_s),
	    "A preview connection idle this long in either direction is closed." },
	{ "AAS_MAX_PTY", CFG_INT, "64", 1, 4096, F(max_pty),
	    "Terminal sessions (REST /v1/sandboxes/{id}/pty) open at once, in this process; more get 429." },
	{ "AAS_MAX_PTY_PER_ACCOUNT", CFG_INT, "4", 1, 4096, F(max_pty_per_account),
	    "Terminal sessions open at once for one account, in this process; more get 429." },
	{ "AAS_PTY_IDLE_S", CFG_INT, "900", 1, 86400, F(pty_idle_s),
	    "A terminal session with no input and no output for this long is closed." },
	{ "AAS_PTY_TICKET_TTL_S", CFG_INT, "60", 1, 3600, F(pty_ticket_ttl_s),
	    "Lifetime of a single-use terminal ticket (POST /v1/sandboxes/{id}/pty/ticket), in seconds." },
	/* Self-service: the dashboard, web sessions, passwords and mail. */
	{ "AAS_SMTP_URL", CFG_STR, "", 0, 0, F(smtp_url),
	    "Where mail goes (smtp://host:port or smtps://host:port, optional user:password@); "
	    "empty keeps mail in the outbox (aasctl mail pending)." },
	{ "AAS_MAIL_FROM", CFG_STR, "aas <noreply@localhost>", 0, 0, F(mail_from),
	    "Sender of the service's mail (verification, password reset)." },
	{ "AAS_ARGON2_T_COST", CFG_INT, "3", 1, 10, F(argon2_t_cost),
	    "Passes of argon2id over memory for each password hash." },
	{ "AAS_ARGON2_M_KIB", CFG_INT, "65536", 8192, 1048576, F(argon2_m_kib),
	    "Memory of each password hash, in KiB (times AAS_PASSWORD_HASHES at most at once)." },
	{ "AAS_ARGON2_LANES", CFG_INT, "1", 1, 8, F(argon2_lanes),
	    "Parallel lanes of each password hash." },
	{ "AAS_PASSWORD_HASHES", CFG_INT, "2", 1, 64, F(password_hashes),
	    "Password hashes computed at once; more wait (each takes AAS_ARGON2_M_KIB)." },
	{ "AAS_PASSWORD_HASHES_PER_CLIENT", CFG_INT, "1", 1, 64, F(password_hashes_per_client),
	    "Of AAS_PASSWORD_HASHES, how many one account or one client address holds at once "
	    "(always at least one fewer than AAS_PASSWORD_HASHES); its others wait briefly, then "
	    "get 429." },
	{ "AAS_WEB_IDLE_S", CFG_INT, "3600", 60, 86400 * 30, F(web_idle_s),
	    "A dashboard session unused this long ends." },
	{ "AAS_WEB_ABSOLUTE_S", CFG_INT, "604800", 300, 86400 * 90, F(web_absolute_s),
	    "A dashboard session ends this long after login, used or not." },
	{ "AAS_WEB_SESSIONS_PER_ACCOUNT", CFG_INT, "20", 1, 1000, F(web_sessions_per_account),
	    "Dashboard sessions one account keeps; a new login ends the oldest beyond this." },
	{ "AAS_LOGIN_FAILURES", CFG_INT, "5", 1, 1000, F(login_failures),
	    "Failed logins for one e-mail from one client address (IPv6: its /64) within "
	    "AAS_LOCKOUT_S before that address's logins to that e-mail are locked." },
	{ "AAS_LOGIN_FAILURES_PER_ADDRESS", CFG_INT, "30", 1, 100000, F(login_failures_per_address),
	    "Failed logins from one client address within AAS_LOCKOUT_S before it is locked out." },
	{ "AAS_LOGIN_FAILURES_PER_EMAIL", CFG_INT, "100", 1, 100000, F(login_failures_per_email),
	    "Failed logins for one e-mail from all addresses within AAS_LOCKOUT_S before its login "
	    "is locked everywhere (a password reset still logs in)." },
	{ "AAS_LOCKOUT_S", CFG_INT, "900", 10, 86400, F(lockout_s),
	    "The window failures are counted in, and how long a lockout lasts." },
	{ "AAS_SIGNUPS_PER_ADDRESS", CFG_INT, "10", 1, 100000, F(signups_per_address),
	    "Sign-ups (and password-reset or verification mails) from one client address per hour." },
	{ "AAS_MAILS_PER_ACCOUNT", CFG_INT, "5", 1, 1000, F(mails_per_account),
	    "Verification and reset mails one account may be sent per hour." },
	{ "AAS_LINK_TTL_S", CFG_INT, "86400", 60, 86400 * 30, F(link_ttl_s),
	    "How long an e-mail verification link works (password reset links: an hour at most)." },
	{ "AAS_STRIPE_SECRET_KEY", CFG_STR, "", 0, 0, F(stripe_secret_key),
	    "Stripe API key for Checkout top-ups; empty: the dashboard says credit comes from the "
	    "operator." },
	{ "AAS_STRIPE_WEBHOOK_SECRET", CFG_STR, "", 0, 0, F(stripe_webhook_secret),
	    "Signing secret of the Stripe webhook endpoint <AAS_PUBLIC_URL>/v1/billing/stripe/webhook." },
	{ "AAS_STRIPE_API_URL", CFG_STR, "https://api.stripe.com", 0, 0, F(stripe_api_url),
	    "Stripe's API origin (tests point it at a local stand-in)." },
	{ "AAS_CHECKOUTS_PER_HOUR", CFG_INT, "5", 1, 1000, F(checkouts_per_hour),
	    "Checkouts (Stripe sessions) one account may start per hour." },
	{ "AAS_CHECKOUTS_OPEN", CFG_INT, "3", 1, 100, F(checkouts_open),
	    "Checkouts one account may have open (started in the last day, not paid) before it "
	    "may start another." },
	{ "AAS_TOPUP_USD", CFG_STR, "5,10,25", 0, 0, F(topup_usd),
	    "Top-up amounts offered, whole US dollars, comma-separated (at most 8, each 1 to 1000); "
	    "empty offers none." },
	{ "AAS_TRUST_X_REAL_IP", CFG_INT, "0", 0, 1, F(trust_x_real_ip),
	    "1: a request from a loopback peer (a reverse proxy on this machine) is counted "
	    "under its X-Real-IP header for sign-up and login limits." },
	/* OAuth 2.1 for MCP clients that connect with only a URL. */
	{ "AAS_OAUTH", CFG_INT, "1", 0, 1, F(oauth),
	    "1: aasd is an OAuth authorization server for /v1/mcp (docs/oauth.md); 0: API keys only." },
	{ "AAS_OAUTH_ACCESS_TTL_S", CFG_INT, "3600", 60, 86400, F(oauth_access_ttl_s),
	    "Lifetime of an OAuth access token, in seconds." },
	{ "AAS_OAUTH_REFRESH_TTL_S", CFG_INT, "2592000", 300, 86400 * 365, F(oauth_refresh_ttl_s),
	    "Lifetime of an OAuth refresh token (each use replaces it), in seconds." },
	{ "AAS_OAUTH_CODE_TTL_S", CFG_INT, "60", 10, 600, F(oauth_code_ttl_s),
	    "Lifetime of an authorization code, in seconds." },
	{ "AAS_OAUTH_GRANTS_PER_ACCOUNT", CFG_INT, "20", 1, 1000, F(oauth_grants_per_account),
	    "Applications one account may have connected at once." },
	{ "AAS_OAUTH_REGISTRATIONS_PER_ADDRESS", CFG_INT, "20", 1, 100000,
	    F(oauth_registrations_per_address),
	    "Dynamic client registrations from one client address per hour." },
	{ "AAS_OAUTH_LOCAL_DOCUMENTS", CFG_INT, "0", 0, 1, F(oauth_local_documents),
	    "1: client metadata documents may be fetched over http from loopback and private "
	    "addresses (tests only; never on a service that strangers use)." },
};

#undef F

const size_t config_table_len = sizeof(config_table) / sizeof(config_table[0]);
const size_t config_aliases_len = sizeof(config_aliases) / sizeof(config_aliases[0]);

void
config_print_table(config_emit_fn *emit, void *ctx)
{
	for (size_t i = 0; i < config_table_len; i++)
		emit(config_table[i].name, config_table[i].def, config_table[i].help, ctx);
}
