// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! The command line: usage errors, help, and trees that are empty, broken
//! or hostile (missing files are findings, never panics).

use std::fs;
use std::os::unix::fs::symlink;

use crate::support::doctor;

/// Runs the binary and returns stdout, stderr and the exit status.
fn run(args: &[&str]) -> (String, String, i32) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_nvidia-peermem-doctor"))
        .args(args)
        .output()
        .expect("run the doctor");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

/// A fresh scratch directory.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir =
        std::env::temp_dir().join(format!("peermem-doctor-cli-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

#[test]
fn help_and_version() {
    let (out, _, code) = run(&["--help"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("usage: nvidia-peermem-doctor [--root DIR] [--json | --prometheus]"));
    let (out, _, code) = run(&["-V"]);
    assert_eq!(
        (out.as_str(), code),
        (
            concat!("nvidia-peermem-doctor ", env!("CARGO_PKG_VERSION"), "\n"),
            0
        )
    );
}

#[test]
fn usage_errors_exit_2() {
    let file = scratch("usage").join("a-file");
    fs::write(&file, "x").expect("write");
    let file = file.to_string_lossy().into_owned();
    for args in [
        vec!["--bogus"],
        vec!["--root"],
        vec!["--root="],
        vec!["--json", "extra"],
        vec!["--root", "/nonexistent/peermem-doctor"],
        vec!["--root", file.as_str()],
        vec!["--json", "--prometheus"],
        vec!["--cuda-probe", "--json"],
        vec!["--cuda-probe", "--root", "/tmp"],
    ] {
        let (out, err, code) = run(&args);
        assert_eq!(code, 2, "{args:?}: stdout {out} stderr {err}");
        assert!(out.is_empty(), "{args:?} printed a report");
        assert!(
            err.starts_with("nvidia-peermem-doctor: "),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn empty_root_is_findings_not_a_panic() {
    let dir = scratch("empty");
    let root = dir.to_string_lossy().into_owned();
    let (text, code) = doctor(&["--root", &root]);
    assert_eq!(code, 1, "{text}");
    for line in [
        "FAIL   module.loaded         nvidia_peermem is not loaded (kernel release unknown)",
        "FAIL   nvidia.driver         the NVIDIA driver (nvidia.ko) is not loaded",
        "INFO   nvidia.p2p            /proc/kallsyms unreadable",
        "INFO   conflict.bundled      kernel release unknown",
        "FAIL   gdr.detection         peer memory detected by NCCL: no, by UCX: no",
    ] {
        assert!(text.contains(line), "missing '{line}' in\n{text}");
    }
    let (text, code) = doctor(&["--json", "--root", &root]);
    assert_eq!(code, 1);
    let doc: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(doc["verdict"], "blocked");
    assert_eq!(doc.get("stats"), Some(&serde_json::Value::Null));
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn broken_tree_does_not_panic() {
    let dir = scratch("broken");
    let w = |p: &str, body: &[u8]| {
        let path = dir.join(p);
        fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        fs::write(path, body).expect("write");
    };
    // Binary junk where text is expected, truncated and odd values.
    w(
        "proc/kallsyms",
        b"\xff\xfe garbage\nffff T\n\n  \t\n0 T ib_register_peer_memory_client [\n",
    );
    w("proc/sys/kernel/osrelease", b"\n");
    w("proc/cmdline", b"\xc3\x28 iommu=");
    w("sys/module/nvidia_peermem/version", b"");
    w("sys/module/nvidia/version", b"");
    w(
        "sys/kernel/debug/nvidia_peermem/stats",
        b"\x00\x01\x02\nname\nname 1 2\n",
    );
    let dev = "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0";
    w(&format!("{dev}/vendor"), b"0x10de");
    w(&format!("{dev}/class"), b"0x030000");
    w(&format!("{dev}/numa_node"), b"-7");
    w(&format!("{dev}/resource"), b"0x1 0x0 0x0\n0xzz 0x10\n");
    w(&format!("{dev}/config"), &[0xff; 0x103]);
    w("sys/devices/pci0000:00/0000:00:01.0/config", b"");
    // The bus lists the GPU, a link loop, a dangling link and a plain file.
    let bus = dir.join("sys/bus/pci/devices");
    fs::create_dir_all(&bus).expect("mkdir");
    symlink(
        "../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0",
        bus.join("0000:01:00.0"),
    )
    .expect("link");
    symlink("0000:02:00.0", bus.join("0000:02:00.0")).expect("link");
    symlink("../../../devices/nowhere", bus.join("0000:03:00.0")).expect("link");
    fs::write(bus.join("0000:04:00.0"), "not a link").expect("write");
    // An RDMA device whose device link escapes the root with an absolute path.
    let ib = dir.join("sys/class/infiniband/mlx5_0");
    fs::create_dir_all(&ib).expect("mkdir");
    symlink("/../../../../etc", ib.join("device")).expect("link");
    // A module tree whose `build` link loops.
    let modules = dir.join("lib/modules/x");
    fs::create_dir_all(&modules).expect("mkdir");
    symlink(".", modules.join("build")).expect("link");
    w(
        "etc/modprobe.d/x.conf",
        b"install\ninstall nvidia_peermem\nblacklist\nsoftdep\n\\\n",
    );

    let root = dir.to_string_lossy().into_owned();
    for args in [
        vec!["--root", root.as_str()],
        vec!["--json", "--verbose", "--root", root.as_str()],
    ] {
        let (out, err, code) = run(&args);
        assert!(code == 0 || code == 1, "{args:?}: exit {code}\n{err}");
        assert!(err.is_empty(), "stderr: {err}");
        if args.contains(&"--json") {
            serde_json::from_str::<serde_json::Value>(&out).expect("JSON of a broken tree");
        } else {
            // Empty version files: loaded, with no version to show.
            for line in [
                "OK     module.loaded         nvidia_peermem is loaded\n",
                "OK     nvidia.driver         NVIDIA driver is loaded\n",
            ] {
                assert!(out.contains(line), "no '{line}' in\n{out}");
            }
        }
    }
    let _ = fs::remove_dir_all(&dir);
}

/// Each usage error says what is wrong on its first line, then the usage.
#[test]
fn usage_error_messages() {
    for (args, message) in [
        (&["--bogus"][..], "invalid option '--bogus'"),
        (&["-x"], "invalid option '-x'"),
        (&["-vx"], "invalid option '-x'"),
        (&["--json", "extra"], "unexpected argument \"extra\""),
        (&["--root"], "missing argument for option '--root'"),
        (&["--root="], "--root needs a directory"),
        (&["--root", ""], "--root needs a directory"),
        (&["--root", "/a", "--root", "/b"], "--root given twice"),
        (
            &["--json", "--prometheus"],
            "--json and --prometheus exclude each other",
        ),
        (
            &["--prometheus", "--json"],
            "--json and --prometheus exclude each other",
        ),
        (
            &["--cuda-probe", "--verbose"],
            "--cuda-probe takes no other option",
        ),
        (
            &["--verbose=yes"],
            "unexpected argument for option '--verbose': \"yes\"",
        ),
    ] {
        let (out, err, code) = run(args);
        assert_eq!((out.as_str(), code), ("", 2), "{args:?}");
        let mut lines = err.lines();
        assert_eq!(
            lines.next(),
            Some(format!("nvidia-peermem-doctor: {message}").as_str()),
            "{args:?}"
        );
        assert_eq!(
            lines.next(),
            Some("usage: nvidia-peermem-doctor [--root DIR] [--json | --prometheus] [--verbose]"),
            "{args:?}"
        );
    }
}

/// Options as lexopt takes them: `--root=DIR`, short flags together, any order.
#[test]
fn option_forms() {
    let dir = scratch("forms");
    let root = dir.to_string_lossy().into_owned();
    let (table, code) = doctor(&["--root", &root]);
    assert_eq!(code, 1);
    assert_eq!(doctor(&[&format!("--root={root}")]), (table, 1));
    let (verbose, _) = doctor(&["--verbose", "--root", &root]);
    assert_eq!(doctor(&["--root", &root, "-v"]), (verbose, 1));
    let (out, _, code) = run(&["-vV"]);
    assert_eq!(
        (out.as_str(), code),
        (
            concat!("nvidia-peermem-doctor ", env!("CARGO_PKG_VERSION"), "\n"),
            0
        )
    );
    let _ = fs::remove_dir_all(&dir);
}

/// A root whose name is not UTF-8 is a root like any other (the
/// hand-written parser read arguments as strings and panicked).
#[test]
fn root_not_utf8() {
    use std::os::unix::ffi::OsStrExt;
    let dir = scratch("not-utf8").join(std::ffi::OsStr::from_bytes(b"root-\xff"));
    fs::create_dir_all(&dir).expect("mkdir");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_nvidia-peermem-doctor"))
        .arg("--root")
        .arg(&dir)
        .output()
        .expect("run the doctor");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("nvidia-peermem-doctor ") && text.contains("root-\u{fffd})\n"),
        "{text}"
    );
    let _ = fs::remove_dir_all(dir.parent().expect("scratch"));
}

/// A reader that went away (`nvidia-peermem-doctor | head -1`): no panic,
/// nothing on stderr, and the exit status is still the verdict's.
#[test]
fn closed_stdout_is_not_a_panic() {
    let dir = scratch("pipe");
    let root = dir.to_string_lossy().into_owned();
    let bin = env!("CARGO_BIN_EXE_nvidia-peermem-doctor");
    for args in ["--json", "--verbose"] {
        // `true` exits at once; the doctor writes half a second later, into a pipe without a reader.
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(r#"(sleep 0.5; "$0" --root "$1" $2; echo "rc=$?" >&2) | true"#)
            .args([bin, root.as_str(), args])
            .output()
            .expect("run sh");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim(), "rc=1", "{args}: {err}");
    }
    let _ = fs::remove_dir_all(&dir);
}

/// A captured tree whose `cuda-probe.txt` does not parse: exit 2, and the
/// error names the file and the line.
#[test]
fn bad_cuda_record_is_a_usage_error() {
    let dir = scratch("cuda-record");
    fs::write(
        dir.join("cuda-probe.txt"),
        "library libcuda.so.1\ngpu 0000:00:06.0 dmabuf=maybe\n",
    )
    .expect("write");
    let (out, err, code) = run(&["--root", &dir.to_string_lossy()]);
    assert_eq!(code, 2, "{out}");
    assert!(out.is_empty());
    assert!(
        err.contains("/cuda-probe.txt: line 2: cannot parse 'gpu 0000:00:06.0 dmabuf=maybe'"),
        "{err}"
    );
    let _ = fs::remove_dir_all(&dir);
}

/// `--cuda-probe` prints a record the doctor reads back, whether or not
/// this machine has libcuda (the build host has none: `library none`).
#[test]
fn cuda_probe_prints_a_record() {
    let (out, err, code) = run(&["--cuda-probe"]);
    assert_eq!(code, 0, "{err}");
    let answer = peermem_doctor::host::cuda::CudaAnswer::parse(&out).expect("a record");
    assert_eq!(answer.record(), out);
    assert_ne!(answer, peermem_doctor::host::cuda::CudaAnswer::NotAsked);
}

/// `--json` has one member or item per line, as `flatten` in
/// `tests/guest/scenarios/60-doctor.sh` reads it: two spaces per level,
/// `"key": value` in objects, `{` or `[` last on the line that opens a
/// nested one, `{}` and `[]` for empty ones, a newline at the end.
#[test]
fn json_has_one_member_per_line() {
    let dir = crate::support::build("pix");
    let (text, _) = doctor(&["--json", "--root", &dir.to_string_lossy()]);
    assert!(text.ends_with("}\n"), "{text}");
    // Whether each open level is an object.
    let mut open: Vec<bool> = Vec::new();
    for line in text.lines() {
        let body = line.trim_start_matches(' ');
        let body = body.strip_suffix(',').unwrap_or(body);
        if body == "}" || body == "]" {
            assert_eq!(open.pop(), Some(body == "}"), "{line}");
            assert_eq!(
                line.len() - line.trim_start().len(),
                2 * open.len(),
                "{line}"
            );
            continue;
        }
        assert_eq!(
            line.len() - line.trim_start().len(),
            2 * open.len(),
            "{line}"
        );
        let value = if open.last() == Some(&true) {
            let (key, value) = body.split_once("\": ").unwrap_or_else(|| panic!("{line}"));
            assert!(key.starts_with('"') && !key[1..].contains('"'), "{line}");
            value
        } else {
            body
        };
        match value {
            "{" => open.push(true),
            "[" => open.push(false),
            _ => {
                let v: serde_json::Value =
                    serde_json::from_str(value).unwrap_or_else(|e| panic!("{line}: {e}"));
                assert!(
                    !(v.is_object() || v.is_array()) || value == "{}" || value == "[]",
                    "{line}"
                );
            }
        }
    }
    assert!(open.is_empty(), "unbalanced:\n{text}");
    let _ = fs::remove_dir_all(&dir);
}
