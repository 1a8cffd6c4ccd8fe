/* achan_bound.c - the budgets of one agent connection (vmm/achan_bound.h). */
#include "vmm/achan_bound.h"

#include "vmm/image/aproto.h"

void
abound_init(struct abound *b, long long now_ms)
{
	*b = (struct abound){ .at_ms = now_ms,
		.tokens = ABOUND_FRAME_BURST,
		.restart_at = now_ms,
		.restart_tokens = ABOUND_RESTART_BURST };
}

void
abound_frame(struct abound *b)
{
	b->tokens--;
}

void
abound_bytes(struct abound *b, size_t n, int scanning)
{
	if (scanning)
		b->tokens -= (long long)(n / ABOUND_SCAN_BYTES);
	b->byte_rest += n;
	b->tokens -= (long long)(b->byte_rest / ABOUND_BYTES_PER_FRAME);
	b->byte_rest %= ABOUND_BYTES_PER_FRAME;
}

long long
abound_wait_ms(struct abound *b, long long now_ms)
{
	long long add;

	if (now_ms > b->at_ms) {
		add = (now_ms - b->at_ms) * ABOUND_FRAME_RATE / 1000;
		if (add > 0) {
			b->tokens += add;
			if (b->tokens > ABOUND_FRAME_BURST)
				b->tokens = ABOUND_FRAME_BURST;
			b->at_ms = now_ms;
		}
	}
	if (b->tokens > 0)
		return 0;
	/* Until the debt is paid and a tenth of the burst is back. */
	return (-b->tokens + ABOUND_FRAME_BURST / 10) * 1000 / ABOUND_FRAME_RATE + 1;
}

int
abound_restart(struct abound *b, long long now_ms)
{
	long long add = (now_ms - b->restart_at) / ABOUND_RESTART_REFILL_MS;

	if (add > 0) {
		b->restart_tokens += add > ABOUND_RESTART_BURST ? ABOUND_RESTART_BURST : (int)add;
		if (b->restart_tokens > ABOUND_RESTART_BURST)
			b->restart_tokens = ABOUND_RESTART_BURST;
		b->restart_at += add * ABOUND_RESTART_REFILL_MS;
	}
	if (b->restart_tokens <= 0)
		return -1;
	b->restart_tokens--;
	return 0;
}

int
abound_stale(struct abound *b, uint32_t len)
{
	b->stale += AP_HDR_SIZE + (uint64_t)len;
	return b->stale > ABOUND_STALE_MAX ? -1 : 0;
}

void
abound_ready(struct abound *b)
{
	b->stale = 0;
}

void
abound_forget(struct abound *b, uint64_t window)
{
	/* Its data, and a STARTED and an EXIT or RESULT of any size. */
	b->forgotten += window + 2 * (AP_HDR_SIZE + AP_MAX_PAYLOAD);
}

int
abound_forgotten(struct abound *b, uint32_t len)
{
	uint64_t cost = AP_HDR_SIZE + (uint64_t)len;

	if (cost > b->forgotten)
		return -1;
	b->forgotten -= cost;
	return 0;
}
