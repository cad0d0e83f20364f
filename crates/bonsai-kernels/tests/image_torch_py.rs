//! Runs the CPU tests of `scripts/reference/image_torch.py` (the PyTorch side of issue #6's
//! comparison) with its numpy stand-in backend, so CI checks the manifest contract, the error
//! and target arithmetic and the report from both ends. Needs python3 with numpy; where either
//! is missing the test says so on stderr and passes (the Rust side is covered by
//! `verify::image_torch::tests`).

use std::path::Path;
use std::process::Command;

#[test]
fn image_torch_py_unit_tests_pass() {
    let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/reference");
    let numpy = Command::new("python3").args(["-c", "import numpy"]).output();
    if !numpy.is_ok_and(|o| o.status.success()) {
        eprintln!("SKIPPED: python3 with numpy not found; scripts/reference/test_image_torch.py not run");
        return;
    }
    let out = Command::new("python3")
        .args(["-m", "unittest", "discover", "-s"])
        .arg(&scripts)
        .args(["-p", "test_image_torch.py"])
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("run python3");
    let log = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "test_image_torch.py failed:\n{log}");
    assert!(log.contains("OK"), "{log}");
}
