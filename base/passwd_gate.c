/* passwd_gate.c - the turns of password work (pwg_, pw_set_*). */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "base/passwd_gate.h"
#include "base/clock.h"

/* Each hash, verify or burn holds m_kib of memory (up to 1 GiB) for as
 * long as it runs; left alone, every worker thread could run one at once
 * and a burst of logins would take workers x m_kib and get the daemon
 * killed for memory. So at most gate_limit run at once, process-wide, and
 * the other callers (worker threads, which may block) wait their turn.
 * Each running turn remembers the names it was taken for, and a name holds
 * at most gate_share turns: one account or one client address looping
 * password checks cannot keep every other login waiting. */
struct slot {
	int used;
	uint64_t tag[PW_WHO_TAGS]; /* 0: none */
};

static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_free = PTHREAD_COND_INITIALIZER;
static struct slot slots[PWG_SLOTS_MAX];
static int gate_limit = PW_CONCURRENCY_DEFAULT;
static int gate_share = PW_SHARE_DEFAULT;
static int gate_wait_ms = PW_WAIT_MS_DEFAULT;
static int gate_running;
static int gate_peak;

/* FNV-1a of a name, never 0 (0 marks "none"). */
static uint64_t
tag_hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	if (s == NULL || *s == '\0')
		return 0;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h ? h : 1;
}

/* The share in force: below the limit when the limit leaves room. */
static int
share_now(void)
{
	int s = gate_share;

	if (gate_limit > 1 && s > gate_limit - 1)
		s = gate_limit - 1;
	return s < 1 ? 1 : s;
}

/* 1 when a name among tag[] holds its whole share. Under gate_lock. */
static int
over_share(const uint64_t tag[PW_WHO_TAGS])
{
	int share = share_now();

	for (int t = 0; t < PW_WHO_TAGS; t++) {
		int held = 0;

		if (tag[t] == 0)
			continue;
		for (int i = 0; i < PWG_SLOTS_MAX; i++)
			for (int u = 0; u < PW_WHO_TAGS && slots[i].used; u++)
				if (slots[i].tag[u] == tag[t]) {
					held++;
					break;
				}
		if (held >= share)
			return 1;
	}
	return 0;
}

int
pwg_enter(const struct pw_who *who, struct err *e)
{
	uint64_t tag[PW_WHO_TAGS] = { 0 };
	struct timespec until;
	int rc = 0, slot = -1;

	for (int t = 0; who != NULL && t < PW_WHO_TAGS; t++)
		tag[t] = tag_hash(who->tag[t]);
	pthread_mutex_lock(&gate_lock);
	until = clock_cond_deadline(gate_wait_ms);
	/* A caller is a worker thread the rest of the service shares: it
	 * waits at most gate_wait_ms, never for long. */
	while ((gate_running >= gate_limit || over_share(tag)) && rc == 0)
		rc = pthread_cond_timedwait(&gate_free, &gate_lock, &until);
	if (over_share(tag)) {
		pthread_mutex_unlock(&gate_lock);
		err_set(e, ERR_LIMIT,
		    "too many password checks at once for this account or client");
		return -1;
	}
	if (gate_running >= gate_limit) {
		pthread_mutex_unlock(&gate_lock);
		err_set(e, ERR_UNAVAILABLE,
		    "too many password checks at once; try again in a moment");
		return -1;
	}
	for (int i = 0; i < PWG_SLOTS_MAX && slot < 0; i++)
		if (!slots[i].used)
			slot = i;
	slots[slot].used = 1;
	memcpy(slots[slot].tag, tag, sizeof(tag));
	gate_running++;
	if (gate_running > gate_peak)
		gate_peak = gate_running;
	pthread_mutex_unlock(&gate_lock);
	return slot;
}

void
pwg_leave(int slot)
{
	pthread_mutex_lock(&gate_lock);
	if (slot >= 0 && slot < PWG_SLOTS_MAX && slots[slot].used) {
		memset(&slots[slot], 0, sizeof(slots[slot]));
		gate_running--;
	}
	/* Waiters wait for different things (any turn, or one for a name
	 * that holds its share): every one looks again. */
	pthread_cond_broadcast(&gate_free);
	pthread_mutex_unlock(&gate_lock);
}

void
pw_set_wait_ms(int ms)
{
	pthread_mutex_lock(&gate_lock);
	gate_wait_ms = ms < 0 ? 0 : ms;
	pthread_mutex_unlock(&gate_lock);
}

void
pw_set_concurrency(int n)
{
	pthread_mutex_lock(&gate_lock);
	gate_limit = n < 1 ? 1 : n > PWG_SLOTS_MAX ? PWG_SLOTS_MAX : n;
	gate_peak = gate_running;
	/* A higher limit may let several waiters in. */
	pthread_cond_broadcast(&gate_free);
	pthread_mutex_unlock(&gate_lock);
}

void
pw_set_share(int n)
{
	pthread_mutex_lock(&gate_lock);
	gate_share = n < 1 ? 1 : n;
	pthread_cond_broadcast(&gate_free);
	pthread_mutex_unlock(&gate_lock);
}

int
pw_inflight_max(void)
{
	int n;

	pthread_mutex_lock(&gate_lock);
	n = gate_peak;
	pthread_mutex_unlock(&gate_lock);
	return n;
}
