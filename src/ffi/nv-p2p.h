/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The NVIDIA peer-to-peer kernel ABI (nvidia.ko's nvidia_p2p_* exports), as
 * the project uses it. Written from the interface facts (names, field order,
 * constants); a vendor nv-p2p.h found at build time takes its place.
 */
#ifndef NVPM_NV_P2P_H
#define NVPM_NV_P2P_H

#include <linux/types.h>

struct pci_dev;

#define NVIDIA_P2P_MAJOR_VERSION_MASK 0xffff0000
#define NVIDIA_P2P_MINOR_VERSION_MASK 0x0000ffff
#define NVIDIA_P2P_MAJOR_VERSION(v) (((v) & NVIDIA_P2P_MAJOR_VERSION_MASK) >> 16)
#define NVIDIA_P2P_MINOR_VERSION(v) ((v) & NVIDIA_P2P_MINOR_VERSION_MASK)
#define NVIDIA_P2P_VERSION_COMPATIBLE(p, v)                                   \
	(NVIDIA_P2P_MAJOR_VERSION((p)->version) == NVIDIA_P2P_MAJOR_VERSION(v) && \
	 NVIDIA_P2P_MINOR_VERSION((p)->version) >= NVIDIA_P2P_MINOR_VERSION(v))

#define NVIDIA_P2P_GPU_UUID_LEN 16

enum nvidia_p2p_page_size_type {
	NVIDIA_P2P_PAGE_SIZE_4KB = 0,
	NVIDIA_P2P_PAGE_SIZE_64KB = 1,
	NVIDIA_P2P_PAGE_SIZE_128KB = 2,
	NVIDIA_P2P_PAGE_SIZE_COUNT = 3,
};

typedef struct nvidia_p2p_page {
	uint64_t physical_address;
	union nvidia_p2p_request_registers {
		struct {
			uint32_t wreqmb_h;
			uint32_t rreqmb_h;
			uint32_t rreqmb_0;
			uint32_t reserved[3];
		} fermi;
	} registers;
} nvidia_p2p_page_t;

/* 1.2 up to driver 575; 2.0 from 580.65.06, which added flags. */
#define NVIDIA_P2P_PAGE_TABLE_VERSION 0x00020000
#define NVIDIA_P2P_PAGE_TABLE_FLAGS_CPU_CACHEABLE 0x1

typedef struct nvidia_p2p_page_table {
	uint32_t version;
	uint32_t page_size; /* enum nvidia_p2p_page_size_type */
	struct nvidia_p2p_page **pages;
	uint32_t entries;
	uint8_t *gpu_uuid;
	uint32_t flags; /* version 2.0 and later only */
} nvidia_p2p_page_table_t;

#define NVIDIA_P2P_DMA_MAPPING_VERSION 0x00020003

typedef struct nvidia_p2p_dma_mapping {
	uint32_t version;
	enum nvidia_p2p_page_size_type page_size_type;
	uint32_t entries;
	uint64_t *dma_addresses;
	void *private;
	struct pci_dev *pci_dev;
} nvidia_p2p_dma_mapping_t;

/* Flags of the persistent API (570.86+). */
#define NVIDIA_P2P_FLAGS_DEFAULT 0
#define NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING 1
#define NVIDIA_P2P_CAP_GET_PAGES_PERSISTENT_API

int nvidia_p2p_get_pages(uint64_t p2p_token, uint32_t va_space,
			 uint64_t virtual_address, uint64_t length,
			 struct nvidia_p2p_page_table **page_table,
			 void (*free_callback)(void *data), void *data);
int nvidia_p2p_get_pages_persistent(uint64_t virtual_address, uint64_t length,
				    struct nvidia_p2p_page_table **page_table,
				    uint32_t flags);
int nvidia_p2p_put_pages(uint64_t p2p_token, uint32_t va_space,
			 uint64_t virtual_address,
			 struct nvidia_p2p_page_table *page_table);
int nvidia_p2p_put_pages_persistent(uint64_t virtual_address,
				    struct nvidia_p2p_page_table *page_table,
				    uint32_t flags);
int nvidia_p2p_free_page_table(struct nvidia_p2p_page_table *page_table);
int nvidia_p2p_dma_map_pages(struct pci_dev *peer,
			     struct nvidia_p2p_page_table *page_table,
			     struct nvidia_p2p_dma_mapping **dma_mapping);
int nvidia_p2p_dma_unmap_pages(struct pci_dev *peer,
			       struct nvidia_p2p_page_table *page_table,
			       struct nvidia_p2p_dma_mapping *dma_mapping);
int nvidia_p2p_free_dma_mapping(struct nvidia_p2p_dma_mapping *dma_mapping);

#endif /* NVPM_NV_P2P_H */
