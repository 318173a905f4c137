// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! `nvidia-peermem-doctor`: checks a host for GPUDirect RDMA with
//! `nvidia_peermem` the way the troubleshooting guides do by hand.
//!
//! It only reads files (sysfs, procfs, `/lib/modules`, `/etc`), all below a
//! root directory, so it runs on a busybox-only system and against fixture
//! trees in tests. Layers, from the bottom: [`root`] (file access),
//! [`pci`] and [`bars`], [`kmod`] and [`topology`] (facts), [`checks`] (verdicts),
//! [`report`], [`output`] and [`json`] (rendering).

#![forbid(unsafe_code)]

pub mod bars;
pub mod checks;
pub mod json;
pub mod kmod;
pub mod output;
pub mod pci;
pub mod report;
pub mod root;
pub mod topology;

pub use checks::run;
pub use report::{Check, Facts, ModuleFacts, Report, Status};
pub use root::Root;
