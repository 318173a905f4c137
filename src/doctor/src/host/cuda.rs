// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! The GPU's own answer on GPUDirect RDMA and dma-buf, from the CUDA
//! driver API in `libcuda.so.1`, opened with `dlopen` when it is there
//! (the doctor needs no CUDA to build or run), and its text record.
//!
//! The record is what `nvidia-peermem-doctor --cuda-probe` prints and what
//! a captured host keeps as `cuda-probe.txt` beside its tree (`--root`):
//!
//! ```text
//! library libcuda.so.1
//! driver_api 13000
//! gpu 0000:00:06.0 gdr=1 dmabuf=1 flush=1 ordering=100 export=ok name=NVIDIA H200
//! ```
//!
//! `library none` (not installed), `library static` (a static build cannot
//! `dlopen`) or `init N` (`cuInit` failed with CUresult N) replace the rest.
use crate::host::root::Root;

/// `CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED` (CUDA's `cuda.h`).
pub const ATTR_GPU_DIRECT_RDMA_SUPPORTED: i32 = 116;
/// `CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS`.
pub const ATTR_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS: i32 = 117;
/// `CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING`.
pub const ATTR_GPU_DIRECT_RDMA_WRITES_ORDERING: i32 = 118;
/// `CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED`.
pub const ATTR_DMA_BUF_SUPPORTED: i32 = 124;

/// Where a record is kept beside a captured tree.
pub const RECORD_FILE: &str = "/cuda-probe.txt";

/// One GPU as the CUDA driver describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CudaGpu {
    /// PCI address, lower case (`0000:00:06.0`).
    pub pci: String,
    /// Product name.
    pub name: String,
    /// `GPU_DIRECT_RDMA_SUPPORTED`, if the query worked.
    pub gdr: Option<i32>,
    /// `DMA_BUF_SUPPORTED`, if the query worked.
    pub dmabuf: Option<i32>,
    /// `GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS`.
    pub flush: Option<i32>,
    /// `GPU_DIRECT_RDMA_WRITES_ORDERING`.
    pub ordering: Option<i32>,
    /// The export probe: `ok`, or the failing call and its CUresult; `None` when not tried.
    pub export: Option<String>,
}

/// What libcuda said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CudaAnswer {
    /// Not asked: the tree (`--root`) holds no record.
    NotAsked,
    /// `libcuda.so.1` is not installed.
    NoLibrary,
    /// A static build of the doctor cannot `dlopen`.
    StaticBuild,
    /// `cuInit` failed with this CUresult.
    InitFailed(i32),
    /// The GPUs it sees.
    Gpus {
        /// `cuDriverGetVersion` (`13000` for 13.0).
        driver_api: i32,
        /// One entry per CUDA device.
        gpus: Vec<CudaGpu>,
    },
}

impl CudaAnswer {
    /// The record, one fact per line.
    pub fn record(&self) -> String {
        match self {
            CudaAnswer::NotAsked => "library not-asked\n".to_string(),
            CudaAnswer::NoLibrary => "library none\n".to_string(),
            CudaAnswer::StaticBuild => "library static\n".to_string(),
            CudaAnswer::InitFailed(rc) => format!("library libcuda.so.1\ninit {rc}\n"),
            CudaAnswer::Gpus { driver_api, gpus } => {
                let mut s = format!("library libcuda.so.1\ndriver_api {driver_api}\n");
                for g in gpus {
                    let v = |x: Option<i32>| x.map_or("?".to_string(), |v| v.to_string());
                    s.push_str(&format!(
                        "gpu {} gdr={} dmabuf={} flush={} ordering={}",
                        g.pci,
                        v(g.gdr),
                        v(g.dmabuf),
                        v(g.flush),
                        v(g.ordering)
                    ));
                    if let Some(e) = &g.export {
                        s.push_str(&format!(" export={e}"));
                    }
                    s.push_str(&format!(" name={}\n", g.name));
                }
                s
            }
        }
    }

    /// Reads a record; `Err` names the line that does not parse.
    pub fn parse(text: &str) -> Result<CudaAnswer, String> {
        let mut library = None;
        let mut driver_api = None;
        let mut init = None;
        let mut gpus = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let err = || format!("line {}: cannot parse '{line}'", i + 1);
            let (key, rest) = line.split_once(' ').ok_or_else(err)?;
            match key {
                "library" => library = Some(rest.to_string()),
                "driver_api" => driver_api = Some(rest.parse::<i32>().map_err(|_| err())?),
                "init" => init = Some(rest.parse::<i32>().map_err(|_| err())?),
                "gpu" => gpus.push(parse_gpu(rest).ok_or_else(err)?),
                _ => return Err(err()),
            }
        }
        match (library.as_deref(), init, driver_api) {
            (Some("none"), ..) => Ok(CudaAnswer::NoLibrary),
            (Some("static"), ..) => Ok(CudaAnswer::StaticBuild),
            (Some("not-asked"), ..) => Ok(CudaAnswer::NotAsked),
            (Some(_), Some(rc), _) => Ok(CudaAnswer::InitFailed(rc)),
            (Some(_), None, Some(driver_api)) => Ok(CudaAnswer::Gpus { driver_api, gpus }),
            (None, ..) => Err("no 'library' line".to_string()),
            (Some(_), None, None) => Err("no 'driver_api' or 'init' line".to_string()),
        }
    }

    /// The entry for a PCI address.
    pub fn gpu(&self, pci: &str) -> Option<&CudaGpu> {
        match self {
            CudaAnswer::Gpus { gpus, .. } => gpus.iter().find(|g| g.pci.eq_ignore_ascii_case(pci)),
            _ => None,
        }
    }
}

/// `PCI key=value... name=NAME` (the name last: it has spaces).
fn parse_gpu(rest: &str) -> Option<CudaGpu> {
    let (head, name) = rest.split_once(" name=").unwrap_or((rest, ""));
    let mut words = head.split_whitespace();
    let mut g = CudaGpu {
        pci: words.next()?.to_ascii_lowercase(),
        name: name.to_string(),
        ..CudaGpu::default()
    };
    for w in words {
        let (k, v) = w.split_once('=')?;
        let num = || -> Option<Option<i32>> {
            if v == "?" {
                Some(None)
            } else {
                v.parse().ok().map(Some)
            }
        };
        match k {
            "gdr" => g.gdr = num()?,
            "dmabuf" => g.dmabuf = num()?,
            "flush" => g.flush = num()?,
            "ordering" => g.ordering = num()?,
            "export" => g.export = Some(v.to_string()),
            _ => return None,
        }
    }
    crate::host::pci::is_bdf(&g.pci).then_some(g)
}

/// The `cuda-probe.txt` record of a captured tree; `NotAsked` without one.
pub fn read_record(root: &Root) -> Result<CudaAnswer, String> {
    match root.read_bytes(RECORD_FILE).map(String::from_utf8) {
        Some(Ok(text)) => CudaAnswer::parse(&text).map_err(|e| format!("{RECORD_FILE}: {e}")),
        _ => Ok(CudaAnswer::NotAsked),
    }
}

/// Asks the CUDA driver of this host; `export` also allocates 2 MiB on
/// each GPU and asks for a dma-buf of it (`cuMemGetHandleForAddressRange`).
pub fn probe(export: bool) -> CudaAnswer {
    if cfg!(target_feature = "crt-static") {
        return CudaAnswer::StaticBuild;
    }
    live::probe(export)
}

#[cfg(not(target_feature = "crt-static"))]
mod live {
    //! The calls into libcuda: the only `unsafe` code of the doctor.
    #![allow(unsafe_code)]

    use std::ffi::{c_char, c_int, c_uint, c_void, CStr};

    use super::*;

    extern "C" {
        fn dlopen(file: *const c_char, mode: c_int) -> *mut c_void;
        fn dlsym(handle: *mut c_void, name: *const c_char) -> *mut c_void;
    }

    /// `RTLD_NOW | RTLD_LOCAL`.
    const RTLD_NOW: c_int = 2;
    /// `CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD`.
    const HANDLE_TYPE_DMA_BUF_FD: c_int = 1;

    // Each type below is the C prototype (cuda.h) of the symbols `sym` is
    // asked for with it, which `sym`'s contract requires; every call's own
    // SAFETY comment says why its arguments are valid.
    /// # Safety: `CUresult cuInit(unsigned int Flags)`.
    type Init = unsafe extern "C" fn(c_uint) -> c_int;
    /// # Safety: `cuDriverGetVersion(int *)`, `cuDeviceGetCount(int *)`.
    type IntOut = unsafe extern "C" fn(*mut c_int) -> c_int;
    /// # Safety: `cuDeviceGet(CUdevice *device, int ordinal)`.
    type DeviceGet = unsafe extern "C" fn(*mut c_int, c_int) -> c_int;
    /// # Safety: `cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)`.
    type Attribute = unsafe extern "C" fn(*mut c_int, c_int, c_int) -> c_int;
    /// # Safety: `cuDeviceGetPCIBusId` and `cuDeviceGetName(char *, int len, CUdevice dev)`.
    type Text = unsafe extern "C" fn(*mut c_char, c_int, c_int) -> c_int;
    /// # Safety: `cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)`.
    type CtxRetain = unsafe extern "C" fn(*mut *mut c_void, c_int) -> c_int;
    /// # Safety: `cuCtxSetCurrent(CUcontext ctx)`.
    type CtxSet = unsafe extern "C" fn(*mut c_void) -> c_int;
    /// # Safety: `cuDevicePrimaryCtxRelease_v2(CUdevice dev)`.
    type CtxRelease = unsafe extern "C" fn(c_int) -> c_int;
    /// # Safety: `cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)`.
    type MemAlloc = unsafe extern "C" fn(*mut u64, usize) -> c_int;
    /// # Safety: `cuMemFree_v2(CUdeviceptr dptr)`.
    type MemFree = unsafe extern "C" fn(u64) -> c_int;
    /// # Safety: `cuMemGetHandleForAddressRange(void *handle, CUdeviceptr dptr, size_t size,
    /// CUmemRangeHandleType handleType, unsigned long long flags)`.
    type Handle = unsafe extern "C" fn(*mut c_void, u64, usize, c_int, u64) -> c_int;

    /// The symbol `name` of `lib` as a function of type `F`.
    ///
    /// # Safety
    ///
    /// `F` must be the function pointer type of the symbol's C prototype.
    unsafe fn sym<F: Copy>(lib: *mut c_void, name: &CStr) -> Option<F> {
        // SAFETY: `lib` is a handle from `dlopen`, `name` is NUL-terminated.
        let p = unsafe { dlsym(lib, name.as_ptr()) };
        if p.is_null() {
            return None;
        }
        // SAFETY: the caller names the symbol's type; function and data
        // pointers have one size on the platforms Linux runs on.
        Some(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) })
    }

    pub(super) fn probe(export: bool) -> CudaAnswer {
        // SAFETY: a constant NUL-terminated name; dlopen has no other precondition.
        let lib = unsafe { dlopen(c"libcuda.so.1".as_ptr(), RTLD_NOW) };
        if lib.is_null() {
            return CudaAnswer::NoLibrary;
        }
        // SAFETY: the types below are the CUDA driver API's prototypes (cuda.h).
        let (Some(init), Some(version), Some(count), Some(get), Some(attr), Some(bus), Some(name)) =
            (unsafe {
                (
                    sym::<Init>(lib, c"cuInit"),
                    sym::<IntOut>(lib, c"cuDriverGetVersion"),
                    sym::<IntOut>(lib, c"cuDeviceGetCount"),
                    sym::<DeviceGet>(lib, c"cuDeviceGet"),
                    sym::<Attribute>(lib, c"cuDeviceGetAttribute"),
                    sym::<Text>(lib, c"cuDeviceGetPCIBusId"),
                    sym::<Text>(lib, c"cuDeviceGetName"),
                )
            })
        else {
            return CudaAnswer::InitFailed(-1);
        };
        // SAFETY: cuInit takes flags 0; the out-pointers below are to live locals.
        let rc = unsafe { init(0) };
        if rc != 0 {
            return CudaAnswer::InitFailed(rc);
        }
        let mut driver_api = 0;
        let mut n = 0;
        // SAFETY: as above.
        if unsafe { version(&mut driver_api) } != 0 || unsafe { count(&mut n) } != 0 {
            return CudaAnswer::InitFailed(-1);
        }
        let mut gpus = Vec::new();
        for ordinal in 0..n {
            let mut dev = 0;
            // SAFETY: an ordinal below the count cuDeviceGetCount gave.
            if unsafe { get(&mut dev, ordinal) } != 0 {
                continue;
            }
            let text = |f: Text| {
                let mut buf = [0 as c_char; 128];
                // SAFETY: the buffer's length is passed; libcuda NUL-terminates within it.
                if unsafe { f(buf.as_mut_ptr(), 128, dev) } != 0 {
                    return String::new();
                }
                // SAFETY: NUL-terminated by libcuda within the buffer.
                unsafe { CStr::from_ptr(buf.as_ptr()) }
                    .to_string_lossy()
                    .into_owned()
            };
            let query = |a: i32| {
                let mut v = 0;
                // SAFETY: a live out-pointer and a device handle from cuDeviceGet.
                (unsafe { attr(&mut v, a, dev) } == 0).then_some(v)
            };
            let export = export.then(|| {
                // SAFETY: the prototypes of cuda.h.
                unsafe { export_probe(lib, dev) }
            });
            gpus.push(CudaGpu {
                pci: text(bus).to_ascii_lowercase(),
                name: text(name),
                gdr: query(ATTR_GPU_DIRECT_RDMA_SUPPORTED),
                dmabuf: query(ATTR_DMA_BUF_SUPPORTED),
                flush: query(ATTR_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS),
                ordering: query(ATTR_GPU_DIRECT_RDMA_WRITES_ORDERING),
                export,
            });
        }
        CudaAnswer::Gpus { driver_api, gpus }
    }

    /// Allocates 2 MiB on `dev` in its primary context, asks for a dma-buf
    /// file descriptor of it, closes it and frees everything.
    ///
    /// # Safety
    ///
    /// `lib` is libcuda's handle and `cuInit` succeeded.
    unsafe fn export_probe(lib: *mut c_void, dev: c_int) -> String {
        // SAFETY: the prototypes of cuda.h.
        let (Some(retain), Some(set), Some(release), Some(alloc), Some(free), Some(handle)) = (unsafe {
            (
                sym::<CtxRetain>(lib, c"cuDevicePrimaryCtxRetain"),
                sym::<CtxSet>(lib, c"cuCtxSetCurrent"),
                sym::<CtxRelease>(lib, c"cuDevicePrimaryCtxRelease_v2"),
                sym::<MemAlloc>(lib, c"cuMemAlloc_v2"),
                sym::<MemFree>(lib, c"cuMemFree_v2"),
                sym::<Handle>(lib, c"cuMemGetHandleForAddressRange"),
            )
        }) else {
            return "no-symbol".to_string();
        };
        const SIZE: usize = 2 << 20;
        let mut ctx = std::ptr::null_mut();
        // SAFETY: live out-pointers; the context is released below.
        let rc = unsafe { retain(&mut ctx, dev) };
        if rc != 0 {
            return format!("cuDevicePrimaryCtxRetain:{rc}");
        }
        // SAFETY: as above; every resource is freed on each path.
        let result = unsafe {
            let mut ptr = 0u64;
            match set(ctx) {
                0 => match alloc(&mut ptr, SIZE) {
                    0 => {
                        let mut fd: c_int = -1;
                        let rc = handle(
                            (&mut fd as *mut c_int).cast(),
                            ptr,
                            SIZE,
                            HANDLE_TYPE_DMA_BUF_FD,
                            0,
                        );
                        if rc == 0 && fd >= 0 {
                            drop(<std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd));
                        }
                        free(ptr);
                        if rc == 0 {
                            "ok".to_string()
                        } else {
                            format!("cuMemGetHandleForAddressRange:{rc}")
                        }
                    }
                    rc => format!("cuMemAlloc:{rc}"),
                },
                rc => format!("cuCtxSetCurrent:{rc}"),
            }
        };
        // SAFETY: the retain above succeeded.
        unsafe { release(dev) };
        result
    }
}

#[cfg(target_feature = "crt-static")]
mod live {
    use super::CudaAnswer;

    pub(super) fn probe(_export: bool) -> CudaAnswer {
        CudaAnswer::StaticBuild
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_round_trip() {
        let a = CudaAnswer::Gpus {
            driver_api: 13000,
            gpus: vec![CudaGpu {
                pci: "0000:00:06.0".into(),
                name: "NVIDIA H200".into(),
                gdr: Some(1),
                dmabuf: Some(1),
                flush: Some(1),
                ordering: Some(100),
                export: Some("ok".into()),
            }],
        };
        let text = a.record();
        assert_eq!(
            text,
            "library libcuda.so.1\ndriver_api 13000\n\
             gpu 0000:00:06.0 gdr=1 dmabuf=1 flush=1 ordering=100 export=ok name=NVIDIA H200\n"
        );
        assert_eq!(CudaAnswer::parse(&text), Ok(a));
        for other in [
            CudaAnswer::NoLibrary,
            CudaAnswer::StaticBuild,
            CudaAnswer::InitFailed(100),
        ] {
            assert_eq!(CudaAnswer::parse(&other.record()), Ok(other));
        }
    }

    #[test]
    fn bad_records() {
        assert_eq!(CudaAnswer::parse(""), Err("no 'library' line".to_string()));
        assert_eq!(
            CudaAnswer::parse("library libcuda.so.1\ngpu 0000:00:06.0 gdr=yes name=x\n"),
            Err("line 2: cannot parse 'gpu 0000:00:06.0 gdr=yes name=x'".to_string())
        );
        assert!(CudaAnswer::parse("library libcuda.so.1\ngpu not-a-bdf gdr=1\n").is_err());
        assert!(CudaAnswer::parse("library libcuda.so.1\nbogus 1\n").is_err());
        assert!(CudaAnswer::parse("library libcuda.so.1\n").is_err());
    }

    /// This machine has no libcuda (the build host); the probe says so
    /// instead of failing. Where one is installed, it must answer.
    #[test]
    fn probe_without_or_with_libcuda() {
        match probe(false) {
            CudaAnswer::NoLibrary | CudaAnswer::StaticBuild | CudaAnswer::InitFailed(_) => {}
            CudaAnswer::Gpus { driver_api, .. } => assert!(driver_api > 0),
            CudaAnswer::NotAsked => panic!("a live probe always asks"),
        }
    }
}
