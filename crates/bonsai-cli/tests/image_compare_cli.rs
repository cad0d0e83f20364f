//! `bonsai kernels image-compare` as a user runs it, without a GPU: `--list` shows the registered
//! cases and their file sizes, bad arguments fail with one line, and a dump without a driver
//! fails with the one-line driver message.

use std::process::Command;

use bonsai_kernels::cuda::driver_present;

const BIN: &str = env!("CARGO_BIN_EXE_bonsai");

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(BIN).arg("kernels").arg("image-compare").args(args).output().expect("run bonsai");
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn list_shows_every_case_with_its_size() {
    let (code, stdout, stderr) = run(&["--list"]);
    assert_eq!(code, Some(0), "{stderr}");
    for name in ["group_norm_c384_512x512", "silu_c96_512x512", "upsample_nearest2x_c384_256x256", "im2col_c96_512x512"] {
        assert!(stdout.contains(name), "{name} missing:\n{stdout}");
    }
    assert!(stdout.lines().last().is_some_and(|l| l.starts_with("total ")), "{stdout}");

    let (code, stdout, _) = run(&["--list", "--cases", "silu"]);
    assert_eq!(code, Some(0));
    let cases: Vec<&str> = stdout.lines().filter(|l| !l.starts_with("total")).collect();
    assert!(!cases.is_empty() && cases.iter().all(|l| l.starts_with("silu_")), "{stdout}");

    let (_, stdout, _) = run(&["--list", "--max-case-bytes", "20000000"]);
    assert!(stdout.contains("group_norm_c384_512x512") && stdout.contains("skipped"), "{stdout}");
}

#[test]
fn bad_arguments_fail_with_one_line() {
    for (args, expected) in [
        (&["--list", "--cases", "nope"][..], "error: image-compare: no case or op named \"nope\""),
        (&[][..], "error: image-compare: --dump DIR is required"),
    ] {
        let (code, _, stderr) = run(args);
        assert_eq!(code, Some(1), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with(expected), "{args:?}: {stderr}");
    }
}

#[test]
fn dump_without_a_driver_fails_with_one_line() {
    if driver_present() {
        println!("a CUDA driver is present: nothing to check");
        return;
    }
    let dir = std::env::temp_dir().join(format!("bonsai-image-compare-cli-{}", std::process::id()));
    let (code, _, stderr) = run(&["--dump", dir.to_str().expect("utf-8 temp dir"), "--cases", "silu_c384_64x64"]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("no CUDA driver found"), "{stderr}");
}
