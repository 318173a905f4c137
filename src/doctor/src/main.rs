// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! Command line: `nvidia-peermem-doctor [--root DIR] [--json | --prometheus] [--verbose]`,
//! `nvidia-peermem-doctor --cuda-probe`.
//!
//! Exit status: 0 when nothing blocks GPUDirect RDMA, 1 when something
//! does (a FAIL line), 2 on a usage error.

#![forbid(unsafe_code)]

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use peermem_doctor::host::cuda;
use peermem_doctor::{output, prometheus, run, run_with, Root};

const USAGE: &str = "\
usage: nvidia-peermem-doctor [--root DIR] [--json | --prometheus] [--verbose]
       nvidia-peermem-doctor --cuda-probe

Checks this host for GPUDirect RDMA with nvidia_peermem: whether the kernel can
host it (modules, the way a build gets its Rust support and what that lacks:
toolchain, headers; signing), the module, conflicting
modules, the NVIDIA driver, the RDMA core's peer-memory API, RDMA devices, the
PCIe path between GPUs and NICs, ACS, the IOMMU, BAR1 and what NCCL/UCX detect;
then which path jobs take: dma-buf or peer memory, the path NCCL computes per
GPU and NIC, the driver's own settings, stale builds, what cluster tooling sees.

  --root DIR    read /sys, /proc, /boot, /lib/modules, /etc... below DIR (default /)
  --json        print the report as JSON
  --prometheus  print the module's statistics and the checks as Prometheus metrics
  --cuda-probe  ask libcuda.so.1 about each GPU (GPUDirect RDMA, dma-buf, a 2 MiB
                dma-buf export) and print its record (cuda-probe.txt of a capture)
  -v, --verbose print the facts behind each line
  -h, --help    print this help
  -V, --version print the version

Exit status: 0 nothing blocks, 1 a blocking problem (FAIL), 2 usage error.
";

/// How to print the report.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    Table,
    Json,
    Prometheus,
}

/// Parsed command line.
struct Args {
    root: PathBuf,
    format: Format,
    verbose: bool,
}

/// What the command line asks for.
enum Cmd {
    Run(Args),
    Print(String),
    CudaProbe,
}

/// The command line, split into options and values by lexopt (`--root DIR`
/// and `--root=DIR`, `-vV`); what they mean and exclude is decided here.
fn parse(argv: impl IntoIterator<Item = OsString>) -> Result<Cmd, String> {
    use lexopt::prelude::*;
    let mut args = Args {
        root: PathBuf::from("/"),
        format: Format::Table,
        verbose: false,
    };
    let (mut json, mut prometheus, mut probe, mut root) = (false, false, false, false);
    let mut p = lexopt::Parser::from_args(argv);
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        match arg {
            Long("json") => json = true,
            Long("prometheus") => prometheus = true,
            Long("cuda-probe") => probe = true,
            Short('v') | Long("verbose") => args.verbose = true,
            Short('h') | Long("help") => return Ok(Cmd::Print(USAGE.to_string())),
            Short('V') | Long("version") => {
                return Ok(Cmd::Print(format!(
                    "nvidia-peermem-doctor {}\n",
                    output::VERSION
                )))
            }
            Long("root") => {
                let dir = p.value().map_err(|e| e.to_string())?;
                if dir.is_empty() {
                    return Err("--root needs a directory".to_string());
                }
                if root {
                    return Err("--root given twice".to_string());
                }
                (root, args.root) = (true, PathBuf::from(dir));
            }
            _ => return Err(arg.unexpected().to_string()),
        }
    }
    if json && prometheus {
        return Err("--json and --prometheus exclude each other".to_string());
    }
    if probe {
        if json || prometheus || args.verbose || root {
            return Err("--cuda-probe takes no other option".to_string());
        }
        return Ok(Cmd::CudaProbe);
    }
    args.format = if json {
        Format::Json
    } else if prometheus {
        Format::Prometheus
    } else {
        Format::Table
    };
    Ok(Cmd::Run(args))
}

/// Writes to stdout; a reader that went away (`doctor | head`) is not an
/// error worth a panic, and the exit status still tells the verdict.
fn emit(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}

fn main() -> ExitCode {
    let args = match parse(std::env::args_os().skip(1)) {
        Ok(Cmd::Run(args)) => args,
        Ok(Cmd::Print(text)) => {
            emit(&text);
            return ExitCode::SUCCESS;
        }
        Ok(Cmd::CudaProbe) => {
            emit(&cuda::probe(true).record());
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprint!("nvidia-peermem-doctor: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let root = match Root::new(&args.root) {
        Ok(root) => root,
        Err(e) => {
            eprintln!("nvidia-peermem-doctor: --root {e}");
            return ExitCode::from(2);
        }
    };
    let report = if args.root == std::path::Path::new("/") {
        run(&root)
    } else {
        match cuda::read_record(&root) {
            Ok(answer) => run_with(&root, answer),
            Err(e) => {
                eprintln!("nvidia-peermem-doctor: --root {}: {e}", args.root.display());
                return ExitCode::from(2);
            }
        }
    };
    match args.format {
        Format::Json => emit(&output::json(&report)),
        Format::Prometheus => emit(&prometheus::render(&report)),
        Format::Table => emit(&output::human(&report, args.verbose)),
    }
    ExitCode::from(u8::try_from(report.exit_code()).unwrap_or(1))
}
