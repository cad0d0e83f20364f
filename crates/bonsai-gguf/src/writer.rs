//! [`GgufWriter`]: writes GGUF v3 with metadata in insertion order and tensors in insertion
//! order, each at the next offset aligned to `general.alignment` (default 32) and zero-padded
//! after (including the last tensor, as gguf-py and llama.cpp do). Reading a file written this
//! way and writing it back yields the same bytes.

use crate::blocks::TensorType;
use crate::error::GgufError;
use crate::keys;
use crate::reader::{align_up, GgufFile, DEFAULT_ALIGNMENT};
use crate::value::{self, MetaValue};
use std::io::{self, Write};
use std::path::Path;

const GGUF_VERSION: u32 = 3;

struct PendingTensor {
    name: String,
    shape: Vec<u64>,
    type_id: u32,
    len: u64,
    /// None for a tensor whose bytes are produced while writing ([`GgufWriter::write_streaming`]).
    data: Option<Vec<u8>>,
}

#[derive(Default)]
pub struct GgufWriter {
    metadata: Vec<(String, MetaValue)>,
    tensors: Vec<PendingTensor>,
}

impl GgufWriter {
    pub fn new() -> Self {
        Self::default()
    }

    /// A writer holding every metadata entry and tensor of `file` (tensor bytes copied), in the
    /// file's order with the file's raw type ids.
    pub fn from_file(file: &GgufFile) -> Result<Self, GgufError> {
        let mut w = GgufWriter::new();
        for (key, value) in file.metadata() {
            w.add_metadata(key, value.clone());
        }
        for info in file.tensors() {
            let view = file.require_tensor(&info.name)?;
            w.add_tensor_with_type_id(
                &info.name,
                &info.shape,
                info.ty,
                info.type_id,
                view.data.to_vec(),
            )?;
        }
        Ok(w)
    }

    /// Adds (or replaces, keeping its position) a metadata entry. Arrays are checked for
    /// uniform element types when written.
    pub fn add_metadata(&mut self, key: &str, v: MetaValue) {
        match self.metadata.iter_mut().find(|(k, _)| k == key) {
            Some(entry) => entry.1 = v,
            None => self.metadata.push((key.to_string(), v)),
        }
    }

    /// Removes a metadata entry if present.
    pub fn remove_metadata(&mut self, key: &str) {
        self.metadata.retain(|(k, _)| k != key);
    }

    /// Adds a tensor with its type's canonical id (see [`TensorType::canonical_type_id`]).
    pub fn add_tensor(
        &mut self,
        name: &str,
        shape: &[u64],
        ty: TensorType,
        data: Vec<u8>,
    ) -> Result<(), GgufError> {
        self.add_tensor_with_type_id(name, shape, ty, ty.canonical_type_id(), data)
    }

    /// Adds a tensor stored under an explicit id (e.g. 42 for a d-first 2-bit tensor).
    pub fn add_tensor_with_type_id(
        &mut self,
        name: &str,
        shape: &[u64],
        ty: TensorType,
        type_id: u32,
        data: Vec<u8>,
    ) -> Result<(), GgufError> {
        let len = data.len() as u64;
        self.add_pending(name, shape, ty, type_id, len, Some(data))
    }

    /// Adds a tensor whose bytes [`GgufWriter::write_streaming`] asks for while writing, so a
    /// large file never holds all its tensors in memory. The length follows from shape and type.
    pub fn add_tensor_deferred(&mut self, name: &str, shape: &[u64], ty: TensorType, type_id: u32) -> Result<(), GgufError> {
        let len = shape
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d))
            .and_then(|n| ty.len_bytes_for(n))
            .ok_or_else(|| GgufError::BadTensorInfo { name: name.to_string(), reason: format!("shape {shape:?} of {} overflows or is not whole blocks", ty.name()) })?;
        self.add_pending(name, shape, ty, type_id, len, None)
    }

    fn add_pending(
        &mut self,
        name: &str,
        shape: &[u64],
        ty: TensorType,
        type_id: u32,
        len: u64,
        data: Option<Vec<u8>>,
    ) -> Result<(), GgufError> {
        let bad = |reason: String| GgufError::BadTensorInfo { name: name.to_string(), reason };
        if !ty.accepts_type_id(type_id) {
            return Err(bad(format!("type id {type_id} cannot hold {}", ty.name())));
        }
        if self.tensors.iter().any(|t| t.name == name) {
            return Err(GgufError::Duplicate { kind: "tensor", name: name.to_string() });
        }
        if shape.is_empty()
            || shape.len() > crate::parse::MAX_TENSOR_DIMS as usize
            || shape.contains(&0)
        {
            return Err(bad(format!("shape {shape:?} needs 1 to 4 non-zero dimensions")));
        }
        if shape[0] % ty.block_elems() as u64 != 0 {
            return Err(bad(format!(
                "row length {} is not a multiple of the {} block of {}",
                shape[0],
                ty.name(),
                ty.block_elems()
            )));
        }
        let expected = shape
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d))
            .and_then(|n| ty.len_bytes_for(n))
            .ok_or_else(|| bad(format!("shape {shape:?} overflows")))?;
        if len != expected {
            return Err(bad(format!("{len} bytes given, shape {shape:?} of {} needs {expected}", ty.name())));
        }
        self.tensors.push(PendingTensor { name: name.to_string(), shape: shape.to_vec(), type_id, len, data });
        Ok(())
    }

    fn alignment(&self) -> io::Result<u64> {
        match self.metadata.iter().find(|(k, _)| k == keys::GENERAL_ALIGNMENT) {
            None => Ok(DEFAULT_ALIGNMENT),
            Some((key, v)) => {
                let a: u64 = value::integer_as(key, v, "u64").map_err(invalid)?;
                if a == 0 || !a.is_power_of_two() {
                    return Err(invalid(GgufError::BadAlignment(a)));
                }
                Ok(a)
            }
        }
    }

    /// Writes the file; every tensor must have its bytes (none added with
    /// [`GgufWriter::add_tensor_deferred`]).
    pub fn write_to(&self, w: &mut impl Write) -> io::Result<()> {
        self.write_streaming(w, |name| {
            Err(io::Error::new(io::ErrorKind::InvalidInput, format!("tensor '{name}' was added without its bytes")))
        })
    }

    /// Writes the file, asking `deferred(name)` for the bytes of each tensor added with
    /// [`GgufWriter::add_tensor_deferred`], in file order, one at a time; a wrong length is an error.
    pub fn write_streaming(&self, w: &mut impl Write, mut deferred: impl FnMut(&str) -> io::Result<Vec<u8>>) -> io::Result<()> {
        let alignment = self.alignment()?;
        let mut header = Vec::new();
        header.extend_from_slice(b"GGUF");
        header.extend_from_slice(&GGUF_VERSION.to_le_bytes());
        header.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        header.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (key, v) in &self.metadata {
            put_string(&mut header, key);
            header.extend_from_slice(&v.value_type().id().to_le_bytes());
            put_value(&mut header, key, v)?;
        }
        let mut offset = 0u64;
        for t in &self.tensors {
            put_string(&mut header, &t.name);
            header.extend_from_slice(&(t.shape.len() as u32).to_le_bytes());
            for d in &t.shape {
                header.extend_from_slice(&d.to_le_bytes());
            }
            header.extend_from_slice(&t.type_id.to_le_bytes());
            header.extend_from_slice(&offset.to_le_bytes());
            offset = align_up(offset + t.len, alignment).ok_or_else(overflow)?;
        }
        let padded = align_up(header.len() as u64, alignment).ok_or_else(overflow)?;
        header.resize(padded as usize, 0);
        w.write_all(&header)?;
        for t in &self.tensors {
            let produced;
            let data = match &t.data {
                Some(data) => data,
                None => {
                    produced = deferred(&t.name)?;
                    if produced.len() as u64 != t.len {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!("tensor '{}': {} bytes produced, {} declared", t.name, produced.len(), t.len),
                        ));
                    }
                    &produced
                }
            };
            w.write_all(data)?;
            let len = t.len;
            let pad = align_up(len, alignment).ok_or_else(overflow)? - len;
            w.write_all(&vec![0u8; pad as usize])?;
        }
        Ok(())
    }

    /// Writes atomically ([`write_file_atomically`]).
    pub fn write_file(&self, path: impl AsRef<Path>) -> Result<(), GgufError> {
        let path = path.as_ref();
        write_file_atomically(path, |file| self.write_to(file)).map_err(|err| GgufError::Io { path: path.to_path_buf(), err })
    }
}

/// Writes a file atomically: `fill` writes a temporary file next to `path`, which is synced and
/// renamed over it, so a reader (another process mapping the file) never sees a partial one.
pub fn write_file_atomically(path: &Path, fill: impl FnOnce(&mut io::BufWriter<std::fs::File>) -> io::Result<()>) -> io::Result<()> {
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(format!(".tmp-{}", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let result = (|| {
        let mut file = io::BufWriter::new(std::fs::File::create(&tmp)?);
        fill(&mut file)?;
        file.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        // Best effort: the temporary file is ours and useless after a failure.
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn invalid(e: GgufError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, e.to_string())
}

fn overflow() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, "GGUF offsets overflow u64")
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_value(out: &mut Vec<u8>, key: &str, v: &MetaValue) -> io::Result<()> {
    match v {
        MetaValue::U8(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I8(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::Bool(x) => out.push(u8::from(*x)),
        MetaValue::String(s) => put_string(out, s),
        MetaValue::Array(elem, items) => {
            out.extend_from_slice(&elem.id().to_le_bytes());
            out.extend_from_slice(&(items.len() as u64).to_le_bytes());
            for item in items {
                if item.value_type() != *elem {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!(
                            "metadata key '{key}': array of {} holds a {}",
                            elem.name(),
                            item.type_description()
                        ),
                    ));
                }
                put_value(out, key, item)?;
            }
        }
    }
    Ok(())
}
