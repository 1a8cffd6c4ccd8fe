/* proxy_count.h - how many preview requests are in flight per sandbox and
 * per account (pxc_): a table of counts bounded when it is made. An entry
 * lives while its count is above zero. No locking: the proxy's lock
 * guards it. Pure; unit-tested directly. */
#ifndef AAS_PROXY_COUNT_H
#define AAS_PROXY_COUNT_H

#include <stddef.h>

#define PXC_KEY_MAX 47 /* longest key (a sandbox or account id) */

struct pxc;

/* A table for at most max_keys keys with a count above zero; NULL when
 * memory is short. */
struct pxc *pxc_new(size_t max_keys);
/* Frees t. No operation when t is NULL. */
void pxc_free(struct pxc *t);
/* Adds one to key's count unless it is at `cap` already: 0 taken, 1 at
 * the cap (nothing changed), -1 the table is full or the key too long. */
int pxc_take(struct pxc *t, const char *key, int cap);
/* Takes one from key's count (dropping the key at zero). */
void pxc_give(struct pxc *t, const char *key);
/* key's count (0 when absent). */
int pxc_count(const struct pxc *t, const char *key);
/* Keys with a count above zero. */
size_t pxc_keys(const struct pxc *t);

/* Which cap an admission hits: PXC_OK when both counts were taken. */
enum pxc_verdict { PXC_OK, PXC_SANDBOX_CAP, PXC_ACCOUNT_CAP, PXC_FULL };

/* Takes one from both tables' budget for a request to `sandbox` of
 * `account`, or neither: the sandbox's count is checked first. */
enum pxc_verdict pxc_admit(struct pxc *sandboxes, struct pxc *accounts, const char *sandbox,
    const char *account, int sandbox_cap, int account_cap);
/* Gives back what pxc_admit took. */
void pxc_release(struct pxc *sandboxes, struct pxc *accounts, const char *sandbox,
    const char *account);

#endif
