/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * What the carried crates' C side needs and an older kernel lacks or names
 * differently, each defined only where the kernel does not have it. Included
 * first (-include) by bindgen for the bindings and the helpers, and by the
 * compiler for the helpers.
 *
 * Where the kernel's own header cannot tell (a function, not a macro), the
 * build's compile tests do: kbuild/carried/conftest.sh writes
 * NVPM_HAVE_<API> to build/carried/conftest.h, named by NVPM_CONFTEST_H
 * (kbuild/carried.mk). Not LINUX_VERSION_CODE: vendor kernels backport
 * APIs without changing it.
 */
#ifndef NVPM_CARRIED_COMPAT_H
#define NVPM_CARRIED_COMPAT_H

#ifndef NVPM_CONFTEST_H
#error "compat.h needs NVPM_CONFTEST_H, the compile tests' results"
#endif
#include NVPM_CONFTEST_H

#include <linux/errno.h>
#include <linux/highmem.h>
#include <linux/mm.h>
#include <linux/percpu.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/vmalloc.h>

/*
 * Allocation with an alignment and a NUMA node (7.x names; the _node_align
 * variants are exported, vrealloc of 6.12 is not). The Rust allocators pass
 * NUMA_NO_NODE unless asked otherwise; kmalloc's natural alignment covers
 * the Kmalloc allocator's padded layouts. Without the kernel's vrealloc,
 * vmalloc'd memory can be allocated and freed but not resized: that fails
 * (NULL, an allocation error to the caller). nvidia_peermem allocates only
 * through Kmalloc (KBox, KVec).
 */
#ifndef krealloc_node_align
static inline void *nvpm_krealloc_node_align(const void *p, size_t size,
					     unsigned long align, gfp_t flags, int nid)
{
	return krealloc(p, size, flags);
}
#define krealloc_node_align nvpm_krealloc_node_align
#endif

#ifndef vrealloc_node_align
static inline void *nvpm_vrealloc_node_align(const void *p, size_t size,
					     unsigned long align, gfp_t flags, int nid)
{
	if (!size) {
		vfree(p);
		return NULL;
	}
	if (p || align > PAGE_SIZE)
		return NULL;
	return __vmalloc(size, flags);
}
#define vrealloc_node_align nvpm_vrealloc_node_align
#endif

#ifndef kvrealloc_node_align
static inline void *nvpm_kvrealloc_node_align(const void *p, size_t size,
					      unsigned long align, gfp_t flags, int nid)
{
	if (!size) {
		kvfree(p);
		return NULL;
	}
	if (!p)
		return align > PAGE_SIZE ? NULL : kvmalloc(size, flags);
	if (is_vmalloc_addr(p))
		return NULL;
	return krealloc(p, size, flags);
}
#define kvrealloc_node_align nvpm_kvrealloc_node_align
#endif

/*
 * Spinlocks that nest interrupt disabling (7.0: spin_lock_irq_disable,
 * include/linux/interrupt_rc.h): interrupts go off at the outermost
 * acquisition and come back at its release, counted per CPU.
 */
#ifndef raw_spin_lock_irq_disable
DECLARE_PER_CPU(unsigned long, nvpm_irq_disable_count);
DECLARE_PER_CPU(unsigned long, nvpm_irq_disable_flags);

static inline void nvpm_local_interrupt_disable(void)
{
	unsigned long flags;

	local_irq_save(flags);
	if (raw_cpu_inc_return(nvpm_irq_disable_count) == 1)
		raw_cpu_write(nvpm_irq_disable_flags, flags);
}

static inline void nvpm_local_interrupt_enable(void)
{
	if (raw_cpu_dec_return(nvpm_irq_disable_count) == 0)
		local_irq_restore(raw_cpu_read(nvpm_irq_disable_flags));
}

#define local_interrupt_disable nvpm_local_interrupt_disable
#define local_interrupt_enable nvpm_local_interrupt_enable

static inline void spin_lock_irq_disable(spinlock_t *lock)
{
	nvpm_local_interrupt_disable();
	spin_lock(lock);
}

static inline void spin_unlock_irq_enable(spinlock_t *lock)
{
	spin_unlock(lock);
	nvpm_local_interrupt_enable();
}

static inline int spin_trylock_irq_disable(spinlock_t *lock)
{
	nvpm_local_interrupt_disable();
	if (spin_trylock(lock))
		return 1;
	nvpm_local_interrupt_enable();
	return 0;
}
#endif

/*
 * atomic_add_negative with an ordering (6.4;
 * NVPM_HAVE_ATOMIC_ADD_NEGATIVE_ORDERED): the fully ordered one is a valid
 * implementation of each weaker ordering.
 */
#ifndef NVPM_HAVE_ATOMIC_ADD_NEGATIVE_ORDERED
#define atomic_add_negative_acquire atomic_add_negative
#define atomic_add_negative_release atomic_add_negative
#define atomic_add_negative_relaxed atomic_add_negative
#define atomic64_add_negative_acquire atomic64_add_negative
#define atomic64_add_negative_release atomic64_add_negative
#define atomic64_add_negative_relaxed atomic64_add_negative
#endif

/*
 * __realloc_size (5.16): an allocation-size hint to the compiler; the
 * helpers' reallocations compile without it.
 */
#ifndef __realloc_size
#define __realloc_size(x, ...)
#endif

/*
 * try_cmpxchg with an ordering on any type (5.10 has only x86's fully
 * ordered one): the fully ordered one is valid for each weaker ordering.
 */
#ifndef try_cmpxchg_acquire
#define try_cmpxchg_acquire try_cmpxchg
#define try_cmpxchg_release try_cmpxchg
#define try_cmpxchg_relaxed try_cmpxchg
#endif

/*
 * kmap_local_page (5.11; NVPM_HAVE_KMAP_LOCAL_PAGE): without it, kmap_atomic,
 * which also disables preemption and page faults until the unmap; the
 * kernel crate maps a page only to copy from or to it. Without HIGHMEM
 * (x86_64) both are the page's address in the direct map.
 */
#ifndef NVPM_HAVE_KMAP_LOCAL_PAGE
#define kmap_local_page(page) kmap_atomic(page)
#define kunmap_local(addr) kunmap_atomic((void *)(addr))
#endif

/*
 * printk is _printk from 5.15 on (NVPM_HAVE__PRINTK). The kernel crate calls
 * _printk, and the carried objects' calls go to nvpm_carried_printk
 * (carried.mk): declared only so that the bindings have it.
 */
#ifndef NVPM_HAVE__PRINTK
int _printk(const char *fmt, ...);
#endif

/*
 * TASK_FREEZABLE (6.1): before it a freezable sleep is a different call,
 * not a state bit. The kernel crate's freezable wait
 * (CondVar::wait_interruptible_freezable, which nvidia_peermem does not
 * use) is then a plain interruptible one.
 */
#ifndef TASK_FREEZABLE
#define TASK_FREEZABLE 0
#endif

/*
 * errname is exported from 6.7 on (NVPM_HAVE_ERRNAME: declared, and
 * exported in the kernel's Module.symvers). Where it is not, the C helpers
 * call nvpm_carried_errname (helpers.c), and so do the Rust objects
 * (carried.mk redirects their calls); the bindings keep the kernel's name.
 */
#if !defined(NVPM_HAVE_ERRNAME) && !defined(__BINDGEN__)
#include <linux/errname.h>
#define errname nvpm_carried_errname
const char *nvpm_carried_errname(int err);
#endif

/* Error codes the kernel crate names (7.x include/linux/errno.h). */
#ifndef EFSCORRUPTED
#define EFSCORRUPTED	EUCLEAN
#endif
#ifndef EFSBADCRC
#define EFSBADCRC	EBADMSG
#endif
#ifndef EFTYPE
#define EFTYPE		134
#endif

/*
 * The carried crate's formatter of a Rust fmt::Arguments, which
 * nvpm_carried_printk (helpers.c) calls for every printk of the crates.
 */
char *rust_fmt_argument(char *buf, char *end, const void *ptr);

#endif
