//! Kernel launches through `cuLaunchKernelEx`, so a launch can carry programmatic dependent
//! launch (PDL): the programmatic-stream-serialization attribute, which lets the next kernel's CTAs
//! be scheduled while the current one drains (hiding part of the ~2 us launch gap of a decode
//! step's ~200 small kernels). Correctness rests on every kernel calling `griddep_wait()`
//! (ptx.cuh) before it reads anything an earlier kernel wrote; a test checks every entry point does.
//!
//! Every launch carries PDL unless the configuration turns it off (`pdl=off`, for debugging):
//! the library holds the choice ([`KernelLibrary::pdl`]). Its measured gains on decode and
//! prefill are in the kernel notes.
//!
//! A launch may also be cooperative ([`Launch::cooperative`]): all its CTAs are resident at once,
//! or the launch fails, so its kernel may use the grid-wide barrier `grid_sync`
//! (cuda/grid_sync.cuh). Size such a grid with [`max_cooperative_ctas`] and, under the CPU
//! emulator (one OS thread per CTA), [`cooperative_grid_cap`].

use std::ffi::c_void;
use std::marker::PhantomData;
use std::sync::{Arc, OnceLock};

use cudarc::driver::sys::{
    CUdevice_attribute, CUlaunchAttribute, CUlaunchAttributeID, CUlaunchAttributeValue, CUlaunchConfig,
};
use cudarc::driver::{sys, CudaFunction, CudaStream, DeviceRepr, LaunchConfig};

use crate::cuda::KernelLibrary;
use crate::launch::{device_attribute, sm_count, LaunchError};

/// The most CTAs a cooperative launch may have, when set (a positive integer): the CPU emulator
/// runs each CTA of a cooperative grid on its own OS thread and refuses more than 64
/// (scripts/emu.sh sets 4). Read by [`cooperative_grid_cap`].
pub const COOP_CTAS_ENV: &str = "BONSAI_COOP_CTAS";

/// `BONSAI_COOP_CTAS`: the cap on a cooperative grid's CTAs, if set. A value that is not a
/// positive integer is reported (a warning, once) and ignored: the launch then goes ahead with
/// its uncapped grid, which the emulator refuses with a message naming the variable.
pub fn cooperative_grid_cap() -> Option<u32> {
    static CAP: OnceLock<Option<u32>> = OnceLock::new();
    *CAP.get_or_init(|| parse_grid_cap(std::env::var(COOP_CTAS_ENV).ok().as_deref()))
}

fn parse_grid_cap(value: Option<&str>) -> Option<u32> {
    let value = value?;
    match value.trim().parse::<u32>() {
        Ok(cap) if cap > 0 => Some(cap),
        _ => {
            tracing::warn!("{COOP_CTAS_ENV}={value:?} is not a positive integer; ignored");
            None
        }
    }
}

/// How many CTAs of `func` (`block_threads` threads, `dynamic_smem_bytes` of dynamic shared
/// memory each) a cooperative launch on the stream's device may have: SM count x the CTAs one SM
/// holds at once (cuOccupancyMaxActiveBlocksPerMultiprocessor). 0 when the device cannot launch
/// cooperatively or such a CTA does not fit on an SM. Not capped by [`cooperative_grid_cap`].
pub fn max_cooperative_ctas(
    stream: &Arc<CudaStream>,
    func: &CudaFunction,
    block_threads: u32,
    dynamic_smem_bytes: u32,
) -> Result<u32, LaunchError> {
    if device_attribute(stream, CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH)? == 0 {
        return Ok(0);
    }
    let sms = sm_count(stream)?;
    stream.context().bind_to_thread()?;
    let per_sm = func.occupancy_max_active_blocks_per_multiprocessor(block_threads, dynamic_smem_bytes as usize, None)?;
    Ok(u32::try_from(sms).unwrap_or(u32::MAX).saturating_mul(per_sm))
}

/// Launch attributes one launch may carry: PDL and cooperative.
const MAX_LAUNCH_ATTRIBUTES: usize = 2;

/// The attributes of a launch with PDL and/or cooperative on, packed at the front of the array,
/// and how many there are.
fn launch_attributes(pdl: bool, cooperative: bool) -> ([CUlaunchAttribute; MAX_LAUNCH_ATTRIBUTES], usize) {
    let pdl_attribute = CUlaunchAttribute {
        id: CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
        pad: [0; 4],
        value: CUlaunchAttributeValue { programmaticStreamSerializationAllowed: 1 },
    };
    let cooperative_attribute = CUlaunchAttribute {
        id: CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_COOPERATIVE,
        pad: [0; 4],
        value: CUlaunchAttributeValue { cooperative: 1 },
    };
    let mut attributes = [pdl_attribute; MAX_LAUNCH_ATTRIBUTES];
    let mut count = 0;
    for (on, attribute) in [(pdl, pdl_attribute), (cooperative, cooperative_attribute)] {
        if on {
            attributes[count] = attribute;
            count += 1;
        }
    }
    (attributes, count)
}

/// Arguments of one launch, pushed in the kernel's parameter order (like cudarc's builder, whose
/// `launch` cannot take launch attributes).
pub struct Launch<'a> {
    lib: &'a KernelLibrary,
    stream: &'a Arc<CudaStream>,
    func: &'a CudaFunction,
    args: Vec<*mut c_void>,
    cooperative: bool,
    _values: PhantomData<&'a ()>,
}

impl<'a> Launch<'a> {
    /// A launch of `func` (an entry point of `lib`, whose launch policy it follows) on `stream`.
    pub fn new(lib: &'a KernelLibrary, stream: &'a Arc<CudaStream>, func: &'a CudaFunction) -> Self {
        Self { lib, stream, func, args: Vec::new(), cooperative: false, _values: PhantomData }
    }

    /// Makes the launch cooperative (CU_LAUNCH_ATTRIBUTE_COOPERATIVE): every CTA resident at
    /// once, or the launch fails (CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE) when the grid exceeds
    /// [`max_cooperative_ctas`]. Needed by any kernel that calls `grid_sync`.
    pub fn cooperative(&mut self) -> &mut Self {
        self.cooperative = true;
        self
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
        self.lib.note_launch(|| crate::trace::launch_record(self.func.cu_function(), &cfg));
        let (mut attributes, count) = launch_attributes(self.lib.pdl(), self.cooperative);
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
    fn launch_attributes_pack_the_ones_that_are_on() {
        use cudarc::driver::sys::CUlaunchAttributeID::{
            CU_LAUNCH_ATTRIBUTE_COOPERATIVE as COOPERATIVE,
            CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION as PDL,
        };
        for (pdl, cooperative, want) in [
            (false, false, vec![]),
            (true, false, vec![PDL]),
            (false, true, vec![COOPERATIVE]),
            (true, true, vec![PDL, COOPERATIVE]),
        ] {
            let (attributes, count) = super::launch_attributes(pdl, cooperative);
            let ids: Vec<_> = attributes[..count].iter().map(|a| a.id).collect();
            assert_eq!(ids, want, "pdl {pdl}, cooperative {cooperative}");
            for a in &attributes[..count] {
                // SAFETY: both union members read are c_int at offset 0, set for their own id.
                let on = unsafe {
                    if a.id == COOPERATIVE {
                        a.value.cooperative
                    } else {
                        a.value.programmaticStreamSerializationAllowed
                    }
                };
                assert_eq!(on, 1, "{:?} is set on", a.id);
            }
        }
    }

    #[test]
    fn the_cooperative_grid_cap_is_a_positive_integer_or_none() {
        assert_eq!(super::parse_grid_cap(None), None);
        assert_eq!(super::parse_grid_cap(Some("4")), Some(4));
        assert_eq!(super::parse_grid_cap(Some(" 64 ")), Some(64));
        for bad in ["0", "-3", "four", ""] {
            assert_eq!(super::parse_grid_cap(Some(bad)), None, "{bad:?}");
        }
    }

    /// With PDL a kernel may start before the previous one finished: each entry point must call
    /// griddep_wait() before its first read of another kernel's output. This checks the call is
    /// the first statement of every `extern "C" __global__` body, except for the kernels listed in
    /// DEFERRED_WAIT, whose named device function must call it (after reads of data no kernel
    /// writes, such as weights, or, for group_norm_normalize, of the op's input x: the previous
    /// launch is the op's own statistics pass, which waited for x's producer before it let this
    /// launch start; the decode attention reads the position and the older cache rows first,
    /// which kernels before the previous one wrote).
    /// (kernel name suffix, the device function that calls griddep_wait itself).
    const DEFERRED_WAIT: &[(&str, &str)] =
        &[
        ("_gemv_tc", "gemv_tc_body"),
        ("_gemv_tc_tokens8", "gemv_tc_body"),
        ("_gemv_b1", "gemv_b1_body"),
        ("_gemv_b1_out", "gemv_b1_body"),
        ("_gemv_b1_rope", "gemv_b1_body"),
        ("_gemv_b1_tiles", "gemv_b1_tiles_body"),
        ("group_norm_normalize", "group_norm_normalize_body"),
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
