// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! The path advisor: the NVIDIA driver's own settings, dma-buf readiness
//! (kernel, RDMA core, the GPU's answer), the path NCCL computes for each
//! GPU–NIC pair, what cluster tooling sees, and which of dma-buf and peer
//! memory jobs will take.

use super::check::Check;
use crate::checks::nccl::{self, GdrMode, NcclPath};
use crate::host::cuda::CudaAnswer;
use crate::host::kmod::{DMABUF_MR_SUFFIX, DMABUF_UMEM_PREFIX};
use crate::host::nvparams;
use crate::host::paths::{DRIVER_PARAMS, GDR_PATHS, NCCL_PATHS, UCX_PATHS};
use crate::host::{Host, MODULE};
use crate::text::{few, list};

/// A dotted version as numbers (`580.159.04` → `[580, 159, 4]`); the
/// leading digits of each part.
pub fn version_parts(v: &str) -> Vec<u32> {
    v.split(['.', '-', '+'])
        .map_while(|p| {
            let digits: String = p.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
        .collect()
}

/// `key: value` of the driver's params file, the value unquoted.
fn driver_param(text: &str, key: &str) -> Option<String> {
    nvparams::value(text, key)
}

/// Whether a driver maps CDMM memory for peers through nvidia-uvm's
/// device-coherent pagemap (580.142 and 595.44.02 on: `osapi.c`
/// `rm_p2p_dma_map_pages` branches on `pNv->coherent`, `RmP2PDmaMapPages`
/// takes `nv_dma_get_dev_pagemap`) rather than as MMIO under the PCIe
/// topology rule (580.65.06-580.126.20 and 590: it branches on
/// `mem_has_struct_page`, false in CDMM).
fn cdmm_maps_via_uvm(v: &[u32]) -> bool {
    v >= [595, 44].as_slice() || (v.first() == Some(&580) && v >= [580, 142].as_slice())
}

/// Whether the loaded driver is the open kernel modules (`None`: unknown).
fn open_modules(host: &Host) -> Option<bool> {
    host.driver_banner
        .as_ref()
        .map(|b| b.contains("Open Kernel Module"))
}

/// The unsupported chipsets on the bus: `(function, name)`.
fn chipsets(host: &Host) -> Vec<(String, &'static str)> {
    host.pci
        .iter()
        .filter_map(|d| nccl::p2p_unsupported_chipset(d).map(|n| (d.bdf.clone(), n)))
        .collect()
}

/// Coherent (C2C) GPUs whose memory the driver manages (CDMM, from
/// [`Host::coherent_mode`], 580.65.06 on): no struct page, so the driver
/// maps it for a NIC its own way, by release. What `nvidia.settings`
/// judges and `module.stats` names when maps fail.
pub(crate) struct Cdmm {
    /// The keys that set it.
    pub mode: nvparams::CoherentMemoryMode,
    /// The loaded driver's version.
    pub version: String,
    /// The coherent GPUs, as indexes into the host's topology.
    pub gpus: Vec<usize>,
    /// 580.142 and 595.44.02 on: maps only through nvidia-uvm's
    /// device-coherent pagemap, and what that needs here. `None`: the
    /// driver maps the memory as MMIO under its PCIe topology rule.
    pub uvm: Option<UvmPagemap>,
}

impl Cdmm {
    /// The coherent GPUs by address (up to four), or their count.
    pub fn gpu_list(&self, host: &Host) -> String {
        let names: Vec<String> = self
            .gpus
            .iter()
            .map(|&g| host.topo.gpus[g].pci.bdf.clone())
            .collect();
        few(&names, "GPUs")
    }
}

/// What nvidia-uvm's device-coherent pagemap of CDMM memory needs, as found.
pub(crate) struct UvmPagemap {
    /// `nvidia_uvm` is loaded.
    pub loaded: bool,
    /// `CONFIG_ZONE_DEVICE`: set, and the line as shown; `None` when the
    /// configuration is unreadable.
    pub zone: Option<(bool, String)>,
    /// Why the driver has no pagemap (and refuses every map), if so.
    pub missing: Option<String>,
}

/// The CDMM GPUs of the loaded driver; `None` without a driver of 580 or
/// later, outside CDMM, or without a coherent GPU.
pub(crate) fn cdmm(host: &Host) -> Option<Cdmm> {
    let version = host.nvidia.as_ref()?.version.clone().unwrap_or_default();
    let v = version_parts(&version);
    let mode = host
        .coherent_mode
        .filter(|m| m.is_cdmm() && v.first().is_some_and(|&major| major >= 580))?;
    let topo = &host.topo;
    let gpus: Vec<usize> = (0..topo.gpus.len())
        .filter(|&g| nccl::is_c2c_gpu(topo.gpus[g].pci.device))
        .collect();
    if gpus.is_empty() {
        return None;
    }
    let uvm = cdmm_maps_via_uvm(&v).then(|| uvm_pagemap(host));
    Some(Cdmm {
        mode,
        version,
        gpus,
        uvm,
    })
}

/// nvidia-uvm and `CONFIG_ZONE_DEVICE` (Linux 6.0+), which its pagemap needs.
fn uvm_pagemap(host: &Host) -> UvmPagemap {
    let loaded = host.loaded("nvidia_uvm").is_some();
    let kernel = host.release.as_deref().map(version_parts);
    let old_kernel = kernel
        .as_ref()
        .is_some_and(|k| k.as_slice() < [6, 0].as_slice());
    let zone = host.config.config.as_ref().map(|c| {
        (
            c.enabled("CONFIG_ZONE_DEVICE"),
            c.show("CONFIG_ZONE_DEVICE"),
        )
    });
    let missing = if !loaded {
        Some("nvidia_uvm is not loaded, so the driver refuses every peer-memory map of GPU memory (-ENOTSUPP, 524)".to_string())
    } else if old_kernel || zone.as_ref().is_some_and(|(on, _)| !on) {
        Some(format!(
            "kernel {} lacks ZONE_DEVICE device-coherent pages (CONFIG_ZONE_DEVICE, Linux 6.0+), so nvidia-uvm makes no pagemap and the driver refuses every peer-memory map of GPU memory (-ENOTSUPP, 524)",
            host.release.as_deref().unwrap_or("?")
        ))
    } else {
        None
    };
    UvmPagemap {
        loaded,
        zone,
        missing,
    }
}

/// `nvidia.settings`: `GrdmaPciTopoCheckOverride`, `CoherentGPUMemoryMode`
/// and the 580+ rule that, on Grace, Ampere Altra and AmpereOne chipsets,
/// GPU and NIC must share a PCIe switch (else -ENOTSUPP, 524, at registration).
/// In CDMM ([`Host::coherent_mode`]) a coherent GPU's memory has no struct
/// page: 580.65-580.126 and 590 map it under that rule, 580.142 and
/// 595.44.02 on only through nvidia-uvm's device-coherent pagemap.
pub(crate) fn driver_settings(host: &Host) -> Check {
    const ID: &str = "nvidia.settings";
    let Some(nv) = &host.nvidia else {
        return Check::info(
            ID,
            "the NVIDIA driver is not loaded: its settings are unknown",
        );
    };
    let version = nv.version.clone().unwrap_or_default();
    let major = version_parts(&version).first().copied();
    let params = &host.driver_params;
    let over = params
        .as_deref()
        .and_then(|p| driver_param(p, "GrdmaPciTopoCheckOverride"));
    let coherent_mode = params
        .as_deref()
        .and_then(|p| driver_param(p, "CoherentGPUMemoryMode"));
    let flavour = match open_modules(host) {
        Some(true) => "open kernel modules",
        Some(false) => "proprietary kernel module",
        None => "flavour unknown",
    };
    let found = chipsets(host);
    let mut detail = vec![
        format!(
            "driver {} ({flavour})",
            if version.is_empty() { "?" } else { &version }
        ),
        format!(
            "{DRIVER_PARAMS}: {}",
            if params.is_some() {
                "read"
            } else {
                "unreadable"
            }
        ),
        format!(
            "GrdmaPciTopoCheckOverride: {}",
            over.as_deref().unwrap_or("absent (drivers before 570)")
        ),
        format!(
            "CoherentGPUMemoryMode: {}",
            match coherent_mode.as_deref() {
                None => "absent",
                Some("") => "\"\" (numa, the default)",
                Some(m) => m,
            }
        ),
    ];
    detail.extend(found.iter().map(|(b, n)| format!("{b}: {n} chipset")));
    let Some(_) = params else {
        return Check::info(
            ID,
            format!("{DRIVER_PARAMS} is unreadable: the driver's settings are unknown"),
        )
        .detail(detail);
    };
    let topo = &host.topo;
    let mut pcie_gpus: Vec<usize> = (0..topo.gpus.len())
        .filter(|&g| !nccl::is_c2c_gpu(topo.gpus[g].pci.device))
        .collect();
    let mut cdmm_ruled = false;
    if let Some(c) = cdmm(host) {
        let gpus = c.gpu_list(host);
        let mode = c.mode;
        if let Some(pagemap) = &c.uvm {
            detail.push(format!(
                "{gpus}: {} (CDMM): coherent GPU memory without struct page; driver {version} maps it for a NIC only with a reference on nvidia-uvm's device-coherent (ZONE_DEVICE) pagemap of it, else -ENOTSUPP (524) at registration; no PCIe topology rule",
                mode.why()
            ));
            detail.push(format!(
                "nvidia_uvm: {}",
                if pagemap.loaded {
                    "loaded"
                } else {
                    "not loaded"
                }
            ));
            if let Some((_, shown)) = &pagemap.zone {
                detail.push(format!("kernel: {shown}"));
            }
            if let Some(why) = &pagemap.missing {
                return Check::fail(
                    ID,
                    format!("{} (CDMM), driver {version}: {gpus}: {why}", mode.why()),
                    "load nvidia-uvm (`modprobe nvidia-uvm`; it makes the pagemap once a CUDA process has used the GPU) on a kernel with CONFIG_ZONE_DEVICE, or drop CDMM (NVreg_CoherentGPUMemoryMode=driver, NVreg_EnableUserNUMAManagement=0) for numa mode",
                )
                .detail(detail);
            }
            if pcie_gpus.is_empty() {
                return Check::ok(
                    ID,
                    format!(
                        "{} (CDMM), driver {version}: {gpus} mapped for NICs through nvidia-uvm's device-coherent pagemap (nvidia_uvm loaded; it makes the pagemap once a CUDA process has used the GPU); no PCIe topology rule",
                        mode.why()
                    ),
                )
                .detail(detail);
            }
        } else {
            // 580.65.06-580.126.20, 590: the PCIe topology rule, MMIO maps.
            detail.push(format!(
                "{gpus}: {} (CDMM): coherent GPU memory without struct page; driver {version} maps it for a NIC as MMIO under its PCIe topology rule, as a PCIe GPU's (580.142 and 595.44.02 on use nvidia-uvm's pagemap instead)",
                mode.why()
            ));
            pcie_gpus.extend(c.gpus.iter().copied());
            pcie_gpus.sort_unstable();
            cdmm_ruled = true;
        }
    }
    match over.as_deref() {
        Some("2") if cdmm_ruled => {
            return Check::fail(
                ID,
                format!("GrdmaPciTopoCheckOverride=2: driver {version} refuses GPUDirect RDMA to every PCIe GPU and, in CDMM, to coherent ones"),
                "remove NVreg_GrdmaPciTopoCheckOverride=2 from the nvidia options in modprobe.d and reload the driver",
            )
            .detail(detail)
        }
        Some("2") if !pcie_gpus.is_empty() => {
            return Check::fail(
                ID,
                "GrdmaPciTopoCheckOverride=2: the driver refuses GPUDirect RDMA (dma-buf and peer memory) to every PCIe GPU",
                "remove NVreg_GrdmaPciTopoCheckOverride=2 from the nvidia options in modprobe.d and reload the driver",
            )
            .detail(detail)
        }
        Some("1") => {
            return Check::ok(
                ID,
                "GrdmaPciTopoCheckOverride=1: the driver's PCIe topology check is overridden to allow",
            )
            .detail(detail)
        }
        _ => {}
    }
    let rule = !found.is_empty() && major.is_some_and(|m| m >= 580);
    if !rule {
        let why = if found.is_empty() {
            "no Grace, Ampere Altra or AmpereOne chipset".to_string()
        } else {
            format!("driver {version} predates the 580 chipset rule")
        };
        return Check::ok(
            ID,
            format!(
                "GrdmaPciTopoCheckOverride={}: the driver allows GPUDirect RDMA on any PCIe path ({why})",
                over.as_deref().unwrap_or("-")
            ),
        )
        .detail(detail);
    }
    if pcie_gpus.is_empty() {
        return Check::ok(
            ID,
            format!("{} chipset, driver {version}: every GPU is coherent (C2C), so the driver skips its PCIe topology check",
                found.first().map_or("", |(_, n)| *n)),
        )
        .detail(detail);
    }
    // The rule: a shared upstream bridge, per pair.
    let mut refused_gpus = Vec::new();
    let mut refused_pairs = Vec::new();
    for &g in &pcie_gpus {
        let pairs: Vec<_> = topo.pairs_of(g).collect();
        let bad: Vec<String> = pairs
            .iter()
            .filter(|p| {
                topo.nics[p.nic]
                    .pci
                    .as_ref()
                    .is_some_and(|n| !nccl::share_a_bridge(&topo.gpus[g].pci, n))
            })
            .map(|p| topo.nics[p.nic].name.clone())
            .collect();
        if !pairs.is_empty() && bad.len() == pairs.len() {
            refused_gpus.push(topo.gpus[g].pci.bdf.clone());
        }
        refused_pairs.extend(bad.iter().map(|n| format!("{}–{n}", topo.gpus[g].pci.bdf)));
    }
    detail.extend(
        refused_pairs.iter().map(|p| {
            format!("{p}: no shared PCIe bridge: registrations fail with -ENOTSUPP (524)")
        }),
    );
    let mut kinds: Vec<String> = found.iter().map(|(_, n)| n.to_string()).collect();
    kinds.dedup();
    let names = list(&kinds);
    let fix = "put GPU and NIC under one PCIe switch, or (if this platform's PCIe P2P is known good) \
               `options nvidia NVreg_GrdmaPciTopoCheckOverride=1` in modprobe.d and reload the driver; \
               a passthrough VM is exempt";
    let fix = if cdmm_ruled {
        format!("{fix}; for CDMM GPUs also: upgrade the driver to 580.142 / 595.44.02 or newer (maps then need nvidia-uvm, not a shared switch), or drop CDMM (numa mode)")
    } else {
        fix.to_string()
    };
    if !refused_gpus.is_empty() {
        return Check::fail(
            ID,
            format!(
                "{names} chipset, driver {version}: {} share(s) no PCIe switch with any NIC, so the driver refuses its registrations (-ENOTSUPP, 524){}",
                few(&refused_gpus, "GPUs"),
                if cdmm_ruled {
                    " (CDMM: on this driver coherent GPU memory takes the PCIe topology rule)"
                } else {
                    ""
                }
            ),
            fix,
        )
        .detail(detail);
    }
    if !refused_pairs.is_empty() {
        return Check::warn(
            ID,
            format!(
                "{names} chipset, driver {version}: {} GPU–NIC pair(s) share no PCIe switch and are refused (-ENOTSUPP, 524)",
                refused_pairs.len()
            ),
            fix,
        )
        .detail(detail);
    }
    Check::ok(
        ID,
        format!("{names} chipset, driver {version}: every GPU shares a PCIe switch with its NICs, as the driver requires"),
    )
    .detail(detail)
}

/// What dma-buf needs on this host; `None` where it cannot be told.
#[derive(Debug, Clone)]
pub(crate) struct Dmabuf {
    /// Linux 5.12 or newer.
    pub kernel: Option<bool>,
    /// The RDMA core's `ib_umem_dmabuf_get*`.
    pub rdma_core: Option<bool>,
    /// The NIC drivers' dma-buf MR verbs found.
    pub nic_verbs: Vec<String>,
    /// The NVIDIA open kernel modules.
    pub open: Option<bool>,
    /// Every GPU's `DMA_BUF_SUPPORTED`.
    pub gpu: Option<bool>,
}

impl Dmabuf {
    /// Whether everything known says yes and nothing says no.
    pub fn ready(&self) -> Option<bool> {
        let parts = [self.kernel, self.rdma_core, self.open, self.gpu];
        if parts.contains(&Some(false)) {
            Some(false)
        } else if parts.iter().all(Option::is_some) {
            Some(true)
        } else {
            None
        }
    }

    /// Whether jobs would register through dma-buf: nothing known says no
    /// and the kernel, its RDMA core and the driver flavour are known (the
    /// GPUs' own answer may be unknown: the probe is optional).
    pub fn usable(&self) -> bool {
        self.ready() != Some(false)
            && self.kernel.is_some()
            && self.rdma_core.is_some()
            && self.open.is_some()
    }

    /// What stands in the way, in words.
    pub fn missing(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.kernel == Some(false) {
            out.push("a kernel older than 5.12".to_string());
        }
        if self.rdma_core == Some(false) {
            out.push(
                "an RDMA core without dma-buf registration (no ib_umem_dmabuf_get)".to_string(),
            );
        }
        if self.open == Some(false) {
            out.push(
                "the proprietary NVIDIA kernel module (dma-buf needs the open one)".to_string(),
            );
        }
        if self.gpu == Some(false) {
            out.push("a GPU that reports DMA_BUF_SUPPORTED=0".to_string());
        }
        out
    }
}

/// Reads what dma-buf needs.
pub(crate) fn dmabuf(host: &Host) -> Dmabuf {
    let kernel = host.release.as_deref().and_then(|r| {
        let v = version_parts(r);
        (v.len() >= 2).then(|| v[..2] >= [5u32, 12][..])
    });
    let rdma_core = if !host.kallsyms.readable {
        None
    } else if host
        .kallsyms
        .with_prefix(DMABUF_UMEM_PREFIX)
        .next()
        .is_some()
    {
        Some(true)
    } else if host.loaded("ib_core").is_some() || host.loaded("ib_uverbs").is_some() {
        Some(false)
    } else {
        None
    };
    let nic_verbs = host
        .kallsyms
        .with_suffix(DMABUF_MR_SUFFIX)
        .filter(|(n, _)| !n.starts_with("__pfx_"))
        .map(|(n, m)| format!("{n} [{}]", m.unwrap_or("vmlinux")))
        .collect();
    let gpu = match &host.cuda {
        CudaAnswer::Gpus { gpus, .. } if !gpus.is_empty() => {
            let answers: Vec<Option<i32>> = gpus.iter().map(|g| g.dmabuf).collect();
            if answers.contains(&Some(0)) {
                Some(false)
            } else if answers.iter().all(|a| *a == Some(1)) {
                Some(true)
            } else {
                None
            }
        }
        _ => None,
    };
    Dmabuf {
        kernel,
        rdma_core,
        nic_verbs,
        open: open_modules(host),
        gpu,
    }
}

/// `dmabuf.kernel`: the kernel, its RDMA core and the driver flavour dma-buf needs.
pub(crate) fn dmabuf_kernel(host: &Host) -> Check {
    const ID: &str = "dmabuf.kernel";
    let d = dmabuf(host);
    let yes = |b: Option<bool>| match b {
        Some(true) => "yes",
        Some(false) => "no",
        None => "unknown",
    };
    let mut detail = vec![
        format!(
            "kernel {} is 5.12 or newer: {}",
            host.release.as_deref().unwrap_or("?"),
            yes(d.kernel)
        ),
        format!(
            "RDMA core dma-buf registration ({DMABUF_UMEM_PREFIX}* in /proc/kallsyms): {}",
            if host.kallsyms.readable {
                yes(d.rdma_core)
            } else {
                "kallsyms unreadable"
            }
        ),
        format!(
            "NIC drivers' dma-buf MR verb: {}",
            if d.nic_verbs.is_empty() {
                "none listed".to_string()
            } else {
                d.nic_verbs.join(", ")
            }
        ),
        format!("NVIDIA open kernel modules: {}", yes(d.open)),
    ];
    detail.extend(
        host.kallsyms
            .with_prefix(DMABUF_UMEM_PREFIX)
            .map(|(n, m)| format!("{n} [{}]", m.unwrap_or("vmlinux"))),
    );
    let parts = [d.kernel, d.rdma_core, d.open];
    let missing: Vec<String> = Dmabuf {
        gpu: None,
        ..d.clone()
    }
    .missing();
    if !missing.is_empty() {
        return Check::info(
            ID,
            format!("dma-buf registration is not available: {}", list(&missing)),
        )
        .fix(
            "dma-buf needs Linux 5.12+, an RDMA core with ib_umem_dmabuf_get (upstream or DOCA-OFED) and the \
             open NVIDIA kernel modules; until then GPUDirect RDMA needs peer memory (this module)",
        )
        .detail(detail);
    }
    if parts.iter().any(Option::is_none) {
        let unknown: Vec<&str> = [
            ("the kernel release", d.kernel),
            ("the RDMA core", d.rdma_core),
            ("the driver flavour", d.open),
        ]
        .iter()
        .filter(|(_, v)| v.is_none())
        .map(|(n, _)| *n)
        .collect();
        return Check::info(
            ID,
            format!(
                "dma-buf readiness unknown: cannot tell {}",
                unknown.join(", ")
            ),
        )
        .detail(detail);
    }
    Check::ok(
        ID,
        "kernel, RDMA core and NVIDIA open kernel modules support dma-buf registration (ibv_reg_dmabuf_mr)",
    )
    .detail(detail)
}

/// `dmabuf.gpu`: the GPU's own answer through libcuda.
pub(crate) fn dmabuf_gpu(host: &Host) -> Check {
    const ID: &str = "dmabuf.gpu";
    match &host.cuda {
        CudaAnswer::NotAsked => Check::info(
            ID,
            "libcuda not asked (--root without a cuda-probe.txt record)",
        ),
        CudaAnswer::NoLibrary => Check::info(
            ID,
            "libcuda.so.1 is not installed: the GPUs' own dma-buf and GPUDirect RDMA answer is unknown",
        ),
        CudaAnswer::StaticBuild => Check::info(
            ID,
            "not asked: this static build of the doctor cannot load libcuda.so.1",
        )
        .fix("run the packaged (dynamically linked) nvidia-peermem-doctor to ask the GPUs"),
        CudaAnswer::InitFailed(rc) => Check::info(
            ID,
            format!("libcuda.so.1 is installed but cuInit failed (CUresult {rc}): the GPUs did not answer"),
        )
        .fix("`nvidia-smi` shows whether the driver and the GPUs are usable; CUresult 100 is no device, 999 unknown"),
        CudaAnswer::Gpus { driver_api, gpus } => {
            let api = format!("{}.{}", driver_api / 1000, (driver_api % 1000) / 10);
            let detail: Vec<String> = gpus
                .iter()
                .map(|g| {
                    let v = |x: Option<i32>| x.map_or("?".to_string(), |v| v.to_string());
                    let mut s = format!(
                        "{} {}: GPU_DIRECT_RDMA_SUPPORTED={} DMA_BUF_SUPPORTED={} FLUSH_WRITES_OPTIONS={} WRITES_ORDERING={}",
                        g.pci, g.name, v(g.gdr), v(g.dmabuf), v(g.flush), v(g.ordering)
                    );
                    if let Some(e) = &g.export {
                        s.push_str(&format!("; dma-buf export of 2 MiB: {e}"));
                    }
                    s
                })
                .collect();
            if gpus.is_empty() {
                return Check::info(ID, format!("CUDA {api} sees no GPU")).detail(detail);
            }
            let no_dmabuf: Vec<String> = gpus.iter().filter(|g| g.dmabuf == Some(0)).map(|g| g.pci.clone()).collect();
            let no_gdr: Vec<String> = gpus.iter().filter(|g| g.gdr == Some(0)).map(|g| g.pci.clone()).collect();
            let failed_export: Vec<String> = gpus
                .iter()
                .filter(|g| g.export.as_deref().is_some_and(|e| e != "ok"))
                .map(|g| g.pci.clone())
                .collect();
            if !no_gdr.is_empty() {
                return Check::warn(
                    ID,
                    format!("CUDA {api}: {} report(s) GPU_DIRECT_RDMA_SUPPORTED=0", few(&no_gdr, "GPUs")),
                    "this GPU or platform has no GPUDirect RDMA (GeForce boards, some vGPU profiles, DGX Spark/GB10): \
                     jobs stage through host memory",
                )
                .detail(detail);
            }
            if !no_dmabuf.is_empty() || !failed_export.is_empty() {
                let mut bad = no_dmabuf.clone();
                bad.extend(failed_export.iter().filter(|b| !no_dmabuf.contains(b)).cloned());
                return Check::info(
                    ID,
                    format!("CUDA {api}: {} cannot export dma-buf; peer memory is their GPUDirect RDMA path", few(&bad, "GPUs")),
                )
                .detail(detail);
            }
            let export = if gpus.iter().all(|g| g.export.as_deref() == Some("ok")) {
                " and exported a dma-buf of 2 MiB"
            } else {
                ""
            };
            Check::ok(
                ID,
                format!(
                    "CUDA {api}: {} report(s) GPU_DIRECT_RDMA_SUPPORTED=1 and DMA_BUF_SUPPORTED=1{export}",
                    few(&gpus.iter().map(|g| g.pci.clone()).collect::<Vec<_>>(), "GPUs")
                ),
            )
            .detail(detail)
        }
    }
}

/// The NCCL path and GDR mode of every GPU–NIC pair, in pair order.
pub(crate) fn nccl_pairs(host: &Host) -> Vec<(NcclPath, GdrMode)> {
    let topo = &host.topo;
    topo.pairs
        .iter()
        .filter_map(|p| {
            let gpu = &topo.gpus[p.gpu].pci;
            let nic = topo.nics[p.nic].pci.as_ref()?;
            let path = nccl::path(gpu, nic);
            Some((path, nccl::gdr_mode(gpu, path)))
        })
        .collect()
}

/// `nccl.paths`: the path NCCL computes per pair and whether it uses
/// GPUDirect RDMA there at its default `NCCL_NET_GDR_LEVEL`.
pub(crate) fn nccl_paths(host: &Host) -> Check {
    const ID: &str = "nccl.paths";
    let topo = &host.topo;
    if topo.pairs.is_empty() {
        return Check::info(
            ID,
            "no GPU–NIC pair: NCCL has no network path to use GPUDirect RDMA on",
        );
    }
    let modes = nccl_pairs(host);
    let mut detail = Vec::new();
    for (p, (path, mode)) in topo.pairs.iter().zip(&modes) {
        detail.push(format!(
            "{} – {}: {path}, GPUDirect RDMA {}",
            topo.gpus[p.gpu].pci.bdf,
            topo.nics[p.nic].name,
            match mode {
                GdrMode::Disabled => "disabled",
                GdrMode::Default => "enabled",
                GdrMode::Pci => "enabled with a PCIe mapping (dma-buf only)",
            }
        ));
    }
    let mut off = Vec::new();
    let mut pci_only = Vec::new();
    for (g, gpu) in topo.gpus.iter().enumerate() {
        let mine: Vec<(NcclPath, GdrMode)> = topo
            .pairs
            .iter()
            .zip(&modes)
            .filter(|(p, _)| p.gpu == g)
            .map(|(_, m)| *m)
            .collect();
        let Some(best) = mine.iter().map(|(p, _)| *p).min() else {
            continue;
        };
        if mine.iter().all(|(_, m)| *m == GdrMode::Disabled) {
            off.push(format!("{} ({best})", gpu.pci.bdf));
        } else if mine.iter().all(|(_, m)| *m != GdrMode::Default) {
            pci_only.push(gpu.pci.bdf.clone());
        }
    }
    if !off.is_empty() {
        return Check::warn(
            ID,
            format!(
                "NCCL will log \"GPU Direct RDMA Disabled\" for {}: no NIC within NCCL_NET_GDR_LEVEL's default ({})",
                few(&off, "GPUs"),
                nccl::DEFAULT_GDR_LEVEL
            ),
            "put a NIC under the GPU's PCIe switch, or accept the slower path with NCCL_NET_GDR_LEVEL=PHB \
             (SYS across NUMA nodes) in the job's environment",
        )
        .detail(detail);
    }
    let d = dmabuf(host);
    if !pci_only.is_empty() && d.ready() == Some(false) {
        return Check::warn(
            ID,
            format!(
                "NCCL needs PCIe mappings for the C2C GPU(s) {}, which only dma-buf gives, and dma-buf is not available",
                few(&pci_only, "GPUs")
            ),
            "enable dma-buf (dmabuf.kernel, dmabuf.gpu; CUDA 12.8+), or use the NIC on the GPU's C2C path",
        )
        .detail(detail);
    }
    let mut paths: Vec<NcclPath> = modes.iter().map(|(p, _)| *p).collect();
    paths.sort();
    paths.dedup();
    Check::ok(
        ID,
        format!(
            "NCCL uses GPUDirect RDMA for every GPU at its default NCCL_NET_GDR_LEVEL ({}); paths: {}",
            nccl::DEFAULT_GDR_LEVEL,
            paths.iter().map(|p| p.as_str()).collect::<Vec<_>>().join(", ")
        ),
    )
    .detail(detail)
}

/// `cluster.view`: `nvidia_peermem` as the GPU Operator, NCCL and UCX test for it.
pub(crate) fn cluster_view(host: &Host) -> Check {
    const ID: &str = "cluster.view";
    let modules = &host.proc_modules;
    // The validator's `lsmod | grep -E '^nvidia_peermem\s'`.
    let lsmod = modules.as_deref().map(|m| {
        m.lines().any(|l| {
            l.strip_prefix(MODULE)
                .is_some_and(|r| r.starts_with([' ', '\t']))
        })
    });
    let refcnt = &host.refcnt;
    let first = |idx: &[usize]| idx.iter().find(|&&i| host.gdr[i]).map(|&i| GDR_PATHS[i]);
    let (nccl, ucx) = (first(&NCCL_PATHS), first(&UCX_PATHS));
    let lsmod_text = match lsmod {
        Some(true) => "lists nvidia_peermem",
        Some(false) => "does not list nvidia_peermem",
        None => "unknown (/proc/modules unreadable)",
    };
    let detail = vec![
        format!("GPU Operator validator, lsmod | grep -E '^{MODULE}\\s': {lsmod_text}"),
        format!(
            "GPU Operator peermem probe, /sys/module/{MODULE}/refcnt: {}",
            refcnt
                .as_deref()
                .map_or("absent".to_string(), |r| format!("present ({r})"))
        ),
        format!("NCCL: {}", nccl.unwrap_or("none of its files")),
        format!("UCX: {}", ucx.unwrap_or("none of its files")),
    ];
    let summary = format!(
        "GPU Operator: lsmod {lsmod_text}, refcnt {}; NCCL: {}; UCX: {}",
        refcnt.as_deref().unwrap_or("absent"),
        if nccl.is_some() {
            "peer memory"
        } else {
            "no peer memory"
        },
        if ucx.is_some() {
            "peer memory"
        } else {
            "no peer memory"
        }
    );
    if host.ours.is_none() {
        return Check::info(
            ID,
            format!("{summary}: the GPU Operator's driver container would modprobe {MODULE} (with Mellanox devices present)"),
        )
        .detail(detail);
    }
    if lsmod == Some(false) || refcnt.is_none() {
        return Check::warn(
            ID,
            format!("{summary}: the GPU Operator does not see the loaded {MODULE} and will try to load it again"),
            "a module built into the kernel has no refcnt and no lsmod line; build it as a module (=m)",
        )
        .detail(detail);
    }
    if host.loaded_is_nvidias() {
        return Check::info(
            ID,
            format!("{summary}: what they see is NVIDIA's module (module.loaded)"),
        )
        .detail(detail);
    }
    Check::ok(ID, summary).detail(detail)
}

/// `gdr.path`: which registration path NCCL and UCX take on this host,
/// and whether this module is needed for it.
pub(crate) fn gdr_path(host: &Host) -> Check {
    const ID: &str = "gdr.path";
    let d = dmabuf(host);
    let peer = NCCL_PATHS.iter().any(|&i| host.gdr[i]);
    let mut detail = vec![
        "NCCL (NCCL_DMABUF_ENABLE=1 by default) registers with dma-buf when the GPU and ibv_reg_dmabuf_mr support it, \
         else with peer memory; UCX (rdma-core 41+, CUDA 11.7+) likewise"
            .to_string(),
        format!(
            "dma-buf: {}",
            match d.ready() {
                Some(true) => "ready".to_string(),
                Some(false) => format!("not available ({})", list(&d.missing())),
                None => "probably ready; the GPUs' answer is unknown (dmabuf.gpu)".to_string(),
            }
        ),
        format!("peer memory: {}", if peer { "loaded (NCCL sees it)" } else { "not loaded" }),
    ];
    let modes = nccl_pairs(host);
    let gpus_on = host.topo.gpus.len()
        - (0..host.topo.gpus.len())
            .filter(|&g| {
                let m: Vec<_> = host
                    .topo
                    .pairs
                    .iter()
                    .zip(&modes)
                    .filter(|(p, _)| p.gpu == g)
                    .collect();
                m.is_empty() || m.iter().all(|(_, (_, mode))| *mode == GdrMode::Disabled)
            })
            .count();
    let dmabuf_ok = d.usable();
    let needed = if dmabuf_ok {
        format!(
            "{MODULE} is not needed for NCCL's or UCX's memory registrations (keep it for MOFED's GPU-resident queues: \
             IBGDA, NVSHMEM, DeepEP)"
        )
    } else {
        format!("{MODULE} is needed: it is the only GPUDirect RDMA path here")
    };
    detail.push(needed.clone());
    if host.topo.pairs.is_empty() {
        let way = if dmabuf_ok { "dma-buf" } else { "peer memory" };
        return Check::info(
            ID,
            format!("no GPU–NIC pair: no GPUDirect RDMA today; with a NIC, jobs would register GPU memory through {way}: {needed}"),
        )
        .detail(detail);
    }
    let with_pairs = (0..host.topo.gpus.len())
        .filter(|&g| host.topo.pairs_of(g).next().is_some())
        .count();
    let scope = format!(
        "{gpus_on} of {} GPU(s) within NCCL's GDR level (nccl.paths)",
        host.topo.gpus.len()
    );
    // Some GPUs out of NCCL's reach: nccl.paths has the path and the fix.
    let verdict = |summary: String| {
        if gpus_on < with_pairs {
            Check::warn(
                ID,
                summary,
                "NCCL stages through host memory on the other GPUs: see nccl.paths for their path and its fix",
            )
        } else {
            Check::ok(ID, summary)
        }
    };
    if dmabuf_ok {
        let also = if peer {
            "; peer memory is loaded too, NCCL prefers dma-buf"
        } else {
            ""
        };
        return verdict(format!(
            "NCCL and UCX will use dma-buf on {scope}{also}: {needed}"
        ))
        .detail(detail);
    }
    if peer {
        return verdict(format!(
            "NCCL and UCX will use peer memory ({MODULE}) on {scope}; dma-buf is not available: {}",
            list(&d.missing())
        ))
        .detail(detail);
    }
    let why = if d.missing().is_empty() {
        "readiness unknown".to_string()
    } else {
        list(&d.missing())
    };
    Check::fail(
        ID,
        format!(
            "neither dma-buf ({why}) nor peer memory: NCCL will log \"GPU Direct RDMA Disabled\""
        ),
        format!(
            "load {MODULE} (module.loaded), or meet dma-buf's needs (dmabuf.kernel, dmabuf.gpu)"
        ),
    )
    .detail(detail)
}
