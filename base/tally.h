/* tally.h - counts of things held under names, each name with a cap
 * (tally_): open streams per session and per account. The table is fixed
 * at creation (at most max_names names at once); a name whose count drops
 * to zero leaves it. Thread-safe. */
#ifndef AAS_TALLY_H
#define AAS_TALLY_H

#include <stddef.h>

#define TALLY_NAME_MAX 80 /* longest name */

struct tally;

/* A table counting at most max_names names at once. NULL when out of memory. */
struct tally *tally_new(size_t max_names);
/* Frees the table. No operation is performed if `t` is NULL. */
void tally_free(struct tally *t);

/* Takes one unit under each of names[0..n) at once, when every count stays
 * within its limit (limits[i]); all or nothing. Returns 0, or -1 with
 * *which the index of the first name at its limit, or n when the table has
 * no room for a new name or a name is longer than TALLY_NAME_MAX. */
int tally_take(struct tally *t, const char *const *names, const long *limits, size_t n,
    size_t *which);
/* Gives back one unit under each of names[0..n) (what tally_take took). */
void tally_give(struct tally *t, const char *const *names, size_t n);
/* The count under `name` (0 when it is not in the table). */
long tally_count(struct tally *t, const char *name);
/* Names in the table. */
size_t tally_names(struct tally *t);

#endif
