//! Reading Hugging Face safetensors shards over a memory map, and turning their BF16 / F16 / F32
//! data into f32 rows.
//!
//! File layout: `u64` little-endian header length `N`, then `N` bytes of JSON
//! `{ name: { "dtype", "shape", "data_offsets": [begin, end] }, "__metadata__"?: {..} }`, then the
//! data; offsets count from the end of the header. Every offset is checked against the file length
//! and against `numel * dtype size` before any view is handed out.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use serde_json::Value;

use super::error::ConvertError;

/// Bytes of the little-endian header length that opens every safetensors file.
const HEADER_LEN_BYTES: usize = 8;
/// Largest JSON header accepted (the format's own reference reader caps it at 100 MB).
const MAX_HEADER_BYTES: u64 = 100 * 1024 * 1024;
/// Key of the free-form string map that is not a tensor.
const METADATA_KEY: &str = "__metadata__";

/// Element types the converter reads; anything else is kept by name for the error message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dtype {
    BF16,
    F16,
    F32,
    Other(String),
}

impl Dtype {
    fn parse(name: &str) -> Self {
        match name {
            "BF16" => Dtype::BF16,
            "F16" => Dtype::F16,
            "F32" => Dtype::F32,
            other => Dtype::Other(other.to_string()),
        }
    }

    /// Element size in bytes, for the types whose size the format defines.
    fn size_bytes(&self) -> Option<usize> {
        match self {
            Dtype::BF16 | Dtype::F16 => Some(2),
            Dtype::F32 => Some(4),
            Dtype::Other(name) => match name.as_str() {
                "F64" | "I64" | "U64" => Some(8),
                "I32" | "U32" => Some(4),
                "I16" | "U16" => Some(2),
                "I8" | "U8" | "BOOL" | "F8_E4M3" | "F8_E5M2" => Some(1),
                _ => None,
            },
        }
    }

    pub fn name(&self) -> &str {
        match self {
            Dtype::BF16 => "BF16",
            Dtype::F16 => "F16",
            Dtype::F32 => "F32",
            Dtype::Other(name) => name,
        }
    }
}

/// One tensor entry of a shard: where its bytes lie in the file.
#[derive(Debug, Clone)]
pub struct TensorEntry {
    pub name: String,
    pub dtype: Dtype,
    /// Hugging Face order: the last dimension is contiguous (a linear weight is `[out, in]`).
    pub shape: Vec<usize>,
    /// Absolute byte range inside the file.
    start: usize,
    end: usize,
}

impl TensorEntry {
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn len_bytes(&self) -> usize {
        self.end - self.start
    }
}

/// One memory-mapped `.safetensors` file.
pub struct SafetensorsFile {
    path: PathBuf,
    map: Mmap,
    entries: Vec<TensorEntry>,
}

impl SafetensorsFile {
    pub fn open(path: &Path) -> Result<Self, ConvertError> {
        let file = File::open(path).map_err(|e| ConvertError::io(path, e))?;
        // SAFETY: the map is read-only and private to this process; a checkpoint being rewritten
        // underneath a running conversion is outside what we defend against (as with any
        // memory-mapped reader), and every range we read was bounds-checked against the length
        // the map had when it was created.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| ConvertError::io(path, e))?;
        let entries = parse_header(path, &map)?;
        Ok(SafetensorsFile { path: path.to_path_buf(), map, entries })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn entries(&self) -> &[TensorEntry] {
        &self.entries
    }

    /// The raw bytes of one entry (already bounds-checked at open).
    pub fn data(&self, entry: &TensorEntry) -> &[u8] {
        &self.map[entry.start..entry.end]
    }
}

/// Parses and validates the header of a safetensors file held in `bytes`.
pub fn parse_header(path: &Path, bytes: &[u8]) -> Result<Vec<TensorEntry>, ConvertError> {
    let bad = |what: String| ConvertError::bad_file(path, what);
    let file_len = bytes.len();
    let len_field: [u8; HEADER_LEN_BYTES] = bytes
        .get(..HEADER_LEN_BYTES)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| bad(format!("safetensors file too short ({file_len} bytes)")))?;
    let header_len = u64::from_le_bytes(len_field);
    if header_len > MAX_HEADER_BYTES || header_len > (file_len - HEADER_LEN_BYTES) as u64 {
        return Err(bad(format!(
            "safetensors header length {header_len} exceeds the file ({file_len} bytes)"
        )));
    }
    let data_start = HEADER_LEN_BYTES + header_len as usize;
    let header: Value = serde_json::from_slice(&bytes[HEADER_LEN_BYTES..data_start])
        .map_err(|source| ConvertError::Json { path: path.to_path_buf(), source })?;
    let object = header
        .as_object()
        .ok_or_else(|| bad("safetensors header is not a JSON object".to_string()))?;

    let mut entries = Vec::with_capacity(object.len());
    for (name, value) in object {
        if name == METADATA_KEY {
            continue;
        }
        let entry = parse_entry(name, value, data_start, file_len).map_err(bad)?;
        entries.push(entry);
    }
    Ok(entries)
}

fn parse_entry(
    name: &str,
    value: &Value,
    data_start: usize,
    file_len: usize,
) -> Result<TensorEntry, String> {
    let dtype = value
        .get("dtype")
        .and_then(Value::as_str)
        .map(Dtype::parse)
        .ok_or_else(|| format!("tensor '{name}' has no string dtype"))?;
    let shape = value
        .get("shape")
        .and_then(Value::as_array)
        .ok_or_else(|| format!("tensor '{name}' has no shape array"))?
        .iter()
        .map(|d| d.as_u64().and_then(|d| usize::try_from(d).ok()))
        .collect::<Option<Vec<usize>>>()
        .ok_or_else(|| format!("tensor '{name}' has a non-integer dimension"))?;
    let offsets = value
        .get("data_offsets")
        .and_then(Value::as_array)
        .filter(|a| a.len() == 2)
        .and_then(|a| Some((a[0].as_u64()?, a[1].as_u64()?)))
        .ok_or_else(|| format!("tensor '{name}' has no [begin, end] data_offsets"))?;
    let (begin, end) = offsets;
    let start = (data_start as u64).checked_add(begin);
    let stop = (data_start as u64).checked_add(end);
    let (start, stop) = match (start, stop) {
        (Some(s), Some(e)) if s <= e && e <= file_len as u64 => (s as usize, e as usize),
        _ => {
            return Err(format!(
                "tensor '{name}' data [{begin}, {end}) lies outside the data section \
                 ({} bytes)",
                file_len - data_start
            ))
        }
    };
    let numel = shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
    let expected = dtype.size_bytes().and_then(|s| numel?.checked_mul(s));
    if let Some(expected) = expected {
        if expected != stop - start {
            return Err(format!(
                "tensor '{name}' holds {} bytes, shape {shape:?} of {} needs {expected}",
                stop - start,
                dtype.name()
            ));
        }
    } else if dtype.size_bytes().is_some() {
        return Err(format!("tensor '{name}' shape {shape:?} overflows"));
    }
    Ok(TensorEntry { name: name.to_string(), dtype, shape, start, end: stop })
}

/// Decodes little-endian `dtype` elements from `src` into `out` (one f32 per element).
pub fn to_f32(name: &str, dtype: &Dtype, src: &[u8], out: &mut [f32]) -> Result<(), ConvertError> {
    let unsupported = || ConvertError::UnsupportedDtype {
        name: name.to_string(),
        dtype: dtype.name().to_string(),
    };
    let size = match dtype {
        Dtype::BF16 | Dtype::F16 | Dtype::F32 => dtype.size_bytes().ok_or_else(unsupported)?,
        Dtype::Other(_) => return Err(unsupported()),
    };
    assert_eq!(src.len(), out.len() * size, "to_f32 caller passes matching lengths");
    let chunks = src.chunks_exact(size);
    match dtype {
        // bf16 is the top half of an f32: widening is exact.
        Dtype::BF16 => chunks.zip(out.iter_mut()).for_each(|(b, o)| {
            *o = f32::from_bits(u32::from(u16::from_le_bytes([b[0], b[1]])) << 16)
        }),
        Dtype::F16 => chunks.zip(out.iter_mut()).for_each(|(b, o)| {
            *o = half::f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32()
        }),
        Dtype::F32 => chunks
            .zip(out.iter_mut())
            .for_each(|(b, o)| *o = f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        Dtype::Other(_) => return Err(unsupported()),
    }
    Ok(())
}

/// All shards of a checkpoint, with each tensor name resolved to the shard that holds it.
pub struct Checkpoint {
    shards: Vec<SafetensorsFile>,
    by_name: HashMap<String, (usize, usize)>,
}

/// File name of the shard index written by `save_pretrained` for sharded checkpoints.
const INDEX_FILE: &str = "model.safetensors.index.json";

impl Checkpoint {
    /// Opens `dir/model.safetensors.index.json`'s shards when the index exists, else every
    /// `*.safetensors` in `dir`.
    pub fn open(dir: &Path) -> Result<Self, ConvertError> {
        let index_path = dir.join(INDEX_FILE);
        let shard_paths = if index_path.is_file() {
            shards_from_index(dir, &index_path)?
        } else {
            let mut paths = Vec::new();
            let listing = std::fs::read_dir(dir).map_err(|e| ConvertError::io(dir, e))?;
            for item in listing {
                let path = item.map_err(|e| ConvertError::io(dir, e))?.path();
                if path.extension().is_some_and(|ext| ext == "safetensors") {
                    paths.push(path);
                }
            }
            paths.sort();
            if paths.is_empty() {
                return Err(ConvertError::MissingFile(dir.join("*.safetensors")));
            }
            paths
        };
        let mut shards = Vec::with_capacity(shard_paths.len());
        let mut by_name: HashMap<String, (usize, usize)> = HashMap::new();
        for path in shard_paths {
            let shard = SafetensorsFile::open(&path)?;
            let shard_index = shards.len();
            for (entry_index, entry) in shard.entries().iter().enumerate() {
                if let Some(&(first, _)) = by_name.get(&entry.name) {
                    let first: &SafetensorsFile = &shards[first];
                    return Err(ConvertError::DuplicateTensor {
                        name: entry.name.clone(),
                        first: first.path().display().to_string(),
                        second: path.display().to_string(),
                    });
                }
                by_name.insert(entry.name.clone(), (shard_index, entry_index));
            }
            shards.push(shard);
        }
        Ok(Checkpoint { shards, by_name })
    }

    /// The entry and its bytes, or `MissingTensor` naming it.
    pub fn tensor(&self, name: &str) -> Result<(&TensorEntry, &[u8]), ConvertError> {
        let &(shard, entry) =
            self.by_name.get(name).ok_or_else(|| ConvertError::MissingTensor(name.to_string()))?;
        let shard = &self.shards[shard];
        let entry = &shard.entries()[entry];
        Ok((entry, shard.data(entry)))
    }

    pub fn contains(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }

    pub fn tensor_names(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(String::as_str)
    }
}

/// The distinct shard files the index's `weight_map` names, in first-seen order; each must exist.
fn shards_from_index(dir: &Path, index_path: &Path) -> Result<Vec<PathBuf>, ConvertError> {
    let text = std::fs::read(index_path).map_err(|e| ConvertError::io(index_path, e))?;
    let index: Value = serde_json::from_slice(&text)
        .map_err(|source| ConvertError::Json { path: index_path.to_path_buf(), source })?;
    let weight_map = index
        .get("weight_map")
        .and_then(Value::as_object)
        .ok_or_else(|| ConvertError::bad_file(index_path, "no 'weight_map' object"))?;
    let mut files: Vec<PathBuf> = Vec::new();
    for (tensor, file) in weight_map {
        let file = file.as_str().ok_or_else(|| {
            ConvertError::bad_file(index_path, format!("weight_map['{tensor}'] is not a string"))
        })?;
        // A shard name is a plain file name next to the index, never a path out of the folder.
        if file.contains('/') || file.contains('\\') || file == ".." {
            return Err(ConvertError::bad_file(
                index_path,
                format!("weight_map['{tensor}'] = '{file}' is not a file name in the folder"),
            ));
        }
        let path = dir.join(file);
        if !files.contains(&path) {
            if !path.is_file() {
                return Err(ConvertError::MissingFile(path));
            }
            files.push(path);
        }
    }
    if files.is_empty() {
        return Err(ConvertError::bad_file(index_path, "empty 'weight_map'"));
    }
    Ok(files)
}
