// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! `nvidia_peermem`: the GPUDirect RDMA peer-memory client for NVIDIA GPUs.
//!
//! Layers, from the bottom: `abi` (generated bindings); the safe wrappers
//! that own all `unsafe` (`nvidia_p2p`, `peer_mem`, `scatterlist`, `shim`,
//! `stats`); the client logic (`clients`, no `unsafe`); this module entry.
//! The pure logic shared with the host tests is `peermem_core`.

use kernel::prelude::*;

mod abi;
mod clients;
mod nvidia_p2p;
mod peer_mem;
mod scatterlist;
mod shim;
mod stats;

// Pure logic shared with the host tests; `pub` there is for the host
// library, so none of it is reachable from here. What only the host tests
// use is marked where it is defined (`cfg_attr(MODULE, allow(dead_code))`).
#[allow(unreachable_pub)]
#[path = "core/src/lib.rs"]
mod peermem_core;

use clients::{Clients, Config};

/// The module version (the repository's VERSION file).
const VERSION: &str = env!("NVPM_VERSION");
const _: () = assert!(VERSION.len() <= peer_mem::VERSION_MAX_LEN);

module! {
    type: NvidiaPeermem,
    name: "nvidia_peermem",
    authors: ["nvidia-peermem-rs developers"],
    description: "NVIDIA GPU memory plug-in for RDMA peer memory (GPUDirect RDMA), in Rust",
    license: "Dual BSD/GPL",
}

struct NvidiaPeermem {
    clients: Option<Clients>,
    _stats: shim::StatsFile,
    // Dropped after the clients: their tables come from it.
    _sg_cache: scatterlist::SgCache,
}

impl kernel::Module for NvidiaPeermem {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let params = shim::read();
        let config = Config {
            persistent_api: params.persistent_api,
            peerdirect: params.peerdirect,
        };
        let sg_cache = scatterlist::SgCache::create()?;
        let stats = shim::StatsFile::create();
        let clients = Clients::register(&config, VERSION)?;
        let mut names = clients.names();
        let (first, second) = (names.next(), names.next());
        pr_info!(
            "version {} loaded: clients {} and {} (persistent_api_support={}, peerdirect_support={}); peer-memory core {}, {}; built for NVIDIA P2P page tables {}\n",
            VERSION,
            first.map_or(c"-", |n| n),
            second.map_or(c"-", |n| n),
            u8::from(params.persistent_api),
            u8::from(params.peerdirect),
            peer_mem::CoreName::get().as_c_str(),
            config.client_layout(),
            nvidia_p2p::HEADER_PAGE_TABLE_ABI,
        );
        drop(names);
        Ok(NvidiaPeermem {
            clients: Some(clients),
            _stats: stats,
            _sg_cache: sg_cache,
        })
    }
}

impl Drop for NvidiaPeermem {
    fn drop(&mut self) {
        // Unregistering waits until the core released every registration
        // (and so unpinned it).
        drop(self.clients.take());
        // A free callback that dropped a registration's last reference
        // (and with it the reference on this module) may still be returning
        // through this module's text.
        nvidia_p2p::wait_for_callbacks();
        pr_info!("unloaded\n");
    }
}
