/* sandbox_pty.c - terminals in a running sandbox: the account's own
 * sandbox, running, gets a login shell on a terminal (vmm/guest.h). */
#include "sandbox/sandbox_int.h"

#include "vmm/guest.h"

struct guest_pty *
sbx_pty_open(struct sbx *s, const char *account, const char *sandbox_id, unsigned rows,
    unsigned cols, struct err *e)
{
	char domain[64];
	struct store_row row;
	struct vm_host *h;

	if ((h = sbx_running(s, account, sandbox_id, &row, domain, sizeof(domain), e)) == NULL)
		return NULL;
	return guest_pty_start(h, domain, rows, cols, e);
}
