//! The `prism.hadamard.*` contract of Bonsai 2 files (bonsai2.md §4.1), read and validated.
//!
//! Such a file stores some weights folded into a blockwise signed Hadamard basis: for a listed
//! weight `W_stored = W · D_s · BlockH`, so the engine must feed it `BlockH(s ⊙ x)` instead of x;
//! the embedding (the one inverse table) stores `BlockH(s ⊙ e)` and the lookup must apply
//! `s ⊙ BlockH(z)`. A file whose transform bonsai ignores still produces fluent but wrong text,
//! so every part of the contract is checked here and anything unknown is refused, as the fork's
//! loader does: the version, transform, axis, sign mode, the block (a power of two), the sign
//! widths (multiples of the block, the value count matching exactly, each value ±1, any numeric
//! element type), the weight names (only the kinds the fork folds, no duplicates, each present
//! in the file with a width that has a sign vector) and the inverse list (only `token_embd`).

use std::collections::{BTreeMap, BTreeSet};

use crate::error::GgufError;
use crate::keys::{hadamard as k, tensor};
use crate::reader::GgufFile;
use crate::value::{MetaValue, ValueType};

/// Versions bonsai reads: 1 (separate `output.weight`), 2 (the LM head is the embedding table,
/// read forward-folded; needs `tied_output = true` and no `output.weight`).
pub const SUPPORTED_VERSIONS: [u32; 2] = [1, 2];

/// Layer weight kinds a file may list as forward-folded (`blk.N.<kind>.weight`).
pub const FOLDABLE_KINDS: [&str; 17] = [
    "attn_q",
    "attn_k",
    "attn_v",
    "attn_qkv",
    "attn_gate",
    "attn_output",
    "ffn_gate",
    "ffn_up",
    "ffn_down",
    "ffn_gate_exps",
    "ffn_up_exps",
    "ffn_down_exps",
    "ffn_gate_up_exps",
    "ffn_gate_shexp",
    "ffn_up_shexp",
    "ffn_down_shexp",
    "ssm_out",
];

/// How the sign vectors are given.
#[derive(Debug, Clone, PartialEq)]
pub enum Signs {
    /// One ±1 vector per width.
    Explicit(BTreeMap<usize, Vec<f32>>),
    /// Every sign +1 (any width that the block divides).
    Identity,
}

/// A validated `prism.hadamard.*` contract.
#[derive(Debug, Clone, PartialEq)]
pub struct HadamardConfig {
    pub version: u32,
    /// The Hadamard block n (a power of two): `BlockH` applies `H_n` to each n-slice.
    pub block: usize,
    pub signs: Signs,
    /// Weights stored forward-folded (their input activation gets `BlockH(s ⊙ x)`).
    pub weight_names: BTreeSet<String>,
    /// Whether `token_embd.weight` is stored rotated (lookup applies `s ⊙ BlockH(z)`).
    pub inverse_token_embd: bool,
    /// `ssm_out` keeps the grouped (HF) V-head column order: the activation is permuted tiled ->
    /// grouped before the sign and the transform.
    pub gdn_v_grouped: bool,
    /// Version 2: no `output.weight`; the LM head is `token_embd` read forward-folded.
    pub tied_output: bool,
}

fn bad(key: &str, reason: impl Into<String>) -> GgufError {
    GgufError::Hadamard { key: key.to_string(), reason: reason.into() }
}

fn optional_bool(file: &GgufFile, key: &str) -> Result<bool, GgufError> {
    match file.get(key) {
        None => Ok(false),
        Some(_) => file.get_bool(key),
    }
}

/// One sign value: any integer or float element, which must be exactly +1 or -1.
fn sign_value(v: &MetaValue, index: usize) -> Result<f32, GgufError> {
    let value = match *v {
        MetaValue::F32(x) => x as f64,
        MetaValue::F64(x) => x,
        ref other => match other.as_integer() {
            Some(i) if i == 1 || i == -1 => i as f64,
            Some(i) => return Err(bad(k::SIGN_VALUES, format!("value {index} is {i}, not +1 or -1"))),
            None => {
                return Err(bad(k::SIGN_VALUES, format!("holds {} values, not numbers", other.type_description())))
            }
        },
    };
    if value != 1.0 && value != -1.0 {
        return Err(bad(k::SIGN_VALUES, format!("value {index} is {value}, not +1 or -1")));
    }
    Ok(value as f32)
}

/// A `blk.N.<kind>.weight` / `output.weight` name check.
fn check_weight_name(name: &str) -> Result<(), GgufError> {
    if name == tensor::OUTPUT {
        return Ok(());
    }
    let kind = name
        .strip_prefix("blk.")
        .and_then(|rest| rest.split_once('.'))
        .filter(|(layer, _)| !layer.is_empty() && layer.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|(_, rest)| rest.strip_suffix(".weight"));
    match kind {
        Some(kind) if FOLDABLE_KINDS.contains(&kind) => Ok(()),
        _ => Err(bad(
            k::WEIGHT_NAMES,
            format!(
                "lists '{}', which is neither output.weight nor blk.N.<kind>.weight with a foldable kind ({})",
                crate::parse::escape_for_message(name),
                FOLDABLE_KINDS.join(", ")
            ),
        )),
    }
}

impl HadamardConfig {
    /// The contract of `file`: `None` when it has no `prism.*` key at all; an error for any
    /// `prism.*` key bonsai does not know, and for every broken rule (see the module doc).
    pub fn from_gguf(file: &GgufFile) -> Result<Option<HadamardConfig>, GgufError> {
        let prism_keys: Vec<&str> =
            file.metadata().iter().map(|(key, _)| key.as_str()).filter(|key| key.starts_with("prism.")).collect();
        if prism_keys.is_empty() {
            return Ok(None);
        }
        if let Some(unknown) = prism_keys.iter().find(|key| !k::ALL.contains(key)) {
            return Err(bad(
                unknown,
                "is a prism.* variant bonsai does not know; refusing the file rather than running it without the transform",
            ));
        }
        let version = file.get_u32(k::VERSION)?;
        if !SUPPORTED_VERSIONS.contains(&version) {
            return Err(bad(k::VERSION, format!("is {version}; bonsai reads versions {SUPPORTED_VERSIONS:?}")));
        }
        let block = file.get_usize(k::BLOCK_SIZE)?;
        if block == 0 || !block.is_power_of_two() {
            return Err(bad(k::BLOCK_SIZE, format!("is {block}, not a power of two")));
        }
        let expect_str = |key: &str, accepted: &[&str]| -> Result<String, GgufError> {
            let value = file.get_str(key)?;
            if !accepted.contains(&value) {
                return Err(bad(
                    key,
                    format!("is \"{}\"; bonsai accepts {accepted:?}", crate::parse::escape_for_message(value)),
                ));
            }
            Ok(value.to_string())
        };
        expect_str(k::TRANSFORM, &[k::TRANSFORM_SYLVESTER])?;
        expect_str(k::AXIS, &[k::AXIS_INPUT_LAST])?;
        let signs = match expect_str(k::SIGN_MODE, &[k::SIGN_MODE_EXPLICIT, k::SIGN_MODE_IDENTITY])?.as_str() {
            k::SIGN_MODE_IDENTITY => Signs::Identity,
            _ => Signs::Explicit(Self::explicit_signs(file, block)?),
        };
        let names = file.get_str_array(k::WEIGHT_NAMES)?;
        let mut weight_names = BTreeSet::new();
        for name in names {
            check_weight_name(name)?;
            if !weight_names.insert(name.to_string()) {
                return Err(bad(k::WEIGHT_NAMES, format!("lists '{name}' twice")));
            }
        }
        let inverse = match file.get(k::INVERSE_WEIGHT_NAMES) {
            None => Vec::new(),
            Some(_) => file.get_str_array(k::INVERSE_WEIGHT_NAMES)?,
        };
        if let Some(other) = inverse.iter().find(|n| **n != tensor::TOKEN_EMBD) {
            return Err(bad(
                k::INVERSE_WEIGHT_NAMES,
                format!(
                    "lists '{}'; only {} may be an inverse (rotated-rows) table",
                    crate::parse::escape_for_message(other),
                    tensor::TOKEN_EMBD
                ),
            ));
        }
        if inverse.len() > 1 {
            return Err(bad(k::INVERSE_WEIGHT_NAMES, format!("lists {} twice", tensor::TOKEN_EMBD)));
        }
        let tied_output = optional_bool(file, k::TIED_OUTPUT)?;
        let has_output = file.tensor_info(tensor::OUTPUT).is_some();
        match version {
            2 if !tied_output || has_output => {
                return Err(bad(k::VERSION, "is 2 (tied output), which needs tied_output = true and no output.weight"))
            }
            1 if tied_output => return Err(bad(k::TIED_OUTPUT, "is true, which only version 2 allows")),
            _ => {}
        }
        let config = HadamardConfig {
            version,
            block,
            signs,
            weight_names,
            inverse_token_embd: !inverse.is_empty(),
            gdn_v_grouped: optional_bool(file, k::GDN_V_GROUPED)?,
            tied_output,
        };
        config.check_tensors(file)?;
        Ok(Some(config))
    }

    fn explicit_signs(file: &GgufFile, block: usize) -> Result<BTreeMap<usize, Vec<f32>>, GgufError> {
        let (_, widths) = file.get_array(k::SIGN_WIDTHS)?;
        if widths.is_empty() {
            return Err(bad(k::SIGN_WIDTHS, "is empty (explicit sign mode needs one width per sign vector)"));
        }
        let widths = widths
            .iter()
            .map(|w| match w.as_integer().and_then(|v| usize::try_from(v).ok()) {
                Some(width) if width > 0 && width % block == 0 => Ok(width),
                _ => Err(bad(k::SIGN_WIDTHS, format!("holds {w:?}, not a positive multiple of the block {block}"))),
            })
            .collect::<Result<Vec<usize>, _>>()?;
        let (elem, values) = file.get_array(k::SIGN_VALUES)?;
        if elem == ValueType::String || elem == ValueType::Bool || elem == ValueType::Array {
            return Err(bad(k::SIGN_VALUES, format!("is an array of {}, not of numbers", elem.name())));
        }
        let total: usize = widths.iter().sum();
        if values.len() != total {
            return Err(bad(
                k::SIGN_VALUES,
                format!("holds {} values but the sign widths {widths:?} add up to {total}", values.len()),
            ));
        }
        let mut signs = BTreeMap::new();
        let mut start = 0;
        for width in widths {
            let vector = (start..start + width).map(|i| sign_value(&values[i], i)).collect::<Result<Vec<f32>, _>>()?;
            if signs.insert(width, vector).is_some() {
                return Err(bad(k::SIGN_WIDTHS, format!("lists width {width} twice")));
            }
            start += width;
        }
        Ok(signs)
    }

    /// Every listed weight is in the file and its input width (`ne[0]`) has a sign vector.
    fn check_tensors(&self, file: &GgufFile) -> Result<(), GgufError> {
        let mut tables: Vec<&str> = self.weight_names.iter().map(String::as_str).collect();
        if self.inverse_token_embd || self.tied_output {
            tables.push(tensor::TOKEN_EMBD);
        }
        for name in tables {
            let info = file
                .tensor_info(name)
                .ok_or_else(|| bad(k::WEIGHT_NAMES, format!("lists '{name}', which the file does not hold")))?;
            let width = info.shape[0] as usize;
            if self.sign_vector(width).is_none() {
                return Err(bad(
                    k::SIGN_WIDTHS,
                    format!("has no sign vector for width {width} (the input width of {name}, block {})", self.block),
                ));
            }
        }
        Ok(())
    }

    /// The sign vector for activations of `width`, or None when the contract has none.
    pub fn sign_vector(&self, width: usize) -> Option<Vec<f32>> {
        match &self.signs {
            Signs::Explicit(map) => map.get(&width).cloned(),
            Signs::Identity => width.is_multiple_of(self.block).then(|| vec![1.0; width]),
        }
    }

    /// Whether `name`'s input activation must be transformed before the matmul.
    pub fn folds(&self, name: &str) -> bool {
        self.weight_names.contains(name)
    }
}
