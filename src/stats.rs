// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! Statistics for admins: lock-free counters, read through
//! `/sys/kernel/debug/nvidia_peermem/stats` (one `name value` per line).

use core::sync::atomic::{AtomicU64, Ordering};
use kernel::ffi::{c_char, c_uint};
use kernel::str::CStrExt;

macro_rules! counters {
    ($($variant:ident => $name:literal,)*) => {
        /// One statistic.
        #[derive(Debug, Clone, Copy)]
        pub(crate) enum Counter {
            $(
                #[allow(missing_docs)]
                $variant,
            )*
        }

        const NAMES: &[&core::ffi::CStr] = &[$($name,)*];
    };
}

counters! {
    ContextsLive => c"contexts_live",
    PinnedBytes => c"pinned_bytes",
    Registrations => c"registrations",
    // Registrations whose page table had NVIDIA_P2P_PAGE_TABLE_FLAGS_CPU_CACHEABLE.
    CpuCacheablePins => c"cpu_cacheable_pins",
    Deregistrations => c"deregistrations",
    Declines => c"declines",
    Invalidations => c"invalidations",
    InvalidationsForwarded => c"invalidations_forwarded",
    // The name predates the unpin's move from a workqueue to release.
    UnpinsInRelease => c"deferred_releases",
    Sges => c"sges",
    ErrorsAcquire => c"errors_acquire",
    ErrorsDmaMap => c"errors_dma_map",
    OutOfOrderCalls => c"errors_out_of_order",
}

const COUNT: usize = NAMES.len();

/// All counters.
pub(crate) struct Stats([AtomicU64; COUNT]);

/// The module's statistics.
pub(crate) static STATS: Stats = Stats([const { AtomicU64::new(0) }; COUNT]);

impl Stats {
    /// Adds `n` to `c`.
    pub(crate) fn add(&self, c: Counter, n: u64) {
        // CAST: a counter's index.
        self.0[c as usize].fetch_add(n, Ordering::Relaxed);
    }

    /// Subtracts `n` from `c`.
    pub(crate) fn sub(&self, c: Counter, n: u64) {
        // CAST: a counter's index.
        self.0[c as usize].fetch_sub(n, Ordering::Relaxed);
    }
}

/// For the C shim's debugfs file: the number of counters.
#[no_mangle]
pub(crate) extern "C" fn nvpm_stat_count() -> c_uint {
    // CAST: a handful of counters.
    COUNT as c_uint
}

/// For the C shim's debugfs file: counter `i`'s name (NUL-terminated, static).
#[no_mangle]
pub(crate) extern "C" fn nvpm_stat_name(i: c_uint) -> *const c_char {
    // CAST: c_uint fits usize.
    NAMES
        .get(i as usize)
        .map_or(core::ptr::null(), |n| n.as_char_ptr())
}

/// For the C shim's debugfs file: counter `i`'s value.
#[no_mangle]
pub(crate) extern "C" fn nvpm_stat_value(i: c_uint) -> u64 {
    // CAST: c_uint fits usize.
    STATS
        .0
        .get(i as usize)
        .map_or(0, |v| v.load(Ordering::Relaxed))
}
