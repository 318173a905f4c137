/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* What src/shim.c offers the Rust side. */
#ifndef NVPM_SHIM_H
#define NVPM_SHIM_H

#include <asm/page.h>

/* The kernel's page size, for the driver's DMA submaps (peermem_core::diag). */
enum { NVPM_PAGE_SHIFT = PAGE_SHIFT };

int nvpm_param_persistent_api_support(void);
int nvpm_param_peerdirect_support(void);

struct device;
struct pci_dev;

/* The PCI device behind dev, or NULL if dev is not a PCI device. */
struct pci_dev *nvpm_to_pci_dev(struct device *dev);
/* dma_get_max_seg_size() (static inline in C). */
unsigned int nvpm_dma_max_seg_size(struct device *dev);
/*
 * Scatterlist slots from the module's slab caches, by class: tables of 1 or
 * up to 16 entries (classes 0 and 1, one object each) and chain chunks of
 * 127 slots (126 entries and a link) and 511 (510 and a link), so that a
 * chunk and the slab's free pointer, kept outside objects with a
 * constructor, fit 4 KiB and 16 KiB. A free object is clean: every slot
 * has page_link and offset 0.
 */
#define NVPM_SG_EXACT_CLASSES 2
#define NVPM_SG_CHUNK_CLASS 2
#define NVPM_SG_CHUNK_SLOTS 127
#define NVPM_SG_LARGE_CHUNK_CLASS 3
#define NVPM_SG_LARGE_CHUNK_SLOTS 511
#define NVPM_SG_CLASSES 4
struct scatterlist;
int nvpm_sg_cache_create(void);
void nvpm_sg_cache_destroy(void);
struct scatterlist *nvpm_sg_alloc(unsigned int class);
struct scatterlist *nvpm_sg_alloc_nowait(unsigned int class);
void nvpm_sg_free(struct scatterlist *sg, unsigned int class);
/* One shared rate limit for error lines on hot paths. */
bool nvpm_ratelimit(void);
/* /sys/kernel/debug/nvidia_peermem/stats. */
void nvpm_debugfs_init(void);
void nvpm_debugfs_exit(void);
/* The peer-memory API, if the running RDMA core has one (weak links). */
struct peer_memory_client;
bool nvpm_peer_api_present(void);
void *nvpm_peer_register(const struct peer_memory_client *client,
			 int (**invalidate_callback)(void *reg_handle, u64 core_context));
void nvpm_peer_unregister(void *handle);
/* The name of the module that provides it, NUL-terminated in buf. */
void nvpm_peer_core_name(char *buf, size_t len);
/* Implemented in Rust (src/stats.rs). */
unsigned int nvpm_stat_count(void);
const char *nvpm_stat_name(unsigned int i);
u64 nvpm_stat_value(unsigned int i);

#endif /* NVPM_SHIM_H */
