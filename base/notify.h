/* notify.h - a PostgreSQL LISTEN loop on its own connection and thread
 * (ntf_). Other processes announce changes that cached state depends on
 * (an ended session, a revoked key); the loop reports them, and reports
 * when the connection is lost, because notices may then be missed. */
#ifndef AAS_NOTIFY_H
#define AAS_NOTIFY_H

#include "base/err.h"

struct ntf_handlers {
	void (*ready)(void *ctx); /* listening (again) */
	void (*lost)(void *ctx);  /* notices may be missed */
	void (*message)(const char *payload, void *ctx);
	void *ctx;
};

struct ntf;

struct ntf *ntf_new(const char *url, const char *channel, const struct ntf_handlers *h,
    struct err *e);
void ntf_free(struct ntf *n);

#endif
