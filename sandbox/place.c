/* place.c - host choice: fit by reservations, then headroom and live use. */
#include "sandbox/place.h"

/* The share of the score from headroom after reservations; the rest comes
 * from what the host really uses (free memory, then idle CPU), so a host
 * busy with sandboxes that reserved little still gets fewer new ones. */
#define PLACE_W_HEADROOM 0.5
#define PLACE_W_FREE_MEMORY 0.3
#define PLACE_W_IDLE_CPU 0.2

static double
capacity(long long amount, double overcommit)
{
	return (double)amount * overcommit;
}

int
place_fits(const struct place_host *h, const struct place_need *need)
{
	if (h->memory_mib <= 0 || h->vcpus <= 0 || need->memory_mib <= 0 || need->vcpus <= 0)
		return 0;
	return (double)(h->reserved_memory_mib + need->memory_mib) <=
	    capacity(h->memory_mib, h->memory_overcommit) &&
	    (double)(h->reserved_vcpus + need->vcpus) <= capacity(h->vcpus, h->cpu_overcommit);
}

static double
clamp01(double v)
{
	return v < 0 ? 0 : v > 1 ? 1 : v;
}

double
place_score(const struct place_host *h, const struct place_need *need)
{
	double mem_cap, cpu_cap, mem_room, cpu_room, room, free_mem, idle, score;

	if (!place_fits(h, need))
		return -1;
	mem_cap = capacity(h->memory_mib, h->memory_overcommit);
	cpu_cap = capacity(h->vcpus, h->cpu_overcommit);
	mem_room = (mem_cap - (double)(h->reserved_memory_mib + need->memory_mib)) / mem_cap;
	cpu_room = (cpu_cap - (double)(h->reserved_vcpus + need->vcpus)) / cpu_cap;
	room = clamp01(mem_room < cpu_room ? mem_room : cpu_room);
	/* Unknown live figures count as the reservations say. */
	free_mem = h->free_memory_mib >= 0 ?
	    clamp01((double)(h->free_memory_mib - need->memory_mib) / (double)h->memory_mib) :
	    room;
	idle = h->cpu_busy >= 0 ? clamp01(1 - h->cpu_busy) : room;
	score = PLACE_W_HEADROOM * room + PLACE_W_FREE_MEMORY * free_mem + PLACE_W_IDLE_CPU * idle;
	return score;
}

int
place_choose(const struct place_host *hosts, size_t n, const struct place_need *need)
{
	int best = -1;
	double best_score = -1;

	/* A degraded host only when no healthy one fits. */
	for (int pass = 0; pass < 2 && best < 0; pass++)
		for (size_t i = 0; i < n; i++) {
			double s;
			if ((hosts[i].degraded != 0) != pass)
				continue;
			s = place_score(&hosts[i], need);
			if (s >= 0 && s > best_score) {
				best = (int)i;
				best_score = s;
			}
		}
	return best;
}
