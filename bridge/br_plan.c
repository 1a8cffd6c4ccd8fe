/* br_plan.c - size + mtime comparison, extras. */
#include "bridge/br_plan.h"

enum br_action
br_plan_file(const struct br_entry *src, const struct br_entry *dst)
{
	if (dst == NULL)
		return BR_SEND;
	if (dst->type == 'd')
		return BR_CONFLICT;
	if (dst->type != 'f' || dst->size != src->size || dst->mtime != src->mtime)
		return BR_SEND;
	return BR_SKIP;
}

int
br_plan_extra(const struct br_tree *src, const struct br_entry *dst, const struct br_excl *x)
{
	const struct br_entry *s;

	if (br_excl_match(x, dst->rel))
		return 0;
	s = br_tree_find(src, dst->rel);
	return s == NULL || (s->type == 'd') != (dst->type == 'd');
}
