//! Host <-> device helpers for verify: uploads, NaN-poisoned outputs, downloads.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DeviceRepr};

use super::VerifyError;
use crate::cuda::weights::{device_q1_bits, device_q2_codes};
use crate::launch::{QWeightsView, QuantBits};
use crate::weights::{Q1Matrix, Q2Matrix, QMatrix};

pub(crate) fn upload<T: DeviceRepr>(stream: &Arc<CudaStream>, host: &[T]) -> Result<CudaSlice<T>, VerifyError> {
    Ok(stream.clone_htod(host)?)
}

/// A device buffer of `n` NaNs: any element a kernel fails to write stays NaN and fails the check.
pub(crate) fn poisoned(stream: &Arc<CudaStream>, n: usize) -> Result<CudaSlice<f32>, VerifyError> {
    upload(stream, &vec![f32::NAN; n])
}

pub(crate) fn download<T: DeviceRepr>(stream: &Arc<CudaStream>, dev: &impl DevicePtr<T>) -> Result<Vec<T>, VerifyError> {
    let v = stream.clone_dtoh(dev)?;
    stream.synchronize()?;
    Ok(v)
}

/// A quantized matrix in device memory (scales as on the host, payload in the device layout).
pub(crate) struct DeviceQMatrix {
    pub bits: QuantBits,
    pub n: usize,
    pub k: usize,
    pub scales: CudaSlice<u16>,
    pub payload: CudaSlice<u32>,
    pub ternary: bool,
}

impl DeviceQMatrix {
    pub fn upload(stream: &Arc<CudaStream>, w: &QMatrix) -> Result<Self, VerifyError> {
        // The payload goes up in the device layout, exactly as crate::cuda::upload does it.
        let (bits, n, k, scales, payload): (QuantBits, usize, usize, Vec<u16>, Vec<u32>) = match w {
            QMatrix::Q1(q @ Q1Matrix { n, k, scales, .. }) => {
                (QuantBits::One, *n, *k, scales.iter().map(|s| s.to_bits()).collect(), device_q1_bits(q))
            }
            QMatrix::Q2(q @ Q2Matrix { n, k, scales, .. }) => {
                (QuantBits::Two, *n, *k, scales.iter().map(|s| s.to_bits()).collect(), device_q2_codes(q))
            }
        };
        let ternary = match w {
            QMatrix::Q1(_) => true,
            QMatrix::Q2(q) => q.is_ternary(),
        };
        Ok(Self { bits, n, k, scales: upload(stream, &scales)?, payload: upload(stream, &payload)?, ternary })
    }
    pub fn view(&self) -> QWeightsView<'_> {
        let (bits, n, k, ternary) = (self.bits, self.n, self.k, self.ternary);
        QWeightsView { bits, n, k, scales: &self.scales, payload: &self.payload, ternary }
    }
}
