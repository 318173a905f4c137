// SPDX-License-Identifier: GPL-2.0
/*
 * peer_test_client: a small C peer-memory client for the simulators'
 * self-tests (test-only, never product code). By default it is a correct
 * client of both simulators: it pins with nvidia_p2p_get_pages (or the
 * persistent API), maps for the HCA, forwards free callbacks to the core and
 * copes with all three MOFED generations. The "bug" parameter makes it break
 * one rule of the contract on purpose, so that the tests can check that the
 * simulators detect it.
 *
 * Locking, under the driver's real rules (NVIDIA's open kernel modules
 * 595.45.04: kernel-open/nvidia/nv-p2p.c, RM's rm_p2p_* in osapi.c; listed
 * with their sources in tests/sim/README.md, "API semantics"): ctx->lock
 * protects a context's page table, mapping and state, and is never held
 * across a call into the driver. The free callback
 * runs under the driver's API lock, so it waits for nothing that needs that
 * lock (a map, pin or put in flight) and forwards the invalidation only for
 * a mapped context (before that, the core's mapping_lock is held by the
 * registration inside dma_map, and the core learns of the revocation from
 * dma_map's failure). It does wait for an unmap of its own table in flight
 * (dma_unmap_pages needs no API lock), since the driver frees the table when
 * the callback returns; after that nothing reads, maps or unmaps the table.
 * The free callback holds a reference on the context, since a legacy core
 * releases it inside the invalidation.
 */
#define pr_fmt(fmt) "peer_test_client: " fmt

#include <linux/delay.h>
#include <linux/kref.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/scatterlist.h>
#include <linux/sched.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/workqueue.h>

#include "nv-p2p.h"
#include "peer_mem.h"
#include "peer_mem_legacy.h"
#include "sim_common.h"

#define TC_GPU_PAGE_SIZE SZ_64K
#define TC_MAX_SGE_LEN SZ_1G

static char *name = "test_client";
module_param(name, charp, 0444);
MODULE_PARM_DESC(name, "Client name (the persistent companion adds _nc); 64 characters or more fill the name unterminated");

enum tc_abi { ABI_EX, ABI_PLAIN, ABI_LEGACY, ABI_LEGACY_CTX, ABI_EX_SHORT };
static const char *const tc_abi_names[] = { "ex", "plain", "legacy", "legacy_ctx", "ex_short" };
static int abi = ABI_EX;
static struct sim_enum_param abi_param = { tc_abi_names, ARRAY_SIZE(tc_abi_names), &abi };
module_param_cb(abi, &sim_enum_param_ops, &abi_param, 0444);
MODULE_PARM_DESC(abi, "Struct registered: ex (_ex + INVALIDATE_UNMAPS), plain (136 bytes), legacy (152 bytes), legacy_ctx (152, get_context_private_data set), ex_short (_ex whose ex_size ends before flags)");

static bool persistent;
module_param(persistent, bool, 0444);
MODULE_PARM_DESC(persistent, "Pin with the persistent API and take no invalidation");

static bool nc;
module_param(nc, bool, 0444);
MODULE_PARM_DESC(nc, "Also register NAME_nc, a persistent client without invalidation");

static char *missing = "";
module_param(missing, charp, 0444);
MODULE_PARM_DESC(missing, "Leave this callback NULL (acquire, get_pages, dma_map, ...)");

static bool dup;
module_param(dup, bool, 0444);
MODULE_PARM_DESC(dup, "Also try to register a second client with the same name");

static bool hold_module = true;
module_param(hold_module, bool, 0444);
MODULE_PARM_DESC(hold_module, "Hold a module reference per context (0: rmmod waits in unregister instead)");

static bool claim = true;
module_param(claim, bool, 0644);
MODULE_PARM_DESC(claim, "acquire claims the range (0: says not mine)");

static ulong tc_page_size = TC_GPU_PAGE_SIZE;
module_param_named(page_size, tc_page_size, ulong, 0644);
MODULE_PARM_DESC(page_size, "What get_page_size returns (default 65536)");

static uint callback_delay_ms;
module_param(callback_delay_ms, uint, 0644);
MODULE_PARM_DESC(callback_delay_ms, "Sleep in the free callback before forwarding it (races)");

static bool coalesce;
module_param(coalesce, bool, 0644);
MODULE_PARM_DESC(coalesce, "Merge DMA-contiguous pages into one SGE");

/* SGEs found trimmed at release: the core must restore them before. */
static uint trimmed_at_release;
module_param(trimmed_at_release, uint, 0444);
MODULE_PARM_DESC(trimmed_at_release, "Self-check: SGEs whose DMA address or length (or sg->length) release found not as dma_map made them");

static bool pin_in_acquire;
module_param(pin_in_acquire, bool, 0644);
MODULE_PARM_DESC(pin_in_acquire, "Pin in acquire and keep that pin for get_pages: one pin per registration (default: a probe pin and unpin in acquire, the pin in get_pages)");

enum tc_bug {
	TC_BUG_NONE, TC_BUG_PUT_IN_CALLBACK, TC_BUG_UNMAP_IN_CALLBACK, TC_BUG_DOUBLE_PUT,
	TC_BUG_UNMAP_UNKNOWN, TC_BUG_MAP_AFTER_REVOKE, TC_BUG_LEAK_PINS, TC_BUG_SG_MISALIGNED,
	TC_BUG_SG_SHORT, TC_BUG_SG_FIRST_OFFSET, TC_BUG_NMAP, TC_BUG_MAP_FAIL_DIRTY,
	TC_BUG_INVAL_AFTER_RELEASE, TC_BUG_UNMAP_ERROR, TC_BUG_PUT_UNKNOWN_TABLE,
	TC_BUG_MAP_UNKNOWN_TABLE, TC_BUG_UNMAP_UNKNOWN_TABLE, TC_BUG_WRONG_PUT,
	TC_BUG_PUT_WRONG_VA, TC_BUG_MAP_UNCHECKED, TC_BUG_UNMAP_WRONG_PEER,
	TC_BUG_UNMAP_AFTER_PUT, TC_BUG_SG_FIRST_SHORT, TC_BUG_INVAL_BAD_HANDLE,
	TC_BUG_INVAL_NC, TC_BUG_UNREGISTER_TWICE, TC_BUG_UNMAP_AFTER_REVOKE,
	TC_BUG_CALLBACK_WAITS_MAP, TC_BUG_UNMAP_TWICE, TC_BUG_PUT_NULL,
	TC_BUG_UNPIN_IN_WORK,
};

static const char *const tc_bug_names[] = {
	"none", "put_in_callback", "unmap_in_callback", "double_put",
	"unmap_unknown", "map_after_revoke", "leak_pins", "sg_misaligned",
	"sg_short", "sg_first_offset", "nmap", "map_fail_dirty",
	"inval_after_release", "unmap_error", "put_unknown_table",
	"map_unknown_table", "unmap_unknown_table", "wrong_put",
	"put_wrong_va", "map_unchecked", "unmap_wrong_peer",
	"unmap_after_put", "sg_first_short", "inval_bad_handle",
	"inval_nc", "unregister_twice", "unmap_after_revoke",
	"callback_waits_map", "unmap_twice", "put_null",
	"unpin_in_work",
};

static int bug = TC_BUG_NONE;
static struct sim_enum_param bug_param = { tc_bug_names, ARRAY_SIZE(tc_bug_names), &bug };
module_param_cb(bug, &sim_enum_param_ops, &bug_param, 0644);
MODULE_PARM_DESC(bug, "Contract rule to break (none, put_in_callback, ..., see tests/sim/README.md, \"The test client\")");

static bool tc_has_bug(enum tc_bug b)
{
	return READ_ONCE(bug) == b;
}

/* One registration with the core. */
struct tc_client {
	union {
		struct peer_memory_client_ex ex;
		struct peer_memory_client_legacy legacy;
	} ops;
	void *handle;
	invalidate_peer_memory invalidate;	/* NULL: no invalidation */
	bool persistent;
};

static struct tc_client tc_main, tc_nc, tc_dup;

struct tc_ctx {
	struct kref ref;		/* the core's until release, + free callback's */
	struct tc_client *client;
	struct mutex lock;		/* the fields below */
	u64 va;				/* 64 KiB aligned range */
	u64 len;
	u64 core_context;
	struct nvidia_p2p_page_table *pt;
	struct nvidia_p2p_dma_mapping *dm;
	struct nvidia_p2p_page_table *stale_pt;	/* for map_after_revoke */
	struct pci_dev *peer;
	struct sg_table sgt;		/* a copy of the core's table as dma_map made it */
	bool sg_allocated;		/* sgt holds entries to free in release */
	bool pinned_early;		/* pin_in_acquire: pt pinned by acquire */
	bool revoked;			/* the free callback ran */
	bool mapped;			/* dma_map succeeded, no dma_unmap yet */
	bool unmapping;			/* a dma_unmap_pages is in flight */
	bool map_in_flight;		/* a dma_map_pages is (callback_waits_map) */
	struct task_struct *cb_task;	/* while our free callback runs */
};

/* A context's unmap (or, for callback_waits_map, map) ended. */
static DECLARE_WAIT_QUEUE_HEAD(tc_unmap_wait);

/* inval_after_release: the core context to invalidate at the next acquire. */
static struct {
	struct tc_client *client;
	u64 core_context;
} tc_stale;

static DEFINE_SPINLOCK(tc_stale_lock);

/* A page table the GPU never handed out (the *_unknown_table bugs). */
static struct nvidia_p2p_page_table tc_unknown_pt;

static void tc_ctx_free(struct kref *ref)
{
	kfree(container_of(ref, struct tc_ctx, ref));
}

static void tc_probe_callback(void *data)
{
}

/* Whether the GPU memory is there: pin and unpin it at once. */
static int tc_probe(struct tc_client *client, u64 va, u64 len)
{
	struct nvidia_p2p_page_table *pt;
	int ret;

	if (client->persistent) {
		ret = nvidia_p2p_get_pages_persistent(va, len, &pt, 0);
		if (!ret)
			ret = nvidia_p2p_put_pages_persistent(va, pt, 0);
	} else {
		ret = nvidia_p2p_get_pages(0, 0, va, len, &pt, tc_probe_callback, NULL);
		if (!ret)
			ret = nvidia_p2p_put_pages(0, 0, va, pt);
	}
	return ret;
}

static void tc_free_callback(void *data);

/* The registration's pin; a callback that came already leaves no table. */
static int tc_pin(struct tc_ctx *ctx)
{
	struct nvidia_p2p_page_table *pt;
	int ret;

	if (ctx->client->persistent)
		ret = nvidia_p2p_get_pages_persistent(ctx->va, ctx->len, &pt, 0);
	else
		ret = nvidia_p2p_get_pages(0, 0, ctx->va, ctx->len, &pt,
					   tc_free_callback, ctx);
	mutex_lock(&ctx->lock);
	if (!ret && !ctx->revoked)
		ctx->pt = pt;
	mutex_unlock(&ctx->lock);
	return ret;
}

static void tc_fire_stale_invalidation(void)
{
	struct tc_client *client;
	u64 core_context;

	spin_lock(&tc_stale_lock);
	client = tc_stale.client;
	core_context = tc_stale.core_context;
	tc_stale.client = NULL;
	spin_unlock(&tc_stale_lock);
	if (client)
		client->invalidate(client->handle, core_context);
}

static int tc_acquire(struct tc_client *client, unsigned long addr, size_t size,
		      void **client_context)
{
	struct tc_ctx *ctx;

	tc_fire_stale_invalidation();
	if (!READ_ONCE(claim))
		return 0;
	ctx = kzalloc(sizeof(*ctx), GFP_KERNEL);
	if (!ctx)
		return 0;
	kref_init(&ctx->ref);
	mutex_init(&ctx->lock);
	ctx->client = client;
	ctx->va = ALIGN_DOWN(addr, TC_GPU_PAGE_SIZE);
	ctx->len = ALIGN(addr + size, TC_GPU_PAGE_SIZE) - ctx->va;
	if (READ_ONCE(pin_in_acquire)) {
		if (tc_pin(ctx)) {
			kfree(ctx);
			return 0;
		}
		ctx->pinned_early = true;
	} else if (tc_probe(client, ctx->va, ctx->len)) {
		kfree(ctx);
		return 0;
	}
	if (hold_module)
		__module_get(THIS_MODULE);	/* until release */
	*client_context = ctx;
	return 1;
}

static int tc_acquire_main(unsigned long addr, size_t size, void *peer_mem_private_data,
			   char *peer_mem_name, void **client_context)
{
	return tc_acquire(&tc_main, addr, size, client_context);
}

static int tc_acquire_nc(unsigned long addr, size_t size, void *peer_mem_private_data,
			 char *peer_mem_name, void **client_context)
{
	return tc_acquire(&tc_nc, addr, size, client_context);
}

static void tc_free_callback(void *data)
{
	struct tc_ctx *ctx = data;
	struct tc_client *client = ctx->client;

	bool forward;

	__module_get(THIS_MODULE);
	kref_get(&ctx->ref);	/* a legacy core releases ctx in the invalidation */
	mutex_lock(&ctx->lock);
	ctx->revoked = true;
	ctx->cb_task = current;
	ctx->stale_pt = ctx->pt;
	forward = ctx->mapped;
	mutex_unlock(&ctx->lock);

	/* The driver refuses it (its API lock is held here): -EIO, logged. */
	if (tc_has_bug(TC_BUG_PUT_IN_CALLBACK))
		pr_info("put_in_callback: nvidia_p2p_put_pages returned %d\n",
			nvidia_p2p_put_pages(0, 0, ctx->va, ctx->pt));
	/* Allowed: it needs only the table's own lock. */
	if (tc_has_bug(TC_BUG_UNMAP_IN_CALLBACK) && ctx->dm && forward) {
		nvidia_p2p_dma_unmap_pages(ctx->peer, ctx->pt, ctx->dm);
		ctx->dm = NULL;
	}
	if (READ_ONCE(callback_delay_ms))
		msleep(READ_ONCE(callback_delay_ms));
	if (forward)
		client->invalidate(client->handle, ctx->core_context);

	/* A map in flight waits for the API lock this callback runs under. */
	if (tc_has_bug(TC_BUG_CALLBACK_WAITS_MAP))
		wait_event(tc_unmap_wait, !READ_ONCE(ctx->map_in_flight));
	/* The GPU frees the table and mappings once this returns. */
	wait_event(tc_unmap_wait, !READ_ONCE(ctx->unmapping));
	mutex_lock(&ctx->lock);
	ctx->cb_task = NULL;
	/* unmap_after_revoke keeps them: dereg then unmaps a freed mapping. */
	if (!tc_has_bug(TC_BUG_UNMAP_AFTER_REVOKE)) {
		ctx->pt = NULL;
		ctx->dm = NULL;
	}
	mutex_unlock(&ctx->lock);
	kref_put(&ctx->ref, tc_ctx_free);
	module_put(THIS_MODULE);
}

/* inval_bad_handle, inval_nc: invalidations the core must refuse. */
static void tc_bad_invalidation(struct tc_client *client, u64 core_context)
{
	/* Our own struct instead of the handle the core returned. */
	if (tc_has_bug(TC_BUG_INVAL_BAD_HANDLE) && client->invalidate)
		client->invalidate(client, core_context);
	/* A umem without invalidation, through the main client's function. */
	if (tc_has_bug(TC_BUG_INVAL_NC) && !client->invalidate && tc_main.invalidate)
		tc_main.invalidate(client->handle, core_context);
}

static int tc_get_pages(unsigned long addr, size_t size, int write, int force,
			struct sg_table *sg_head, void *client_context, u64 core_context)
{
	struct tc_ctx *ctx = client_context;
	int ret = 0;

	mutex_lock(&ctx->lock);
	ctx->core_context = core_context;
	mutex_unlock(&ctx->lock);
	/* A callback that came already leaves nothing to keep: dma_map fails. */
	if (!ctx->pinned_early)
		ret = tc_pin(ctx);
	if (!ret)
		tc_bad_invalidation(ctx->client, core_context);
	return ret;
}

static bool tc_table_ok(const struct tc_ctx *ctx)
{
	const struct nvidia_p2p_page_table *pt = ctx->pt;
	u32 major = NVIDIA_P2P_MAJOR_VERSION(pt->version);

	return (major == 1 || major == 2) && pt->page_size == NVIDIA_P2P_PAGE_SIZE_64KB &&
	       (u64)pt->entries * TC_GPU_PAGE_SIZE == ctx->len;
}

/* The number of SGEs for the mapping: one per page, or per contiguous run. */
static unsigned int tc_count_sges(const struct nvidia_p2p_dma_mapping *dm)
{
	unsigned int n = 1, run = TC_GPU_PAGE_SIZE;
	u32 i;

	for (i = 1; i < dm->entries; i++, run += TC_GPU_PAGE_SIZE) {
		if (!coalesce || run == TC_MAX_SGE_LEN ||
		    dm->dma_addresses[i] != dm->dma_addresses[i - 1] + TC_GPU_PAGE_SIZE) {
			n++;
			run = 0;
		}
	}
	return n;
}

static void tc_fill_sges(struct sg_table *sgt, const struct nvidia_p2p_dma_mapping *dm)
{
	struct scatterlist *sg = sgt->sgl;
	u32 i;

	sg_dma_address(sg) = dm->dma_addresses[0];
	sg_dma_len(sg) = TC_GPU_PAGE_SIZE;
	for (i = 1; i < dm->entries; i++) {
		if (coalesce && sg_dma_len(sg) < TC_MAX_SGE_LEN &&
		    dm->dma_addresses[i] == dm->dma_addresses[i - 1] + TC_GPU_PAGE_SIZE) {
			sg_dma_len(sg) += TC_GPU_PAGE_SIZE;
			continue;
		}
		sg = sg_next(sg);
		sg_dma_address(sg) = dm->dma_addresses[i];
		sg_dma_len(sg) = TC_GPU_PAGE_SIZE;
	}
	for_each_sg(sgt->sgl, sg, sgt->nents, i)
		sg->length = sg_dma_len(sg);
}

/* The sg_* bugs: a table that breaks one of the core's rules. */
static void tc_break_sges(struct sg_table *sgt, int *nmap)
{
	struct scatterlist *last = sg_last(sgt->sgl, sgt->nents);

	if (tc_has_bug(TC_BUG_SG_MISALIGNED)) {
		sg_dma_len(sgt->sgl) -= 512;
	} else if (tc_has_bug(TC_BUG_SG_SHORT) && sgt->nents > 1) {
		sgt->nents--;
		*nmap = sgt->nents;
	} else if (tc_has_bug(TC_BUG_SG_FIRST_OFFSET)) {
		/* Same total, but the first SGE starts one OS page late. */
		sg_dma_address(sgt->sgl) += PAGE_SIZE;
		sg_dma_len(sgt->sgl) -= PAGE_SIZE;
		sg_dma_len(last) += PAGE_SIZE;
	} else if (tc_has_bug(TC_BUG_NMAP)) {
		*nmap = sgt->nents + 1;
	} else if (tc_has_bug(TC_BUG_SG_FIRST_SHORT) && sgt->nents > 1) {
		/* Same total, but the first SGE is one OS page: too short to trim. */
		sg_dma_len(last) += sg_dma_len(sgt->sgl) - PAGE_SIZE;
		sg_dma_len(sgt->sgl) = PAGE_SIZE;
	}
}

/* Unmaps @dm (ctx->unmapping set by the caller), then lets a callback return. */
static void tc_unmap_end(struct tc_ctx *ctx, struct pci_dev *peer,
			 struct nvidia_p2p_page_table *pt, struct nvidia_p2p_dma_mapping *dm)
{
	nvidia_p2p_dma_unmap_pages(peer, pt, dm);
	/* Still unmapping: a callback waits, the table is alive. */
	if (tc_has_bug(TC_BUG_UNMAP_TWICE))
		pr_info("unmap_twice: the second nvidia_p2p_dma_unmap_pages returned %d\n",
			nvidia_p2p_dma_unmap_pages(peer, pt, dm));
	WRITE_ONCE(ctx->unmapping, false);
	wake_up_all(&tc_unmap_wait);
}

static int tc_dma_map(struct sg_table *sg_head, void *client_context,
		      struct device *dma_device, int dmasync, int *nmap)
{
	struct tc_ctx *ctx = client_context;
	struct nvidia_p2p_page_table *pt;
	struct nvidia_p2p_dma_mapping *dm;
	struct pci_dev *peer;
	int ret;

	if (!dma_device || !dev_is_pci(dma_device)) {
		pr_err("dma_map: %s is not a PCI device\n",
		       dma_device ? dev_name(dma_device) : "(null)");
		return -EINVAL;
	}
	peer = to_pci_dev(dma_device);
	mutex_lock(&ctx->lock);
	/* map_unchecked trusts the table (bad_data=page_size: bad_page_size). */
	if (ctx->revoked || !ctx->pt ||
	    (!tc_has_bug(TC_BUG_MAP_UNCHECKED) && !tc_table_ok(ctx))) {
		ret = ctx->revoked ? -EFAULT : -EINVAL;
		goto out;
	}
	pt = ctx->pt;
	ctx->map_in_flight = true;
	mutex_unlock(&ctx->lock);
	if (tc_has_bug(TC_BUG_MAP_UNKNOWN_TABLE))
		nvidia_p2p_dma_map_pages(peer, &tc_unknown_pt, &dm);
	ret = nvidia_p2p_dma_map_pages(peer, pt, &dm);
	mutex_lock(&ctx->lock);
	ctx->map_in_flight = false;
	wake_up_all(&tc_unmap_wait);
	if (ret)
		goto out;
	/* Revoked meanwhile: the mapping is the driver's, never unmapped. */
	if (ctx->revoked) {
		ret = -EFAULT;
		goto out;
	}
	ctx->dm = dm;
	ctx->peer = peer;
	if (!NVIDIA_P2P_VERSION_COMPATIBLE(ctx->dm, NVIDIA_P2P_DMA_MAPPING_VERSION) ||
	    ctx->dm->entries != ctx->pt->entries) {
		ret = -EINVAL;
		goto unmap;
	}
	ret = sg_alloc_table(sg_head, tc_count_sges(ctx->dm), GFP_KERNEL);
	if (ret)
		goto unmap;
	/*
	 * Freed in release, from this copy: put_pages may be skipped, and the
	 * core zeroes its own table when it unmaps (MOFED 5.1+).
	 */
	ctx->sgt = *sg_head;
	ctx->sg_allocated = true;
	tc_fill_sges(sg_head, ctx->dm);
	*nmap = sg_head->nents;
	tc_break_sges(sg_head, nmap);
	if (tc_has_bug(TC_BUG_MAP_FAIL_DIRTY)) {
		sg_head->nents = sg_head->orig_nents + 5;
		ret = -ENOMEM;
		goto unmap;
	}
	ctx->mapped = true;
	goto out;
unmap:
	dm = ctx->dm;
	ctx->dm = NULL;
	ctx->unmapping = true;
	mutex_unlock(&ctx->lock);
	tc_unmap_end(ctx, peer, pt, dm);
	return ret;
out:
	mutex_unlock(&ctx->lock);
	return ret;
}

/* Unpins @pt with the client's API, or with the other one (wrong_put). */
static int tc_put(struct tc_client *client, u64 va, struct nvidia_p2p_page_table *pt,
		  bool other_api)
{
	if (client->persistent != other_api)
		return nvidia_p2p_put_pages_persistent(va, pt, 0);
	return nvidia_p2p_put_pages(0, 0, va, pt);
}

/* unmap_wrong_peer: unmaps with a PCI device other than the mapping's. */
static void tc_unmap_wrong_peer(struct pci_dev *peer, struct nvidia_p2p_page_table *pt,
				struct nvidia_p2p_dma_mapping *dm)
{
	struct pci_dev *other = NULL;

	for_each_pci_dev(other)
		if (other != peer)
			break;		/* referenced */
	if (!other) {
		pr_err("unmap_wrong_peer: no second PCI device\n");
		return;
	}
	nvidia_p2p_dma_unmap_pages(other, pt, dm);
	pci_dev_put(other);
}

static int tc_dma_unmap(struct sg_table *sg_head, void *client_context,
			struct device *dma_device)
{
	static struct nvidia_p2p_dma_mapping bogus;
	struct tc_ctx *ctx = client_context;
	struct nvidia_p2p_dma_mapping *dm;
	struct nvidia_p2p_page_table *pt;
	bool put_first = tc_has_bug(TC_BUG_UNMAP_AFTER_PUT);

	/* Called from our own free callback: the GPU unmaps after it returns. */
	if (ctx->cb_task == current)
		return 0;
	/* After our callback has returned, the GPU has unmapped everything. */
	mutex_lock(&ctx->lock);
	dm = ctx->dm;
	pt = ctx->pt;
	ctx->dm = NULL;
	ctx->mapped = false;
	/* Until it ends, a free callback waits: the driver frees pt after it. */
	ctx->unmapping = dm;
	if (put_first && dm)
		ctx->pt = NULL;		/* put below, not in put_pages */
	mutex_unlock(&ctx->lock);
	if (tc_has_bug(TC_BUG_UNMAP_UNKNOWN) && pt)
		pr_info("unmap_unknown: nvidia_p2p_dma_unmap_pages returned %d\n",
			nvidia_p2p_dma_unmap_pages(ctx->peer, pt, &bogus));
	if (tc_has_bug(TC_BUG_UNMAP_UNKNOWN_TABLE) && dm)
		nvidia_p2p_dma_unmap_pages(ctx->peer, &tc_unknown_pt, dm);
	if (tc_has_bug(TC_BUG_UNMAP_WRONG_PEER) && dm)
		tc_unmap_wrong_peer(ctx->peer, pt, dm);
	/* The put frees the table and its mappings: the unmap then is late. */
	if (put_first && dm)
		tc_put(ctx->client, ctx->va, pt, false);
	if (dm)
		tc_unmap_end(ctx, ctx->peer, pt, dm);
	return tc_has_bug(TC_BUG_UNMAP_ERROR) ? -EIO : 0;
}

/* unpin_in_work: the put, made by a work item (another process), awaited. */
struct tc_put_work {
	struct work_struct work;
	struct tc_ctx *ctx;
	struct nvidia_p2p_page_table *pt;
	int ret;
};

static void tc_put_work_fn(struct work_struct *work)
{
	struct tc_put_work *w = container_of(work, struct tc_put_work, work);

	w->ret = tc_put(w->ctx->client, w->ctx->va, w->pt, false);
}

static void tc_put_in_work(struct tc_ctx *ctx, struct nvidia_p2p_page_table *pt)
{
	struct tc_put_work w = { .ctx = ctx, .pt = pt };

	INIT_WORK_ONSTACK(&w.work, tc_put_work_fn);
	queue_work(system_unbound_wq, &w.work);
	flush_work(&w.work);
	destroy_work_on_stack(&w.work);
	pr_info("unpin_in_work: nvidia_p2p_put_pages from a work item returned %d\n", w.ret);
}

static void tc_put_pages(struct sg_table *sg_head, void *client_context)
{
	struct tc_ctx *ctx = client_context;
	struct nvidia_p2p_page_table *pt;
	int i, puts = tc_has_bug(TC_BUG_DOUBLE_PUT) ? 2 : 1;

	if (ctx->cb_task == current)
		return;
	mutex_lock(&ctx->lock);
	pt = ctx->pt;
	ctx->pt = NULL;
	mutex_unlock(&ctx->lock);
	if (!pt || tc_has_bug(TC_BUG_LEAK_PINS))
		return;
	/* These puts fail or do nothing; the right one follows. */
	if (tc_has_bug(TC_BUG_PUT_UNKNOWN_TABLE))
		tc_put(ctx->client, ctx->va, &tc_unknown_pt, false);
	if (tc_has_bug(TC_BUG_WRONG_PUT))
		tc_put(ctx->client, ctx->va, pt, true);
	if (tc_has_bug(TC_BUG_PUT_NULL))
		pr_info("put_null: nvidia_p2p_put_pages_persistent(NULL) returned %d\n",
			nvidia_p2p_put_pages_persistent(ctx->va, NULL, 0));
	/* The driver ignores the address: this put is the put, and the last. */
	if (tc_has_bug(TC_BUG_PUT_WRONG_VA)) {
		pr_info("put_wrong_va: the put with va + 64 KiB returned %d\n",
			tc_put(ctx->client, ctx->va + TC_GPU_PAGE_SIZE, pt, false));
		return;
	}
	if (tc_has_bug(TC_BUG_UNPIN_IN_WORK)) {
		tc_put_in_work(ctx, pt);
		return;
	}
	for (i = 0; i < puts; i++)
		tc_put(ctx->client, ctx->va, pt, false);
}

static unsigned long tc_get_page_size(void *client_context)
{
	return READ_ONCE(tc_page_size);
}

/*
 * Every SGE as tc_fill_sges made it: 64 KiB aligned, whole 64 KiB pages,
 * sg->length equal to the DMA length. A core that trimmed them (5.5+) must
 * have restored them by now; each one found otherwise is counted and logged.
 */
static void tc_check_untrimmed(struct sg_table *sgt)
{
	struct scatterlist *sg;
	unsigned int i;

	if (READ_ONCE(bug) != TC_BUG_NONE)
		return;		/* the sg_* bugs break the table on purpose */
	for_each_sg(sgt->sgl, sg, sgt->nents, i) {
		if (IS_ALIGNED(sg_dma_address(sg), TC_GPU_PAGE_SIZE) &&
		    IS_ALIGNED(sg_dma_len(sg), TC_GPU_PAGE_SIZE) && sg_dma_len(sg) &&
		    sg->length == sg_dma_len(sg))
			continue;
		trimmed_at_release++;
		pr_err("release: SGE %u not as dma_map made it (%#llx + %u, length %u)\n",
		       i, (u64)sg_dma_address(sg), sg_dma_len(sg), sg->length);
	}
}

static void tc_release(void *client_context)
{
	struct tc_ctx *ctx = client_context;
	struct nvidia_p2p_dma_mapping *dm;

	if (ctx->sg_allocated) {
		tc_check_untrimmed(&ctx->sgt);
		sg_free_table(&ctx->sgt);
	}
	/*
	 * pin_in_acquire: a registration the core gave up before get_pages
	 * (or before put_pages) still holds acquire's pin. Not from inside our
	 * callback (a legacy core releases there): the driver unpins then.
	 */
	if (ctx->pinned_early) {
		struct nvidia_p2p_page_table *pt;

		mutex_lock(&ctx->lock);
		pt = ctx->revoked ? NULL : ctx->pt;
		if (pt)
			ctx->pt = NULL;
		mutex_unlock(&ctx->lock);
		if (pt)
			tc_put(ctx->client, ctx->va, pt, false);
	}
	if (tc_has_bug(TC_BUG_MAP_AFTER_REVOKE) && ctx->stale_pt)
		nvidia_p2p_dma_map_pages(ctx->peer, ctx->stale_pt, &dm);
	if (tc_has_bug(TC_BUG_UNMAP_AFTER_REVOKE) && ctx->revoked && ctx->dm)
		nvidia_p2p_dma_unmap_pages(ctx->peer, ctx->pt, ctx->dm);
	if (tc_has_bug(TC_BUG_INVAL_AFTER_RELEASE) && ctx->client->invalidate) {
		spin_lock(&tc_stale_lock);
		tc_stale.client = ctx->client;
		tc_stale.core_context = ctx->core_context;
		spin_unlock(&tc_stale_lock);
	}
	kref_put(&ctx->ref, tc_ctx_free);
	if (hold_module)
		module_put(THIS_MODULE);
}

static void *tc_get_context_private_data(u64 peer_id)
{
	return NULL;
}

static void tc_put_context_private_data(void *context)
{
}

/* Clears the callback named by the "missing" parameter. */
static void tc_drop_callback(struct peer_memory_client *ops)
{
	static const char *const names[] = {
		"acquire", "get_pages", "dma_map", "dma_unmap", "put_pages",
		"get_page_size", "release",
	};
	void **slots[] = {
		(void **)&ops->acquire, (void **)&ops->get_pages, (void **)&ops->dma_map,
		(void **)&ops->dma_unmap, (void **)&ops->put_pages,
		(void **)&ops->get_page_size, (void **)&ops->release,
	};
	int i = match_string(names, ARRAY_SIZE(names), missing);

	if (i >= 0)
		*slots[i] = NULL;
}

static int tc_register(struct tc_client *client, const char *suffix, bool persistent_pins,
		       int (*acquire)(unsigned long, size_t, void *, char *, void **))
{
	struct peer_memory_client *ops = &client->ops.ex.client;
	char full[2 * IB_PEER_MEMORY_NAME_MAX];

	/* 64 characters or more fill the array without a NUL (bad input). */
	snprintf(full, sizeof(full), "%s%s", name, suffix);
	memcpy(ops->name, full, min(strlen(full) + 1, sizeof(ops->name)));
	strscpy(ops->version, "1.0", IB_PEER_MEMORY_VER_MAX - 1);
	ops->acquire = acquire;
	ops->get_pages = tc_get_pages;
	ops->dma_map = tc_dma_map;
	ops->dma_unmap = tc_dma_unmap;
	ops->put_pages = tc_put_pages;
	ops->get_page_size = tc_get_page_size;
	ops->release = tc_release;
	tc_drop_callback(ops);
	client->persistent = persistent_pins;
	switch (abi) {
	case ABI_EX:
		ops->version[IB_PEER_MEMORY_VER_MAX - 1] = 1;
		client->ops.ex.ex_size = sizeof(client->ops.ex);
		client->ops.ex.flags = PEER_MEM_INVALIDATE_UNMAPS;
		break;
	case ABI_EX_SHORT:
		/* Byte 15 set, but ex_size ends before flags: the core ignores them. */
		ops->version[IB_PEER_MEMORY_VER_MAX - 1] = 1;
		client->ops.ex.ex_size = offsetof(struct peer_memory_client_ex, flags);
		client->ops.ex.flags = PEER_MEM_INVALIDATE_UNMAPS;
		break;
	case ABI_LEGACY_CTX:
		client->ops.legacy.get_context_private_data = tc_get_context_private_data;
		client->ops.legacy.put_context_private_data = tc_put_context_private_data;
		break;
	default:	/* plain, legacy: nothing beyond the 136 bytes is set */
		break;
	}
	client->handle = ib_register_peer_memory_client(ops, persistent_pins ?
							NULL : &client->invalidate);
	if (!client->handle) {
		pr_err("registration of %.*s refused\n", (int)sizeof(ops->name), ops->name);
		return -EINVAL;
	}
	return 0;
}

static int __init tc_init(void)
{
	int ret = tc_register(&tc_main, "", persistent, tc_acquire_main);

	if (ret)
		return ret;
	if (nc) {
		ret = tc_register(&tc_nc, "_nc", true, tc_acquire_nc);
		if (ret) {
			ib_unregister_peer_memory_client(tc_main.handle);
			return ret;
		}
	}
	if (dup && !tc_register(&tc_dup, "", persistent, tc_acquire_main)) {
		pr_err("duplicate registration of %s accepted\n", name);
		ib_unregister_peer_memory_client(tc_dup.handle);
	}
	pr_info("loaded (abi %s, %s%s, bug %s)\n", tc_abi_names[abi],
		persistent ? "persistent" : "revocable", nc ? " + _nc" : "",
		tc_bug_names[bug]);
	return 0;
}

static void __exit tc_exit(void)
{
	if (nc)
		ib_unregister_peer_memory_client(tc_nc.handle);
	ib_unregister_peer_memory_client(tc_main.handle);
	/* unregister_twice: a stale handle, which the core must refuse. */
	if (tc_has_bug(TC_BUG_UNREGISTER_TWICE))
		ib_unregister_peer_memory_client(tc_main.handle);
	pr_info("unloaded\n");
}

module_init(tc_init);
module_exit(tc_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Test-only peer-memory client for the nvidia-peermem simulators");
