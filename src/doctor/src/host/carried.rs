// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! Carried mode's requirements: the kernel release whose Rust support a
//! build carries in the module, the oldest rustc and bindgen it builds
//! with, and the packages that provide them on each distribution (the
//! names `kbuild/rust-toolchain.sh` gives).
//!
//! The release and the minima are `kbuild/carried.pin`, read at compile
//! time: the build reads the same file, and `kbuild/carried-source.sh`
//! refuses sources whose `scripts/min-tool-version.sh` says otherwise.

use std::fmt;

use crate::host::root::Root;

/// `kbuild/carried.pin`, as the build has it.
const PIN: &str = include_str!("../../../../kbuild/carried.pin");

/// The kernel release whose Rust crates carried mode builds.
pub const LINUX: Version = pinned("CARRIED_LINUX");
/// The oldest rustc those crates build with.
pub const RUSTC_MIN: Version = pinned("CARRIED_RUSTC_MIN");
/// The oldest bindgen they build with.
pub const BINDGEN_MIN: Version = pinned("CARRIED_BINDGEN_MIN");

/// Where the distribution says what it is.
pub const OS_RELEASE: &str = "/etc/os-release";

/// A dotted version, `1.85.1`; a missing patch level is 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(pub u32, pub u32, pub u32);

impl Version {
    /// `1.85.1`, `1.85` or `1.90.0-nightly` (the suffix ignored); `None`
    /// for anything else.
    pub fn parse(text: &str) -> Option<Version> {
        parse_version(text.as_bytes())
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// [`Version::parse`], usable at compile time.
const fn parse_version(text: &[u8]) -> Option<Version> {
    let mut parts = [0u32; 3];
    // The part being read, and how many digits it has so far.
    let (mut part, mut digits) = (0, 0);
    let mut i = 0;
    while i < text.len() {
        let c = text[i];
        if c.is_ascii_digit() && digits < 9 {
            // CAST: a digit, 0 to 9.
            parts[part] = parts[part] * 10 + (c - b'0') as u32;
            digits += 1;
        } else if c == b'.' && digits > 0 && part < 2 {
            part += 1;
            digits = 0;
        } else if c == b'-' && digits > 0 && part > 0 {
            break;
        } else {
            return None;
        }
        i += 1;
    }
    if digits == 0 || part == 0 {
        return None;
    }
    Some(Version(parts[0], parts[1], parts[2]))
}

/// The value of `KEY=` in the pin file, as a version; the build stops
/// where the line is missing or is not a version.
const fn pinned(key: &str) -> Version {
    let (pin, key) = (PIN.as_bytes(), key.as_bytes());
    let mut start = 0;
    while start < pin.len() {
        let mut end = start;
        while end < pin.len() && pin[end] != b'\n' {
            end += 1;
        }
        // `KEY=` at the start of this line?
        let mut k = 0;
        while k < key.len() && start + k < end && pin[start + k] == key[k] {
            k += 1;
        }
        if k == key.len() && start + k < end && pin[start + k] == b'=' {
            let (_, rest) = pin.split_at(start + k + 1);
            let (value, _) = rest.split_at(end - (start + k + 1));
            match parse_version(value) {
                Some(v) => return v,
                None => {
                    panic!("kbuild/carried.pin: a CARRIED_* line the doctor reads is not a version")
                }
            }
        }
        start = end + 1;
    }
    panic!("kbuild/carried.pin lacks a CARRIED_* line the doctor reads")
}

/// The version number in a `--version` line: the second word
/// (`rustc 1.85.1 (4eb161250 2025-03-15)`, `bindgen 0.71.1`).
pub fn version_in(line: &str) -> Result<Version, String> {
    line.split_whitespace()
        .nth(1)
        .and_then(Version::parse)
        .ok_or_else(|| format!("no version number in '{line}'"))
}

/// The distribution, as `/etc/os-release` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Distro {
    /// `ID`: `debian`, `ubuntu`, `rhel`.
    pub id: String,
    /// `VERSION_ID`: `12`, `24.04`; empty where absent.
    pub version_id: String,
    /// `PRETTY_NAME`, else `ID VERSION_ID`.
    pub name: String,
}

impl Distro {
    /// Parses os-release text: `KEY=value` lines, the value maybe quoted;
    /// `None` without an `ID`.
    pub fn parse(text: &str) -> Option<Distro> {
        let value = |key: &str| {
            text.lines().find_map(|l| {
                let v = l.trim().strip_prefix(key)?.strip_prefix('=')?;
                Some(v.trim().trim_matches(['"', '\'']).to_string())
            })
        };
        let id = value("ID").filter(|id| !id.is_empty())?;
        let version_id = value("VERSION_ID").unwrap_or_default();
        let name = value("PRETTY_NAME")
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| format!("{id} {version_id}").trim().to_string());
        Some(Distro {
            id,
            version_id,
            name,
        })
    }

    /// The distribution below the root, or why it is unknown.
    pub fn read(root: &Root) -> Result<Distro, String> {
        let text = root
            .read_text(OS_RELEASE)
            .ok_or_else(|| format!("{OS_RELEASE} is absent"))?;
        Distro::parse(&text).ok_or_else(|| format!("{OS_RELEASE} has no ID= line"))
    }
}

/// A part of carried mode's toolchain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// rustc at least [`RUSTC_MIN`].
    Rustc,
    /// The standard library's source for that rustc (`core` is built from it).
    RustSrc,
    /// bindgen at least [`BINDGEN_MIN`].
    Bindgen,
    /// The libclang that bindgen loads.
    Libclang,
}

/// Where the rust-src of a rustc comes from, told by its sysroot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RustSrcFrom {
    /// The distribution's package (a sysroot below `/usr`).
    Distribution,
    /// rustup's component (`~/.rustup/toolchains/...`).
    Rustup,
    /// Wherever the rustc in this sysroot came from.
    Other(String),
}

impl RustSrcFrom {
    /// Where the rust-src of the rustc with `sysroot` comes from.
    pub fn of_sysroot(sysroot: &str) -> RustSrcFrom {
        if sysroot.contains("/.rustup/toolchains/") {
            RustSrcFrom::Rustup
        } else if sysroot == "/usr" || sysroot.starts_with("/usr/lib/") {
            RustSrcFrom::Distribution
        } else {
            RustSrcFrom::Other(sysroot.to_string())
        }
    }
}

/// How to get `parts` on `distro` (or an unknown one), as one sentence.
/// `rustc` is the one on PATH, `rust_src` where its rust-src comes from.
pub fn install(
    distro: &Result<Distro, String>,
    parts: &[Part],
    rustc: Option<Version>,
    rust_src: &RustSrcFrom,
) -> String {
    // The rust-src of the rustc there, where that rustc stays and is not the distribution's.
    let elsewhere = match rust_src {
        RustSrcFrom::Rustup => Some("`rustup component add rust-src`".to_string()),
        RustSrcFrom::Other(sysroot) => Some(format!(
            "the rust-src of the rustc in {sysroot}, from where that rustc came \
             (or put the distribution's rustc first on PATH)"
        )),
        RustSrcFrom::Distribution => None,
    }
    .filter(|_| parts.contains(&Part::RustSrc) && !parts.contains(&Part::Rustc));
    let parts: Vec<Part> = parts
        .iter()
        .copied()
        .filter(|p| !(elsewhere.is_some() && *p == Part::RustSrc))
        .collect();
    let mut steps = match distro {
        Ok(d) => packaged(d, &parts, rustc)
            .unwrap_or_else(|| unpackaged(&parts, &format!("{} is not one named here", d.name))),
        Err(why) => unpackaged(&parts, why),
    };
    steps.extend(elsewhere);
    steps.join("; ")
}

/// The steps on a distribution whose packages are named here (as
/// `kbuild/rust-toolchain.sh` names them), `None` on another.
fn packaged(d: &Distro, parts: &[Part], rustc: Option<Version>) -> Option<Vec<String>> {
    let (rmin, bmin) = (RUSTC_MIN, BINDGEN_MIN);
    let rhel = ["rhel", "rocky", "almalinux", "centos"].contains(&d.id.as_str());
    let ubuntu = d.id == "ubuntu";
    if !(d.id == "debian" || ubuntu || rhel) {
        return None;
    }
    let has = |p: Part| parts.contains(&p);
    // Ubuntu's rust-src is versioned: that of the rustc on PATH, unless a new one comes.
    let ubuntu_rust = match rustc {
        Some(v) if !has(Part::Rustc) => format!("{}.{}", v.0, v.1),
        _ => "1.XX".to_string(),
    };
    let package = |p: Part| -> Option<String> {
        let name = match (d.id.as_str(), d.version_id.as_str(), p) {
            ("debian", "11" | "12", Part::Rustc) => "rustc-web".to_string(),
            ("debian", "11" | "12", Part::RustSrc) => "rust-web-src".to_string(),
            ("debian", "11" | "12", Part::Bindgen) => return None,
            ("debian", _, Part::Rustc) => "rustc".to_string(),
            ("debian", _, Part::RustSrc) => "rust-src".to_string(),
            ("debian", _, Part::Bindgen) => "bindgen".to_string(),
            ("debian" | "ubuntu", _, Part::Libclang) => "libclang-dev".to_string(),
            ("ubuntu", _, Part::Rustc) => "rustc-1.XX".to_string(),
            ("ubuntu", _, Part::RustSrc) => format!("rust-{ubuntu_rust}-src"),
            ("ubuntu", _, Part::Bindgen) => format!("bindgen-{}.{}", bmin.0, bmin.1),
            (_, _, Part::Rustc) => "rust".to_string(),
            (_, _, Part::RustSrc) => "rust-src".to_string(),
            (_, _, Part::Libclang) => "clang-devel".to_string(),
            (_, _, Part::Bindgen) => return None,
        };
        Some(name)
    };
    let mut steps = Vec::new();
    let packages: Vec<String> = parts.iter().filter_map(|p| package(*p)).collect();
    if !packages.is_empty() {
        let tool = if rhel {
            "dnf install"
        } else {
            "apt-get install"
        };
        steps.push(format!("on {}: `{tool} {}`", d.name, packages.join(" ")));
    }
    if ubuntu && (has(Part::Rustc) || has(Part::Bindgen)) {
        let mut which = Vec::new();
        if has(Part::Rustc) {
            which.push(format!("1.XX is {}.{} or newer", rmin.0, rmin.1));
        }
        if has(Part::Bindgen) {
            which.push(format!("any bindgen-0.XX from {}.{} on", bmin.0, bmin.1));
        }
        steps.push(format!(
            "{}; make them rustc and bindgen on PATH (links in /usr/local/bin)",
            which.join(", ")
        ));
    }
    if has(Part::Bindgen) && package(Part::Bindgen).is_none() {
        steps.push(format!(
            "bindgen {bmin} is not packaged in {}: `cargo install --locked bindgen-cli@{bmin}`",
            d.name
        ));
    }
    Some(steps)
}

/// The steps where the distribution is unknown (`why`): what, not which package.
fn unpackaged(parts: &[Part], why: &str) -> Vec<String> {
    let (rmin, bmin) = (RUSTC_MIN, BINDGEN_MIN);
    let what: Vec<String> = parts
        .iter()
        .map(|p| match p {
            Part::Rustc => format!("rustc {rmin} or newer"),
            Part::RustSrc => "the rust-src of that rustc".to_string(),
            Part::Bindgen => {
                format!("bindgen {bmin} or newer (`cargo install --locked bindgen-cli@{bmin}`)")
            }
            Part::Libclang => "libclang".to_string(),
        })
        .collect();
    if what.is_empty() {
        return Vec::new();
    }
    vec![format!(
        "install {} (the distribution is unknown: {why})",
        crate::text::list(&what)
    )]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_values() {
        assert_eq!(LINUX, Version(7, 3, 4));
        assert_eq!(RUSTC_MIN, Version(1, 85, 0));
        assert_eq!(BINDGEN_MIN, Version(0, 71, 1));
        // The pin file itself, read again at run time the simple way.
        let line = |key: &str| {
            PIN.lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
                .and_then(Version::parse)
        };
        assert_eq!(line("CARRIED_RUSTC_MIN"), Some(RUSTC_MIN));
        assert_eq!(line("CARRIED_BINDGEN_MIN"), Some(BINDGEN_MIN));
        assert_eq!(line("CARRIED_LINUX"), Some(LINUX));
    }

    #[test]
    fn version_parsing() {
        assert_eq!(Version::parse("1.85.1"), Some(Version(1, 85, 1)));
        assert_eq!(Version::parse("1.85"), Some(Version(1, 85, 0)));
        assert_eq!(Version::parse("1.90.0-nightly"), Some(Version(1, 90, 0)));
        assert_eq!(Version::parse("0.71.1"), Some(Version(0, 71, 1)));
        for bad in [
            "",
            "1",
            "1.",
            ".1",
            "1..2",
            "1.2.3.4",
            "v1.2",
            "1.2a",
            "-1.2",
            "1-2",
            "9999999999.1",
        ] {
            assert_eq!(Version::parse(bad), None, "{bad}");
        }
    }

    /// Components compare as numbers, not as text: 1.100 > 1.85 > 1.9.
    #[test]
    fn version_order() {
        let v = |s: &str| Version::parse(s).expect(s);
        assert!(v("1.85.1") >= RUSTC_MIN);
        assert!(v("1.85.0") >= RUSTC_MIN);
        assert!(v("1.84.99") < RUSTC_MIN);
        assert!(v("1.100.0") > v("1.85.0"));
        assert!(v("1.9.0") < v("1.85.0"));
        assert!(v("2.0") > v("1.999.999"));
        assert!(v("0.71.1") >= BINDGEN_MIN);
        assert!(v("0.72") >= BINDGEN_MIN);
        assert!(v("0.71.0") < BINDGEN_MIN);
        assert!(v("0.60.1") < BINDGEN_MIN);
        assert_eq!(v("1.85").to_string(), "1.85.0");
    }

    #[test]
    fn version_lines() {
        assert_eq!(
            version_in("rustc 1.85.1 (4eb161250 2025-03-15) (built from a source tarball)"),
            Ok(Version(1, 85, 1))
        );
        assert_eq!(version_in("bindgen 0.71.1"), Ok(Version(0, 71, 1)));
        assert_eq!(
            version_in("rustc version unknown"),
            Err("no version number in 'rustc version unknown'".to_string())
        );
        assert!(version_in("bindgen").is_err());
    }

    #[test]
    fn os_release() {
        let d = Distro::parse(
            "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"12\"\nID=debian\n",
        )
        .expect("debian");
        assert_eq!(
            (d.id.as_str(), d.version_id.as_str(), d.name.as_str()),
            ("debian", "12", "Debian GNU/Linux 12 (bookworm)")
        );
        let r = Distro::parse("ID='rocky'\nVERSION_ID=9.4\n").expect("rocky");
        assert_eq!((r.id.as_str(), r.name.as_str()), ("rocky", "rocky 9.4"));
        // ID_LIKE is not ID.
        assert_eq!(Distro::parse("ID_LIKE=debian\nNAME=x\n"), None);
        assert_eq!(Distro::parse("ID=\n"), None);
    }

    const DISTRO: RustSrcFrom = RustSrcFrom::Distribution;

    #[test]
    fn sysroots() {
        assert_eq!(RustSrcFrom::of_sysroot("/usr"), RustSrcFrom::Distribution);
        // Ubuntu's versioned rustc-1.XX.
        assert_eq!(
            RustSrcFrom::of_sysroot("/usr/lib/rust-1.85"),
            RustSrcFrom::Distribution
        );
        assert_eq!(
            RustSrcFrom::of_sysroot("/root/.rustup/toolchains/stable-x86_64-unknown-linux-gnu"),
            RustSrcFrom::Rustup
        );
        assert_eq!(
            RustSrcFrom::of_sysroot("/usr/local"),
            RustSrcFrom::Other("/usr/local".to_string())
        );
    }

    #[test]
    fn packages() {
        let distro = |text: &str| Distro::parse(text).ok_or_else(String::new);
        let all = [Part::Rustc, Part::RustSrc, Part::Bindgen, Part::Libclang];
        let d12 = distro("ID=debian\nVERSION_ID=\"12\"\nPRETTY_NAME=\"Debian 12\"");
        assert_eq!(
            install(&d12, &all, None, &DISTRO),
            "on Debian 12: `apt-get install rustc-web rust-web-src libclang-dev`; \
             bindgen 0.71.1 is not packaged in Debian 12: `cargo install --locked bindgen-cli@0.71.1`"
        );
        // Debian 11's rustc (1.48) and bindgen (0.55) are too old too; its rustc-web is not.
        let d11 = distro("ID=debian\nVERSION_ID=\"11\"\nPRETTY_NAME=\"Debian 11\"");
        assert_eq!(
            install(&d11, &all, None, &DISTRO),
            "on Debian 11: `apt-get install rustc-web rust-web-src libclang-dev`; \
             bindgen 0.71.1 is not packaged in Debian 11: `cargo install --locked bindgen-cli@0.71.1`"
        );
        let d13 = distro("ID=debian\nVERSION_ID=\"13\"\nPRETTY_NAME=\"Debian 13\"");
        assert_eq!(
            install(&d13, &all, None, &DISTRO),
            "on Debian 13: `apt-get install rustc rust-src bindgen libclang-dev`"
        );
        let v1851 = Some(Version(1, 85, 1));
        assert_eq!(
            install(&d13, &[Part::RustSrc], v1851, &DISTRO),
            "on Debian 13: `apt-get install rust-src`"
        );
        // rustup's rustc: its own component, whatever the distribution.
        assert_eq!(
            install(
                &d13,
                &[Part::RustSrc, Part::Libclang],
                v1851,
                &RustSrcFrom::Rustup
            ),
            "on Debian 13: `apt-get install libclang-dev`; `rustup component add rust-src`"
        );
        // A rustc of its own: its rust-src comes the same way.
        assert_eq!(
            install(
                &d13,
                &[Part::RustSrc],
                v1851,
                &RustSrcFrom::of_sysroot("/opt/rust")
            ),
            "the rust-src of the rustc in /opt/rust, from where that rustc came \
             (or put the distribution's rustc first on PATH)"
        );
        // A new rustc: the distribution's, with its rust-src.
        assert_eq!(
            install(
                &d13,
                &[Part::Rustc, Part::RustSrc],
                None,
                &RustSrcFrom::Rustup
            ),
            "on Debian 13: `apt-get install rustc rust-src`"
        );
        let ubuntu = distro("ID=ubuntu\nVERSION_ID=\"24.04\"\nPRETTY_NAME=\"Ubuntu 24.04.3 LTS\"");
        assert_eq!(
            install(
                &ubuntu,
                &[Part::Rustc, Part::RustSrc],
                Some(Version(1, 75, 0)),
                &DISTRO
            ),
            "on Ubuntu 24.04.3 LTS: `apt-get install rustc-1.XX rust-1.XX-src`; \
             1.XX is 1.85 or newer; make them rustc and bindgen on PATH (links in /usr/local/bin)"
        );
        // The rust-src of the rustc there.
        assert_eq!(
            install(&ubuntu, &[Part::RustSrc], Some(Version(1, 88, 0)), &DISTRO),
            "on Ubuntu 24.04.3 LTS: `apt-get install rust-1.88-src`"
        );
        assert!(install(&ubuntu, &[Part::Bindgen], None, &DISTRO)
            .contains("`apt-get install bindgen-0.71`; any bindgen-0.XX from 0.71 on"));
        let rhel = distro("ID=\"rhel\"\nVERSION_ID=\"9.4\"\nPRETTY_NAME=\"RHEL 9.4\"");
        assert_eq!(
            install(&rhel, &all, None, &DISTRO),
            "on RHEL 9.4: `dnf install rust rust-src clang-devel`; \
             bindgen 0.71.1 is not packaged in RHEL 9.4: `cargo install --locked bindgen-cli@0.71.1`"
        );
        assert_eq!(
            install(
                &Err("/etc/os-release is absent".into()),
                &[Part::Libclang],
                None,
                &DISTRO
            ),
            "install libclang (the distribution is unknown: /etc/os-release is absent)"
        );
        let arch = distro("ID=arch\nPRETTY_NAME=\"Arch Linux\"");
        assert_eq!(
            install(&arch, &[Part::Rustc, Part::Bindgen], None, &DISTRO),
            "install rustc 1.85.0 or newer and bindgen 0.71.1 or newer \
             (`cargo install --locked bindgen-cli@0.71.1`) (the distribution is unknown: \
             Arch Linux is not one named here)"
        );
        assert_eq!(install(&d13, &[], None, &DISTRO), "");
    }
}
