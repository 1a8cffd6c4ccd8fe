/* pty_ticket.c - terminal tickets in a fixed array scanned under one
 * mutex (a few thousand entries: a scan costs microseconds). */
#include "server/pty_ticket.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/fmt.h"

struct ptk_entry {
	char nonce[PTK_NONCE_LEN + 1]; /* "" when the slot is free */
	char account[PTK_ACCOUNT_MAX + 1];
	char sandbox[PTK_SANDBOX_MAX + 1];
	long long expires;
	unsigned long long seq; /* order of issue: the oldest goes first */
};

struct ptk_table {
	pthread_mutex_t lock;
	size_t max, per_account, per_sandbox;
	unsigned long long seq;
	struct ptk_entry *e;
};

struct ptk_table *
ptk_new(size_t max, size_t per_account, size_t per_sandbox)
{
	struct ptk_table *t;

	if (max == 0 || per_account == 0 || per_sandbox == 0)
		return NULL;
	t = calloc(1, sizeof(*t));
	if (t == NULL || (t->e = calloc(max, sizeof(*t->e))) == NULL) {
		free(t);
		return NULL;
	}
	pthread_mutex_init(&t->lock, NULL);
	t->max = max;
	t->per_account = per_account;
	t->per_sandbox = per_sandbox;
	return t;
}

void
ptk_free(struct ptk_table *t)
{
	if (t == NULL)
		return;
	pthread_mutex_destroy(&t->lock);
	free(t->e);
	free(t);
}

/* The slot to fill for (account, sandbox), the lock held: a free or
 * expired one, else the oldest of the sandbox or account at its share;
 * NULL when every slot holds a live ticket of someone else's share. */
static struct ptk_entry *
slot_for(struct ptk_table *t, const char *account, const char *sandbox, long long now)
{
	struct ptk_entry *free_slot = NULL, *old_acct = NULL, *old_sbx = NULL;
	size_t n_acct = 0, n_sbx = 0;

	for (size_t i = 0; i < t->max; i++) {
		struct ptk_entry *x = &t->e[i];
		if (x->nonce[0] != '\0' && x->expires < now)
			x->nonce[0] = '\0';
		if (x->nonce[0] == '\0') {
			if (free_slot == NULL)
				free_slot = x;
			continue;
		}
		if (strcmp(x->account, account) != 0)
			continue;
		n_acct++;
		if (old_acct == NULL || x->seq < old_acct->seq)
			old_acct = x;
		if (strcmp(x->sandbox, sandbox) == 0) {
			n_sbx++;
			if (old_sbx == NULL || x->seq < old_sbx->seq)
				old_sbx = x;
		}
	}
	if (n_sbx >= t->per_sandbox)
		return old_sbx;
	if (n_acct >= t->per_account)
		return old_acct;
	return free_slot;
}

int
ptk_put(struct ptk_table *t, const char *nonce, const char *account, const char *sandbox,
    long long expires, long long now, struct err *e)
{
	struct ptk_entry fresh = { .expires = expires }, *x;

	if (strlen(nonce) != PTK_NONCE_LEN ||
	    fmt_buf(fresh.nonce, sizeof(fresh.nonce), "%s", nonce) < 0 ||
	    fmt_buf(fresh.account, sizeof(fresh.account), "%s", account) < 0 ||
	    fmt_buf(fresh.sandbox, sizeof(fresh.sandbox), "%s", sandbox) < 0) {
		err_set(e, ERR_INTERNAL, "ticket fields too long");
		return -1;
	}
	pthread_mutex_lock(&t->lock);
	x = slot_for(t, account, sandbox, now);
	if (x != NULL) {
		fresh.seq = ++t->seq;
		*x = fresh;
	}
	pthread_mutex_unlock(&t->lock);
	if (x == NULL) {
		err_set(e, ERR_LIMIT,
		    "too many terminal tickets are waiting to be used; try again in a minute");
		return -1;
	}
	return 0;
}

/* Finds a live ticket, the lock held; removes it when `take`. */
static int
find(struct ptk_table *t, const char *nonce, const char *sandbox, long long now, char *account,
    size_t an, int take)
{
	int hit = 0;

	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < t->max; i++) {
		struct ptk_entry *x = &t->e[i];
		if (x->nonce[0] == '\0' || strcmp(x->nonce, nonce) != 0)
			continue;
		if (x->expires >= now && strcmp(x->sandbox, sandbox) == 0 &&
		    fmt_buf(account, an, "%s", x->account) == 0) {
			hit = 1;
			if (take)
				x->nonce[0] = '\0';
		}
		break;
	}
	pthread_mutex_unlock(&t->lock);
	return hit;
}

int
ptk_peek(struct ptk_table *t, const char *nonce, const char *sandbox, long long now, char *account,
    size_t an)
{
	return find(t, nonce, sandbox, now, account, an, 0);
}

int
ptk_take(struct ptk_table *t, const char *nonce, const char *sandbox, long long now, char *account,
    size_t an)
{
	return find(t, nonce, sandbox, now, account, an, 1);
}

size_t
ptk_count(struct ptk_table *t, const char *account)
{
	size_t n = 0;

	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < t->max; i++)
		if (t->e[i].nonce[0] != '\0' &&
		    (account == NULL || strcmp(t->e[i].account, account) == 0))
			n++;
	pthread_mutex_unlock(&t->lock);
	return n;
}
