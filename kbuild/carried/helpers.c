// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The pinned release's C helpers (rust/helpers/, on the include path) that
 * the carried `kernel` crate calls: static inline functions and macros of the
 * kernel's core, compiled here against the headers of the kernel the module
 * is built for. kbuild/carried/compat.h comes first (-include).
 */
#include <linux/compiler_types.h>

/* Plain functions: the module calls them from Rust, nothing inlines them. */
#define __rust_helper

#include "atomic.c"
#include "atomic_ext.c"
#include "barrier.c"
#include "bug.c"
#include "build_bug.c"
#include "completion.c"
#include "err.c"
#include "interrupt.c"
#include "mutex.c"
#include "page.c"
#include "pid_namespace.c"
#include "rcu.c"
#include "refcount.c"
#include "signal.c"
#include "slab.c"
#include "spinlock.c"
#include "sync.c"
#include "task.c"
#include "time.c"
#include "vmalloc.c"
#include "wait.c"

#ifndef __BINDGEN__
#ifndef raw_spin_lock_irq_disable
DEFINE_PER_CPU(unsigned long, nvpm_irq_disable_count);
DEFINE_PER_CPU(unsigned long, nvpm_irq_disable_flags);
#endif

#ifndef NVPM_HAVE_ERRNAME
/* errname is not exported (compat.h): the Rust side prints the number. */
const char *nvpm_carried_errname(int err)
{
	return NULL;
}
#endif

#include <linux/printk.h>
#include <linux/string.h>

/*
 * printk for the carried crates: vsprintf's %pA would call the kernel's
 * rust_fmt_argument, absent without CONFIG_RUST and built against another
 * core's fmt::Arguments with it; this one calls the carried crate's. They print with
 * two formats (rust/kernel/print.rs): KERN_<level> "%s: %pA" with the module
 * name, and KERN_CONT "%pA". The arguments are formatted by the crate's own
 * rust_fmt_argument into a buffer, then printed as a string; a line longer
 * than the buffer ends in "...".
 */
#define NVPM_PRINTK_LINE 512
int nvpm_carried_printk(const char *fmt, ...)
{
	char line[NVPM_PRINTK_LINE];
	const char *level = "", *rest = fmt, *name = NULL;
	const void *args;
	char *end;
	va_list ap;

	if (rest[0] == KERN_SOH_ASCII && rest[1]) {
		level = rest;
		rest += 2;
	}
	va_start(ap, fmt);
	if (!strcmp(rest, "%s: %pA"))
		name = va_arg(ap, const char *);
	args = va_arg(ap, const void *);
	va_end(ap);

	end = rust_fmt_argument(line, line + sizeof(line) - 1, args);
	if (end >= line + sizeof(line) - 1) {
		end = line + sizeof(line) - 1;
		memcpy(end - 3, "...", 3);
	}
	*end = '\0';
	if (name)
		return printk("%.2s%s: %s", level, name, line);
	return printk("%.2s%s", level, line);
}
#endif
