// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! The doctor's view of where a build of the module takes its CRCs:
//! `cargo run -p nvidia-peermem-doctor --example exporters -- ROOT RELEASE`
//! prints, for each exporter, `file PATH`, the kernel it is built for as
//! `built-for RELEASE` and its exported CRCs as `crc 0xCRC SYMBOL`, or
//! `none WHOSE`. tests/neighbours/lookup.sh holds it
//! to scripts/find-symvers.sh on every layout it builds: the build and the
//! doctor must find the same files and read the same CRCs.

#![forbid(unsafe_code)]

use std::path::Path;
use std::process::ExitCode;

use peermem_doctor::host::build::{exporter_file, read_ko, EXPORTERS};
use peermem_doctor::host::paths::EXPORTERS_CONF;
use peermem_doctor::Root;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, release] = args.as_slice() else {
        eprintln!("usage: exporters ROOT RELEASE");
        return ExitCode::from(2);
    };
    let root = match Root::new(Path::new(dir)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("exporters: {e}");
            return ExitCode::from(2);
        }
    };
    let conf = root.read_text(EXPORTERS_CONF);
    for (whose, symbol) in EXPORTERS {
        let Some(file) = exporter_file(&root, conf.as_deref(), release, symbol) else {
            println!("none\t{whose}");
            continue;
        };
        println!("file\t{file}");
        match read_ko(&root, &file) {
            Some(ko) => {
                if let Some(p) = ko.problem {
                    println!("problem\t{p}");
                }
                if let Some(k) = ko
                    .modinfo
                    .get("vermagic")
                    .and_then(|v| v.split_whitespace().next())
                {
                    println!("built-for\t{k}");
                }
                for (name, crc) in ko.exports {
                    println!("crc\t0x{crc:08x}\t{name}");
                }
            }
            None => println!("problem\tunreadable"),
        }
    }
    ExitCode::SUCCESS
}
