/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* What src/shim.c offers the Rust side. */
#ifndef NVPM_SHIM_H
#define NVPM_SHIM_H

int nvpm_param_persistent_api_support(void);
int nvpm_param_peerdirect_support(void);

struct device;
struct pci_dev;
struct workqueue_struct;

/* The PCI device behind dev, or NULL if dev is not a PCI device. */
struct pci_dev *nvpm_to_pci_dev(struct device *dev);
/* dma_get_max_seg_size() (static inline in C). */
unsigned int nvpm_dma_max_seg_size(struct device *dev);
/* The module's own workqueue for deferred unpinning. */
struct workqueue_struct *nvpm_wq_create(void);
void nvpm_wq_destroy(struct workqueue_struct *wq);
/* One shared rate limit for error lines on hot paths. */
bool nvpm_ratelimit(void);
/* /sys/kernel/debug/nvidia_peermem/stats. */
void nvpm_debugfs_init(void);
void nvpm_debugfs_exit(void);
/* Implemented in Rust (src/stats.rs). */
unsigned int nvpm_stat_count(void);
const char *nvpm_stat_name(unsigned int i);
u64 nvpm_stat_value(unsigned int i);

#endif /* NVPM_SHIM_H */
