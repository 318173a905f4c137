// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! Integration tests of nvidia-peermem-doctor, one test crate:
//! `fixtures` (one test per fixture tree), `cli` (the command line and
//! broken trees), `graph` (no import circle), `support` (tree generator, expectations; JSON is read
//! with serde_json).

#![forbid(unsafe_code)]

mod cli;
mod fixtures;
mod graph;
mod support;
