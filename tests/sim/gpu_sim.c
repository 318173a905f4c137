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
 * WARNed): calls that need the API lock from inside a free callback, double
 * put, unknown tables, any use of a table after the driver freed it, a
 * non-PCI peer, mapping a 4 KiB table, a wait that can never end, pins still
 * held at unload. Where the driver tolerates a client bug (a put with another
 * address, an unmap of a mapping the table does not have, a persistent put of
 * NULL), the simulator returns what the driver returns and counts the bug as
 * a check of this project's own (own.NAME), apart from the violations of the
 * driver's contract. Knobs (module parameters, 0644) select the page-table
 * ABI, persistent-API support, bad data and a per-call cost; failures are
 * injected through ctl. tests/sim/README.md has the details.
 *
 * Locking, as NVIDIA's driver (595.45.04: kernel-open/nvidia/nv-p2p.c,
 * src/nvidia/arch/nvalloc/unix/src/osapi.c rm_p2p_*,
 * src/nvidia/src/kernel/gpu/bus/third_party_p2p.c; tests/sim/README.md
 * cites each rule), outermost first:
 *   the API lock      RM's one driver-wide API lock (gsim_api_lock): taken
 *                     exclusively by get_pages, get_pages_persistent, the
 *                     middle of dma_map_pages (which reads the table before it
 *                     and inserts the mapping after it), put_pages and
 *                     put_pages_persistent; held by the free path (cudaFree)
 *                     across every free callback and the freeing of each
 *                     table that follows. A call that needs it from the task
 *                     running a callback fails on the real driver:
 *                     rmapiLockAcquire (rmapi.c) refuses its owner, -EIO (a
 *                     violation here). A wait for it that cannot end (a
 *                     callback that has not returned for deadlock_ms while a
 *                     caller has waited as long) is a violation and fails
 *                     the waiting call with -EDEADLK, so the guest goes on.
 *   pin->table_lock   the table's own semaphore (mem_info->dma_mapping_list
 *                     .lock): its mapping list. dma_unmap_pages takes only
 *                     this, so it may run inside a callback; the free path
 *                     takes it after the callback to free the mappings.
 *   gsim.lock         the simulator's own bookkeeping (not a driver lock),
 *                     innermost, never held across a callback or a wait.
 * After a callback returns, its table, page objects and mappings are freed.
 * With free_revoked (the default on a KASAN kernel) they are freed for real,
 * as the driver frees them, so KASAN reports a client that still reads them;
 * otherwise their memory stays poisoned in quarantine for a while, so such a
 * client sees poison instead of crashing the guest. Either way a later call
 * with the table finds its tombstone (kept by the table's address). Counters
 * are atomics, read without locks.
 */
#define pr_fmt(fmt) "gpu_sim: " fmt

/*
 * NVPM_SIM_KERNEL_INCLUDES: the kernel headers a driver's nv-p2p.c includes
 * itself, first and in its order (tests/neighbours). genksyms expands a
 * struct only where the unit defines it, so the CRCs of the exports that
 * reach struct pci_dev equal the driver's only with the driver's includes.
 */
#ifdef NVPM_SIM_KERNEL_INCLUDES
#include NVPM_SIM_KERNEL_INCLUDES
#endif

#include <linux/bitmap.h>
#include <linux/delay.h>
#include <linux/hashtable.h>
#include <linux/kref.h>
#include <linux/lockdep.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/sizes.h>
#include <linux/poison.h>
#include <linux/prandom.h>
#include <linux/sched.h>
#include <linux/seq_file.h>
#include <linux/wait.h>
#include <linux/workqueue.h>

/*
 * NVPM_SIM_NV_P2P_H: an installed driver's own nv-p2p.h (tests/neighbours),
 * so that genksyms gives the exports the driver's CRCs; then the exported
 * definitions below must name the header's types (uint64_t, not u64).
 */
#ifdef NVPM_SIM_NV_P2P_H
#include NVPM_SIM_NV_P2P_H
#else
#include "nv-p2p.h"
#endif
#include "sim_common.h"

/*
 * Before 570.86 the persistent API takes no flag: any is -EINVAL (550's
 * nv-p2p.c nvidia_p2p_get_pages_persistent, "if (flags != 0)").
 */
#ifndef NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING
#define NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING 0
#endif

/*
 * As the driver exports nvidia_p2p_*: NV_EXPORT_SYMBOL, GPL-only in the
 * open modules (550 on) and plain in the proprietary ones (Debian's
 * nvidia-kernel-dkms). NVPM_SIM_EXPORT picks; the open driver by default.
 */
#ifndef NVPM_SIM_EXPORT
#define NVPM_SIM_EXPORT EXPORT_SYMBOL_GPL
#endif

/*
 * The 2.0 table's flags word. A 1.2 header (drivers before 580) has none:
 * then every table is 1.2 (page_table_version is refused otherwise).
 */
#ifdef NVIDIA_P2P_PAGE_TABLE_FLAGS_CPU_CACHEABLE
#define GSIM_PT_HAS_FLAGS 1
#define GSIM_PT_FLAG_CPU_CACHEABLE NVIDIA_P2P_PAGE_TABLE_FLAGS_CPU_CACHEABLE
#else
#define GSIM_PT_HAS_FLAGS 0
#define GSIM_PT_FLAG_CPU_CACHEABLE 0
#endif

/* Linux 5.10 lacks it (lockdep.h has the other lock_map_* forms). */
#ifndef lock_map_acquire_try
#define lock_map_acquire_try(l) lock_acquire_exclusive(l, 0, 1, NULL, _THIS_IP_)
#endif

#define GSIM_PAGE_SHIFT 16
#define GSIM_PAGE_SIZE BIT_ULL(GSIM_PAGE_SHIFT)
/* Where the fake GPU VA space and the fake BAR1 aperture start. */
#define GSIM_VA_BASE 0x7f4000000000ULL
#define GSIM_BAR_BASE 0x3800000000ULL
/* Device n's DMA (IOVA) addresses are the bus addresses + (n + 1) * stride. */
#define GSIM_IOVA_STRIDE BIT_ULL(44)
/* Freed page tables remembered to tell a late put from a double put. */
#define GSIM_MAX_TOMBSTONES 1024
/*
 * race_window_ms's default: a map of a table revoked less than this long
 * ago is the driver's race, later the client's use after free.
 */
#define GSIM_RACE_WINDOW_MS 250
/* Revoked tables whose freed memory is kept, poisoned, for stale readers. */
#define GSIM_MAX_QUARANTINED 64
/* A 1.2 table is 32 bytes: what follows is not the client's to read. */
#define GSIM_V1_TRAILER 0xa5a5a5a5

/*
 * coherent=1: the fake coherentCpuFbBase, where the CPU (and a NIC over
 * C2C) sees the GPU's memory (p2p.c RmThirdPartyP2PNVLinkGetPages: page
 * addresses are coherentCpuFbBase + the page's physical address).
 */
#define GSIM_C2C_BASE 0x400000000000ULL

#define GSIM_PT_VERSION_1_2 0x00010002
#define GSIM_PT_VERSION_2_0 0x00020000

/* ---- Knobs ------------------------------------------------------------ */

static unsigned int vram_mb = 4096;
module_param(vram_mb, uint, 0444);
MODULE_PARM_DESC(vram_mb, "Size of the fake GPU memory in MiB (default 4096)");

enum gsim_pt_abi { PT_ABI_1_2, PT_ABI_2_0 };
static const char *const gsim_pt_abi_names[] = { "1.2", "2.0" };
static int page_table_version = GSIM_PT_HAS_FLAGS ? PT_ABI_2_0 : PT_ABI_1_2;
static struct sim_enum_param page_table_version_param = {
	gsim_pt_abi_names, ARRAY_SIZE(gsim_pt_abi_names), &page_table_version
};
module_param_cb(page_table_version, &sim_enum_param_ops, &page_table_version_param, 0644);
MODULE_PARM_DESC(page_table_version, "Page table ABI: 1.2 (driver <= 575, 32 bytes) or 2.0 (580+, flags)");

static bool cpu_cacheable;
module_param(cpu_cacheable, bool, 0644);
MODULE_PARM_DESC(cpu_cacheable, "Set NVIDIA_P2P_PAGE_TABLE_FLAGS_CPU_CACHEABLE in 2.0 tables");

/*
 * coherent: the GPU is on a cache-coherent link to the CPU (C2C, NVLink:
 * GH200, GB200), NVIDIA's pNv->coherent. Load only: a property of the GPU.
 * Pins are C2C addresses, CPU-cacheable; localized memory is refused
 * (-ENOTSUPP); dma_map_pages maps OS pages and hands back one address per
 * 64 KiB page, and skips the PCIe topology check; FORCE_BAR1 pins are BAR1
 * addresses that cannot be dma-mapped. tests/sim/README.md cites the source.
 */
static bool coherent;
module_param(coherent, bool, 0444);
MODULE_PARM_DESC(coherent, "A coherent (C2C) GPU, as GH200/GB200: C2C addresses, CPU-cacheable, per-OS-page DMA mapping (load only)");

/*
 * cdmm: Coherent Driver-based Memory Management, the driver's
 * CoherentGPUMemoryMode=driver (kernel-open/nvidia/nv-reg.h, first in
 * 580.65.06; os-registry.c: it sets EnableUserNUMAManagement=0): the
 * coherent GPU's memory is not onlined as a NUMA node and has no struct
 * page (src/nvidia/arch/nvalloc/unix/src/osinit.c: mem_has_struct_page is
 * false when the mode is _DRIVER). Only on a coherent GPU (the mode is
 * _NONE elsewhere: subdevice_ctrl_gpu_kernel.c), so cdmm=1 needs
 * coherent=1. Load only. Pins are the coherent GPU's (p2p.c
 * RmThirdPartyP2PNVLinkGetPages does not look at the mode); the map path
 * depends on the driver's release, cdmm_map_path below.
 */
static bool cdmm;
module_param(cdmm, bool, 0444);
MODULE_PARM_DESC(cdmm, "coherent: CoherentGPUMemoryMode=driver (CDMM), GPU memory without struct page (load only; needs coherent=1)");

/*
 * cdmm_map_path: which branch of osapi.c rm_p2p_dma_map_pages a CDMM GPU
 * takes, by driver release (load only: a property of the driver):
 * - struct_page (580.65.06-580.126.20, 590.x): the branch is
 *   `if (pNv->mem_has_struct_page)`, false in CDMM, so the map takes the
 *   PCIe topology rule and then maps each 64 KiB page as MMIO
 *   (nv-dma.c nv_dma_map_non_pci_peer → nv_dma_map_mmio);
 * - coherent_flag (580.142, 595.44.02+, the default): the branch is
 *   `if (pNv->coherent)`, RmP2PDmaMapPages, which in CDMM first takes a
 *   reference on nvidia-uvm's device-coherent pagemap (uvm_pagemap).
 */
enum gsim_cdmm_path { CDMM_COHERENT_FLAG, CDMM_STRUCT_PAGE };
static const char *const gsim_cdmm_path_names[] = { "coherent_flag", "struct_page" };
static int cdmm_map_path = CDMM_COHERENT_FLAG;
static struct sim_enum_param cdmm_map_path_param = {
	gsim_cdmm_path_names, ARRAY_SIZE(gsim_cdmm_path_names), &cdmm_map_path
};
module_param_cb(cdmm_map_path, &sim_enum_param_ops, &cdmm_map_path_param, 0444);
MODULE_PARM_DESC(cdmm_map_path, "cdmm: the driver's map branch: coherent_flag (580.142, 595.44.02+) or struct_page (580.65.06-580.126.20, 590.x) (load only)");

/*
 * uvm_pagemap (cdmm, coherent_flag): nvidia-uvm has put the GPU's memory in
 * a MEMORY_DEVICE_COHERENT ZONE_DEVICE pagemap (uvm_pmm_gpu.c
 * uvm_pmm_cdmm_init, built only where UVM_CDMM_PAGES_SUPPORTED():
 * CONFIG_ZONE_DEVICE and MEMORY_DEVICE_COHERENT), so nv-dma.c
 * nv_dma_get_dev_pagemap (get_dev_pagemap) finds it. 0: nvidia-uvm has not
 * (not loaded, the GPU not registered with it, or a kernel without that
 * support): the map fails with -ENOTSUPP.
 */
static bool uvm_pagemap = true;
module_param(uvm_pagemap, bool, 0644);
MODULE_PARM_DESC(uvm_pagemap, "cdmm, coherent_flag: nvidia-uvm's device-coherent pagemap of the GPU's memory exists (0: maps fail, -ENOTSUPP)");

/*
 * The PCIe topology rule of rm_p2p_dma_map_pages (non-coherent GPUs),
 * nv-pci.c nv_grdma_pci_topology_supported: the override first (1 allow,
 * 2 deny), then a passthrough VM is allowed, then on a chipset incapable of
 * PCIe P2P (osinit.c _checkP2pChipsetSupport: TH500, Ampere Altra,
 * AmpereOne) only a peer that shares a PCI bridge with the GPU
 * (nv_pci_has_common_pci_switch). The GPU has no PCI device here, so the
 * chipset, the shared bridge and passthrough are knobs.
 */
static bool p2p_unsupported_chipset;
module_param(p2p_unsupported_chipset, bool, 0644);
MODULE_PARM_DESC(p2p_unsupported_chipset, "NV_FLAG_PCI_P2P_UNSUPPORTED_CHIPSET: a Grace (TH500), Ampere Altra or AmpereOne root complex");

static bool common_switch;
module_param(common_switch, bool, 0644);
MODULE_PARM_DESC(common_switch, "The peer shares a PCI bridge (switch) with the GPU (nv_pci_has_common_pci_switch)");

static bool passthrough;
module_param(passthrough, bool, 0644);
MODULE_PARM_DESC(passthrough, "NV_FLAG_PASSTHRU: the GPU is passed through to a VM");

/* The driver's registry key of that name (nv-reg.h): 0 check, 1 allow, 2 deny. */
static uint NVreg_GrdmaPciTopoCheckOverride;
module_param(NVreg_GrdmaPciTopoCheckOverride, uint, 0644);
MODULE_PARM_DESC(NVreg_GrdmaPciTopoCheckOverride, "0: the driver's PCIe topology check; 1: allow; 2: deny");

/*
 * Test knob iova_split (coherent): the simulated IOMMU gives the last OS
 * page of each 64 KiB GPU page an IOVA apart from the others, as a map
 * broken into submaps may (osapi.c RmP2PDmaMapPages): the driver's
 * contiguity check then fails the map (NV_ERR_INVALID_STATE, -EIO).
 */
static bool iova_split;
module_param(iova_split, bool, 0644);
MODULE_PARM_DESC(iova_split, "coherent: the OS pages of a GPU page get non-contiguous IOVAs (the driver's map then fails, -EIO)");

/*
 * The driver maps a DMA mapping of OS pages in submaps of at most
 * NV_DMA_SUBMAP_MAX_PAGES pages (nv-linux.h), each with its own dma_map_sg
 * (nv-dma.c nv_create_dma_map_scatterlist, nv_map_dma_map_scatterlist):
 * U32_MAX >> PAGE_SHIFT pages (4 GiB less one page), or on 4 KiB arm64
 * kernels 4 GiB - 2 MiB, so that a submap ends on a 2 MiB boundary. With
 * 16 KiB pages (262143) or on x86 (1048575) the first boundary cuts a
 * 64 KiB GPU page, which then needs the IOVAs of two dma_map_sg calls to
 * be contiguous (osapi.c RmP2PDmaMapPages's check).
 */
#ifdef CONFIG_ARM64_4K_PAGES
#define GSIM_SUBMAP_PAGES ((u32)((U32_MAX >> PAGE_SHIFT) + 1 - 512))
#else
#define GSIM_SUBMAP_PAGES ((u32)(U32_MAX >> PAGE_SHIFT))
#endif

/*
 * submaps_apart (coherent): the IOMMU gives each dma_map_sg call its own
 * IOVA range, as iommu-dma does in a translated domain (the default on
 * arm64 with an SMMU); 0: IOVA = physical address (iommu.passthrough=1, or
 * no IOMMU). Where a later range lands is the IOMMU's choice: the simulator
 * moves only the OS pages of a GPU page that a boundary cuts, all the
 * driver's contiguity check looks at, and keeps whole GPU pages at their
 * usual addresses.
 */
static bool submaps_apart = true;
module_param(submaps_apart, bool, 0644);
MODULE_PARM_DESC(submaps_apart, "coherent: each of the driver's DMA submaps gets its own IOVA range (translated IOMMU); 0: passthrough");

static bool persistent_api = true;
module_param(persistent_api, bool, 0644);
MODULE_PARM_DESC(persistent_api, "Persistent API supported (0: -ENOTSUPP, as on MIG and vGPU)");

/*
 * free_revoked: a table the driver frees (its callback returned, or its
 * put) is freed for real, with its page objects and mappings, as
 * nv_p2p_free_page_table (nv-p2p.c) does. On by default on a KASAN kernel,
 * where a client's later read of it is a use-after-free report naming the
 * reader; off elsewhere: the quarantine keeps it poisoned instead.
 */
static bool free_revoked = IS_ENABLED(CONFIG_KASAN);
module_param(free_revoked, bool, 0444);
MODULE_PARM_DESC(free_revoked, "Free the tables the driver frees for real (default: on where the kernel has KASAN), instead of keeping them poisoned in quarantine");

enum gsim_bad_data {
	BAD_NONE, BAD_PT_VERSION, BAD_PAGE_SIZE, BAD_DMA_VERSION, BAD_ENTRIES,
	BAD_DMA_ENTRIES,
};

static const char *const gsim_bad_data_names[] = {
	"none", "pt_version", "page_size", "dma_version", "entries", "dma_entries",
};

static int bad_data = BAD_NONE;
static struct sim_enum_param bad_data_param = {
	gsim_bad_data_names, ARRAY_SIZE(gsim_bad_data_names), &bad_data
};
module_param_cb(bad_data, &sim_enum_param_ops, &bad_data_param, 0644);
MODULE_PARM_DESC(bad_data, "Hand out bad data: none, pt_version, page_size (4 KiB), dma_version, entries, dma_entries (one per 4 KiB)");

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
	FN_COUNT,
	FN_FREE = FN_COUNT,	/* cudaFree, for gsim_api_lock only */
};

static const char *const gsim_fn_names[FN_COUNT] = {
	"get_pages", "get_pages_persistent", "put_pages", "put_pages_persistent",
	"free_page_table", "dma_map_pages", "dma_unmap_pages", "free_dma_mapping",
};

enum gsim_violation {
	V_IN_CALLBACK, V_DOUBLE_PUT, V_UNKNOWN_TABLE,
	V_USE_AFTER_FREE, V_BAD_PEER, V_BAD_PAGE_SIZE, V_WRONG_PUT, V_HELD_AT_UNLOAD,
	V_DEADLOCK, V_UNLOADED_IN_CALLBACK, V_COUNT
};

static const char *const gsim_violation_names[V_COUNT] = {
	"in_callback", "double_put", "unknown_table",
	"use_after_free", "bad_peer", "bad_page_size", "wrong_put", "held_at_unload",
	"deadlock", "unloaded_in_callback",
};

/*
 * Checks of this project's own: client bugs that NVIDIA's driver tolerates.
 * The simulator returns what the driver returns and does what it does, and
 * counts them apart from the violations of the driver's contract (own.NAME,
 * own_checks): a client that makes one has lost track of its table or its
 * mapping, which the driver does not tell it.
 */
enum gsim_own_check {
	O_PUT_WRONG_VA, O_UNKNOWN_MAPPING, O_PUT_NULL, O_PUT_OTHER_PROCESS, O_COUNT
};

static const char *const gsim_own_names[O_COUNT] = {
	"put_wrong_va", "unknown_mapping", "put_null", "put_other_process",
};

/* What the driver does instead (595.45.04; tests/sim/README.md cites each). */
static const char *const gsim_driver_does[O_COUNT] = {
	[O_PUT_WRONG_VA] = "the driver finds the pin by its table and ignores the address (p2p.c RmP2PPutPages): this put is the put",
	[O_UNKNOWN_MAPPING] = "the driver finds no such mapping in the table's list and returns 0 (nv-p2p.c nvidia_p2p_dma_unmap_pages)",
	[O_PUT_NULL] = "the driver returns 0 (nv-p2p.c nvidia_p2p_put_pages_persistent)",
	[O_PUT_OTHER_PROCESS] = "the driver looks the pin up among the calling process's (p2p.c RmP2PGetInfoWithoutToken: osGetCurrentProcess, current->tgid), finds none and returns 0 (nv-p2p.c nv_p2p_put_pages: NV_ERR_OBJECT_NOT_FOUND): nothing unpinned, the free callback stays armed",
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
	bool localized;			/* MEMDESC_FLAGS_ALLOC_AS_LOCALIZED */
};

enum gsim_pin_state {
	PIN_ACTIVE,
	PIN_IN_CALLBACK,	/* its free callback is running */
	PIN_REVOKED,		/* the callback returned; the table is freed */
	PIN_PUT,		/* put by the client; the table is freed */
};

static const char *const gsim_pin_state_names[] = { "active", "in_callback", "revoked", "put" };

/* A page table handed to a client, and what the simulator keeps with it. */
struct gsim_pin {
	/* The client's table, its own allocation; NULL once freed for real. */
	struct nvidia_p2p_page_table *pt;
	unsigned long pt_key;		/* its address, kept after it is freed */
	struct kref ref;
	struct hlist_node hnode;	/* gsim_pins, keyed by pt_key, until evicted */
	struct list_head node;		/* gsim.pins while live, then gsim.tombstones */
	struct list_head quarantine_node;	/* gsim.quarantine: freed memory kept */
	struct mutex table_lock;	/* the driver's per-table semaphore: mappings */
	struct list_head mappings;	/* struct gsim_mapping.node, under table_lock */
	struct gsim_buffer *buf;
	u64 id;
	u64 va;
	u64 len;
	bool persistent;
	bool force_bar1;
	void (*free_callback)(void *data);
	void *data;
	enum gsim_pin_state state;	/* changes under gsim.lock (+ table_lock to a freed one) */
	pid_t tgid;			/* the pinning task's process (current->tgid) */
	bool kthread;			/* ... which was a kernel thread */
	pid_t leaked_by;		/* tgid of a put that found no pin of its process */
	u64 revoked_at;			/* ktime_get_ns() when the callback had returned */
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
	struct list_head node;		/* pin->mappings, or gsim.stray_mappings */
	struct gsim_device *dev;
};

/* Fail the nth next call of a function with an errno (ctl "inject"). */
struct gsim_injection {
	unsigned long skip;		/* calls to let through first */
	unsigned long times;		/* failures left; ULONG_MAX: forever */
	int err;
};

static struct {
	/* The model of RM's API lock: gsim_api_lock(). */
	spinlock_t api_spin;		/* the five fields below */
	struct task_struct *api_owner;	/* holds the API lock, or NULL */
	struct task_struct *cb_task;	/* runs a free callback, holding the API lock */
	/* The free callback the driver has called and not yet gone past. */
	void (*cb_fn)(void *data);
	u64 cb_pin_id;			/* the table whose callback that is */
	unsigned long cb_since;		/* jiffies when it was called */
	wait_queue_head_t api_wait;	/* the API lock was released */
	atomic_t api_waiters;		/* callers waiting for it */
	bool freeing;			/* the free path holds it */
	struct lockdep_map api_dep_map;

	struct mutex lock;		/* all of the state below but counters */
	struct list_head buffers;	/* allocated, in VA order */
	struct list_head zombies;	/* freed, held by persistent pins */
	struct list_head pins;		/* live pins, in pinning order */
	struct list_head tombstones;	/* freed pins, oldest first */
	struct list_head quarantine;	/* revoked pins whose memory is kept, oldest first */
	struct list_head stray_mappings;	/* made by a map that raced a free */
	struct list_head devices;
	unsigned int ntombstones, nquarantined;
	wait_queue_head_t cb_wait;	/* a pin left PIN_ACTIVE or PIN_IN_CALLBACK */
	u64 next_va;
	u64 next_pin_id;
	unsigned long *frame_map;	/* allocated frames of fake VRAM */
	unsigned long nframes;
	struct gsim_injection inject[FN_COUNT];
	unsigned int live_buffers, live_pins, live_persistent, live_mappings;
	unsigned int leaked_pins;	/* live pins a put from another process missed */
	atomic_long_t calls[FN_COUNT];
	atomic_long_t raced_maps;	/* dma_map_pages that outlived a free of its table */
	atomic_long_t raced_late_max_us;	/* the latest read of a freed table, after its free */
	atomic_long_t api_waits;	/* calls that waited for the API lock held by a free */
	atomic_long_t unmaps_in_callback;	/* unmaps while the table's callback ran */
	atomic_long_t os_pages_mapped;	/* OS pages the coherent map path mapped */
	atomic_long_t submap_cuts;	/* GPU pages a DMA submap boundary cut */
	atomic_long_t topology_refusals;	/* maps refused by the PCIe topology rule */
	atomic_long_t mmio_pages_mapped;	/* GPU pages the CDMM struct_page path mapped as MMIO */
	atomic_long_t pagemap_refusals;	/* CDMM maps refused: no uvm pagemap */
	atomic_long_t errors[FN_COUNT];
	atomic_long_t callbacks;
	atomic_long_t callbacks_started;	/* entered, for mofed_peer_sim's hooks */
	atomic_long_t callback_returns_held;	/* callback_return_ms waits */
	atomic_t frees_running;		/* cudaFrees not finished (frees.running) */
	atomic_long_t violations[V_COUNT];
	atomic_long_t own_checks[O_COUNT];	/* own.NAME, not violations */
	struct dentry *debugfs;
} gsim;

static DEFINE_HASHTABLE(gsim_pins, 10);

static u8 gsim_uuid[NVIDIA_P2P_GPU_UUID_LEN] = "GPU-sim-0000001";

#define gsim_violation(v, fmt, ...) \
	sim_violation(&gsim.violations[v], fmt, ##__VA_ARGS__)

/* Labelled as mofed_peer_sim labels its checks, with what the driver does. */
#define gsim_own_check(o, fmt, ...)						\
	do {									\
		atomic_long_inc(&gsim.own_checks[o]);				\
		pr_err("contract violation: " fmt " [a check of this project's own: %s]\n", \
		       ##__VA_ARGS__, gsim_driver_does[o]);			\
	} while (0)

static u64 gsim_frame_addr(unsigned long frame)
{
	return GSIM_BAR_BASE + ((u64)frame << GSIM_PAGE_SHIFT);
}

/*
 * The address a pin hands out for a frame: its C2C address on a coherent
 * GPU (RmThirdPartyP2PNVLinkGetPages), else (and for FORCE_BAR1) BAR1.
 */
static u64 gsim_page_addr(unsigned long frame, bool force_bar1)
{
	if (coherent && !force_bar1)
		return GSIM_C2C_BASE + ((u64)frame << GSIM_PAGE_SHIFT);
	return gsim_frame_addr(frame);
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

static int gsim_alloc(u64 size, enum gsim_layout layout, bool localized, u64 *va)
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
	buf->localized = localized;
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

static void gsim_mapping_free(struct gsim_mapping *m)
{
	kfree(m->dm.dma_addresses);
	kfree(m);
}

/* Frees what a revoked pin kept in quarantine (gsim.lock held). */
static void gsim_unquarantine(struct gsim_pin *pin)
{
	struct gsim_mapping *m, *tmp;

	if (list_empty(&pin->quarantine_node))
		return;
	list_del_init(&pin->quarantine_node);
	gsim.nquarantined--;
	list_for_each_entry_safe(m, tmp, &pin->mappings, node) {
		list_del(&m->node);
		gsim_mapping_free(m);
	}
	gsim_free_pages(pin->page_ptrs, pin->len >> GSIM_PAGE_SHIFT);
	pin->page_ptrs = NULL;
}

static void gsim_pin_free(struct kref *ref)
{
	struct gsim_pin *pin = container_of(ref, struct gsim_pin, ref);

	/* Out of quarantine already: gsim_evict, gsim_exit. */
	kfree(pin->pt);
	kfree(pin);
}

/* The pin (live or tombstone) whose table is @pt; NULL if unknown. */
static struct gsim_pin *gsim_lookup(const struct nvidia_p2p_page_table *pt)
{
	struct gsim_pin *pin;

	hash_for_each_possible(gsim_pins, pin, hnode, (unsigned long)pt)
		if (pin->pt_key == (unsigned long)pt)
			return pin;
	return NULL;
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

/*
 * The flags word of a 2.0 table; with our header, a 1.2 table's trailer. A
 * 1.2 header has no such word: nothing is written.
 */
static void gsim_set_pt_flags(struct nvidia_p2p_page_table *pt, u32 flags)
{
#if GSIM_PT_HAS_FLAGS
	pt->flags = flags;
#endif
}

/* Fills the client-visible table of a new pin, bad data included. */
static void gsim_fill_table(struct gsim_pin *pin)
{
	struct nvidia_p2p_page_table *pt = pin->pt;
	u32 i, n = pin->len >> GSIM_PAGE_SHIFT;
	u32 first = (pin->va - pin->buf->va) >> GSIM_PAGE_SHIFT;
	int bad = READ_ONCE(bad_data);

	for (i = 0; i < n; i++)
		pin->page_ptrs[i]->physical_address =
			gsim_page_addr(pin->buf->frames[first + i], pin->force_bar1);
	if (!GSIM_PT_HAS_FLAGS || READ_ONCE(page_table_version) == PT_ABI_1_2) {
		pt->version = GSIM_PT_VERSION_1_2;
		gsim_set_pt_flags(pt, GSIM_V1_TRAILER);
	} else {
		/*
		 * Over C2C the pages are CPU-cacheable, over BAR1 not (p2p.c
		 * RmThirdPartyP2PNVLinkGetPages, RmThirdPartyP2PBAR1GetPages;
		 * nv-p2p.c nv_p2p_get_pages sets the flag). cpu_cacheable
		 * sets it anyway.
		 */
		pt->version = GSIM_PT_VERSION_2_0;
		gsim_set_pt_flags(pt, READ_ONCE(cpu_cacheable) ||
				  (coherent && !pin->force_bar1) ?
				  GSIM_PT_FLAG_CPU_CACHEABLE : 0);
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

/* A new pin of [va, va + len) (API lock and gsim.lock held). */
static int gsim_pin(u64 va, u64 len, struct nvidia_p2p_page_table **page_table,
		    void (*free_callback)(void *data), void *data, bool persistent,
		    bool force_bar1)
{
	struct gsim_buffer *buf;
	struct gsim_pin *pin, *old;
	u32 n;

	if (!page_table || !len || !IS_ALIGNED(va, GSIM_PAGE_SIZE) ||
	    !IS_ALIGNED(len, GSIM_PAGE_SIZE) || va + len < va)
		return -EINVAL;
	buf = gsim_find_buffer(va, len);
	if (!buf)
		return -EINVAL;
	/*
	 * p2p.c RmThirdPartyP2PNVLinkGetPages: "RDMA is not supported for
	 * localized memory over coherent mappings", NV_ERR_NOT_SUPPORTED
	 * (nv-p2p.c nvidia_p2p_map_status: -ENOTSUPP). The BAR1 path (a
	 * non-coherent GPU, FORCE_BAR1) does not check.
	 */
	if (coherent && !force_bar1 && buf->localized)
		return -ENOTSUPP;
	n = len >> GSIM_PAGE_SHIFT;
	pin = kzalloc(sizeof(*pin), GFP_KERNEL);
	if (!pin)
		return -ENOMEM;
	pin->pt = kzalloc(sizeof(*pin->pt), GFP_KERNEL);
	pin->page_ptrs = pin->pt ? gsim_alloc_pages(n) : NULL;
	if (!pin->page_ptrs) {
		kfree(pin->pt);
		kfree(pin);
		return -ENOMEM;
	}
	pin->pt_key = (unsigned long)pin->pt;
	kref_init(&pin->ref);
	mutex_init(&pin->table_lock);
	INIT_LIST_HEAD(&pin->mappings);
	INIT_LIST_HEAD(&pin->quarantine_node);
	pin->buf = buf;
	pin->id = ++gsim.next_pin_id;
	pin->va = va;
	pin->len = len;
	pin->persistent = persistent;
	pin->force_bar1 = force_bar1;
	pin->free_callback = free_callback;
	pin->data = data;
	pin->tgid = current->tgid;
	pin->kthread = current->flags & PF_KTHREAD;
	gsim_fill_table(pin);
	/*
	 * A table freed for real may have had this address: its tombstone is
	 * forgotten, a stale call with it is now this table's (as on the driver).
	 */
	old = gsim_lookup(pin->pt);
	if (old)
		hash_del(&old->hnode);
	hash_add(gsim_pins, &pin->hnode, pin->pt_key);
	list_add_tail(&pin->node, &gsim.pins);
	buf->pins++;
	if (persistent)
		gsim.live_persistent++;
	else
		gsim.live_pins++;
	*page_table = pin->pt;
	return 0;
}

/* As freed memory would look to a client that kept a pointer into it. */
static void gsim_poison_mapping(struct gsim_mapping *m)
{
	u32 i;

	m->dm.version = POISON_FREE * 0x01010101U;
	m->dm.page_size_type = POISON_FREE * 0x01010101U;
	for (i = 0; i < m->dm.entries; i++)
		m->dm.dma_addresses[i] = POISON_FREE * 0x0101010101010101ULL;
}

/*
 * Poisons a revoked pin's table, page objects and mappings and keeps their
 * memory (gsim.lock held): a client that reads the table or a mapping after
 * the callback returned sees poison (its addresses fail any check) without
 * crashing the guest. The oldest quarantined pin's memory is freed for real.
 */
static void gsim_quarantine(struct gsim_pin *pin)
{
	static u8 poisoned_uuid[NVIDIA_P2P_GPU_UUID_LEN] = {
		[0 ... NVIDIA_P2P_GPU_UUID_LEN - 1] = POISON_FREE
	};
	struct gsim_mapping *m;
	u32 i, n = pin->len >> GSIM_PAGE_SHIFT;

	list_for_each_entry(m, &pin->mappings, node)
		gsim_poison_mapping(m);
	for (i = 0; i < n; i++)
		memset(pin->page_ptrs[i], POISON_FREE, sizeof(*pin->page_ptrs[i]));
	/* entries and pages stay: a stale reader walks poison, not wild pointers. */
	pin->pt->version = POISON_FREE * 0x01010101U;
	pin->pt->page_size = POISON_FREE * 0x01010101U;
	gsim_set_pt_flags(pin->pt, POISON_FREE * 0x01010101U);
	pin->pt->gpu_uuid = poisoned_uuid;
	list_add_tail(&pin->quarantine_node, &gsim.quarantine);
	if (++gsim.nquarantined > GSIM_MAX_QUARANTINED)
		gsim_unquarantine(list_first_entry(&gsim.quarantine, struct gsim_pin,
						   quarantine_node));
}

/* Keeps at most GSIM_MAX_TOMBSTONES freed pins (gsim.lock held). */
static void gsim_evict(void)
{
	struct gsim_pin *old;

	if (++gsim.ntombstones <= GSIM_MAX_TOMBSTONES)
		return;
	old = list_first_entry(&gsim.tombstones, struct gsim_pin, node);
	gsim_unquarantine(old);
	list_del(&old->node);
	hash_del(&old->hnode);
	gsim.ntombstones--;
	kref_put(&old->ref, gsim_pin_free);
}

/*
 * Frees what a client could still see of @pin (table, page objects,
 * mappings) and keeps its shell as a tombstone, so that later calls with the
 * stale table are told apart from calls with a table never seen. With
 * free_revoked everything goes at once, the table too, as
 * nv_p2p_free_page_table does; otherwise a revoked pin's memory goes to
 * quarantine, and a put pin's is freed but for its table, kept poisoned.
 * Called with the API lock held (or at unload), not gsim.lock.
 */
static void gsim_retire(struct gsim_pin *pin, enum gsim_pin_state state)
{
	struct gsim_mapping *m, *tmp;
	unsigned int nmappings = 0;

	/* The driver frees the mappings under the table's own semaphore. */
	mutex_lock(&pin->table_lock);
	mutex_lock(&gsim.lock);
	list_for_each_entry(m, &pin->mappings, node)
		nmappings++;
	gsim.live_mappings -= nmappings;
	if (state == PIN_REVOKED)
		pin->revoked_at = ktime_get_ns();
	if (state == PIN_REVOKED && !free_revoked) {
		gsim_quarantine(pin);
	} else {
		list_for_each_entry_safe(m, tmp, &pin->mappings, node) {
			list_del(&m->node);
			gsim_mapping_free(m);
		}
		gsim_free_pages(pin->page_ptrs, pin->len >> GSIM_PAGE_SHIFT);
		pin->page_ptrs = NULL;
		if (free_revoked) {
			kfree(pin->pt);
			pin->pt = NULL;
		} else {
			memset(pin->pt, POISON_FREE, sizeof(*pin->pt));
		}
	}
	WRITE_ONCE(pin->state, state);
	mutex_unlock(&pin->table_lock);
	if (pin->persistent)
		gsim.live_persistent--;
	else
		gsim.live_pins--;
	if (pin->leaked_by)
		gsim.leaked_pins--;
	if (!--pin->buf->pins && pin->buf->freed)
		gsim_buffer_free(pin->buf);
	pin->buf = NULL;
	list_move_tail(&pin->node, &gsim.tombstones);
	gsim_evict();
	mutex_unlock(&gsim.lock);
	wake_up_all(&gsim.cb_wait);
}

/* ---- The driver's API lock -------------------------------------------- */

/*
 * Test knob deadlock_ms: how long a caller waits for the API lock while a
 * free callback that has run as long does not return, before the wait is
 * declared one that can never end.
 */
static unsigned int deadlock_ms = 5000;
module_param(deadlock_ms, uint, 0644);
MODULE_PARM_DESC(deadlock_ms, "A wait for the API lock while a free callback has not returned for this long (ms) is a deadlock: violation, -EDEADLK");

/* Whether the current task is running a free callback. */
static bool gsim_in_callback(void)
{
	return READ_ONCE(gsim.cb_task) == current;
}

static bool gsim_api_trylock(void)
{
	bool got;

	spin_lock(&gsim.api_spin);
	got = !gsim.api_owner;
	if (got)
		gsim.api_owner = current;
	spin_unlock(&gsim.api_spin);
	return got;
}

/*
 * Whether the wait of @fn for the API lock, since @since, can never end: a
 * free callback holds the lock and has not returned for deadlock_ms, and
 * @fn has waited as long. The real driver would hang both for good.
 */
static bool gsim_api_stuck(enum gsim_fn fn, unsigned long since)
{
	unsigned long limit = msecs_to_jiffies(READ_ONCE(deadlock_ms));
	u64 pin_id;
	bool stuck;

	spin_lock(&gsim.api_spin);
	pin_id = gsim.cb_pin_id;
	stuck = gsim.cb_task && time_after(jiffies, gsim.cb_since + limit) &&
		time_after(jiffies, since + limit);
	spin_unlock(&gsim.api_spin);
	if (stuck)
		gsim_violation(V_DEADLOCK,
			       "deadlock: nvidia_p2p_%s waited %u ms for the driver's API lock while the free callback of page table #%llu did not return; on the real driver neither ever returns (does the callback wait for this call?)",
			       gsim_fn_names[fn], READ_ONCE(deadlock_ms), pin_id);
	return stuck;
}

/*
 * Takes the API lock for @fn (FN_FREE: the free path). Lockdep sees it held;
 * the calls take it as a trylock for lockdep, because MOFED's mapping_lock,
 * held across dma_map and taken by an invalidation inside a callback, is one
 * lock class for every registration, which lockdep would report as a cycle
 * although no two instances ever meet. This function checks waits for the
 * exact table instead (gsim_api_stuck).
 */
static int gsim_api_lock(enum gsim_fn fn)
{
	unsigned long since = jiffies;

	if (gsim_api_trylock())
		goto locked;
	if (fn != FN_FREE && READ_ONCE(gsim.freeing))
		atomic_long_inc(&gsim.api_waits);
	atomic_inc(&gsim.api_waiters);
	wake_up_all(&gsim.cb_wait);	/* a free path holding for a waiter */
	while (!wait_event_timeout(gsim.api_wait, gsim_api_trylock(), HZ / 10)) {
		if (fn != FN_FREE && gsim_api_stuck(fn, since)) {
			atomic_dec(&gsim.api_waiters);
			return -EDEADLK;
		}
	}
	atomic_dec(&gsim.api_waiters);
locked:
	if (fn == FN_FREE)
		lock_map_acquire(&gsim.api_dep_map);
	else
		lock_map_acquire_try(&gsim.api_dep_map);
	return 0;
}

static void gsim_api_unlock(void)
{
	lock_map_release(&gsim.api_dep_map);
	spin_lock(&gsim.api_spin);
	gsim.api_owner = NULL;
	spin_unlock(&gsim.api_spin);
	wake_up_all(&gsim.api_wait);
}

/* ---- Entry and exit of every API call --------------------------------- */

/* The artificial cost and the count of every API call. */
static void gsim_count(enum gsim_fn fn)
{
	unsigned int us = READ_ONCE(cost_us);

	if (us)
		fsleep(us);
	atomic_long_inc(&gsim.calls[fn]);
}

/*
 * At the start of every API call: gsim_count, refuses one that needs the
 * API lock (@api) from a free callback, and applies an armed injection.
 * Holds no lock on return.
 *
 * The driver does not hang on such a call: each rm_p2p_* (osapi.c) takes the
 * lock with rmapiLockAcquire (rmapi.c), whose
 * NV_ASSERT_OR_RETURN(!rmapiLockIsOwner(), NV_ERR_INVALID_LOCK_STATE) refuses
 * the thread that holds it, and nvidia_p2p_map_status (nv-p2p.c) maps that
 * status, which its table lacks, to -EIO. Nothing is pinned, mapped or
 * unpinned. The puts then also WARN (nv_p2p_put_pages: WARN_ON(status !=
 * NV_OK)): logged here as an error line that says so, since a WARNING in the
 * guest's log fails the run.
 */
static int gsim_enter(enum gsim_fn fn, bool api)
{
	struct gsim_injection *inj = &gsim.inject[fn];
	int ret = 0;

	gsim_count(fn);
	if (api && gsim_in_callback()) {
		gsim_violation(V_IN_CALLBACK,
			       "nvidia_p2p_%s called from inside a free callback: it needs the API lock the callback runs under, which the real driver refuses to its owner (rmapiLockAcquire: NV_ERR_INVALID_LOCK_STATE): -EIO",
			       gsim_fn_names[fn]);
		if (fn == FN_PUT_PAGES || fn == FN_PUT_PAGES_PERSISTENT)
			pr_err("the driver WARNs here: WARN_ON(status != NV_OK) in nv_p2p_put_pages (nv-p2p.c) for the refused nvidia_p2p_%s\n",
			       gsim_fn_names[fn]);
		return -EIO;
	}
	mutex_lock(&gsim.lock);
	if (!inj->times)
		goto out;
	if (inj->skip) {
		inj->skip--;
		goto out;
	}
	if (inj->times != ULONG_MAX)
		inj->times--;
	ret = inj->err;
out:
	mutex_unlock(&gsim.lock);
	return ret;
}

static int gsim_result(enum gsim_fn fn, int ret)
{
	if (ret)
		atomic_long_inc(&gsim.errors[fn]);
	return ret;
}

/* ---- Test hooks: a cudaFree racing a call ------------------------------ */

/*
 * free_during_map, free_during_put, free_during_unmap (not NVIDIA's API):
 * the call first frees the buffer of the table it was given from another
 * thread and waits until the free path holds the API lock and has called
 * that table's free callback; then it goes on as the driver would. So
 * dma_map_pages and put_pages wait for the API lock until the free path is
 * done, and dma_unmap_pages runs while the callback does (it waits up to
 * 200 ms for the callback to return first, as it would if the callback did
 * not wait for this unmap). A client whose callback waits for the map or the
 * put makes a deadlock (violation.deadlock after deadlock_ms); one that lets
 * the callback return before its unmap ends makes a use_after_free.
 */
static bool free_during_map, free_during_put, free_during_unmap;
module_param(free_during_map, bool, 0644);
MODULE_PARM_DESC(free_during_map, "Test hook: dma_map_pages first frees the buffer being mapped from another thread, then waits for the API lock");
module_param(free_during_put, bool, 0644);
MODULE_PARM_DESC(free_during_put, "Test hook: put_pages first frees the buffer being unpinned from another thread, then waits for the API lock");
module_param(free_during_unmap, bool, 0644);
MODULE_PARM_DESC(free_during_unmap, "Test hook: dma_unmap_pages first frees the buffer from another thread and unmaps while its free callback runs");

static int gsim_free(u64 va, bool hold);

static atomic_t gsim_free_works = ATOMIC_INIT(0);

struct gsim_free_work {
	struct work_struct work;
	u64 va;
	bool hold;	/* keep the API lock after the callback until a call waits */
};

static void gsim_free_work_fn(struct work_struct *work)
{
	struct gsim_free_work *w = container_of(work, struct gsim_free_work, work);

	gsim_free(w->va, w->hold);
	kfree(w);
	if (atomic_dec_and_test(&gsim_free_works))
		wake_up_var(&gsim_free_works);
}

/*
 * If @hook is set, frees @pin's buffer from another thread and returns once
 * its free callback has been called (or the pin left PIN_ACTIVE otherwise).
 * With @hold, that free keeps the API lock after the callback until a call
 * waits for it (or 5 s passed): the caller's call then surely waits. The
 * caller holds a reference on @pin and no lock.
 */
static void gsim_free_meanwhile(bool hook, struct gsim_pin *pin, bool hold)
{
	struct gsim_free_work *w;

	if (!hook)
		return;
	w = kzalloc(sizeof(*w), GFP_KERNEL);
	if (!w)
		return;
	mutex_lock(&gsim.lock);
	if (pin->state != PIN_ACTIVE || pin->persistent || pin->buf->freed) {
		mutex_unlock(&gsim.lock);
		kfree(w);
		return;
	}
	w->va = pin->buf->va;
	w->hold = hold;
	mutex_unlock(&gsim.lock);
	INIT_WORK(&w->work, gsim_free_work_fn);
	atomic_inc(&gsim_free_works);
	queue_work(system_unbound_wq, &w->work);
	wait_event(gsim.cb_wait, READ_ONCE(pin->state) != PIN_ACTIVE);
}

/* At unload: the frees queued by the free_during_* hooks have run. */
static void gsim_flush_free_works(void)
{
	wait_var_event(&gsim_free_works, !atomic_read(&gsim_free_works));
}

/* The pin of @pt with a reference, for a hook before the call's locks. */
static struct gsim_pin *gsim_get_pin(const struct nvidia_p2p_page_table *pt)
{
	struct gsim_pin *pin;

	mutex_lock(&gsim.lock);
	pin = gsim_lookup(pt);
	if (pin)
		kref_get(&pin->ref);
	mutex_unlock(&gsim.lock);
	return pin;
}

static void gsim_put_pin(struct gsim_pin *pin)
{
	mutex_lock(&gsim.lock);
	kref_put(&pin->ref, gsim_pin_free);
	mutex_unlock(&gsim.lock);
}

/* ---- The exported API ------------------------------------------------- */

int nvidia_p2p_get_pages(uint64_t p2p_token, uint32_t va_space,
			 uint64_t virtual_address, uint64_t length,
			 struct nvidia_p2p_page_table **page_table,
			 void (*free_callback)(void *data), void *data)
{
	int ret = gsim_enter(FN_GET_PAGES, true);

	/* 535+: persistence has its own API; a NULL callback is an error. */
	if (!ret && !free_callback)
		ret = -EINVAL;
	/*
	 * The driver takes the API lock twice, to pin and to register the
	 * callback; the callback can fire from the second unlock on, before
	 * this returns. One hold here leaves the same window after it.
	 */
	if (!ret)
		ret = gsim_api_lock(FN_GET_PAGES);
	if (!ret) {
		mutex_lock(&gsim.lock);
		ret = gsim_pin(virtual_address, length, page_table, free_callback,
			       data, false, false);
		mutex_unlock(&gsim.lock);
		gsim_api_unlock();
	}
	return gsim_result(FN_GET_PAGES, ret);
}
NVPM_SIM_EXPORT(nvidia_p2p_get_pages);

int nvidia_p2p_get_pages_persistent(uint64_t virtual_address, uint64_t length,
				    struct nvidia_p2p_page_table **page_table,
				    uint32_t flags)
{
	int ret = gsim_enter(FN_GET_PAGES_PERSISTENT, true);

	if (!ret)
		ret = gsim_api_lock(FN_GET_PAGES_PERSISTENT);
	if (ret)
		return gsim_result(FN_GET_PAGES_PERSISTENT, ret);
	if (!READ_ONCE(persistent_api))
		ret = -ENOTSUPP;
	else if (flags & ~NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING)
		ret = -EINVAL;
	/* p2p.c RmP2PGetPagesPersistent: forced PCIe on a coherent GPU only. */
	else if ((flags & NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING) && !coherent)
		ret = -ENOTSUPP;
	if (!ret) {
		mutex_lock(&gsim.lock);
		ret = gsim_pin(virtual_address, length, page_table, NULL, NULL, true,
			       flags & NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING);
		mutex_unlock(&gsim.lock);
	}
	gsim_api_unlock();
	return gsim_result(FN_GET_PAGES_PERSISTENT, ret);
}
NVPM_SIM_EXPORT(nvidia_p2p_get_pages_persistent);

/*
 * Test knob revoked_put_errno: a put of a table whose callback already ran
 * fails with this errno instead of returning 0, as older drivers did (the
 * put still counts: a second one is a double put).
 */
static uint revoked_put_errno;
module_param(revoked_put_errno, uint, 0644);
MODULE_PARM_DESC(revoked_put_errno, "Test knob: a put after the free callback returns -N (older drivers) instead of 0");

/*
 * Test knob process_rule: which tasks make one process for a revocable put
 * (gsim_same_process). The driver's rule is "tgid": RM finds a pin only
 * among the calling process's (p2p.c RmP2PGetInfoWithoutToken matches
 * osGetCurrentProcess(), which os-interface.c os_get_current_process makes
 * current->tgid). "application" (the default) keeps it for kernel threads
 * (a workqueue, a kthread: PF_KTHREAD) and counts every user-space task as
 * one process: the guest's scenarios stand in for one application with many
 * short nvpm-tool processes (a registration and its deregistration are two
 * of them), where a real application registers and deregisters from its
 * own process. The stress tools, one process each, run with "tgid".
 */
enum gsim_process_rule { PROCESS_APPLICATION, PROCESS_TGID };
static const char *const gsim_process_rule_names[] = { "application", "tgid" };
static int process_rule = PROCESS_APPLICATION;
static struct sim_enum_param process_rule_param = {
	gsim_process_rule_names, ARRAY_SIZE(gsim_process_rule_names), &process_rule
};
module_param_cb(process_rule, &sim_enum_param_ops, &process_rule_param, 0644);
MODULE_PARM_DESC(process_rule, "Which tasks are one process to a revocable put: application (user tasks are one; kernel threads their own tgid) or tgid (the driver: current->tgid)");

/* Whether the current task's put finds @pin: the driver looks among its process's. */
static bool gsim_same_process(const struct gsim_pin *pin)
{
	bool kthread = current->flags & PF_KTHREAD;

	if (READ_ONCE(process_rule) == PROCESS_APPLICATION && !kthread && !pin->kthread)
		return true;
	return pin->tgid == current->tgid;
}

/* The common part of both puts, API lock held. */
static int gsim_put(enum gsim_fn fn, u64 va, struct nvidia_p2p_page_table *pt,
		    bool persistent)
{
	struct gsim_pin *pin;

	mutex_lock(&gsim.lock);
	pin = gsim_lookup(pt);
	if (!pin) {
		mutex_unlock(&gsim.lock);
		gsim_violation(V_UNKNOWN_TABLE, "nvidia_p2p_%s of an unknown page table",
			       gsim_fn_names[fn]);
		return -EINVAL;
	}
	if (pin->state == PIN_PUT) {
		mutex_unlock(&gsim.lock);
		gsim_violation(V_DOUBLE_PUT, "nvidia_p2p_%s of page table #%llu, already put",
			       gsim_fn_names[fn], pin->id);
		return -EINVAL;
	}
	/*
	 * Also after the callback: the wrong put would reach freed state (a
	 * persistent put hands RM mem_info->private, NULL in a revocable
	 * table: nv-p2p.c nv_p2p_put_pages).
	 */
	if (pin->persistent != persistent) {
		mutex_unlock(&gsim.lock);
		gsim_violation(V_WRONG_PUT,
			       "nvidia_p2p_%s of %s page table #%llu (va %#llx) with va %#llx",
			       gsim_fn_names[fn],
			       pin->persistent ? "persistent" : "non-persistent",
			       pin->id, pin->va, va);
		return -EINVAL;
	}
	/*
	 * A revocable put looks among the calling process's pins only
	 * (RmP2PPutPages: RmP2PGetInfoWithoutToken, osGetCurrentProcess): from
	 * another process it finds none, NV_ERR_OBJECT_NOT_FOUND, which
	 * nv_p2p_put_pages turns into 0. The pin stays, its callback armed. (The
	 * persistent put hands RM mem_info->private: no process lookup.)
	 */
	if (!persistent && pin->state == PIN_ACTIVE && !gsim_same_process(pin)) {
		if (!pin->leaked_by)
			gsim.leaked_pins++;
		pin->leaked_by = current->tgid;
		mutex_unlock(&gsim.lock);
		gsim_own_check(O_PUT_OTHER_PROCESS,
			       "nvidia_p2p_%s of page table #%llu (va %#llx) from process %d (%s%s), pinned by process %d%s",
			       gsim_fn_names[fn], pin->id, pin->va, current->tgid, current->comm,
			       current->flags & PF_KTHREAD ? ", a kernel thread" : "",
			       pin->tgid, pin->kthread ? " (a kernel thread)" : "");
		return 0;
	}
	/*
	 * RM finds the pin by its table (RmP2PPutPages: RmP2PGetInfoWithoutToken
	 * with length 0, then thirdpartyp2pDelMappingInfoByKey; the persistent
	 * put passes RM no address at all): the address does not matter, the
	 * put goes on.
	 */
	if (pin->va != va)
		gsim_own_check(O_PUT_WRONG_VA,
			       "nvidia_p2p_%s of page table #%llu (va %#llx) with va %#llx",
			       gsim_fn_names[fn], pin->id, pin->va, va);
	if (pin->state == PIN_REVOKED) {
		/* RM no longer knows the table (NV_ERR_OBJECT_NOT_FOUND): fine, once. */
		WRITE_ONCE(pin->state, PIN_PUT);
		mutex_unlock(&gsim.lock);
		return -(int)READ_ONCE(revoked_put_errno);
	}
	mutex_unlock(&gsim.lock);
	/* The API lock keeps the free path out: the pin is still ours to retire. */
	gsim_retire(pin, PIN_PUT);
	return 0;
}

int nvidia_p2p_put_pages(uint64_t p2p_token, uint32_t va_space,
			 uint64_t virtual_address,
			 struct nvidia_p2p_page_table *page_table)
{
	struct gsim_pin *pin;
	int ret;

	/* nv-p2p.c nvidia_p2p_put_pages: 0 for NULL, before the API lock. */
	if (!page_table) {
		gsim_count(FN_PUT_PAGES);
		return 0;
	}
	ret = gsim_enter(FN_PUT_PAGES, true);
	if (ret)
		return gsim_result(FN_PUT_PAGES, ret);
	if (READ_ONCE(free_during_put)) {
		pin = gsim_get_pin(page_table);
		if (pin) {
			gsim_free_meanwhile(true, pin, true);
			gsim_put_pin(pin);
		}
	}
	ret = gsim_api_lock(FN_PUT_PAGES);
	if (!ret) {
		ret = gsim_put(FN_PUT_PAGES, virtual_address, page_table, false);
		gsim_api_unlock();
	}
	return gsim_result(FN_PUT_PAGES, ret);
}
NVPM_SIM_EXPORT(nvidia_p2p_put_pages);

int nvidia_p2p_put_pages_persistent(uint64_t virtual_address,
				    struct nvidia_p2p_page_table *page_table,
				    uint32_t flags)
{
	int ret;

	/*
	 * nv-p2p.c nvidia_p2p_put_pages_persistent: flags != 0 is -EINVAL, then
	 * a NULL table 0, both before the API lock.
	 */
	if (flags || !page_table) {
		gsim_count(FN_PUT_PAGES_PERSISTENT);
		if (flags)
			return gsim_result(FN_PUT_PAGES_PERSISTENT, -EINVAL);
		gsim_own_check(O_PUT_NULL, "nvidia_p2p_put_pages_persistent of a NULL page table");
		return 0;
	}
	ret = gsim_enter(FN_PUT_PAGES_PERSISTENT, true);
	if (!ret)
		ret = gsim_api_lock(FN_PUT_PAGES_PERSISTENT);
	if (!ret) {
		ret = gsim_put(FN_PUT_PAGES_PERSISTENT, virtual_address, page_table, true);
		gsim_api_unlock();
	}
	return gsim_result(FN_PUT_PAGES_PERSISTENT, ret);
}
NVPM_SIM_EXPORT(nvidia_p2p_put_pages_persistent);

/* A no-op in modern drivers; callable from a free callback. */
int nvidia_p2p_free_page_table(struct nvidia_p2p_page_table *page_table)
{
	atomic_long_inc(&gsim.calls[FN_FREE_PAGE_TABLE]);
	return 0;
}
NVPM_SIM_EXPORT(nvidia_p2p_free_page_table);

/* A no-op in modern drivers; callable from a free callback. */
int nvidia_p2p_free_dma_mapping(struct nvidia_p2p_dma_mapping *dma_mapping)
{
	atomic_long_inc(&gsim.calls[FN_FREE_DMA_MAPPING]);
	return 0;
}
NVPM_SIM_EXPORT(nvidia_p2p_free_dma_mapping);

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

/*
 * Test knob race_window_ms: a dma_map_pages of a table whose callback
 * returned less than this long ago is the driver's own race, not the
 * client's fault: no client can keep the callback (which must not wait for
 * a map) from running between its last check of the pin and the driver's
 * read of the table. Later, the client had all the time it needed to see
 * its own callback: a use after free.
 */
static unsigned int race_window_ms = GSIM_RACE_WINDOW_MS;
module_param(race_window_ms, uint, 0644);
MODULE_PARM_DESC(race_window_ms, "dma_map_pages of a table revoked less than this long ago (ms) counts as the driver's race (maps.raced), later as use_after_free (default " __stringify(GSIM_RACE_WINDOW_MS) ")");

/*
 * Test hook for mofed_peer_sim's free_at= (not NVIDIA's API): how long a
 * core that frees a buffer and then maps it waits, so that the map is past
 * the window and a map of the revoked table is the client's.
 */
unsigned int nvidia_sim_race_window_ms(void)
{
	return READ_ONCE(race_window_ms);
}
EXPORT_SYMBOL_GPL(nvidia_sim_race_window_ms);

/*
 * A mapping of the freed table of @pin, whose addresses are poison: what
 * the driver builds from freed memory (gsim.lock held).
 */
static int gsim_map_stray(struct gsim_pin *pin, struct pci_dev *peer,
			  struct gsim_pin **pinp, struct gsim_mapping **mp)
{
	struct gsim_mapping *m = kzalloc(sizeof(*m), GFP_KERNEL);
	u32 n = pin->len >> GSIM_PAGE_SHIFT;

	if (!m)
		return -ENOMEM;
	m->dm.dma_addresses = kcalloc(n, sizeof(u64), GFP_KERNEL);
	if (!m->dm.dma_addresses) {
		gsim_mapping_free(m);
		return -ENOMEM;
	}
	m->dm.entries = n;
	gsim_poison_mapping(m);
	m->dm.private = m;
	m->dm.pci_dev = peer;
	kref_get(&pin->ref);
	*pinp = pin;
	*mp = m;
	return 0;
}

/*
 * Whether mapping @pin, revoked, is the race no client can close; records
 * how late after the revoke such a map read the table (maps.raced_late_max_us).
 */
static bool gsim_map_raced(struct gsim_pin *pin)
{
	u64 late;
	long us;

	if (pin->state != PIN_REVOKED)
		return false;
	late = ktime_get_ns() - pin->revoked_at;
	if (late >= (u64)READ_ONCE(race_window_ms) * NSEC_PER_MSEC)
		return false;
	us = div_u64(late, NSEC_PER_USEC);
	if (us > atomic_long_read(&gsim.raced_late_max_us))
		atomic_long_set(&gsim.raced_late_max_us, us);	/* gsim.lock held */
	return true;
}

/*
 * The part of dma_map_pages before the API lock (gsim.lock held): checks the
 * table, reads its pages and builds the mapping. The driver reads the table
 * here: a table it freed is a use after free, unless the free was just now
 * (gsim_map_raced), which the mapping then shows (gsim_map_insert).
 */
static int gsim_map_read_table(struct pci_dev *peer, struct nvidia_p2p_page_table *pt,
			       struct gsim_pin **pinp, struct gsim_mapping **mp)
{
	struct gsim_pin *pin;
	struct gsim_mapping *m;
	u32 i;

	if (!peer || !pt)
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
	if ((pin->state == PIN_REVOKED || pin->state == PIN_PUT) && !gsim_map_raced(pin)) {
		gsim_violation(V_USE_AFTER_FREE,
			       "nvidia_p2p_dma_map_pages of page table #%llu after %s (the driver freed it)",
			       pin->id, pin->state == PIN_PUT ? "its put" : "its free callback returned");
		return -EINVAL;
	}
	if (pin->state == PIN_REVOKED)
		return gsim_map_stray(pin, peer, pinp, mp);
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
		gsim_mapping_free(m);
		return -ENOMEM;
	}
	m->dm.version = READ_ONCE(bad_data) == BAD_DMA_VERSION ?
			0x00010000 : NVIDIA_P2P_DMA_MAPPING_VERSION;
	m->dm.page_size_type = pt->page_size;
	/* nv-p2p.c: dma_mapping->entries = page_table->entries, always. */
	m->dm.entries = pt->entries;
	/* Mapped under the API lock (gsim_rm_map). */
	for (i = 0; i < pt->entries; i++)
		m->dm.dma_addresses[i] = pin->page_ptrs[i]->physical_address;
	m->dm.private = m;
	m->dm.pci_dev = peer;
	kref_get(&pin->ref);
	*pinp = pin;
	*mp = m;
	return 0;
}

/* nv-pci.c nv_grdma_pci_topology_supported, for a non-coherent GPU. */
static bool gsim_topology_supported(void)
{
	switch (READ_ONCE(NVreg_GrdmaPciTopoCheckOverride)) {
	case 1:
		return true;
	case 2:
		return false;
	}
	if (READ_ONCE(passthrough))
		return true;
	if (READ_ONCE(p2p_unsupported_chipset))
		return READ_ONCE(common_switch);
	return true;
}

/*
 * The coherent path: osapi.c RmP2PDmaMapPages. A 64 KiB page larger than
 * the OS's is inflated to its OS pages, which are mapped in submaps
 * (nv_dma_map_alloc, GSIM_SUBMAP_PAGES); each GPU page's OS pages must have
 * come out IOVA-contiguous (else NV_ERR_INVALID_STATE: -EIO), and the client
 * gets the IOVA of each GPU page's first OS page: one address per 64 KiB
 * page. With 64 KiB OS pages the GPU pages are mapped as they are, with no
 * check.
 */
static int gsim_map_coherent(struct gsim_mapping *m)
{
	u32 per = GSIM_PAGE_SIZE >> PAGE_SHIFT, n = m->dm.entries, i, j, count;
	u64 *os, k;

	/* NV_ASSERT_OR_RETURN(pageSize >= os_page_size, NV_ERR_INVALID_ARGUMENT) */
	if (!per)
		return -EINVAL;
	if (per == 1) {
		for (i = 0; i < n; i++)
			m->dm.dma_addresses[i] += m->dev->dma_offset;
		atomic_long_add(n, &gsim.os_pages_mapped);
		return 0;
	}
	os = kvcalloc((size_t)n * per, sizeof(*os), GFP_KERNEL);
	if (!os)
		return -ENOMEM;
	for (i = 0, k = 0; i < n; i++)
		for (j = 0; j < per; j++, k++) {
			os[k] = m->dm.dma_addresses[i] + ((u64)j << PAGE_SHIFT) +
				m->dev->dma_offset;
			if (READ_ONCE(iova_split) && j == per - 1)
				os[k] += GSIM_PAGE_SIZE;
			/* A later submap's OS pages of a GPU page it shares. */
			if (READ_ONCE(submaps_apart) &&
			    k / GSIM_SUBMAP_PAGES != ((u64)i * per) / GSIM_SUBMAP_PAGES) {
				os[k] += GSIM_PAGE_SIZE;
				if (j == per - 1)
					atomic_long_inc(&gsim.submap_cuts);
			}
		}
	atomic_long_add(k, &gsim.os_pages_mapped);
	for (k = 1, count = 0; k < (u64)n * per; k++) {
		if (++count == per) {
			count = 0;
			continue;
		}
		if (os[k] != os[k - 1] + PAGE_SIZE) {
			kvfree(os);
			return -EIO;
		}
	}
	for (i = 0; i < n; i++)
		m->dm.dma_addresses[i] = os[(u64)i * per];
	kvfree(os);
	return 0;
}

/*
 * CDMM on 580.65.06-580.126.20 and 590.x (cdmm_map_path=struct_page):
 * osapi.c rm_p2p_dma_map_pages, past `if (pNv->mem_has_struct_page)` and
 * the topology check, maps each GPU page for the peer with
 * nv_dma_map_non_pci_peer (`if (pNv->coherent)`, "Map C2C PFNs"), which is
 * nv-dma.c nv_dma_map_mmio: one dma_map_resource of the 64 KiB page, as
 * MMIO. No OS-page inflation and no contiguity check (iova_split has no
 * effect); one address per GPU page.
 */
static int gsim_map_mmio(struct gsim_mapping *m)
{
	u32 i;

	for (i = 0; i < m->dm.entries; i++)
		m->dm.dma_addresses[i] += m->dev->dma_offset;
	atomic_long_add(m->dm.entries, &gsim.mmio_pages_mapped);
	return 0;
}

/*
 * bad_data=dma_entries: one entry per 4 KiB (16 per GPU page), each 4 KiB
 * on: a mapping of the kind the issue supposed, which NVIDIA's source never
 * returns (dma_mapping->entries is the table's).
 */
static int gsim_bad_dma_entries(struct gsim_mapping *m)
{
	u32 per = GSIM_PAGE_SIZE / SZ_4K, n = m->dm.entries, i, j;
	u64 *a = kcalloc((size_t)n * per, sizeof(*a), GFP_KERNEL);

	if (!a)
		return -ENOMEM;
	for (i = 0; i < n; i++)
		for (j = 0; j < per; j++)
			a[i * per + j] = m->dm.dma_addresses[i] + (u64)j * SZ_4K;
	kfree(m->dm.dma_addresses);
	m->dm.dma_addresses = a;
	m->dm.entries = n * per;
	return 0;
}

/*
 * The middle of dma_map_pages, under the API lock: osapi.c
 * rm_p2p_dma_map_pages. A coherent GPU maps over C2C (RmP2PDmaMapPages) and
 * skips the topology check; otherwise the PCIe topology rule, then BAR1
 * pages mapped for the peer. A CDMM GPU (cdmm=1) by release: 580.142 and
 * 595.44.02+ as any coherent GPU once nvidia-uvm's pagemap is referenced;
 * 580.65.06-580.126.20 and 590.x the topology rule, then MMIO maps. A
 * mapping built from a table freed before the read (m->dev NULL, poison)
 * is handed out as read.
 */
static int gsim_rm_map(struct gsim_mapping *m)
{
	u32 i;
	int ret;

	if (!m->dev)
		return 0;
	if (coherent && cdmm && cdmm_map_path == CDMM_STRUCT_PAGE) {
		/*
		 * 580.65.06 (to 580.126.20; 590.48.01 alike) osapi.c
		 * rm_p2p_dma_map_pages: `if (pNv->mem_has_struct_page)` is
		 * false in CDMM, so "Check if the topology is supported for
		 * third party p2p" (nv_grdma_pci_topology_supported:
		 * NV_ERR_NOT_SUPPORTED, -ENOTSUPP), then per GPU page
		 * nv_dma_map_non_pci_peer: MMIO.
		 */
		if (!gsim_topology_supported()) {
			atomic_long_inc(&gsim.topology_refusals);
			ret = -ENOTSUPP;
		} else {
			ret = gsim_map_mmio(m);
		}
	} else if (coherent && cdmm && !READ_ONCE(uvm_pagemap)) {
		/*
		 * 580.142 and 595.44.02 (to 595.45.04) osapi.c
		 * rm_p2p_dma_map_pages: `if (pNv->coherent)` →
		 * RmP2PDmaMapPages, which for NV_COHERENT_GPU_MEM_MODE_DRIVER
		 * takes nv_dma_get_dev_pagemap(pDmaAddresses[0]) (nv-dma.c:
		 * get_dev_pagemap; NULL without NV_MEMORY_DEVICE_COHERENT_PRESENT)
		 * and without one fails: "Failed to get a reference on
		 * dev_pagemap in CDMM(driver) mode", NV_ERR_NOT_SUPPORTED,
		 * -ENOTSUPP. The reference is dropped when the map returns.
		 */
		atomic_long_inc(&gsim.pagemap_refusals);
		ret = -ENOTSUPP;
	} else if (coherent) {
		ret = gsim_map_coherent(m);
	} else if (!gsim_topology_supported()) {
		atomic_long_inc(&gsim.topology_refusals);
		ret = -ENOTSUPP;	/* NV_ERR_NOT_SUPPORTED */
	} else {
		for (i = 0; i < m->dm.entries; i++)
			m->dm.dma_addresses[i] += m->dev->dma_offset;
		ret = 0;
	}
	if (!ret && READ_ONCE(bad_data) == BAD_DMA_ENTRIES)
		ret = gsim_bad_dma_entries(m);
	return ret;
}

/*
 * The part of dma_map_pages after the API lock: inserts the mapping into
 * the table's list under its semaphore. If the free path freed the table
 * meanwhile, the real driver writes into freed memory here, a window no
 * client can close: the mapping is handed out anyway, as the driver's is,
 * built from the table read before the free (a valid version, the freed
 * pages' addresses: a client that uses it maps memory the GPU gave back),
 * kept on gsim.stray_mappings and counted in raced_maps; the table's
 * tombstone makes any unmap of it a violation.
 */
static void gsim_map_insert(struct gsim_pin *pin, struct gsim_mapping *m)
{
	mutex_lock(&pin->table_lock);
	mutex_lock(&gsim.lock);
	if (pin->state == PIN_REVOKED || pin->state == PIN_PUT) {
		list_add_tail(&m->node, &gsim.stray_mappings);
		atomic_long_inc(&gsim.raced_maps);
	} else {
		list_add_tail(&m->node, &pin->mappings);
		gsim.live_mappings++;
	}
	mutex_unlock(&gsim.lock);
	mutex_unlock(&pin->table_lock);
}

int nvidia_p2p_dma_map_pages(struct pci_dev *peer,
			     struct nvidia_p2p_page_table *page_table,
			     struct nvidia_p2p_dma_mapping **dma_mapping)
{
	int ret = gsim_enter(FN_DMA_MAP_PAGES, true);
	struct gsim_mapping *m = NULL;
	struct gsim_pin *pin = NULL;

	if (!ret && !dma_mapping)
		ret = -EINVAL;
	if (!ret) {
		mutex_lock(&gsim.lock);
		ret = gsim_map_read_table(peer, page_table, &pin, &m);
		mutex_unlock(&gsim.lock);
	}
	if (!ret) {
		gsim_free_meanwhile(READ_ONCE(free_during_map), pin, true);
		/* rm_p2p_dma_map_pages: under the API lock. */
		ret = gsim_api_lock(FN_DMA_MAP_PAGES);
	}
	if (!ret) {
		ret = gsim_rm_map(m);
		gsim_api_unlock();
	}
	if (!ret) {
		gsim_map_insert(pin, m);
		*dma_mapping = &m->dm;
		m = NULL;
	}
	if (m)
		gsim_mapping_free(m);
	if (pin)
		gsim_put_pin(pin);
	return gsim_result(FN_DMA_MAP_PAGES, ret);
}
NVPM_SIM_EXPORT(nvidia_p2p_dma_map_pages);

/* dma_unmap_pages with the table's semaphore held. */
static int gsim_dma_unmap(struct gsim_pin *pin, struct pci_dev *peer,
			  struct nvidia_p2p_dma_mapping *dm)
{
	struct gsim_mapping *m;

	if (pin->state == PIN_REVOKED || pin->state == PIN_PUT) {
		gsim_violation(V_USE_AFTER_FREE,
			       "nvidia_p2p_dma_unmap_pages of page table #%llu after %s (the driver freed it and its mappings)",
			       pin->id, pin->state == PIN_PUT ? "its put" : "its free callback returned");
		return -EINVAL;
	}
	list_for_each_entry(m, &pin->mappings, node) {
		if (&m->dm != dm)
			continue;
		if (pin->state == PIN_IN_CALLBACK)
			atomic_long_inc(&gsim.unmaps_in_callback);
		if (m->dm.pci_dev != peer) {
			gsim_violation(V_BAD_PEER,
				       "nvidia_p2p_dma_unmap_pages with another peer than the mapping's (the real driver WARNs)");
			return -EINVAL;
		}
		mutex_lock(&gsim.lock);
		list_del(&m->node);
		gsim.live_mappings--;
		mutex_unlock(&gsim.lock);
		gsim_mapping_free(m);
		return 0;
	}
	/*
	 * Never the table's, or unmapped already (a second unmap): the driver's
	 * nv_p2p_remove_dma_mapping finds nothing in the table's list, and
	 * nvidia_p2p_dma_unmap_pages returns 0 without touching the mapping.
	 */
	gsim_own_check(O_UNKNOWN_MAPPING,
		       "nvidia_p2p_dma_unmap_pages of a mapping unknown to page table #%llu (never its, or unmapped already)",
		       pin->id);
	return 0;
}

/* No API lock: only the table's own semaphore, so also from a free callback. */
int nvidia_p2p_dma_unmap_pages(struct pci_dev *peer,
			       struct nvidia_p2p_page_table *page_table,
			       struct nvidia_p2p_dma_mapping *dma_mapping)
{
	int ret = gsim_enter(FN_DMA_UNMAP_PAGES, false);
	struct gsim_pin *pin;

	if (ret)
		return gsim_result(FN_DMA_UNMAP_PAGES, ret);
	pin = gsim_get_pin(page_table);
	if (!pin) {
		gsim_violation(V_UNKNOWN_TABLE,
			       "nvidia_p2p_dma_unmap_pages of an unknown page table");
		return gsim_result(FN_DMA_UNMAP_PAGES, -EINVAL);
	}
	if (READ_ONCE(free_during_unmap) && !gsim_in_callback()) {
		gsim_free_meanwhile(true, pin, false);
		/* A callback that does not wait for this unmap returns meanwhile. */
		wait_event_timeout(gsim.cb_wait, READ_ONCE(pin->state) != PIN_IN_CALLBACK,
				   HZ / 5);
	}
	mutex_lock(&pin->table_lock);
	ret = gsim_dma_unmap(pin, peer, dma_mapping);
	mutex_unlock(&pin->table_lock);
	gsim_put_pin(pin);
	return gsim_result(FN_DMA_UNMAP_PAGES, ret);
}
NVPM_SIM_EXPORT(nvidia_p2p_dma_unmap_pages);

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

/*
 * callback_return_ms (test hook, not NVIDIA's API): after a free callback
 * returns, the free path waits this long before it goes on, holding the API
 * lock, as a driver thread preempted right after the call would. Until the
 * free path goes on, the callback's last instructions may still be running
 * in its module's text on the real driver (nothing tells the driver when
 * they are done): a module that owns such a callback must not finish its
 * exit meanwhile (unloaded_in_callback, checked by a module notifier).
 */
static unsigned int callback_return_ms;
module_param(callback_return_ms, uint, 0644);
MODULE_PARM_DESC(callback_return_ms, "Test hook: the free path goes on this long (ms) after a free callback returned, API lock held; a module whose exit finishes meanwhile is an unloaded_in_callback violation");

/* Calls @pin's free callback as RM does: API lock held, gsim.lock not. */
static void gsim_call_back(struct gsim_pin *pin)
{
	unsigned int delay;

	spin_lock(&gsim.api_spin);
	gsim.cb_task = current;
	gsim.cb_pin_id = pin->id;
	gsim.cb_since = jiffies;
	gsim.cb_fn = pin->free_callback;
	spin_unlock(&gsim.api_spin);
	atomic_long_inc(&gsim.callbacks_started);
	wake_up_all(&gsim.cb_wait);
	pin->free_callback(pin->data);
	spin_lock(&gsim.api_spin);
	gsim.cb_task = NULL;
	spin_unlock(&gsim.api_spin);
	delay = READ_ONCE(callback_return_ms);
	if (delay) {
		atomic_long_inc(&gsim.callback_returns_held);
		wake_up_all(&gsim.cb_wait);
		msleep(delay);
	}
	spin_lock(&gsim.api_spin);
	gsim.cb_fn = NULL;
	spin_unlock(&gsim.api_spin);
}

/*
 * A module's exit finished (MODULE_STATE_GOING comes after mod->exit() in
 * delete_module, right before its memory is freed): if the callback the free
 * path has not gone past is in it, the module is unloaded while its code may
 * still run.
 */
static int gsim_module_notify(struct notifier_block *nb, unsigned long action,
			      void *data)
{
	struct module *mod = data;
	void (*fn)(void *data);

	if (action != MODULE_STATE_GOING)
		return NOTIFY_DONE;
	spin_lock(&gsim.api_spin);
	fn = gsim.cb_fn;
	spin_unlock(&gsim.api_spin);
	if (fn && within_module((unsigned long)fn, mod))
		gsim_violation(V_UNLOADED_IN_CALLBACK,
			       "module %s finished its exit before the driver went past its free callback %ps (page table #%llu): its text may still be running",
			       mod->name, fn, READ_ONCE(gsim.cb_pin_id));
	return NOTIFY_DONE;
}

static struct notifier_block gsim_module_nb = {
	.notifier_call = gsim_module_notify,
};

/*
 * Frees the buffer at @va; returns the number of callbacks fired. Holds the
 * API lock throughout, as RM's free of video memory does: every callback
 * runs under it, and each table is freed as soon as its callback returns.
 */
static int gsim_free(u64 va, bool hold)
{
	struct gsim_buffer *buf;
	struct gsim_pin *pin;
	int fired = 0;

	if (gsim_in_callback())
		return -EDEADLK;	/* a test hook misused; never from a client */
	atomic_inc(&gsim.frees_running);
	gsim_api_lock(FN_FREE);
	mutex_lock(&gsim.lock);
	list_for_each_entry(buf, &gsim.buffers, node)
		if (buf->va == va)
			goto found;
	mutex_unlock(&gsim.lock);
	gsim_api_unlock();
	atomic_dec(&gsim.frees_running);
	return -EINVAL;

found:
	WRITE_ONCE(gsim.freeing, true);
	/* From here on, the range is no longer GPU memory for new pins. */
	list_move_tail(&buf->node, &gsim.zombies);
	buf->freed = true;
	gsim.live_buffers--;
	buf->pins++;	/* keeps buf while its pins are retired */
	while ((pin = gsim_next_revocable(buf))) {
		WRITE_ONCE(pin->state, PIN_IN_CALLBACK);
		mutex_unlock(&gsim.lock);
		gsim_call_back(pin);
		if (hold)
			wait_event_timeout(gsim.cb_wait, atomic_read(&gsim.api_waiters), 5 * HZ);
		/* nv_p2p_free_platform_data: the table and its mappings go now. */
		gsim_retire(pin, PIN_REVOKED);
		atomic_long_inc(&gsim.callbacks);
		fired++;
		mutex_lock(&gsim.lock);
	}
	if (!--buf->pins)
		gsim_buffer_free(buf);
	mutex_unlock(&gsim.lock);
	WRITE_ONCE(gsim.freeing, false);
	gsim_api_unlock();
	atomic_dec(&gsim.frees_running);
	return fired;
}

/*
 * Test hooks for mofed_peer_sim's free_at= option (not NVIDIA's API): a
 * cudaFree from another thread at a chosen point of a registration.
 */
int nvidia_sim_free(u64 va)
{
	return gsim_free(va, false);
}
EXPORT_SYMBOL_GPL(nvidia_sim_free);

long nvidia_sim_callbacks_started(void)
{
	return atomic_long_read(&gsim.callbacks_started);
}
EXPORT_SYMBOL_GPL(nvidia_sim_callbacks_started);

/* ---- debugfs: ctl ----------------------------------------------------- */

static int gsim_cmd_alloc(int argc, char **argv, struct sim_reply *r)
{
	int layout = READ_ONCE(default_layout);
	bool localized = false;
	u64 size, va;
	int i, ret;

	if (sim_parse_size(argv[1], &size)) {
		sim_reply(r, "error: bad size '%s'\n", argv[1]);
		return -EINVAL;
	}
	for (i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "localized") && !localized) {
			localized = true;
			continue;
		}
		ret = match_string(gsim_layout_names, ARRAY_SIZE(gsim_layout_names), argv[i]);
		if (ret < 0 || i != 2) {
			sim_reply(r, "error: unknown layout '%s'\n", argv[i]);
			return -EINVAL;
		}
		layout = ret;
	}
	ret = gsim_alloc(size, layout, localized, &va);
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
	fired = gsim_free(va, false);
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

/*
 * Logs every live pin that a put from another process missed (gsim.lock
 * not held): the client believes it unpinned, the driver still holds the
 * memory and will call the callback back when the buffer is freed.
 */
static void gsim_report_leaked(const char *when)
{
	struct gsim_pin *pin;

	mutex_lock(&gsim.lock);
	list_for_each_entry(pin, &gsim.pins, node)
		if (pin->leaked_by)
			pr_err("leaked at %s: page table #%llu (va %#llx, %llu bytes) pinned by process %d: its put from process %d returned 0 without unpinning, its free callback still armed\n",
			       when, pin->id, pin->va, pin->len, pin->tgid, pin->leaked_by);
	mutex_unlock(&gsim.lock);
}

/*
 * "reset": every counter but the live counts; "reset violations": the
 * violation counters and the own checks only.
 */
static int gsim_cmd_reset(int argc, char **argv, struct sim_reply *r)
{
	int i, all = sim_reset_violations(argc, argv, gsim.violations, V_COUNT, r);

	if (all < 0)
		return all;
	gsim_report_leaked("reset");
	for (i = 0; i < O_COUNT; i++)
		atomic_long_set(&gsim.own_checks[i], 0);
	if (!all)
		return 0;
	for (i = 0; i < FN_COUNT; i++) {
		atomic_long_set(&gsim.calls[i], 0);
		atomic_long_set(&gsim.errors[i], 0);
	}
	atomic_long_set(&gsim.callbacks, 0);
	atomic_long_set(&gsim.raced_maps, 0);
	atomic_long_set(&gsim.raced_late_max_us, 0);
	atomic_long_set(&gsim.api_waits, 0);
	atomic_long_set(&gsim.unmaps_in_callback, 0);
	atomic_long_set(&gsim.os_pages_mapped, 0);
	atomic_long_set(&gsim.submap_cuts, 0);
	atomic_long_set(&gsim.topology_refusals, 0);
	atomic_long_set(&gsim.mmio_pages_mapped, 0);
	atomic_long_set(&gsim.pagemap_refusals, 0);
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
	seq_printf(s, "pins.leaked %u\n", READ_ONCE(gsim.leaked_pins));
	seq_printf(s, "mappings.live %u\n", READ_ONCE(gsim.live_mappings));
	seq_printf(s, "callbacks %ld\n", atomic_long_read(&gsim.callbacks));
	seq_printf(s, "callbacks.return_held %ld\n",
		   atomic_long_read(&gsim.callback_returns_held));
	seq_printf(s, "maps.raced %ld\n", atomic_long_read(&gsim.raced_maps));
	seq_printf(s, "maps.raced_late_max_us %ld\n", atomic_long_read(&gsim.raced_late_max_us));
	seq_printf(s, "api.waits_on_free %ld\n", atomic_long_read(&gsim.api_waits));
	seq_printf(s, "unmaps.in_callback %ld\n", atomic_long_read(&gsim.unmaps_in_callback));
	seq_printf(s, "maps.os_pages %ld\n", atomic_long_read(&gsim.os_pages_mapped));
	seq_printf(s, "maps.submap_cuts %ld\n", atomic_long_read(&gsim.submap_cuts));
	seq_printf(s, "dma.submap_pages %u\n", GSIM_SUBMAP_PAGES);
	seq_printf(s, "maps.topology_refused %ld\n", atomic_long_read(&gsim.topology_refusals));
	seq_printf(s, "maps.mmio_pages %ld\n", atomic_long_read(&gsim.mmio_pages_mapped));
	seq_printf(s, "maps.pagemap_refused %ld\n", atomic_long_read(&gsim.pagemap_refusals));
	seq_printf(s, "frames.used %u\n", bitmap_weight(gsim.frame_map, gsim.nframes));
	seq_printf(s, "frees.running %d\n", atomic_read(&gsim.frees_running));
	for (i = 0; i < V_COUNT; i++) {
		total += atomic_long_read(&gsim.violations[i]);
		seq_printf(s, "violation.%s %ld\n", gsim_violation_names[i],
			   atomic_long_read(&gsim.violations[i]));
	}
	seq_printf(s, "violations %ld\n", total);
	total = 0;
	for (i = 0; i < O_COUNT; i++) {
		total += atomic_long_read(&gsim.own_checks[i]);
		seq_printf(s, "own.%s %ld\n", gsim_own_names[i],
			   atomic_long_read(&gsim.own_checks[i]));
	}
	seq_printf(s, "own_checks %ld\n", total);
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
			seq_printf(s, "%#llx %llu %s %s %u%s\n", buf->va, buf->size,
				   gsim_layout_names[buf->layout],
				   buf->freed ? "freed" : "allocated", buf->pins,
				   buf->localized ? " localized" : "");
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
					   gsim_page_addr(buf->frames[i], false));
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
	static struct lock_class_key api_key;

	spin_lock_init(&gsim.api_spin);
	init_waitqueue_head(&gsim.api_wait);
	lockdep_init_map(&gsim.api_dep_map, "nvidia_rm_api_lock", &api_key, 0);
	mutex_init(&gsim.lock);
	INIT_LIST_HEAD(&gsim.buffers);
	INIT_LIST_HEAD(&gsim.zombies);
	INIT_LIST_HEAD(&gsim.pins);
	INIT_LIST_HEAD(&gsim.tombstones);
	INIT_LIST_HEAD(&gsim.quarantine);
	INIT_LIST_HEAD(&gsim.stray_mappings);
	INIT_LIST_HEAD(&gsim.devices);
	init_waitqueue_head(&gsim.cb_wait);
	gsim.next_va = GSIM_VA_BASE;
	gsim.nframes = ((unsigned long)vram_mb << 20) >> GSIM_PAGE_SHIFT;
	if (!gsim.nframes)
		return -EINVAL;
	if (cdmm && !coherent) {
		pr_err("cdmm=1 needs coherent=1: CoherentGPUMemoryMode=driver applies to coherent (C2C) GPUs only\n");
		return -EINVAL;
	}
	if (!GSIM_PT_HAS_FLAGS && page_table_version != PT_ABI_1_2) {
		pr_err("page_table_version=2.0: built with a 1.2 nv-p2p.h, whose table has no flags\n");
		return -EINVAL;
	}
	gsim.frame_map = bitmap_zalloc(gsim.nframes, GFP_KERNEL);
	if (!gsim.frame_map)
		return -ENOMEM;
	gsim_page_cache = KMEM_CACHE(nvidia_p2p_page, 0);
	if (!gsim_page_cache) {
		bitmap_free(gsim.frame_map);
		return -ENOMEM;
	}
	if (register_module_notifier(&gsim_module_nb)) {
		kmem_cache_destroy(gsim_page_cache);
		bitmap_free(gsim.frame_map);
		return -ENOMEM;
	}
	gsim_debugfs_init();
	pr_info("simulated GPU ready: %u MiB, page table ABI %s, persistent API %s%s%s%s\n",
		vram_mb, gsim_pt_abi_names[page_table_version],
		persistent_api ? "supported" : "refused",
		coherent ? ", coherent (C2C)" : "",
		cdmm ? ", CDMM, map path " : "",
		cdmm ? gsim_cdmm_path_names[cdmm_map_path] : "");
	return 0;
}

static void __exit gsim_exit(void)
{
	struct gsim_buffer *buf, *tbuf;
	struct gsim_pin *pin, *tpin;
	struct gsim_device *dev, *tdev;
	struct gsim_mapping *m, *tm;

	debugfs_remove_recursive(gsim.debugfs);
	gsim_flush_free_works();
	unregister_module_notifier(&gsim_module_nb);
	/* No client is left: the pins are retired without the API lock. */
	list_for_each_entry_safe(pin, tpin, &gsim.pins, node) {
		if (pin->leaked_by)
			gsim_violation(V_HELD_AT_UNLOAD,
				       "non-persistent page table #%llu (va %#llx, %llu bytes) still held at unload: leaked, its put from process %d returned 0 without unpinning (pinned by process %d)",
				       pin->id, pin->va, pin->len, pin->leaked_by, pin->tgid);
		else
			gsim_violation(V_HELD_AT_UNLOAD,
				       "%s page table #%llu (va %#llx, %llu bytes) still held at unload",
				       pin->persistent ? "persistent" : "non-persistent",
				       pin->id, pin->va, pin->len);
		gsim_retire(pin, PIN_PUT);
	}
	mutex_lock(&gsim.lock);
	list_for_each_entry_safe(pin, tpin, &gsim.tombstones, node) {
		gsim_unquarantine(pin);
		hash_del(&pin->hnode);
		list_del(&pin->node);
		kref_put(&pin->ref, gsim_pin_free);
	}
	list_for_each_entry_safe(m, tm, &gsim.stray_mappings, node) {
		list_del(&m->node);
		gsim_mapping_free(m);
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
