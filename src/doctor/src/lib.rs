// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! `nvidia-peermem-doctor`: checks a host for GPUDirect RDMA with
//! `nvidia_peermem` the way the troubleshooting guides do by hand.
//!
//! It reads files (sysfs, procfs, `/boot`, `/lib/modules`, `/etc`), all
//! below a root directory (in tests, a model of one in memory), and runs
//! only `rustc` and `bindgen`, to ask what they are, so it runs on a
//! busybox-only system and against fixture trees in tests. Three floors, each naming only those below it
//! (`tests/doctor/graph.rs` holds them so):
//!
//! * [`host`]: everything read from the host, into one [`host::Host`];
//!   [`text`], how numbers and lists are written;
//! * [`checks`]: each check judges the `Host` and returns a [`Check`];
//! * [`report`] (a run: host, then checks), [`output`] and [`prometheus`]
//!   (renderings), and the command line.

// Only `host::cuda` calls C (libcuda through dlopen), with SAFETY comments.
#![deny(unsafe_code)]

pub mod checks;
pub mod host;
pub mod output;
pub mod prometheus;
pub mod report;
pub mod text;

pub use checks::{Check, Facts, KernelFacts, ModuleFacts, Status};
pub use host::root::Root;
pub use report::{run, run_with, Report};
