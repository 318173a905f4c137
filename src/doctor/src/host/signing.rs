// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! Module signatures: whether the kernel enforces them (`module.sig_enforce`,
//! `MODULE_SIG_FORCE`, lockdown), whether a module file carries one, and
//! the key DKMS signs with (its MOK) and whether UEFI has it enrolled.

use crate::host::carried::Distro;
use crate::host::inflate;
use crate::host::kconfig::KConfig;
use crate::host::root::Root;

/// What `scripts/sign-file` appends after the signature.
pub const SIG_MAGIC: &[u8] = b"~Module signature appended~\n";

/// `struct module_signature`, just before the magic: algorithm, hash,
/// id type, signer and key id lengths, 3 pad bytes, then the big-endian
/// signature length.
const SIG_INFO_LEN: usize = 12;

/// The kernel's switch for enforced signatures (Y or N; Y under `MODULE_SIG_FORCE`).
pub const SIG_ENFORCE: &str = "/sys/module/module/parameters/sig_enforce";
/// The lockdown state: `none integrity [confidentiality]`, the active one bracketed.
pub const LOCKDOWN: &str = "/sys/kernel/security/lockdown";
/// Present when the kernel was booted by UEFI.
pub const EFI_DIR: &str = "/sys/firmware/efi";
/// The Secure Boot variable: 4 attribute bytes, then 1 when it is on.
pub const SECURE_BOOT_VAR: &str =
    "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-e98c3d8b4d89";
/// Where the kernel shows the MOK list shim passed on (certificates in DER).
pub const MOK_LISTS: [&str; 2] = [
    "/sys/firmware/efi/mok-variables/MokListRT",
    "/sys/firmware/efi/efivars/MokListRT-605dab50-e046-4300-abb6-3dd810dd8b23",
];

/// Whether a module file is signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModSig {
    /// A signature of this many bytes.
    Signed(u32),
    /// No signature.
    Unsigned,
    /// Cannot be told (why).
    Unknown(String),
}

/// The signature state of a module's bytes (uncompressed).
pub fn signature_in(module: &[u8]) -> ModSig {
    let Some(body) = module.strip_suffix(SIG_MAGIC) else {
        return ModSig::Unsigned;
    };
    let Some(info) = body.len().checked_sub(SIG_INFO_LEN).map(|at| &body[at..]) else {
        return ModSig::Unknown("a signature marker without its header".to_string());
    };
    let len = u32::from_be_bytes([info[8], info[9], info[10], info[11]]);
    let fits = usize::try_from(len).is_ok_and(|l| l + SIG_INFO_LEN <= body.len());
    if !fits {
        return ModSig::Unknown(format!(
            "a signature of {len} bytes in a file of {} bytes",
            module.len()
        ));
    }
    ModSig::Signed(len)
}

/// The signature state of a module file (`.ko` or `.ko.gz`).
pub fn module_signature(root: &Root, path: &str) -> ModSig {
    let Some(bytes) = root.read_bytes(path) else {
        return ModSig::Unknown("unreadable".to_string());
    };
    if path.ends_with(".ko.gz") {
        return match inflate::gunzip(&bytes) {
            Ok(module) => signature_in(&module),
            Err(why) => ModSig::Unknown(format!("cannot decompress it: {why}")),
        };
    }
    match path.rsplit('.').next() {
        Some("xz" | "zst") => ModSig::Unknown("compressed (xz/zstd): not checked".to_string()),
        _ => signature_in(&bytes),
    }
}

/// Lockdown levels, weakest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LockMode {
    /// No lockdown.
    None,
    /// Integrity: unsigned modules are refused.
    Integrity,
    /// Confidentiality: integrity and more.
    Confidentiality,
}

impl LockMode {
    /// Parses `none`, `integrity`, `confidentiality`.
    pub fn parse(word: &str) -> Option<LockMode> {
        match word {
            "none" => Some(LockMode::None),
            "integrity" => Some(LockMode::Integrity),
            "confidentiality" => Some(LockMode::Confidentiality),
            _ => None,
        }
    }

    /// The name the kernel uses.
    pub fn as_str(self) -> &'static str {
        match self {
            LockMode::None => "none",
            LockMode::Integrity => "integrity",
            LockMode::Confidentiality => "confidentiality",
        }
    }
}

/// The lockdown state and where it was read or inferred from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lockdown {
    /// The level.
    pub mode: LockMode,
    /// Where it comes from.
    pub from: String,
}

/// Whether UEFI Secure Boot is on: `Some(false)` also without UEFI.
pub fn secure_boot(root: &Root) -> Option<bool> {
    if !root.is_dir(EFI_DIR) {
        return Some(false);
    }
    let var = root.read_bytes(SECURE_BOOT_VAR)?;
    var.get(4).map(|&on| on == 1)
}

/// The lockdown level: securityfs when mounted, else the strongest of what
/// raises it (the configuration, `lockdown=`, Secure Boot); `None` when
/// that cannot be told.
pub fn lockdown(root: &Root, config: Option<&KConfig>, cmdline: &str) -> Option<Lockdown> {
    if let Some(text) = root.read_attr(LOCKDOWN) {
        let active = text
            .split_whitespace()
            .find_map(|w| w.strip_prefix('[').and_then(|w| w.strip_suffix(']')))
            .and_then(LockMode::parse)?;
        return Some(Lockdown {
            mode: active,
            from: LOCKDOWN.to_string(),
        });
    }
    let secure_boot = secure_boot(root);
    let mut raised: Vec<(LockMode, String)> = Vec::new();
    if let Some(c) = config {
        for (option, mode) in [
            (
                "CONFIG_LOCK_DOWN_KERNEL_FORCE_INTEGRITY",
                LockMode::Integrity,
            ),
            (
                "CONFIG_LOCK_DOWN_KERNEL_FORCE_CONFIDENTIALITY",
                LockMode::Confidentiality,
            ),
        ] {
            if c.enabled(option) {
                raised.push((mode, format!("{option}=y")));
            }
        }
        if secure_boot == Some(true) && c.enabled("CONFIG_LOCK_DOWN_IN_EFI_SECURE_BOOT") {
            raised.push((
                LockMode::Integrity,
                "Secure Boot with CONFIG_LOCK_DOWN_IN_EFI_SECURE_BOOT=y".to_string(),
            ));
        }
    }
    if let Some(mode) = cmdline
        .split_whitespace()
        .find_map(|w| w.strip_prefix("lockdown="))
        .and_then(LockMode::parse)
    {
        raised.push((
            mode,
            format!("lockdown={} on the command line", mode.as_str()),
        ));
    }
    if let Some((mode, from)) = raised.into_iter().max() {
        return Some(Lockdown { mode, from });
    }
    // Nothing raises it, as far as the configuration and Secure Boot tell.
    (config.is_some() && secure_boot.is_some()).then(|| Lockdown {
        mode: LockMode::None,
        from: "nothing raises it (configuration, command line, Secure Boot)".to_string(),
    })
}

/// Whether the kernel refuses unsigned modules, and the evidence.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Enforcement {
    /// `Some(true)`: enforced; `None`: cannot be told.
    pub enforced: Option<bool>,
    /// What enforces it (`CONFIG_MODULE_SIG_FORCE=y`, `lockdown integrity`).
    pub reasons: Vec<String>,
    /// Every fact read, one per item.
    pub evidence: Vec<String>,
    /// The lockdown level, when known.
    pub lockdown: Option<Lockdown>,
}

/// Reads `module.sig_enforce`, the configuration and lockdown.
pub fn enforcement(root: &Root, config: Option<&KConfig>, cmdline: &str) -> Enforcement {
    let mut evidence = Vec::new();
    let sig_enforce = root.read_attr(SIG_ENFORCE);
    if let Some(v) = &sig_enforce {
        evidence.push(format!("module.sig_enforce={v} ({SIG_ENFORCE})"));
    }
    if let Some(c) = config {
        evidence.push(c.show("CONFIG_MODULE_SIG"));
        evidence.push(c.show("CONFIG_MODULE_SIG_FORCE"));
    }
    let lock = lockdown(root, config, cmdline);
    evidence.push(match &lock {
        Some(l) => format!("lockdown: {} ({})", l.mode.as_str(), l.from),
        None => format!("lockdown: unknown ({LOCKDOWN} unreadable, configuration unknown)"),
    });
    let mut reasons = Vec::new();
    if sig_enforce.as_deref() == Some("Y") {
        reasons.push("module.sig_enforce=Y".to_string());
    }
    if config.is_some_and(|c| c.enabled("CONFIG_MODULE_SIG_FORCE")) {
        reasons.push("CONFIG_MODULE_SIG_FORCE=y".to_string());
    }
    // Without CONFIG_MODULE_SIG the kernel checks no signature, lockdown or not.
    let no_checks = config.is_some_and(|c| !c.enabled("CONFIG_MODULE_SIG"));
    match &lock {
        Some(l) if l.mode >= LockMode::Integrity && !no_checks => {
            reasons.push(format!("lockdown {} ({})", l.mode.as_str(), l.from))
        }
        _ => {}
    }
    let lock_none = lock.as_ref().is_some_and(|l| l.mode == LockMode::None);
    let enforced = if !reasons.is_empty() {
        Some(true)
    } else if no_checks || (lock_none && (sig_enforce.is_some() || config.is_some())) {
        Some(false)
    } else {
        None
    };
    Enforcement {
        enforced,
        reasons,
        evidence,
        lockdown: lock,
    }
}

/// The key and certificate DKMS signs modules with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MokKey {
    /// The private key.
    pub key: String,
    /// The certificate (DER) to enroll.
    pub cert: String,
}

/// DKMS's defaults: Debian's dkms makes its own MOK, Ubuntu's uses shim-signed's.
pub const DEBIAN_MOK: (&str, &str) = ("/var/lib/dkms/mok.key", "/var/lib/dkms/mok.pub");
/// See [`DEBIAN_MOK`].
pub const UBUNTU_MOK: (&str, &str) = (
    "/var/lib/shim-signed/mok/MOK.priv",
    "/var/lib/shim-signed/mok/MOK.der",
);

/// The MOK DKMS signs with: `mok_signing_key` and `mok_certificate` of
/// `/etc/dkms/framework.conf` (and `framework.conf.d/*.conf`), else the
/// distribution's default.
pub fn dkms_mok(root: &Root) -> MokKey {
    let ubuntu = Distro::read(root).is_ok_and(|d| d.id == "ubuntu");
    let (key, cert) = if ubuntu { UBUNTU_MOK } else { DEBIAN_MOK };
    let mut mok = MokKey {
        key: key.to_string(),
        cert: cert.to_string(),
    };
    let dir = "/etc/dkms/framework.conf.d";
    let files = std::iter::once("/etc/dkms/framework.conf".to_string()).chain(
        root.list(dir)
            .into_iter()
            .filter(|f| f.ends_with(".conf"))
            .map(|f| format!("{dir}/{f}")),
    );
    for text in files.filter_map(|f| root.read_text(&f)) {
        for line in text.lines().map(str::trim) {
            let Some((name, value)) = line.split_once('=') else {
                continue;
            };
            let value = value.trim().trim_matches('"').to_string();
            match name.trim() {
                "mok_signing_key" => mok.key = value,
                "mok_certificate" => mok.cert = value,
                _ => {}
            }
        }
    }
    mok
}

/// Whether the certificate at `cert` is in the MOK list UEFI passed on;
/// `None` when the certificate or the list cannot be read.
pub fn mok_enrolled(root: &Root, cert: &str) -> Option<bool> {
    let der = root.read_bytes(cert).filter(|d| !d.is_empty())?;
    let list = MOK_LISTS.iter().find_map(|p| root.read_bytes(p))?;
    Some(list.windows(der.len()).any(|w| w == der.as_slice()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A module with a 256-byte PKCS#7 signature, as sign-file appends it.
    fn signed(len: u32) -> Vec<u8> {
        let mut m = b"\x7fELF module body".to_vec();
        m.extend(std::iter::repeat_n(0xaa, 256));
        m.extend([0, 0, 2, 0, 0, 0, 0, 0]);
        m.extend(len.to_be_bytes());
        m.extend(SIG_MAGIC);
        m
    }

    #[test]
    fn signatures() {
        assert_eq!(signature_in(&signed(256)), ModSig::Signed(256));
        assert_eq!(signature_in(b"\x7fELF module body"), ModSig::Unsigned);
        assert_eq!(
            signature_in(&signed(4096)),
            ModSig::Unknown("a signature of 4096 bytes in a file of 312 bytes".to_string())
        );
        assert_eq!(
            signature_in(SIG_MAGIC),
            ModSig::Unknown("a signature marker without its header".to_string())
        );
    }

    /// `\x7fELF module body`, a 16-byte signature, its header and the marker, gzipped.
    const SIGNED_GZ: [u8; 69] = [
        0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0xab, 0x77, 0xf5, 0x71, 0x53,
        0xc8, 0xcd, 0x4f, 0x29, 0xcd, 0x49, 0x55, 0x48, 0xca, 0x4f, 0xa9, 0x0c, 0x46, 0x03, 0x0c,
        0x0c, 0x4c, 0x0c, 0x50, 0x20, 0x50, 0xe7, 0x0b, 0x51, 0x57, 0x9c, 0x99, 0x9e, 0x97, 0x58,
        0x52, 0x5a, 0x94, 0xaa, 0x90, 0x58, 0x50, 0x90, 0x9a, 0x97, 0x92, 0x9a, 0x52, 0xc7, 0x05,
        0x00, 0x92, 0x26, 0xe1, 0x2f, 0x48, 0x00, 0x00, 0x00,
    ];

    /// Module files as installed: plain, gzip (read through), gzip cut
    /// short (said so), xz and zstd (not read), missing.
    #[test]
    fn module_files() {
        let dir = std::env::temp_dir().join(format!("peermem-doctor-sig-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        let put = |name: &str, bytes: &[u8]| std::fs::write(dir.join(name), bytes).expect("write");
        put("plain.ko", &signed(256));
        put("signed.ko.gz", &SIGNED_GZ);
        put("cut.ko.gz", &SIGNED_GZ[..40]);
        put("m.ko.xz", b"\xfd7zXZ\0");
        let root = Root::new(&dir).expect("root");
        let sig = |path: &str| module_signature(&root, path);
        assert_eq!(sig("/plain.ko"), ModSig::Signed(256));
        assert_eq!(sig("/signed.ko.gz"), ModSig::Signed(16));
        assert_eq!(
            sig("/cut.ko.gz"),
            ModSig::Unknown(
                "cannot decompress it: truncated: incomplete deflate stream".to_string()
            )
        );
        assert_eq!(
            sig("/m.ko.xz"),
            ModSig::Unknown("compressed (xz/zstd): not checked".to_string())
        );
        assert_eq!(sig("/gone.ko"), ModSig::Unknown("unreadable".to_string()));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Enforcement from what each host shows.
    fn enforced(
        name: &str,
        files: &[(&str, &str)],
        config: Option<&str>,
        cmdline: &str,
    ) -> Enforcement {
        let dir = crate::host::root::scratch_tree(&format!("enforce-{name}"), files);
        let root = Root::new(&dir).expect("root");
        let config = config.map(|text| KConfig::parse("/boot/config-x", text).expect("config"));
        let e = enforcement(&root, config.as_ref(), cmdline);
        let _ = std::fs::remove_dir_all(&dir);
        e
    }

    #[test]
    fn enforcement_cases() {
        const SIG: &str = "CONFIG_MODULE_SIG=y\n";
        // Nothing to read, or only sig_enforce=N without securityfs (the test guest): unknown.
        assert_eq!(enforced("none", &[], None, "").enforced, None);
        let guest = [(&SIG_ENFORCE[1..], "N\n")];
        assert_eq!(enforced("guest", &guest, None, "").enforced, None);
        // The configuration known, no UEFI, nothing raising lockdown: not enforced.
        let e = enforced("plain", &guest, Some(SIG), "");
        assert_eq!(e.enforced, Some(false));
        assert_eq!(e.lockdown.map(|l| l.mode), Some(LockMode::None));
        // lockdown= on the command line, with the configuration unknown.
        let e = enforced("cmdline", &guest, None, "ro lockdown=integrity");
        assert_eq!(e.enforced, Some(true));
        assert_eq!(
            e.reasons,
            ["lockdown integrity (lockdown=integrity on the command line)"]
        );
        // securityfs says none, whatever the rest would infer.
        let fs_none = [
            (&SIG_ENFORCE[1..], "N\n"),
            (&LOCKDOWN[1..], "[none] integrity\n"),
        ];
        assert_eq!(
            enforced("fs", &fs_none, None, "lockdown=integrity").enforced,
            Some(false)
        );
        // Secure Boot raises lockdown where the configuration says so.
        let sb = [(
            "sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-e98c3d8b4d89",
            "\x06\0\0\0\x01",
        )];
        let conf = format!("{SIG}CONFIG_LOCK_DOWN_IN_EFI_SECURE_BOOT=y\n");
        let e = enforced("sb", &sb, Some(&conf), "");
        assert_eq!(e.enforced, Some(true));
        assert_eq!(e.lockdown.map(|l| l.mode), Some(LockMode::Integrity));
        // Without CONFIG_MODULE_SIG no signature is checked, even locked down.
        let e = enforced(
            "nosig",
            &[],
            Some("CONFIG_MODULES=y\n"),
            "lockdown=confidentiality",
        );
        assert_eq!(e.enforced, Some(false));
    }

    #[test]
    fn dkms_keys_and_enrollment() {
        let cert = "0\u{82}stand-in certificate\n";
        let dir = crate::host::root::scratch_tree(
            "mok",
            &[
                ("etc/os-release", "NAME=\"Ubuntu\"\nID=\"ubuntu\"\n"),
                (
                    "etc/dkms/framework.conf",
                    "# mok_signing_key=/var/lib/dkms/mok.key\n",
                ),
                (
                    "etc/dkms/framework.conf.d/site.conf",
                    "mok_certificate=\"/etc/keys/mok.der\"\n",
                ),
                ("etc/keys/mok.der", cert),
                (
                    "sys/firmware/efi/mok-variables/MokListRT",
                    "header 0\u{82}stand-in certificate\n tail",
                ),
            ],
        );
        let root = Root::new(&dir).expect("root");
        let mok = dkms_mok(&root);
        assert_eq!(mok.key, UBUNTU_MOK.0);
        assert_eq!(mok.cert, "/etc/keys/mok.der");
        assert_eq!(mok_enrolled(&root, &mok.cert), Some(true));
        assert_eq!(mok_enrolled(&root, UBUNTU_MOK.1), None);
        std::fs::write(
            dir.join("sys/firmware/efi/mok-variables/MokListRT"),
            "other",
        )
        .expect("write");
        assert_eq!(mok_enrolled(&root, &mok.cert), Some(false));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn lock_modes() {
        assert_eq!(LockMode::parse("integrity"), Some(LockMode::Integrity));
        assert_eq!(LockMode::parse("[none]"), None);
        assert!(LockMode::Confidentiality > LockMode::Integrity);
    }
}
