/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The MLNX_OFED / DOCA-OFED peer-memory client ABI (ib_core's, later
 * ib_uverbs', PeerDirect exports) in its 4.0 / 5.1+ layout with the _ex
 * extension. Written from the interface facts; a vendor rdma/peer_mem.h found
 * at build time takes its place.
 */
#ifndef NVPM_PEER_MEM_H
#define NVPM_PEER_MEM_H

#include <linux/types.h>

struct device;
struct sg_table;

#define IB_PEER_MEMORY_NAME_MAX 64
#define IB_PEER_MEMORY_VER_MAX 16
#define PEER_MEM_U64_CORE_CONTEXT

struct peer_memory_client {
	char name[IB_PEER_MEMORY_NAME_MAX];
	/* Byte 15 non-zero marks a peer_memory_client_ex ("new-style"). */
	char version[IB_PEER_MEMORY_VER_MAX];
	int (*acquire)(unsigned long addr, size_t size,
		       void *peer_mem_private_data, char *peer_mem_name,
		       void **client_context);
	int (*get_pages)(unsigned long addr, size_t size, int write, int force,
			 struct sg_table *sg_head, void *client_context,
			 u64 core_context);
	int (*dma_map)(struct sg_table *sg_head, void *client_context,
		       struct device *dma_device, int dmasync, int *nmap);
	int (*dma_unmap)(struct sg_table *sg_head, void *client_context,
			 struct device *dma_device);
	void (*put_pages)(struct sg_table *sg_head, void *client_context);
	unsigned long (*get_page_size)(void *client_context);
	void (*release)(void *client_context);
};

enum {
	PEER_MEM_INVALIDATE_UNMAPS = 1 << 0,
};

struct peer_memory_client_ex {
	struct peer_memory_client client;
	size_t ex_size;
	u32 flags;
};

typedef int (*invalidate_peer_memory)(void *reg_handle, u64 core_context);

void *ib_register_peer_memory_client(const struct peer_memory_client *peer_client,
				     invalidate_peer_memory *invalidate_callback);
void ib_unregister_peer_memory_client(void *reg_handle);

#endif /* NVPM_PEER_MEM_H */
