// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! One test per fixture under `tests/fixtures/`: build the tree, run the
//! doctor (library and binary), compare with the fixture's `expect` file.

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
    dgx => "dgx",
    inbox => "inbox",
    h100_vm => "h100-vm",
    h200_vm => "h200-vm",
    iommu_passthrough => "iommu-passthrough",
    kernel_config_unreadable => "kernel-config-unreadable",
    kernel_crc_refused => "kernel-crc-refused",
    kernel_mok_not_enrolled => "kernel-mok-not-enrolled",
    kernel_modversions_dwarf => "kernel-modversions-dwarf",
    kernel_modversions_genksyms => "kernel-modversions-genksyms",
    kernel_no_crates => "kernel-no-crates",
    kernel_no_modules => "kernel-no-modules",
    kernel_rust_off => "kernel-rust-off",
    kernel_sig_signed => "kernel-sig-signed",
    kernel_sig_unsigned => "kernel-sig-unsigned",
    kernel_wrong_toolchain => "kernel-wrong-toolchain",
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
    stats_errors => "stats-errors",
    sys => "sys",
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

/// A real-host fixture says today what the doctor said on that host:
/// `tests/fixtures/<name>/doctor.txt` is its table, recorded there, and
/// every check recorded has the status it had (wording may improve;
/// `expect` holds the findings). Checks added after the recording are
/// held by `expect` alone.
fn statuses_as_recorded_on_the_host(name: &str) {
    let recorded = std::fs::read_to_string(
        support::fixture::fixtures_dir()
            .join(name)
            .join("doctor.txt"),
    )
    .expect("the fixture's doctor.txt");
    let dir = support::build(name);
    let (now, code) = support::doctor(&["--root", &dir.to_string_lossy()]);
    let (want, got) = (statuses(&recorded), statuses(&now));
    assert!(!want.0.is_empty(), "no check line in the recording");
    let got_recorded: Vec<(String, String)> = got
        .0
        .iter()
        .filter(|(_, id)| want.0.iter().any(|(_, w)| w == id))
        .cloned()
        .collect();
    assert_eq!(
        (got_recorded, got.1),
        want,
        "the fixture's table differs from the host's:\n{now}"
    );
    assert!(recorded.ends_with(&format!("exit status {code}\n")));
    let _ = std::fs::remove_dir_all(&dir);
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
