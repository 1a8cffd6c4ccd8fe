/* sandbox_int.h - what the sandbox service's files share (not a public
 * interface). */
#ifndef AAS_SANDBOX_INT_H
#define AAS_SANDBOX_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "orch.h"
#include "sandbox.h"

#define SBX_ID_LEN 20          /* "sbx-" + 16 */
#define SBX_TS(col) "to_char(" col " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"

struct sbx {
	struct app *app;
	struct orch *orch;
	char instance[33];
	pthread_t maint;
	int maint_started;
	atomic_int stop;
	pthread_mutex_t wake_lock;
	pthread_cond_t wake;
	pthread_mutex_t cap_lock;
	json_t *capacity;
	struct reaper *reaper;
};

struct sbx_row {
	char id[SBX_ID_LEN + 1];
	char state[16];
	char size[8];
	char host[512];
};

/* Loads a sandbox of `account` (NULL: any, for maintenance). ERR_NOT_FOUND
 * when there is none. */
int sbx_load(struct sbx *s, const char *account, const char *id,
    struct sbx_row *row, struct err *e);
/* A running sandbox's row, domain name and host connection, or an error
 * saying why not. */
struct vm_host *sbx_running(struct sbx *s, const char *account, const char *id,
    struct sbx_row *row, char *domain, size_t dn, struct err *e);
json_t *sbx_row_json(struct sbx *s, const char *account, const char *id,
    struct err *e);
/* Boots the VM of a 'creating' row and moves it to running (or failed). */
int sbx_boot_row(struct sbx *s, const char *id, const char *host, const char *size,
    const struct sbx_progress *pg, struct err *e);
/* Destroys a sandbox's VM and marks the row destroyed (or failed). */
int sbx_finish_destroy(struct sbx *s, const char *id, const char *host,
    const char *final_state, const char *reason, struct err *e);
void *sbx_maint_main(void *arg);
/* Background commands still marked running: asks the guest once each. */
void sbx_refresh_commands(struct sbx *s, const char *id, const char *host);
/* Tells every aasd's expiry reaper that an expiry time changed. */
void sbx_expiry_changed(struct sbx *s);

#endif
