/* migrate.h - applies the numbered SQL migrations under an advisory lock,
 * each once, recorded in schema_migrations. */
#ifndef AAS_MIGRATE_H
#define AAS_MIGRATE_H

#include "base/db.h"
#include "base/embed.h"

/* Applies every migration not yet recorded. `n_applied` (may be NULL)
 * receives how many ran now. */
int migrate_apply(struct db *db, const struct embed_file *files, size_t n, int *n_applied,
    struct err *e) AAS_MUST_CHECK;

#endif
