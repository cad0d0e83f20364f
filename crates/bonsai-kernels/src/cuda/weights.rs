//! Quantized weight matrices on the device, in exactly the host layout of
//! `crate::weights` (scales as raw f16 bits, then the packed bit or code words), uploaded once.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};

use super::error::KernelError;
use crate::weights::{Q1Matrix, Q2Matrix, QMatrix};

/// A 1-bit matrix on the device: `scales[b]` are f16 bits, `bits[4b..4b+4]` its signs.
pub struct GpuQ1Matrix {
    pub n: usize,
    pub k: usize,
    pub scales: CudaSlice<u16>,
    pub bits: CudaSlice<u32>,
}

/// A 2-bit matrix on the device: `scales[b]` are f16 bits, `codes[8b..8b+8]` its codes.
pub struct GpuQ2Matrix {
    pub n: usize,
    pub k: usize,
    pub scales: CudaSlice<u16>,
    pub codes: CudaSlice<u32>,
}

/// Either device matrix.
pub enum GpuQMatrix {
    Q1(GpuQ1Matrix),
    Q2(GpuQ2Matrix),
}

impl GpuQMatrix {
    pub fn n(&self) -> usize {
        match self {
            GpuQMatrix::Q1(m) => m.n,
            GpuQMatrix::Q2(m) => m.n,
        }
    }
    pub fn k(&self) -> usize {
        match self {
            GpuQMatrix::Q1(m) => m.k,
            GpuQMatrix::Q2(m) => m.k,
        }
    }
}

/// Copies `matrix` to the device on `stream` (asynchronously; later work on the stream sees it).
pub fn upload(matrix: &QMatrix, stream: &Arc<CudaStream>) -> Result<GpuQMatrix, KernelError> {
    Ok(match matrix {
        QMatrix::Q1(m) => GpuQMatrix::Q1(upload_q1(m, stream)?),
        QMatrix::Q2(m) => GpuQMatrix::Q2(upload_q2(m, stream)?),
    })
}

pub fn upload_q1(m: &Q1Matrix, stream: &Arc<CudaStream>) -> Result<GpuQ1Matrix, KernelError> {
    let scales: &[u16] = bytemuck::cast_slice(&m.scales);
    Ok(GpuQ1Matrix {
        n: m.n,
        k: m.k,
        scales: stream.clone_htod(scales).map_err(KernelError::driver("uploading Q1 scales"))?,
        bits: stream.clone_htod(&m.bits).map_err(KernelError::driver("uploading Q1 sign bits"))?,
    })
}

pub fn upload_q2(m: &Q2Matrix, stream: &Arc<CudaStream>) -> Result<GpuQ2Matrix, KernelError> {
    let scales: &[u16] = bytemuck::cast_slice(&m.scales);
    Ok(GpuQ2Matrix {
        n: m.n,
        k: m.k,
        scales: stream.clone_htod(scales).map_err(KernelError::driver("uploading Q2 scales"))?,
        codes: stream.clone_htod(&m.codes).map_err(KernelError::driver("uploading Q2 codes"))?,
    })
}
