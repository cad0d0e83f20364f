//! `manifest.json` and the raw data files of `image-compare` (the contract with
//! `scripts/reference/image_torch.py`; bump [`MANIFEST_FORMAT`] on any incompatible change).
//!
//! ```text
//! { "format": 1, "seed": u64, "device": str, "copy_bandwidth_bytes_per_s": f64,
//!   "rotation_bytes": int,
//!   "cases": [ { "name": str, "op": str, "params": {..},
//!                "inputs": [ {"name", "shape": [..], "file", "fill"} ],
//!                "output": {"name": "out", "shape": [..], "file" | null},
//!                "ours_median_s": f64 | null, "copies": int, "flops": f64, "bytes": f64,
//!                "speed_target": {"kind", "value"}, "accuracy_target": {"kind", "value"},
//!                "file_bytes": int, "error": str | null } ] }
//! ```
//! Files are `<case>.<input>.f32` and `<case>.out.f32`: raw little-endian f32, row-major in the
//! listed shape, no header.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::{AccuracyTarget, Fill, HostInput, ImageCase, SpeedTarget, TorchOp};
use crate::verify::bench::ROTATION_BYTES;

/// Version of the layout above.
pub const MANIFEST_FORMAT: u32 = 1;
/// The manifest's file name inside the dump folder.
pub const MANIFEST_FILE: &str = "manifest.json";
/// Floats converted per write when streaming a file out.
const WRITE_CHUNK: usize = 1 << 16;

/// Why a dump could not be written.
#[derive(Debug, thiserror::Error)]
#[error("image-compare: {path}: {source}")]
pub struct ManifestError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

pub(crate) fn io_error(path: &Path, source: std::io::Error) -> ManifestError {
    ManifestError { path: path.to_path_buf(), source }
}

/// One case as written.
#[derive(Clone, Debug)]
pub struct CaseRecord {
    pub name: String,
    pub json: Value,
    pub ours_median_s: Option<f64>,
    pub file_bytes: u64,
    pub error: Option<String>,
}

/// The whole dump.
#[derive(Clone, Debug)]
pub struct Manifest {
    pub seed: u64,
    pub device: String,
    pub copy_bandwidth_bytes_per_s: f64,
    pub cases: Vec<CaseRecord>,
}

impl Manifest {
    pub fn new(seed: u64, device: String, copy_bandwidth_bytes_per_s: f64) -> Self {
        Self { seed, device, copy_bandwidth_bytes_per_s, cases: Vec::new() }
    }
    pub fn total_file_bytes(&self) -> u64 {
        self.cases.iter().map(|c| c.file_bytes).sum()
    }
    pub fn to_json(&self) -> Value {
        json!({
            "format": MANIFEST_FORMAT,
            // As a string too: JSON readers that use doubles would round a 64-bit seed.
            "seed": self.seed,
            "seed_str": self.seed.to_string(),
            "device": self.device,
            "copy_bandwidth_bytes_per_s": self.copy_bandwidth_bytes_per_s,
            "rotation_bytes": ROTATION_BYTES,
            "cases": self.cases.iter().map(|c| c.json.clone()).collect::<Vec<_>>(),
        })
    }
    /// Writes `dir/manifest.json` atomically (temp file + rename).
    pub fn write(&self, dir: &Path) -> Result<(), ManifestError> {
        let path = dir.join(MANIFEST_FILE);
        let tmp = dir.join(format!("{MANIFEST_FILE}.tmp"));
        let text = serde_json::to_string_pretty(&self.to_json()).map_err(|e| io_error(&path, e.into()))?;
        std::fs::write(&tmp, text).map_err(|e| io_error(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| io_error(&path, e))
    }
}

/// FNV-1a 64 of a case name: a stable per-case seed offset (the same on every Rust release).
pub(crate) fn name_hash(name: &str) -> u64 {
    const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
    name.bytes().fold(FNV_OFFSET, |h, b| (h ^ b as u64).wrapping_mul(FNV_PRIME))
}

/// Writes `data` as raw little-endian f32.
pub(crate) fn write_f32(path: &Path, data: &[f32]) -> Result<(), ManifestError> {
    let file = std::fs::File::create(path).map_err(|e| io_error(path, e))?;
    let mut out = BufWriter::new(file);
    let mut bytes = Vec::with_capacity(4 * WRITE_CHUNK);
    for chunk in data.chunks(WRITE_CHUNK) {
        bytes.clear();
        bytes.extend(chunk.iter().flat_map(|v| v.to_le_bytes()));
        out.write_all(&bytes).map_err(|e| io_error(path, e))?;
    }
    out.flush().map_err(|e| io_error(path, e))
}

fn op_params(op: TorchOp) -> Value {
    match op {
        TorchOp::GroupNorm { groups, eps } | TorchOp::GroupNormSilu { groups, eps } => {
            json!({ "groups": groups, "eps": eps as f64 })
        }
        _ => json!({}),
    }
}

fn fill_json(fill: Fill) -> Value {
    match fill {
        Fill::Uniform { lo, hi } => json!({ "kind": "uniform", "lo": lo as f64, "hi": hi as f64 }),
        Fill::Activations { scale } => json!({ "kind": "activations", "scale": scale as f64 }),
        Fill::TernaryWeights => json!({ "kind": "ternary_weights" }),
    }
}

fn speed_json(t: SpeedTarget) -> Value {
    let (kind, value) = match t {
        SpeedTarget::FractionOfCopy(v) => ("fraction_of_copy", Some(v)),
        SpeedTarget::VsTorchF32(v) => ("vs_torch_f32", Some(v)),
        SpeedTarget::VsTorchBf16(v) => ("vs_torch_bf16", Some(v)),
        SpeedTarget::TflopsAtLeast(v) => ("tflops_at_least", Some(v)),
        SpeedTarget::Report => ("report", None),
    };
    json!({ "kind": kind, "value": value })
}

fn accuracy_json(t: AccuracyTarget) -> Value {
    match t {
        AccuracyTarget::RelErrAtMost(v) => json!({ "kind": "rel_err_at_most", "value": v }),
        AccuracyTarget::VsTorchF32(v) => json!({ "kind": "vs_torch_f32", "value": v }),
        AccuracyTarget::VsTorchBf16(v) => json!({ "kind": "vs_torch_bf16", "value": v }),
    }
}

/// The output file's name (also the name of a case's result in the Python report).
pub(crate) fn file_name(case: &str, tensor: &str) -> String {
    format!("{case}.{tensor}.f32")
}

/// Writes a case's input files and (when it ran) our output; returns its manifest record.
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_case(
    dir: &Path,
    case: &ImageCase,
    host: &[HostInput],
    ours: Option<&[f32]>,
    median_s: Option<f64>,
    copies: usize,
    error: Option<String>,
) -> Result<CaseRecord, ManifestError> {
    let mut inputs = Vec::with_capacity(case.inputs.len());
    let mut file_bytes = 0u64;
    for (spec, data) in case.inputs.iter().zip(host) {
        let file = file_name(&case.name, spec.name);
        write_f32(&dir.join(&file), &data.data)?;
        file_bytes += 4 * data.data.len() as u64;
        inputs.push(json!({ "name": spec.name, "shape": spec.shape, "file": file, "fill": fill_json(spec.fill) }));
    }
    let out_file = match ours {
        Some(out) => {
            let file = file_name(&case.name, "out");
            write_f32(&dir.join(&file), out)?;
            file_bytes += 4 * out.len() as u64;
            Some(file)
        }
        None => None,
    };
    let json = json!({
        "name": case.name,
        "op": case.op.key(),
        "params": op_params(case.op),
        "inputs": inputs,
        "output": { "name": "out", "shape": case.output_shape, "file": out_file },
        "ours_median_s": median_s,
        "copies": copies,
        "flops": case.flops,
        "bytes": case.bytes,
        "speed_target": speed_json(case.speed),
        "accuracy_target": accuracy_json(case.accuracy),
        "file_bytes": file_bytes,
        "error": error,
    });
    Ok(CaseRecord { name: case.name.clone(), json, ours_median_s: median_s, file_bytes, error })
}
