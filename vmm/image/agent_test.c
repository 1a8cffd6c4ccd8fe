/* agent_test.c - the agent misbehaving on purpose, for tests only
 * (agent_int.h).
 *
 * aas.agent_test=MODE on the kernel command line (aasd's
 * AAS_GUEST_KERNEL_ARGS) makes this agent misbehave after the handshake,
 * so that aasd's handling of a hostile guest can be shown with the real
 * image: oversize (a header above AP_MAX_PAYLOAD), garbage (malformed
 * fields and an unknown frame type), flood (output beyond the granted
 * window), silent (no handshake answer), stall (no answer to any
 * request). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <string.h>

#include "vmm/image/agent_int.h"
#include "vmm/image/gsys.h"

enum test_mode { TM_NONE, TM_OVERSIZE, TM_GARBAGE, TM_FLOOD, TM_SILENT, TM_STALL };

static enum test_mode test_mode;
static uint32_t flood_chan; /* TM_FLOOD: the EXEC channel being flooded */

void
ag_test_read(void)
{
	static const char *const names[] = { "", "oversize", "garbage", "flood", "silent",
		"stall" };
	char mode[32];

	gsys_cmdline("aas.agent_test=", mode, sizeof(mode));
	for (size_t i = 1; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(mode, names[i]) == 0)
			test_mode = (enum test_mode)i;
	if (test_mode != TM_NONE)
		ag_say("TEST MODE %s: this agent misbehaves on purpose", names[test_mode]);
}

int
ag_test_silent(void)
{
	return test_mode == TM_SILENT;
}

/* Queues a frame header as is (its length may be a lie). */
static void
test_raw_header(uint32_t len, uint16_t type, uint32_t chan)
{
	struct ap_hdr h = { len, type, 0, chan };
	unsigned char *o = ag_out_room(AP_HDR_SIZE);

	if (o == NULL)
		return;
	ap_hdr_put(o, &h);
	ag_out_add(AP_HDR_SIZE);
}

int
ag_test_frame(const struct ap_hdr *h)
{
	static const unsigned char bad_fields[] = { AP_TAG_ERRNO, 0xff, 0xff, 0xff, 0xff, 1 };
	struct ap_out o = { ag_scratch, 0, 0 };

	if (test_mode == TM_NONE)
		return 0;
	if (test_mode == TM_SILENT)
		return 1;
	if (h->chan == 0 || ag_chan_find(h->chan) != NULL)
		return 0;
	switch (test_mode) {
	case TM_STALL:
		return 1;
	case TM_OVERSIZE:
		test_raw_header(AP_MAX_PAYLOAD + 1, AP_T_RESULT, h->chan);
		return 1;
	case TM_GARBAGE:
		ag_send_frame(AP_T_RESULT, 0, h->chan, bad_fields, sizeof(bad_fields));
		ag_send_frame(0x7e, 0, h->chan, bad_fields, sizeof(bad_fields));
		return 1;
	case TM_FLOOD:
		if (h->type != AP_T_EXEC)
			return 0;
		ap_put_u32(&o, AP_TAG_PID, 1);
		ag_send_frame(AP_T_STARTED, 0, h->chan, o.buf, o.len);
		flood_chan = h->chan;
		return 1;
	default:
		return 0;
	}
}

void
ag_test_flood(void)
{
	static unsigned char junk[AP_MAX_PAYLOAD];

	if (flood_chan == 0 || ag.hup)
		return;
	if (junk[0] == 0)
		memset(junk, 'x', sizeof(junk));
	while (ag_out_queued() < AG_OUT_SOFT)
		if (ag_send_frame(AP_T_STDOUT, 0, flood_chan, junk, sizeof(junk)) < 0)
			break;
}
