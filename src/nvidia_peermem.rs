// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! `nvidia_peermem`: the GPUDirect RDMA peer-memory client for NVIDIA GPUs.
//!
//! Layers, from the bottom: `abi` (generated bindings), the safe wrappers
//! that own all `unsafe`, the client logic, and this module entry.

use kernel::prelude::*;

mod abi;
mod params;

// Pure logic shared with the host tests; `pub` there is for the host library.
#[allow(dead_code, unreachable_pub)]
#[path = "core/src/lib.rs"]
mod peermem_core;

/// The module version (the repository's VERSION file).
const VERSION: &str = env!("NVPM_VERSION");

module! {
    type: NvidiaPeermem,
    name: "nvidia_peermem",
    authors: ["nvidia-peermem-rs developers"],
    description: "NVIDIA GPU memory plug-in for RDMA peer memory (GPUDirect RDMA), in Rust",
    license: "Dual BSD/GPL",
}

struct NvidiaPeermem;

impl kernel::Module for NvidiaPeermem {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let params = params::read();
        pr_info!(
            "version {} loaded (persistent_api_support={}, peerdirect_support={})\n",
            VERSION,
            u8::from(params.persistent_api),
            u8::from(params.peerdirect)
        );
        Ok(NvidiaPeermem)
    }
}

impl Drop for NvidiaPeermem {
    fn drop(&mut self) {
        pr_info!("unloaded\n");
    }
}
