// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! The module itself: loaded, its parameters, its statistics.

use super::advisor;
use super::check::{Check, Stat};
use super::kernel;
use crate::host::klog;
use crate::host::kmod::{Origin, NV_P2P_PREFIX, PEER_REGISTER};
use crate::host::paths::{OPERATOR_DRIVER_ROOT, OPERATOR_MOFED_ROOT, STATS_PATH};
use crate::host::{Host, MODULE};
use crate::text::list;

/// `module.loaded`: is `nvidia_peermem` loaded, and is it this project's?
pub(crate) fn loaded(host: &Host) -> Check {
    const ID: &str = "module.loaded";
    let ours_installed: Vec<String> = host
        .files
        .iter()
        .filter(|f| f.origin == Origin::Ours)
        .map(|f| f.rel.clone())
        .collect();
    let installed = match &host.release {
        None => "kernel release unknown".to_string(),
        Some(rel) if ours_installed.is_empty() => format!("not installed for kernel {rel}"),
        Some(rel) => format!("installed for kernel {rel}: {}", list(&ours_installed)),
    };
    let Some(module) = &host.ours else {
        if let Some(check) = refused_for_crc(host, &installed) {
            return check;
        }
        let blockers = kernel::blockers(host);
        // The kernel tree a build in carried mode is given.
        let carried_build = host
            .release
            .as_deref()
            .filter(|_| host.carried())
            .map(|r| format!("/lib/modules/{r}/build"));
        let fix = if !blockers.is_empty() {
            format!(
                "neither loading nor installing helps here: {}",
                blockers.join("; ")
            )
        } else if let Some(build) = carried_build.filter(|_| ours_installed.is_empty()) {
            format!(
                "install the nvidia-peermem package for this kernel (DKMS builds it in carried mode, kernel.rust; \
                 or from the release tarball's source tree: `make KDIR={build} && make KDIR={build} install`), \
                 then `modprobe nvidia_peermem`"
            )
        } else if ours_installed.is_empty() && host.release.is_some() {
            "install the nvidia-peermem package for this kernel (DKMS builds it), then `modprobe nvidia_peermem`"
                .to_string()
        } else {
            "`modprobe nvidia_peermem` (if it fails, `dmesg | grep -i peer` says why); to load it at boot, \
             add `nvidia_peermem` to /etc/modules-load.d/nvidia-peermem.conf"
                .to_string()
        };
        return Check::fail(ID, format!("{MODULE} is not loaded ({installed})"), fix);
    };
    // " 1.0.0", or nothing: every build of this module has a version.
    let version = module
        .version
        .as_deref()
        .map_or(String::new(), |v| format!(" {v}"));
    let detail = vec![
        format!(
            "/sys/module/{MODULE}/version: {}",
            module.version.as_deref().unwrap_or("absent")
        ),
        format!(
            "initstate: {}",
            module.initstate.as_deref().unwrap_or("unknown")
        ),
        installed,
    ];
    if let Some(state) = module.initstate.as_deref().filter(|s| *s != "live") {
        return Check::warn(
            ID,
            format!("{MODULE}{version} is {state}, not live"),
            "wait for the load or unload to finish; if it stays, `dmesg` shows the stuck step",
        )
        .detail(detail);
    }
    if host.loaded_is_nvidias() {
        return Check::warn(
            ID,
            format!("the loaded {MODULE}{version} is NVIDIA's bundled module (same version as the driver), not this one"),
            "`rmmod nvidia_peermem`, remove what loads NVIDIA's (see conflict.bundled and conflict.modprobe), \
             then `modprobe nvidia_peermem`",
        )
        .detail(detail);
    }
    Check::ok(ID, format!("{MODULE}{version} is loaded")).detail(detail)
}

/// `module.loaded` when the kernel's log says it refused the module for a
/// symbol's CRC (`CONFIG_MODVERSIONS`): the module modprobe loads was built
/// against another build of the driver or of the RDMA core than the one
/// loaded. That module may be NVIDIA's own nvidia_peermem (Debian's
/// install rule, the GPU Operator's driver container).
fn refused_for_crc(host: &Host, installed: &str) -> Option<Check> {
    const ID: &str = "module.loaded";
    let sym = klog::crc_refusal(&host.klog, MODULE)?;
    let whose = if sym.starts_with(NV_P2P_PREFIX) {
        "the NVIDIA driver"
    } else if sym.contains("peer_memory") {
        "the RDMA core (OFED)"
    } else {
        "the kernel"
    };
    let mut detail = vec![
        format!("kernel log: {MODULE}: disagrees about version of symbol {sym}"),
        installed.to_string(),
    ];
    let release = host.release.as_deref();
    // The peermem file `modprobe nvidia-peermem` loads.
    let loads = host
        .peermem_target
        .as_ref()
        .and_then(|rel| host.files.iter().find(|f| &f.rel == rel));
    if let (Some(r), Some(f)) = (release, &loads) {
        detail.push(format!(
            "modprobe {MODULE} loads /lib/modules/{r}/{} ({}, by {})",
            f.rel,
            f.origin.as_str(),
            f.by
        ));
    }
    if let Some(r) = release {
        if let Some(file) = host.exporter(if whose == "the NVIDIA driver" {
            "nvidia_p2p_get_pages"
        } else {
            PEER_REGISTER
        }) {
            detail.push(format!("{whose}'s module installed for {r}: {file}"));
        }
    }
    let operator = host.operator_driver;
    if loads.as_ref().is_some_and(|f| f.origin == Origin::Nvidia) {
        let fix = if operator {
            let upgrade = if host.operator_mofed && whose != "the NVIDIA driver" {
                format!("a network-operator upgrade (its MOFED in {OPERATOR_MOFED_ROOT})")
            } else {
                format!("an upgrade of {whose}")
            };
            format!(
                "the GPU Operator's driver container built NVIDIA's {MODULE} once and reuses it ({OPERATOR_DRIVER_ROOT}); \
                 after {upgrade} it carries the old CRCs: delete the driver pod on this node so that it rebuilds \
                 (`kubectl delete pod -n gpu-operator -l app=nvidia-driver-daemonset \
                 --field-selector spec.nodeName=$(hostname)`)"
            )
        } else {
            // The driver's DKMS module (Debian: nvidia-current), if DKMS has one.
            let dkms = host.dkms_driver.as_deref().unwrap_or("<name>/<version>");
            format!(
                "it is NVIDIA's {MODULE}, built by the driver's package: rebuild the driver's modules for this kernel \
                 (DKMS: `dkms install --force {dkms} -k $(uname -r)`), or load this package's instead (install \
                 nvidia-peer-memory-dkms: its 00-nvidia-peer-memory.conf wins over the driver's install rule)"
            )
        };
        return Some(
            Check::fail(
                ID,
                format!(
                    "NVIDIA's {MODULE} is not loaded: the kernel refused it, its CRC of {sym} is not the one {whose} loaded now exports"
                ),
                fix,
            )
            .detail(detail),
        );
    }
    if let Some(files) = &host.dkms_crcs {
        detail.push(format!("its DKMS build took the CRCs from {files}"));
    }
    Some(
        Check::fail(
            ID,
            format!(
                "{MODULE} is not loaded: the kernel refused it, its CRC of {sym} is not the one {whose} loaded now exports"
            ),
            format!(
                "it was built against another build of {whose} than the loaded one; rebuild it against the installed \
                 one: /usr/lib/nvidia-peer-memory/dkms-rebuild --force (DKMS; the build reads the CRCs from the modules \
                 installed for the kernel), then reload {whose} if the installed one is newer than the loaded one"
            ),
        )
        .detail(detail),
    )
}

/// `module.params`: the two parameters and what they select.
pub(crate) fn params(host: &Host) -> Check {
    const ID: &str = "module.params";
    if host.ours.is_none() {
        return Check::info(ID, "module not loaded: parameters unknown");
    }
    let read = |p: &str| host.param(p).map(str::to_string);
    let (persistent, peerdirect) = (read("persistent_api_support"), read("peerdirect_support"));
    let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "?".to_string());
    // This module backs the persistent nv_mem with a revocable client
    // (MIG, vGPU); NVIDIA's registers nv_mem alone.
    let mode = match (persistent.as_deref(), host.loaded_is_nvidias()) {
        (Some("1"), false) => "persistent nv_mem, revocable nv_mem_fallback behind it",
        (Some("1"), true) => "one persistent client nv_mem: registrations fail on MIG and vGPU",
        (Some("0"), _) => "revocable nv_mem plus persistent nv_mem_nc",
        _ => "client layout unknown",
    };
    let summary = format!(
        "persistent_api_support={} ({mode}), peerdirect_support={}",
        show(&persistent),
        show(&peerdirect)
    );
    let owner = host.kallsyms.owner(PEER_REGISTER).flatten();
    if peerdirect.as_deref() == Some("1") && owner == Some("ib_uverbs") {
        return Check::warn(
            ID,
            format!("{summary}: the legacy MOFED 4.1–5.0 layout, but the RDMA core is DOCA-OFED 24.07 or newer"),
            "reload with peerdirect_support=0 (drop it from the `options nvidia_peermem` line in modprobe.d)",
        );
    }
    Check::ok(ID, summary)
}

/// Parses the statistics file: counters, and the lines that are not `name value`.
pub fn parse_stats(text: &str) -> (Vec<Stat>, Vec<String>) {
    let mut stats = Vec::new();
    let mut bad = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let mut words = line.split_whitespace();
        match (words.next(), words.next(), words.next()) {
            (Some(name), Some(value), None) => stats.push(Stat {
                name: name.trim_end_matches(':').to_string(),
                value: value.to_string(),
            }),
            _ => bad.push(line.to_string()),
        }
    }
    (stats, bad)
}

/// Whether a counter counts failures.
fn is_error_counter(name: &str) -> bool {
    name.starts_with("errors")
        || name.starts_with("error_")
        || name.ends_with("_errors")
        || name.contains("fail")
}

/// What to do about a non-zero error counter.
fn error_hint(host: &Host, name: &str) -> String {
    match name {
        "errors_acquire" | "errors_get_pages" => {
            "pinning failed: GPU BAR1 space exhausted (see gpu.bar1; deregister memory) or a driver error"
                .to_string()
        }
        "errors_dma_map" => dma_map_hint(host),
        "errors_out_of_order" => {
            "the RDMA core called out of order: check peerdirect_support against the RDMA core (rdma.peer_symbols)"
                .to_string()
        }
        _ => String::new(),
    }
}

/// Why `nvidia_p2p_dma_map_pages` refuses maps here: the PCIe topology
/// rule, and for CDMM GPUs ([`advisor::cdmm`], as `nvidia.settings` judges
/// them) what their driver's release maps their memory with.
fn dma_map_hint(host: &Host) -> String {
    const CHECK: &str = "mapping for the NIC failed: check iommu.mode, pci.acs and nvidia.settings";
    const SWITCH: &str = "on Grace and Ampere chipsets GPU and NIC must share a PCIe switch";
    let Some(c) = advisor::cdmm(host) else {
        return format!("{CHECK} ({SWITCH})");
    };
    let cdmm = format!(
        "{} (CDMM) on {}, driver {}",
        c.mode.why(),
        c.gpu_list(host),
        c.version
    );
    let Some(pagemap) = &c.uvm else {
        return format!(
            "{CHECK} ({SWITCH}; {cdmm}: the driver maps coherent GPU memory as MMIO under that rule too; \
             580.142 and 595.44.02 on map it through nvidia-uvm's device-coherent pagemap instead)"
        );
    };
    let mut why = format!(
        "{cdmm}: the driver maps coherent GPU memory for a NIC only through nvidia-uvm's device-coherent \
         pagemap, which needs nvidia-uvm loaded on a kernel with CONFIG_ZONE_DEVICE (it makes the pagemap \
         once a CUDA process has used the GPU), else -ENOTSUPP (524)"
    );
    if let Some(missing) = &pagemap.missing {
        why.push_str(&format!("; here {missing}"));
    }
    if c.gpus.len() < host.topo.gpus.len() {
        why.push_str(&format!("; for the PCIe GPUs: {SWITCH}"));
    }
    format!("{CHECK} ({why})")
}

/// `module.stats`: the module's counters, with non-zero error counters flagged.
pub(crate) fn stats(host: &Host) -> (Check, Option<Vec<Stat>>) {
    const ID: &str = "module.stats";
    if host.ours.is_none() {
        return (Check::info(ID, "module not loaded: no statistics"), None);
    }
    let Some(text) = &host.stats else {
        if host.loaded_is_nvidias() {
            return (
                Check::info(ID, "no statistics: NVIDIA's module keeps none"),
                None,
            );
        }
        let why = if !host.debugfs {
            "debugfs is not mounted or not readable"
        } else {
            "the file is missing or not readable"
        };
        return (
            Check::info(ID, format!("{STATS_PATH} unreadable: {why}")).fix(
                "run as root with debugfs mounted (`mount -t debugfs none /sys/kernel/debug`)",
            ),
            None,
        );
    };
    let (stats, bad) = parse_stats(text);
    let mut detail: Vec<String> = stats
        .iter()
        .map(|s| format!("{} {}", s.name, s.value))
        .collect();
    detail.extend(bad.iter().map(|l| format!("unparsed line: {l}")));
    let errors: Vec<&Stat> = stats
        .iter()
        .filter(|s| is_error_counter(&s.name) && s.value.parse::<u64>().is_ok_and(|v| v != 0))
        .collect();
    let check = if errors.is_empty() {
        let shown: Vec<String> = stats
            .iter()
            .filter(|s| {
                matches!(
                    s.name.as_str(),
                    "contexts_live" | "pinned_bytes" | "registrations"
                )
            })
            .map(|s| format!("{}={}", s.name, s.value))
            .collect();
        let mut summary = format!("{} counters, no errors", stats.len());
        if !shown.is_empty() {
            summary = format!("{summary} ({})", shown.join(" "));
        }
        Check::ok(ID, summary)
    } else {
        let named: Vec<String> = errors
            .iter()
            .map(|s| format!("{}={}", s.name, s.value))
            .collect();
        let mut hints: Vec<String> = errors
            .iter()
            .map(|s| error_hint(host, &s.name))
            .filter(|h| !h.is_empty())
            .collect();
        hints.push("`dmesg | grep nvidia_peermem` has the errno of each failure".to_string());
        Check::warn(
            ID,
            format!("error counters are non-zero: {}", named.join(" ")),
            hints.join("; "),
        )
    };
    (check.detail(detail), Some(stats))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_lines() {
        let (stats, bad) = parse_stats(
            "contexts_live 2\npinned_bytes: 65536\n\nweird line here\nfuture_counter 7\n",
        );
        assert_eq!(stats.len(), 3);
        assert_eq!(stats[1].name, "pinned_bytes");
        assert_eq!(stats[2].value, "7");
        assert_eq!(bad, ["weird line here"]);
    }

    #[test]
    fn error_counters() {
        assert!(is_error_counter("errors_get_pages"));
        assert!(is_error_counter("dma_map_failures"));
        assert!(is_error_counter("invalidate_errors"));
        assert!(!is_error_counter("declines"));
        assert!(!is_error_counter("registrations"));
    }
}
