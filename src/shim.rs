// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! Safe wrappers over part of the module's own C shim (`src/shim.c`): the
//! module parameters (C owns them: Rust parameters are not visible in
//! sysfs), the shared rate limit for error lines, and the debugfs
//! statistics file; and the task helpers the client logic needs (its
//! thread id, a short sleep). The shim's other parts are wrapped where
//! their API is: the scatterlist caches in `scatterlist.rs`, the
//! peer-memory API in `peer_mem.rs`, `to_pci_dev` in `nvidia_p2p.rs`.

use crate::abi;

/// The parameters as the module reads them once at load.
#[derive(Clone, Copy)]
pub(crate) struct Params {
    /// `persistent_api_support`: one persistent `nv_mem` client (1) or the
    /// revocable `nv_mem` plus persistent `nv_mem_nc` (0).
    pub(crate) persistent_api: bool,
    /// `peerdirect_support`: leave the `_ex` fields zero for MOFED 4.1 to 5.0.
    pub(crate) peerdirect: bool,
}

/// Reads the parameters (set before `init` runs, read-only afterwards).
pub(crate) fn read() -> Params {
    // SAFETY: both functions only read an `int` owned by the shim.
    let (persistent, peerdirect) = unsafe {
        (
            abi::nvpm_param_persistent_api_support(),
            abi::nvpm_param_peerdirect_support(),
        )
    };
    Params {
        persistent_api: persistent != 0,
        peerdirect: peerdirect != 0,
    }
}

/// The kernel's `PAGE_SHIFT`.
pub(crate) const PAGE_SHIFT: u32 = abi::NVPM_PAGE_SHIFT;

/// Whether an error line on a hot path may be printed now.
pub(crate) fn ratelimit() -> bool {
    // SAFETY: `__ratelimit` on the shim's static state; callable from any context.
    unsafe { abi::nvpm_ratelimit() }
}

/// `/sys/kernel/debug/nvidia_peermem/stats`, removed on drop.
pub(crate) struct StatsFile(());

impl StatsFile {
    /// Creates the file; a missing debugfs is not an error.
    pub(crate) fn create() -> Self {
        // SAFETY: called once, at module init.
        unsafe { abi::nvpm_debugfs_init() };
        Self(())
    }
}

impl Drop for StatsFile {
    fn drop(&mut self) {
        // SAFETY: pairs with `create`; removal waits for open readers.
        unsafe { abi::nvpm_debugfs_exit() };
    }
}

/// The thread id of the calling task.
pub(crate) fn current_pid() -> kernel::task::Pid {
    kernel::current!().pid()
}

/// Sleeps for about 100 µs (waiting out another thread's short call).
pub(crate) fn sleep_briefly() {
    kernel::time::delay::fsleep(kernel::time::Delta::from_micros(100));
}
