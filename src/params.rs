// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! The module parameters. The C shim owns them (Rust parameters are not
//! visible in sysfs) and refuses any value but 0 and 1 while parsing.

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
