// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! One test per fixture under `tests/fixtures/`: run the doctor on the
//! fixture's model in memory, compare with its `expect` file
//! (`NVPM_DOCTOR_BLESS=1` rewrites the file to what the doctor says). A
//! few fixtures are written out too, for the binary to read.

use crate::support;

macro_rules! fixtures {
    ($($test:ident => $dir:literal,)*) => {
        $(
            #[test]
            fn $test() {
                support::check_fixture($dir);
            }
        )*

        /// Every fixture directory has a test above.
        #[test]
        fn every_fixture_is_tested() {
            let listed = [$($dir),*];
            let mut missing = Vec::new();
            for entry in std::fs::read_dir(support::fixture::fixtures_dir()).expect("tests/fixtures") {
                let entry = entry.expect("tests/fixtures entry");
                let name = entry.file_name().to_string_lossy().into_owned();
                if entry.path().join("expect").exists() && !listed.contains(&name.as_str()) {
                    missing.push(name);
                }
            }
            assert!(missing.is_empty(), "fixtures without a test: {missing:?}");
        }
    };
}

fixtures! {
    acs => "acs",
    bar1_bare_metal => "bar1-bare-metal",
    bar1_malformed => "bar1-malformed",
    bar1_unassigned => "bar1-unassigned",
    bundled_ko => "bundled-ko",
    bundled_rule => "bundled-rule",
    client_missing => "client-missing",
    cmdline_forbidden => "cmdline-forbidden",
    crc_driver_built => "crc-driver-built",
    crc_driver_pending => "crc-driver-pending",
    crc_driver_pending_added => "crc-driver-pending-added",
    crc_driver_removed => "crc-driver-removed",
    crc_exporter_other_kernel => "crc-exporter-other-kernel",
    crc_exporters_deb13 => "crc-exporters-deb13",
    crc_exporters_deb13_stale => "crc-exporters-deb13-stale",
    crc_exporter_removed => "crc-exporter-removed",
    crc_exporters_unreadable => "crc-exporters-unreadable",
    crc_refused_nvidia => "crc-refused-nvidia",
    crc_refused_operator => "crc-refused-operator",
    debian_rule_shadowed => "debian-rule-shadowed",
    dgx => "dgx",
    dmabuf_ready => "dmabuf-ready",
    dmabuf_unsupported => "dmabuf-unsupported",
    gh200_c2c => "gh200-c2c",
    gh200_c2c_dma_map => "gh200-c2c-dma-map",
    gh200_cdmm_580 => "gh200-cdmm-580",
    gh200_cdmm_580_dma_map => "gh200-cdmm-580-dma-map",
    gh200_cdmm_580_override => "gh200-cdmm-580-override",
    gh200_cdmm_no_uvm => "gh200-cdmm-no-uvm",
    gh200_cdmm_no_uvm_dma_map => "gh200-cdmm-no-uvm-dma-map",
    gh200_cdmm_uvm => "gh200-cdmm-uvm",
    gh200_cdmm_uvm_dma_map => "gh200-cdmm-uvm-dma-map",
    grace_override_allow => "grace-override-allow",
    grace_override_deny => "grace-override-deny",
    grace_switch_rule => "grace-switch-rule",
    grace_switch_shared => "grace-switch-shared",
    inbox => "inbox",
    h100_vm => "h100-vm",
    h200_vm => "h200-vm",
    iommu_passthrough => "iommu-passthrough",
    loaded_no_ko => "loaded-no-ko",
    kernel_carried_debian12 => "kernel-carried-debian12",
    kernel_carried_no_headers => "kernel-carried-no-headers",
    kernel_carried_no_libclang => "kernel-carried-no-libclang",
    kernel_carried_no_rust_src => "kernel-carried-no-rust-src",
    kernel_carried_other_rustc => "kernel-carried-other-rustc",
    kernel_carried_ready => "kernel-carried-ready",
    kernel_carried_rustc_old => "kernel-carried-rustc-old",
    kernel_carried_unparsable => "kernel-carried-unparsable",
    kernel_old_crates => "kernel-old-crates",
    kernel_config_unreadable => "kernel-config-unreadable",
    kernel_crc_refused => "kernel-crc-refused",
    kernel_mok_not_enrolled => "kernel-mok-not-enrolled",
    kernel_modversions_dwarf => "kernel-modversions-dwarf",
    kernel_modversions_genksyms => "kernel-modversions-genksyms",
    kernel_arm64 => "kernel-arm64",
    kernel_arm64_compat_cc => "kernel-arm64-compat-cc",
    kernel_arm64_no_compat_cc => "kernel-arm64-no-compat-cc",
    kernel_no_crates => "kernel-no-crates",
    kernel_no_modules => "kernel-no-modules",
    kernel_rust_off => "kernel-rust-off",
    kernel_sig_signed => "kernel-sig-signed",
    kernel_sig_unsigned => "kernel-sig-unsigned",
    kernel_wrong_bindgen => "kernel-wrong-bindgen",
    kernel_wrong_toolchain => "kernel-wrong-toolchain",
    kernel_x86_no_target_spec => "kernel-x86-no-target-spec",
    iommu_translated => "iommu-translated",
    merged_usr => "merged-usr",
    modprobe_disabled => "modprobe-disabled",
    modprobe_options => "modprobe-options",
    mofed_2407 => "mofed-2407",
    no_driver => "no-driver",
    node => "node",
    nonroot => "nonroot",
    not_loaded => "not-loaded",
    nv_peer_mem => "nv-peer-mem",
    nv_peer_mem_installed => "nv-peer-mem-installed",
    nv_peer_mem_new_mofed => "nv-peer-mem-new-mofed",
    old_driver => "old-driver",
    peerdirect_mismatch => "peerdirect-mismatch",
    phb => "phb",
    pix => "pix",
    pxb => "pxb",
    rxe_only => "rxe-only",
    small_bar1 => "small-bar1",
    stale_build => "stale-build",
    stale_build_unloaded => "stale-build-unloaded",
    stats_dma_map => "stats-dma-map",
    stats_errors => "stats-errors",
    sys => "sys",
}

/// While the NVIDIA driver's DKMS module is there but not built for the
/// kernel (a driver upgrade between its unpack and its postinst), neither
/// module.build nor kernel.rust tells to install the driver; with no DKMS
/// module of it, or one built for the kernel, they do.
#[test]
fn driver_still_to_build_is_not_driver_gone() {
    let text = |name: &str, id: &str| {
        let report = peermem_doctor::run(&support::model(name, std::path::Path::new("/fixtures")));
        let c = report
            .check(id)
            .unwrap_or_else(|| panic!("{name}: no {id}"));
        format!(
            "{}\n{}\n{}",
            c.summary,
            c.detail.join("\n"),
            c.fix.clone().unwrap_or_default()
        )
    };
    const INSTALL: &str = "install the NVIDIA driver's kernel modules";
    const PENDING: &str = "is present but not built for";
    for name in ["crc-driver-pending", "crc-driver-pending-added"] {
        for id in ["module.build", "kernel.rust"] {
            let t = text(name, id);
            assert!(
                !t.contains(INSTALL) && t.contains(PENDING),
                "{name} {id}: {t}"
            );
        }
    }
    for (name, ids) in [
        ("crc-driver-removed", &["module.build", "kernel.rust"][..]),
        ("crc-driver-built", &["module.build"][..]),
    ] {
        for id in ids {
            let t = text(name, id);
            assert!(
                t.contains(INSTALL) && !t.contains(PENDING),
                "{name} {id}: {t}"
            );
        }
    }
}

/// The binary reads a tree written out as the library reads its model:
/// links and merged /usr, programs and their answers, the kernel log,
/// module files, a CUDA record and ib_core's clients.
#[test]
fn binary_prints_the_model() {
    for name in [
        "dgx",
        "merged-usr",
        "kernel-carried-ready",
        "kernel-crc-refused",
        "crc-exporters-deb13",
        "h200-vm",
        "dmabuf-ready",
        "stats-errors",
    ] {
        support::binary_prints_the_model(name);
    }
}

/// Regeneration writes back what damage to an `expect` file took away:
/// a status, the exit status, a check line, a matrix cell, a counter, a
/// fact; a claim the check does not make loses its text, and a counter
/// line removed stays removed (which counters to hold is the file's).
#[test]
fn regeneration_undoes_damage() {
    /// Text replaced, its first occurrence only.
    type Edits = &'static [(&'static str, &'static str)];
    let cases: [(&str, Edits, Edits); 5] = [
        (
            "dgx",
            &[
                ("exit 0", "exit 1"),
                ("OK   kernel.rust\n", "WARN kernel.rust\n"),
            ],
            &[],
        ),
        (
            "dgx",
            &[("OK   nvidia.p2p\n", ""), ("PIX    PXB", "PXB    PXB")],
            &[],
        ),
        (
            "dgx",
            &[("~ 8 RDMA device(s)", "~ 9 RDMA device(s)")],
            &[(
                "OK   rdma.devices         ~ 8 RDMA device(s)",
                "OK   rdma.devices",
            )],
        ),
        (
            "stats-errors",
            &[
                ("contexts_live 0", "contexts_live 7"),
                ("stat errors_acquire 3\n", ""),
            ],
            &[("stat errors_acquire 3\n", "")],
        ),
        (
            "nv-peer-mem",
            &[("module.loaded false", "module.loaded true")],
            &[],
        ),
    ];
    for (name, damage, kept) in cases {
        let committed = std::fs::read_to_string(support::expect::path(name)).expect("expect");
        let edit = |text: &str, edits: &[(&str, &str)]| {
            edits.iter().fold(text.to_string(), |t, (from, to)| {
                assert!(t.contains(from), "{name}: no '{from}'");
                t.replacen(from, to, 1)
            })
        };
        let report = peermem_doctor::run(&support::model(name, std::path::Path::new("/fixtures")));
        let json: serde_json::Value =
            serde_json::from_str(&peermem_doctor::output::json(&report)).expect("JSON");
        let restored = support::expect::regenerate(&edit(&committed, damage), name, &report, &json);
        assert_eq!(restored, edit(&committed, kept), "{name}: {damage:?}");
    }
}

/// The statuses of a table: `(status, id)` per check line, then the result line.
fn statuses(table: &str) -> (Vec<(String, String)>, Option<String>) {
    let checks = table
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            match (words.next(), words.next()) {
                (Some(s @ ("OK" | "INFO" | "WARN" | "FAIL")), Some(id)) => {
                    Some((s.to_string(), id.to_string()))
                }
                _ => None,
            }
        })
        .collect();
    let result = table
        .lines()
        .find(|l| l.starts_with("Result: "))
        .map(str::to_string);
    (checks, result)
}

/// Checks whose status on the recorded hosts changed on purpose since the
/// recording, `(id, recorded, now, why)`: the recordings stay as the hosts
/// printed them.
const CHANGED_SINCE_RECORDED: [(&str, &str, &str, &str); 2] = [
    (
        "kernel.toolchain",
        "INFO",
        "FAIL",
        "a kernel without Rust gets carried mode, and the hosts lack its toolchain",
    ),
    (
        "kernel.headers",
        "INFO",
        "FAIL",
        "a kernel without Rust gets carried mode, and the hosts lack the kernel's headers",
    ),
];

/// `Result: blocked (5 blocking, 1 warning), exit status 1` without its
/// counts (they follow from the statuses): `blocked`, `exit status 1`.
fn verdict_and_exit(result: &str) -> (String, String) {
    let verdict = result.split_whitespace().nth(1).unwrap_or("").to_string();
    let exit = result.rsplit(", ").next().unwrap_or("").to_string();
    (verdict, exit)
}

/// A real-host fixture says today what the doctor said on that host:
/// `tests/fixtures/<name>/doctor.txt` is its table, recorded there, and
/// every check recorded has the status it had (wording may improve;
/// `expect` holds the findings), or the one [`CHANGED_SINCE_RECORDED`]
/// gives it. Checks added after the recording are held by `expect` alone.
fn statuses_as_recorded_on_the_host(name: &str) {
    let recorded = std::fs::read_to_string(
        support::fixture::fixtures_dir()
            .join(name)
            .join("doctor.txt"),
    )
    .expect("the fixture's doctor.txt");
    let base = std::path::Path::new("/fixtures").join(name);
    let report = peermem_doctor::run(&support::model(name, &base));
    let (now, code) = (
        peermem_doctor::output::human(&report, false),
        report.exit_code(),
    );
    let (mut want, got) = (statuses(&recorded), statuses(&now));
    assert!(!want.0.is_empty(), "no check line in the recording");
    for (status, id) in &mut want.0 {
        if let Some((.., to, _)) = CHANGED_SINCE_RECORDED
            .iter()
            .find(|(c, from, ..)| c == id && from == status)
        {
            *status = to.to_string();
        }
    }
    let got_recorded: Vec<(String, String)> = got
        .0
        .iter()
        .filter(|(_, id)| want.0.iter().any(|(_, w)| w == id))
        .cloned()
        .collect();
    assert_eq!(
        (got_recorded, got.1.as_deref().map(verdict_and_exit)),
        (want.0, want.1.as_deref().map(verdict_and_exit)),
        "the fixture's table differs from the host's:\n{now}"
    );
    assert!(recorded.ends_with(&format!("exit status {code}\n")));
}

#[test]
fn verdict_and_exit_of_a_result_line() {
    assert_eq!(
        verdict_and_exit("Result: blocked (5 blocking, 1 warning), exit status 1"),
        ("blocked".to_string(), "exit status 1".to_string())
    );
}

#[test]
fn h100_vm_statuses_as_recorded_on_the_host() {
    statuses_as_recorded_on_the_host("h100-vm");
}

/// Every check of today's doctor was recorded on the H200 host.
#[test]
fn h200_vm_statuses_as_recorded_on_the_host() {
    statuses_as_recorded_on_the_host("h200-vm");
    let recorded =
        std::fs::read_to_string(support::fixture::fixtures_dir().join("h200-vm/doctor.txt"))
            .expect("h200-vm/doctor.txt");
    let dir = support::build("h200-vm");
    let (now, _) = support::doctor(&["--root", &dir.to_string_lossy()]);
    assert_eq!(
        statuses(&now).0.len(),
        statuses(&recorded).0.len(),
        "a check the host did not run"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--prometheus` on `dmabuf-ready`: valid exposition text (HELP and TYPE
/// before each family's samples, no family twice), the module's counters
/// as debugfs has them, ib_core's per-client counters with their kind.
#[test]
fn prometheus_metrics() {
    let dir = support::build("dmabuf-ready");
    let (text, code) = support::doctor(&["--prometheus", "--root", &dir.to_string_lossy()]);
    assert_eq!(code, 0, "{text}");
    let mut typed = std::collections::BTreeSet::new();
    let mut current = String::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut w = rest.split(' ');
            current = w.next().expect("name").to_string();
            assert!(matches!(w.next(), Some("gauge" | "counter")), "{line}");
            assert!(typed.insert(current.clone()), "{current} twice");
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        let name = line.split(['{', ' ']).next().expect("name");
        assert_eq!(name, current, "sample outside its family: {line}");
        assert!(
            name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'),
            "{line}"
        );
        let value = line.rsplit(' ').next().expect("value");
        assert!(value.parse::<f64>().is_ok(), "{line}");
    }
    for sample in [
        "nvidia_peermem_loaded{version=\"1.0.0\",nvidia_bundled=\"false\"} 1",
        "nvidia_peermem_contexts_live 2",
        "nvidia_peermem_pinned_bytes 134217728",
        "nvidia_peermem_registrations_total 12",
        "nvidia_peermem_errors_total{stage=\"acquire\"} 0",
        "nvidia_peermem_client_mrs_allocated_total{client=\"nv_mem\",kind=\"persistent\"} 12",
        "nvidia_peermem_client_mrs_allocated_total{client=\"nv_mem_fallback\",kind=\"revocable\"} 3",
        "nvidia_peermem_client_bytes_registered_total{client=\"nv_mem\",kind=\"persistent\"} 134217728",
        "nvidia_peermem_client_invalidations_total{client=\"nv_mem_fallback\",kind=\"revocable\"} 2",
        "nvidia_peermem_doctor_check_status{check=\"gdr.path\"} 0",
    ] {
        assert!(text.lines().any(|l| l == sample), "no '{sample}' in\n{text}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
