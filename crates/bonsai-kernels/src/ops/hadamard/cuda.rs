//! Launcher of `hadamard_block_in_smem` (hadamard.cu).

use cudarc::driver::{DevicePtr, DevicePtrMut, LaunchConfig};

use crate::launch::{as_i32, expect_at_least, read_ptr, shape, write_ptr, Gpu, LaunchError};
use crate::launch_ex::Launch;
use crate::ops::hadamard::VHeadPerm;

const OP: &str = "hadamard";
/// The widest block one CTA transforms: n floats of shared memory stay within the 48 KB every
/// device grants without opting in.
pub const MAX_BLOCK: usize = 8192;
/// Threads per CTA at most (one per butterfly pair up to this).
const MAX_THREADS: usize = 512;

/// The transform of `ops::hadamard` on `rows` rows of `signs.len()` values: forward
/// `y = BlockH(s ⊙ P(x))` or inverse `y = s ⊙ BlockH(x)`, blocks of `block` (a power of two
/// dividing the width, at most [`MAX_BLOCK`]). `width` is the sign vector's length. No rows:
/// nothing runs.
#[allow(clippy::too_many_arguments)]
pub fn hadamard(
    gpu: Gpu<'_>,
    x: &impl DevicePtr<f32>,
    signs: &impl DevicePtr<f32>,
    width: usize,
    block: usize,
    inverse: bool,
    tiled_to_grouped: Option<VHeadPerm>,
    rows: usize,
    y: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    if width == 0 {
        return Err(shape(OP, "empty sign vector (row width 0)".into()));
    }
    if !block.is_power_of_two() || width % block != 0 || block > MAX_BLOCK {
        return Err(shape(OP, format!("block {block} must be a power of two dividing the width {width}, at most {MAX_BLOCK}")));
    }
    let (perm_hd, perm_k, perm_rep) = match tiled_to_grouped {
        None => (0, 0, 0),
        Some(_) if inverse => {
            return Err(shape(OP, "the tiled-to-grouped permutation applies to the forward transform only".into()))
        }
        Some(p) if p.width() != width || p.head_dim == 0 => {
            return Err(shape(OP, format!("V-head permutation {p:?} covers {} values, the row has {width}", p.width())))
        }
        Some(p) => (as_i32(OP, "head_dim", p.head_dim)?, as_i32(OP, "k_heads", p.k_heads)?, as_i32(OP, "rep", p.rep)?),
    };
    expect_at_least(OP, "signs", signs.len(), width)?;
    if rows == 0 {
        return Ok(()); // as the CPU version: no rows, nothing to do
    }
    expect_at_least(OP, "x", x.len(), rows * width)?;
    expect_at_least(OP, "y", y.len(), rows * width)?;
    as_i32(OP, "rows x width", rows * width)?;
    let ctas = u32::try_from(rows * (width / block)).map_err(|_| shape(OP, format!("{rows} rows exceed the grid")))?;
    let threads = (block / 2).clamp(32, MAX_THREADS) as u32;
    let cfg = LaunchConfig { grid_dim: (ctas, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: (block * 4) as u32 };
    // The CPU version's scale (1/sqrt(n) in f32), applied at the load.
    let scale = 1.0 / (block as f32).sqrt();
    let (width_i, block_i, inverse_i) = (as_i32(OP, "width", width)?, block as i32, i32::from(inverse));
    let func = gpu.function("hadamard_block_in_smem")?;
    let (x_p, _a) = read_ptr(x, gpu.stream);
    let (s_p, _b) = read_ptr(signs, gpu.stream);
    let (y_p, _c) = write_ptr(y, gpu.stream);
    let mut l = Launch::new(gpu, func);
    l.arg(&x_p).arg(&s_p).arg(&y_p).arg(&width_i).arg(&block_i).arg(&scale).arg(&inverse_i);
    l.arg(&perm_hd).arg(&perm_k).arg(&perm_rep);
    // SAFETY: matches hadamard_block_in_smem(x, signs, y, width, block, scale, inverse, perm_hd,
    // perm_k_heads, perm_rep); x and y hold rows * width floats, signs width (checked above); the
    // permutation maps [0, width) onto itself; block * 4 bytes of shared memory <= 32 KB.
    unsafe { l.launch(cfg) }?;
    Ok(())
}
