//! [`GgufFile`]: a validated GGUF file over a memory map (or an owned buffer), with zero-copy
//! views of tensor data. Everything is checked once in `open`/`from_bytes`; afterwards every
//! tensor's bytes are known to lie inside the file and match its type and shape.

use crate::blocks::{self, type_id, TensorType};
use crate::error::GgufError;
use crate::keys;
use crate::layout::{self, TwoBitResolution, TwoBitTensor};
use crate::parse::{self, RawTensorInfo};
use crate::value::{self, MetaValue, ValueType};
use std::collections::HashMap;
use std::path::Path;

/// Alignment of tensor data when `general.alignment` is absent (GGUF spec).
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// Largest accepted `general.alignment`.
const MAX_ALIGNMENT: u64 = 1 << 30;

/// One tensor's header entry, with its type resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo {
    pub name: String,
    /// GGUF order: `shape[0]` is the contiguous (row) dimension.
    pub shape: Vec<u64>,
    pub ty: TensorType,
    /// The id as stored in the file (42 and 142 both map to 2-bit layouts).
    pub type_id: u32,
    /// Offset of the data from the start of the data section, as stored in the file.
    pub offset: u64,
    pub len_bytes: u64,
}

impl TensorInfo {
    /// Number of weights (product of the shape; checked not to overflow when the file was read).
    pub fn n_elems(&self) -> u64 {
        self.shape.iter().product()
    }
}

/// A tensor's info and its bytes inside the file.
#[derive(Debug, Clone, Copy)]
pub struct TensorView<'a> {
    pub info: &'a TensorInfo,
    pub data: &'a [u8],
}

impl TensorView<'_> {
    /// All weights decoded to f32 (allocates `n_elems` floats).
    pub fn dequantize_to_vec(&self) -> Result<Vec<f32>, GgufError> {
        let n = usize::try_from(self.info.n_elems()).map_err(|_| GgufError::BadTensorInfo {
            name: self.info.name.clone(),
            reason: "too many elements for this platform".into(),
        })?;
        let mut out = vec![0.0f32; n];
        blocks::dequantize(self.info.ty, self.data, &mut out)?;
        Ok(out)
    }
}

enum Backing {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Backing {
    fn bytes(&self) -> &[u8] {
        match self {
            Backing::Mapped(map) => map,
            Backing::Owned(vec) => vec,
        }
    }
}

pub struct GgufFile {
    backing: Backing,
    version: u32,
    alignment: u64,
    data_start: u64,
    metadata: Vec<(String, MetaValue)>,
    meta_index: HashMap<String, usize>,
    tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
    two_bit: Option<TwoBitResolution>,
}

impl std::fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufFile")
            .field("version", &self.version)
            .field("metadata_len", &self.metadata.len())
            .field("tensors_len", &self.tensors.len())
            .finish()
    }
}

impl GgufFile {
    /// Memory-maps and validates a GGUF file.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, GgufError> {
        let path = path.as_ref();
        let io_err = |err| GgufError::Io { path: path.to_path_buf(), err };
        let file = std::fs::File::open(path).map_err(io_err)?;
        // SAFETY: the map is read-only and private to this process. Another process truncating or
        // rewriting the file while it is mapped would change the bytes under us (or fault); that
        // is the documented caveat of every memory-mapped model loader and is not guarded here.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io_err)?;
        Self::from_backing(Backing::Mapped(map))
    }

    /// Validates an in-memory GGUF image (same checks as [`GgufFile::open`]).
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Self, GgufError> {
        Self::from_backing(Backing::Owned(bytes))
    }

    fn from_backing(backing: Backing) -> Result<Self, GgufError> {
        let bytes = backing.bytes();
        let header = parse::parse_header(bytes)?;
        let meta_index: HashMap<String, usize> =
            header.metadata.iter().enumerate().map(|(i, (k, _))| (k.clone(), i)).collect();
        let alignment = match meta_index.get(keys::GENERAL_ALIGNMENT) {
            None => DEFAULT_ALIGNMENT,
            Some(&i) => {
                let v: u64 =
                    value::integer_as(keys::GENERAL_ALIGNMENT, &header.metadata[i].1, "u64")?;
                if v == 0 || !v.is_power_of_two() || v > MAX_ALIGNMENT {
                    return Err(GgufError::BadAlignment(v));
                }
                v
            }
        };
        let file_len = bytes.len() as u64;
        let data_start = align_up(header.header_end, alignment).unwrap_or(u64::MAX);
        let hint = layout::layout_hint(&header.metadata)?;
        let (tensors, two_bit) = resolve_tensors(bytes, &header.tensors, data_start, alignment, hint)?;
        let mut tensor_index = HashMap::with_capacity(tensors.len());
        for (i, t) in tensors.iter().enumerate() {
            if tensor_index.insert(t.name.clone(), i).is_some() {
                return Err(GgufError::Duplicate { kind: "tensor", name: t.name.clone() });
            }
        }
        debug_assert!(tensors.iter().all(|t| data_start + t.offset + t.len_bytes <= file_len));
        Ok(GgufFile {
            version: header.version,
            alignment,
            data_start,
            metadata: header.metadata,
            meta_index,
            tensors,
            tensor_index,
            two_bit,
            backing,
        })
    }

    pub fn version(&self) -> u32 {
        self.version
    }

    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Absolute byte position of the data section (tensor offsets are relative to it).
    pub fn data_offset(&self) -> u64 {
        self.data_start
    }

    /// Length of the whole file in bytes.
    pub fn file_len(&self) -> u64 {
        self.backing.bytes().len() as u64
    }

    /// Metadata in file order.
    pub fn metadata(&self) -> &[(String, MetaValue)] {
        &self.metadata
    }

    pub fn get(&self, key: &str) -> Option<&MetaValue> {
        self.meta_index.get(key).map(|&i| &self.metadata[i].1)
    }

    fn require(&self, key: &str) -> Result<&MetaValue, GgufError> {
        self.get(key).ok_or_else(|| GgufError::MissingKey(key.to_string()))
    }

    /// Any integer type, converted when lossless.
    pub fn get_u32(&self, key: &str) -> Result<u32, GgufError> {
        value::integer_as(key, self.require(key)?, "u32")
    }

    pub fn get_u64(&self, key: &str) -> Result<u64, GgufError> {
        value::integer_as(key, self.require(key)?, "u64")
    }

    pub fn get_i64(&self, key: &str) -> Result<i64, GgufError> {
        value::integer_as(key, self.require(key)?, "i64")
    }

    pub fn get_usize(&self, key: &str) -> Result<usize, GgufError> {
        value::integer_as(key, self.require(key)?, "usize")
    }

    /// f32, f64 (rounded to nearest f32; an f64 beyond the f32 range is an error) or an integer.
    pub fn get_f32(&self, key: &str) -> Result<f32, GgufError> {
        let wide = self.get_f64(key)?;
        let narrow = wide as f32;
        if wide.is_finite() && !narrow.is_finite() {
            return Err(GgufError::OutOfRange {
                key: key.to_string(),
                value: wide.to_string(),
                reason: "beyond the f32 range".into(),
            });
        }
        Ok(narrow)
    }

    pub fn get_f64(&self, key: &str) -> Result<f64, GgufError> {
        value::float_as_f64(key, self.require(key)?)
    }

    pub fn get_bool(&self, key: &str) -> Result<bool, GgufError> {
        match self.require(key)? {
            MetaValue::Bool(b) => Ok(*b),
            other => Err(wrong_type(key, "bool", other)),
        }
    }

    pub fn get_str(&self, key: &str) -> Result<&str, GgufError> {
        let v = self.require(key)?;
        v.as_str().ok_or_else(|| wrong_type(key, "string", v))
    }

    /// An array of strings.
    pub fn get_str_array(&self, key: &str) -> Result<Vec<&str>, GgufError> {
        let v = self.require(key)?;
        match v.as_array() {
            Some((ValueType::String, items)) => {
                Ok(items.iter().filter_map(MetaValue::as_str).collect())
            }
            _ => Err(wrong_type(key, "array of string", v)),
        }
    }

    /// An array of any one element type.
    pub fn get_array(&self, key: &str) -> Result<(ValueType, &[MetaValue]), GgufError> {
        let v = self.require(key)?;
        v.as_array().ok_or_else(|| wrong_type(key, "array", v))
    }

    /// How the file's id-42 tensors are read and why; None when it has none.
    pub fn two_bit_resolution(&self) -> Option<&TwoBitResolution> {
        self.two_bit.as_ref()
    }

    /// Why a tensor of type `ty` stored under `type_id` reads as it does, in words: the id-42
    /// resolution for 42, else the id itself (for `bonsai info`).
    pub fn type_reason(&self, ty: TensorType, type_id: u32) -> String {
        match (type_id, &self.two_bit) {
            (blocks::type_id::TWO_BIT_SHARED, Some(r)) => r.reason.clone(),
            _ => format!("type id {type_id} is {}'s own", ty.name()),
        }
    }

    /// Tensor infos in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    pub fn tensor_info(&self, name: &str) -> Option<&TensorInfo> {
        self.tensor_index.get(name).map(|&i| &self.tensors[i])
    }

    pub fn tensor(&self, name: &str) -> Option<TensorView<'_>> {
        let info = self.tensor_info(name)?;
        // Validated at open: data_start + offset + len_bytes <= file length.
        let start = (self.data_start + info.offset) as usize;
        let data = &self.backing.bytes()[start..start + info.len_bytes as usize];
        Some(TensorView { info, data })
    }

    /// Like [`GgufFile::tensor`], with an error naming the missing tensor.
    pub fn require_tensor(&self, name: &str) -> Result<TensorView<'_>, GgufError> {
        self.tensor(name).ok_or_else(|| GgufError::MissingTensor(name.to_string()))
    }
}

fn wrong_type(key: &str, expected: &'static str, found: &MetaValue) -> GgufError {
    GgufError::WrongType { key: key.to_string(), expected, found: found.type_description() }
}

pub(crate) fn align_up(pos: u64, alignment: u64) -> Option<u64> {
    Some(pos.checked_add(alignment - 1)? / alignment * alignment)
}

/// Resolves every tensor's type and length and checks it lies inside the file, aligned, without
/// overlapping the next tensor.
fn resolve_tensors(
    bytes: &[u8],
    raw: &[RawTensorInfo],
    data_start: u64,
    alignment: u64,
    hint: Option<(blocks::TwoBitLayout, String)>,
) -> Result<(Vec<TensorInfo>, Option<TwoBitResolution>), GgufError> {
    let file_len = bytes.len() as u64;
    let bad =
        |name: &str, reason: String| GgufError::BadTensorInfo { name: name.to_string(), reason };
    // Absolute starts, checked, then the sorted list of starts to find each tensor's region end.
    let mut starts = Vec::with_capacity(raw.len());
    for t in raw {
        if t.offset % alignment != 0 {
            return Err(bad(
                &t.name,
                format!("data offset {} is not a multiple of the alignment {alignment}", t.offset),
            ));
        }
        let start =
            data_start.checked_add(t.offset).filter(|&s| s <= file_len).ok_or_else(|| {
                GgufError::TensorPastEnd {
                    name: t.name.clone(),
                    end: data_start.saturating_add(t.offset),
                    file_len,
                }
            })?;
        starts.push(start);
    }
    let mut sorted_starts = starts.clone();
    sorted_starts.sort_unstable();

    // Each tensor's span: from its start to the first start strictly after it (equal starts
    // would overlap) or the file end. Binary searches keep this O(n log n) for hostile files
    // with millions of tensors.
    let spans: Vec<(u64, u64, usize)> = starts
        .iter()
        .map(|&start| {
            let after = sorted_starts.partition_point(|&s| s <= start);
            let next_start = sorted_starts.get(after).copied().unwrap_or(file_len);
            (start, next_start, after - sorted_starts.partition_point(|&s| s < start))
        })
        .collect();
    let mut shared = Vec::new();
    for (t, &(start, next_start, _)) in raw.iter().zip(&spans) {
        if t.type_id == type_id::TWO_BIT_SHARED {
            let n_elems = checked_elems(t).ok_or_else(|| {
                bad(&t.name, format!("shape {:?} has a zero dimension or overflows", t.shape))
            })?;
            // Both bounds lie within [0, file_len], so the slice is in range.
            let region = &bytes[start as usize..next_start as usize];
            shared.push(TwoBitTensor { name: &t.name, n_elems, row_len: t.shape[0], region, alignment });
        }
    }
    let two_bit = layout::resolve_file(&shared, hint)?;

    let mut out = Vec::with_capacity(raw.len());
    for (t, &(start, next_start, same_start)) in raw.iter().zip(&spans) {
        let n_elems = checked_elems(t).ok_or_else(|| {
            bad(&t.name, format!("shape {:?} has a zero dimension or overflows", t.shape))
        })?;
        let row_len = t.shape[0];

        let ty = match blocks::type_for_unshared_id(t.type_id) {
            Some(ty) => ty,
            // Resolved above whenever the file has an id-42 tensor.
            None if t.type_id == type_id::TWO_BIT_SHARED => match &two_bit {
                Some(r) => TensorType::TwoBit(r.layout),
                None => unreachable!("an id-42 tensor makes resolve_file return a layout or an error"),
            },
            None => {
                return Err(match blocks::known_unsupported_type_name(t.type_id) {
                    Some(type_name) => GgufError::UnsupportedTensorType {
                        id: t.type_id,
                        type_name,
                        name: t.name.clone(),
                    },
                    None => GgufError::UnknownTensorType { id: t.type_id, name: t.name.clone() },
                })
            }
        };
        let block_elems = ty.block_elems() as u64;
        if row_len % block_elems != 0 {
            return Err(bad(
                &t.name,
                format!(
                    "row length {row_len} is not a multiple of the {block_elems}-weight {} block",
                    ty.name()
                ),
            ));
        }
        let len_bytes = ty.len_bytes_for(n_elems).ok_or_else(|| {
            bad(&t.name, format!("{} bytes for {n_elems} weights overflow", ty.name()))
        })?;
        let end = start.checked_add(len_bytes).filter(|&e| e <= file_len).ok_or_else(|| {
            GgufError::TensorPastEnd {
                name: t.name.clone(),
                end: start.saturating_add(len_bytes),
                file_len,
            }
        })?;
        if (len_bytes > 0 && same_start > 1) || end > next_start {
            return Err(bad(
                &t.name,
                format!(
                    "data [{start}, {end}) overlaps the next tensor's data at byte {next_start}"
                ),
            ));
        }
        out.push(TensorInfo {
            name: t.name.clone(),
            shape: t.shape.clone(),
            ty,
            type_id: t.type_id,
            offset: t.offset,
            len_bytes,
        });
    }
    Ok((out, two_bit))
}

/// The product of a tensor's dimensions; None for a zero dimension or an overflow.
fn checked_elems(t: &RawTensorInfo) -> Option<u64> {
    t.shape.iter().try_fold(1u64, |acc, &d| if d == 0 { None } else { acc.checked_mul(d) })
}
