// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! The NVIDIA driver's registry keys as the driver prints them in
//! [`DRIVER_PARAMS`](super::paths::DRIVER_PARAMS): `Key: value` per line,
//! numbers bare, strings quoted (`kernel-open/nvidia/nv-procfs.c`:
//! `nv_procfs_read_params`). That file is the only place to read them: the
//! keys are `NVreg_*` module parameters registered with permission 0
//! (`nv-linux.h`: `NV_MODULE_PARAMETER`, `NV_MODULE_STRING_PARAMETER`), so
//! `/sys/module/nvidia/parameters/` has none of them.

/// `key: value` of the driver's params text, the value unquoted.
pub fn value(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == key).then(|| v.trim().trim_matches('"').to_string())
    })
}

/// How a coherent (C2C) GPU's memory is managed, from the driver's keys.
///
/// `CoherentGPUMemoryMode` (`nv-reg.h`, 580.65.06 on): `"driver"` is CDMM,
/// unset or `"numa"` onlines the memory as a NUMA node. `os-registry.c`
/// turns `"driver"` (exactly, `strcmp`) into the older
/// `EnableUserNUMAManagement=0`, and the driver reports the mode as
/// `_DRIVER` whenever a coherent GPU's memory is not onlined
/// (`subdevice_ctrl_gpu_kernel.c`, `NV2080_CTRL_GPU_INFO_INDEX_COHERENT_GPU_MEMORY_MODE`),
/// so `EnableUserNUMAManagement: 0` alone is CDMM too. Neither applies to
/// a GPU that is not coherent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoherentMemoryMode {
    /// The memory is onlined as a NUMA node and has `struct page` (the default).
    Numa,
    /// CDMM, from `CoherentGPUMemoryMode: "driver"`.
    Driver,
    /// CDMM, from `EnableUserNUMAManagement: 0` without `CoherentGPUMemoryMode=driver`.
    UserNumaOff,
}

impl CoherentMemoryMode {
    /// The mode the params text sets; `None` when it names neither key.
    pub fn read(text: &str) -> Option<CoherentMemoryMode> {
        let mode = value(text, "CoherentGPUMemoryMode");
        let user_numa = value(text, "EnableUserNUMAManagement");
        if mode.as_deref() == Some("driver") {
            Some(CoherentMemoryMode::Driver)
        } else if user_numa.as_deref() == Some("0") {
            Some(CoherentMemoryMode::UserNumaOff)
        } else if mode.is_some() || user_numa.is_some() {
            Some(CoherentMemoryMode::Numa)
        } else {
            None
        }
    }

    /// Whether coherent GPU memory is the driver's (CDMM): no `struct page`.
    pub fn is_cdmm(self) -> bool {
        self != CoherentMemoryMode::Numa
    }

    /// The keys that set it, as evidence.
    pub fn why(self) -> &'static str {
        match self {
            CoherentMemoryMode::Numa => "CoherentGPUMemoryMode numa (the default)",
            CoherentMemoryMode::Driver => "CoherentGPUMemoryMode=driver",
            CoherentMemoryMode::UserNumaOff => "EnableUserNUMAManagement=0",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_unquoted() {
        let t = "EnableMSI: 1\nCoherentGPUMemoryMode: \"driver\"\nRmMsg: \"\"";
        assert_eq!(value(t, "CoherentGPUMemoryMode").as_deref(), Some("driver"));
        assert_eq!(value(t, "RmMsg").as_deref(), Some(""));
        assert_eq!(value(t, "EnableMSI").as_deref(), Some("1"));
        assert_eq!(value(t, "Missing"), None);
    }

    #[test]
    fn modes() {
        use CoherentMemoryMode::*;
        let read = CoherentMemoryMode::read;
        assert_eq!(
            read("EnableUserNUMAManagement: 0\nCoherentGPUMemoryMode: \"driver\""),
            Some(Driver)
        );
        assert_eq!(
            read("EnableUserNUMAManagement: 0\nCoherentGPUMemoryMode: \"\""),
            Some(UserNumaOff)
        );
        assert_eq!(
            read("EnableUserNUMAManagement: 1\nCoherentGPUMemoryMode: \"Driver\""),
            Some(Numa)
        );
        assert_eq!(read("CoherentGPUMemoryMode: \"\""), Some(Numa));
        assert_eq!(read("EnableMSI: 1"), None);
        assert!(Driver.is_cdmm() && UserNumaOff.is_cdmm() && !Numa.is_cdmm());
    }
}
