/* br_plan.h - the incremental decisions of a sync (br_plan_): which files
 * to send and which destination entries are extras. Pure. */
#ifndef AAS_BR_PLAN_H
#define AAS_BR_PLAN_H

#include "bridge/br_path.h"
#include "bridge/br_tree.h"

enum br_action {
	BR_SKIP,     /* the destination has it with the same size and mtime */
	BR_SEND,     /* missing, different, or not a regular file (replaced) */
	BR_CONFLICT, /* the destination has a directory there */
};

/* For a source file `src` and what the destination has at the same path
 * (NULL: nothing). Times compare in whole seconds: list_files has no
 * finer ones. */
enum br_action br_plan_file(const struct br_entry *src, const struct br_entry *dst);

/* 1 when destination entry `dst` is to go with delete_extras: it is not
 * excluded and the source has nothing of its kind (directory or not) at
 * its path. */
int br_plan_extra(const struct br_tree *src, const struct br_entry *dst, const struct br_excl *x);

#endif
