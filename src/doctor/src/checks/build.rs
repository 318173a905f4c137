// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! `module.build`: stale and skewed builds. The loaded module against its
//! file on disk (`srcversion`), the file's symbol CRCs (`__versions`)
//! against those the driver's and the RDMA core's modules installed now
//! export (as modprobe finds them, read from their files), and the loaded
//! driver against the one on disk.

use std::collections::BTreeMap;

use super::check::Check;
use crate::host::kmod::{self, Origin, NV_P2P_PREFIX, PEER_REGISTER};
use crate::host::{Host, MODULE};
use crate::text::list;

/// What the installed exporters say: their CRCs by symbol, with the file
/// each came from; a line per exporter for the detail; and the exporters
/// whose CRCs could not be read, with why.
struct Installed {
    exports: BTreeMap<String, (u32, String)>,
    detail: Vec<String>,
    unread: Vec<String>,
    /// Whose exporter no installed module is, by the symbol that finds it.
    missing: Vec<(&'static str, &'static str)>,
}

/// The CRCs the installed exporters export for our imports.
fn installed_exports(host: &Host, release: &str) -> Installed {
    let mut exports = BTreeMap::new();
    let mut unread = Vec::new();
    let mut detail = Vec::new();
    let mut missing = Vec::new();
    for e in &host.exporters {
        let (whose, symbol) = (e.whose, e.symbol);
        let Some(file) = &e.file else {
            detail.push(format!(
                "{whose}: no module installed for {release} exports {symbol}"
            ));
            missing.push((whose, symbol));
            continue;
        };
        let Some(ko) = &e.ko else {
            detail.push(format!("{whose}: {file} (exports {symbol}) cannot be read"));
            unread.push(format!("{whose}'s ({file}: cannot be read)"));
            continue;
        };
        let about = [ko.modinfo.get("name"), ko.modinfo.get("version")]
            .into_iter()
            .flatten()
            .cloned()
            .collect::<Vec<_>>()
            .join(" ");
        let mut line = format!("{whose}: {file}");
        if !about.is_empty() {
            line.push_str(&format!(" ({about})"));
        }
        if let Some(p) = &ko.problem {
            line.push_str(&format!(": {p}"));
            unread.push(format!("{whose}'s ({file}: {p})"));
        } else if ko.exports.is_empty() {
            line.push_str(": no CRCs (built without MODVERSIONS)");
        } else {
            line.push_str(&format!(": {} CRCs", ko.exports.len()));
        }
        detail.push(line);
        for (sym, crc) in &ko.exports {
            exports.entry(sym.clone()).or_insert((*crc, file.clone()));
        }
    }
    Installed {
        exports,
        detail,
        unread,
        missing,
    }
}

/// What to do while the NVIDIA driver's DKMS module `dkms` is there but
/// not built for `release` ([`Host::dkms_driver_pending`]): let DKMS build
/// it, after which `dkms-rebuild` builds this module against it, as
/// `dkms-rebuild` says in that case.
pub(crate) fn driver_pending(dkms: &str, release: &str) -> String {
    format!(
        "the NVIDIA driver's DKMS module {dkms} is present but not built for {release} yet: its package's \
         configuration builds it (or `dkms autoinstall -k {release}`), then dkms-rebuild builds {MODULE} against it \
         (DKMS 3.2.2 and later run /usr/lib/nvidia-peer-memory/dkms-rebuild as their post_transaction command; \
         with older DKMS, run it afterwards)"
    )
}

/// What to install when the exporter of `symbol` is gone for `release`.
fn install_exporter(host: &Host, symbol: &str, release: &str) -> String {
    if symbol == PEER_REGISTER {
        format!(
            "install the RDMA core with the peer-memory API for {release} (MLNX_OFED or DOCA-OFED: \
             mlnx-ofed-kernel-dkms on Debian and Ubuntu, mlnx-ofa_kernel-dkms on RPM hosts; with DKMS, \
             `dkms autoinstall -k {release}`); the installed {MODULE}.ko stays as built and loads again then"
        )
    } else if let Some(dkms) = host.dkms_driver_pending.as_deref() {
        format!(
            "{}; the installed {MODULE}.ko stays as built until then",
            driver_pending(dkms, release)
        )
    } else {
        format!(
            "install the NVIDIA driver's kernel modules for {release} (with its DKMS package, \
             `dkms autoinstall -k {release}`); the installed {MODULE}.ko stays as built and loads again then"
        )
    }
}

/// `module.build`.
pub(crate) fn module_build(host: &Host) -> Check {
    const ID: &str = "module.build";
    let Some(release) = host.release.as_deref() else {
        return Check::info(ID, "kernel release unknown: builds not compared");
    };
    let dir = kmod::modules_dir(release);
    let ours: Vec<&kmod::ModFile> = host
        .files
        .iter()
        .filter(|f| f.origin == Origin::Ours)
        .collect();
    let mut detail = Vec::new();
    let mut warn: Vec<(String, String)> = Vec::new();
    let mut fail: Vec<(String, String)> = Vec::new();

    // The driver: loaded against on disk.
    let nv_loaded = host.nvidia.as_ref().and_then(|n| n.version.clone());
    if let (Some(loaded), Some((disk, file))) = (&nv_loaded, &host.driver_on_disk) {
        detail.push(format!("NVIDIA driver: {loaded} loaded, {disk} in {file}"));
        if disk != loaded {
            warn.push((
                format!("the NVIDIA driver on disk is {disk}, the loaded one {loaded}: it was upgraded under the running system"),
                "reboot (or unload and reload the whole driver stack): a module built against the new driver does not load into the old one".to_string(),
            ));
        }
    }

    let file = ours.first().map(|f| format!("{dir}/{}", f.rel));
    let ko = &host.installed_ko;
    if let Some(ko) = &ko {
        detail.push(format!(
            "{}: version {}, srcversion {}, {} CRCs{}",
            file.as_deref().unwrap_or(""),
            ko.modinfo.get("version").map_or("?", String::as_str),
            ko.modinfo.get("srcversion").map_or("?", String::as_str),
            ko.crcs.len(),
            ko.problem
                .as_deref()
                .map_or(String::new(), |p| format!(" ({p})"))
        ));
    }

    // Loaded against on disk.
    if host.ours.is_some() && !host.loaded_is_nvidias() {
        let loaded_src = &host.srcversion;
        detail.push(format!(
            "/sys/module/{MODULE}/srcversion: {}",
            loaded_src.as_deref().unwrap_or("absent")
        ));
        if ours.is_empty() {
            warn.push((
                format!("{MODULE} is loaded but no {MODULE}.ko is installed for {release}: the next load (reboot, operator restart) fails"),
                "reinstall the package or `dkms install nvidia-peer-memory/<version> -k $(uname -r)`; the GPU Operator's \
                 driver container loops on a module it cannot find"
                    .to_string(),
            ));
        } else if let (Some(l), Some(d)) = (
            &loaded_src,
            ko.as_ref().and_then(|k| k.modinfo.get("srcversion")),
        ) {
            if l != d {
                warn.push((
                    format!("the loaded {MODULE} (srcversion {l}) is not the build on disk ({d}): the disk's takes effect at the next load"),
                    format!("when no job runs: `modprobe -r {MODULE} && modprobe {MODULE}`"),
                ));
            }
        }
    }

    let mut unread = Vec::new();
    // The file's CRCs against the exporters installed now (what the kernel
    // will load), not against what its build says it used.
    if let Some(ko) = ko.as_ref().filter(|k| !k.crcs.is_empty()) {
        let found = installed_exports(host, release);
        detail.extend(found.detail);
        unread = found.unread;
        // An exporter removed (OFED uninstalled) while the module that
        // imports from it stays: its CRCs match nothing the kernel has.
        for (whose, symbol) in found.missing {
            if !ko.crcs.contains_key(symbol) {
                continue;
            }
            let summary = format!(
                "the installed {MODULE}.ko imports {symbol} from {whose}, and no module installed for {release} exports it"
            );
            let fix = install_exporter(host, symbol, release);
            if host.ours.is_some() {
                warn.push((
                    format!("{summary}: the loaded one keeps working until it is unloaded"),
                    fix,
                ));
            } else {
                fail.push((
                    format!("{summary}: modprobe will refuse it (\"Unknown symbol {symbol}\")"),
                    fix,
                ));
            }
        }
        let exports = found.exports;
        let stale: Vec<String> = ko
            .crcs
            .iter()
            .filter(|(s, _)| s.starts_with(NV_P2P_PREFIX) || s.contains("peer_memory_client"))
            .filter_map(|(s, crc)| {
                let (want, f) = exports.get(s)?;
                (want != crc)
                    .then(|| format!("{s} (0x{crc:08x} in the module, 0x{want:08x} in {f})"))
            })
            .collect();
        detail.extend(stale.iter().map(|s| format!("CRC differs: {s}")));
        if !stale.is_empty() {
            let summary = format!(
                "the installed {MODULE}.ko was built against another driver or OFED than the installed ones: {}",
                list(&stale.iter().map(|s| s.split(' ').next().unwrap_or("").to_string()).collect::<Vec<_>>())
            );
            let fix = "rebuild it against them: /usr/lib/nvidia-peer-memory/dkms-rebuild --force"
                .to_string();
            if host.ours.is_some() {
                warn.push((
                    format!("{summary}; the loaded one keeps working until it is reloaded"),
                    fix,
                ));
            } else {
                fail.push((format!("{summary}: modprobe will refuse it (\"disagrees about version of symbol\")"), fix));
            }
        }
    }

    let pick = |v: Vec<(String, String)>| {
        let fix = v
            .iter()
            .map(|(_, f)| f.clone())
            .collect::<Vec<_>>()
            .join("; ");
        let summary = v.into_iter().map(|(s, _)| s).collect::<Vec<_>>().join("; ");
        (summary, fix)
    };
    if !fail.is_empty() {
        fail.extend(warn);
        let (s, f) = pick(fail);
        return Check::fail(ID, s, f).detail(detail);
    }
    if !warn.is_empty() {
        let (s, f) = pick(warn);
        return Check::warn(ID, s, f).detail(detail);
    }
    if !unread.is_empty() {
        return Check::info(
            ID,
            format!(
                "the installed {MODULE}.ko's CRCs not compared with {}",
                list(&unread)
            ),
        )
        .detail(detail);
    }
    match (&host.ours, ours.is_empty()) {
        (None, true) => Check::info(ID, format!("{MODULE} is neither loaded nor installed: no build to compare")).detail(detail),
        (None, false) => Check::ok(
            ID,
            if ko.as_ref().is_some_and(|k| !k.crcs.is_empty()) {
                format!("the installed {MODULE}.ko carries the CRCs of the driver and RDMA core modules installed for {release}")
            } else {
                format!("the installed {MODULE}.ko has no symbol CRCs to compare (no MODVERSIONS)")
            },
        )
        .detail(detail),
        (Some(_), _) if host.loaded_is_nvidias() => {
            Check::info(ID, format!("the loaded {MODULE} is NVIDIA's (module.loaded): its build is the driver's")).detail(detail)
        }
        (Some(_), _) => Check::ok(ID, format!("the loaded {MODULE} is the build installed for {release}")).detail(detail),
    }
}
