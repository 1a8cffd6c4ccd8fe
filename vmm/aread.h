/* aread.h - the incremental reader of what a guest agent sends (aread_):
 * takes the bytes in chunks of any size, finds AP_SYNC while out of sync
 * (at most AP_SYNC_SCAN_MAX bytes skipped), assembles frames in one fixed
 * buffer of AP_HDR_SIZE + AP_MAX_PAYLOAD bytes and hands each complete
 * frame to a callback. Pure: no I/O, no allocation after aread_new.
 *
 * In sync, a frame may also be preceded by AP_SYNC (the agent restarted
 * between two frames): a byte 0xaa where a header starts can only begin
 * AP_SYNC, since a valid length's first byte is 0. Anything else that
 * breaks a bound is an error with a reason, and the reader stays failed. */
#ifndef AAS_AREAD_H
#define AAS_AREAD_H

#include <stddef.h>

#include "vmm/image/aproto.h"

#define AREAD_REASON_MAX 160

struct aread;

/* One complete frame; payload holds h->len bytes and is valid during the
 * call only. 0 to go on; -1 stops the reader (aread_feed then fails with
 * an empty reason: the callback keeps its own). */
typedef int (*aread_frame_fn)(void *ctx, const struct ap_hdr *h, const unsigned char *payload);
/* Seen AP_SYNC (in or out of sync): the next frame starts a new stream. */
typedef void (*aread_sync_fn)(void *ctx);

struct aread *aread_new(aread_frame_fn frame, aread_sync_fn sync, void *ctx);
/* NULL is fine. */
void aread_free(struct aread *r);
/* Consumes n bytes. 0, or -1 once failed (this call or before). */
int aread_feed(struct aread *r, const void *p, size_t n);
/* 1 once AP_SYNC has been seen. */
int aread_synced(const struct aread *r);
/* Why the reader failed ("" when it has not, or the callback stopped it). */
const char *aread_reason(const struct aread *r);

/* Splits a frame's payload into fields (f holds AP_MAX_FIELDS) and checks
 * those its type must carry: HELLO a NONCE, STARTED a PID, EXIT a CODE,
 * ENTRY a TYPE and a NAME that is one path component. 0, or -1 with the
 * reason in why. Data frames (STDOUT, STDERR, DATA, STDIN) have no fields. */
int aread_fields(const struct ap_hdr *h, const unsigned char *p, struct ap_field *f, size_t *nf,
    char *why, size_t wn);

#endif
