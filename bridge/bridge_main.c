/* bridge_main.c - aas-mcp: an MCP server on stdio that forwards the aas
 * tools to the aas REST API and adds the sync tools. Logs go to stderr;
 * stdout carries only MCP messages. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/version.h"
#include "bridge/br_config.h"
#include "bridge/br_http.h"
#include "bridge/br_rpc.h"
#include "bridge/br_tools.h"
#include "base/log.h"

static struct br_rpc *running;

static void
on_signal(int sig)
{
	(void)sig;
	if (running)
		br_rpc_stop(running);
}

static const char *
env(const char *name)
{
	return getenv(name);
}

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: aas-mcp   (an MCP server on stdin/stdout)\n"
	    "environment: AAS_API_KEY (required), AAS_BASE_URL (default %s),\n"
	    "  AAS_CONNECT_TIMEOUT_S, AAS_REQUEST_TIMEOUT_S, AAS_CREATE_TIMEOUT_S,\n"
	    "  AAS_MAX_RESPONSE_MIB, AAS_LOG_LEVEL\n",
	    BR_DEFAULT_BASE_URL);
}

/* SIGINT and SIGTERM cancel the calls in progress and end the loop; only
 * the main thread takes them (workers start with them blocked), and
 * without SA_RESTART so its read returns. */
static void
signals_setup(sigset_t *blocked)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);
	sigemptyset(blocked);
	sigaddset(blocked, SIGINT);
	sigaddset(blocked, SIGTERM);
	pthread_sigmask(SIG_BLOCK, blocked, NULL);
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

int
main(int argc, char **argv)
{
	struct br_config cfg;
	struct br_http *http = NULL;
	const char *lvl = getenv("AAS_LOG_LEVEL");
	enum log_level level;
	sigset_t blocked;
	struct err e;
	int rc = 1;

	if (argc > 1) {
		if (strcmp(argv[1], "--version") == 0) {
			printf("aas-mcp %s\n", AAS_VERSION);
			return 0;
		}
		usage(strcmp(argv[1], "--help") == 0 ? stdout : stderr);
		return strcmp(argv[1], "--help") == 0 ? 0 : 2;
	}
	if (lvl && *lvl) {
		if (log_parse_level(lvl, &level) < 0) {
			log_error("AAS_LOG_LEVEL: expected error, warn, info or debug");
			return 2;
		}
		log_set_level(level);
	}
	err_clear(&e);
	if (br_config_load(&cfg, env, &e) < 0) {
		log_error("aas-mcp: %s", e.msg);
		return 2;
	}
	if (cfg.base_had_v1)
		log_warn("AAS_BASE_URL should be the origin only (such as %s); it ends in /v1, "
			 "so it is used as the API base as it is",
		    BR_DEFAULT_BASE_URL);
	if (br_tools_init(&e) < 0 || (http = br_http_new(&cfg, &e)) == NULL) {
		log_error("aas-mcp: %s", e.msg);
		goto out;
	}
	signals_setup(&blocked);
	running = br_rpc_new(&cfg, http, STDIN_FILENO, STDOUT_FILENO, &e);
	pthread_sigmask(SIG_UNBLOCK, &blocked, NULL);
	if (running == NULL) {
		log_error("aas-mcp: %s", e.msg);
		goto out;
	}
	log_info("aas-mcp %s: MCP on stdio, API at %s", AAS_VERSION, cfg.base_url);
	rc = br_rpc_run(running) < 0 ? 1 : 0;
out : {
	struct br_rpc *r = running;
	running = NULL;
	br_rpc_free(r);
}
	br_http_free(http);
	br_tools_cleanup();
	explicit_bzero(cfg.api_key, sizeof(cfg.api_key));
	return rc;
}
