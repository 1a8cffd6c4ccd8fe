/* place.h - choosing a host for a new VM (place_): admission by
 * reservation, then the most headroom weighted by live use. Pure: the
 * caller reads the hosts (sandbox/hosts.c) and records the choice. */
#ifndef AAS_PLACE_H
#define AAS_PLACE_H

#include <stddef.h>

/* A host as placement sees it, read inside the create's transaction. */
struct place_host {
	long long memory_mib; /* the host's RAM; <= 0: never seen, not eligible */
	int vcpus;            /* its CPUs */
	double memory_overcommit;
	double cpu_overcommit;
	long long reserved_memory_mib; /* by its live sandboxes */
	long long reserved_vcpus;
	long long free_memory_mib; /* live; < 0 unknown */
	double cpu_busy;           /* live, 0..1; < 0 unknown */
	int degraded;              /* reachable with errors: chosen last */
};

/* What one more VM reserves. */
struct place_need {
	int memory_mib;
	int vcpus;
};

/* 1 when `need` fits within `h`'s reservation limits. */
int place_fits(const struct place_host *h, const struct place_need *need);
/* The score of `h` for `need` (higher is better), or a negative number
 * when it does not fit. */
double place_score(const struct place_host *h, const struct place_need *need);
/* The index of the best host of `hosts`, or -1 when none fits. Ties go to
 * the lower index (the callers pass hosts in a stable order). */
int place_choose(const struct place_host *hosts, size_t n, const struct place_need *need);

#endif
