// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//! A function whose address is taken, an indirect call and returns: what
//! tests/kocheck/negative.sh compiles with carried mode's flags, and without
//! one of them, to show that check-ko.py sees each flag missing.
#![no_std]

/// Called through `PROBE_TABLE` only: its address is taken.
#[no_mangle]
pub extern "C" fn probe_target(x: u64) -> u64 {
    x.wrapping_mul(3)
}

/// A table of function pointers in data, like a vtable.
#[no_mangle]
pub static PROBE_TABLE: [extern "C" fn(u64) -> u64; 1] = [probe_target];

/// An indirect call, then a return.
#[no_mangle]
pub extern "C" fn probe_call(f: extern "C" fn(u64) -> u64, x: u64) -> u64 {
    f(x).wrapping_add(1)
}
