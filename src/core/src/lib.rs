// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! Pure logic of `nvidia_peermem`: no kernel, no allocation, no `unsafe`.
//!
//! The kernel module includes these files through `#[path]`; on the host the
//! same files are a `no_std` library exercised by `cargo test`.

#![cfg_attr(not(MODULE), no_std)]
#![forbid(unsafe_code)]

pub mod client;
pub mod diag;
pub mod protocol;
pub mod range;
pub mod sgplan;
pub mod state;
pub mod version;
