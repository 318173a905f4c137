// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! Kernel modules: loaded ones (`/sys/module`), exported symbols
//! (`/proc/kallsyms`), installed files (`/lib/modules/<release>`) and the
//! modprobe configuration (`modprobe.d`).

use std::collections::BTreeMap;

use crate::host::paths::SYS_MODULE;
use crate::host::root::{basename, Root};

/// Marker in the modinfo of this project's `.ko` (`module!{authors}` in
/// `src/nvidia_peermem.rs`).
pub const OUR_MODINFO_MARK: &str = "author=nvidia-peermem-rs";

/// Marker in the modinfo of NVIDIA's and Mellanox's peermem modules.
const NVIDIA_MODINFO_MARK: &str = "author=Yishai Hadas";

/// The running kernel's release (what `uname -r` prints).
pub fn kernel_release(root: &Root) -> Option<String> {
    root.read_attr("/proc/sys/kernel/osrelease")
        .filter(|s| !s.is_empty())
}

/// A module name as the kernel compares it: dashes are underscores.
pub fn normalize(name: &str) -> String {
    name.replace('-', "_")
}

/// A loaded module (`/sys/module/<name>`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Loaded {
    /// `version` (from `MODULE_VERSION`).
    pub version: Option<String>,
    /// `initstate`: `live`, `coming` or `going` (absent for built-in code).
    pub initstate: Option<String>,
}

/// The module `name` if it is loaded (or built in with parameters).
pub fn loaded(root: &Root, name: &str) -> Option<Loaded> {
    let dir = format!("{SYS_MODULE}/{name}");
    if !root.is_dir(&dir) {
        return None;
    }
    let attr = |name: &str| {
        root.read_attr(&format!("{dir}/{name}"))
            .filter(|v| !v.is_empty())
    };
    Some(Loaded {
        version: attr("version"),
        initstate: attr("initstate"),
    })
}

/// The symbols of interest in `/proc/kallsyms` and the module owning each.
#[derive(Debug, Clone, Default)]
pub struct Kallsyms {
    /// Whether the file could be read at all.
    pub readable: bool,
    /// Symbol name to owning module (`None`: the kernel image itself).
    syms: BTreeMap<String, Option<String>>,
}

/// The peer-memory registration function (MOFED's `ib_core` or `ib_uverbs`).
pub const PEER_REGISTER: &str = "ib_register_peer_memory_client";
/// Its counterpart.
pub const PEER_UNREGISTER: &str = "ib_unregister_peer_memory_client";
/// Prefix of NVIDIA's P2P API.
pub const NV_P2P_PREFIX: &str = "nvidia_p2p_";
/// The RDMA core's dma-buf memory registration (`ib_umem_dmabuf_get`,
/// `..._pinned`; upstream since 5.12, `drivers/infiniband/core/umem_dmabuf.c`).
pub const DMABUF_UMEM_PREFIX: &str = "ib_umem_dmabuf_get";
/// A NIC driver's dma-buf MR verb (`mlx5_ib_reg_user_mr_dmabuf`, `efa_reg_user_mr_dmabuf`...).
pub const DMABUF_MR_SUFFIX: &str = "reg_user_mr_dmabuf";

impl Kallsyms {
    /// Reads `/proc/kallsyms`, keeping only peer-memory and NVIDIA P2P symbols.
    pub fn read(root: &Root) -> Kallsyms {
        match root.read_text("/proc/kallsyms") {
            Some(text) => Kallsyms::parse(&text),
            None => Kallsyms::default(),
        }
    }

    /// Parses lines `address type name [module]`.
    pub fn parse(text: &str) -> Kallsyms {
        let mut syms = BTreeMap::new();
        for line in text.lines() {
            let mut f = line.split_whitespace();
            let (Some(_addr), Some(_kind), Some(name)) = (f.next(), f.next(), f.next()) else {
                continue;
            };
            if !(name.starts_with(NV_P2P_PREFIX)
                || name == PEER_REGISTER
                || name == PEER_UNREGISTER
                || name.starts_with(DMABUF_UMEM_PREFIX)
                || name.ends_with(DMABUF_MR_SUFFIX))
            {
                continue;
            }
            let module = f
                .next()
                .and_then(|m| m.strip_prefix('['))
                .and_then(|m| m.strip_suffix(']'))
                .map(str::to_string);
            syms.entry(name.to_string()).or_insert(module);
        }
        Kallsyms {
            readable: true,
            syms,
        }
    }

    /// `Some(owner)` when `name` is listed; the owner is `None` for the kernel image.
    pub fn owner(&self, name: &str) -> Option<Option<&str>> {
        self.syms.get(name).map(|m| m.as_deref())
    }

    /// Listed symbols ending with `suffix`.
    pub fn with_suffix<'a>(
        &'a self,
        suffix: &'a str,
    ) -> impl Iterator<Item = (&'a str, Option<&'a str>)> + 'a {
        self.syms
            .iter()
            .filter(move |(n, _)| n.ends_with(suffix))
            .map(|(n, m)| (n.as_str(), m.as_deref()))
    }

    /// Listed symbols starting with `prefix`.
    pub fn with_prefix<'a>(
        &'a self,
        prefix: &'a str,
    ) -> impl Iterator<Item = (&'a str, Option<&'a str>)> + 'a {
        self.syms
            .iter()
            .filter(move |(n, _)| n.starts_with(prefix))
            .map(|(n, m)| (n.as_str(), m.as_deref()))
    }
}

/// Who built a peermem module file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// This project.
    Ours,
    /// The NVIDIA driver (its bundled `nvidia-peermem`).
    Nvidia,
    /// Mellanox's old `nv_peer_mem`.
    Mellanox,
}

impl Origin {
    /// Who, in words.
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Ours => "this project",
            Origin::Nvidia => "NVIDIA",
            Origin::Mellanox => "Mellanox",
        }
    }
}

/// An installed peermem module file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModFile {
    /// Path below `/lib/modules/<release>/`.
    pub rel: String,
    /// Module name (normalized file stem).
    pub name: String,
    /// Who built it.
    pub origin: Origin,
    /// How the origin was told: `modinfo` or `file name`.
    pub by: &'static str,
}

/// The name of a module file without `.ko` and compression suffix.
pub fn module_stem(file: &str) -> Option<&str> {
    let base = basename(file);
    [".ko", ".ko.gz", ".ko.xz", ".ko.zst"]
        .iter()
        .find_map(|suffix| base.strip_suffix(suffix))
}

/// Whether a normalized module name is a GPU peer-memory client.
pub fn is_peermem_name(name: &str) -> bool {
    name.contains("peermem") || name == "nv_peer_mem"
}

/// The module tree of a kernel release.
pub fn modules_dir(release: &str) -> String {
    format!("/lib/modules/{release}")
}

/// Every peermem module file installed for `release`.
///
/// Uncompressed files are told apart by their modinfo; compressed ones by
/// name: NVIDIA names its file `nvidia-peermem` or `nvidia-current-peermem`,
/// this project's Kbuild produces `nvidia_peermem`.
pub fn peermem_files(root: &Root, release: &str) -> Vec<ModFile> {
    let dir = modules_dir(release);
    let mut out = Vec::new();
    for path in root.walk_files(&dir) {
        let Some(stem) = module_stem(&path) else {
            continue;
        };
        let name = normalize(stem);
        if !is_peermem_name(&name) {
            continue;
        }
        let rel = path
            .strip_prefix(&format!("{dir}/"))
            .unwrap_or(&path)
            .to_string();
        let modinfo = if path.ends_with(".ko") {
            root.read_bytes(&path)
        } else {
            None
        };
        let has = |mark: &str| {
            modinfo
                .as_deref()
                .is_some_and(|b| b.windows(mark.len()).any(|w| w == mark.as_bytes()))
        };
        let (origin, by) = if name == "nv_peer_mem" {
            (Origin::Mellanox, "file name")
        } else if has(OUR_MODINFO_MARK) {
            (Origin::Ours, "modinfo")
        } else if has(NVIDIA_MODINFO_MARK) {
            (Origin::Nvidia, "modinfo")
        } else if stem == "nvidia_peermem" {
            (Origin::Ours, "file name")
        } else {
            (Origin::Nvidia, "file name")
        };
        out.push(ModFile {
            rel,
            name,
            origin,
            by,
        });
    }
    out
}

/// The file `modprobe <name>` loads according to `modules.dep` (path below the release directory).
pub fn modprobe_target(root: &Root, release: &str, name: &str) -> Option<String> {
    let dep = root.read_text(&format!("{}/modules.dep", modules_dir(release)))?;
    let want = normalize(name);
    dep.lines()
        .filter_map(|l| l.split_once(':').map(|(file, _)| file.trim()))
        .find(|file| module_stem(file).is_some_and(|s| normalize(s) == want))
        .map(|file| {
            file.strip_prefix(&format!("{}/", modules_dir(release)))
                .unwrap_or(file)
                .to_string()
        })
}

/// The module that exports `symbol` for `release`, as depmod indexed it:
/// `alias symbol:<symbol> <module>` in modules.symbols.
pub fn symbol_provider(root: &Root, release: &str, symbol: &str) -> Option<String> {
    let want = format!("symbol:{symbol}");
    root.read_text(&format!("{}/modules.symbols", modules_dir(release)))?
        .lines()
        .find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some("alias") && w.next() == Some(want.as_str()))
                .then(|| w.next().map(str::to_string))
                .flatten()
        })
}

/// modprobe.d directories, the ones overriding same-named files first (modprobe.d(5)).
pub const MODPROBE_DIRS: [&str; 5] = [
    "/etc/modprobe.d",
    "/run/modprobe.d",
    "/usr/local/lib/modprobe.d",
    "/usr/lib/modprobe.d",
    "/lib/modprobe.d",
];

/// What a modprobe.d line does to a module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleKind {
    /// `install <module> <command>`: the modules the command loads, and any other programs it runs.
    Install {
        /// Normalized names of modules loaded by `modprobe`/`insmod` in the command.
        loads: Vec<String>,
        /// Other programs run by the command (`/bin/false`...).
        runs: Vec<String>,
    },
    /// `blacklist <module>`.
    Blacklist,
    /// `options`, `softdep`, `remove` or `alias` naming the module.
    Other(String),
}

/// One modprobe.d line about a module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The file it is in.
    pub file: String,
    /// The line, continuations joined.
    pub text: String,
    /// What it does.
    pub kind: RuleKind,
}

/// The install rule modprobe follows among `rules`: the first it reads,
/// reading the files in the order of their names across the modprobe.d
/// directories (modprobe.d(5)); a later one is shadowed.
pub fn effective_install(rules: &[Rule]) -> Option<&Rule> {
    let file_name = |r: &Rule| r.file.rsplit('/').next().unwrap_or("").to_string();
    rules
        .iter()
        .filter(|r| matches!(r.kind, RuleKind::Install { .. }))
        .min_by_key(|r| file_name(r))
}

/// The modprobe.d rules that name module `name` (dashes and underscores alike).
pub fn modprobe_rules(root: &Root, name: &str) -> Vec<Rule> {
    let want = normalize(name);
    let mut seen: Vec<String> = Vec::new();
    let mut rules = Vec::new();
    for dir in MODPROBE_DIRS {
        for file in root.list(dir) {
            if !file.ends_with(".conf") || seen.contains(&file) {
                continue;
            }
            seen.push(file.clone());
            let path = format!("{dir}/{file}");
            let Some(text) = root.read_text(&path) else {
                continue;
            };
            for line in logical_lines(&text) {
                if let Some(kind) = parse_rule(&line, &want) {
                    rules.push(Rule {
                        file: path.clone(),
                        text: line,
                        kind,
                    });
                }
            }
        }
    }
    rules
}

/// Joins `\`-continued lines and drops comments and blank lines.
fn logical_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for raw in text.lines() {
        let (part, cont) = match raw.strip_suffix('\\') {
            Some(p) => (p, true),
            None => (raw, false),
        };
        cur.push_str(part);
        if cont {
            cur.push(' ');
            continue;
        }
        let line = cur.trim().to_string();
        cur.clear();
        if !line.is_empty() && !line.starts_with('#') {
            out.push(line);
        }
    }
    out
}

/// Parses one modprobe.d line if it concerns module `want` (normalized).
fn parse_rule(line: &str, want: &str) -> Option<RuleKind> {
    let mut words = line.split_whitespace();
    let cmd = words.next()?;
    match cmd {
        "install" | "blacklist" | "options" | "remove" => {
            if normalize(words.next()?) != want {
                return None;
            }
            Some(match cmd {
                "install" => {
                    let command = line
                        .split_whitespace()
                        .skip(2)
                        .collect::<Vec<_>>()
                        .join(" ");
                    let (loads, runs) = parse_install(&command);
                    RuleKind::Install { loads, runs }
                }
                "blacklist" => RuleKind::Blacklist,
                _ => RuleKind::Other(cmd.to_string()),
            })
        }
        "softdep" | "alias" => {
            let rest: Vec<&str> = words.collect();
            rest.iter()
                .any(|w| normalize(w) == want)
                .then(|| RuleKind::Other(cmd.to_string()))
        }
        _ => None,
    }
}

/// The `module_blacklist=` and `modprobe.blacklist=` options of a kernel
/// command line that name module `name`.
pub fn cmdline_blacklists(cmdline: &str, name: &str) -> Vec<String> {
    let want = normalize(name);
    cmdline
        .split_whitespace()
        .filter(|opt| {
            ["module_blacklist=", "modprobe.blacklist="]
                .iter()
                .any(|key| {
                    opt.strip_prefix(key)
                        .is_some_and(|v| v.split(',').any(|m| normalize(m) == want))
                })
        })
        .map(str::to_string)
        .collect()
}

/// The modules an install command loads and the other programs it runs.
pub fn parse_install(command: &str) -> (Vec<String>, Vec<String>) {
    let mut loads = Vec::new();
    let mut runs = Vec::new();
    let seps = command
        .replace("&&", ";")
        .replace("||", ";")
        .replace('|', ";");
    for sub in seps.split(';') {
        let mut words = sub.split_whitespace();
        let Some(prog) = words.next() else { continue };
        match basename(prog) {
            "modprobe" => loads.extend(
                words
                    .filter(|w| !w.starts_with('-') && !w.starts_with('$'))
                    .map(normalize),
            ),
            "insmod" => loads.extend(
                words
                    .filter(|w| !w.starts_with('-') && !w.starts_with('$'))
                    .take(1)
                    .map(|f| normalize(module_stem(f).unwrap_or(basename(f)))),
            ),
            other => runs.push(other.to_string()),
        }
    }
    (loads, runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kallsyms_owner() {
        let k = Kallsyms::parse(
            "ffffffffc0a01230 T nvidia_p2p_get_pages\t[nvidia]\n\
             0000000000000000 T ib_register_peer_memory_client\t[ib_uverbs]\n\
             ffffffff81000000 T _text\n\
             ffffffff81000010 T nvidia_p2p_builtin\n\
             ffffffffc0000000 r __ksymtab_nvidia_p2p_get_pages\t[nvidia]\n",
        );
        assert_eq!(k.owner("nvidia_p2p_get_pages"), Some(Some("nvidia")));
        assert_eq!(k.owner(PEER_REGISTER), Some(Some("ib_uverbs")));
        assert_eq!(k.owner("nvidia_p2p_builtin"), Some(None));
        assert_eq!(k.owner("_text"), None);
        assert_eq!(k.with_prefix(NV_P2P_PREFIX).count(), 2);
    }

    #[test]
    fn install_commands() {
        let (loads, runs) =
            parse_install("modprobe nvidia ; modprobe -i nvidia-current-peermem $CMDLINE_OPTS");
        assert_eq!(loads, ["nvidia", "nvidia_current_peermem"]);
        assert!(runs.is_empty());
        let (loads, runs) =
            parse_install("/sbin/modprobe --ignore-install nvidia_peermem && /bin/echo ok");
        assert_eq!(loads, ["nvidia_peermem"]);
        assert_eq!(runs, ["echo"]);
        let (loads, runs) = parse_install("/sbin/insmod /opt/x/nvidia-peermem.ko.xz");
        assert_eq!(loads, ["nvidia_peermem"]);
        assert!(runs.is_empty());
        assert_eq!(
            parse_install("/bin/false"),
            (vec![], vec!["false".to_string()])
        );
    }

    #[test]
    fn effective_install_is_first_by_file_name() {
        let rule = |file: &str, kind: RuleKind| Rule {
            file: file.to_string(),
            text: String::new(),
            kind,
        };
        let install = |loads: &str| RuleKind::Install {
            loads: vec![loads.to_string()],
            runs: Vec::new(),
        };
        let rules = [
            rule(
                "/etc/modprobe.d/nvidia.conf",
                install("nvidia_current_peermem"),
            ),
            rule(
                "/usr/lib/modprobe.d/00-nvidia-peer-memory.conf",
                RuleKind::Other("softdep".into()),
            ),
            rule(
                "/usr/lib/modprobe.d/00-nvidia-peer-memory.conf",
                install("nvidia_peermem"),
            ),
            rule("/etc/modprobe.d/zz.conf", install("other_peermem")),
        ];
        let first = effective_install(&rules).expect("an install rule");
        assert_eq!(first.kind, install("nvidia_peermem"));
        assert!(effective_install(&rules[1..2]).is_none());
    }

    #[test]
    fn rule_lines() {
        let text = "# comment\ninstall nvidia-peermem modprobe nvidia ; \\\n  modprobe -i nvidia-current-peermem\n\
                    blacklist nvidia_peermem\noptions nvidia-peermem persistent_api_support=0\n\
                    softdep nvidia_peermem pre: nvidia\ninstall nvidia modprobe -i nvidia\n";
        let rules: Vec<RuleKind> = logical_lines(text)
            .iter()
            .filter_map(|l| parse_rule(l, "nvidia_peermem"))
            .collect();
        assert_eq!(
            rules,
            [
                RuleKind::Install {
                    loads: vec!["nvidia".into(), "nvidia_current_peermem".into()],
                    runs: vec![]
                },
                RuleKind::Blacklist,
                RuleKind::Other("options".into()),
                RuleKind::Other("softdep".into()),
            ]
        );
    }

    #[test]
    fn cmdline_blacklist_options() {
        let line =
            "ro quiet module_blacklist=nouveau,nvidia-peermem modprobe.blacklist=nvidia_peermem \
                    module_blacklist=nvidia_peermem_x modprobe.blacklist=";
        assert_eq!(
            cmdline_blacklists(line, "nvidia_peermem"),
            [
                "module_blacklist=nouveau,nvidia-peermem",
                "modprobe.blacklist=nvidia_peermem"
            ]
        );
        assert!(cmdline_blacklists("ro quiet", "nvidia_peermem").is_empty());
    }

    #[test]
    fn stems() {
        assert_eq!(
            module_stem("/x/nvidia-current-peermem.ko.zst"),
            Some("nvidia-current-peermem")
        );
        assert_eq!(module_stem("nv_peer_mem.ko"), Some("nv_peer_mem"));
        assert_eq!(module_stem("nvidia.ko.sig"), None);
        assert!(is_peermem_name("nvidia_current_peermem"));
        assert!(!is_peermem_name("nvidia_uvm"));
    }
}
