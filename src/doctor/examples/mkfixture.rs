// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! Writes a fixture tree for a look by hand:
//! `cargo run -p nvidia-peermem-doctor --example mkfixture -- dgx /tmp/dgx`,
//! then `nvidia-peermem-doctor --root /tmp/dgx`.

#![forbid(unsafe_code)]

#[path = "../tests/doctor/support/fixture.rs"]
mod fixture;

use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [name, dir] = args.as_slice() else {
        eprintln!(
            "usage: mkfixture NAME DIR (NAME is a directory of tests/fixtures; DIR must not exist)"
        );
        return ExitCode::from(2);
    };
    if Path::new(dir).exists() {
        eprintln!("mkfixture: {dir} exists");
        return ExitCode::from(2);
    }
    match fixture::Tree::load(name).and_then(|t| t.write(Path::new(dir))) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mkfixture: {e}");
            ExitCode::FAILURE
        }
    }
}
