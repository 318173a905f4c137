// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! The running kernel's configuration (`.config` syntax): from
//! `/proc/config.gz` (the kernel's own, when built with `IKCONFIG_PROC`),
//! `/boot/config-<release>` (Debian, Ubuntu) or the headers' `.config`.

use std::collections::BTreeMap;

use crate::host::inflate;
use crate::host::root::Root;

/// Where the configuration is looked for, first found first.
pub fn sources(release: Option<&str>) -> Vec<String> {
    let mut paths = vec!["/proc/config.gz".to_string()];
    if let Some(rel) = release {
        paths.push(format!("/boot/config-{rel}"));
        paths.push(format!("/lib/modules/{rel}/build/.config"));
    }
    paths
}

/// A kernel configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KConfig {
    /// The file it was read from.
    pub source: String,
    /// `CONFIG_RUST` → `y`; options that are not set are absent; strings unquoted.
    values: BTreeMap<String, String>,
    /// Lines that are neither `CONFIG_X=value` nor comments, with their numbers.
    pub unparsed: Vec<(usize, String)>,
}

impl KConfig {
    /// Parses `.config` text; it must set at least one option.
    pub fn parse(source: &str, text: &str) -> Result<KConfig, String> {
        let mut config = KConfig {
            source: source.to_string(),
            ..KConfig::default()
        };
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            match line.split_once('=') {
                Some((name, value)) if is_option(name) => {
                    config
                        .values
                        .insert(name.to_string(), unquote(value.trim()));
                }
                _ => config.unparsed.push((n + 1, line.to_string())),
            }
        }
        if config.values.is_empty() {
            return Err("no CONFIG_ option in it: not a kernel configuration".to_string());
        }
        Ok(config)
    }

    /// The value of an option (`y`, `m`, a number or a string), if set.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// Whether an option is `y` or `m`.
    pub fn enabled(&self, name: &str) -> bool {
        matches!(self.get(name), Some("y" | "m"))
    }

    /// `CONFIG_X=value`, or `CONFIG_X is not set`, as evidence in a detail line.
    pub fn show(&self, name: &str) -> String {
        match self.get(name) {
            Some(v) => format!("{name}={v}"),
            None => format!("{name} is not set"),
        }
    }
}

/// Whether `name` is an option name (`CONFIG_` and upper-case words).
fn is_option(name: &str) -> bool {
    name.strip_prefix("CONFIG_").is_some_and(|rest| {
        !rest.is_empty()
            && rest
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
    })
}

/// A `.config` string value without its quotes and escapes; others as they are.
fn unquote(value: &str) -> String {
    let Some(inner) = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) else {
        return value.to_string();
    };
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        out.push(if c == '\\' {
            chars.next().unwrap_or(c)
        } else {
            c
        });
    }
    out
}

/// The configuration found, and what was wrong with the sources tried before it.
#[derive(Debug, Clone, Default)]
pub struct ConfigRead {
    /// The first source that could be read.
    pub config: Option<KConfig>,
    /// `path: why` for each source that exists but could not be read.
    pub problems: Vec<String>,
    /// Every source looked for.
    pub tried: Vec<String>,
}

/// Reads the first configuration that exists and parses; the ones that
/// exist but do not parse are listed, not lost.
pub fn read(root: &Root, release: Option<&str>) -> ConfigRead {
    let mut found = ConfigRead {
        tried: sources(release),
        ..ConfigRead::default()
    };
    for path in &found.tried {
        let Some(bytes) = root.read_bytes(path) else {
            continue;
        };
        match decode(path, &bytes).and_then(|text| KConfig::parse(path, &text)) {
            Ok(config) => {
                found.config = Some(config);
                break;
            }
            Err(why) => found.problems.push(format!("{path}: {why}")),
        }
    }
    found
}

/// The text of a configuration file, decompressed when it is gzip.
fn decode(path: &str, bytes: &[u8]) -> Result<String, String> {
    let text = if path.ends_with(".gz") || inflate::is_gzip(bytes) {
        inflate::gunzip(bytes)?
    } else {
        bytes.to_vec()
    };
    String::from_utf8(text).map_err(|_| "not text (invalid UTF-8)".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
#
# Automatically generated file; DO NOT EDIT.
#
CONFIG_CC_VERSION_TEXT=\"x86_64-linux-gnu-gcc-14 (Debian 14.2.0-19) 14.2.0\"
CONFIG_RUSTC_VERSION=108501
CONFIG_RUST=y
# CONFIG_MODVERSIONS is not set
CONFIG_MODULE_SIG_KEY=\"output/signing_key.pem\"
CONFIG_NFS_FS=m
CONFIG_ODD=\"a \\\"quoted\\\" \\\\ word\"
";

    #[test]
    fn options() {
        let c = KConfig::parse("/boot/config-7.3", TEXT).expect("config");
        assert_eq!(c.get("CONFIG_RUST"), Some("y"));
        assert_eq!(c.get("CONFIG_RUSTC_VERSION"), Some("108501"));
        assert_eq!(
            c.get("CONFIG_CC_VERSION_TEXT"),
            Some("x86_64-linux-gnu-gcc-14 (Debian 14.2.0-19) 14.2.0")
        );
        assert_eq!(c.get("CONFIG_ODD"), Some("a \"quoted\" \\ word"));
        assert_eq!(c.get("CONFIG_MODVERSIONS"), None);
        assert!(c.enabled("CONFIG_NFS_FS") && c.enabled("CONFIG_RUST"));
        assert!(!c.enabled("CONFIG_MODVERSIONS"));
        assert_eq!(
            c.show("CONFIG_MODVERSIONS"),
            "CONFIG_MODVERSIONS is not set"
        );
        assert_eq!(c.show("CONFIG_RUST"), "CONFIG_RUST=y");
        assert!(c.unparsed.is_empty());
    }

    /// Malformed lines are kept with their numbers; the rest still counts.
    #[test]
    fn malformed_lines() {
        let c = KConfig::parse(
            "x",
            "CONFIG_RUST=y\ngarbage here\nconfig_lower=y\nCONFIG_=1\n",
        )
        .expect("config");
        assert_eq!(c.get("CONFIG_RUST"), Some("y"));
        assert_eq!(
            c.unparsed,
            [
                (2, "garbage here".to_string()),
                (3, "config_lower=y".to_string()),
                (4, "CONFIG_=1".to_string())
            ]
        );
        assert_eq!(
            KConfig::parse("x", "# only comments\nhello\n"),
            Err("no CONFIG_ option in it: not a kernel configuration".to_string())
        );
    }

    #[test]
    fn source_order() {
        assert_eq!(
            sources(Some("7.3")),
            [
                "/proc/config.gz",
                "/boot/config-7.3",
                "/lib/modules/7.3/build/.config"
            ]
        );
        assert_eq!(sources(None), ["/proc/config.gz"]);
    }
}
