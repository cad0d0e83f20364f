//! The ELF symbol reader against a file assembled here byte by byte, so each field the reader
//! relies on is written at its documented offset independently of the reader's own constants.

use super::*;

/// One symbol to write: name, st_info, st_other, st_shndx.
struct Sym(&'static str, u8, u8, u16);

const INFO_GLOBAL_FUNC: u8 = (1 << 4) | 2;
const INFO_LOCAL_FUNC: u8 = 2;
const INFO_GLOBAL_OBJECT: u8 = (1 << 4) | 1;

/// Builds an ELF64 LE file: [header][strtab][symtab][section headers: null, strtab, symtab].
fn build_elf(symbols: &[Sym]) -> Vec<u8> {
    let mut strtab = vec![0u8];
    let mut symtab = vec![0u8; 24]; // symbol 0 is the null symbol
    for Sym(name, info, other, shndx) in symbols {
        let name_offset = strtab.len() as u32;
        strtab.extend_from_slice(name.as_bytes());
        strtab.push(0);
        let mut s = [0u8; 24];
        s[0..4].copy_from_slice(&name_offset.to_le_bytes());
        s[4] = *info;
        s[5] = *other;
        s[6..8].copy_from_slice(&shndx.to_le_bytes());
        symtab.extend_from_slice(&s);
    }
    let strtab_at = 64usize;
    let symtab_at = strtab_at + strtab.len();
    let sections_at = symtab_at + symtab.len();

    let mut file = vec![0u8; 64];
    file[0..4].copy_from_slice(&[0x7f, b'E', b'L', b'F']);
    file[4] = 2; // ELFCLASS64
    file[5] = 1; // ELFDATA2LSB
    file[6] = 1; // EV_CURRENT
    file[0x28..0x30].copy_from_slice(&(sections_at as u64).to_le_bytes());
    file[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
    file[0x3c..0x3e].copy_from_slice(&3u16.to_le_bytes());
    file.extend_from_slice(&strtab);
    file.extend_from_slice(&symtab);

    let header = |kind: u32, offset: usize, len: usize, link: u32| {
        let mut h = [0u8; 64];
        h[4..8].copy_from_slice(&kind.to_le_bytes());
        h[24..32].copy_from_slice(&(offset as u64).to_le_bytes());
        h[32..40].copy_from_slice(&(len as u64).to_le_bytes());
        h[40..44].copy_from_slice(&link.to_le_bytes());
        h
    };
    file.extend_from_slice(&[0u8; 64]);
    file.extend_from_slice(&header(3, strtab_at, strtab.len(), 0)); // SHT_STRTAB
    file.extend_from_slice(&header(2, symtab_at, symtab.len(), 1)); // SHT_SYMTAB -> strtab
    file
}

fn sample() -> Vec<u8> {
    build_elf(&[
        Sym("gemv_entry", INFO_GLOBAL_FUNC, STO_CUDA_ENTRY, 1),
        Sym("device_helper", INFO_LOCAL_FUNC, 0, 1),
        Sym("global_not_entry", INFO_GLOBAL_FUNC, 0, 1),
        Sym("undefined_entry", INFO_GLOBAL_FUNC, STO_CUDA_ENTRY, 0),
        Sym("a_table", INFO_GLOBAL_OBJECT, STO_CUDA_ENTRY, 1),
        Sym("another_entry", INFO_GLOBAL_FUNC, STO_CUDA_ENTRY | 0x03, 2),
    ])
}

#[test]
fn lists_only_defined_global_entry_functions() {
    let names = kernel_entry_points(&sample()).expect("valid ELF");
    assert_eq!(names, vec!["another_entry".to_string(), "gemv_entry".to_string()]);
}

#[test]
fn reads_every_symbol_with_its_fields() {
    let syms = symbols(&sample()).expect("valid ELF");
    assert_eq!(syms.len(), 7, "null symbol + 6 written");
    let helper = syms.iter().find(|s| s.name == "device_helper").expect("present");
    assert_eq!((helper.kind, helper.binding, helper.other, helper.section), (2, 0, 0, 1));
}

#[test]
fn rejects_bad_magic_and_wrong_class() {
    let mut file = sample();
    file[1] = b'X';
    assert_eq!(symbols(&file), Err(ElfError::NotElf));
    let mut file = sample();
    file[4] = 1; // ELFCLASS32
    assert!(matches!(symbols(&file), Err(ElfError::Unsupported { .. })));
    assert_eq!(symbols(&[0x7f, b'E']), Err(ElfError::NotElf));
}

#[test]
fn every_truncation_is_an_error_not_a_panic() {
    let file = sample();
    for len in 0..file.len() {
        assert!(symbols(&file[..len]).is_err(), "prefix of {len} bytes accepted");
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]
    /// Arbitrary corruption of a valid file never panics (it may still parse).
    #[test]
    fn random_byte_flips_never_panic(flips in proptest::collection::vec((0usize..4096, 1u8..=255), 1..8)) {
        let mut file = sample();
        for (at, mask) in flips {
            let i = at % file.len();
            file[i] ^= mask;
        }
        let _ = symbols(&file);
    }
}
