// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! `module.build`: stale and skewed builds. The loaded module against its
//! file on disk (`srcversion`), the file's symbol CRCs (`__versions`)
//! against the `Module.symvers` of the driver and the RDMA core installed
//! now, and the loaded driver against the one on disk.

use std::collections::BTreeMap;

use super::{list, Ctx, MODULE};
use crate::elf::{self, Sections};
use crate::inflate;
use crate::kmod::{self, Origin, NV_P2P_PREFIX};
use crate::report::Check;

/// What a module file says about itself.
#[derive(Debug, Default)]
pub(crate) struct KoFile {
    /// `.modinfo`, by key.
    pub modinfo: BTreeMap<String, String>,
    /// `__versions`: empty without MODVERSIONS.
    pub crcs: BTreeMap<String, u32>,
    /// Why the file could not be read as ELF, if so.
    pub problem: Option<String>,
}

/// Reads a module file (`.ko`, `.ko.gz`); compressed others are not read.
pub(crate) fn read_ko(ctx: &Ctx<'_>, path: &str) -> Option<KoFile> {
    let bytes = ctx.root.read_bytes(path)?;
    let bytes = if path.ends_with(".ko.gz") {
        inflate::gunzip(&bytes).ok()?
    } else if path.ends_with(".ko") {
        bytes
    } else {
        return None;
    };
    let mut ko = KoFile::default();
    match Sections::parse(&bytes) {
        Ok(s) => {
            ko.modinfo = elf::modinfo(s.get(".modinfo").unwrap_or(&[]))
                .into_iter()
                .collect();
            match elf::versions(&s) {
                Ok(v) => ko.crcs = v,
                Err(e) => ko.problem = Some(e.0),
            }
        }
        Err(e) => {
            // Not ELF (a stand-in or a damaged file): modinfo strings, if any.
            ko.modinfo = elf::modinfo(&bytes).into_iter().collect();
            ko.problem = Some(e.0);
        }
    }
    Some(ko)
}

/// `Module.symvers` files that may hold the providers' CRCs for `release`:
/// what DKMS's build used (make.log), OFED's, and the driver's DKMS build of `nv_version`.
fn symvers_files(ctx: &Ctx<'_>, release: &str, nv_version: Option<&str>) -> Vec<String> {
    let mut out = Vec::new();
    const DKMS: &str = "/var/lib/dkms/nvidia-peer-memory";
    const LINE: &str = "nvidia_peermem: CONFIG_MODVERSIONS=y: CRCs from ";
    for version in ctx.root.list(DKMS).iter().rev() {
        let dir = format!("{DKMS}/{version}/{release}");
        for arch in ctx.root.list(&dir) {
            if let Some(log) = ctx.root.read_text(&format!("{dir}/{arch}/log/make.log")) {
                if let Some(files) = log.lines().rev().find_map(|l| l.strip_prefix(LINE)) {
                    out.extend(files.split_whitespace().map(str::to_string));
                }
            }
        }
    }
    for arch in ctx.root.list("/usr/src/ofa_kernel") {
        out.push(format!(
            "/usr/src/ofa_kernel/{arch}/{release}/Module.symvers"
        ));
        out.push(format!("/usr/src/ofa_kernel/{arch}/Module.symvers"));
    }
    if let Some(v) = nv_version {
        out.push(format!("/var/lib/dkms/nvidia/{v}/build/Module.symvers"));
        out.push(format!("/usr/src/nvidia-{v}/Module.symvers"));
    }
    out.dedup();
    out.retain(|f| ctx.root.exists(f));
    out
}

/// The version in the modinfo of the driver's `nvidia.ko` on disk, and its path.
fn driver_on_disk(ctx: &Ctx<'_>, release: &str) -> Option<(String, String)> {
    let dir = kmod::modules_dir(release);
    let file = kmod::modprobe_target(ctx.root, release, "nvidia")
        .map(|rel| format!("{dir}/{rel}"))
        .or_else(|| {
            ctx.root
                .walk_files(&dir)
                .into_iter()
                .find(|f| kmod::module_stem(f) == Some("nvidia"))
        })?;
    let ko = read_ko(ctx, &file)?;
    Some((ko.modinfo.get("version")?.clone(), file))
}

/// `module.build`.
pub(crate) fn module_build(ctx: &Ctx<'_>) -> Check {
    const ID: &str = "module.build";
    let Some(release) = ctx.release.as_deref() else {
        return Check::info(ID, "kernel release unknown: builds not compared");
    };
    let dir = kmod::modules_dir(release);
    let ours: Vec<&kmod::ModFile> = ctx
        .files
        .iter()
        .filter(|f| f.origin == Origin::Ours)
        .collect();
    let mut detail = Vec::new();
    let mut warn: Vec<(String, String)> = Vec::new();
    let mut fail: Vec<(String, String)> = Vec::new();

    // The driver: loaded against on disk.
    let nv_loaded = ctx.nvidia.as_ref().and_then(|n| n.version.clone());
    if let (Some(loaded), Some((disk, file))) = (&nv_loaded, driver_on_disk(ctx, release)) {
        detail.push(format!("NVIDIA driver: {loaded} loaded, {disk} in {file}"));
        if &disk != loaded {
            warn.push((
                format!("the NVIDIA driver on disk is {disk}, the loaded one {loaded}: it was upgraded under the running system"),
                "reboot (or unload and reload the whole driver stack): a module built against the new driver does not load into the old one".to_string(),
            ));
        }
    }

    let file = ours.first().map(|f| format!("{dir}/{}", f.rel));
    let ko = file.as_deref().and_then(|f| read_ko(ctx, f));
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
    if ctx.ours.is_some() && !ctx.loaded_is_nvidias() {
        let loaded_src = ctx
            .root
            .read_attr(&format!("/sys/module/{MODULE}/srcversion"));
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

    // The file's CRCs against the providers installed now.
    if let Some(ko) = ko.as_ref().filter(|k| !k.crcs.is_empty()) {
        let files = symvers_files(ctx, release, nv_loaded.as_deref());
        let mut exports = BTreeMap::new();
        for f in &files {
            if let Some(text) = ctx.root.read_text(f) {
                for (sym, e) in elf::parse_symvers(&text).0 {
                    exports.entry(sym).or_insert((e.crc, f.clone()));
                }
            }
        }
        detail.push(format!(
            "Module.symvers read: {}",
            if files.is_empty() {
                "none found".to_string()
            } else {
                list(&files)
            }
        ));
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
            if ctx.ours.is_some() {
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
    match (&ctx.ours, ours.is_empty()) {
        (None, true) => Check::info(ID, format!("{MODULE} is neither loaded nor installed: no build to compare")).detail(detail),
        (None, false) => Check::ok(
            ID,
            if ko.as_ref().is_some_and(|k| !k.crcs.is_empty()) {
                format!("the installed {MODULE}.ko matches the installed driver and RDMA core where their Module.symvers tell")
            } else {
                format!("the installed {MODULE}.ko has no symbol CRCs to compare (no MODVERSIONS)")
            },
        )
        .detail(detail),
        (Some(_), _) if ctx.loaded_is_nvidias() => {
            Check::info(ID, format!("the loaded {MODULE} is NVIDIA's (module.loaded): its build is the driver's")).detail(detail)
        }
        (Some(_), _) => Check::ok(ID, format!("the loaded {MODULE} is the build installed for {release}")).detail(detail),
    }
}
