//! Load tier 1: SASS that `build.rs` compiled and embedded in the binary, accepted only when it
//! was built from the very source text this binary carries.

mod generated {
    include!(concat!(env!("OUT_DIR"), "/embedded_kernels.rs"));
}

/// One embedded cubin.
#[derive(Clone, Copy, Debug)]
pub struct EmbeddedCubin {
    /// The architecture it was compiled for, `sm_XX` as XX.
    pub arch: u32,
    pub cubin: &'static [u8],
}

/// The compiler that built the embedded code, or "none".
pub fn compiler() -> &'static str {
    generated::COMPILER
}

/// Every embedded architecture, ascending.
pub fn archs() -> Vec<u32> {
    let mut archs: Vec<u32> = generated::CUBINS.iter().map(|(arch, _)| *arch).collect();
    archs.sort_unstable();
    archs
}

/// Whether SASS built for `code_arch` runs on a `device_arch` GPU: same major version and an
/// equal or lower minor one (NVIDIA's cubin compatibility rule), except that code for an
/// arch-specific target (`sm_90a`: what build.rs compiles for 90, registry::compile_target) runs
/// on exactly that architecture.
pub fn runs_on(code_arch: u32, device_arch: u32) -> bool {
    if super::registry::compile_target(code_arch).ends_with('a') {
        return code_arch == device_arch;
    }
    code_arch / 10 == device_arch / 10 && code_arch % 10 <= device_arch % 10
}

/// The best embedded cubin for `device_arch` (exact match, else the highest compatible minor),
/// provided it was built from the source whose SHA-256 is `source_sha256_hex`. `Err` says why
/// none applies, for the load report.
pub fn select(device_arch: u32, source_sha256_hex: &str) -> Result<EmbeddedCubin, String> {
    select_from(generated::CUBINS, generated::SOURCE_SHA256, device_arch, source_sha256_hex)
}

fn select_from(
    cubins: &'static [(u32, &'static [u8])],
    embedded_hash: &str,
    device_arch: u32,
    source_sha256_hex: &str,
) -> Result<EmbeddedCubin, String> {
    if cubins.is_empty() {
        return Err("no precompiled kernels embedded (built without a CUDA compiler)".into());
    }
    if embedded_hash != source_sha256_hex {
        return Err(format!(
            "embedded kernels were built from other source (sha256 {embedded_hash}, this binary carries {source_sha256_hex})"
        ));
    }
    cubins
        .iter()
        .filter(|(arch, _)| runs_on(*arch, device_arch))
        .max_by_key(|(arch, _)| *arch)
        .map(|&(arch, cubin)| EmbeddedCubin { arch, cubin })
        .ok_or_else(|| {
            let have: Vec<String> = cubins.iter().map(|(a, _)| format!("sm_{a}")).collect();
            format!("no embedded SASS runs on sm_{device_arch} (embedded: {})", have.join(", "))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FAKE: &[(u32, &[u8])] = &[(80, b"a"), (86, b"b"), (89, b"c"), (90, b"d"), (120, b"e")];

    #[test]
    fn compatibility_is_same_major_lower_or_equal_minor() {
        assert!(runs_on(80, 86) && runs_on(86, 86) && runs_on(86, 89) && runs_on(90, 90));
        assert!(!runs_on(86, 80) && !runs_on(80, 90) && !runs_on(90, 100) && !runs_on(100, 120));
        // sm_90a code (the wgmma kernels) runs on 9.0 only, whatever a later 9.x minor may be.
        assert!(!runs_on(90, 91));
    }

    #[test]
    fn picks_exact_then_highest_compatible_minor() {
        let pick = |dev| select_from(FAKE, "h", dev, "h").map(|c| c.arch);
        assert_eq!(pick(90), Ok(90));
        assert_eq!(pick(86), Ok(86));
        assert_eq!(pick(87), Ok(86));
        assert_eq!(pick(121), Ok(120));
        assert!(pick(75).is_err());
        assert!(pick(100).is_err());
    }

    /// What build.rs embedded in this very test binary (nothing unless a CUDA compiler was found)
    /// was built from the source the binary carries and exports every registered entry point.
    #[test]
    fn embedded_cubins_match_this_source_and_export_every_entry_point() {
        if generated::CUBINS.is_empty() {
            println!("no embedded cubins in this build (no CUDA compiler at build time)");
            return;
        }
        let source = crate::cuda::registry::combined_source();
        let hash = crate::cuda::cache::hex(&crate::cuda::cache::sha256(source.as_bytes()));
        assert_eq!(generated::SOURCE_SHA256, hash, "build.rs hashed different source text");
        for arch in archs() {
            let picked = select(arch, &hash).unwrap_or_else(|e| panic!("sm_{arch}: {e}"));
            assert_eq!(picked.arch, arch, "every embedded arch is an exact match for itself");
            let found = crate::cuda::elf::kernel_entry_points(picked.cubin)
                .unwrap_or_else(|e| panic!("sm_{arch} cubin: {e}"));
            for name in crate::cuda::registry::entry_points() {
                assert!(found.iter().any(|f| f == name), "sm_{arch}: '{name}' missing: {found:?}");
            }
        }
    }

    #[test]
    fn other_source_or_nothing_embedded_is_refused() {
        let refused = select_from(FAKE, "built-from", 90, "carried").expect_err("hash mismatch");
        assert!(refused.contains("other source"), "{refused}");
        assert!(select_from(&[], "h", 90, "h").is_err());
    }
}
