// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! `nvidia-peermem-doctor`: checks a host for GPUDirect RDMA with
//! `nvidia_peermem` the way the troubleshooting guides do by hand.
//!
//! It reads files (sysfs, procfs, `/boot`, `/lib/modules`, `/etc`), all
//! below a root directory, and runs only `rustc` and `bindgen`, to ask
//! what they are ([`toolchain`]), so it runs on a busybox-only system and
//! against fixture trees in tests. Layers, from the bottom: [`root`] (file
//! access) and [`inflate`] (gzip), [`pci`] and [`bars`], [`kmod`],
//! [`kconfig`], [`signing`], [`toolchain`], [`carried`] and [`topology`]
//! (facts), [`checks`] (verdicts), [`report`], [`output`] and
//! [`prometheus`] (rendering).

// Only `cuda` calls C (libcuda through dlopen), with SAFETY comments.
#![deny(unsafe_code)]

pub mod bars;
pub mod carried;
pub mod checks;
pub mod cuda;
pub mod elf;
pub mod host;
pub mod inflate;
pub mod kconfig;
pub mod klog;
pub mod kmod;
pub mod nccl;
pub mod output;
pub mod pci;
pub mod prometheus;
pub mod report;
pub mod root;
pub mod signing;
pub mod text;
pub mod toolchain;
pub mod topology;

pub use checks::{Check, Facts, KernelFacts, ModuleFacts, Status};
pub use report::{run, run_with, Report};
pub use root::Root;
