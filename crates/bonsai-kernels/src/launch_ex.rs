//! Kernel launches through `cuLaunchKernelEx`, so a launch can carry programmatic dependent
//! launch (PDL): the programmatic-stream-serialization attribute, which lets the next kernel's CTAs
//! be scheduled while the current one drains (hiding part of the launch gap between a decode
//! step's ~200 small kernels). Correctness rests on every kernel calling `griddep_wait()`
//! (ptx.cuh) before it reads anything an earlier kernel wrote; a test checks every entry point does.
//!
//! Every launch carries PDL unless the configuration turns it off (`pdl=off`, for debugging):
//! the library holds the choice ([`KernelLibrary::pdl`]). Its measured gains on decode and
//! prefill are in the kernel notes.


use std::ffi::c_void;
use std::marker::PhantomData;
use std::sync::Arc;

use cudarc::driver::sys::{
    CUlaunchAttribute, CUlaunchAttributeID, CUlaunchAttributeValue, CUlaunchConfig,
};
use cudarc::driver::{sys, CudaFunction, CudaStream, DeviceRepr, LaunchConfig};

use crate::cuda::KernelLibrary;
use crate::launch::{Gpu, LaunchError};

/// The programmatic-dependent-launch attribute.
fn pdl_attribute() -> CUlaunchAttribute {
    CUlaunchAttribute {
        id: CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
        pad: [0; 4],
        value: CUlaunchAttributeValue { programmaticStreamSerializationAllowed: 1 },
    }
}

/// Arguments of one launch, pushed in the kernel's parameter order (like cudarc's builder, whose
/// `launch` cannot take launch attributes).
pub struct Launch<'a> {
    lib: &'a KernelLibrary,
    stream: &'a Arc<CudaStream>,
    func: &'a CudaFunction,
    args: Vec<*mut c_void>,
    _values: PhantomData<&'a ()>,
}

impl<'a> Launch<'a> {
    /// A launch of `func` (an entry point of `gpu.lib`, whose launch policy it follows) on
    /// `gpu.stream`.
    pub fn new(gpu: Gpu<'a>, func: &'a CudaFunction) -> Self {
        Self { lib: gpu.lib, stream: gpu.stream, func, args: Vec::new(), _values: PhantomData }
    }

    /// Appends one kernel parameter; the value must outlive the launch call.
    pub fn arg<T: DeviceRepr>(&mut self, value: &'a T) -> &mut Self {
        self.args.push(value as *const T as *mut c_void);
        self
    }

    /// Enqueues the kernel on the stream.
    ///
    /// # Safety
    /// The pushed values must match the kernel's parameters in number, order and type, and every
    /// pointer among them must be valid for what the kernel does with it.
    pub unsafe fn launch(&mut self, cfg: LaunchConfig) -> Result<(), LaunchError> {
        self.stream.context().bind_to_thread()?;
        self.lib.note_launch(self.func, &cfg);
        let mut attributes = [pdl_attribute()];
        let count = usize::from(self.lib.pdl());
        let config = CUlaunchConfig {
            gridDimX: cfg.grid_dim.0,
            gridDimY: cfg.grid_dim.1,
            gridDimZ: cfg.grid_dim.2,
            blockDimX: cfg.block_dim.0,
            blockDimY: cfg.block_dim.1,
            blockDimZ: cfg.block_dim.2,
            sharedMemBytes: cfg.shared_mem_bytes,
            hStream: self.stream.cu_stream(),
            attrs: if count > 0 { attributes.as_mut_ptr() } else { std::ptr::null_mut() },
            numAttrs: count as u32,
        };
        // SAFETY: `config` and `attributes` (the first numAttrs of them in use) live across the
        // call; the caller guarantees the arguments match the kernel; `self.args` points at
        // values borrowed for 'a.
        unsafe { sys::cuLaunchKernelEx(&config, self.func.cu_function(), self.args.as_mut_ptr(), std::ptr::null_mut()) }
            .result()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::cuda::registry::{all_sources, entry_points};

    #[test]
    fn the_pdl_attribute_allows_programmatic_serialization() {
        let a = super::pdl_attribute();
        assert_eq!(a.id, cudarc::driver::sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
        // SAFETY: the union member read is the c_int set for this id.
        assert_eq!(unsafe { a.value.programmaticStreamSerializationAllowed }, 1);
    }

    /// With PDL a kernel may start before the previous one finished: each entry point must call
    /// griddep_wait() before its first read of another kernel's output. This checks the call is
    /// the first statement of every `extern "C" __global__` body, except for the kernels listed in
    /// DEFERRED_WAIT, whose named device function must call it (after reads of data no kernel
    /// writes, such as weights, or, for group_norm_normalize, of the op's input x: the previous
    /// launch is the op's own statistics pass, which waited for x's producer before it let this
    /// launch start; the decode attention reads the position and the older cache rows first,
    /// which kernels before the previous one wrote; the decode gated delta its recurrent state,
    /// which only its own launch of an earlier step wrote).
    /// (kernel name suffix, the device function that calls griddep_wait itself).
    const DEFERRED_WAIT: &[(&str, &str)] =
        &[
        ("_gemv_tc", "gemv_tc_body"),
        ("_gemm_small8", "gemm_small_body"),
        ("_gemm_small16", "gemm_small_body"),
        ("_gemm_small32", "gemm_small_body"),
        ("_gemv_b1", "gemv_b1_body"),
        ("_gemv_b1_out", "gemv_b1_body"),
        ("_gemv_b1_rope", "gemv_b1_body"),
        ("_gemv_b1_pair", "gemv_b1_body"),
        ("_gemv_b1_t2", "gemv_b1_body"),
        ("_gemv_b1_t4", "gemv_b1_body"),
        ("_gemv_b1_t8", "gemv_b1_body"),
        ("_gemv_b1_t2_out", "gemv_b1_body"),
        ("_gemv_b1_t4_out", "gemv_b1_body"),
        ("_gemv_b1_t8_out", "gemv_b1_body"),
        ("gated_delta_rows", "gated_delta_rows_body"),
        ("gated_delta_seqs", "gated_delta_rows_body"),
        ("_gemv_b1_tiles", "gemv_b1_tiles_body"),
        ("group_norm_normalize", "group_norm_normalize_body"),
        ("_seqs", "attention_decode_body"),
        ("attention_decode_g1_hd128_seqs_planes", "attention_decode_body"),
        ("attention_decode_g2_hd128_seqs_planes", "attention_decode_body"),
        ("attention_decode_g4_hd128_seqs_planes", "attention_decode_body"),
        ("attention_decode_g8_hd128_seqs_planes", "attention_decode_body"),
        ("attention_decode_g1_hd64", "attention_decode_body"),
        ("attention_decode_g2_hd64", "attention_decode_body"),
        ("attention_decode_g4_hd64", "attention_decode_body"),
        ("attention_decode_g8_hd64", "attention_decode_body"),
        ("attention_decode_g1_hd128", "attention_decode_body"),
        ("attention_decode_g1_hd128_planes", "attention_decode_body"),
        ("attention_decode_g2_hd128", "attention_decode_body"),
        ("attention_decode_g2_hd128_planes", "attention_decode_body"),
        ("attention_decode_g4_hd128", "attention_decode_body"),
        ("attention_decode_g4_hd128_planes", "attention_decode_body"),
        ("attention_decode_g8_hd128", "attention_decode_body"),
        ("attention_decode_g8_hd128_planes", "attention_decode_body"),
        ("attention_decode_g3_hd64", "attention_decode_body"),
        ("attention_decode_g5_hd64", "attention_decode_body"),
        ("attention_decode_g6_hd64", "attention_decode_body"),
        ("attention_decode_g7_hd64", "attention_decode_body"),
        ("attention_decode_g3_hd128", "attention_decode_body"),
        ("attention_decode_g5_hd128", "attention_decode_body"),
        ("attention_decode_g6_hd128", "attention_decode_body"),
        ("attention_decode_g7_hd128", "attention_decode_body"),
        ("attention_decode_g1_hd256", "attention_decode_body"),
        ("attention_decode_g2_hd256", "attention_decode_body"),
        ("attention_decode_g6_hd256", "attention_decode_body"),
        ("_hd128_planes_heads", "attention_decode_body"),
    ];

    #[test]
    fn every_entry_point_waits_for_the_previous_grid_first() {
        let text: String = all_sources().map(|s| s.text).collect::<Vec<_>>().join("\n");
        let mut seen = Vec::new();
        for (at, _) in text.match_indices("extern \"C\" __global__") {
            let mut head = &text[at..];
            for qualifier in ["__launch_bounds__(", "__maxnreg__("] {
                if let Some(lb) = head.find(qualifier).filter(|&lb| lb < head.find('{').unwrap_or(0)) {
                    let close = head[lb..].find(')').expect("the qualifier closes") + lb;
                    head = &head[close + 1..];
                }
            }
            let paren = head.find('(').expect("kernel signature");
            // The name, or for a macro-made kernel (`PREFIX##_suffix`) its suffix.
            let name = head[..paren].split(|c: char| !(c.is_alphanumeric() || c == '_')).rfind(|w| !w.is_empty()).expect("kernel name");
            let open = head.find('{').expect("kernel body");
            let mut first = head[open + 1..].trim_start().trim_start_matches('\\').trim_start();
            // A compile-time variant (`#ifdef NAME` first, a kernel variant that reads something
            // before its wait): the default build is the `#else` branch, which must wait first.
            if first.starts_with("#ifdef ") {
                let other = first.find("#else").unwrap_or_else(|| panic!("{name}: its #ifdef variant needs an #else"));
                first = first[other + "#else".len()..].trim_start();
            }
            if let Some((_, body_fn)) = DEFERRED_WAIT.iter().find(|(suffix, _)| name == *suffix) {
                let at = text.find(&format!("void {body_fn}(")).unwrap_or_else(|| panic!("{body_fn} not found"));
                let body = &text[at..];
                let end = body[1..].find("template <").map_or(body.len(), |e| e + 1);
                assert!(body[..end].contains("griddep_wait();"), "{name}: {body_fn} must call griddep_wait()");
            } else {
                assert!(first.starts_with("griddep_wait();"), "{name}: its first statement must be griddep_wait();");
            }
            seen.push(name.to_string());
        }
        for name in entry_points() {
            let defined = seen.iter().any(|s| s == name || (s.starts_with('_') && name.ends_with(s.as_str())));
            assert!(defined, "entry point {name} has no extern \"C\" __global__ definition");
        }
    }
}
