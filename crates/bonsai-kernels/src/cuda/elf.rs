//! A small reader for the symbol table of a cubin (an ELF64 little-endian file), enough to list
//! the kernel entry points a compile produced without loading it on a GPU. Used by the CI compile
//! check; every offset is bounds-checked, so a malformed file is an error, never a panic.

/// ELF identification bytes every file starts with.
const ELF_MAGIC: [u8; 4] = [0x7f, b'E', b'L', b'F'];
/// `e_ident[EI_CLASS]` of a 64-bit file.
const ELF_CLASS_64: u8 = 2;
/// `e_ident[EI_DATA]` of a little-endian file.
const ELF_DATA_LE: u8 = 1;
/// Size of the ELF64 file header.
const FILE_HEADER_LEN: usize = 64;
/// Size of one ELF64 section header.
const SECTION_HEADER_LEN: usize = 64;
/// Size of one ELF64 symbol.
const SYMBOL_LEN: usize = 24;
/// Section type of a symbol table.
const SHT_SYMTAB: u32 = 2;
/// Symbol type of a function.
const STT_FUNC: u8 = 2;
/// Symbol binding of a global symbol.
const STB_GLOBAL: u8 = 1;
/// Section index of an undefined symbol.
const SHN_UNDEF: u16 = 0;
/// NVIDIA's `st_other` bit marking a kernel entry point (`__global__`), as opposed to a
/// device function that happens to be global.
pub const STO_CUDA_ENTRY: u8 = 0x10;

/// Why a cubin's symbols could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ElfError {
    #[error("not an ELF file (bad magic)")]
    NotElf,
    #[error("unsupported ELF variant: {what}")]
    Unsupported { what: &'static str },
    #[error("truncated ELF file: {what} lies outside the {len_bytes} bytes")]
    Truncated { what: &'static str, len_bytes: usize },
    #[error("ELF symbol name at string offset {offset} is not valid UTF-8 or not terminated")]
    BadName { offset: usize },
}

/// One entry of the symbol table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElfSymbol {
    pub name: String,
    /// `STT_*`, the low four bits of `st_info`.
    pub kind: u8,
    /// `STB_*`, the high four bits of `st_info`.
    pub binding: u8,
    /// `st_other`; NVIDIA keeps the entry-point flag here.
    pub other: u8,
    /// `st_shndx`, 0 for undefined symbols.
    pub section: u16,
}

impl ElfSymbol {
    /// True for a defined, global `__global__` function: what `cuModuleGetFunction` can find.
    pub fn is_kernel_entry(&self) -> bool {
        self.kind == STT_FUNC
            && self.binding == STB_GLOBAL
            && self.section != SHN_UNDEF
            && self.other & STO_CUDA_ENTRY != 0
    }
}

/// Bounds-checked little-endian reads from the file.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl Reader<'_> {
    fn slice(&self, start: usize, len: usize, what: &'static str) -> Result<&[u8], ElfError> {
        start
            .checked_add(len)
            .and_then(|end| self.bytes.get(start..end))
            .ok_or(ElfError::Truncated { what, len_bytes: self.bytes.len() })
    }
    fn u16_at(&self, at: usize, what: &'static str) -> Result<u16, ElfError> {
        let b = self.slice(at, 2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32_at(&self, at: usize, what: &'static str) -> Result<u32, ElfError> {
        let b = self.slice(at, 4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn usize_at(&self, at: usize, what: &'static str) -> Result<usize, ElfError> {
        let b = self.slice(at, 8, what)?;
        let mut word = [0u8; 8];
        word.copy_from_slice(b);
        usize::try_from(u64::from_le_bytes(word))
            .map_err(|_| ElfError::Truncated { what, len_bytes: self.bytes.len() })
    }
}

/// A section's file range and link, as far as the symbol reader needs it.
struct Section {
    kind: u32,
    offset: usize,
    len_bytes: usize,
    link: u32,
}

fn section(r: &Reader, table: usize, index: usize) -> Result<Section, ElfError> {
    let at = index
        .checked_mul(SECTION_HEADER_LEN)
        .and_then(|o| o.checked_add(table))
        .ok_or(ElfError::Truncated { what: "section header", len_bytes: r.bytes.len() })?;
    r.slice(at, SECTION_HEADER_LEN, "section header")?;
    Ok(Section {
        kind: r.u32_at(at + 4, "sh_type")?,
        offset: r.usize_at(at + 24, "sh_offset")?,
        len_bytes: r.usize_at(at + 32, "sh_size")?,
        link: r.u32_at(at + 40, "sh_link")?,
    })
}

fn name_at(strings: &[u8], offset: usize) -> Result<String, ElfError> {
    let tail = strings.get(offset..).ok_or(ElfError::BadName { offset })?;
    let end = tail.iter().position(|&b| b == 0).ok_or(ElfError::BadName { offset })?;
    std::str::from_utf8(&tail[..end]).map(str::to_owned).map_err(|_| ElfError::BadName { offset })
}

/// Every symbol of every symbol table in the file, in file order.
pub fn symbols(bytes: &[u8]) -> Result<Vec<ElfSymbol>, ElfError> {
    let r = Reader { bytes };
    let ident = r.slice(0, FILE_HEADER_LEN, "file header").map_err(|_| ElfError::NotElf)?;
    if ident[..4] != ELF_MAGIC {
        return Err(ElfError::NotElf);
    }
    if ident[4] != ELF_CLASS_64 {
        return Err(ElfError::Unsupported { what: "not a 64-bit ELF" });
    }
    if ident[5] != ELF_DATA_LE {
        return Err(ElfError::Unsupported { what: "not little-endian" });
    }
    let table = r.usize_at(0x28, "e_shoff")?;
    if usize::from(r.u16_at(0x3a, "e_shentsize")?) != SECTION_HEADER_LEN {
        return Err(ElfError::Unsupported { what: "section header size is not 64" });
    }
    let count = usize::from(r.u16_at(0x3c, "e_shnum")?);

    let mut out = Vec::new();
    for index in 0..count {
        let symtab = section(&r, table, index)?;
        if symtab.kind != SHT_SYMTAB {
            continue;
        }
        let strtab = section(&r, table, symtab.link as usize)?;
        let strings = r.slice(strtab.offset, strtab.len_bytes, "symbol string table")?;
        let entries = r.slice(symtab.offset, symtab.len_bytes, "symbol table")?;
        for sym in entries.chunks_exact(SYMBOL_LEN) {
            let sym_reader = Reader { bytes: sym };
            let name_offset = sym_reader.u32_at(0, "st_name")? as usize;
            out.push(ElfSymbol {
                name: name_at(strings, name_offset)?,
                kind: sym[4] & 0xf,
                binding: sym[4] >> 4,
                other: sym[5],
                section: sym_reader.u16_at(6, "st_shndx")?,
            });
        }
    }
    Ok(out)
}

/// Names of the kernel entry points a cubin defines, sorted.
pub fn kernel_entry_points(bytes: &[u8]) -> Result<Vec<String>, ElfError> {
    let mut names: Vec<String> =
        symbols(bytes)?.into_iter().filter(ElfSymbol::is_kernel_entry).map(|s| s.name).collect();
    names.sort();
    Ok(names)
}

#[cfg(test)]
#[path = "elf_tests.rs"]
mod tests;
