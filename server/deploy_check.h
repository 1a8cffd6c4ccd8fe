/* deploy_check.h - aasd --check-deployment (dcheck_): every feature the
 * service offers, checked the way this process would use it (its user,
 * capabilities, mount namespace and settings), each with ok, warn or
 * missing and the fix. An operator runs it under the unit's settings
 * before going live (docs/operations.md); it starts nothing. */
#ifndef AAS_DEPLOY_CHECK_H
#define AAS_DEPLOY_CHECK_H

/* Prints one line per feature on stdout; returns 0 when nothing is
 * missing, 1 when something is, 2 when the settings do not load. */
int dcheck_main(void);

#endif
