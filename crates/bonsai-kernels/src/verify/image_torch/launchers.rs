//! Adapters from the image ops' CUDA launchers to the registry's kernel signatures
//! ([`F32Launch`](super::F32Launch) / [`PrepareFn`](super::PrepareFn)), for the ops whose
//! launchers live outside this file's branch of origin (gemm_f32, conv3x3, joint_attention, the
//! ternary GEMM).

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};

use super::{F32Launch, HostInput, ImageCase, PreparedKernel};
use crate::launch::{Gpu, self, LaunchError};
use crate::ops::conv3x3::{ConvDims, Inputs as ConvInputs};
use crate::ops::gemm_f32::{GemmDims, Inputs as GemmInputs};
use crate::ops::joint_attention::{AttnDims, Inputs as AttnInputs};
use crate::verify::gpu::{upload, DeviceQMatrix};
use crate::verify::VerifyError;

/// `out = a·w^T`: inputs a `[M, K]`, w `[N, K]`.
pub(super) const GEMM_F32: F32Launch = |gpu, case, inputs, out| {
    let (a, w) = (&case.inputs[0].shape, &case.inputs[1].shape);
    let dims = GemmDims { m: a[0], n: w[0], k: a[1] };
    launch::gemm_f32::gemm_f32(gpu, None, GemmInputs { dims, a: &inputs[0], w: &inputs[1], bias: None }, out)
};

/// 3x3 conv: inputs x `[Cin, H, W]`, weight `[Cout, Cin, 3, 3]`, bias `[Cout]`.
pub(super) const CONV3X3: F32Launch = |gpu, case, inputs, out| {
    let (x, wt) = (&case.inputs[0].shape, &case.inputs[1].shape);
    let dims = ConvDims { c_in: x[0], c_out: wt[0], h: x[1], w: x[2] };
    launch::conv3x3::conv3x3(gpu, ConvInputs { dims, x: &inputs[0], weight: &inputs[1], bias: &inputs[2] }, out)
};

/// Joint attention's device buffers: q, k, v and the bf16 scratch its launcher converts into
/// (the conversion is part of every timed call).
struct JointAttentionPrepared {
    dims: AttnDims,
    q: CudaSlice<f32>,
    k: CudaSlice<f32>,
    v: CudaSlice<f32>,
    scratch: CudaSlice<u16>,
}

impl PreparedKernel for JointAttentionPrepared {
    fn launch(&mut self, gpu: Gpu<'_>, out: &mut CudaSlice<f32>) -> Result<(), LaunchError> {
        let inputs = AttnInputs { dims: self.dims, q: &self.q, k: &self.k, v: &self.v };
        launch::joint_attention::joint_attention(gpu, None, inputs, &mut self.scratch, out)
    }
}

/// q, k, v `[H, seq, hd]`.
pub(super) fn prepare_joint_attention(
    stream: &Arc<CudaStream>,
    case: &ImageCase,
    host: &[HostInput],
) -> Result<Box<dyn PreparedKernel>, VerifyError> {
    let s = &case.inputs[0].shape;
    let dims = AttnDims { heads: s[0], seq: s[1], head_dim: s[2] };
    let scratch = stream.alloc_zeros::<u16>(launch::joint_attention::scratch_len(dims))?;
    Ok(Box::new(JointAttentionPrepared {
        dims,
        q: upload(stream, &host[0].data)?,
        k: upload(stream, &host[1].data)?,
        v: upload(stream, &host[2].data)?,
        scratch,
    }))
}

/// The ternary GEMM's device buffers: activations a `[M, K]` f32 and W `[N, K]` in the device
/// 2-bit layout (the f16 tensor-core GEMM's scratch is allocated stream-ordered per call, as in
/// the model).
struct GemmTernaryPrepared {
    m: usize,
    a: CudaSlice<f32>,
    w: DeviceQMatrix,
}

impl PreparedKernel for GemmTernaryPrepared {
    fn launch(&mut self, gpu: Gpu<'_>, out: &mut CudaSlice<f32>) -> Result<(), LaunchError> {
        // The launcher's default GEMM (wgmma on Hopper, f16 where its tiles fit, else bf16x3), as
        // the DiT would run it.
        launch::matmul::matmul(gpu, &self.w.view(), &self.a, self.m, out, launch::matmul::Epilogue::Store, None)
    }
}

/// a `[M, K]` (dense f32), w `[N, K]` (its quantized form from [`HostInput::quantized`]).
pub(super) fn prepare_gemm_ternary(
    stream: &Arc<CudaStream>,
    case: &ImageCase,
    host: &[HostInput],
) -> Result<Box<dyn PreparedKernel>, VerifyError> {
    let m = case.inputs[0].shape[0];
    let w = host[1].quantized.as_ref().ok_or_else(|| {
        VerifyError::Launch(launch::LaunchError::Shape { op: "gemm_ternary", detail: "weights drawn without their blocks".into() })
    })?;
    Ok(Box::new(GemmTernaryPrepared { m, a: upload(stream, &host[0].data)?, w: DeviceQMatrix::upload(stream, w)? }))
}
