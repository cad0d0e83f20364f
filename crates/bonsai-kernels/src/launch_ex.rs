//! Kernel launches through `cuLaunchKernelEx`, so a launch can carry programmatic dependent
//! launch (PDL): the programmatic-stream-serialization attribute, which lets the next kernel's CTAs
//! be scheduled while the current one drains (hiding part of the ~2 us launch gap of a decode
//! step's ~200 small kernels). Correctness rests on every kernel calling `griddep_wait()`
//! (ptx.cuh) before it reads anything an earlier kernel wrote; a test checks every entry point does.
//!
//! Policy (`BONSAI_PDL`): unset, PDL is on for launches inside a [`PdlScope`] (the CUDA backend
//! opens one while it captures the decode-step graph) and off elsewhere; `1` turns it on for every
//! launch, `0` off for all. Measured on the H200 (docs/PERFORMANCE.md, 2026-11-29): decode +10%
//! (Bonsai-8B tg128 531.5 -> 583.7 tok/s, ternary 407.5 -> 439.0), prefill -6% (pp512 10112 ->
//! 9543), hence decode only by default.

use std::cell::Cell;
use std::ffi::c_void;
use std::marker::PhantomData;
use std::sync::{Arc, OnceLock};

use cudarc::driver::sys::{
    CUlaunchAttribute, CUlaunchAttributeID, CUlaunchAttributeValue, CUlaunchConfig,
};
use cudarc::driver::{sys, CudaFunction, CudaStream, DeviceRepr, LaunchConfig};

use crate::launch::LaunchError;

/// `1`: every launch uses programmatic dependent launch; `0`: none; unset (or anything else):
/// launches inside a [`PdlScope`].
pub const PDL_ENV: &str = "BONSAI_PDL";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PdlMode {
    All,
    Never,
    Scoped,
}

fn pdl_mode() -> PdlMode {
    static MODE: OnceLock<PdlMode> = OnceLock::new();
    *MODE.get_or_init(|| match std::env::var(PDL_ENV).as_deref().map(str::trim) {
        Ok("1") => PdlMode::All,
        Ok("0") => PdlMode::Never,
        _ => PdlMode::Scoped,
    })
}

thread_local! {
    static IN_PDL_SCOPE: Cell<bool> = const { Cell::new(false) };
}

/// While alive, launches from this thread carry the PDL attribute (unless `BONSAI_PDL=0`).
pub struct PdlScope {
    was_in_scope: bool,
}

impl PdlScope {
    pub fn enter() -> Self {
        Self { was_in_scope: IN_PDL_SCOPE.with(|s| s.replace(true)) }
    }
}

impl Drop for PdlScope {
    fn drop(&mut self) {
        IN_PDL_SCOPE.with(|s| s.set(self.was_in_scope));
    }
}

/// Whether a launch from this thread now carries the PDL attribute.
pub fn pdl_enabled() -> bool {
    match pdl_mode() {
        PdlMode::All => true,
        PdlMode::Never => false,
        PdlMode::Scoped => IN_PDL_SCOPE.with(Cell::get),
    }
}

/// Arguments of one launch, pushed in the kernel's parameter order (like cudarc's builder, whose
/// `launch` cannot take launch attributes).
pub struct Launch<'a> {
    stream: &'a Arc<CudaStream>,
    func: &'a CudaFunction,
    args: Vec<*mut c_void>,
    _values: PhantomData<&'a ()>,
}

impl<'a> Launch<'a> {
    pub fn new(stream: &'a Arc<CudaStream>, func: &'a CudaFunction) -> Self {
        Self { stream, func, args: Vec::new(), _values: PhantomData }
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
        let mut attribute = CUlaunchAttribute {
            id: CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
            pad: [0; 4],
            value: CUlaunchAttributeValue { programmaticStreamSerializationAllowed: 1 },
        };
        let pdl = pdl_enabled();
        let config = CUlaunchConfig {
            gridDimX: cfg.grid_dim.0,
            gridDimY: cfg.grid_dim.1,
            gridDimZ: cfg.grid_dim.2,
            blockDimX: cfg.block_dim.0,
            blockDimY: cfg.block_dim.1,
            blockDimZ: cfg.block_dim.2,
            sharedMemBytes: cfg.shared_mem_bytes,
            hStream: self.stream.cu_stream(),
            attrs: if pdl { &mut attribute } else { std::ptr::null_mut() },
            numAttrs: u32::from(pdl),
        };
        // SAFETY: `config` and `attribute` live across the call; the caller guarantees the
        // arguments match the kernel; `self.args` points at values borrowed for 'a.
        unsafe { sys::cuLaunchKernelEx(&config, self.func.cu_function(), self.args.as_mut_ptr(), std::ptr::null_mut()) }
            .result()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::cuda::registry::{all_sources, entry_points};

    #[test]
    fn a_pdl_scope_nests_and_restores() {
        // Only meaningful in the default (scoped) mode; the test environment leaves BONSAI_PDL unset.
        if std::env::var(super::PDL_ENV).is_ok() {
            return;
        }
        assert!(!super::pdl_enabled());
        {
            let _outer = super::PdlScope::enter();
            assert!(super::pdl_enabled());
            {
                let _inner = super::PdlScope::enter();
                assert!(super::pdl_enabled());
            }
            assert!(super::pdl_enabled(), "leaving the inner scope keeps the outer one");
        }
        assert!(!super::pdl_enabled());
    }

    /// With PDL a kernel may start before the previous one finished: each entry point must call
    /// griddep_wait() before its first read of another kernel's output. This checks the call is
    /// the first statement of every `extern "C" __global__` body, except for the kernels listed in
    /// DEFERRED_WAIT, whose named device function must call it (after reads of data no kernel
    /// writes, such as weights).
    /// (kernel name suffix, the device function that calls griddep_wait itself).
    const DEFERRED_WAIT: &[(&str, &str)] =
        &[("_gemv_tc", "gemv_tc_body"), ("_gemv_tc_tokens8", "gemv_tc_body"), ("_gemv_b1", "gemv_b1_body")];

    #[test]
    fn every_entry_point_waits_for_the_previous_grid_first() {
        let text: String = all_sources().map(|s| s.text).collect::<Vec<_>>().join("\n");
        let mut seen = Vec::new();
        for (at, _) in text.match_indices("extern \"C\" __global__") {
            let mut head = &text[at..];
            if let Some(lb) = head.find("__launch_bounds__(").filter(|&lb| lb < head.find('{').unwrap_or(0)) {
                let close = head[lb..].find(')').expect("__launch_bounds__ closes") + lb;
                head = &head[close + 1..];
            }
            let paren = head.find('(').expect("kernel signature");
            // The name, or for a macro-made kernel (`PREFIX##_suffix`) its suffix.
            let name = head[..paren].split(|c: char| !(c.is_alphanumeric() || c == '_')).rfind(|w| !w.is_empty()).expect("kernel name");
            let open = head.find('{').expect("kernel body");
            let first = head[open + 1..].trim_start().trim_start_matches('\\').trim_start();
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
