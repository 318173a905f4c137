// SPDX-License-Identifier: GPL-2.0
/*
 * mofed_sim: a simulated MOFED peer-memory core (the PeerDirect part of
 * ib_core), for tests, built as mofed_peer_sim.ko.
 *
 * It exports ib_register_peer_memory_client and ib_unregister_peer_memory_client
 * and drives registered clients the way one of three MOFED generations does
 * (module parameter "mode", fixed at load):
 *   modern  5.4-3+ / DOCA: _ex clients with PEER_MEM_INVALIDATE_UNMAPS unmap
 *           themselves (the core only marks the umem invalidated); first and
 *           last SGE trimmed to PAGE_SIZE when the client's page size is larger.
 *   mid     5.1 ... 5.4-2: no _ex; dma_unmap and put_pages are called inside
 *           the invalidation with mapping_lock held (bug 2696789's ordering).
 *   legacy  <= 5.0: ticket core contexts, the 152-byte client struct, and
 *           dma_unmap, put_pages and release all called inside the invalidation
 *           under a per-client mutex.
 * User space registers "MRs" through debugfs (/sys/kernel/debug/mofed_peer_sim/
 * ctl) and reads back their SG list, page size and invalidation events. The
 * client's output is checked (SGE alignment, coverage, nmap, page size, table
 * left by a failed dma_map, calls after release); failures are counted and
 * logged as "contract violation", never WARNed. A direct mode registers MRs
 * with the nvidia_p2p_* API and no client at all (the bare-provider baseline),
 * resolved with symbol_get so that this module does not depend on nvidia.ko.
 *
 * Locking, outermost first:
 *   msim.peer_mutex    the client list; held across the ownership search,
 *                      i.e. across the clients' acquire calls.
 *   mr->mapping_lock   from before get_pages until the HCA activates the
 *                      invalidation notifier, after its own work on the
 *                      mapping (mlx5: page size, mkey, UMR; here
 *                      activation_delay_ms and free_at=activate) (legacy
 *                      too, though 4.x has none: nothing else takes it
 *                      there), across a modern invalidation, and (clients
 *                      that do not unmap themselves) across dma_unmap +
 *                      put_pages on deregistration. A client's free
 *                      callback that forwards an invalidation waits here.
 *   client->lock       legacy: tickets (taken inside mapping_lock by a
 *                      registration); held across a whole invalidation,
 *                      including the client's dma_unmap, put_pages, release.
 *   msim.lock, client->umems' xa_lock, a direct MR's direct_lock:
 *                      spinlocks, innermost, never held across a call into a
 *                      client or the GPU.
 * Client callbacks run with the locks MOFED would hold at that point (plus
 * the unused mapping_lock in legacy mode).
 */
#define pr_fmt(fmt) "mofed_peer_sim: " fmt

#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/device.h>
#include <linux/dma-mapping.h>
#include <linux/kref.h>
#include <linux/log2.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/scatterlist.h>
#include <linux/seq_file.h>
#include <linux/sizes.h>
#include <linux/timekeeping.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>

#include "nv-p2p.h"
#include "peer_mem.h"
#include "peer_mem_legacy.h"
#include "sim_common.h"

/* core_context of a umem whose client takes no invalidation (5.1+). */
#define PEER_NO_INVALIDATION_ID U32_MAX
/* The GPU's page size in direct mode. */
#define MSIM_GPU_PAGE_SIZE SZ_64K
/* Core contexts remembered per client after release, to spot late calls. */
#define MSIM_RELEASED_RING 32

enum msim_mode { MODE_MODERN, MODE_MID, MODE_LEGACY };
static const char *const msim_mode_names[] = { "modern", "mid", "legacy" };
static int mode = MODE_MODERN;
static struct sim_enum_param mode_param = {
	msim_mode_names, ARRAY_SIZE(msim_mode_names), &mode
};
module_param_cb(mode, &sim_enum_param_ops, &mode_param, 0444);
MODULE_PARM_DESC(mode, "MOFED generation: modern (5.4-3+/DOCA), mid (5.1-5.4-2), legacy (<=5.0)");

static char *pci_dev;
module_param(pci_dev, charp, 0444);
MODULE_PARM_DESC(pci_dev, "PCI device (DDDD:BB:DD.F) used as the HCA's dma_device; default: the first one");

/* mlx5_core: dma_set_max_seg_size(&pdev->dev, 2u * 1024 * 1024 * 1024). */
static unsigned int max_seg_size = SZ_2G;
module_param(max_seg_size, uint, 0444);
MODULE_PARM_DESC(max_seg_size, "DMA max segment size set on the dma_device at load, as mlx5 does (default 2 GiB; 0: leave the device alone)");

/*
 * Client names: up to OFED 23.10 the core adds a kobject per client under
 * /sys/kernel/mm/memory_peers, which refuses an empty or unterminated name
 * and a duplicate; from 24.04 on it only initialises it (no kobject_add):
 * every name registers, and of two clients with one name the first
 * registered wins every acquire.
 */
enum msim_names { NAMES_CHECKED, NAMES_UNCHECKED };
static const char *const msim_names_names[] = { "checked", "unchecked" };
static int names = NAMES_CHECKED;
static struct sim_enum_param names_param = {
	msim_names_names, ARRAY_SIZE(msim_names_names), &names
};
module_param_cb(names, &sim_enum_param_ops, &names_param, 0444);
MODULE_PARM_DESC(names, "Client names: checked (OFED <= 23.10: empty, unterminated and duplicate names refused) or unchecked (24.04+: all register, the first wins)");

/* The HCA's work between dma_map and activation, mapping_lock held. */
static unsigned int activation_delay_ms;
module_param(activation_delay_ms, uint, 0644);
MODULE_PARM_DESC(activation_delay_ms, "Test knob: the HCA's work between a client's dma_map and the activation of the invalidation notifier, in ms, mapping_lock held (default 0)");

/*
 * register_return_ms (test hook): ib_register_peer_memory_client waits this
 * long after it listed the client and before it returns the handle. MOFED's
 * core lists the client under peer_memory_mutex and returns afterwards
 * (peer_mem.c ib_register_peer_memory_client), so a registration may reach
 * the client's acquire before the client has the handle its invalidations
 * need.
 */
static unsigned int register_return_ms;
module_param(register_return_ms, uint, 0644);
MODULE_PARM_DESC(register_return_ms, "Test hook: ib_register_peer_memory_client returns this long (ms) after it listed the client (default 0)");

enum msim_violation {
	V_SG_ALIGN, V_SG_COVERAGE, V_NMAP, V_PAGE_SIZE, V_MAP_FAILURE,
	V_AFTER_RELEASE, V_BAD_HANDLE, V_NO_INVALIDATION, V_UNMAP_RETURN,
	V_CALL_COUNT, V_COUNT
};

static const char *const msim_violation_names[V_COUNT] = {
	"sg_align", "sg_coverage", "nmap", "page_size", "map_failure",
	"after_release", "bad_handle", "no_invalidation", "unmap_return",
	"call_count",
};

/*
 * Where a timed loop with "profile" spends its time, per MR, in order: each
 * msim_phase() call charges the time since the previous one to a phase.
 * Client MRs: OWNER is the ownership search (the client's acquire), GET_PAGES,
 * DMA_MAP, DMA_UNMAP, PUT_PAGES and RELEASE the client's callbacks, CORE the
 * core's own steps (core context, checks, trimming, activation). Direct MRs:
 * GET_PAGES, DMA_MAP, DMA_UNMAP, PUT_PAGES are the nvidia_p2p_* calls, CORE the
 * table checks and the snapshot.
 */
enum msim_phase {
	PH_OWNER, PH_GET_PAGES, PH_DMA_MAP, PH_DMA_UNMAP, PH_PUT_PAGES, PH_RELEASE,
	PH_CORE, PH_COUNT
};

static const char *const msim_phase_names[PH_COUNT] = {
	"owner", "get_pages", "dma_map", "dma_unmap", "put_pages", "release", "core",
};

struct msim_prof {
	u64 ns[PH_COUNT];
	u64 mark;			/* the end of the previous phase */
};

/* A registered (or, until unload, formerly registered) peer-memory client. */
struct msim_client {
	struct list_head node;		/* msim.clients while registered */
	struct list_head all_node;	/* msim.all_clients until unload */
	const struct peer_memory_client *ops;
	void *(*get_context_private_data)(u64 peer_id);	/* legacy layout */
	char name[IB_PEER_MEMORY_NAME_MAX];
	bool registered;		/* under msim.lock */
	bool gone;			/* unregister returned; under msim.lock */
	bool invalidation_required;
	bool unmaps_on_invalidate;	/* _ex + PEER_MEM_INVALIDATE_UNMAPS */
	atomic_t users;			/* live umems, + 1 while registered */
	struct completion unused;	/* users reached 0 */
	struct xarray umems;		/* modern/mid: core_context -> mr */
	u32 next_id;
	struct mutex lock;		/* legacy: tickets and invalidations */
	struct list_head tickets;	/* legacy: mr->ticket_node */
	u64 next_ticket;
	u64 released[MSIM_RELEASED_RING];	/* under msim.lock */
	unsigned int nreleased;
	atomic_long_t regs, deregs, invalidations;
};

enum msim_mr_state { MR_NEW, MR_MAPPED, MR_INVALIDATED, MR_UNMAPPED, MR_RELEASED };
static const char *const msim_mr_state_names[] = {
	"new", "mapped", "invalidated", "unmapped", "released",
};

struct msim_sge {
	u64 addr;
	u32 len;
};

/* A memory registration: the umem and what the HCA would keep of it. */
struct msim_mr {
	struct kref ref;
	u32 id;
	u64 va;
	u64 size;
	bool inval;			/* the MR supports invalidation */
	bool writable;
	bool direct;			/* no client: nvidia_p2p_* called directly */
	bool persistent;		/* direct: the persistent API */
	bool nocheck;			/* timed loop: no SG walk, no SG snapshot */
	struct msim_prof *prof;		/* timed loop with "profile" */
	struct device *dma_device;
	struct msim_client *client;
	void *client_ctx;
	u64 core_context;
	bool has_core_context;		/* in client->umems or client->tickets */
	bool had_core_context;		/* was, once: released[] gets it at release */
	struct mutex mapping_lock;
	enum msim_mr_state state;
	bool active;			/* invalidation notifier armed */
	bool latched;			/* legacy: invalidated before activation */
	struct list_head ticket_node;	/* legacy: client->tickets */
	struct sg_table sgt;		/* the umem's table, filled by dma_map */
	int nmap;
	unsigned long page_size;
	bool trimmed;
	struct scatterlist *trimmed_last;	/* the last SGE, kept as MOFED does */
	dma_addr_t orig_first_addr;	/* before trimming */
	unsigned int orig_first_len, orig_last_len;	/* DMA lengths */
	unsigned int orig_first_length, orig_last_length;	/* sg->length */
	u64 sg_va;			/* GPU VA of the first byte of the SG list */
	struct msim_sge *sges;		/* copy of the SG list at activation */
	unsigned int nsges;
	atomic_t events;		/* invalidations received */
	int free_at;			/* enum msim_free_at: a cudaFree to inject */
	int again;			/* enum msim_again: repeated calls on dereg */
	bool again_counted;		/* ... counted as the core's own calls */
	int again_ret;			/* what the repeated dma_unmap returned */
	unsigned int unmap_calls, put_calls;
	/* direct mode */
	spinlock_t direct_lock;		/* the three fields below, and state */
	bool revoked;			/* the GPU's free callback came */
	unsigned int readers;		/* reading the table or unmapping it */
	struct nvidia_p2p_page_table *pt;
	struct nvidia_p2p_dma_mapping *dm;
	u32 pt_version;			/* as the table said at registration */
	u32 pt_flags;			/* 0 unless the table is 2.0 or later */
};

static struct {
	struct mutex peer_mutex;	/* the client list, the ownership search */
	struct list_head clients;	/* registration order */
	spinlock_t lock;
	struct list_head all_clients;
	struct device *pci_device;	/* the HCA's dma_device */
	bool seg_size_set;		/* max_seg_size applied: restore at unload */
	unsigned int old_seg_size;	/* dma_parms->max_segment_size before */
	struct device *nonpci_device;	/* for bad-input tests */
	struct dentry *debugfs;
	atomic_long_t registrations, reg_failures, deregistrations;
	atomic_long_t invalidations, invalidations_unknown;
	atomic_long_t registers_held;	/* register_return_ms waits */
	atomic_long_t violations[V_COUNT];
	atomic_t live_mrs, live_clients;
	wait_queue_head_t direct_wait;	/* a direct MR lost its last reader */
} msim;

static DEFINE_XARRAY_ALLOC1(msim_mrs);	/* user-visible MR ids */

/* Starts the profile of @mr's next phase (profiled loops only). */
static void msim_phase_start(struct msim_mr *mr)
{
	if (mr->prof)
		mr->prof->mark = ktime_get_ns();
}

/* Charges the time since the last mark to @ph and starts the next phase. */
static void msim_phase(struct msim_mr *mr, enum msim_phase ph)
{
	u64 now;

	if (!mr->prof)
		return;
	now = ktime_get_ns();
	mr->prof->ns[ph] += now - mr->prof->mark;
	mr->prof->mark = now;
}

/*
 * Every check counted here is this project's own: MOFED makes none of them
 * (OFED 25.10's drivers/infiniband/core/peer_mem.c: after dma_map it asks
 * get_page_size and trims, checking nothing; ib_invalidate_peer_memory
 * returns 0 for an unknown, released or U32_MAX id; unregistration trusts
 * its handle). Each log line
 * says what MOFED does instead; the simulator then does that too (an
 * invalidation it ignores is ignored here), or, where MOFED would program
 * the HCA with the client's bad table, refuses the registration.
 */
static const char *const msim_mofed_does[V_COUNT] = {
	[V_SG_ALIGN] = "MOFED does not check: the HCA gets the SGE as it is",
	[V_SG_COVERAGE] = "MOFED does not check: the MR maps another range",
	[V_NMAP] = "MOFED does not check: nmap is its table's nents",
	[V_PAGE_SIZE] = "MOFED does not check; a NULL get_page_size is a NULL call there",
	[V_MAP_FAILURE] = "MOFED does not check the table a failed dma_map left",
	[V_AFTER_RELEASE] = "MOFED ignores it, or invalidates a newer MR that reused the id",
	[V_BAD_HANDLE] = "MOFED trusts the handle",
	[V_NO_INVALIDATION] = "MOFED ignores it",
	[V_UNMAP_RETURN] = "MOFED ignores the return value",
	[V_CALL_COUNT] = "a self-check of this simulator",
};

#define msim_violation(v, fmt, ...)						\
	do {									\
		atomic_long_inc(&msim.violations[v]);				\
		pr_err("contract violation: " fmt " [a check of this project's own: %s]\n", \
		       ##__VA_ARGS__, msim_mofed_does[v]);			\
	} while (0)

static bool msim_legacy(void)
{
	return mode == MODE_LEGACY;
}

/* ---- The provider API, for direct mode --------------------------------- */

/* nvidia_p2p_* of nvidia.ko, resolved while direct MRs need them. */
static struct {
	struct mutex lock;		/* users and the symbols */
	unsigned int users;
	typeof(&nvidia_p2p_get_pages) get_pages;
	typeof(&nvidia_p2p_get_pages_persistent) get_pages_persistent;
	typeof(&nvidia_p2p_put_pages) put_pages;
	typeof(&nvidia_p2p_put_pages_persistent) put_pages_persistent;
	typeof(&nvidia_p2p_dma_map_pages) dma_map_pages;
	typeof(&nvidia_p2p_dma_unmap_pages) dma_unmap_pages;
} p2p;

static void msim_p2p_drop(void)
{
	if (p2p.get_pages)
		symbol_put(nvidia_p2p_get_pages);
	if (p2p.get_pages_persistent)
		symbol_put(nvidia_p2p_get_pages_persistent);
	if (p2p.put_pages)
		symbol_put(nvidia_p2p_put_pages);
	if (p2p.put_pages_persistent)
		symbol_put(nvidia_p2p_put_pages_persistent);
	if (p2p.dma_map_pages)
		symbol_put(nvidia_p2p_dma_map_pages);
	if (p2p.dma_unmap_pages)
		symbol_put(nvidia_p2p_dma_unmap_pages);
	p2p.get_pages = NULL;
	p2p.get_pages_persistent = NULL;
	p2p.put_pages = NULL;
	p2p.put_pages_persistent = NULL;
	p2p.dma_map_pages = NULL;
	p2p.dma_unmap_pages = NULL;
}

static int msim_p2p_get(void)
{
	int ret = 0;

	mutex_lock(&p2p.lock);
	if (!p2p.users) {
		p2p.get_pages = symbol_get(nvidia_p2p_get_pages);
		p2p.get_pages_persistent = symbol_get(nvidia_p2p_get_pages_persistent);
		p2p.put_pages = symbol_get(nvidia_p2p_put_pages);
		p2p.put_pages_persistent = symbol_get(nvidia_p2p_put_pages_persistent);
		p2p.dma_map_pages = symbol_get(nvidia_p2p_dma_map_pages);
		p2p.dma_unmap_pages = symbol_get(nvidia_p2p_dma_unmap_pages);
		if (!p2p.get_pages || !p2p.get_pages_persistent || !p2p.put_pages ||
		    !p2p.put_pages_persistent || !p2p.dma_map_pages || !p2p.dma_unmap_pages) {
			msim_p2p_drop();
			ret = -ENODEV;
		}
	}
	if (!ret)
		p2p.users++;
	mutex_unlock(&p2p.lock);
	return ret;
}

static void msim_p2p_put(void)
{
	mutex_lock(&p2p.lock);
	if (!--p2p.users)
		msim_p2p_drop();
	mutex_unlock(&p2p.lock);
}

/* ---- MRs ---------------------------------------------------------------- */

static void msim_mr_free(struct kref *ref)
{
	struct msim_mr *mr = container_of(ref, struct msim_mr, ref);

	kvfree(mr->sges);
	kfree(mr);
}

/* ---- Clients ----------------------------------------------------------- */

static void msim_client_get(struct msim_client *c)
{
	atomic_inc(&c->users);
}

static void msim_client_put(struct msim_client *c)
{
	if (atomic_dec_and_test(&c->users))
		complete(&c->unused);
}

/*
 * The registered client behind @handle; a bad handle is a violation. With
 * @unregistering, also a client whose unregistration waits for its umems:
 * they are live, and MOFED's invalidation uses the handle as it is.
 */
static struct msim_client *msim_client_from_handle(void *handle, const char *what,
						   bool unregistering)
{
	struct msim_client *c;
	bool known = false, usable = false;

	spin_lock(&msim.lock);
	list_for_each_entry(c, &msim.all_clients, all_node) {
		if (c == handle) {
			known = true;
			usable = c->registered || (unregistering && !c->gone);
			break;
		}
	}
	spin_unlock(&msim.lock);
	if (usable)
		return c;
	msim_violation(V_BAD_HANDLE, "%s with %s handle %p", what,
		       known ? "an unregistered" : "an unknown", handle);
	return NULL;
}

static const char *msim_missing_callback(const struct peer_memory_client *ops)
{
	if (!ops->acquire)
		return "acquire";
	if (!ops->get_pages)
		return "get_pages";
	if (!ops->put_pages)
		return "put_pages";
	if (!ops->dma_map)
		return "dma_map";
	if (!ops->dma_unmap)
		return "dma_unmap";
	if (msim_legacy() && !ops->get_page_size)
		return "get_page_size";	/* 4.x required it too */
	return NULL;
}

/* How the core of this mode reads the fields beyond the 136-byte struct. */
static void msim_client_detect(struct msim_client *c,
			       const struct peer_memory_client *ops)
{
	const struct peer_memory_client_ex *ex;

	if (mode == MODE_LEGACY) {
		c->get_context_private_data =
			container_of(ops, struct peer_memory_client_legacy, client)
				->get_context_private_data;
		return;
	}
	/* Byte 15 of the version marks an _ex struct; only modern reads it. */
	if (mode != MODE_MODERN || !ops->version[IB_PEER_MEMORY_VER_MAX - 1])
		return;
	ex = container_of(ops, struct peer_memory_client_ex, client);
	c->unmaps_on_invalidate =
		ex->ex_size >= offsetofend(struct peer_memory_client_ex, flags) &&
		(ex->flags & PEER_MEM_INVALIDATE_UNMAPS);
}

static int msim_invalidate(void *reg_handle, u64 core_context);

void *ib_register_peer_memory_client(const struct peer_memory_client *peer_client,
				     invalidate_peer_memory *invalidate_callback)
{
	const char *missing;
	struct msim_client *c, *other;
	size_t name_len;

	if (!peer_client)
		return NULL;
	name_len = strnlen(peer_client->name, IB_PEER_MEMORY_NAME_MAX);
	if (names == NAMES_CHECKED && (!name_len || name_len == IB_PEER_MEMORY_NAME_MAX)) {
		pr_err("peer memory client without a valid name refused\n");
		return NULL;
	}
	missing = msim_missing_callback(peer_client);
	if (missing) {
		pr_err("Peer memory %s is missing mandatory function %s\n",
		       peer_client->name, missing);
		return NULL;
	}
	c = kzalloc(sizeof(*c), GFP_KERNEL);
	if (!c)
		return NULL;
	c->ops = peer_client;
	strscpy(c->name, peer_client->name, sizeof(c->name));
	atomic_set(&c->users, 1);
	init_completion(&c->unused);
	xa_init_flags(&c->umems, XA_FLAGS_ALLOC);
	mutex_init(&c->lock);
	INIT_LIST_HEAD(&c->tickets);
	c->next_ticket = 1;
	msim_client_detect(c, peer_client);
	c->invalidation_required = invalidate_callback;

	mutex_lock(&msim.peer_mutex);
	list_for_each_entry(other, &msim.clients, node) {
		if (names == NAMES_CHECKED && !strcmp(other->name, c->name)) {
			mutex_unlock(&msim.peer_mutex);
			pr_err("peer memory client %s is already registered\n", c->name);
			kfree(c);
			return NULL;
		}
	}
	if (invalidate_callback)
		*invalidate_callback = msim_invalidate;
	list_add_tail(&c->node, &msim.clients);
	spin_lock(&msim.lock);
	list_add_tail(&c->all_node, &msim.all_clients);
	c->registered = true;
	spin_unlock(&msim.lock);
	atomic_inc(&msim.live_clients);
	mutex_unlock(&msim.peer_mutex);

	pr_info("registered peer memory client %s (version %.14s, %s, %s%s)\n",
		c->name, peer_client->version,
		c->invalidation_required ? "invalidation" : "no invalidation",
		c->unmaps_on_invalidate ? "unmaps on invalidate" : "core unmaps",
		c->get_context_private_data ? ", context private data" : "");
	if (READ_ONCE(register_return_ms)) {
		atomic_long_inc(&msim.registers_held);
		msleep(READ_ONCE(register_return_ms));
	}
	return c;
}
EXPORT_SYMBOL(ib_register_peer_memory_client);

void ib_unregister_peer_memory_client(void *reg_handle)
{
	struct msim_client *c = msim_client_from_handle(reg_handle, "unregister", false);
	int users;

	if (!c)
		return;
	mutex_lock(&msim.peer_mutex);
	list_del(&c->node);
	spin_lock(&msim.lock);
	c->registered = false;
	spin_unlock(&msim.lock);
	atomic_dec(&msim.live_clients);
	mutex_unlock(&msim.peer_mutex);

	users = atomic_read(&c->users) - 1;
	if (users)
		pr_info("unregistering %s: waiting for %d umem(s)\n", c->name, users);
	msim_client_put(c);
	wait_for_completion(&c->unused);
	spin_lock(&msim.lock);
	c->gone = true;
	spin_unlock(&msim.lock);
	pr_info("unregistered peer memory client %s\n", c->name);
}
EXPORT_SYMBOL(ib_unregister_peer_memory_client);

/* ---- free_at=: a cudaFree racing a registration -------------------------- */

/*
 * "reg ... free_at=STAGE" frees the MR's GPU buffer from another thread just
 * before the core calls STAGE on the client (put_pages: between dma_unmap
 * and put_pages, the first time the core makes them: deregistration, or a
 * failed registration's unwinding; activate: after dma_map and the core's
 * checks, before the HCA activates the notifier, mapping_lock held, so that
 * the callback's invalidation lands in that window; destroy_mkey: between
 * the two steps of a deregistration, after the client's dma_unmap and
 * put_pages and before the core forgets the core context and calls
 * release), and goes on once the
 * GPU's free callback
 * has started, as when an application's cudaFree races its ibv_reg_mr. The
 * buffer is the one starting at the MR's first 64 KiB page. The hook waits
 * for the callback to start, not to end: the callback may be waiting for
 * mapping_lock, which the caller holds. Before get_pages and dma_map (the
 * client maps after the free) it also waits for the free to return (at most
 * 5 s), then the GPU simulator's race_window_ms more: the client has seen
 * its callback, and a map of the revoked table is its use after free, not
 * the driver's race.
 */
enum msim_free_at {
	FREE_AT_NONE, FREE_AT_GET_PAGES, FREE_AT_DMA_MAP, FREE_AT_PUT_PAGES, FREE_AT_ACTIVATE,
	FREE_AT_DESTROY_MKEY,
};
static const char *const msim_free_at_names[] = {
	"none", "get_pages", "dma_map", "put_pages", "activate", "destroy_mkey",
};

static struct workqueue_struct *msim_free_wq;
/* frees of free_at= that returned: the buffer had no revocable pin left. */
static atomic_t msim_frees_done = ATOMIC_INIT(0);

struct msim_free_work {
	struct work_struct work;
	u64 va;
	int (*free)(u64 va);
};

static void msim_free_work_fn(struct work_struct *work)
{
	struct msim_free_work *w = container_of(work, struct msim_free_work, work);

	w->free(w->va);
	symbol_put(nvidia_sim_free);
	kfree(w);
	atomic_inc(&msim_frees_done);
}

/*
 * After a free_at= free that comes before the client maps: waits until the
 * free returned (its callbacks returned, their tables freed), at most 5 s,
 * then past the GPU simulator's race window.
 */
static void msim_wait_past_window(int done)
{
	unsigned int (*window)(void) = symbol_get(nvidia_sim_race_window_ms);
	unsigned long deadline = jiffies + 5 * HZ;

	while (atomic_read(&msim_frees_done) == done && time_before(jiffies, deadline))
		msleep(1);
	if (window) {
		if (atomic_read(&msim_frees_done) != done)
			msleep(window() + 10);
		symbol_put(nvidia_sim_race_window_ms);
	}
}

static void msim_free_hook(struct msim_mr *mr, int stage)
{
	long (*started)(void) = NULL;
	struct msim_free_work *w;
	unsigned long deadline;
	long before;
	int done;

	if (mr->free_at != stage)
		return;
	w = kzalloc(sizeof(*w), GFP_KERNEL);
	if (w) {
		w->free = symbol_get(nvidia_sim_free);
		started = symbol_get(nvidia_sim_callbacks_started);
	}
	if (!w || !w->free || !started) {
		pr_err("free_at: the GPU simulator (nvidia) is not loaded\n");
		if (w && w->free)
			symbol_put(nvidia_sim_free);
		if (started)
			symbol_put(nvidia_sim_callbacks_started);
		kfree(w);
		return;
	}
	w->va = ALIGN_DOWN(mr->va, MSIM_GPU_PAGE_SIZE);
	INIT_WORK(&w->work, msim_free_work_fn);
	before = started();
	done = atomic_read(&msim_frees_done);
	queue_work(msim_free_wq, &w->work);
	/* Until the callback started, or the free returned without one. */
	deadline = jiffies + 5 * HZ;
	while (started() == before && atomic_read(&msim_frees_done) == done &&
	       time_before(jiffies, deadline))
		msleep(1);
	/* Let the client's callback get as far as it goes without us. */
	msleep(20);
	symbol_put(nvidia_sim_callbacks_started);
	if (stage == FREE_AT_GET_PAGES || stage == FREE_AT_DMA_MAP)
		msim_wait_past_window(done);
}

/* ---- Bad-input hooks: a core that breaks the rules ---------------------- */

/*
 * "dereg ID again=dma_unmap|put_pages|both" deregisters the MR and then, right
 * after the core's dma_unmap and put_pages, calls the client's dma_unmap
 * and/or put_pages a second time (before release), as a buggy core would. The
 * repeated calls are not counted in unmap_calls/put_calls and their return
 * value is not a violation: the test checks what the client did with them.
 * With "counted" they are counted, so that release's self-check (call_count)
 * sees them: the test of that check.
 */
enum msim_again { AGAIN_NONE, AGAIN_UNMAP, AGAIN_PUT, AGAIN_BOTH };
static const char *const msim_again_names[] = { "none", "dma_unmap", "put_pages", "both" };

static void msim_again_hook(struct msim_mr *mr)
{
	const struct peer_memory_client *ops = mr->client->ops;
	int again = mr->again;

	if (!again)
		return;
	mr->again = AGAIN_NONE;
	if (again == AGAIN_UNMAP || again == AGAIN_BOTH) {
		mr->again_ret = ops->dma_unmap(&mr->sgt, mr->client_ctx, mr->dma_device);
		if (mr->again_counted)
			mr->unmap_calls++;
	}
	if (again == AGAIN_PUT || again == AGAIN_BOTH) {
		ops->put_pages(&mr->sgt, mr->client_ctx);
		if (mr->again_counted)
			mr->put_calls++;
	}
	pr_info("MR %u: %s called a second time (bad-input test), dma_unmap returned %d\n",
		mr->id, msim_again_names[again], mr->again_ret);
}

/* Whether "unchecked" is among the options: the range goes to the clients as is. */
static bool msim_unchecked(int argc, char **argv)
{
	int i;

	for (i = 3; i < argc; i++)
		if (!strcmp(argv[i], "unchecked"))
			return true;
	return false;
}

/* ---- MR lifecycle through a client --------------------------------------- */

/* The ownership search: the first client whose acquire says "mine". */
static bool msim_find_owner(struct msim_mr *mr)
{
	struct msim_client *c;
	void *ctx;

	mutex_lock(&msim.peer_mutex);
	list_for_each_entry(c, &msim.clients, node) {
		if (c->invalidation_required && !mr->inval)
			continue;
		/* 4.x: such clients only serve ucontexts with peer private data. */
		if (c->get_context_private_data)
			continue;
		ctx = NULL;
		if (c->ops->acquire(mr->va, mr->size, NULL, NULL, &ctx) > 0) {
			msim_client_get(c);
			mr->client = c;
			mr->client_ctx = ctx;
			break;
		}
	}
	mutex_unlock(&msim.peer_mutex);
	return mr->client;
}

static int msim_assign_core_context(struct msim_mr *mr)
{
	struct msim_client *c = mr->client;
	u32 id;
	int ret;

	if (!c->invalidation_required) {
		mr->core_context = msim_legacy() ? 0 : PEER_NO_INVALIDATION_ID;
		return 0;
	}
	if (msim_legacy()) {
		mutex_lock(&c->lock);
		mr->core_context = c->next_ticket++;
		list_add_tail(&mr->ticket_node, &c->tickets);
		mutex_unlock(&c->lock);
	} else {
		ret = xa_alloc_cyclic(&c->umems, &id, mr, XA_LIMIT(0, U32_MAX - 1),
				      &c->next_id, GFP_KERNEL);
		if (ret < 0)
			return ret;
		mr->core_context = id;
	}
	mr->has_core_context = true;
	mr->had_core_context = true;
	return 0;
}

/* Removes the core context (legacy: c->lock held by the caller). */
static void msim_forget_core_context(struct msim_mr *mr)
{
	struct msim_client *c = mr->client;

	if (!mr->has_core_context)
		return;
	mr->has_core_context = false;
	if (msim_legacy())
		list_del_init(&mr->ticket_node);
	else
		xa_erase(&c->umems, mr->core_context);
}

/* Restores the SGEs msim_trim trimmed (MOFED: before any dma_unmap). */
static void msim_untrim(struct msim_mr *mr)
{
	struct scatterlist *first = mr->sgt.sgl, *last;

	if (!mr->trimmed)
		return;
	last = mr->trimmed_last;
	sg_dma_len(last) = mr->orig_last_len;
	last->length = mr->orig_last_length;
	sg_dma_address(first) = mr->orig_first_addr;
	sg_dma_len(first) = mr->orig_first_len;
	first->length = mr->orig_first_length;
	mr->trimmed = false;
}

/*
 * 5.1+: the core's sg_table is zeroed whenever the umem leaves MAPPED
 * (ib_unmap_peer_client's memset): the client's entries are its own to free,
 * from its own copy of the table.
 */
static void msim_forget_sgt(struct msim_mr *mr)
{
	if (!msim_legacy())
		memset(&mr->sgt, 0, sizeof(mr->sgt));
}

/* Undoes dma_map and get_pages, original SG list restored first. */
static void msim_unmap_put(struct msim_mr *mr)
{
	const struct peer_memory_client *ops = mr->client->ops;
	int ret;

	msim_untrim(mr);
	msim_phase(mr, PH_CORE);
	ret = ops->dma_unmap(&mr->sgt, mr->client_ctx, mr->dma_device);
	msim_phase(mr, PH_DMA_UNMAP);
	if (ret)
		msim_violation(V_UNMAP_RETURN, "%s: dma_unmap returned %d (must be 0)",
			       mr->client->name, ret);
	mr->unmap_calls++;
	msim_free_hook(mr, FREE_AT_PUT_PAGES);
	ops->put_pages(&mr->sgt, mr->client_ctx);
	msim_phase(mr, PH_PUT_PAGES);
	mr->put_calls++;
	msim_again_hook(mr);
	msim_forget_sgt(mr);
}

/* The end of a client MR: release, and the client loses a user. */
static void msim_release(struct msim_mr *mr)
{
	struct msim_client *c = mr->client;

	msim_phase(mr, PH_CORE);
	if (c->ops->release)
		c->ops->release(mr->client_ctx);
	msim_phase(mr, PH_RELEASE);
	/* From here on an invalidation for it is the client's bug. */
	if (mr->had_core_context) {
		spin_lock(&msim.lock);
		c->released[c->nreleased++ % MSIM_RELEASED_RING] = mr->core_context;
		spin_unlock(&msim.lock);
	}
	if (mr->unmap_calls > 1 || mr->put_calls > 1)
		msim_violation(V_CALL_COUNT, "MR %u: dma_unmap called %u times, put_pages %u times",
			       mr->id, mr->unmap_calls, mr->put_calls);
	WRITE_ONCE(mr->state, MR_RELEASED);
	msim_client_put(c);
}

/* Calls dma_map; on failure the table must be left untouched or valid. */
static int msim_client_dma_map(struct msim_mr *mr, struct sim_reply *r)
{
	const struct peer_memory_client *ops = mr->client->ops;
	struct sg_table *sgt = &mr->sgt;
	int ret;

	ret = ops->dma_map(sgt, mr->client_ctx, mr->dma_device, 0, &mr->nmap);
	if (!ret)
		return 0;
	if (sgt->sgl && (!sgt->orig_nents || sgt->nents > sgt->orig_nents))
		msim_violation(V_MAP_FAILURE,
			       "%s: dma_map failed (%d) and left an invalid sg table (nents %u, orig_nents %u)",
			       mr->client->name, ret, sgt->nents, sgt->orig_nents);
	sim_reply(r, "error: dma_map failed: %d\n", ret);
	return ret;
}

/* The table a successful dma_map returned, and its entry count. */
static int msim_check_nmap(struct msim_mr *mr, struct sim_reply *r)
{
	const struct sg_table *sgt = &mr->sgt;
	int nmap = mr->nmap;

	if (sgt->sgl && nmap > 0 && nmap == sgt->nents && nmap <= sgt->orig_nents)
		return 0;
	msim_violation(V_NMAP, "%s: dma_map returned nmap %d for a table of %u/%u entries",
		       mr->client->name, nmap, sgt->nents, sgt->orig_nents);
	sim_reply(r, "error: dma_map returned nmap %d, nents %u\n", nmap, sgt->nents);
	return -EPROTO;
}

/* Asks the client's page size (once per MR) and checks it. */
static int msim_page_size(struct msim_mr *mr, struct sim_reply *r)
{
	const struct peer_memory_client *ops = mr->client->ops;
	unsigned long pgsz = ops->get_page_size ? ops->get_page_size(mr->client_ctx) : 0;

	if (!pgsz || !is_power_of_2(pgsz) || pgsz < PAGE_SIZE) {
		msim_violation(V_PAGE_SIZE, "%s: get_page_size returned %lu",
			       mr->client->name, pgsz);
		sim_reply(r, "error: bad page size %lu\n", pgsz);
		return -EPROTO;
	}
	mr->page_size = pgsz;
	return 0;
}

/*
 * Checks the client's SG list against the range and its page size. With
 * @walk false (timed loops with "nocheck") only the page size is asked and
 * checked, as MOFED does: the O(SGEs) checks below are the simulator's own.
 */
static int msim_check_sg(struct msim_mr *mr, bool walk, struct sim_reply *r)
{
	struct scatterlist *sg;
	u64 start, end, total = 0;
	unsigned long pgsz;
	int i, ret;

	if (!mr->page_size) {
		ret = msim_page_size(mr, r);
		if (ret)
			return ret;
	}
	pgsz = mr->page_size;
	start = ALIGN_DOWN(mr->va, pgsz);
	end = ALIGN(mr->va + mr->size, pgsz);
	mr->sg_va = start;
	if (!walk)
		return 0;
	for (i = 0, sg = mr->sgt.sgl; i < mr->nmap; i++, sg = sg_next(sg)) {
		if (!sg) {
			msim_violation(V_SG_COVERAGE, "%s: the SG list ends after %d of %d SGEs",
				       mr->client->name, i, mr->nmap);
			sim_reply(r, "error: the SG list ends after %d SGEs\n", i);
			return -EPROTO;
		}
		if (!sg_dma_len(sg) || !PAGE_ALIGNED(sg_dma_address(sg)) ||
		    !PAGE_ALIGNED(sg_dma_len(sg))) {
			msim_violation(V_SG_ALIGN,
				       "%s: SGE %d (%#llx + %#x) is not PAGE_SIZE aligned",
				       mr->client->name, i, (u64)sg_dma_address(sg),
				       sg_dma_len(sg));
			sim_reply(r, "error: SGE %d is not page aligned\n", i);
			return -EPROTO;
		}
		/* BAR memory: no struct page, the DMA address is the whole story. */
		if (sg_page(sg) || sg->offset) {
			msim_violation(V_SG_ALIGN, "%s: SGE %d has a page (%#lx) or an offset (%u)",
				       mr->client->name, i, (unsigned long)sg_page(sg), sg->offset);
			sim_reply(r, "error: SGE %d has a page or an offset\n", i);
			return -EPROTO;
		}
		total += sg_dma_len(sg);
	}
	if (total != end - start) {
		msim_violation(V_SG_COVERAGE,
			       "%s: the SG list covers %llu bytes, the %lu-aligned range %llu",
			       mr->client->name, total, pgsz, end - start);
		sim_reply(r, "error: the SG list covers %llu bytes, not %llu\n",
			  total, end - start);
		return -EPROTO;
	}
	/* gpu_sim's DMA address of a 64 KiB page is 64 KiB aligned. */
	if (!IS_ALIGNED(sg_dma_address(mr->sgt.sgl), pgsz)) {
		msim_violation(V_SG_COVERAGE,
			       "%s: the first SGE (%#llx) does not start at a %lu-aligned page",
			       mr->client->name, (u64)sg_dma_address(mr->sgt.sgl), pgsz);
		sim_reply(r, "error: the first SGE is not page-size aligned\n");
		return -EPROTO;
	}
	return 0;
}

/*
 * 5.5+: trims the first and last SGE from the client's pages to PAGE_SIZE,
 * as fix_peer_sgls does: DMA address and length and sg->length, the last
 * SGE found by walking orig_nents entries for index nents - 1. A client
 * whose sg->length differs from its DMA length gets it trimmed all the same
 * (it underflows where it is shorter); both come back before any dma_unmap.
 */
static int msim_trim(struct msim_mr *mr, struct sim_reply *r)
{
	struct scatterlist *first = mr->sgt.sgl, *last = first, *sg;
	u64 head = ALIGN_DOWN(mr->va, PAGE_SIZE) - mr->sg_va;
	u64 tail = ALIGN(mr->va + mr->size, mr->page_size) -
		   ALIGN(mr->va + mr->size, PAGE_SIZE);
	unsigned int i;

	if (mode != MODE_MODERN || mr->page_size == PAGE_SIZE)
		return 0;
	for_each_sg(mr->sgt.sgl, sg, mr->sgt.orig_nents, i)
		if (i == mr->sgt.nents - 1)
			last = sg;
	if (sg_dma_len(first) <= head + (first == last ? tail : 0) ||
	    sg_dma_len(last) <= tail) {
		msim_violation(V_SG_COVERAGE, "%s: SGEs too short to trim to PAGE_SIZE",
			       mr->client->name);
		sim_reply(r, "error: SGEs too short to trim\n");
		return -EPROTO;
	}
	mr->orig_first_addr = sg_dma_address(first);
	mr->orig_first_len = sg_dma_len(first);
	mr->orig_first_length = first->length;
	mr->orig_last_len = sg_dma_len(last);
	mr->orig_last_length = last->length;
	mr->trimmed_last = last;
	sg_dma_address(first) += head;
	sg_dma_len(first) -= head;
	first->length -= head;
	sg_dma_len(last) -= tail;
	last->length -= tail;
	mr->sg_va += head;
	mr->trimmed = true;
	return 0;
}

/* Keeps a copy of the SG list as the HCA would program it. */
static int msim_snapshot_sgt(struct msim_mr *mr)
{
	struct scatterlist *sg;
	int i;

	mr->sges = kvcalloc(mr->nmap, sizeof(*mr->sges), GFP_KERNEL);
	if (!mr->sges)
		return -ENOMEM;
	for_each_sg(mr->sgt.sgl, sg, mr->nmap, i) {
		mr->sges[i].addr = sg_dma_address(sg);
		mr->sges[i].len = sg_dma_len(sg);
	}
	mr->nsges = mr->nmap;
	return 0;
}

/*
 * The HCA's work on the mapping before it activates the notifier (mlx5:
 * best page size, mkey, UMR), mapping_lock held: an invalidation meanwhile
 * waits for the lock. Here a delay (activation_delay_ms) or a cudaFree
 * (free_at=activate).
 */
static void msim_build_mkey(struct msim_mr *mr)
{
	unsigned int ms = READ_ONCE(activation_delay_ms);

	msim_free_hook(mr, FREE_AT_ACTIVATE);
	if (ms)
		msleep(ms);
}

/* Arms the invalidation notifier; legacy: fails if one came in already. */
static int msim_activate(struct msim_mr *mr, struct sim_reply *r)
{
	struct msim_client *c = mr->client;
	int ret = 0;

	if (msim_legacy())
		mutex_lock(&c->lock);
	if (mr->latched) {
		sim_reply(r, "error: invalidated before activation\n");
		ret = -EAGAIN;
	} else {
		WRITE_ONCE(mr->state, MR_MAPPED);
		mr->active = true;
	}
	if (msim_legacy())
		mutex_unlock(&c->lock);
	return ret;
}

/*
 * The first step of a deregistration, ib_umem_stop_invalidation_notifier
 * (5.1+): under mapping_lock the notifier is disarmed and a MAPPED umem
 * becomes UNMAPPED; a client that does not unmap itself on invalidation gets
 * dma_unmap and put_pages under that lock (bug 2696789's ordering), one that
 * does gets them after it; an INVALIDATED umem's client tore its mapping
 * down itself. With @locked the caller holds mapping_lock since the
 * registration: the HCA gives up before activation (an mkey it cannot make).
 */
static void msim_stop(struct msim_mr *mr, bool locked)
{
	struct msim_client *c = mr->client;
	bool unmap;

	if (!locked)
		mutex_lock(&mr->mapping_lock);
	mr->active = false;
	unmap = mr->state == MR_MAPPED;
	if (unmap && !c->unmaps_on_invalidate)
		msim_unmap_put(mr);
	if (unmap)
		WRITE_ONCE(mr->state, MR_UNMAPPED);
	mutex_unlock(&mr->mapping_lock);
	if (unmap && c->unmaps_on_invalidate)
		msim_unmap_put(mr);
}

/*
 * The second step, ib_umem_release after the HCA destroyed the mkey: the
 * core context is forgotten (xa_erase), then release. Between the two steps
 * a forwarded invalidation still finds the umem (UNMAPPED: nothing to do).
 */
static void msim_release_umem(struct msim_mr *mr)
{
	struct msim_client *c = mr->client;

	msim_free_hook(mr, FREE_AT_DESTROY_MKEY);
	if (msim_legacy())
		mutex_lock(&c->lock);
	msim_forget_core_context(mr);
	if (msim_legacy())
		mutex_unlock(&c->lock);
	msim_release(mr);
}

/*
 * A registration through a client, as ib_peer_umem_get and mlx5 make it:
 * mapping_lock from before get_pages until activation; a failure before the
 * mapping exists unwinds put_pages (only after a failed dma_map) -> xa_erase
 * -> unlock mapping_lock -> release, as MOFED (OFED 25.10, peer_mem.c,
 * ib_peer_umem_get's error path);
 * one after it (the simulator's own checks, a legacy core's latched
 * invalidation) as the HCA's giving up: the deregistration's two steps.
 */
static int msim_reg_client(struct msim_mr *mr, struct sim_reply *r)
{
	const struct peer_memory_client *ops;
	int ret;

	msim_phase_start(mr);
	if (!msim_find_owner(mr)) {
		sim_reply(r, "error: no peer memory client claims %#llx + %llu\n",
			  mr->va, mr->size);
		return -EFAULT;
	}
	msim_phase(mr, PH_OWNER);
	ops = mr->client->ops;
	mutex_lock(&mr->mapping_lock);
	ret = msim_assign_core_context(mr);
	if (ret)
		goto out_unlock;
	msim_free_hook(mr, FREE_AT_GET_PAGES);
	msim_phase(mr, PH_CORE);
	ret = ops->get_pages(mr->va, mr->size, 1, !mr->writable,
			     msim_legacy() ? &mr->sgt : NULL, mr->client_ctx,
			     mr->core_context);
	msim_phase(mr, PH_GET_PAGES);
	if (ret) {
		sim_reply(r, "error: get_pages failed: %d\n", ret);
		goto out_forget;
	}
	if (msim_legacy()) {
		/* <= 5.0 asks before dma_map; a bad answer: put_pages only. */
		ret = msim_page_size(mr, r);
		if (ret) {
			ops->put_pages(&mr->sgt, mr->client_ctx);
			mr->put_calls++;
			goto out_forget;
		}
	}
	msim_free_hook(mr, FREE_AT_DMA_MAP);
	ret = msim_client_dma_map(mr, r);
	msim_phase(mr, PH_DMA_MAP);
	if (ret) {
		/* MOFED's unwinding: put_pages without dma_unmap. */
		ops->put_pages(&mr->sgt, mr->client_ctx);
		mr->put_calls++;
		goto out_forget;
	}
	/* 5.1+: get_page_size after dma_map, under mapping_lock, then trimming. */
	ret = msim_check_nmap(mr, r);
	if (!ret)
		ret = msim_check_sg(mr, !mr->nocheck, r);
	if (!ret)
		ret = msim_trim(mr, r);
	if (!ret && !mr->nocheck)
		ret = msim_snapshot_sgt(mr);
	/* MOFED: the umem is MAPPED now; the HCA makes its mkey, then activates. */
	if (!msim_legacy())
		WRITE_ONCE(mr->state, MR_MAPPED);
	if (!ret) {
		msim_build_mkey(mr);
		ret = msim_activate(mr, r);
	}
	msim_phase(mr, PH_CORE);
	if (!ret) {
		mutex_unlock(&mr->mapping_lock);
		atomic_long_inc(&mr->client->regs);
		return 0;
	}
	/* After dma_map: as an HCA that gives up before activation. */
	if (msim_legacy()) {
		msim_unmap_put(mr);
		mutex_unlock(&mr->mapping_lock);
	} else {
		msim_stop(mr, true);
	}
	msim_release_umem(mr);
	return ret;

out_forget:
	if (msim_legacy())
		mutex_lock(&mr->client->lock);
	msim_forget_core_context(mr);
	if (msim_legacy())
		mutex_unlock(&mr->client->lock);
out_unlock:
	mutex_unlock(&mr->mapping_lock);
	msim_release(mr);
	return ret;
}

static void msim_dereg_client_legacy(struct msim_mr *mr)
{
	struct msim_client *c = mr->client;
	bool mapped;

	mutex_lock(&c->lock);
	mapped = mr->state == MR_MAPPED;
	if (mapped) {
		mr->active = false;
		msim_forget_core_context(mr);
		WRITE_ONCE(mr->state, MR_UNMAPPED);
	}
	mutex_unlock(&c->lock);
	/* Otherwise an invalidation already did everything, release included. */
	if (mapped) {
		msim_unmap_put(mr);
		msim_free_hook(mr, FREE_AT_DESTROY_MKEY);
		msim_release(mr);
	}
}

/* Deregistration, 5.1+: two steps with the HCA's work between them. */
static void msim_dereg_client(struct msim_mr *mr)
{
	struct msim_client *c = mr->client;

	msim_phase_start(mr);
	atomic_long_inc(&c->deregs);
	if (msim_legacy()) {
		msim_dereg_client_legacy(mr);
		return;
	}
	msim_stop(mr, false);		/* UMR revoke, stop the notifier */
	msim_release_umem(mr);		/* destroy_mkey, then ib_umem_release */
	msim_phase(mr, PH_CORE);
}

/* ---- Invalidation (the function handed to clients) --------------------- */

static void msim_late_invalidation(struct msim_client *c, u64 core_context)
{
	msim_violation(V_AFTER_RELEASE,
		       "%s: invalidation of core_context %llu after its release",
		       c->name, core_context);
}

/* An invalidation for a core context nobody has: late, or just unknown. */
static void msim_unknown_context(struct msim_client *c, u64 core_context)
{
	bool released = false;
	unsigned int i;

	spin_lock(&msim.lock);
	for (i = 0; i < min(c->nreleased, MSIM_RELEASED_RING); i++)
		released |= c->released[i] == core_context;
	spin_unlock(&msim.lock);
	if (released)
		msim_late_invalidation(c, core_context);
	else
		atomic_long_inc(&msim.invalidations_unknown);
}

static void msim_invalidate_modern(struct msim_client *c, u64 core_context)
{
	struct msim_mr *mr = NULL;

	if (core_context < PEER_NO_INVALIDATION_ID) {
		xa_lock(&c->umems);
		mr = xa_load(&c->umems, core_context);
		if (mr)
			kref_get(&mr->ref);
		xa_unlock(&c->umems);
	}
	if (!mr) {
		msim_unknown_context(c, core_context);
		return;
	}
	/*
	 * Found before the core released the umem: a release that won the race
	 * for mapping_lock is MOFED's normal case, not the client's fault.
	 */
	mutex_lock(&mr->mapping_lock);
	atomic_inc(&mr->events);
	if (mr->state == MR_MAPPED) {
		/*
		 * Here mlx5 revokes the mkey (if activated): the HCA stops all
		 * DMA. The trimmed SGEs come back and the core's table is
		 * zeroed before this returns (ib_unmap_peer_client).
		 */
		if (c->unmaps_on_invalidate) {
			msim_untrim(mr);
			msim_forget_sgt(mr);
			WRITE_ONCE(mr->state, MR_INVALIDATED);
		} else {
			msim_unmap_put(mr);
			WRITE_ONCE(mr->state, MR_UNMAPPED);
		}
	}
	mutex_unlock(&mr->mapping_lock);
	kref_put(&mr->ref, msim_mr_free);
}

/* <= 5.0: the whole deregistration happens inside the invalidation. */
static void msim_invalidate_legacy(struct msim_client *c, u64 core_context)
{
	struct msim_mr *mr, *found = NULL;

	mutex_lock(&c->lock);
	list_for_each_entry(mr, &c->tickets, ticket_node) {
		if (mr->core_context == core_context) {
			found = mr;
			break;
		}
	}
	if (!found) {
		/*
		 * Deregistration drops the ticket before it calls the client, so
		 * a free callback may still forward it; tickets are never reused,
		 * and MOFED 4.x ignores it as unknown. After release it is late.
		 */
		mutex_unlock(&c->lock);
		msim_unknown_context(c, core_context);
		return;
	}
	atomic_inc(&found->events);
	if (!found->active) {
		found->latched = true;	/* activation will fail */
	} else {
		found->active = false;
		msim_forget_core_context(found);
		WRITE_ONCE(found->state, MR_UNMAPPED);
		msim_unmap_put(found);
		msim_release(found);
	}
	mutex_unlock(&c->lock);
}

static int msim_invalidate(void *reg_handle, u64 core_context)
{
	struct msim_client *c = msim_client_from_handle(reg_handle, "invalidate", true);

	if (!c)
		return 0;
	atomic_long_inc(&msim.invalidations);
	atomic_long_inc(&c->invalidations);
	if (core_context == (msim_legacy() ? 0 : PEER_NO_INVALIDATION_ID)) {
		msim_violation(V_NO_INVALIDATION,
			       "%s: invalidation of a umem registered without invalidation",
			       c->name);
		return 0;
	}
	if (msim_legacy())
		msim_invalidate_legacy(c, core_context);
	else
		msim_invalidate_modern(c, core_context);
	return 0;
}

/* ---- Direct mode: the bare provider, no client --------------------------- */

/*
 * Direct mode is a correct client of the driver's real rules (NVIDIA's open
 * kernel modules 595.45.04, nv-p2p.c and RM's rm_p2p_*; listed with their
 * sources in tests/sim/README.md, "API semantics"): its free callback takes
 * no lock that a thread inside a driver call may hold (so not mapping_lock,
 * held across dma_map_pages) and waits only for readers of the table (a
 * table check or a dma_unmap_pages, which need no API lock); after it,
 * nothing reads or unmaps the table.
 */

/* Becomes a reader of @mr's table unless the callback came; false then. */
static bool msim_direct_read_begin(struct msim_mr *mr)
{
	bool ok;

	spin_lock(&mr->direct_lock);
	ok = !mr->revoked;
	if (ok)
		mr->readers++;
	spin_unlock(&mr->direct_lock);
	return ok;
}

static void msim_direct_read_end(struct msim_mr *mr)
{
	spin_lock(&mr->direct_lock);
	mr->readers--;
	spin_unlock(&mr->direct_lock);
	wake_up_all(&msim.direct_wait);
}

/* Runs in the GPU's free callback: marks the MR, lets readers finish. */
static void msim_direct_free_callback(void *data)
{
	struct msim_mr *mr = data;

	spin_lock(&mr->direct_lock);
	mr->revoked = true;
	if (mr->state == MR_MAPPED)
		WRITE_ONCE(mr->state, MR_INVALIDATED);
	spin_unlock(&mr->direct_lock);
	atomic_inc(&mr->events);
	atomic_long_inc(&msim.invalidations);
	/* The driver frees the table once this returns. */
	wait_event(msim.direct_wait, !READ_ONCE(mr->readers));
}

static struct pci_dev *msim_direct_peer(struct msim_mr *mr)
{
	/* With "nonpci" deliberately wrong: the GPU simulator must catch it. */
	return to_pci_dev(mr->dma_device);
}

static void msim_direct_unpin(struct msim_mr *mr, bool mapped)
{
	int ret = 0;

	/* After the free callback the driver has unmapped; a put returns 0. */
	msim_phase(mr, PH_CORE);
	if (mapped && msim_direct_read_begin(mr)) {
		ret = p2p.dma_unmap_pages(msim_direct_peer(mr), mr->pt, mr->dm);
		msim_direct_read_end(mr);
	}
	msim_phase(mr, PH_DMA_UNMAP);
	if (ret)
		pr_err("direct MR %u: nvidia_p2p_dma_unmap_pages failed: %d\n", mr->id, ret);
	if (mr->persistent)
		ret = p2p.put_pages_persistent(mr->sg_va, mr->pt, 0);
	else
		ret = p2p.put_pages(0, 0, mr->sg_va, mr->pt);
	msim_phase(mr, PH_PUT_PAGES);
	if (ret)
		pr_err("direct MR %u: put_pages failed: %d\n", mr->id, ret);
}

/* What a careful client checks before trusting the page table. */
static int msim_direct_check_table(struct msim_mr *mr, u64 len, struct sim_reply *r)
{
	const struct nvidia_p2p_page_table *pt = mr->pt;
	u32 major = NVIDIA_P2P_MAJOR_VERSION(pt->version);

	if (major != 1 && major != 2) {
		sim_reply(r, "error: page table version %#x is not supported\n", pt->version);
		return -EPROTO;
	}
	if (pt->page_size != NVIDIA_P2P_PAGE_SIZE_64KB) {
		sim_reply(r, "error: page table page size type %u, not 64 KiB\n", pt->page_size);
		return -EPROTO;
	}
	if ((u64)pt->entries * MSIM_GPU_PAGE_SIZE != len) {
		sim_reply(r, "error: page table has %u entries for %llu bytes\n",
			  pt->entries, len);
		return -EPROTO;
	}
	mr->pt_version = pt->version;
	mr->pt_flags = major >= 2 ? pt->flags : 0;	/* a 1.2 table has none */
	return 0;
}

static int msim_direct_check_mapping(struct msim_mr *mr, struct sim_reply *r)
{
	const struct nvidia_p2p_dma_mapping *dm = mr->dm;

	if (!NVIDIA_P2P_VERSION_COMPATIBLE(dm, NVIDIA_P2P_DMA_MAPPING_VERSION)) {
		sim_reply(r, "error: dma mapping version %#x is not compatible\n", dm->version);
		return -EPROTO;
	}
	if (dm->entries != mr->pt->entries) {
		sim_reply(r, "error: dma mapping has %u entries, the page table %u\n",
			  dm->entries, mr->pt->entries);
		return -EPROTO;
	}
	return 0;
}

/*
 * One SGE per 64 KiB page, as the bare provider hands them out; with
 * "nocheck" (timed loops) only counted, as the client path then skips its
 * snapshot too.
 */
static int msim_direct_snapshot(struct msim_mr *mr)
{
	u32 i;

	if (mr->nocheck) {
		mr->nmap = mr->dm->entries;
		return 0;
	}
	mr->sges = kvcalloc(mr->dm->entries, sizeof(*mr->sges), GFP_KERNEL);
	if (!mr->sges)
		return -ENOMEM;
	for (i = 0; i < mr->dm->entries; i++) {
		mr->sges[i].addr = mr->dm->dma_addresses[i];
		mr->sges[i].len = MSIM_GPU_PAGE_SIZE;
	}
	mr->nsges = mr->dm->entries;
	mr->nmap = mr->dm->entries;
	return 0;
}

/* Checks the table, unless a free callback revoked it (-EFAULT). */
static int msim_direct_read_table(struct msim_mr *mr, u64 len, struct sim_reply *r)
{
	int ret;

	if (!msim_direct_read_begin(mr)) {
		sim_reply(r, "error: the GPU memory was freed meanwhile\n");
		return -EFAULT;
	}
	ret = msim_direct_check_table(mr, len, r);
	msim_direct_read_end(mr);
	return ret;
}

/*
 * Checks the mapping and takes its snapshot, then marks the MR mapped;
 * -EFAULT if a free callback revoked the table (from then on the callback
 * finds the MR mapped and invalidates it).
 */
static int msim_direct_read_mapping(struct msim_mr *mr, struct sim_reply *r)
{
	int ret;

	if (!msim_direct_read_begin(mr)) {
		sim_reply(r, "error: the GPU memory was freed meanwhile\n");
		return -EFAULT;
	}
	ret = msim_direct_check_mapping(mr, r);
	if (!ret)
		ret = msim_direct_snapshot(mr);
	if (!ret) {
		spin_lock(&mr->direct_lock);
		WRITE_ONCE(mr->state, MR_MAPPED);
		spin_unlock(&mr->direct_lock);
	}
	msim_direct_read_end(mr);
	return ret;
}

static int msim_reg_direct(struct msim_mr *mr, struct sim_reply *r)
{
	u64 start = ALIGN_DOWN(mr->va, MSIM_GPU_PAGE_SIZE);
	u64 len = ALIGN(mr->va + mr->size, MSIM_GPU_PAGE_SIZE) - start;
	bool mapped = false;
	int ret;

	msim_phase_start(mr);
	if (msim_p2p_get()) {
		sim_reply(r, "error: the GPU simulator (nvidia) is not loaded\n");
		return -ENODEV;
	}
	mr->sg_va = start;
	mr->page_size = MSIM_GPU_PAGE_SIZE;
	msim_phase(mr, PH_CORE);
	if (mr->persistent)
		ret = p2p.get_pages_persistent(start, len, &mr->pt, 0);
	else
		ret = p2p.get_pages(0, 0, start, len, &mr->pt,
				    msim_direct_free_callback, mr);
	msim_phase(mr, PH_GET_PAGES);
	if (ret) {
		sim_reply(r, "error: get_pages failed: %d\n", ret);
		goto out;
	}
	ret = msim_direct_read_table(mr, len, r);
	if (!ret) {
		msim_phase(mr, PH_CORE);
		ret = p2p.dma_map_pages(msim_direct_peer(mr), mr->pt, &mr->dm);
		msim_phase(mr, PH_DMA_MAP);
		if (ret)
			sim_reply(r, "error: dma_map_pages failed: %d\n", ret);
		mapped = !ret;
	}
	if (!ret)
		ret = msim_direct_read_mapping(mr, r);
	/* A mapping made from a revoked table is the driver's; never unmapped. */
	if (ret == -EFAULT)
		mapped = false;
	if (ret)
		msim_direct_unpin(mr, mapped);
	msim_phase(mr, PH_CORE);
out:
	if (ret)
		msim_p2p_put();
	return ret;
}

static void msim_dereg_direct(struct msim_mr *mr)
{
	msim_phase_start(mr);
	spin_lock(&mr->direct_lock);
	WRITE_ONCE(mr->state, MR_UNMAPPED);
	spin_unlock(&mr->direct_lock);
	msim_direct_unpin(mr, true);
	WRITE_ONCE(mr->state, MR_RELEASED);
	msim_p2p_put();
	msim_phase(mr, PH_CORE);
}

/* ---- Registration entry points ------------------------------------------ */

struct msim_reg_args {
	u64 va;
	u64 size;
	u64 count;		/* 0: one MR that stays; N: N reg/dereg cycles */
	bool direct;
	bool inval;
	bool read_only;
	bool nonpci;
	bool persistent;
	int free_at;		/* enum msim_free_at */
	bool nocheck;		/* only with count: see msim_check_sg */
	bool profile;		/* only with count: time per phase (msim_phase) */
};

static struct msim_mr *msim_mr_new(const struct msim_reg_args *a)
{
	struct msim_mr *mr = kzalloc(sizeof(*mr), GFP_KERNEL);

	if (!mr)
		return NULL;
	kref_init(&mr->ref);
	mutex_init(&mr->mapping_lock);
	spin_lock_init(&mr->direct_lock);
	INIT_LIST_HEAD(&mr->ticket_node);
	mr->va = a->va;
	mr->size = a->size;
	mr->direct = a->direct;
	mr->inval = a->inval;
	mr->writable = !a->read_only;
	mr->persistent = a->persistent;
	mr->free_at = a->free_at;
	mr->nocheck = a->nocheck;
	mr->dma_device = a->nonpci ? msim.nonpci_device : msim.pci_device;
	return mr;
}

static int msim_register(struct msim_mr *mr, struct sim_reply *r)
{
	int ret = mr->direct ? msim_reg_direct(mr, r) : msim_reg_client(mr, r);

	if (ret) {
		atomic_long_inc(&msim.reg_failures);
		return ret;
	}
	atomic_long_inc(&msim.registrations);
	atomic_inc(&msim.live_mrs);
	return 0;
}

static void msim_deregister(struct msim_mr *mr)
{
	if (mr->direct)
		msim_dereg_direct(mr);
	else
		msim_dereg_client(mr);
	atomic_long_inc(&msim.deregistrations);
	atomic_dec(&msim.live_mrs);
}

/* One MR that stays until "dereg"; replies with its id. */
static int msim_reg_one(const struct msim_reg_args *a, struct sim_reply *r)
{
	struct msim_mr *mr = msim_mr_new(a);
	int ret;

	if (!mr)
		return -ENOMEM;
	/* Reserve the id first: messages name it; "show" sees it only later. */
	ret = xa_alloc(&msim_mrs, &mr->id, NULL, xa_limit_32b, GFP_KERNEL);
	if (!ret) {
		ret = msim_register(mr, r);
		if (ret)
			xa_erase(&msim_mrs, mr->id);
		else
			xa_store(&msim_mrs, mr->id, mr, GFP_KERNEL);
	}
	if (ret) {
		kref_put(&mr->ref, msim_mr_free);
		return ret;
	}
	sim_reply(r, "%u\n", mr->id);
	return 0;
}

/* N register/deregister cycles, timed (for benchmarks). */
static int msim_reg_loop(const struct msim_reg_args *a, struct sim_reply *r)
{
	struct msim_prof *prof = a->profile ? kzalloc(sizeof(*prof), GFP_KERNEL) : NULL;
	u64 i, t0, elapsed;
	struct msim_mr *mr;
	int ret = 0, ph;

	if (a->profile && !prof)
		return -ENOMEM;
	/* Direct mode: resolve the provider once, not per cycle. */
	if (a->direct && msim_p2p_get()) {
		kfree(prof);
		sim_reply(r, "error: the GPU simulator (nvidia) is not loaded\n");
		return -ENODEV;
	}
	t0 = ktime_get_ns();
	for (i = 0; i < a->count && !ret; i++) {
		mr = msim_mr_new(a);
		if (!mr) {
			ret = -ENOMEM;
			break;
		}
		mr->prof = prof;
		ret = msim_register(mr, r);
		if (!ret)
			msim_deregister(mr);
		kref_put(&mr->ref, msim_mr_free);
		cond_resched();
	}
	elapsed = ktime_get_ns() - t0;
	if (ret)
		sim_reply(r, "error: cycle %llu failed: %d\n", i, ret);
	else
		sim_reply(r, "count %llu elapsed_ns %llu per_op_ns %llu\n", a->count,
			  elapsed, div64_u64(elapsed, a->count));
	for (ph = 0; prof && !ret && ph < PH_COUNT; ph++)
		sim_reply(r, "phase %s %llu\n", msim_phase_names[ph],
			  div64_u64(prof->ns[ph], a->count));
	kfree(prof);
	if (a->direct)
		msim_p2p_put();
	return ret;
}

/* ---- debugfs: ctl -------------------------------------------------------- */

/* VA SIZE [inval] [ro] [nonpci] [persistent] [count=N [nocheck] [profile]] */
static int msim_parse_reg(int argc, char **argv, bool direct,
			  struct msim_reg_args *a, struct sim_reply *r)
{
	int i;

	memset(a, 0, sizeof(*a));
	a->direct = direct;
	if (sim_parse_u64(argv[1], &a->va) || sim_parse_size(argv[2], &a->size) ||
	    ((!a->size || a->va + a->size < a->va) && (direct || !msim_unchecked(argc, argv)))) {
		sim_reply(r, "error: bad range '%s' '%s'\n", argv[1], argv[2]);
		return -EINVAL;
	}
	for (i = 3; i < argc; i++) {
		if (!direct && !strcmp(argv[i], "inval")) {
			a->inval = true;
		} else if (!direct && !strcmp(argv[i], "ro")) {
			a->read_only = true;
		} else if (direct && !strcmp(argv[i], "persistent")) {
			a->persistent = true;
		} else if (!strcmp(argv[i], "nonpci")) {
			a->nonpci = true;
		} else if (!direct && !strcmp(argv[i], "unchecked")) {
			continue;
		} else if (!direct && !strncmp(argv[i], "free_at=", 8) &&
			   (a->free_at = match_string(msim_free_at_names,
						     ARRAY_SIZE(msim_free_at_names),
						     argv[i] + 8)) > 0) {
			continue;
		} else if (!strcmp(argv[i], "nocheck")) {
			a->nocheck = true;
		} else if (!strcmp(argv[i], "profile")) {
			a->profile = true;
		} else if (!strncmp(argv[i], "count=", 6) &&
			   !sim_parse_u64(argv[i] + 6, &a->count) && a->count) {
			continue;
		} else {
			sim_reply(r, "error: unknown option '%s'\n", argv[i]);
			return -EINVAL;
		}
	}
	/* An MR that stays is always checked: "show" and expect-sg read it. */
	if ((a->nocheck || a->profile) && !a->count) {
		sim_reply(r, "error: nocheck and profile are only for timed loops (count=N)\n");
		return -EINVAL;
	}
	return 0;
}

static int msim_cmd_reg_common(int argc, char **argv, struct sim_reply *r, bool direct)
{
	struct msim_reg_args a;
	int ret = msim_parse_reg(argc, argv, direct, &a, r);

	if (ret)
		return ret;
	return a.count ? msim_reg_loop(&a, r) : msim_reg_one(&a, r);
}

static int msim_cmd_reg(int argc, char **argv, struct sim_reply *r)
{
	return msim_cmd_reg_common(argc, argv, r, false);
}

static int msim_cmd_direct(int argc, char **argv, struct sim_reply *r)
{
	return msim_cmd_reg_common(argc, argv, r, true);
}

static void msim_dereg_erased(struct msim_mr *mr)
{
	msim_deregister(mr);
	kref_put(&mr->ref, msim_mr_free);
}

/* dereg ID again=dma_unmap|put_pages|both [counted] (see msim_again_hook) */
static int msim_dereg_again(int argc, char **argv, struct sim_reply *r)
{
	const char *opt = argv[2];
	bool counted = argc == 4 && !strcmp(argv[3], "counted");
	struct msim_mr *mr;
	int again = -EINVAL;
	u64 v;

	if (!strncmp(opt, "again=", 6))
		again = match_string(msim_again_names, ARRAY_SIZE(msim_again_names), opt + 6);
	if (again <= 0 || (argc > 3 && !counted) || sim_parse_u64(argv[1], &v) ||
	    v > U32_MAX) {
		sim_reply(r, "error: usage: dereg ID again=dma_unmap|put_pages|both [counted]\n");
		return -EINVAL;
	}
	mr = xa_erase(&msim_mrs, v);
	if (!mr) {
		sim_reply(r, "error: no MR %llu\n", v);
		return -ENOENT;
	}
	if (mr->direct) {
		xa_store(&msim_mrs, mr->id, mr, GFP_KERNEL);
		sim_reply(r, "error: MR %llu has no client\n", v);
		return -EINVAL;
	}
	mr->again = again;
	mr->again_counted = counted;
	msim_deregister(mr);
	if (mr->again)
		sim_reply(r, "again not called (the MR was not mapped)\n");
	else if (again == AGAIN_PUT)
		sim_reply(r, "again put_pages\n");
	else
		sim_reply(r, "again dma_unmap %d\n", mr->again_ret);
	kref_put(&mr->ref, msim_mr_free);
	return 0;
}

static int msim_cmd_dereg(int argc, char **argv, struct sim_reply *r)
{
	struct msim_mr *mr;
	unsigned long id;
	u64 v;

	if (argc > 2)
		return msim_dereg_again(argc, argv, r);

	if (!strcmp(argv[1], "all")) {
		xa_for_each(&msim_mrs, id, mr) {
			if (xa_cmpxchg(&msim_mrs, id, mr, NULL, GFP_KERNEL) == mr)
				msim_dereg_erased(mr);
		}
		return 0;
	}
	if (sim_parse_u64(argv[1], &v) || v > U32_MAX)
		return -EINVAL;
	mr = xa_erase(&msim_mrs, v);
	if (!mr) {
		sim_reply(r, "error: no MR %llu\n", v);
		return -ENOENT;
	}
	msim_dereg_erased(mr);
	return 0;
}

/* Takes a reference on MR @s, or replies with an error. */
static struct msim_mr *msim_mr_get(const char *s, struct sim_reply *r)
{
	struct msim_mr *mr = NULL;
	u64 id;

	if (!sim_parse_u64(s, &id) && id <= U32_MAX) {
		xa_lock(&msim_mrs);
		mr = xa_load(&msim_mrs, id);
		if (mr)
			kref_get(&mr->ref);
		xa_unlock(&msim_mrs);
	}
	if (!mr)
		sim_reply(r, "error: no MR '%s'\n", s);
	return mr;
}

static int msim_cmd_show(int argc, char **argv, struct sim_reply *r)
{
	struct msim_mr *mr = msim_mr_get(argv[1], r);
	unsigned int i;

	if (!mr)
		return -ENOENT;
	sim_reply(r, "id %u\nva %#llx\nsize %llu\n", mr->id, mr->va, mr->size);
	sim_reply(r, "client %s\ndirect %d\npersistent %d\n",
		  mr->direct ? "-" : mr->client->name, mr->direct, mr->persistent);
	sim_reply(r, "mode %s\ndevice %s\nstate %s\n", msim_mode_names[mode],
		  dev_name(mr->dma_device),
		  msim_mr_state_names[READ_ONCE(mr->state)]);
	sim_reply(r, "inval %d\nwritable %d\ncore_context %llu\n", mr->inval,
		  mr->writable, mr->core_context);
	sim_reply(r, "page_size %lu\nos_page_size %lu\nsg_va %#llx\ntrimmed %d\n",
		  mr->page_size, PAGE_SIZE, mr->sg_va, mr->trimmed);
	sim_reply(r, "nmap %d\nevents %d\nunmap_calls %u\nput_calls %u\n", mr->nmap,
		  atomic_read(&mr->events), mr->unmap_calls, mr->put_calls);
	/*
	 * The core's own table: zeroed once unmapped (5.1+); sg->length of SGE
	 * 0, while the client's memory it points to is still the client's
	 * (after release, a legacy core's unzeroed table points at freed memory).
	 */
	if (mr->direct || !mr->sgt.sgl)
		sim_reply(r, "table %s\n", mr->direct ? "-" : "zeroed");
	else if (READ_ONCE(mr->state) == MR_RELEASED)
		sim_reply(r, "table %u/%u\n", mr->sgt.nents, mr->sgt.orig_nents);
	else
		sim_reply(r, "table %u/%u\nfirst_sg_length %u\n", mr->sgt.nents,
			  mr->sgt.orig_nents, mr->sgt.sgl->length);
	if (mr->direct)
		sim_reply(r, "pt_version %#x\npt_flags %#x\n", mr->pt_version, mr->pt_flags);
	for (i = 0; i < mr->nsges; i++)
		sim_reply(r, "sge %#llx %u\n", mr->sges[i].addr, mr->sges[i].len);
	kref_put(&mr->ref, msim_mr_free);
	return 0;
}

/* "reset": the counters; "reset violations": the violation counters only. */
static int msim_cmd_reset(int argc, char **argv, struct sim_reply *r)
{
	int all = sim_reset_violations(argc, argv, msim.violations, V_COUNT, r);

	if (all <= 0)
		return all;
	atomic_long_set(&msim.registrations, 0);
	atomic_long_set(&msim.reg_failures, 0);
	atomic_long_set(&msim.deregistrations, 0);
	atomic_long_set(&msim.invalidations, 0);
	atomic_long_set(&msim.invalidations_unknown, 0);
	return 0;
}

static const struct sim_cmd msim_cmds[] = {
	{ "reg", 2, msim_cmd_reg },
	{ "direct", 2, msim_cmd_direct },
	{ "dereg", 1, msim_cmd_dereg },
	{ "show", 1, msim_cmd_show },
	{ "reset", 0, msim_cmd_reset },
};

SIM_CTL_FOPS(msim_ctl, msim_cmds);

/* ---- debugfs: read-only views -------------------------------------------- */

static int msim_counters_show(struct seq_file *s, void *unused)
{
	long total = 0;
	int i;

	seq_printf(s, "registrations %ld\n", atomic_long_read(&msim.registrations));
	seq_printf(s, "reg_failures %ld\n", atomic_long_read(&msim.reg_failures));
	seq_printf(s, "deregistrations %ld\n", atomic_long_read(&msim.deregistrations));
	seq_printf(s, "invalidations %ld\n", atomic_long_read(&msim.invalidations));
	seq_printf(s, "invalidations_unknown %ld\n",
		   atomic_long_read(&msim.invalidations_unknown));
	seq_printf(s, "mrs.live %d\n", atomic_read(&msim.live_mrs));
	seq_printf(s, "clients.live %d\n", atomic_read(&msim.live_clients));
	seq_printf(s, "clients.register_held %ld\n",
		   atomic_long_read(&msim.registers_held));
	for (i = 0; i < V_COUNT; i++) {
		total += atomic_long_read(&msim.violations[i]);
		seq_printf(s, "violation.%s %ld\n", msim_violation_names[i],
			   atomic_long_read(&msim.violations[i]));
	}
	seq_printf(s, "violations %ld\n", total);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(msim_counters);

/* One line per registered client, in registration order. */
static int msim_clients_show(struct seq_file *s, void *unused)
{
	struct msim_client *c;

	mutex_lock(&msim.peer_mutex);
	list_for_each_entry(c, &msim.clients, node)
		seq_printf(s, "%s users=%d invalidation=%d unmaps_on_invalidate=%d context_private_data=%d regs=%ld deregs=%ld invalidations=%ld\n",
			   c->name, atomic_read(&c->users) - 1, c->invalidation_required,
			   c->unmaps_on_invalidate, !!c->get_context_private_data,
			   atomic_long_read(&c->regs), atomic_long_read(&c->deregs),
			   atomic_long_read(&c->invalidations));
	mutex_unlock(&msim.peer_mutex);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(msim_clients);

/* One line per MR: ID VA SIZE STATE CLIENT EVENTS */
static int msim_mrs_show(struct seq_file *s, void *unused)
{
	struct msim_mr *mr;
	unsigned long id;

	xa_lock(&msim_mrs);
	xa_for_each(&msim_mrs, id, mr)
		seq_printf(s, "%u %#llx %llu %s %s %d\n", mr->id, mr->va, mr->size,
			   msim_mr_state_names[READ_ONCE(mr->state)],
			   mr->direct ? "-" : mr->client->name, atomic_read(&mr->events));
	xa_unlock(&msim_mrs);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(msim_mrs);

/* ---- Module -------------------------------------------------------------- */

static struct device *msim_find_pci_device(void)
{
	unsigned int domain, bus, slot, fn;
	struct pci_dev *pdev;

	if (!pci_dev)
		pdev = pci_get_device(PCI_ANY_ID, PCI_ANY_ID, NULL);
	else if (sscanf(pci_dev, "%x:%x:%x.%x", &domain, &bus, &slot, &fn) == 4)
		pdev = pci_get_domain_bus_and_slot(domain, bus, PCI_DEVFN(slot, fn));
	else
		pdev = NULL;
	return pdev ? &pdev->dev : NULL;
}

/*
 * As mlx5_core at probe: the HCA takes DMA segments of up to max_seg_size
 * (a PCI function's default is 64 KiB, which would keep clients from
 * coalescing). The old value comes back at unload.
 */
static void msim_set_max_seg_size(void)
{
	struct device *dev = msim.pci_device;

	if (!max_seg_size)
		return;
	if (!dev->dma_parms) {
		pr_err("%s has no DMA parameters: max_seg_size %u not applied\n",
		       dev_name(dev), max_seg_size);
		return;
	}
	msim.old_seg_size = dev->dma_parms->max_segment_size;
	dma_set_max_seg_size(dev, max_seg_size);
	msim.seg_size_set = true;
}

static void msim_restore_max_seg_size(void)
{
	if (msim.seg_size_set)
		msim.pci_device->dma_parms->max_segment_size = msim.old_seg_size;
	msim.seg_size_set = false;
}

static int __init msim_init(void)
{
	struct dentry *d;

	init_waitqueue_head(&msim.direct_wait);
	mutex_init(&msim.peer_mutex);
	INIT_LIST_HEAD(&msim.clients);
	spin_lock_init(&msim.lock);
	INIT_LIST_HEAD(&msim.all_clients);
	mutex_init(&p2p.lock);
	msim.pci_device = msim_find_pci_device();
	if (!msim.pci_device) {
		pr_err("no PCI device%s%s to act as the HCA\n", pci_dev ? " " : "",
		       pci_dev ?: "");
		return -ENODEV;
	}
	msim_set_max_seg_size();
	msim.nonpci_device = root_device_register("mofed_sim_nonpci");
	if (IS_ERR(msim.nonpci_device)) {
		msim_restore_max_seg_size();
		pci_dev_put(to_pci_dev(msim.pci_device));
		return PTR_ERR(msim.nonpci_device);
	}
	msim_free_wq = alloc_workqueue("mofed_sim_free", WQ_UNBOUND, 0);
	if (!msim_free_wq) {
		root_device_unregister(msim.nonpci_device);
		pci_dev_put(to_pci_dev(msim.pci_device));
		return -ENOMEM;
	}
	d = debugfs_create_dir("mofed_peer_sim", NULL);
	msim.debugfs = d;
	debugfs_create_file("ctl", 0600, d, NULL, &msim_ctl_fops);
	debugfs_create_file("counters", 0444, d, NULL, &msim_counters_fops);
	debugfs_create_file("clients", 0444, d, NULL, &msim_clients_fops);
	debugfs_create_file("mrs", 0444, d, NULL, &msim_mrs_fops);
	pr_info("simulated MOFED peer-memory core ready: mode %s, dma_device %s, max_seg_size %u\n",
		msim_mode_names[mode], dev_name(msim.pci_device),
		dma_get_max_seg_size(msim.pci_device));
	return 0;
}

static void __exit msim_exit(void)
{
	struct msim_client *c, *tmp;
	struct msim_mr *mr;
	unsigned long id;

	debugfs_remove_recursive(msim.debugfs);
	destroy_workqueue(msim_free_wq);
	/*
	 * Client MRs cannot outlive their client's unregistration (it waits for
	 * them), and a client still registered now is gone without unregistering:
	 * its callbacks cannot be called. Only direct MRs are left to undo.
	 */
	xa_for_each(&msim_mrs, id, mr) {
		xa_erase(&msim_mrs, id);
		if (mr->direct)
			msim_dereg_erased(mr);
		else
			pr_err("MR %u of client %s still registered at unload: leaked\n",
			       mr->id, mr->client->name);
	}
	xa_destroy(&msim_mrs);
	list_for_each_entry_safe(c, tmp, &msim.all_clients, all_node) {
		if (c->registered)
			pr_err("client %s still registered at unload\n", c->name);
		list_del(&c->all_node);
		xa_destroy(&c->umems);
		kfree(c);
	}
	root_device_unregister(msim.nonpci_device);
	msim_restore_max_seg_size();
	pci_dev_put(to_pci_dev(msim.pci_device));
	pr_info("simulated MOFED peer-memory core removed\n");
}

module_init(msim_init);
module_exit(msim_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Simulated MOFED peer-memory core (ib_register_peer_memory_client) for nvidia-peermem tests");
