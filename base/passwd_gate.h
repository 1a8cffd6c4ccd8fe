/* passwd_gate.h - the turns of password work (pwg_), shared by the files
 * of base/passwd: at most the concurrency at once in the process, and at
 * most the share of them for any one name of a struct pw_who. */
#ifndef AAS_PASSWD_GATE_H
#define AAS_PASSWD_GATE_H

#include "base/err.h"
#include "base/passwd.h"

/* The most turns pw_set_concurrency allows. */
#define PWG_SLOTS_MAX 64

/* Takes a turn for `who` (NULL: nobody), waiting at most the wait set;
 * the slot to give back, or -1 with ERR_UNAVAILABLE (the gate stayed full)
 * or ERR_LIMIT (a name of `who` kept its whole share). */
int pwg_enter(const struct pw_who *who, struct err *e) AAS_MUST_CHECK;
/* Gives back the turn of pwg_enter. */
void pwg_leave(int slot);

#endif
