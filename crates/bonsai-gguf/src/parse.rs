//! Bounds-checked parsing of the GGUF header (everything before the tensor data).
//!
//! Every read goes through [`Cursor`], which checks the remaining length first and names what it
//! was reading on failure. Counts from the header never size an allocation directly: capacity is
//! capped by how many of the smallest possible items the remaining bytes could hold, and every
//! loop iteration consumes at least one byte or fails, so time and memory stay linear in the file.

use crate::error::GgufError;
use crate::value::{MetaValue, ValueType};

pub(crate) const GGUF_MAGIC: u32 = u32::from_le_bytes(*b"GGUF");
pub(crate) const SUPPORTED_VERSIONS: [u32; 2] = [2, 3];
/// Arrays of arrays deeper than this are rejected (keeps recursion off the stack limit).
pub(crate) const MAX_ARRAY_DEPTH: usize = 8;
/// ggml's GGML_MAX_DIMS.
pub(crate) const MAX_TENSOR_DIMS: u32 = 4;
/// Smallest on-disk tensor info: name length, n_dims, type, offset.
const MIN_TENSOR_INFO_BYTES: u64 = 8 + 4 + 4 + 8;
/// Smallest on-disk key-value pair: key length, value type, one byte of value.
const MIN_KV_BYTES: u64 = 8 + 4 + 1;

pub(crate) struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

/// A tensor info as written in the header, before type resolution.
pub(crate) struct RawTensorInfo {
    pub name: String,
    pub shape: Vec<u64>,
    pub type_id: u32,
    pub offset: u64,
}

pub(crate) struct Header {
    pub version: u32,
    pub metadata: Vec<(String, MetaValue)>,
    pub tensors: Vec<RawTensorInfo>,
    /// Byte position right after the last tensor info (before alignment padding).
    pub header_end: u64,
}

impl<'a> Cursor<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Cursor { bytes, pos: 0 }
    }

    fn remaining(&self) -> u64 {
        (self.bytes.len() - self.pos) as u64
    }

    fn take(&mut self, n: u64, what: impl FnOnce() -> String) -> Result<&'a [u8], GgufError> {
        if n > self.remaining() {
            return Err(GgufError::Truncated {
                what: what(),
                offset: self.pos as u64,
                needed: n,
                file_len: self.bytes.len() as u64,
            });
        }
        // n <= remaining <= usize::MAX, so the cast is exact.
        let slice = &self.bytes[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(slice)
    }

    fn array<const N: usize>(
        &mut self,
        what: impl FnOnce() -> String,
    ) -> Result<[u8; N], GgufError> {
        let slice = self.take(N as u64, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(slice);
        Ok(out)
    }

    fn u32(&mut self, what: impl FnOnce() -> String) -> Result<u32, GgufError> {
        self.array(what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, what: impl FnOnce() -> String) -> Result<u64, GgufError> {
        self.array(what).map(u64::from_le_bytes)
    }

    fn string(&mut self, what: &dyn Fn() -> String) -> Result<String, GgufError> {
        let len = self.u64(|| format!("{} length", what()))?;
        let bytes = self.take(len, what)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| GgufError::InvalidUtf8 { what: what() })
    }

    /// Capacity for `count` items of at least `min_bytes` each, capped by the bytes left.
    fn capped_capacity(&self, count: u64, min_bytes: u64) -> usize {
        let fits = self.remaining() / min_bytes.max(1);
        usize::try_from(count.min(fits)).unwrap_or(0)
    }

    fn value(&mut self, ty: ValueType, key: &str, depth: usize) -> Result<MetaValue, GgufError> {
        let what = || format!("value of metadata key '{key}'");
        Ok(match ty {
            ValueType::U8 => MetaValue::U8(u8::from_le_bytes(self.array(what)?)),
            ValueType::I8 => MetaValue::I8(i8::from_le_bytes(self.array(what)?)),
            ValueType::U16 => MetaValue::U16(u16::from_le_bytes(self.array(what)?)),
            ValueType::I16 => MetaValue::I16(i16::from_le_bytes(self.array(what)?)),
            ValueType::U32 => MetaValue::U32(u32::from_le_bytes(self.array(what)?)),
            ValueType::I32 => MetaValue::I32(i32::from_le_bytes(self.array(what)?)),
            ValueType::U64 => MetaValue::U64(u64::from_le_bytes(self.array(what)?)),
            ValueType::I64 => MetaValue::I64(i64::from_le_bytes(self.array(what)?)),
            ValueType::F32 => MetaValue::F32(f32::from_le_bytes(self.array(what)?)),
            ValueType::F64 => MetaValue::F64(f64::from_le_bytes(self.array(what)?)),
            // GGUF bools are one byte; any non-zero byte reads as true, but only 0/1 re-write
            // identically, so other bytes are rejected.
            ValueType::Bool => match u8::from_le_bytes(self.array(what)?) {
                0 => MetaValue::Bool(false),
                1 => MetaValue::Bool(true),
                other => {
                    return Err(GgufError::OutOfRange {
                        key: key.to_string(),
                        value: other.to_string(),
                        reason: "a bool byte must be 0 or 1".into(),
                    })
                }
            },
            ValueType::String => MetaValue::String(self.string(&what)?),
            ValueType::Array => self.array_value(key, depth)?,
        })
    }

    fn array_value(&mut self, key: &str, depth: usize) -> Result<MetaValue, GgufError> {
        if depth >= MAX_ARRAY_DEPTH {
            return Err(GgufError::NestingTooDeep {
                key: key.to_string(),
                max_depth: MAX_ARRAY_DEPTH,
            });
        }
        let elem_id = self.u32(|| format!("array element type of metadata key '{key}'"))?;
        let elem = ValueType::from_id(elem_id)
            .ok_or_else(|| GgufError::UnknownValueType { id: elem_id, key: key.to_string() })?;
        let count = self.u64(|| format!("array length of metadata key '{key}'"))?;
        let mut items = Vec::with_capacity(self.capped_capacity(count, elem.min_encoded_len()));
        for _ in 0..count {
            items.push(self.value(elem, key, depth + 1)?);
        }
        Ok(MetaValue::Array(elem, items))
    }
}

/// Longest prefix of a bad name quoted in an error.
const MAX_QUOTED_CHARS: usize = 80;

/// Keys and tensor names end up in one-line error messages; a control character (newline, escape
/// sequence) in one is rejected here, quoted with escapes, so no later message can carry it.
fn check_printable(kind: &'static str, name: &str) -> Result<(), GgufError> {
    if !name.chars().any(char::is_control) {
        return Ok(());
    }
    Err(GgufError::ControlCharacter { kind, escaped: escape_for_message(name) })
}

/// `s` with control characters escaped and cut to a readable length.
pub(crate) fn escape_for_message(s: &str) -> String {
    let mut out: String = s.chars().take(MAX_QUOTED_CHARS).flat_map(char::escape_debug).collect();
    if s.chars().count() > MAX_QUOTED_CHARS {
        out.push_str("...");
    }
    out
}

pub(crate) fn parse_header(bytes: &[u8]) -> Result<Header, GgufError> {
    let mut cur = Cursor::new(bytes);
    let magic = cur.u32(|| "magic".into())?;
    if magic != GGUF_MAGIC {
        return Err(GgufError::BadMagic { found: magic, expected: GGUF_MAGIC });
    }
    let version = cur.u32(|| "version".into())?;
    if !SUPPORTED_VERSIONS.contains(&version) {
        return Err(GgufError::UnsupportedVersion(version));
    }
    let tensor_count = cur.u64(|| "tensor count".into())?;
    let kv_count = cur.u64(|| "metadata count".into())?;

    let mut metadata: Vec<(String, MetaValue)> =
        Vec::with_capacity(cur.capped_capacity(kv_count, MIN_KV_BYTES));
    let mut seen_keys = std::collections::HashSet::new();
    for index in 0..kv_count {
        let key = cur.string(&|| format!("key of metadata entry {index}"))?;
        check_printable("metadata key", &key)?;
        let type_id = cur.u32(|| format!("value type of metadata key '{key}'"))?;
        let ty = ValueType::from_id(type_id)
            .ok_or_else(|| GgufError::UnknownValueType { id: type_id, key: key.clone() })?;
        let value = cur.value(ty, &key, 0)?;
        if !seen_keys.insert(key.clone()) {
            return Err(GgufError::Duplicate { kind: "metadata key", name: key });
        }
        metadata.push((key, value));
    }

    let mut tensors = Vec::with_capacity(cur.capped_capacity(tensor_count, MIN_TENSOR_INFO_BYTES));
    for index in 0..tensor_count {
        let name = cur.string(&|| format!("name of tensor {index}"))?;
        check_printable("tensor name", &name)?;
        let n_dims = cur.u32(|| format!("dimension count of tensor '{name}'"))?;
        if n_dims == 0 || n_dims > MAX_TENSOR_DIMS {
            return Err(GgufError::BadTensorInfo {
                name,
                reason: format!("{n_dims} dimensions (expected 1 to {MAX_TENSOR_DIMS})"),
            });
        }
        let mut shape = Vec::with_capacity(n_dims as usize);
        for d in 0..n_dims {
            shape.push(cur.u64(|| format!("dimension {d} of tensor '{name}'"))?);
        }
        let type_id = cur.u32(|| format!("type of tensor '{name}'"))?;
        let offset = cur.u64(|| format!("data offset of tensor '{name}'"))?;
        tensors.push(RawTensorInfo { name, shape, type_id, offset });
    }
    Ok(Header { version, metadata, tensors, header_end: cur.pos as u64 })
}
