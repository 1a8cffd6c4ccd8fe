/* store_int.h - what the store's files share (not a public interface). */
#ifndef AAS_STORE_INT_H
#define AAS_STORE_INT_H

#include "service/store.h"

#define STORE_TS(col) \
	"to_char(" col " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"

/* ERR_NOT_FOUND naming sandbox_id. */
void store_not_found(const char *id, struct err *e);
/* A text column as JSON: null when NULL or empty. */
json_t *store_text_or_null(const PGresult *r, int row, int col);
/* An integer column as JSON: null when NULL or unreadable. */
json_t *store_int_or_null(const PGresult *r, int row, int col);

#endif
