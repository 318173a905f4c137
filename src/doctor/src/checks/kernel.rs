// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! Can this kernel host the module? It must load modules; a build needs
//! its headers and, by the way it gets the kernel's Rust support (kernel
//! or carried mode, `rust_mode`), the kernel's compiled Rust crates and
//! the exact toolchain it names, or carried mode's toolchain; where it
//! enforces signatures, the module must be signed.

use super::check::Check;
use crate::host::build::source_series;
use crate::host::carried::{Version, BINDGEN_MIN, LINUX, RUSTC_MIN};
use crate::host::kconfig::KConfig;
use crate::host::kmod::Origin;
use crate::host::paths::{EXPORTERS_CONF, MODULES_DISABLED};
use crate::host::rust_mode::{Mode, RustMode, Why};
use crate::host::signing::ModSig;
use crate::host::toolchain::Found;
use crate::host::{Host, MODULE};
use crate::text::list;

/// `kernel 7.3.4+deb13-amd64`, or `this kernel`.
fn kernel_name(host: &Host) -> String {
    host.release
        .as_deref()
        .map_or("this kernel".to_string(), |r| format!("kernel {r}"))
}

/// Whether this project's module is loaded or installed for the running kernel.
fn ours_present(host: &Host) -> bool {
    (host.ours.is_some() && !host.loaded_is_nvidias())
        || host.files.iter().any(|f| f.origin == Origin::Ours)
}

/// A line about what blocks a build: WARN when a module is already
/// there (this one, so only a rebuild fails, as the summary then says; or
/// NVIDIA's, which works meanwhile), FAIL when none can be had at all.
fn build_blocked(host: &Host, id: &'static str, summary: String, fix: String) -> Check {
    if ours_present(host) {
        return Check::warn(
            id,
            format!("{summary}; the installed {MODULE} works, but no rebuild can (DKMS after a driver or OFED upgrade)"),
            fix,
        );
    }
    if host.loaded_is_nvidias() {
        return Check::warn(
            id,
            format!("{summary}; NVIDIA's own {MODULE} is loaded and works meanwhile"),
            fix,
        );
    }
    Check::fail(id, summary, fix)
}

/// Whether module loading is off: no `CONFIG_MODULES`, or `modules_disabled` set.
pub(crate) fn loading_off(host: &Host) -> bool {
    host.config().is_some_and(|c| !c.enabled("CONFIG_MODULES"))
        || host.modules_disabled.as_deref() == Some("1")
}

/// `kernel.modules`: does this kernel load modules at all?
pub(crate) fn modules(host: &Host) -> Check {
    const ID: &str = "kernel.modules";
    let kernel = kernel_name(host);
    if host.config().is_some_and(|c| !c.enabled("CONFIG_MODULES")) {
        return Check::fail(
            ID,
            format!("{kernel} cannot load modules (CONFIG_MODULES is not set)"),
            "boot a kernel with loadable module support (CONFIG_MODULES=y), as distribution kernels have",
        );
    }
    let disabled = &host.modules_disabled;
    let detail = vec![format!(
        "{MODULES_DISABLED}: {}",
        disabled.as_deref().unwrap_or("absent")
    )];
    match disabled.as_deref() {
        Some("1") if host.ours.is_some() => Check::ok(
            ID,
            format!("module loading is disabled (modules_disabled=1), after {MODULE} was loaded"),
        ),
        Some("1") => Check::fail(
            ID,
            "module loading is disabled until the next boot (modules_disabled=1): no module can be loaded",
            "find what sets kernel.modules_disabled=1 (a sysctl.d file, a boot script, a VM's init) and have the \
             modules GPUDirect RDMA needs loaded before it (/etc/modules-load.d/), then reboot: until then the \
             switch cannot be turned back",
        ),
        Some("0") => Check::ok(ID, "the kernel loads modules (modules_disabled=0)"),
        _ if host.config().is_some() => Check::ok(ID, "the kernel loads modules (CONFIG_MODULES=y)"),
        _ => Check::info(
            ID,
            "cannot tell whether the kernel loads modules (no modules_disabled, configuration unreadable)",
        ),
    }
    .detail(detail)
}

/// Where the configuration was read, and what was wrong with the sources before it.
fn config_detail(host: &Host) -> Vec<String> {
    let read = &host.config;
    let mut detail: Vec<String> = read
        .problems
        .iter()
        .map(|p| format!("unreadable: {p}"))
        .collect();
    match &read.config {
        Some(c) => {
            detail.insert(0, format!("configuration: {}", c.source));
            detail.extend(
                c.unparsed
                    .iter()
                    .take(3)
                    .map(|(n, l)| format!("{}:{n}: not an option line: {l}", c.source)),
            );
            if c.unparsed.len() > 3 {
                detail.push(format!(
                    "{} more lines that are not option lines",
                    c.unparsed.len() - 3
                ));
            }
        }
        None => detail.insert(0, format!("looked for: {}", read.tried.join(", "))),
    }
    detail
}

/// `kernel.rust`: how a build gets the kernel's Rust support (kernel or
/// carried mode, and why), what that mode still lacks, and which
/// modversions the kernel uses.
pub(crate) fn rust(host: &Host) -> Check {
    const ID: &str = "kernel.rust";
    let kernel = kernel_name(host);
    let mut detail = config_detail(host);
    let (Some(c), Some(rm)) = (host.config(), host.rust.as_ref()) else {
        return Check::info(
            ID,
            format!("the configuration of {kernel} is unreadable: whether a Rust module can be built for it is unknown"),
        )
        .fix("Debian and Ubuntu install it with the kernel image as /boot/config-<release>; a kernel with \
              CONFIG_IKCONFIG_PROC shows it in /proc/config.gz (`modprobe configs` where that is a module)")
        .detail(detail);
    };
    for option in [
        "CONFIG_RUST",
        "CONFIG_RUSTC_VERSION",
        "CONFIG_RUSTC_VERSION_TEXT",
        "CONFIG_BINDGEN_VERSION_TEXT",
        "CONFIG_MODVERSIONS",
        "CONFIG_GENDWARFKSYMS",
        "CONFIG_EXTENDED_MODVERSIONS",
    ] {
        detail.push(c.show(option));
    }
    let modversions = c.enabled("CONFIG_MODVERSIONS").then(|| {
        let crcs = if c.enabled("CONFIG_GENDWARFKSYMS") {
            "symbol CRCs from DWARF (gendwarfksyms)"
        } else {
            "symbol CRCs from genksyms"
        };
        let extended = if c.enabled("CONFIG_EXTENDED_MODVERSIONS") {
            ", extended modversions"
        } else {
            ""
        };
        format!("MODVERSIONS ({crcs}{extended})")
    });
    let summary = match &rm.mode {
        Mode::Kernel => {
            let rustc = c
                .get("CONFIG_RUSTC_VERSION_TEXT")
                .map_or("rustc unnamed".to_string(), |t| {
                    format!("rustc {}", version_number(t))
                });
            let built = match &modversions {
                None => format!("{kernel} is built with Rust ({rustc}), without MODVERSIONS"),
                Some(m) => format!("{kernel} is built with Rust ({rustc}) and {m}"),
            };
            format!("{built}: kernel mode (the kernel's own compiled Rust crates)")
        }
        Mode::Carried(why) => format!(
            "{kernel} gets carried mode (the Rust support of Linux {LINUX} built into the module): {}; {}",
            why.text(),
            modversions
                .as_ref()
                .map_or("without MODVERSIONS".to_string(), |m| format!("with {m}"))
        ),
    };
    let Toolchain { mut lacks, fix, .. } = toolchain_state(host, c, rm);
    let mut fixes = Vec::new();
    if !lacks.is_empty() {
        fixes.push(fix);
    }
    if let Some((what, fix)) = headers_state(host, rm).lack(rm) {
        lacks.push(what);
        fixes.push(fix);
    }
    if !lacks.is_empty() {
        let summary = format!("{summary}; it lacks {}", list(&lacks));
        return build_blocked(host, ID, summary, fixes.join("; ")).detail(detail);
    }
    if modversions.is_none() || (host.ours.is_some() && !host.loaded_is_nvidias()) {
        return Check::ok(ID, summary).detail(detail);
    }
    // With MODVERSIONS the build takes the CRCs of the driver's and the RDMA
    // core's modules installed for the kernel (scripts/find-symvers.sh).
    let release = host.release.as_deref().unwrap_or("<release>");
    let mut missing = Vec::new();
    let mut elsewhere = Vec::new();
    for e in &host.exporters {
        let (whose, symbol) = (e.whose, e.symbol);
        let Some(file) = &e.file else {
            missing.push(format!("{whose}'s {symbol}"));
            continue;
        };
        detail.push(format!("MODVERSIONS: the CRCs of {whose} from {file}"));
        // The build refuses a module built for another kernel (vermagic).
        let built_for = e
            .ko
            .as_ref()
            .and_then(|k| k.modinfo.get("vermagic"))
            .and_then(|v| v.split_whitespace().next());
        if let Some(other) = built_for.filter(|k| *k != release) {
            elsewhere.push(format!("{whose}'s {file} is built for {other}"));
        }
    }
    if missing.is_empty() && !elsewhere.is_empty() {
        return Check::warn(
            ID,
            format!(
                "{summary}; with MODVERSIONS the build reads the CRCs of the modules it imports from, installed for \
                 {release}, and stops: {}, not for {release}",
                list(&elsewhere)
            ),
            format!(
                "rebuild them for {release} (a DKMS module: `dkms autoinstall -k {release}`), or remove the copy \
                 that is not; a driver built outside any package: name its module for {release} in {EXPORTERS_CONF}"
            ),
        )
        .detail(detail);
    }
    if missing.is_empty() {
        return Check::ok(ID, format!("{summary}; MODVERSIONS: the build takes the CRCs of the driver's and the RDMA core's modules installed for {release}")).detail(detail);
    }
    // The driver's DKMS module there, its build for the release still to
    // come (a driver upgrade between its package's unpack and postinst):
    // nothing to install, DKMS builds it.
    let driver_missing = missing.iter().any(|m| m.starts_with("the NVIDIA"));
    let pending = host
        .dkms_driver_pending
        .as_deref()
        .filter(|_| driver_missing);
    let installs: Vec<&str> = missing
        .iter()
        .filter_map(|m| {
            if !m.starts_with("the NVIDIA") {
                Some("DOCA-OFED's or MLNX_OFED's kernel modules (mlnx-ofed-kernel-dkms, mlnx-ofa_kernel-dkms) ")
            } else if pending.is_none() {
                Some("the NVIDIA driver's kernel modules (Debian: nvidia-kernel-dkms or nvidia-open-kernel-dkms) ")
            } else {
                None
            }
        })
        .collect();
    let mut fixes = Vec::new();
    if let Some(dkms) = pending {
        fixes.push(super::build::driver_pending(dkms, release));
    }
    if !installs.is_empty() {
        fixes.push(format!(
            "install {}for {release} first (the build reads their CRCs); a driver built outside any package: name its \
             module in {}",
            installs.join("and "),
            EXPORTERS_CONF
        ));
    }
    Check::warn(
        ID,
        format!(
            "{summary}; with MODVERSIONS the build reads the CRCs of the modules it imports from, installed for \
             {release}: no module exports {}, so the build stops (the kernel would refuse the module: \
             \"disagrees about version of symbol\")",
            list(&missing)
        ),
        fixes.join("; "),
    )
    .detail(detail)
}

/// The configuration and the build's mode, or the INFO line that says why
/// a check about building cannot tell.
fn build_inputs<'a>(
    host: &'a Host,
    id: &'static str,
) -> Result<(&'a KConfig, &'a RustMode), Check> {
    match (host.config(), host.rust.as_ref()) {
        (Some(c), Some(rm)) => Ok((c, rm)),
        _ => Err(Check::info(
            id,
            "not checked: the kernel configuration is unreadable (kernel.rust)",
        )),
    }
}

/// `1.85.1` from `rustc 1.85.1 (4eb161250 2025-03-15)`.
fn version_number(text: &str) -> &str {
    text.split_whitespace().nth(1).unwrap_or(text)
}

/// `1.85` from `1.85.1`.
fn major_minor(version: &str) -> String {
    version.split('.').take(2).collect::<Vec<_>>().join(".")
}

/// What to install for the toolchain a kernel names.
fn toolchain_fix(rustc: &str, bindgen: &str) -> String {
    let (r, b) = (major_minor(rustc), major_minor(bindgen));
    format!(
        "install the rustc {rustc} and bindgen {bindgen} the kernel was built with (a build refuses others): \
         Debian: `apt-get install rustc rust-src bindgen libclang-dev` (trixie's own rustc and bindgen build \
         its 7.x backports kernels; not rustc from backports); Ubuntu: `apt install rustc-{r} rust-{r}-src \
         bindgen-{b}` and make them rustc and bindgen on PATH (links in /usr/local/bin)"
    )
}

/// The toolchain on PATH against what the build's mode needs.
struct Toolchain {
    /// What is missing or wrong, each in a few words.
    lacks: Vec<String>,
    /// The summary line: what is there, or what lacks.
    summary: String,
    /// How to get what lacks.
    fix: String,
    /// The programs and what they said.
    detail: Vec<String>,
}

/// Kernel mode: the exact rustc and bindgen the kernel names. Carried
/// mode: rustc and bindgen from the pinned minima, rust-src, libclang.
fn toolchain_state(host: &Host, c: &KConfig, rm: &RustMode) -> Toolchain {
    if let Some(t) = &rm.carried {
        let lacks: Vec<String> = t.missing.iter().map(|(_, what)| what.clone()).collect();
        let summary = if lacks.is_empty() {
            let clang = t.clang.as_deref().unwrap_or("?");
            format!(
                "carried mode's toolchain is on PATH: rustc {} with its rust-src, bindgen {} with libclang ({}), \
                 at least the rustc {} and bindgen {} it needs",
                show(t.rustc),
                show(t.bindgen),
                clang.strip_prefix("Clang:").unwrap_or(clang).trim(),
                RUSTC_MIN,
                BINDGEN_MIN
            )
        } else {
            format!(
                "carried mode (kernel.rust) needs what PATH lacks: {}",
                list(&lacks)
            )
        };
        return Toolchain {
            lacks,
            summary,
            fix: t.fix(),
            detail: t.detail.clone(),
        };
    }
    let (rustc, bindgen, lacks) = kernel_toolchain(host, c, rm);
    let summary = if lacks.is_empty() {
        format!(
            "rustc {} and bindgen {} on PATH are the ones the kernel was built with",
            rustc.wanted, bindgen.wanted
        )
    } else {
        format!(
            "PATH lacks the toolchain the kernel was built with: {}",
            list(&lacks)
        )
    };
    Toolchain {
        lacks,
        summary,
        fix: toolchain_fix(&rustc.wanted, &bindgen.wanted),
        detail: rustc.detail.into_iter().chain(bindgen.detail).collect(),
    }
}

/// A version for a summary, `?` where unknown.
fn show(v: Option<Version>) -> String {
    v.map_or("?".to_string(), |v| v.to_string())
}

/// `kernel.toolchain`: is the toolchain the build's mode needs on PATH?
pub(crate) fn toolchain(host: &Host) -> Check {
    const ID: &str = "kernel.toolchain";
    let (c, rm) = match build_inputs(host, ID) {
        Ok(inputs) => inputs,
        Err(check) => return check,
    };
    let t = toolchain_state(host, c, rm);
    if t.lacks.is_empty() {
        return Check::ok(ID, t.summary).detail(t.detail);
    }
    build_blocked(host, ID, t.summary, t.fix).detail(t.detail)
}

/// A program of the toolchain against the version text the kernel names.
struct OnPath {
    /// The version the kernel names (`1.85.1`).
    wanted: String,
    /// `rustc 1.85.1 (PATH has 1.95.0)` when PATH has another one, or none.
    mismatch: Option<String>,
    /// The configuration's text and what PATH has.
    detail: Vec<String>,
}

/// The `name` found on PATH against the version text of `option`.
fn on_path(host: &Host, c: &KConfig, found: Option<&Found>, name: &str, option: &str) -> OnPath {
    let want = c.get(option).unwrap_or("");
    let wanted = version_number(want).to_string();
    let mut detail = vec![c.show(option)];
    let have = match found {
        None => {
            detail.push(format!("{name}: not on PATH ({})", host.path.join(":")));
            "none".to_string()
        }
        Some(f) => match &f.version {
            Ok(v) => {
                detail.push(format!("{name}: {}: {v}", f.path));
                version_number(v).to_string()
            }
            Err(e) => {
                detail.push(format!("{name}: {}: {e}", f.path));
                format!("one that fails: {e}")
            }
        },
    };
    let same = found.is_some_and(|f| f.version.as_deref() == Ok(want));
    OnPath {
        mismatch: (!same).then(|| format!("{name} {wanted} (PATH has {have})")),
        wanted,
        detail,
    }
}

/// What to install when the headers cannot build a Rust module in kernel mode.
fn headers_fix(release: &str) -> String {
    format!(
        "Debian: `apt-get install linux-source-{series}=$(dpkg-query -W -f='${{Version}}' linux-headers-{release})`: \
         the DKMS package's rust-headers builds the crates from it with the kernel's toolchain \
         (`/usr/lib/nvidia-peer-memory/rust-headers --dry-run {release}` checks first); Ubuntu: the kernel's \
         lib-rust package (`apt-cache search lib-rust`), which holds them",
        series = source_series(release)
    )
}

/// What to install for headers that are missing. A kernel that no package
/// installed (no `/lib/modules/<release>`) has no headers package either.
fn headers_install_fix(rm: &RustMode, release: &str, packaged: bool) -> String {
    if !packaged {
        return format!(
            "no package installed kernel {release} (/lib/modules/{release} is absent), so no headers package \
             matches it: take its prepared build tree (`make modules_prepare`) from whoever built it and link it \
             as /lib/modules/{release}/build"
        );
    }
    match rm.mode {
        Mode::Kernel => format!(
            "Debian: `apt-get install linux-headers-{release}`; Ubuntu: `apt install linux-headers-{release}` \
             and the kernel's lib-rust package (`apt-cache search lib-rust`)"
        ),
        Mode::Carried(_) => format!(
            "Debian and Ubuntu: `apt-get install linux-headers-{release}`; RHEL and its rebuilds: \
             `dnf install kernel-devel-{release}`"
        ),
    }
}

/// The kernel's headers as a build in its mode needs them.
enum Headers {
    /// The release is unknown: no headers to look for.
    Unknown,
    /// No `/lib/modules/<release>/build`; `packaged`: `/lib/modules/<release>`
    /// exists, as every distribution's kernel package makes it.
    Absent {
        release: String,
        build: String,
        packaged: bool,
    },
    /// Carried mode: the headers hold no configuration.
    Unconfigured { release: String, build: String },
    /// Carried mode: the headers and the configuration file in them.
    Configured {
        release: String,
        build: String,
        config: String,
    },
    /// Kernel mode: the compiled crates' files missing from the headers,
    /// and the linux-source `rust-headers` can build them from.
    Crates {
        release: String,
        build: String,
        missing: Vec<String>,
        source: Option<String>,
    },
}

/// Where the kernel's headers are and what a build in its mode finds there.
fn headers_state(host: &Host, rm: &RustMode) -> Headers {
    let (Some(release), Some(tree)) = (host.release.clone(), &host.tree) else {
        return Headers::Unknown;
    };
    let build = tree.build.clone();
    if !tree.present {
        return Headers::Absent {
            release,
            build,
            packaged: tree.packaged,
        };
    }
    if let Mode::Carried(_) = rm.mode {
        // What rust-mode.sh takes as a configured kernel tree.
        return match tree.config.clone() {
            Some(config) => Headers::Configured {
                release,
                build,
                config,
            },
            None => Headers::Unconfigured { release, build },
        };
    }
    let missing = tree
        .rust_files
        .iter()
        .filter(|(_, present)| !present)
        .map(|(f, _)| f.to_string())
        .collect();
    let source = tree.linux_source.clone();
    Headers::Crates {
        release,
        build,
        missing,
        source,
    }
}

impl Headers {
    /// What they lack for a build, in a few words, and how to get it.
    fn lack(&self, rm: &RustMode) -> Option<(String, String)> {
        match self {
            Headers::Absent {
                release,
                build,
                packaged,
            } => Some((
                format!("the headers of {release} ({build})"),
                headers_install_fix(rm, release, *packaged),
            )),
            Headers::Unconfigured { release, build } => Some((
                format!("a configured kernel tree in {build} (its .config)"),
                unconfigured_fix(release),
            )),
            Headers::Crates {
                release,
                build,
                missing,
                source: None,
            } if !missing.is_empty() => Some((
                format!("the compiled Rust crates in {build} ({})", list(missing)),
                headers_fix(release),
            )),
            _ => None,
        }
    }
}

/// What to do about headers without their configuration.
fn unconfigured_fix(release: &str) -> String {
    format!(
        "reinstall the headers of {release} (Debian and Ubuntu: `apt-get install --reinstall linux-headers-{release}`; \
         RHEL: `dnf reinstall kernel-devel-{release}`): a build reads the kernel's .config there"
    )
}

/// `kernel.headers`: are the kernel's headers there, with what the
/// build's mode needs of them (kernel mode: the compiled Rust crates a
/// module links against; carried mode: only the configuration)?
pub(crate) fn headers(host: &Host) -> Check {
    const ID: &str = "kernel.headers";
    let (c, rm) = match build_inputs(host, ID) {
        Ok(inputs) => inputs,
        Err(check) => return check,
    };
    let state = headers_state(host, rm);
    let mut detail = crate_detail(host, &state);
    let check = match &state {
        Headers::Unknown => return Check::info(ID, "kernel release unknown: headers not checked"),
        Headers::Absent {
            release,
            build,
            packaged,
        } => build_blocked(
            host,
            ID,
            format!("no headers for {release} ({build})"),
            headers_install_fix(rm, release, *packaged),
        ),
        Headers::Unconfigured { release, build } => build_blocked(
            host,
            ID,
            format!(
                "the headers of {release} ({build}) hold no .config or include/config/auto.conf: \
                 not a configured kernel tree"
            ),
            unconfigured_fix(release),
        ),
        Headers::Configured { release, build, .. }
            if matches!(rm.mode, Mode::Carried(Why::NoCrates { .. })) =>
        {
            dkms_crates(host, c, rm, release, build)
        }
        Headers::Configured { release, config, .. } => Check::ok(
            ID,
            format!("the headers of {release} are there ({config}): carried mode needs no compiled Rust crates"),
        ),
        Headers::Crates { release, missing, .. } if missing.is_empty() => Check::ok(
            ID,
            format!("the headers of {release} hold the compiled Rust crates"),
        ),
        Headers::Crates { release, source: Some(source), .. } => {
            detail.push(format!(
                "{source}: present (rust-headers refuses it unless its version is the headers')"
            ));
            Check::ok(
                ID,
                format!("the headers of {release} lack the compiled Rust crates; rust-headers builds them from {source} before each DKMS build"),
            )
        }
        Headers::Crates { release, missing, source: None, .. } => build_blocked(
            host,
            ID,
            format!(
                "the headers of {release} lack the compiled Rust crates ({}) and no linux-source-{} is there to build them from",
                list(missing),
                source_series(release)
            ),
            headers_fix(release),
        ),
    };
    check.detail(detail)
}

/// The detail of `kernel.headers`: the compiled crates' files, where a
/// Rust kernel's headers would have them.
fn crate_detail(host: &Host, state: &Headers) -> Vec<String> {
    let build = match state {
        Headers::Configured { build, .. } | Headers::Crates { build, .. } => build,
        Headers::Unconfigured { build, .. } => {
            return vec![format!("{build}: no .config, no include/config/auto.conf")];
        }
        Headers::Absent { build, .. } => return vec![format!("{build}: absent")],
        Headers::Unknown => return Vec::new(),
    };
    if host.config().is_some_and(|c| !c.enabled("CONFIG_RUST")) {
        return Vec::new();
    }
    host.tree
        .iter()
        .flat_map(|t| &t.rust_files)
        .map(|(f, present)| {
            format!(
                "{build}/{f}: {}",
                if *present { "present" } else { "absent" }
            )
        })
        .collect()
}

/// The rustc and bindgen the kernel names against PATH's, and what differs.
fn kernel_toolchain(host: &Host, c: &KConfig, rm: &RustMode) -> (OnPath, OnPath, Vec<String>) {
    let rustc = on_path(
        host,
        c,
        rm.rustc.as_ref(),
        "rustc",
        "CONFIG_RUSTC_VERSION_TEXT",
    );
    let bindgen = on_path(
        host,
        c,
        rm.bindgen.as_ref(),
        "bindgen",
        "CONFIG_BINDGEN_VERSION_TEXT",
    );
    let wrong = [&rustc, &bindgen]
        .iter()
        .filter_map(|p| p.mismatch.clone())
        .collect();
    (rustc, bindgen, wrong)
}

/// arm64's 32-bit vDSO: Kconfig keeps `CONFIG_COMPAT_VDSO` only where a
/// compat compiler is named (or clang and lld build it), and
/// `modules_prepare`, which rust-headers runs, builds the vDSO with
/// `$(CROSS_COMPILE_COMPAT)gcc` (`arch/arm64/Kconfig`, `arch/arm64/Makefile`
/// `vdso_prepare`). Debian's headers name the prefix in `.kernelvariables`.
/// What PATH lacks, in a few words, and how to get it.
fn compat_vdso_lack(host: &Host, c: &KConfig) -> Option<(String, String)> {
    if !c.enabled("CONFIG_COMPAT_VDSO")
        || (c.enabled("CONFIG_CC_IS_CLANG") && c.enabled("CONFIG_LD_IS_LLD"))
    {
        return None;
    }
    let tree = host.tree.as_ref();
    let Some(prefix) = tree.and_then(|t| t.compat_prefix.as_deref()) else {
        return Some((
            "the compiler of the kernel's 32-bit compat vDSO, which its headers do not name \
             (CROSS_COMPILE_COMPAT in .kernelvariables)"
                .to_string(),
            "the kernel's own prepared build tree, whose crates need no building".to_string(),
        ));
    };
    let gcc = format!("{prefix}gcc");
    let on_path = tree.is_some_and(|t| t.compat_gcc);
    (!on_path).then(|| {
        (
            format!("{gcc}, which builds the kernel's 32-bit compat vDSO"),
            format!(
                "Debian: `apt-get install gcc-{}`",
                prefix.trim_end_matches('-')
            ),
        )
    })
}

/// `kernel.headers` for a Rust kernel whose headers lack the compiled
/// crates: DKMS runs rust-headers first, which builds them from
/// linux-source with the kernel's own toolchain (then the build takes kernel
/// mode); where it cannot, it says why and the build takes carried mode, as
/// a build from the source tree does.
fn dkms_crates(host: &Host, c: &KConfig, rm: &RustMode, release: &str, build: &str) -> Check {
    const ID: &str = "kernel.headers";
    let (rustc, bindgen, mut wrong) = kernel_toolchain(host, c, rm);
    let mut fixes = Vec::new();
    if !wrong.is_empty() {
        fixes.push(toolchain_fix(&rustc.wanted, &bindgen.wanted));
    }
    if let Some((what, fix)) = compat_vdso_lack(host, c) {
        wrong.push(what);
        fixes.push(fix);
    }
    let lacking = format!("the headers of {release} lack the compiled Rust crates");
    let carried = format!("DKMS builds in carried mode (kernel.rust), as `make KDIR={build}` does");
    match host.tree.as_ref().and_then(|t| t.linux_source.clone()) {
        Some(source) if wrong.is_empty() => Check::ok(
            ID,
            format!(
                "{lacking}; rust-headers builds them from {source} before each DKMS build, which then takes kernel mode \
                 (a build from the source tree takes carried mode)"
            ),
        ),
        Some(source) => Check::ok(
            ID,
            format!(
                "{lacking}: {carried}; rust-headers, which DKMS runs before each build, would build them from {source} \
                 for kernel mode only with the kernel's own toolchain, and PATH lacks {} ({})",
                list(&wrong),
                fixes.join("; ")
            ),
        ),
        None => Check::ok(
            ID,
            format!(
                "{lacking} and no linux-source-{} is there to build them from: {carried} (for kernel mode: {})",
                source_series(release),
                headers_fix(release)
            ),
        ),
    }
}

/// How to get a module signed that this kernel accepts.
fn signing_fix(host: &Host) -> String {
    if !host.efi {
        let hash = host
            .config()
            .and_then(|c| c.get("CONFIG_MODULE_SIG_HASH"))
            .unwrap_or("sha256");
        return format!(
            "this host boots without UEFI, so no MOK can be enrolled: the kernel trusts only the keys built into it. \
             Sign the module with the key it was built with (its CONFIG_MODULE_SIG_KEY; ask whoever built the \
             kernel): `scripts/sign-file {hash} <key> <certificate> {MODULE}.ko`"
        );
    }
    let mok = &host.mok;
    format!(
        "DKMS signs the modules it builds with its MOK, here {} and its certificate {} (mok_signing_key, \
         mok_certificate in /etc/dkms/framework.conf; Debian's dkms makes /var/lib/dkms/mok.key and mok.pub at \
         its first build, Ubuntu's uses shim-signed's /var/lib/shim-signed/mok/MOK.priv and MOK.der). Enroll the \
         certificate once: `mokutil --import {}`, reboot and confirm it in MokManager; then \
         `/usr/lib/nvidia-peer-memory/dkms-rebuild --force`",
        mok.key, mok.cert, mok.cert
    )
}

/// A detail line: a module file and its signature.
fn signature_line(file: &str, sig: &ModSig) -> String {
    match sig {
        ModSig::Signed(n) => format!("{file}: signed ({n}-byte signature)"),
        ModSig::Unsigned => format!("{file}: not signed"),
        ModSig::Unknown(why) => format!("{file}: signature unknown: {why}"),
    }
}

/// `kernel.signing`: where the kernel enforces signatures, is the module signed?
pub(crate) fn signing(host: &Host) -> Check {
    const ID: &str = "kernel.signing";
    let e = &host.enforcement;
    let files = &host.signatures;
    let mut detail = e.evidence.clone();
    detail.extend(files.iter().map(|(f, sig)| signature_line(f, sig)));
    match e.enforced {
        Some(false) => Check::ok(
            ID,
            format!("the kernel does not enforce module signatures: an unsigned {MODULE} loads (tainting the kernel: E)"),
        ),
        None => Check::info(ID, "whether the kernel enforces module signatures is unknown").fix(
            "mount securityfs (`mount -t securityfs securityfs /sys/kernel/security`): its lockdown \
             file says; so does the kernel configuration (kernel.rust)",
        ),
        Some(true) => enforced_signing(host, files, &mut detail),
    }
    .detail(detail)
}

/// `kernel.signing` where signatures are enforced: loaded, unsigned,
/// not installed, unknown, or signed (and its key enrolled?).
fn enforced_signing(host: &Host, files: &[(String, ModSig)], detail: &mut Vec<String>) -> Check {
    const ID: &str = "kernel.signing";
    let enforced = format!(
        "the kernel loads only signed modules ({})",
        host.enforcement.reasons.join(", ")
    );
    if host.ours.is_some() && !host.loaded_is_nvidias() {
        return Check::ok(ID, format!("{enforced} and accepted {MODULE}"));
    }
    let of = |want: fn(&ModSig) -> bool| -> Vec<String> {
        files
            .iter()
            .filter(|(_, s)| want(s))
            .map(|(f, _)| f.clone())
            .collect()
    };
    let (unsigned, unknown) = (
        of(|s| *s == ModSig::Unsigned),
        of(|s| matches!(s, ModSig::Unknown(_))),
    );
    if !unsigned.is_empty() {
        let summary = format!("{enforced}, and {} carries no signature", list(&unsigned));
        return Check::fail(ID, summary, signing_fix(host));
    }
    if files.is_empty() {
        let summary = format!("{enforced}: {MODULE} must be signed by a key it trusts");
        return Check::info(ID, summary).fix(signing_fix(host));
    }
    if !unknown.is_empty() {
        let summary = format!(
            "{enforced}; whether {} is signed is unknown",
            list(&unknown)
        );
        return Check::info(ID, summary).fix(signing_fix(host));
    }
    let mok = &host.mok;
    let enrolled = host.mok_enrolled;
    detail.push(format!(
        "{}: {}",
        mok.cert,
        match enrolled {
            Some(true) => "enrolled in MOK",
            Some(false) => "not in the MOK list",
            None => "enrollment unknown (certificate or MOK list unreadable)",
        }
    ));
    if enrolled == Some(false) {
        let summary = format!(
            "{enforced}; {MODULE} is signed, but the DKMS certificate {} is not enrolled",
            mok.cert
        );
        return Check::warn(ID, summary, signing_fix(host));
    }
    Check::ok(ID, format!("{enforced}; the installed {MODULE} is signed"))
}

/// Why `modprobe nvidia_peermem` cannot work on this kernel, for other
/// checks' fix lines; empty when nothing here stands in the way.
pub(crate) fn blockers(host: &Host) -> Vec<&'static str> {
    let mut why = Vec::new();
    if loading_off(host) {
        why.push("this kernel loads no module now (kernel.modules)");
    }
    why
}
