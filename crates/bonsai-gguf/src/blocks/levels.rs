//! Every low-bit type (Q1_0, the 2-bit layouts, PTQ1_0, TQ1_0, TQ2_0) as what it means: one f16
//! scale per group and one small integer level per weight, weight = level · scale. Moving between
//! those types through [`Levels`] copies scales and levels, so it is exact whenever the target
//! can hold them: the basis of the lossless transcodes (`bonsai quantize`, the loader).

use super::{q2, tq2, trits, TensorType, TwoBitLayout};
use crate::error::GgufError;
use half::f16;
use std::borrow::Cow;

/// A tensor's weights as `levels[i] · scales[i / group]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Levels {
    /// Weights per scale.
    pub group: usize,
    pub scales: Vec<f16>,
    pub levels: Vec<i8>,
}

/// Why levels cannot be stored in a type without changing a weight.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LevelsError {
    #[error("{type_name} stores only the levels {allowed}; weight {index} has level {level}")]
    Unrepresentable { type_name: &'static str, allowed: &'static str, index: usize, level: i8 },
    #[error(
        "groups {first}..{end} of {from} weights hold different scales ({a} and {b}) but {to}-weight groups share one"
    )]
    UnequalScales { from: usize, to: usize, first: usize, end: usize, a: f32, b: f32 },
    #[error("groups of {from} weights cannot be split or merged into groups of {to}")]
    Incommensurable { from: usize, to: usize },
    #[error("{type_name} has no levels (it is not a low-bit block type)")]
    NotLowBit { type_name: &'static str },
}

/// The levels `ty` can store, as a closed range, or None for the float and Q8_0 types.
pub fn level_range(ty: TensorType) -> Option<(i8, i8)> {
    match ty {
        TensorType::Q1_0 => Some((-1, 1)),
        TensorType::TwoBit(TwoBitLayout::Tq2G128ScaleLast)
        | TensorType::Ptq1_0
        | TensorType::Tq1_0 => Some((-1, 1)),
        TensorType::TwoBit(_) | TensorType::Tq2_0 => Some((-1, 2)),
        TensorType::F32 | TensorType::F16 | TensorType::BF16 | TensorType::Q8_0 => None,
    }
}

fn allowed_text(ty: TensorType) -> &'static str {
    match ty {
        TensorType::Q1_0 => "-1 and +1 (no zero)",
        TensorType::TwoBit(TwoBitLayout::Tq2G128ScaleLast)
        | TensorType::Ptq1_0
        | TensorType::Tq1_0 => "-1, 0 and +1",
        _ => "-1, 0, +1 and +2",
    }
}

/// Decodes whole blocks of a low-bit type into scales and levels (`data` must be whole blocks).
pub fn decode_levels(ty: TensorType, data: &[u8]) -> Result<Levels, GgufError> {
    let (group, block_bytes) = (ty.block_elems(), ty.block_bytes());
    if level_range(ty).is_none() {
        return Err(GgufError::BadLength {
            op: "decode levels",
            type_name: ty.name(),
            reason: "not a low-bit block type".into(),
        });
    }
    if data.len() % block_bytes != 0 {
        return Err(GgufError::BadLength {
            op: "decode levels",
            type_name: ty.name(),
            reason: format!(
                "{} bytes is not a whole number of {block_bytes}-byte blocks",
                data.len()
            ),
        });
    }
    let n_blocks = data.len() / block_bytes;
    let mut scales = Vec::with_capacity(n_blocks);
    let mut levels = vec![0i8; n_blocks * group];
    for (block, out) in data.chunks_exact(block_bytes).zip(levels.chunks_exact_mut(group)) {
        let d = match ty {
            TensorType::Q1_0 => {
                let qs = &block[2..];
                for (j, l) in out.iter_mut().enumerate() {
                    *l = if (qs[j / 8] >> (j % 8)) & 1 == 1 { 1 } else { -1 };
                }
                f16::from_le_bytes([block[0], block[1]])
            }
            TensorType::TwoBit(TwoBitLayout::Tq2G128ScaleLast) => {
                q2::decode_levels(TwoBitLayout::Tq2G128ScaleLast, &block[..block_bytes - 2], out);
                f16::from_le_bytes([block[block_bytes - 2], block[block_bytes - 1]])
            }
            TensorType::TwoBit(layout) => {
                q2::decode_levels(layout, &block[2..], out);
                f16::from_le_bytes([block[0], block[1]])
            }
            TensorType::Ptq1_0 => trits::decode_block(&trits::PTQ1_0, block, out),
            TensorType::Tq1_0 => trits::decode_block(&trits::TQ1_0, block, out),
            TensorType::Tq2_0 => tq2::decode_block(block, out),
            TensorType::F32 | TensorType::F16 | TensorType::BF16 | TensorType::Q8_0 => {
                unreachable!("checked above")
            }
        };
        scales.push(d);
    }
    Ok(Levels { group, scales, levels })
}

/// Stores levels as blocks of `ty`, exactly, or says why it cannot (a level `ty` lacks, or
/// groups that would have to share a scale but do not; see [`Levels::regroup`]).
pub fn encode_levels(ty: TensorType, src: &Levels) -> Result<Vec<u8>, LevelsError> {
    let (lo, hi) = level_range(ty).ok_or(LevelsError::NotLowBit { type_name: ty.name() })?;
    if let Some((index, &level)) = src
        .levels
        .iter()
        .enumerate()
        .find(|(_, &l)| l < lo || l > hi || (ty == TensorType::Q1_0 && l == 0))
    {
        return Err(LevelsError::Unrepresentable {
            type_name: ty.name(),
            allowed: allowed_text(ty),
            index,
            level,
        });
    }
    let regrouped = src.regroup(ty.block_elems())?;
    let (group, block_bytes) = (ty.block_elems(), ty.block_bytes());
    let mut out = vec![0u8; regrouped.scales.len() * block_bytes];
    let blocks = out.chunks_exact_mut(block_bytes).zip(regrouped.levels.chunks_exact(group));
    for ((block, levels), &d) in blocks.zip(&regrouped.scales) {
        match ty {
            TensorType::Q1_0 => {
                block[..2].copy_from_slice(&d.to_le_bytes());
                for (j, &l) in levels.iter().enumerate() {
                    if l > 0 {
                        block[2 + j / 8] |= 1 << (j % 8);
                    }
                }
            }
            TensorType::TwoBit(TwoBitLayout::Tq2G128ScaleLast) => {
                q2::encode_levels(levels, &mut block[..block_bytes - 2]);
                block[block_bytes - 2..].copy_from_slice(&d.to_le_bytes());
            }
            TensorType::TwoBit(_) => {
                block[..2].copy_from_slice(&d.to_le_bytes());
                q2::encode_levels(levels, &mut block[2..]);
            }
            TensorType::Ptq1_0 => trits::encode_block(&trits::PTQ1_0, levels, d, block),
            TensorType::Tq1_0 => trits::encode_block(&trits::TQ1_0, levels, d, block),
            TensorType::Tq2_0 => tq2::encode_block(levels, d, block),
            TensorType::F32 | TensorType::F16 | TensorType::BF16 | TensorType::Q8_0 => {
                unreachable!("level_range is None")
            }
        }
    }
    Ok(out)
}

impl Levels {
    /// The same weights with `group` weights per scale. Splitting a group repeats its scale
    /// (always exact); merging needs the merged groups to agree on the scale wherever one of
    /// them has a non-zero level (a group of zeros is zero under any scale).
    pub fn regroup(&self, group: usize) -> Result<Cow<'_, Levels>, LevelsError> {
        let from = self.group;
        if group == from {
            return Ok(Cow::Borrowed(self));
        }
        if group < from {
            if from % group != 0 {
                return Err(LevelsError::Incommensurable { from, to: group });
            }
            let per = from / group;
            let scales = self.scales.iter().flat_map(|&d| std::iter::repeat_n(d, per)).collect();
            return Ok(Cow::Owned(Levels { group, scales, levels: self.levels.clone() }));
        }
        if group % from != 0 || self.levels.len() % group != 0 {
            return Err(LevelsError::Incommensurable { from, to: group });
        }
        let per = group / from;
        let mut scales = Vec::with_capacity(self.scales.len() / per);
        for (merged, (parts, levels)) in
            self.scales.chunks_exact(per).zip(self.levels.chunks_exact(group)).enumerate()
        {
            let used = |i: &usize| levels[i * from..(i + 1) * from].iter().any(|&l| l != 0);
            let mut nonzero = (0..per).filter(used);
            let chosen = nonzero.next().map_or(parts[0], |i| parts[i]);
            if let Some(i) = nonzero.find(|&i| parts[i].to_bits() != chosen.to_bits()) {
                return Err(LevelsError::UnequalScales {
                    from,
                    to: group,
                    first: merged * per,
                    end: merged * per + per,
                    a: chosen.to_f32(),
                    b: parts[i].to_f32(),
                });
            }
            scales.push(chosen);
        }
        Ok(Cow::Owned(Levels { group, scales, levels: self.levels.clone() }))
    }

    /// Every weight as f32 (exact: a small integer times an f16).
    pub fn values(&self) -> Vec<f32> {
        self.levels
            .iter()
            .enumerate()
            .map(|(i, &l)| f32::from(l) * self.scales[i / self.group].to_f32())
            .collect()
    }
}
