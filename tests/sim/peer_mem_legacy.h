/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The MOFED 4.1 ... 5.0 (incl. 4.9 LTS) layout of struct peer_memory_client:
 * the 136-byte struct of peer_mem.h followed by two callbacks of the "peer_id"
 * mechanism, 152 bytes in all. The _ex fields of 5.4-3+ (ex_size, flags) land
 * exactly on these two pointers, which is why an _ex client registered with a
 * 4.x core looks like one that wants context private data.
 */
#ifndef PEER_MEM_LEGACY_H
#define PEER_MEM_LEGACY_H

#include <linux/build_bug.h>
#include <linux/stddef.h>

#include "peer_mem.h"

struct peer_memory_client_legacy {
	struct peer_memory_client client;
	void *(*get_context_private_data)(u64 peer_id);
	void (*put_context_private_data)(void *context);
};

static_assert(sizeof(struct peer_memory_client) == 136);
static_assert(offsetof(struct peer_memory_client_legacy, get_context_private_data) == 136);
static_assert(offsetof(struct peer_memory_client_legacy, put_context_private_data) == 144);
static_assert(sizeof(struct peer_memory_client_legacy) == 152);
static_assert(offsetof(struct peer_memory_client_ex, ex_size) == 136);
static_assert(offsetof(struct peer_memory_client_ex, flags) == 144);

#endif /* PEER_MEM_LEGACY_H */
