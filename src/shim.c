// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The part of nvidia_peermem that Rust cannot express on 7.3, and who wraps
 * each part on the Rust side:
 * - the version modinfo;
 * - the two read-only (0444) module parameters, checked when parsed, the
 *   rate limit of error lines and the debugfs statistics file (shim.rs);
 * - the scatterlist slab caches, no kmem_cache abstraction yet
 *   (scatterlist.rs);
 * - the peer-memory API linked weakly, the name of the module providing it
 *   and the DMA device's segment limit (peer_mem.rs);
 * - to_pci_dev, a static inline helper (nvidia_p2p.rs).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kallsyms.h>
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/debugfs.h>
#include <linux/dma-mapping.h>
#include <linux/pci.h>
#include <linux/ratelimit.h>
#include <linux/scatterlist.h>
#include <linux/seq_file.h>

#include NVPM_PEER_MEM_HEADER
#include "shim.h"

MODULE_VERSION(NVPM_VERSION);

static int persistent_api_support = 1;
static int peerdirect_support;

/* Only 0 and 1 mean something; anything else fails the load. */
static int nvpm_param_set_01(const char *val, const struct kernel_param *kp)
{
	int v;

	if (kstrtoint(val, 0, &v) || (v != 0 && v != 1)) {
		pr_err("invalid value '%s' for parameter %s: use 0 or 1\n", val, kp->name);
		return -EINVAL;
	}
	*(int *)kp->arg = v;
	return 0;
}

static const struct kernel_param_ops nvpm_param_ops_01 = {
	.set = nvpm_param_set_01,
	.get = param_get_int,
};

module_param_cb(persistent_api_support, &nvpm_param_ops_01, &persistent_api_support, 0444);
MODULE_PARM_DESC(persistent_api_support,
		 "1 (default): persistent nv_mem, revocable nv_mem_fallback behind it; 0: revocable nv_mem plus persistent nv_mem_nc");
module_param_cb(peerdirect_support, &nvpm_param_ops_01, &peerdirect_support, 0444);
MODULE_PARM_DESC(peerdirect_support,
		 "0 (default): MOFED 5.4-3+ / DOCA (_ex client); 1: legacy MOFED 4.x-5.0 layout");

int nvpm_param_persistent_api_support(void)
{
	return READ_ONCE(persistent_api_support);
}

int nvpm_param_peerdirect_support(void)
{
	return READ_ONCE(peerdirect_support);
}

struct pci_dev *nvpm_to_pci_dev(struct device *dev)
{
	return dev && dev_is_pci(dev) ? to_pci_dev(dev) : NULL;
}

unsigned int nvpm_dma_max_seg_size(struct device *dev)
{
	return dma_get_max_seg_size(dev);
}

/*
 * The classes of shim.h, in order: cache name, slots per object. Large
 * chunks are 16 KiB objects: slabs of order 2 or 3, which the page allocator
 * retries rather than fails (PAGE_ALLOC_COSTLY_ORDER); SLUB falls back to
 * the smallest order that holds one object.
 */
#define NVPM_SG_CLASS_LIST(X)                                   \
	X(nvidia_peermem_sg_1, 1)                               \
	X(nvidia_peermem_sg_16, 16)                             \
	X(nvidia_peermem_sg, NVPM_SG_CHUNK_SLOTS)               \
	X(nvidia_peermem_sg_large, NVPM_SG_LARGE_CHUNK_SLOTS)

/*
 * Every object is zeroed once, by its cache's constructor, when its slab is
 * made. A cache with a constructor is not zeroed again per allocation
 * (init_on_alloc), and an object keeps its contents while free. The Rust
 * side relies on that: every slot of a free object has page_link and offset
 * 0 (it clears its chain links and end mark before freeing), so an entry is
 * written as its length and DMA fields.
 */
#define NVPM_SG_CTOR(name, slots)                                   \
	static void name##_ctor(void *sg)                           \
	{                                                           \
		memset(sg, 0, (slots) * sizeof(struct scatterlist)); \
	}
NVPM_SG_CLASS_LIST(NVPM_SG_CTOR)

#define NVPM_SG_CLASS(name, slots) { #name, slots, name##_ctor },
static const struct {
	const char *name;
	unsigned int slots;
	void (*ctor)(void *sg);
} nvpm_sg_classes[] = { NVPM_SG_CLASS_LIST(NVPM_SG_CLASS) };
static_assert(ARRAY_SIZE(nvpm_sg_classes) == NVPM_SG_CLASSES);
static_assert(NVPM_SG_CHUNK_CLASS == 2 && NVPM_SG_LARGE_CHUNK_CLASS == 3);

static struct kmem_cache *nvpm_sg_caches[NVPM_SG_CLASSES];

int nvpm_sg_cache_create(void)
{
	unsigned int i;

	for (i = 0; i < NVPM_SG_CLASSES; i++) {
		nvpm_sg_caches[i] = kmem_cache_create(
			nvpm_sg_classes[i].name,
			nvpm_sg_classes[i].slots * sizeof(struct scatterlist),
			__alignof__(struct scatterlist), 0, nvpm_sg_classes[i].ctor);
		if (!nvpm_sg_caches[i]) {
			nvpm_sg_cache_destroy();
			return -ENOMEM;
		}
	}
	return 0;
}

void nvpm_sg_cache_destroy(void)
{
	unsigned int i;

	for (i = 0; i < NVPM_SG_CLASSES; i++) {
		kmem_cache_destroy(nvpm_sg_caches[i]);
		nvpm_sg_caches[i] = NULL;
	}
}

struct scatterlist *nvpm_sg_alloc(unsigned int class)
{
	if (WARN_ON_ONCE(class >= NVPM_SG_CLASSES))
		return NULL;
	return kmem_cache_alloc(nvpm_sg_caches[class], GFP_KERNEL);
}

/*
 * Without reclaim: for tables built under a pin's lock, which a free
 * callback holding NVIDIA's API lock may wait for (reclaim may enter the
 * driver: its page pools' shrinker, nvidia-uvm's mmu notifiers).
 */
struct scatterlist *nvpm_sg_alloc_nowait(unsigned int class)
{
	if (WARN_ON_ONCE(class >= NVPM_SG_CLASSES))
		return NULL;
	return kmem_cache_alloc(nvpm_sg_caches[class], GFP_NOWAIT | __GFP_NOWARN);
}

void nvpm_sg_free(struct scatterlist *sg, unsigned int class)
{
	if (!WARN_ON_ONCE(class >= NVPM_SG_CLASSES))
		kmem_cache_free(nvpm_sg_caches[class], sg);
}

static DEFINE_RATELIMIT_STATE(nvpm_rs, 5 * HZ, 10);

bool nvpm_ratelimit(void)
{
	return __ratelimit(&nvpm_rs);
}

static struct dentry *nvpm_debugfs_dir;

static int nvpm_stats_show(struct seq_file *m, void *unused)
{
	unsigned int i;

	for (i = 0; i < nvpm_stat_count(); i++)
		seq_printf(m, "%s %llu\n", nvpm_stat_name(i), nvpm_stat_value(i));
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(nvpm_stats);

void nvpm_debugfs_init(void)
{
	nvpm_debugfs_dir = debugfs_create_dir(KBUILD_MODNAME, NULL);
	debugfs_create_file("stats", 0444, nvpm_debugfs_dir, NULL, &nvpm_stats_fops);
}

void nvpm_debugfs_exit(void)
{
	debugfs_remove_recursive(nvpm_debugfs_dir);
}

/*
 * The peer-memory API, linked weakly: the kernel's own (inbox) RDMA stack
 * lacks it, and a load there should say so instead of "Unknown symbol".
 * The code reads their addresses from data (absolute relocations, 0 when
 * absent): arm64's GCC loads an undefined weak symbol's address from a GOT,
 * whose relocations the kernel's module loader refuses.
 */
extern typeof(ib_register_peer_memory_client) ib_register_peer_memory_client __weak;
extern typeof(ib_unregister_peer_memory_client) ib_unregister_peer_memory_client __weak;
static typeof(&ib_register_peer_memory_client) nvpm_ib_register __ro_after_init =
	ib_register_peer_memory_client;
static typeof(&ib_unregister_peer_memory_client) nvpm_ib_unregister __ro_after_init =
	ib_unregister_peer_memory_client;

bool nvpm_peer_api_present(void)
{
	return READ_ONCE(nvpm_ib_register) && READ_ONCE(nvpm_ib_unregister);
}

void *nvpm_peer_register(const struct peer_memory_client *client,
			 invalidate_peer_memory *invalidate_callback)
{
	if (!nvpm_peer_api_present())
		return NULL;
	return READ_ONCE(nvpm_ib_register)(client, invalidate_callback);
}

void nvpm_peer_unregister(void *handle)
{
	if (handle && READ_ONCE(nvpm_ib_unregister))
		READ_ONCE(nvpm_ib_unregister)(handle);
}

/* The module providing the peer-memory API ("ib_core"), or "vmlinux". */
void nvpm_peer_core_name(char *buf, size_t len)
{
	char sym[KSYM_SYMBOL_LEN];
	char *open, *end;

	strscpy(buf, "vmlinux", len);
	if (!nvpm_peer_api_present())
		return;
	snprintf(sym, sizeof(sym), "%ps", READ_ONCE(nvpm_ib_register));
	open = strchr(sym, '[');
	if (!open)
		return;
	open++;
	end = open + strcspn(open, " ]");
	*end = 0;
	strscpy(buf, open, len);
}
