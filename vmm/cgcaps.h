/* cgcaps.h - what this machine's cgroups let libvirt set on a VM
 * (cgcaps_). libvirt refuses to start a domain whose XML asks for a
 * setting its cgroup controller cannot apply, so a limit the host cannot
 * honour is left out rather than failing every create. */
#ifndef AAS_CGCAPS_H
#define AAS_CGCAPS_H

/* 1 when the cgroups mounted under `root` (normally "/sys/fs/cgroup")
 * can weight a VM's block I/O (<blkiotune><weight>): cgroup v1's blkio
 * controller with CFQ's blkio.weight or BFQ's blkio.bfq.weight, or cgroup
 * v2 with the io controller. 0 otherwise: v1 under mq-deadline, kyber or
 * none has no weight file, and libvirt fails the domain with "blkio
 * device weight is valid only for bfq or cfq scheduler". */
int cgcaps_blkio_weight(const char *root);
/* cgcaps_blkio_weight of this machine's /sys/fs/cgroup, probed on the
 * first call (and a warning logged once when it is 0). */
int cgcaps_this_machine_blkio_weight(void);

#endif
