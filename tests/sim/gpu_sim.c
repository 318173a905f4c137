// SPDX-License-Identifier: GPL-2.0
/*
 * gpu_sim: a simulated NVIDIA GPU driver for tests, built as nvidia.ko.
 *
 * It exports the nvidia_p2p_* API of nv-p2p.h over a fake GPU: user space
 * allocates and frees "GPU buffers" (cudaMalloc/cudaFree) through debugfs
 * (/sys/kernel/debug/nvidia_sim/ctl). Buffers are made of 64 KiB pages whose
 * bus addresses come from a fake BAR1 aperture, laid out contiguous,
 * fragmented or shuffled. dma_map_pages returns, per PCI device, addresses
 * offset from the bus addresses (a per-device IOVA window). Freeing a buffer
 * fires the free callback of each of its non-persistent pins, then frees the
 * pin's page table and DMA mappings, as the real driver does; persistent pins
 * keep the memory until put_pages_persistent.
 *
 * Misuse is detected, counted and logged as "contract violation" (never
 * WARNed): calls from inside a free callback, double put, unknown tables and
 * mappings, use of a table after its callback or put, a non-PCI peer, mapping
 * a 4 KiB table, pins still held at unload. Knobs (module parameters, 0644)
 * select the page-table ABI, persistent-API support, bad data and a per-call
 * cost; failures are injected through ctl. tests/README.md has the details.
 *
 * Locking: gsim.lock (a mutex) protects all state. It is never held while a
 * client's free callback runs; put_pages and dma_unmap_pages of a pin whose
 * callback is running sleep on gsim.cb_wait until the callback has returned
 * (the real driver's RM lock orders them the same way). A call made by the
 * task that is running a free callback is a violation (the real driver would
 * deadlock on its RM lock) and fails with -EDEADLK without doing anything.
 * Counters are atomics, read without the lock.
 */
#define pr_fmt(fmt) "gpu_sim: " fmt

#include <linux/bitmap.h>
#include <linux/delay.h>
#include <linux/hashtable.h>
#include <linux/kref.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/poison.h>
#include <linux/prandom.h>
#include <linux/sched.h>
#include <linux/seq_file.h>
#include <linux/wait.h>
#include <linux/workqueue.h>

#include "nv-p2p.h"
#include "sim_common.h"

#define GSIM_PAGE_SHIFT 16
#define GSIM_PAGE_SIZE BIT_ULL(GSIM_PAGE_SHIFT)
/* Where the fake GPU VA space and the fake BAR1 aperture start. */
#define GSIM_VA_BASE 0x7f4000000000ULL
#define GSIM_BAR_BASE 0x3800000000ULL
/* Device n's DMA (IOVA) addresses are the bus addresses + (n + 1) * stride. */
#define GSIM_IOVA_STRIDE BIT_ULL(44)
/* Freed page tables remembered to tell a late put from a double put. */
#define GSIM_MAX_TOMBSTONES 1024
/* A 1.2 table is 32 bytes: what follows is not the client's to read. */
#define GSIM_V1_TRAILER 0xa5a5a5a5

#define GSIM_PT_VERSION_1_2 0x00010002
#define GSIM_PT_VERSION_2_0 0x00020000

/* ---- Knobs ------------------------------------------------------------ */

static unsigned int vram_mb = 4096;
module_param(vram_mb, uint, 0444);
MODULE_PARM_DESC(vram_mb, "Size of the fake GPU memory in MiB (default 4096)");

enum gsim_pt_abi { PT_ABI_1_2, PT_ABI_2_0 };
static const char *const gsim_pt_abi_names[] = { "1.2", "2.0" };
static int page_table_version = PT_ABI_2_0;
static struct sim_enum_param page_table_version_param = {
	gsim_pt_abi_names, ARRAY_SIZE(gsim_pt_abi_names), &page_table_version
};
module_param_cb(page_table_version, &sim_enum_param_ops, &page_table_version_param, 0644);
MODULE_PARM_DESC(page_table_version, "Page table ABI: 1.2 (driver <= 575, 32 bytes) or 2.0 (580+, flags)");

static bool cpu_cacheable;
module_param(cpu_cacheable, bool, 0644);
MODULE_PARM_DESC(cpu_cacheable, "Set NVIDIA_P2P_PAGE_TABLE_FLAGS_CPU_CACHEABLE in 2.0 tables");

static bool persistent_api = true;
module_param(persistent_api, bool, 0644);
MODULE_PARM_DESC(persistent_api, "Persistent API supported (0: -ENOTSUPP, as on MIG and vGPU)");

enum gsim_bad_data {
	BAD_NONE, BAD_PT_VERSION, BAD_PAGE_SIZE, BAD_DMA_VERSION, BAD_ENTRIES,
};

static const char *const gsim_bad_data_names[] = {
	"none", "pt_version", "page_size", "dma_version", "entries",
};

static int bad_data = BAD_NONE;
static struct sim_enum_param bad_data_param = {
	gsim_bad_data_names, ARRAY_SIZE(gsim_bad_data_names), &bad_data
};
module_param_cb(bad_data, &sim_enum_param_ops, &bad_data_param, 0644);
MODULE_PARM_DESC(bad_data, "Hand out bad data: none, pt_version, page_size (4 KiB), dma_version, entries");

static unsigned int cost_us;
module_param(cost_us, uint, 0644);
MODULE_PARM_DESC(cost_us, "Artificial cost of every nvidia_p2p_* call, in microseconds");

enum gsim_layout { LAYOUT_CONTIGUOUS, LAYOUT_FRAGMENTED, LAYOUT_SHUFFLED };
static const char *const gsim_layout_names[] = { "contiguous", "fragmented", "shuffled" };
static int default_layout = LAYOUT_CONTIGUOUS;
static struct sim_enum_param default_layout_param = {
	gsim_layout_names, ARRAY_SIZE(gsim_layout_names), &default_layout
};
module_param_cb(default_layout, &sim_enum_param_ops, &default_layout_param, 0644);
MODULE_PARM_DESC(default_layout, "Layout of buffers allocated without one: contiguous, fragmented, shuffled");

/* ---- State ------------------------------------------------------------ */

enum gsim_fn {
	FN_GET_PAGES, FN_GET_PAGES_PERSISTENT, FN_PUT_PAGES, FN_PUT_PAGES_PERSISTENT,
	FN_FREE_PAGE_TABLE, FN_DMA_MAP_PAGES, FN_DMA_UNMAP_PAGES, FN_FREE_DMA_MAPPING,
	FN_COUNT
};

static const char *const gsim_fn_names[FN_COUNT] = {
	"get_pages", "get_pages_persistent", "put_pages", "put_pages_persistent",
	"free_page_table", "dma_map_pages", "dma_unmap_pages", "free_dma_mapping",
};

enum gsim_violation {
	V_IN_CALLBACK, V_DOUBLE_PUT, V_UNKNOWN_TABLE, V_UNKNOWN_MAPPING,
	V_USE_AFTER_FREE, V_BAD_PEER, V_BAD_PAGE_SIZE, V_WRONG_PUT, V_HELD_AT_UNLOAD,
	V_COUNT
};

static const char *const gsim_violation_names[V_COUNT] = {
	"in_callback", "double_put", "unknown_table", "unknown_mapping",
	"use_after_free", "bad_peer", "bad_page_size", "wrong_put", "held_at_unload",
};

/* A cudaMalloc'd buffer. */
struct gsim_buffer {
	struct list_head node;		/* gsim.buffers, or gsim.zombies once freed */
	u64 va;
	u64 size;
	u32 npages;
	enum gsim_layout layout;
	unsigned long *frames;		/* the frame (64 KiB of fake VRAM) of each page */
	unsigned int pins;		/* pins on this buffer, of both kinds */
	bool freed;			/* cudaFree'd, kept for persistent pins */
};

enum gsim_pin_state {
	PIN_ACTIVE,
	PIN_IN_CALLBACK,	/* its free callback is running */
	PIN_REVOKED,		/* the callback ran; the table is freed */
	PIN_PUT,		/* put by the client; the table is freed */
};

static const char *const gsim_pin_state_names[] = { "active", "in_callback", "revoked", "put" };

/* A page table handed to a client, and what the simulator keeps with it. */
struct gsim_pin {
	struct nvidia_p2p_page_table pt;
	struct kref ref;
	struct hlist_node hnode;	/* gsim_pins, keyed by &pt, until evicted */
	struct list_head node;		/* gsim.pins while live, then gsim.tombstones */
	struct list_head cb_node;	/* gsim.in_callback while the callback runs */
	struct list_head mappings;	/* struct gsim_mapping.node */
	struct gsim_buffer *buf;
	u64 id;
	u64 va;
	u64 len;
	bool persistent;
	bool force_bar1;
	void (*free_callback)(void *data);
	void *data;
	enum gsim_pin_state state;
	struct task_struct *cb_task;	/* the task running the free callback */
	/* One object per page, from gsim_page_cache, as NVIDIA's nv-p2p.c does. */
	struct nvidia_p2p_page **page_ptrs;
};

/* A peer device that mapped pages, and its IOVA window. */
struct gsim_device {
	struct list_head node;
	struct pci_dev *pdev;		/* referenced */
	u64 dma_offset;
};

struct gsim_mapping {
	struct nvidia_p2p_dma_mapping dm;
	struct list_head node;		/* pin->mappings */
	struct gsim_device *dev;
};

/* Fail the nth next call of a function with an errno (ctl "inject"). */
struct gsim_injection {
	unsigned long skip;		/* calls to let through first */
	unsigned long times;		/* failures left; ULONG_MAX: forever */
	int err;
};

static struct {
	struct mutex lock;		/* all of the state below but counters */
	struct list_head buffers;	/* allocated, in VA order */
	struct list_head zombies;	/* freed, held by persistent pins */
	struct list_head pins;		/* live pins, in pinning order */
	struct list_head tombstones;	/* freed pins, oldest first */
	struct list_head in_callback;	/* pins whose callback is running */
	struct list_head devices;
	unsigned int ntombstones;
	wait_queue_head_t cb_wait;
	u64 next_va;
	u64 next_pin_id;
	unsigned long *frame_map;	/* allocated frames of fake VRAM */
	unsigned long nframes;
	struct gsim_injection inject[FN_COUNT];
	unsigned int live_buffers, live_pins, live_persistent, live_mappings;
	atomic_long_t calls[FN_COUNT];
	atomic_long_t errors[FN_COUNT];
	atomic_long_t callbacks;
	atomic_long_t callbacks_started;	/* entered, for mofed_peer_sim's hooks */
	atomic_long_t violations[V_COUNT];
	struct dentry *debugfs;
} gsim;

static DEFINE_HASHTABLE(gsim_pins, 10);

static u8 gsim_uuid[NVIDIA_P2P_GPU_UUID_LEN] = "GPU-sim-0000001";

#define gsim_violation(v, fmt, ...) \
	sim_violation(&gsim.violations[v], fmt, ##__VA_ARGS__)

static u64 gsim_frame_addr(unsigned long frame)
{
	return GSIM_BAR_BASE + ((u64)frame << GSIM_PAGE_SHIFT);
}

/* ---- Buffers (cudaMalloc/cudaFree) ------------------------------------ */

/* Takes @n frames of fake VRAM, in the order of @layout. */
static int gsim_take_frames(unsigned long *frames, u32 n, enum gsim_layout layout,
			    u64 seed)
{
	static const u32 run_pattern[] = { 2, 1, 3 };	/* fragmented runs */
	unsigned long cursor = 0, start;
	struct rnd_state rnd;
	u32 i = 0, j, runs = 0, run;

	while (i < n) {
		run = layout == LAYOUT_FRAGMENTED ?
		      min(run_pattern[runs++ % ARRAY_SIZE(run_pattern)], n - i) :
		      layout == LAYOUT_SHUFFLED ? 1 : n;
		start = bitmap_find_next_zero_area(gsim.frame_map, gsim.nframes,
						   cursor, run, 0);
		if (start >= gsim.nframes)
			goto no_space;
		bitmap_set(gsim.frame_map, start, run);
		while (run--)
			frames[i++] = start++;
		/* A free frame after each run keeps the runs apart. */
		cursor = start + (layout == LAYOUT_FRAGMENTED);
	}
	if (layout == LAYOUT_SHUFFLED && n > 1) {
		prandom_seed_state(&rnd, seed);
		for (i = n - 1; i > 0; i--) {
			/* Not inside swap(): it evaluates its arguments twice. */
			j = prandom_u32_state(&rnd) % (i + 1);
			swap(frames[i], frames[j]);
		}
		if (frames[0] + 1 == frames[1])	/* never two pages in order */
			swap(frames[0], frames[1]);
	}
	return 0;

no_space:
	while (i--)
		clear_bit(frames[i], gsim.frame_map);
	return -ENOMEM;
}

static void gsim_buffer_free(struct gsim_buffer *buf)
{
	u32 i;

	for (i = 0; i < buf->npages; i++)
		clear_bit(buf->frames[i], gsim.frame_map);
	list_del(&buf->node);
	kvfree(buf->frames);
	kfree(buf);
}

static int gsim_alloc(u64 size, enum gsim_layout layout, u64 *va)
{
	struct gsim_buffer *buf;
	int ret;

	size = round_up(size, GSIM_PAGE_SIZE);
	if (!size || size >> GSIM_PAGE_SHIFT > U32_MAX)
		return -EINVAL;
	buf = kzalloc(sizeof(*buf), GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	buf->size = size;
	buf->npages = size >> GSIM_PAGE_SHIFT;
	buf->layout = layout;
	buf->frames = kvcalloc(buf->npages, sizeof(*buf->frames), GFP_KERNEL);
	if (!buf->frames) {
		kfree(buf);
		return -ENOMEM;
	}
	mutex_lock(&gsim.lock);
	buf->va = gsim.next_va;
	ret = gsim_take_frames(buf->frames, buf->npages, layout, buf->va);
	if (ret) {
		mutex_unlock(&gsim.lock);
		kvfree(buf->frames);
		kfree(buf);
		return ret;
	}
	/* A 64 KiB hole after each buffer: no range spans two buffers. */
	gsim.next_va += size + GSIM_PAGE_SIZE;
	list_add_tail(&buf->node, &gsim.buffers);
	gsim.live_buffers++;
	mutex_unlock(&gsim.lock);
	*va = buf->va;
	return 0;
}

/* The allocated buffer holding [va, va + len), or NULL. */
static struct gsim_buffer *gsim_find_buffer(u64 va, u64 len)
{
	struct gsim_buffer *buf;

	list_for_each_entry(buf, &gsim.buffers, node)
		if (va >= buf->va && len <= buf->size &&
		    va - buf->va <= buf->size - len)
			return buf;
	return NULL;
}

/* ---- Pins ------------------------------------------------------------- */

static void gsim_pin_free(struct kref *ref)
{
	kfree(container_of(ref, struct gsim_pin, ref));
}

/* The pin (live or tombstone) whose table is @pt; NULL if unknown. */
static struct gsim_pin *gsim_lookup(const struct nvidia_p2p_page_table *pt)
{
	struct gsim_pin *pin;

	hash_for_each_possible(gsim_pins, pin, hnode, (unsigned long)pt)
		if (&pin->pt == pt)
			return pin;
	return NULL;
}

/*
 * Like gsim_lookup, but first waits for a free callback running for the pin
 * to return (the real driver's put and unmap block on the RM lock meanwhile).
 */
static struct gsim_pin *gsim_lookup_settled(const struct nvidia_p2p_page_table *pt)
{
	struct gsim_pin *pin;

	while ((pin = gsim_lookup(pt)) && pin->state == PIN_IN_CALLBACK) {
		kref_get(&pin->ref);
		mutex_unlock(&gsim.lock);
		wait_event(gsim.cb_wait, READ_ONCE(pin->state) != PIN_IN_CALLBACK);
		mutex_lock(&gsim.lock);
		kref_put(&pin->ref, gsim_pin_free);
	}
	return pin;
}

static struct kmem_cache *gsim_page_cache;

static void gsim_free_pages(struct nvidia_p2p_page **pages, u32 n)
{
	u32 i;

	if (!pages)
		return;
	for (i = 0; i < n && pages[i]; i++)
		kmem_cache_free(gsim_page_cache, pages[i]);
	kvfree(pages);
}

/* The page array and one zeroed object per page, as the real driver makes them. */
static struct nvidia_p2p_page **gsim_alloc_pages(u32 n)
{
	struct nvidia_p2p_page **pages = kvcalloc(n, sizeof(*pages), GFP_KERNEL);
	u32 i;

	if (!pages)
		return NULL;
	for (i = 0; i < n; i++) {
		pages[i] = kmem_cache_zalloc(gsim_page_cache, GFP_KERNEL);
		if (!pages[i]) {
			gsim_free_pages(pages, i);
			return NULL;
		}
	}
	return pages;
}

/* Fills the client-visible table of a new pin, bad data included. */
static void gsim_fill_table(struct gsim_pin *pin)
{
	struct nvidia_p2p_page_table *pt = &pin->pt;
	u32 i, n = pin->len >> GSIM_PAGE_SHIFT;
	u32 first = (pin->va - pin->buf->va) >> GSIM_PAGE_SHIFT;
	int bad = READ_ONCE(bad_data);

	for (i = 0; i < n; i++)
		pin->page_ptrs[i]->physical_address =
			gsim_frame_addr(pin->buf->frames[first + i]);
	if (READ_ONCE(page_table_version) == PT_ABI_1_2) {
		pt->version = GSIM_PT_VERSION_1_2;
		pt->flags = GSIM_V1_TRAILER;
	} else {
		pt->version = GSIM_PT_VERSION_2_0;
		pt->flags = READ_ONCE(cpu_cacheable) ?
			    NVIDIA_P2P_PAGE_TABLE_FLAGS_CPU_CACHEABLE : 0;
	}
	pt->page_size = NVIDIA_P2P_PAGE_SIZE_64KB;
	pt->pages = pin->page_ptrs;
	pt->entries = n;
	pt->gpu_uuid = gsim_uuid;
	if (bad == BAD_PT_VERSION)
		pt->version = 0x00030000;
	else if (bad == BAD_PAGE_SIZE)
		pt->page_size = NVIDIA_P2P_PAGE_SIZE_4KB;
	else if (bad == BAD_ENTRIES)
		pt->entries = n - 1;
}

static int gsim_pin(u64 va, u64 len, struct nvidia_p2p_page_table **page_table,
		    void (*free_callback)(void *data), void *data, bool persistent,
		    bool force_bar1)
{
	struct gsim_buffer *buf;
	struct gsim_pin *pin;
	u32 n;

	if (!page_table || !len || !IS_ALIGNED(va, GSIM_PAGE_SIZE) ||
	    !IS_ALIGNED(len, GSIM_PAGE_SIZE) || va + len < va)
		return -EINVAL;
	buf = gsim_find_buffer(va, len);
	if (!buf)
		return -EINVAL;
	n = len >> GSIM_PAGE_SHIFT;
	pin = kzalloc(sizeof(*pin), GFP_KERNEL);
	if (!pin)
		return -ENOMEM;
	pin->page_ptrs = gsim_alloc_pages(n);
	if (!pin->page_ptrs) {
		kfree(pin);
		return -ENOMEM;
	}
	kref_init(&pin->ref);
	INIT_LIST_HEAD(&pin->mappings);
	pin->buf = buf;
	pin->id = ++gsim.next_pin_id;
	pin->va = va;
	pin->len = len;
	pin->persistent = persistent;
	pin->force_bar1 = force_bar1;
	pin->free_callback = free_callback;
	pin->data = data;
	gsim_fill_table(pin);
	hash_add(gsim_pins, &pin->hnode, (unsigned long)&pin->pt);
	list_add_tail(&pin->node, &gsim.pins);
	buf->pins++;
	if (persistent)
		gsim.live_persistent++;
	else
		gsim.live_pins++;
	*page_table = &pin->pt;
	return 0;
}

static void gsim_unmap(struct gsim_mapping *m)
{
	list_del(&m->node);
	kfree(m->dm.dma_addresses);
	kfree(m);
	gsim.live_mappings--;
}

/*
 * Frees what a client could still see of @pin (table, mappings) and keeps its
 * shell as a tombstone, so that later calls with the stale table are told
 * apart from calls with a table never seen.
 */
static void gsim_retire(struct gsim_pin *pin, enum gsim_pin_state state)
{
	struct gsim_mapping *m, *tmp;
	struct gsim_pin *old;

	list_for_each_entry_safe(m, tmp, &pin->mappings, node)
		gsim_unmap(m);
	gsim_free_pages(pin->page_ptrs, pin->len >> GSIM_PAGE_SHIFT);
	pin->page_ptrs = NULL;
	/* As freed memory would look to a client that kept the pointer. */
	memset(&pin->pt, POISON_FREE, sizeof(pin->pt));
	WRITE_ONCE(pin->state, state);
	if (pin->persistent)
		gsim.live_persistent--;
	else
		gsim.live_pins--;
	if (!--pin->buf->pins && pin->buf->freed)
		gsim_buffer_free(pin->buf);
	pin->buf = NULL;

	list_move_tail(&pin->node, &gsim.tombstones);
	if (++gsim.ntombstones > GSIM_MAX_TOMBSTONES) {
		old = list_first_entry(&gsim.tombstones, struct gsim_pin, node);
		list_del(&old->node);
		hash_del(&old->hnode);
		gsim.ntombstones--;
		kref_put(&old->ref, gsim_pin_free);
	}
}

/* ---- Entry and exit of every API call --------------------------------- */

/* Whether the current task is running a free callback (gsim.lock held). */
static bool gsim_in_callback(void)
{
	struct gsim_pin *pin;

	list_for_each_entry(pin, &gsim.in_callback, cb_node)
		if (pin->cb_task == current)
			return true;
	return false;
}

/*
 * Called with gsim.lock held at the start of every API call: counts it,
 * refuses calls from a free callback and applies an armed injection.
 */
static int gsim_enter(enum gsim_fn fn)
{
	struct gsim_injection *inj = &gsim.inject[fn];

	atomic_long_inc(&gsim.calls[fn]);
	if (gsim_in_callback()) {
		gsim_violation(V_IN_CALLBACK,
			       "nvidia_p2p_%s called from inside a free callback (the real driver deadlocks)",
			       gsim_fn_names[fn]);
		return -EDEADLK;
	}
	if (!inj->times)
		return 0;
	if (inj->skip) {
		inj->skip--;
		return 0;
	}
	if (inj->times != ULONG_MAX)
		inj->times--;
	return inj->err;
}

/* Takes gsim.lock after the artificial cost, then enters @fn. */
static int gsim_begin(enum gsim_fn fn)
{
	unsigned int us = READ_ONCE(cost_us);

	if (us)
		fsleep(us);
	mutex_lock(&gsim.lock);
	return gsim_enter(fn);
}

static int gsim_end(enum gsim_fn fn, int ret)
{
	mutex_unlock(&gsim.lock);
	if (ret)
		atomic_long_inc(&gsim.errors[fn]);
	return ret;
}

/* ---- The exported API ------------------------------------------------- */

int nvidia_p2p_get_pages(u64 p2p_token, u32 va_space, u64 virtual_address,
			 u64 length, struct nvidia_p2p_page_table **page_table,
			 void (*free_callback)(void *data), void *data)
{
	int ret = gsim_begin(FN_GET_PAGES);

	/* 535+: persistence has its own API; a NULL callback is an error. */
	if (!ret && !free_callback)
		ret = -EINVAL;
	if (!ret)
		ret = gsim_pin(virtual_address, length, page_table, free_callback,
			       data, false, false);
	return gsim_end(FN_GET_PAGES, ret);
}
EXPORT_SYMBOL_GPL(nvidia_p2p_get_pages);

int nvidia_p2p_get_pages_persistent(u64 virtual_address, u64 length,
				    struct nvidia_p2p_page_table **page_table,
				    u32 flags)
{
	int ret = gsim_begin(FN_GET_PAGES_PERSISTENT);

	if (!ret && !READ_ONCE(persistent_api))
		ret = -ENOTSUPP;
	if (!ret && (flags & ~NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING))
		ret = -EINVAL;
	if (!ret)
		ret = gsim_pin(virtual_address, length, page_table, NULL, NULL, true,
			       flags & NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING);
	return gsim_end(FN_GET_PAGES_PERSISTENT, ret);
}
EXPORT_SYMBOL_GPL(nvidia_p2p_get_pages_persistent);

/*
 * Test knob revoked_put_errno: a put of a table whose callback already ran
 * fails with this errno instead of returning 0, as older drivers did (the
 * put still counts: a second one is a double put).
 */
static uint revoked_put_errno;
module_param(revoked_put_errno, uint, 0644);
MODULE_PARM_DESC(revoked_put_errno, "Test knob: a put after the free callback returns -N (older drivers) instead of 0");

/* Test hooks free_during_map, free_during_put: see gsim_free_meanwhile. */
static bool free_during_map;
static bool free_during_put;
static void gsim_free_meanwhile(bool hook, struct nvidia_p2p_page_table *pt);

module_param(free_during_put, bool, 0644);
MODULE_PARM_DESC(free_during_put, "Test hook: put_pages first frees the buffer being unpinned from another thread and waits up to 1 s for its callback to return");

/* The common part of both puts, gsim.lock held. */
static int gsim_put(enum gsim_fn fn, u64 va, struct nvidia_p2p_page_table *pt,
		    bool persistent)
{
	struct gsim_pin *pin = gsim_lookup_settled(pt);

	if (!pin) {
		gsim_violation(V_UNKNOWN_TABLE, "nvidia_p2p_%s of an unknown page table",
			       gsim_fn_names[fn]);
		return -EINVAL;
	}
	if (pin->state == PIN_PUT) {
		gsim_violation(V_DOUBLE_PUT, "nvidia_p2p_%s of page table #%llu, already put",
			       gsim_fn_names[fn], pin->id);
		return -EINVAL;
	}
	/* Also after the callback: the wrong put would reach freed state. */
	if (pin->persistent != persistent || pin->va != va) {
		gsim_violation(V_WRONG_PUT,
			       "nvidia_p2p_%s of %s page table #%llu (va %#llx) with va %#llx",
			       gsim_fn_names[fn],
			       pin->persistent ? "persistent" : "non-persistent",
			       pin->id, pin->va, va);
		return -EINVAL;
	}
	if (pin->state == PIN_REVOKED) {
		/* The callback already freed it: a late put is fine, once. */
		WRITE_ONCE(pin->state, PIN_PUT);
		return -(int)READ_ONCE(revoked_put_errno);
	}
	gsim_retire(pin, PIN_PUT);
	return 0;
}

int nvidia_p2p_put_pages(u64 p2p_token, u32 va_space, u64 virtual_address,
			 struct nvidia_p2p_page_table *page_table)
{
	int ret;

	if (page_table)
		gsim_free_meanwhile(READ_ONCE(free_during_put), page_table);
	ret = gsim_begin(FN_PUT_PAGES);
	if (!ret && page_table)
		ret = gsim_put(FN_PUT_PAGES, virtual_address, page_table, false);
	return gsim_end(FN_PUT_PAGES, ret);
}
EXPORT_SYMBOL_GPL(nvidia_p2p_put_pages);

int nvidia_p2p_put_pages_persistent(u64 virtual_address,
				    struct nvidia_p2p_page_table *page_table,
				    u32 flags)
{
	int ret = gsim_begin(FN_PUT_PAGES_PERSISTENT);

	if (!ret && (flags || !page_table))
		ret = -EINVAL;
	if (!ret)
		ret = gsim_put(FN_PUT_PAGES_PERSISTENT, virtual_address, page_table, true);
	return gsim_end(FN_PUT_PAGES_PERSISTENT, ret);
}
EXPORT_SYMBOL_GPL(nvidia_p2p_put_pages_persistent);

/* A no-op in modern drivers; callable from a free callback. */
int nvidia_p2p_free_page_table(struct nvidia_p2p_page_table *page_table)
{
	atomic_long_inc(&gsim.calls[FN_FREE_PAGE_TABLE]);
	return 0;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_free_page_table);

/* A no-op in modern drivers; callable from a free callback. */
int nvidia_p2p_free_dma_mapping(struct nvidia_p2p_dma_mapping *dma_mapping)
{
	atomic_long_inc(&gsim.calls[FN_FREE_DMA_MAPPING]);
	return 0;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_free_dma_mapping);

/* Whether @pdev is a PCI device, without dereferencing it. */
static bool gsim_is_pci_dev(struct pci_dev *pdev)
{
	struct pci_dev *it = NULL;
	struct gsim_device *dev;

	list_for_each_entry(dev, &gsim.devices, node)
		if (dev->pdev == pdev)
			return true;
	for_each_pci_dev(it) {
		if (it == pdev) {
			pci_dev_put(it);
			return true;
		}
	}
	return false;
}

/* The IOVA window of @pdev, created at its first mapping. */
static struct gsim_device *gsim_device(struct pci_dev *pdev)
{
	struct gsim_device *dev;
	unsigned int n = 0;

	list_for_each_entry(dev, &gsim.devices, node) {
		if (dev->pdev == pdev)
			return dev;
		n++;
	}
	dev = kzalloc(sizeof(*dev), GFP_KERNEL);
	if (!dev)
		return NULL;
	dev->pdev = pci_dev_get(pdev);
	dev->dma_offset = (n + 1) * GSIM_IOVA_STRIDE;
	list_add_tail(&dev->node, &gsim.devices);
	return dev;
}

static int gsim_dma_map(struct pci_dev *peer, struct nvidia_p2p_page_table *pt,
			struct nvidia_p2p_dma_mapping **dma_mapping)
{
	struct gsim_pin *pin;
	struct gsim_mapping *m;
	u32 i;

	if (!peer || !pt || !dma_mapping)
		return -EINVAL;
	if (!gsim_is_pci_dev(peer)) {
		gsim_violation(V_BAD_PEER,
			       "nvidia_p2p_dma_map_pages with a peer that is no PCI device (to_pci_dev of a non-PCI device?)");
		return -EINVAL;
	}
	pin = gsim_lookup(pt);
	if (!pin) {
		gsim_violation(V_UNKNOWN_TABLE,
			       "nvidia_p2p_dma_map_pages of an unknown page table");
		return -EINVAL;
	}
	if (pin->state == PIN_REVOKED || pin->state == PIN_PUT) {
		gsim_violation(V_USE_AFTER_FREE,
			       "nvidia_p2p_dma_map_pages of page table #%llu after its %s",
			       pin->id, pin->state == PIN_PUT ? "put" : "free callback");
		return -EINVAL;
	}
	if (pt->page_size != NVIDIA_P2P_PAGE_SIZE_64KB) {
		gsim_violation(V_BAD_PAGE_SIZE,
			       "nvidia_p2p_dma_map_pages of a table with page size type %u (the real driver BUG()s)",
			       pt->page_size);
		return -EINVAL;
	}
	if (pin->force_bar1)
		return -ENOTSUPP;

	m = kzalloc(sizeof(*m), GFP_KERNEL);
	if (!m)
		return -ENOMEM;
	m->dev = gsim_device(peer);
	m->dm.dma_addresses = kcalloc(pt->entries ?: 1, sizeof(u64), GFP_KERNEL);
	if (!m->dev || !m->dm.dma_addresses) {
		kfree(m->dm.dma_addresses);
		kfree(m);
		return -ENOMEM;
	}
	m->dm.version = READ_ONCE(bad_data) == BAD_DMA_VERSION ?
			0x00010000 : NVIDIA_P2P_DMA_MAPPING_VERSION;
	m->dm.page_size_type = pt->page_size;
	m->dm.entries = pt->entries;
	for (i = 0; i < pt->entries; i++)
		m->dm.dma_addresses[i] = pin->page_ptrs[i]->physical_address +
					 m->dev->dma_offset;
	m->dm.private = m;
	m->dm.pci_dev = peer;
	list_add_tail(&m->node, &pin->mappings);
	gsim.live_mappings++;
	*dma_mapping = &m->dm;
	return 0;
}

int nvidia_p2p_dma_map_pages(struct pci_dev *peer,
			     struct nvidia_p2p_page_table *page_table,
			     struct nvidia_p2p_dma_mapping **dma_mapping)
{
	int ret;

	gsim_free_meanwhile(READ_ONCE(free_during_map), page_table);
	ret = gsim_begin(FN_DMA_MAP_PAGES);
	if (!ret)
		ret = gsim_dma_map(peer, page_table, dma_mapping);
	return gsim_end(FN_DMA_MAP_PAGES, ret);
}
EXPORT_SYMBOL_GPL(nvidia_p2p_dma_map_pages);

static int gsim_dma_unmap(struct pci_dev *peer, struct nvidia_p2p_page_table *pt,
			  struct nvidia_p2p_dma_mapping *dm)
{
	struct gsim_pin *pin = gsim_lookup_settled(pt);
	struct gsim_mapping *m;

	if (!pin) {
		gsim_violation(V_UNKNOWN_TABLE,
			       "nvidia_p2p_dma_unmap_pages of an unknown page table");
		return -EINVAL;
	}
	if (pin->state == PIN_REVOKED)
		return 0;	/* torn down with the table by the callback */
	if (pin->state == PIN_PUT) {
		gsim_violation(V_USE_AFTER_FREE,
			       "nvidia_p2p_dma_unmap_pages of page table #%llu after its put",
			       pin->id);
		return -EINVAL;
	}
	list_for_each_entry(m, &pin->mappings, node) {
		if (&m->dm != dm)
			continue;
		if (m->dm.pci_dev != peer) {
			gsim_violation(V_BAD_PEER,
				       "nvidia_p2p_dma_unmap_pages with another peer than the mapping's (the real driver WARNs)");
			return -EINVAL;
		}
		gsim_unmap(m);
		return 0;
	}
	gsim_violation(V_UNKNOWN_MAPPING,
		       "nvidia_p2p_dma_unmap_pages of a mapping unknown to page table #%llu",
		       pin->id);
	return -EINVAL;
}

int nvidia_p2p_dma_unmap_pages(struct pci_dev *peer,
			       struct nvidia_p2p_page_table *page_table,
			       struct nvidia_p2p_dma_mapping *dma_mapping)
{
	int ret = gsim_begin(FN_DMA_UNMAP_PAGES);

	if (!ret)
		ret = gsim_dma_unmap(peer, page_table, dma_mapping);
	return gsim_end(FN_DMA_UNMAP_PAGES, ret);
}
EXPORT_SYMBOL_GPL(nvidia_p2p_dma_unmap_pages);

/* ---- cudaFree: the free callbacks ------------------------------------- */

/* The next pin of @buf whose free callback has to run, or NULL. */
static struct gsim_pin *gsim_next_revocable(struct gsim_buffer *buf)
{
	struct gsim_pin *pin;

	list_for_each_entry(pin, &gsim.pins, node)
		if (pin->buf == buf && !pin->persistent && pin->state == PIN_ACTIVE)
			return pin;
	return NULL;
}

/* Frees the buffer at @va; returns the number of callbacks fired. */
static int gsim_free(u64 va)
{
	struct gsim_buffer *buf;
	struct gsim_pin *pin;
	int fired = 0;

	mutex_lock(&gsim.lock);
	list_for_each_entry(buf, &gsim.buffers, node)
		if (buf->va == va)
			goto found;
	mutex_unlock(&gsim.lock);
	return -EINVAL;

found:
	/* From here on, the range is no longer GPU memory for new pins. */
	list_move_tail(&buf->node, &gsim.zombies);
	buf->freed = true;
	gsim.live_buffers--;
	buf->pins++;	/* keeps buf while its pins are retired */
	while ((pin = gsim_next_revocable(buf))) {
		WRITE_ONCE(pin->state, PIN_IN_CALLBACK);
		pin->cb_task = current;
		list_add(&pin->cb_node, &gsim.in_callback);
		mutex_unlock(&gsim.lock);
		atomic_long_inc(&gsim.callbacks_started);
		pin->free_callback(pin->data);
		mutex_lock(&gsim.lock);
		list_del(&pin->cb_node);
		pin->cb_task = NULL;
		/* After the callback the driver frees the table and mappings. */
		gsim_retire(pin, PIN_REVOKED);
		atomic_long_inc(&gsim.callbacks);
		wake_up_all(&gsim.cb_wait);
		fired++;
	}
	if (!--buf->pins)
		gsim_buffer_free(buf);
	mutex_unlock(&gsim.lock);
	return fired;
}

/*
 * Test hooks for mofed_peer_sim's free_at= option (not NVIDIA's API): a
 * cudaFree from another thread at a chosen point of a registration.
 */
int nvidia_sim_free(u64 va)
{
	return gsim_free(va);
}
EXPORT_SYMBOL_GPL(nvidia_sim_free);

long nvidia_sim_callbacks_started(void)
{
	return atomic_long_read(&gsim.callbacks_started);
}
EXPORT_SYMBOL_GPL(nvidia_sim_callbacks_started);

/*
 * Test hook free_during_map (not NVIDIA's API): nvidia_p2p_dma_map_pages
 * first frees the buffer of the table it was given, from another thread, and
 * waits up to a second for the pin's free callback to have returned (the
 * driver then freed the table) before doing its work: a cudaFree that
 * completes while a client is inside dma_map_pages. A client that passes a
 * table the driver may free meanwhile gets a use_after_free violation.
 * free_during_put does the same in nvidia_p2p_put_pages: a cudaFree whose
 * callback runs while the client is inside the unpin.
 */
module_param(free_during_map, bool, 0644);
MODULE_PARM_DESC(free_during_map, "Test hook: dma_map_pages first frees the buffer being mapped from another thread and waits up to 1 s for its callback to return");

static atomic_t gsim_free_works = ATOMIC_INIT(0);

struct gsim_free_work {
	struct work_struct work;
	u64 va;
};

static void gsim_free_work_fn(struct work_struct *work)
{
	struct gsim_free_work *w = container_of(work, struct gsim_free_work, work);

	gsim_free(w->va);
	kfree(w);
	if (atomic_dec_and_test(&gsim_free_works))
		wake_up_var(&gsim_free_works);
}

static void gsim_free_meanwhile(bool hook, struct nvidia_p2p_page_table *pt)
{
	struct gsim_free_work *w;
	struct gsim_pin *pin;

	if (!hook)
		return;
	w = kzalloc(sizeof(*w), GFP_KERNEL);
	if (!w)
		return;
	mutex_lock(&gsim.lock);
	pin = gsim_lookup(pt);
	if (!pin || pin->state != PIN_ACTIVE || pin->persistent || pin->buf->freed) {
		mutex_unlock(&gsim.lock);
		kfree(w);
		return;
	}
	kref_get(&pin->ref);
	w->va = pin->buf->va;
	mutex_unlock(&gsim.lock);
	INIT_WORK(&w->work, gsim_free_work_fn);
	atomic_inc(&gsim_free_works);
	queue_work(system_unbound_wq, &w->work);
	wait_event_timeout(gsim.cb_wait, READ_ONCE(pin->state) == PIN_REVOKED, HZ);
	kref_put(&pin->ref, gsim_pin_free);
}

/* At unload: the frees queued by the free_during_* hooks have run. */
static void gsim_flush_free_works(void)
{
	wait_var_event(&gsim_free_works, !atomic_read(&gsim_free_works));
}

/* ---- debugfs: ctl ----------------------------------------------------- */

static int gsim_cmd_alloc(int argc, char **argv, struct sim_reply *r)
{
	int layout = READ_ONCE(default_layout);
	u64 size, va;
	int ret;

	if (sim_parse_size(argv[1], &size)) {
		sim_reply(r, "error: bad size '%s'\n", argv[1]);
		return -EINVAL;
	}
	if (argc > 2) {
		layout = match_string(gsim_layout_names, ARRAY_SIZE(gsim_layout_names), argv[2]);
		if (layout < 0) {
			sim_reply(r, "error: unknown layout '%s'\n", argv[2]);
			return -EINVAL;
		}
	}
	ret = gsim_alloc(size, layout, &va);
	if (ret == -ENOMEM)
		sim_reply(r, "error: out of fake VRAM (vram_mb=%u)\n", vram_mb);
	if (ret)
		return ret;
	sim_reply(r, "%#llx\n", va);
	return 0;
}

static int gsim_cmd_free(int argc, char **argv, struct sim_reply *r)
{
	u64 va;
	int fired;

	if (sim_parse_u64(argv[1], &va)) {
		sim_reply(r, "error: bad address '%s'\n", argv[1]);
		return -EINVAL;
	}
	fired = gsim_free(va);
	if (fired < 0) {
		sim_reply(r, "error: no buffer allocated at %#llx\n", va);
		return fired;
	}
	sim_reply(r, "callbacks %d\n", fired);
	return 0;
}

/* inject FUNC NTH ERRNO [TIMES] | inject FUNC off | inject off */
static int gsim_cmd_inject(int argc, char **argv, struct sim_reply *r)
{
	struct gsim_injection inj = { };
	u64 nth, times = 1;
	int fn, err;

	if (!strcmp(argv[1], "off")) {
		mutex_lock(&gsim.lock);
		memset(gsim.inject, 0, sizeof(gsim.inject));
		mutex_unlock(&gsim.lock);
		return 0;
	}
	fn = match_string(gsim_fn_names, FN_COUNT, argv[1]);
	if (fn < 0 || fn == FN_FREE_PAGE_TABLE || fn == FN_FREE_DMA_MAPPING) {
		sim_reply(r, "error: no failure to inject into '%s'\n", argv[1]);
		return -EINVAL;
	}
	if (argc == 3 && !strcmp(argv[2], "off"))
		goto arm;
	if (argc < 4 || sim_parse_u64(argv[2], &nth) || !nth || kstrtoint(argv[3], 0, &err) ||
	    !err || err < -MAX_ERRNO || err > MAX_ERRNO ||
	    (argc > 4 && sim_parse_u64(argv[4], &times))) {
		sim_reply(r, "error: usage: inject FUNC NTH ERRNO [TIMES] | %s\n",
			  "inject FUNC off | inject off");
		return -EINVAL;
	}
	inj.skip = nth - 1;
	inj.times = times ? times : ULONG_MAX;
	inj.err = err < 0 ? err : -err;
arm:
	mutex_lock(&gsim.lock);
	gsim.inject[fn] = inj;
	mutex_unlock(&gsim.lock);
	return 0;
}

static int gsim_cmd_reset(int argc, char **argv, struct sim_reply *r)
{
	int i;

	for (i = 0; i < FN_COUNT; i++) {
		atomic_long_set(&gsim.calls[i], 0);
		atomic_long_set(&gsim.errors[i], 0);
	}
	for (i = 0; i < V_COUNT; i++)
		atomic_long_set(&gsim.violations[i], 0);
	atomic_long_set(&gsim.callbacks, 0);
	return 0;
}

static const struct sim_cmd gsim_cmds[] = {
	{ "alloc", 1, gsim_cmd_alloc },
	{ "free", 1, gsim_cmd_free },
	{ "inject", 1, gsim_cmd_inject },
	{ "reset", 0, gsim_cmd_reset },
};

SIM_CTL_FOPS(gsim_ctl, gsim_cmds);

/* ---- debugfs: read-only views ----------------------------------------- */

static int gsim_counters_show(struct seq_file *s, void *unused)
{
	long total = 0;
	int i;

	for (i = 0; i < FN_COUNT; i++)
		seq_printf(s, "calls.%s %ld\n", gsim_fn_names[i],
			   atomic_long_read(&gsim.calls[i]));
	for (i = 0; i < FN_COUNT; i++)
		seq_printf(s, "errors.%s %ld\n", gsim_fn_names[i],
			   atomic_long_read(&gsim.errors[i]));
	seq_printf(s, "buffers.live %u\n", READ_ONCE(gsim.live_buffers));
	seq_printf(s, "pins.live %u\n", READ_ONCE(gsim.live_pins));
	seq_printf(s, "pins.persistent %u\n", READ_ONCE(gsim.live_persistent));
	seq_printf(s, "mappings.live %u\n", READ_ONCE(gsim.live_mappings));
	seq_printf(s, "callbacks %ld\n", atomic_long_read(&gsim.callbacks));
	seq_printf(s, "frames.used %u\n", bitmap_weight(gsim.frame_map, gsim.nframes));
	for (i = 0; i < V_COUNT; i++) {
		total += atomic_long_read(&gsim.violations[i]);
		seq_printf(s, "violation.%s %ld\n", gsim_violation_names[i],
			   atomic_long_read(&gsim.violations[i]));
	}
	seq_printf(s, "violations %ld\n", total);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(gsim_counters);

/* One line per buffer: VA SIZE LAYOUT allocated|freed PINS */
static int gsim_buffers_show(struct seq_file *s, void *unused)
{
	struct list_head *lists[] = { &gsim.buffers, &gsim.zombies };
	struct gsim_buffer *buf;
	int i;

	mutex_lock(&gsim.lock);
	for (i = 0; i < ARRAY_SIZE(lists); i++)
		list_for_each_entry(buf, lists[i], node)
			seq_printf(s, "%#llx %llu %s %s %u\n", buf->va, buf->size,
				   gsim_layout_names[buf->layout],
				   buf->freed ? "freed" : "allocated", buf->pins);
	mutex_unlock(&gsim.lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(gsim_buffers);

/* One line per 64 KiB page of every buffer: VA BUS_ADDRESS */
static int gsim_pages_show(struct seq_file *s, void *unused)
{
	struct list_head *lists[] = { &gsim.buffers, &gsim.zombies };
	struct gsim_buffer *buf;
	u32 i, l;

	mutex_lock(&gsim.lock);
	for (l = 0; l < ARRAY_SIZE(lists); l++)
		list_for_each_entry(buf, lists[l], node)
			for (i = 0; i < buf->npages; i++)
				seq_printf(s, "%#llx %#llx\n",
					   buf->va + ((u64)i << GSIM_PAGE_SHIFT),
					   gsim_frame_addr(buf->frames[i]));
	mutex_unlock(&gsim.lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(gsim_pages);

/* One line per live pin: ID VA LEN persistent|revocable STATE MAPPINGS */
static int gsim_pins_show(struct seq_file *s, void *unused)
{
	struct gsim_pin *pin;
	struct gsim_mapping *m;
	unsigned int n;

	mutex_lock(&gsim.lock);
	list_for_each_entry(pin, &gsim.pins, node) {
		n = 0;
		list_for_each_entry(m, &pin->mappings, node)
			n++;
		seq_printf(s, "%llu %#llx %llu %s %s %u\n", pin->id, pin->va, pin->len,
			   pin->persistent ? "persistent" : "revocable",
			   gsim_pin_state_names[pin->state], n);
	}
	mutex_unlock(&gsim.lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(gsim_pins);

/* One line per peer device: PCI_NAME DMA_OFFSET (DMA = bus address + offset) */
static int gsim_devices_show(struct seq_file *s, void *unused)
{
	struct gsim_device *dev;

	mutex_lock(&gsim.lock);
	list_for_each_entry(dev, &gsim.devices, node)
		seq_printf(s, "%s %#llx\n", pci_name(dev->pdev), dev->dma_offset);
	mutex_unlock(&gsim.lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(gsim_devices);

/* One line per armed injection: FUNC SKIP TIMES ERRNO (TIMES 0: forever) */
static int gsim_injections_show(struct seq_file *s, void *unused)
{
	struct gsim_injection *inj;
	int i;

	mutex_lock(&gsim.lock);
	for (i = 0; i < FN_COUNT; i++) {
		inj = &gsim.inject[i];
		if (inj->times)
			seq_printf(s, "%s %lu %lu %d\n", gsim_fn_names[i], inj->skip,
				   inj->times == ULONG_MAX ? 0 : inj->times, inj->err);
	}
	mutex_unlock(&gsim.lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(gsim_injections);

/* ---- Module ----------------------------------------------------------- */

static void gsim_debugfs_init(void)
{
	struct dentry *d = debugfs_create_dir("nvidia_sim", NULL);

	gsim.debugfs = d;
	debugfs_create_file("ctl", 0600, d, NULL, &gsim_ctl_fops);
	debugfs_create_file("counters", 0444, d, NULL, &gsim_counters_fops);
	debugfs_create_file("buffers", 0444, d, NULL, &gsim_buffers_fops);
	debugfs_create_file("pages", 0444, d, NULL, &gsim_pages_fops);
	debugfs_create_file("pins", 0444, d, NULL, &gsim_pins_fops);
	debugfs_create_file("devices", 0444, d, NULL, &gsim_devices_fops);
	debugfs_create_file("injections", 0444, d, NULL, &gsim_injections_fops);
}

static int __init gsim_init(void)
{
	mutex_init(&gsim.lock);
	INIT_LIST_HEAD(&gsim.buffers);
	INIT_LIST_HEAD(&gsim.zombies);
	INIT_LIST_HEAD(&gsim.pins);
	INIT_LIST_HEAD(&gsim.tombstones);
	INIT_LIST_HEAD(&gsim.in_callback);
	INIT_LIST_HEAD(&gsim.devices);
	init_waitqueue_head(&gsim.cb_wait);
	gsim.next_va = GSIM_VA_BASE;
	gsim.nframes = ((unsigned long)vram_mb << 20) >> GSIM_PAGE_SHIFT;
	if (!gsim.nframes)
		return -EINVAL;
	gsim.frame_map = bitmap_zalloc(gsim.nframes, GFP_KERNEL);
	if (!gsim.frame_map)
		return -ENOMEM;
	gsim_page_cache = KMEM_CACHE(nvidia_p2p_page, 0);
	if (!gsim_page_cache) {
		bitmap_free(gsim.frame_map);
		return -ENOMEM;
	}
	gsim_debugfs_init();
	pr_info("simulated GPU ready: %u MiB, page table ABI %s, persistent API %s\n",
		vram_mb, gsim_pt_abi_names[page_table_version],
		persistent_api ? "supported" : "refused");
	return 0;
}

static void __exit gsim_exit(void)
{
	struct gsim_buffer *buf, *tbuf;
	struct gsim_pin *pin, *tpin;
	struct gsim_device *dev, *tdev;

	debugfs_remove_recursive(gsim.debugfs);
	gsim_flush_free_works();
	mutex_lock(&gsim.lock);
	list_for_each_entry_safe(pin, tpin, &gsim.pins, node) {
		gsim_violation(V_HELD_AT_UNLOAD,
			       "%s page table #%llu (va %#llx, %llu bytes) still held at unload",
			       pin->persistent ? "persistent" : "non-persistent",
			       pin->id, pin->va, pin->len);
		gsim_retire(pin, PIN_PUT);
	}
	list_for_each_entry_safe(pin, tpin, &gsim.tombstones, node) {
		hash_del(&pin->hnode);
		list_del(&pin->node);
		kref_put(&pin->ref, gsim_pin_free);
	}
	list_for_each_entry_safe(buf, tbuf, &gsim.buffers, node)
		gsim_buffer_free(buf);
	list_for_each_entry_safe(buf, tbuf, &gsim.zombies, node)
		gsim_buffer_free(buf);
	list_for_each_entry_safe(dev, tdev, &gsim.devices, node) {
		list_del(&dev->node);
		pci_dev_put(dev->pdev);
		kfree(dev);
	}
	mutex_unlock(&gsim.lock);
	bitmap_free(gsim.frame_map);
	kmem_cache_destroy(gsim_page_cache);
	pr_info("simulated GPU removed\n");
}

module_init(gsim_init);
module_exit(gsim_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Simulated NVIDIA GPU driver (nvidia_p2p_* API) for nvidia-peermem tests");
/* /sys/module/nvidia/version, as the real driver's (nvidia-peermem-doctor reports it). */
MODULE_VERSION("580.95.05-sim");
