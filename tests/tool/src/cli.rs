// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! Command-line parsing and its translation to the simulators' ctl commands.

use std::collections::BTreeMap;

use crate::parse::{parse_errno, parse_size, parse_u64};

pub const USAGE: &str = "\
usage: nvpm-tool COMMAND ...   (drives tests/sim; see tests/tool/README.md)

GPU simulator (nvidia.ko, /sys/kernel/debug/nvidia_sim):
  gpu alloc SIZE [--layout contiguous|fragmented|shuffled] [--localized]   prints the VA
                                        --localized: allocated as localized memory
  gpu free VA                           prints the number of free callbacks fired
  gpu inject FUNC NTH ERRNO [TIMES]     fail the NTH next call of FUNC (TIMES 0: forever)
  gpu inject off [FUNC]
  gpu set KNOB VALUE | gpu get KNOB     module parameters of nvidia
  gpu counters | gpu counter NAME | gpu reset [--violations]
  gpu runs VA                           lengths (in pages) of the buffer's contiguous runs
  gpu wait-idle [--timeout-ms MS]       wait until no pin or mapping is live; prints ns waited
  gpu buffers | pins | pages | devices | injections

MOFED core simulator (mofed_peer_sim.ko, /sys/kernel/debug/mofed_peer_sim):
  core reg VA SIZE [--inval] [--ro] [--nonpci] [--count N [--nocheck] [--profile] [--drain]]
           [--free-at get_pages|dma_map|activate|put_pages|destroy_mkey]  prints the MR id;
                                        --free-at: cudaFree the buffer just before that call
           [--unchecked]                 hand a zero or wrapping range to the clients as is
  core direct VA SIZE [--persistent] [--nonpci] [--count N [--nocheck] [--profile] [--drain]]
                                        (no client)
                                        with --count: N timed reg/dereg cycles;
                                        --nocheck: without the core's SG checks and snapshot;
                                        --profile: also 'phase NAME NS' per cycle;
                                        --drain: then wait for deferred unpins, add drain_ns
  core dereg ID|all
  core dereg ID --again dma_unmap|put_pages|both   then call them a second time (bad core)
           [--counted]                  ... counted as the core's own calls (its call_count check)
  core show ID [FIELD] | core sg ID | core state ID | core events ID
  core counters | core counter NAME | core reset [--violations] | core clients | core mrs | core mode

Checks (exit status 1 and a message when they fail):
  expect-sg ID      the MR's SG list maps its range to the GPU's DMA addresses
  expect-clean      no live buffers, pins, mappings or MRs, no violations
";

/// `core dereg ID [--again WHAT [--counted]]` as a ctl command.
pub fn core_dereg(args: &[String]) -> Result<String, Usage> {
    let a = Args::split(args, &["counted"], &["again"])?;
    a.expect(
        1,
        1,
        "core dereg ID|all [--again dma_unmap|put_pages|both [--counted]]",
    )?;
    let id = &a.positional[0];
    if id != "all" {
        parse_u64(id)?;
    }
    let counted = a.flags.iter().any(|f| f == "counted");
    Ok(match a.options.get("again") {
        Some(_) if id == "all" => return Err(Usage("--again needs an MR id".into())),
        Some(what) if counted => format!("dereg {id} again={what} counted"),
        Some(what) => format!("dereg {id} again={what}"),
        None if counted => return Err(Usage("--counted goes with --again".into())),
        None => format!("dereg {id}"),
    })
}

/// A command-line error: the usage is printed with it.
#[derive(Debug, PartialEq, Eq)]
pub struct Usage(pub String);

impl From<String> for Usage {
    fn from(s: String) -> Self {
        Usage(s)
    }
}

/// Arguments split into positionals, flags and options with a value.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Args {
    pub positional: Vec<String>,
    pub flags: Vec<String>,
    pub options: BTreeMap<String, String>,
}

impl Args {
    /// Splits @args; @flags and @options name the accepted `--NAME`s.
    pub fn split(args: &[String], flags: &[&str], options: &[&str]) -> Result<Self, Usage> {
        let mut out = Args::default();
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            let Some(name) = arg.strip_prefix("--") else {
                out.positional.push(arg.clone());
                continue;
            };
            let (name, inline) = match name.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (name, None),
            };
            if flags.contains(&name) && inline.is_none() {
                out.flags.push(name.to_string());
            } else if options.contains(&name) {
                let value = inline
                    .or_else(|| it.next().cloned())
                    .ok_or_else(|| Usage(format!("--{name} needs a value")))?;
                out.options.insert(name.to_string(), value);
            } else {
                return Err(Usage(format!("unknown option --{name}")));
            }
        }
        Ok(out)
    }

    /// Exactly @min..=@max positionals, named in @what for the message.
    pub fn expect(&self, min: usize, max: usize, what: &str) -> Result<(), Usage> {
        let n = self.positional.len();
        if n < min || n > max {
            return Err(Usage(format!("expected {what}")));
        }
        Ok(())
    }
}

/// `gpu alloc SIZE [--layout L] [--localized]` as a ctl command.
pub fn gpu_alloc(args: &[String]) -> Result<String, Usage> {
    let a = Args::split(args, &["localized"], &["layout"])?;
    a.expect(1, 1, "gpu alloc SIZE [--layout L] [--localized]")?;
    let size = parse_size(&a.positional[0])?;
    let mut cmd = match a.options.get("layout") {
        Some(l) => format!("alloc {size} {l}"),
        None => format!("alloc {size}"),
    };
    if a.flags.iter().any(|f| f == "localized") {
        cmd.push_str(" localized");
    }
    Ok(cmd)
}

/// `gpu inject ...` as a ctl command.
pub fn gpu_inject(args: &[String]) -> Result<String, Usage> {
    match args {
        [off] if off == "off" => Ok("inject off".into()),
        [off, func] if off == "off" => Ok(format!("inject {func} off")),
        [func, nth, errno] | [func, nth, errno, _] => {
            let nth = parse_u64(nth)?;
            if nth == 0 {
                return Err(Usage("NTH counts from 1 (the next call)".into()));
            }
            let errno = parse_errno(errno)?;
            let times = args.get(3).map(|t| parse_u64(t)).transpose()?.unwrap_or(1);
            Ok(format!("inject {func} {nth} -{errno} {times}"))
        }
        _ => Err(Usage(
            "expected gpu inject FUNC NTH ERRNO [TIMES] | gpu inject off [FUNC]".into(),
        )),
    }
}

/// `core reg|direct VA SIZE [options]` as a ctl command.
pub fn core_reg(direct: bool, args: &[String]) -> Result<String, Usage> {
    let flags: &[&str] = if direct {
        &["persistent", "nonpci", "nocheck", "profile"]
    } else {
        &["inval", "ro", "nonpci", "unchecked", "nocheck", "profile"]
    };
    let options: &[&str] = if direct {
        &["count"]
    } else {
        &["count", "free-at"]
    };
    let a = Args::split(args, flags, options)?;
    a.expect(2, 2, "VA SIZE [options]")?;
    let va = parse_u64(&a.positional[0])?;
    let size = parse_size(&a.positional[1])?;
    let mut cmd = format!("{} {va:#x} {size}", if direct { "direct" } else { "reg" });
    for f in &a.flags {
        cmd += &format!(" {f}"); // the kernel's words are the flags' names
    }
    if let Some(count) = a.options.get("count") {
        let n = parse_u64(count)?;
        if n == 0 {
            return Err(Usage("--count must be at least 1".into()));
        }
        cmd += &format!(" count={n}");
    } else if a.flags.iter().any(|f| f == "nocheck" || f == "profile") {
        return Err(Usage("--nocheck and --profile go with --count".into()));
    }
    if let Some(stage) = a.options.get("free-at") {
        cmd += &format!(" free_at={stage}");
    }
    Ok(cmd)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn split_args() {
        let a = Args::split(
            &v("1 --inval --count 3 2 --layout=x"),
            &["inval"],
            &["count", "layout"],
        )
        .unwrap();
        assert_eq!(a.positional, v("1 2"));
        assert_eq!(a.flags, v("inval"));
        assert_eq!(a.options.get("count").map(String::as_str), Some("3"));
        assert_eq!(a.options.get("layout").map(String::as_str), Some("x"));
        assert!(Args::split(&v("--nope"), &[], &[]).is_err());
        assert!(Args::split(&v("--count"), &[], &["count"]).is_err());
        assert!(Args::split(&v("--inval=1"), &["inval"], &[]).is_err());
    }

    #[test]
    fn alloc() {
        assert_eq!(gpu_alloc(&v("2M")), Ok("alloc 2097152".into()));
        assert_eq!(
            gpu_alloc(&v("64K --layout shuffled")),
            Ok("alloc 65536 shuffled".into())
        );
        assert_eq!(
            gpu_alloc(&v("1M --localized")),
            Ok("alloc 1048576 localized".into())
        );
        assert_eq!(
            gpu_alloc(&v("1M --layout fragmented --localized")),
            Ok("alloc 1048576 fragmented localized".into())
        );
        assert!(gpu_alloc(&v("")).is_err());
        assert!(gpu_alloc(&v("1M 2M")).is_err());
        assert!(gpu_alloc(&v("lots")).is_err());
    }

    #[test]
    fn inject() {
        assert_eq!(
            gpu_inject(&v("get_pages 2 ENOMEM")),
            Ok("inject get_pages 2 -12 1".into())
        );
        assert_eq!(
            gpu_inject(&v("dma_map_pages 1 -5 0")),
            Ok("inject dma_map_pages 1 -5 0".into())
        );
        assert_eq!(gpu_inject(&v("off")), Ok("inject off".into()));
        assert_eq!(
            gpu_inject(&v("off put_pages")),
            Ok("inject put_pages off".into())
        );
        assert!(gpu_inject(&v("get_pages 0 EIO")).is_err());
        assert!(gpu_inject(&v("get_pages 1 EWHAT")).is_err());
        assert!(gpu_inject(&v("get_pages")).is_err());
    }

    #[test]
    fn dereg() {
        assert_eq!(core_dereg(&v("3")), Ok("dereg 3".into()));
        assert_eq!(core_dereg(&v("all")), Ok("dereg all".into()));
        assert_eq!(
            core_dereg(&v("3 --again both")),
            Ok("dereg 3 again=both".into())
        );
        assert_eq!(
            core_dereg(&v("3 --counted --again=put_pages")),
            Ok("dereg 3 again=put_pages counted".into())
        );
        assert!(core_dereg(&v("all --again both")).is_err());
        assert!(core_dereg(&v("3 --counted")).is_err());
        assert!(core_dereg(&v("x")).is_err());
    }

    #[test]
    fn reg() {
        assert_eq!(
            core_reg(false, &v("0x7f4000000000 1M --inval --ro")),
            Ok("reg 0x7f4000000000 1048576 inval ro".into())
        );
        assert_eq!(
            core_reg(true, &v("139637976727552 64K --persistent --count 10")),
            Ok("direct 0x7f0000000000 65536 persistent count=10".into())
        );
        assert!(core_reg(true, &v("0x1000 64K --inval")).is_err());
        assert!(core_reg(false, &v("0x1000 64K --persistent")).is_err());
        assert!(core_reg(false, &v("0x1000 64K --count 0")).is_err());
        assert!(core_reg(false, &v("0x1000")).is_err());
        assert_eq!(
            core_reg(false, &v("0x1000 2M --count 5 --nocheck")),
            Ok("reg 0x1000 2097152 nocheck count=5".into())
        );
        assert_eq!(
            core_reg(true, &v("0x1000 64K --nocheck --count 1 --persistent")),
            Ok("direct 0x1000 65536 nocheck persistent count=1".into())
        );
        assert!(core_reg(false, &v("0x1000 64K --nocheck")).is_err());
        assert!(core_reg(true, &v("0x1000 64K --profile")).is_err());
        assert_eq!(
            core_reg(false, &v("0x1000 64K --inval --free-at dma_map")),
            Ok("reg 0x1000 65536 inval free_at=dma_map".into())
        );
        assert_eq!(
            core_reg(false, &v("0 0 --unchecked")),
            Ok("reg 0x0 0 unchecked".into())
        );
        assert!(core_reg(true, &v("0x1000 64K --free-at get_pages")).is_err());
        assert!(core_reg(true, &v("0x1000 64K --unchecked")).is_err());
        assert_eq!(
            core_reg(true, &v("0x1000 64K --count 2 --profile")),
            Ok("direct 0x1000 65536 profile count=2".into())
        );
    }
}
