// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! Other peer-memory modules that take this one's place: Mellanox's
//! `nv_peer_mem`, NVIDIA's bundled `nvidia-peermem`, and modprobe rules
//! that load one of them for `modprobe nvidia-peermem`.

use super::check::{Check, Status};
use crate::host::kmod::{self, is_peermem_name, Origin, RuleKind};
use crate::host::paths::{CMDLINE, NV_PEER_MEM_CONF};
use crate::host::{Host, MODULE};
use crate::text::list;

/// `conflict.nv_peer_mem`: Mellanox's module registers the same `nv_mem` client.
pub(crate) fn nv_peer_mem(host: &Host) -> Check {
    const ID: &str = "conflict.nv_peer_mem";
    const UNINSTALL: &str =
        "uninstall Mellanox's nvidia-peer-memory 1.x package (nv_peer_mem) and disable its \
                             service (ONBOOT=no in /etc/infiniband/nv_peer_mem.conf)";
    let files: Vec<String> = host
        .files
        .iter()
        .filter(|f| f.origin == Origin::Mellanox)
        .map(|f| f.rel.clone())
        .collect();
    let onboot = host
        .nv_peer_mem_conf
        .as_ref()
        .is_some_and(|t| t.lines().any(|l| l.trim().replace(' ', "") == "ONBOOT=yes"));
    let mut detail: Vec<String> = files.iter().map(|f| format!("installed: {f}")).collect();
    if onboot {
        detail.push(format!("{NV_PEER_MEM_CONF}: ONBOOT=yes"));
    }
    if let Some(m) = host.loaded("nv_peer_mem") {
        let version = m
            .version
            .clone()
            .unwrap_or_else(|| "(no version)".to_string());
        return Check::fail(
            ID,
            format!(
                "Mellanox nv_peer_mem {version} is loaded; it registers the same nv_mem client"
            ),
            format!("`rmmod nv_peer_mem`, then {UNINSTALL}"),
        )
        .detail(detail);
    }
    if !files.is_empty() || onboot {
        let what = if files.is_empty() {
            "set to load at boot".to_string()
        } else {
            format!("installed ({})", list(&files))
        };
        return Check::warn(
            ID,
            format!("Mellanox nv_peer_mem is not loaded but {what}"),
            UNINSTALL,
        )
        .detail(detail);
    }
    Check::ok(ID, "nv_peer_mem is neither loaded nor installed")
}

/// `conflict.bundled`: NVIDIA's own peermem module files.
pub(crate) fn bundled(host: &Host) -> Check {
    const ID: &str = "conflict.bundled";
    let Some(release) = &host.release else {
        return Check::info(ID, "kernel release unknown: installed modules not checked");
    };
    let target = &host.module_target;
    let nvidia: Vec<_> = host
        .files
        .iter()
        .filter(|f| f.origin == Origin::Nvidia)
        .collect();
    let mut detail: Vec<String> = host
        .files
        .iter()
        .map(|f| format!("{}: {} (told by {})", f.rel, f.origin.as_str(), f.by))
        .collect();
    if let Some(t) = &target {
        detail.push(format!("modules.dep: `modprobe {MODULE}` loads {t}"));
    }
    // Same module name as ours: depmod picks one of the two files.
    let shadowing: Vec<String> = nvidia
        .iter()
        .filter(|f| f.name == MODULE)
        .map(|f| f.rel.clone())
        .collect();
    if !shadowing.is_empty() {
        let chosen = target.as_ref().filter(|t| shadowing.contains(t)).map_or(
            "competes with this module for the name nvidia_peermem",
            |_| "is what `modprobe nvidia_peermem` loads",
        );
        return Check::fail(
            ID,
            format!("NVIDIA's bundled peermem is installed ({}) and {chosen}", list(&shadowing)),
            "remove NVIDIA's copy (it ships with the driver: delete the file or the driver's peermem package), \
             then `depmod -a`",
        )
        .detail(detail);
    }
    if !nvidia.is_empty() {
        let names: Vec<String> = nvidia.iter().map(|f| f.rel.clone()).collect();
        return Check::warn(
            ID,
            format!(
                "NVIDIA's bundled peermem is installed under another name ({})",
                list(&names)
            ),
            "make sure no modprobe.d rule loads it for nvidia-peermem (see conflict.modprobe), \
             and never load both",
        )
        .detail(detail);
    }
    Check::ok(
        ID,
        format!("no NVIDIA-bundled peermem module installed for {release}"),
    )
    .detail(detail)
}

/// `conflict.modprobe`: modprobe.d rules for `nvidia-peermem`.
pub(crate) fn modprobe(host: &Host) -> Check {
    const ID: &str = "conflict.modprobe";
    let rules = &host.rules;
    let banned = kmod::cmdline_blacklists(&host.cmdline, MODULE);
    let mut detail: Vec<String> = rules
        .iter()
        .map(|r| format!("{}: {}", r.file, r.text))
        .collect();
    detail.extend(banned.iter().map(|b| format!("{CMDLINE}: {b}")));
    let mut worst: Option<Check> = None;
    let mut keep = |c: Check| {
        if worst.as_ref().is_none_or(|w| c.status > w.status) {
            worst = Some(c);
        }
    };
    // `module_blacklist=` makes the kernel refuse the module; `modprobe.blacklist=`
    // only stops loading by alias, like a blacklist line.
    for b in &banned {
        if b.starts_with("module_blacklist=") {
            keep(Check::fail(
                ID,
                format!("the kernel command line forbids loading {MODULE} ({b})"),
                format!("remove {MODULE} from `{b}` in the boot loader configuration and reboot"),
            ));
        } else {
            keep(Check::warn(
                ID,
                format!("{MODULE} is blacklisted on the kernel command line ({b})"),
                format!("remove {MODULE} from `{b}` if the module should load automatically"),
            ));
        }
    }
    let effective = kmod::effective_install(rules);
    for rule in rules {
        match &rule.kind {
            RuleKind::Install { .. } if effective.is_some_and(|e| !std::ptr::eq(e, rule)) => {
                let first = effective.map_or(String::new(), |e| e.file.clone());
                let shadowed = format!(
                    "{}: its install rule is shadowed by {first}'s, which modprobe reads first",
                    rule.file
                );
                detail.push(shadowed.clone());
                keep(Check::info(ID, shadowed));
            }
            RuleKind::Install { loads, runs } => {
                let others: Vec<String> = loads
                    .iter()
                    .filter(|m| is_peermem_name(m) && m.as_str() != MODULE)
                    .cloned()
                    .collect();
                if !others.is_empty() {
                    keep(Check::fail(
                        ID,
                        format!(
                            "{}: `modprobe nvidia-peermem` loads {} instead of this module",
                            rule.file,
                            list(&others)
                        ),
                        format!(
                            "remove or comment out `{}` (on Debian it comes from the driver's \
                             nvidia-modprobe.conf alternative), or uninstall the driver's peermem module",
                            rule.text
                        ),
                    ));
                } else if !loads.iter().any(|m| m == MODULE) {
                    keep(Check::fail(
                        ID,
                        format!(
                            "{}: an install rule stops `modprobe nvidia-peermem` from loading it (runs {})",
                            rule.file,
                            list(runs)
                        ),
                        format!("remove `{}`", rule.text),
                    ));
                } else {
                    keep(Check::info(
                        ID,
                        format!("{}: an install rule wraps loading {MODULE}", rule.file),
                    ));
                }
            }
            RuleKind::Blacklist => keep(Check::warn(
                ID,
                format!("{}: {MODULE} is blacklisted", rule.file),
                format!(
                    "remove `{}` if the module should load automatically",
                    rule.text
                ),
            )),
            RuleKind::Other(_) => keep(Check::info(ID, format!("{}: {}", rule.file, rule.text))),
        }
    }
    match worst {
        Some(c) if c.status > Status::Info => c.detail(detail),
        Some(c) if rules.len() + banned.len() == 1 => c.detail(detail),
        Some(_) => Check::info(
            ID,
            format!("{} modprobe.d rules mention {MODULE}", rules.len()),
        )
        .detail(detail),
        None => Check::ok(ID, "no modprobe.d rule overrides nvidia-peermem"),
    }
}
