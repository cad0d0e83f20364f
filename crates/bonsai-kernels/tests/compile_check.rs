//! CI compile check (tier T1b): the whole kernel library compiles with NVRTC to a cubin for each
//! architecture in `COMPILE_CHECK_ARCHS` with an EMPTY log (NVRTC has no -Werror, so any message
//! at all counts as a failure), and every registered entry point is a kernel symbol in the cubin.
//!
//! NVRTC is loaded dynamically (LD_LIBRARY_PATH must reach libnvrtc.so.13). Without it the tests
//! print "SKIPPED: NVRTC not found" and pass, unless BONSAI_REQUIRE_NVRTC=1 (CI), where they fail.

use bonsai_kernels::cuda::compile::{Nvcc, Nvrtc};
use bonsai_kernels::cuda::elf::kernel_entry_points;
use bonsai_kernels::cuda::library::{combined_source, entry_points};
use bonsai_kernels::cuda::KernelError;

/// One architecture per distinct compile of the library: the three preprocessor paths of
/// ptx.cuh (before sm_90: no griddepcontrol or bulk prefetch; sm_90a: wgmma; sm_90 and later
/// without wgmma: Blackwell) and the ptxas families of the data-centre and newest consumer parts:
/// sm_80 (A100), sm_90 (compiled as sm_90a, H100 / H200), sm_100 (B200) and sm_120 (RTX 50).
/// sm_86 (RTX 30) and sm_89 (RTX 40) are left out: the same source and instructions as sm_80, so
/// only a message their own ptxas back ends alone would give goes unseen here, against about two
/// minutes of a two-core CI run per whole-library compile (build.rs embeds and so compiles both
/// wherever nvcc is present).
const COMPILE_CHECK_ARCHS: &[u32] = &[80, 90, 100, 120];
/// Set to 1 where a missing NVRTC must fail the check instead of skipping it.
const REQUIRE_ENV: &str = "BONSAI_REQUIRE_NVRTC";

/// NVRTC, or None after printing why the check is skipped; panics when it is required.
fn nvrtc_or_skip() -> Option<Nvrtc> {
    if !Nvrtc::is_present() {
        if std::env::var(REQUIRE_ENV).is_ok_and(|v| v == "1") {
            panic!(
                "{REQUIRE_ENV}=1 but NVRTC (libnvrtc.so.13) is not loadable: check LD_LIBRARY_PATH"
            );
        }
        println!("SKIPPED: NVRTC not found");
        return None;
    }
    Some(Nvrtc::open().expect("NVRTC loads but does not answer nvrtcVersion"))
}

#[test]
fn library_compiles_without_any_message_and_exports_every_entry_point() {
    let Some(nvrtc) = nvrtc_or_skip() else { return };
    let source = combined_source();
    let expected: Vec<&str> = entry_points().collect();
    assert!(!expected.is_empty(), "the registry lists no entry point");
    // One thread per architecture: NVRTC programs are independent, and the full library takes
    // seconds of ptxas time per architecture.
    let compiled: Vec<_> = std::thread::scope(|scope| {
        let jobs: Vec<_> = COMPILE_CHECK_ARCHS
            .iter()
            .map(|&arch| {
                let (nvrtc, source) = (&nvrtc, &source);
                scope.spawn(move || (arch, nvrtc.compile(source, arch)))
            })
            .collect();
        jobs.into_iter().map(|job| job.join().expect("compile thread panicked")).collect()
    });
    for (arch, result) in compiled {
        let out = result.unwrap_or_else(|e| panic!("{} for sm_{arch}: {e}", nvrtc.identity()));
        assert!(
            out.log.is_empty(),
            "sm_{arch}: NVRTC printed messages (warnings count as errors):\n{}",
            out.log
        );
        let found =
            kernel_entry_points(&out.cubin).unwrap_or_else(|e| panic!("sm_{arch} cubin: {e}"));
        for name in &expected {
            assert!(
                found.iter().any(|f| f == name),
                "sm_{arch}: entry point '{name}' missing; cubin has {found:?}"
            );
        }
        println!("sm_{arch}: {} bytes, {} entry points", out.cubin.len(), found.len());
    }
}

#[test]
fn check_fails_on_a_warning_and_on_an_error() {
    let Some(nvrtc) = nvrtc_or_skip() else { return };
    // A set-but-unused variable: valid code that NVRTC warns about; the check above must see a log.
    let warns = "extern \"C\" __global__ void warns(int* out) { int unused = 3; out[0] = 1; }";
    let out = nvrtc.compile(warns, 90).expect("a warning is not a compile failure");
    assert!(
        !out.log.is_empty(),
        "NVRTC gave no message for an unused variable: the empty-log check would be blind"
    );

    let broken = "extern \"C\" __global__ void broken(int* out) { out[0] = undeclared_name; }";
    match nvrtc.compile(broken, 90) {
        Err(KernelError::Compile { log, arch: 90, .. }) => {
            assert!(
                log.contains("undeclared_name"),
                "the compile error does not carry the log: {log}"
            )
        }
        other => panic!("a broken source compiled: {:?}", other.map(|o| o.log)),
    }
}

/// The run-time nvcc tier's compile path (the same flags build.rs uses, -Werror included), where
/// an nvcc is found through BONSAI_NVCC or PATH; skipped otherwise (NVRTC is CI's requirement).
#[test]
fn nvcc_tier_compiles_the_library_and_exports_every_entry_point() {
    let config = bonsai_kernels::Config::from_env(None).expect("the test environment's configuration");
    let Some(program) = Nvcc::find(&config.nvcc) else {
        println!("SKIPPED: no nvcc (set BONSAI_NVCC or put nvcc on PATH)");
        return;
    };
    let nvcc = Nvcc::open(&program).unwrap_or_else(|e| panic!("{}: {e}", program.display()));
    let source = combined_source();
    for &arch in COMPILE_CHECK_ARCHS {
        let out = nvcc.compile(&source, arch).unwrap_or_else(|e| panic!("sm_{arch}: {e}"));
        let found = kernel_entry_points(&out.cubin).unwrap_or_else(|e| panic!("sm_{arch}: {e}"));
        for name in entry_points() {
            assert!(found.iter().any(|f| f == name), "sm_{arch}: '{name}' missing: {found:?}");
        }
    }
    let broken = "extern \"C\" __global__ void broken(int* out) { out[0] = undeclared_name; }";
    assert!(
        matches!(nvcc.compile(broken, 90), Err(KernelError::Compile { ref log, .. }) if log.contains("undeclared_name")),
        "nvcc accepted a broken source or lost its log"
    );
}
