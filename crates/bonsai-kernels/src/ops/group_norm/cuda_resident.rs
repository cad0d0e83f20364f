//! Launcher of `group_norm_resident` (group_norm_resident.cu): GroupNorm in one cooperative
//! launch, x read once into shared memory and y written once from it, 8 bytes per element.
//! It runs when every CTA's slice (plus its small statistics tables) fits the device's opt-in
//! shared memory with one CTA per SM, the plane is a multiple of 4 floats, x and y are 16-byte
//! aligned and the device can launch cooperatively; else [`geometry`] says why not and the
//! two-kernel path runs (cuda.rs).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use cudarc::driver::{CudaFunction, CudaStream, LaunchConfig};

use super::GroupNormDims;
use crate::cuda::KernelLibrary;
use crate::launch::{device_attribute, shape, sm_count, LaunchError};
use crate::launch_ex::{cooperative_grid_cap, max_cooperative_ctas, Launch};

const OP: &str = "group_norm";
const KERNEL: &str = "group_norm_resident";
/// GN_RES_THREADS in group_norm_resident.cu.
const THREADS: u32 = 1024;
/// Bytes each element costs the resident path: read once, written once.
pub const RESIDENT_TRAFFIC_BYTES_PER_ELEMENT: usize = 8;
/// The most CTAs a resident launch uses (its partial sums take 2·(CTAs + G) scratch values, and
/// `scratch_len` must not depend on the device): far above any GPU's SM count.
pub(crate) const MAX_RESIDENT_CTAS: usize = 1024;
const FLOAT4_BYTES: usize = 16;
/// Shared bytes per touched group (an f64 root, an f32 shift and mean) and channel (3 f32).
const GROUP_TABLE_BYTES: usize = 16;
const CHANNEL_TABLE_BYTES: usize = 12;

/// One resident launch's geometry (all counts in float4s except the tables).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResidentGeometry {
    pub ctas: usize,
    pub slice4: usize,
    /// Upper bounds on the groups and channels one slice touches (the shared tables' lengths).
    pub max_groups: usize,
    pub max_channels: usize,
    pub smem_bytes: usize,
}

/// Why the resident path cannot run a call (the two-kernel path then runs, or a forced resident
/// call fails with this text).
pub type NotResident = String;

/// The geometry for `dims` with at most `cta_limit` CTAs of at most `smem_limit` dynamic shared
/// bytes each, or why none fits. Pure: the launcher supplies the device's limits.
pub fn geometry(dims: GroupNormDims, cta_limit: usize, smem_limit: usize) -> Result<ResidentGeometry, NotResident> {
    if dims.plane % 4 != 0 {
        return Err(format!("a {}-pixel plane is not a multiple of 4 floats", dims.plane));
    }
    let total4 = dims.channels * dims.plane / 4;
    let cta_limit = cta_limit.min(MAX_RESIDENT_CTAS);
    if cta_limit == 0 {
        return Err("this device cannot launch it cooperatively".into());
    }
    let slice4 = total4.div_ceil(cta_limit);
    // The kernel indexes float4s with i32 up to the end of the last slice.
    if i32::try_from(total4 + slice4).is_err() {
        return Err(format!("{total4} float4s exceed the kernel's 32-bit indices"));
    }
    let ctas = total4.div_ceil(slice4);
    let (plane4, group4) = (dims.plane / 4, dims.group_len() / 4);
    let max_groups = ((slice4 - 1) / group4 + 2).min(dims.groups);
    let max_channels = ((slice4 - 1) / plane4 + 2).min(dims.channels);
    let smem_bytes = slice4 * FLOAT4_BYTES + max_groups * GROUP_TABLE_BYTES + max_channels * CHANNEL_TABLE_BYTES;
    if smem_bytes > smem_limit {
        return Err(format!("{ctas} slices of {smem_bytes} bytes exceed the {smem_limit} bytes of shared memory per CTA"));
    }
    Ok(ResidentGeometry { ctas, slice4, max_groups, max_channels, smem_bytes })
}

/// Geometry answers per (kernel handle, shape): the queries behind one cost more host time than
/// a small launch's whole GPU time.
type GeometryCache = HashMap<(usize, GroupNormDims), Result<ResidentGeometry, NotResident>>;

/// The geometry on the stream's device: one CTA per SM (fewer under `BONSAI_COOP_CTAS`), the
/// opt-in shared memory less the kernel's static part, and the cooperative occupancy check.
/// Remembered per kernel handle and shape.
pub(crate) fn device_geometry(
    lib: &KernelLibrary,
    stream: &Arc<CudaStream>,
    dims: GroupNormDims,
) -> Result<Result<ResidentGeometry, NotResident>, LaunchError> {
    static CACHE: OnceLock<Mutex<GeometryCache>> = OnceLock::new();
    let func = lib.function(KERNEL)?;
    let key = (func.cu_function() as usize, dims);
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(known) = cache.lock().map_err(|_| shape(OP, "geometry cache poisoned".into()))?.get(&key) {
        return Ok(known.clone());
    }
    let answer = query_geometry(stream, func, dims)?;
    cache.lock().map_err(|_| shape(OP, "geometry cache poisoned".into()))?.insert(key, answer.clone());
    Ok(answer)
}

fn query_geometry(
    stream: &Arc<CudaStream>,
    func: &CudaFunction,
    dims: GroupNormDims,
) -> Result<Result<ResidentGeometry, NotResident>, LaunchError> {
    if device_attribute(stream, CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH)? == 0 {
        return Ok(Err("this device cannot launch cooperatively".into()));
    }
    let sms = sm_count(stream)?;
    let cta_limit = cooperative_grid_cap().map_or(sms, |cap| sms.min(cap as usize));
    let optin = device_attribute(stream, CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?;
    stream.context().bind_to_thread()?;
    let dynamic_limit = optin.saturating_sub(func.shared_size_bytes()?.max(0) as usize);
    let geo = match geometry(dims, cta_limit, dynamic_limit) {
        Ok(geo) => geo,
        Err(why) => return Ok(Err(why)),
    };
    // The whole opt-in limit (not this shape's need), so every cached geometry stays launchable.
    let limit = i32::try_from(dynamic_limit).map_err(|_| shape(OP, format!("{dynamic_limit} bytes of shared memory")))?;
    func.set_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, limit)?;
    let resident = max_cooperative_ctas(stream, func, THREADS, geo.smem_bytes as u32)? as usize;
    if resident < geo.ctas {
        return Ok(Err(format!("{} CTAs of {} shared bytes, only {resident} can be resident", geo.ctas, geo.smem_bytes)));
    }
    Ok(Ok(geo))
}

/// Device pointers of one call (the launcher in cuda.rs holds their guards).
pub(crate) struct ResidentArgs {
    pub x: u64,
    pub gamma: u64,
    pub beta: u64,
    pub partial: u64,
    pub counter: u64,
    pub y: u64,
}

/// Enqueues the resident kernel. The caller checked every buffer length (cuda.rs `plan`), the
/// 16-byte alignment of x and y, that `counter` is the scratch's first word (zero between
/// calls) and `partial` has 2·(geo.ctas + G) values after it.
pub(crate) fn launch_resident(
    lib: &KernelLibrary,
    stream: &Arc<CudaStream>,
    p: &ResidentArgs,
    dims: GroupNormDims,
    geo: ResidentGeometry,
    eps: f32,
    apply_silu: bool,
) -> Result<(), LaunchError> {
    let func = lib.function(KERNEL)?;
    let int = |v: usize| i32::try_from(v).map_err(|_| shape(OP, format!("{v} exceeds the kernel's 32-bit indices")));
    let cpg = int(dims.channels / dims.groups)?;
    let (plane4, group4, slice4) = (int(dims.plane / 4)?, int(dims.group_len() / 4)?, int(geo.slice4)?);
    let total4 = int(dims.channels * dims.plane / 4)?;
    let (max_groups, max_channels, silu) = (int(geo.max_groups)?, int(geo.max_channels)?, i32::from(apply_silu));
    let mut l = Launch::new(lib, stream, func);
    l.arg(&p.x).arg(&p.gamma).arg(&p.beta).arg(&p.partial).arg(&p.counter).arg(&eps).arg(&cpg).arg(&plane4);
    l.arg(&group4).arg(&slice4).arg(&total4).arg(&max_groups).arg(&max_channels).arg(&silu).arg(&p.y);
    l.cooperative();
    let cfg = LaunchConfig { grid_dim: (geo.ctas as u32, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: geo.smem_bytes as u32 };
    // SAFETY: matches group_norm_resident(x, gamma, beta, partial, counter, eps, C/G, plane4,
    // group4, slice4, total4, max_groups, max_channels, apply_silu, y); the caller checked the
    // buffers (see above); device_geometry set the dynamic shared memory limit and checked that
    // geo.ctas CTAs are co-resident, and the launch is cooperative, so grid_sync cannot hang.
    unsafe { l.launch(cfg) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Which partial slots each CTA writes (k + g per touched group), and the groups' slot ranges.
    fn slots(dims: GroupNormDims, geo: &ResidentGeometry) -> (Vec<usize>, Vec<(usize, usize)>) {
        let (total4, group4) = (dims.channels * dims.plane / 4, dims.group_len() / 4);
        let mut written = Vec::new();
        for k in 0..geo.ctas {
            let (b, e) = (k * geo.slice4, ((k + 1) * geo.slice4).min(total4));
            assert!(b < e, "{dims:?}: CTA {k} of {geo:?} is empty");
            let (g0, g1) = (b / group4, (e - 1) / group4);
            assert!(g1 - g0 < geo.max_groups, "{dims:?}: {geo:?} CTA {k} touches groups {g0}..={g1}");
            assert!((e - 1) / (dims.plane / 4) - b / (dims.plane / 4) < geo.max_channels, "{dims:?}: {geo:?}");
            written.extend((g0..=g1).map(|g| k + g));
        }
        let ranges = (0..dims.groups).map(|g| (g * group4 / geo.slice4 + g, ((g + 1) * group4 - 1) / geo.slice4 + g)).collect();
        (written, ranges)
    }

    #[test]
    fn every_partial_slot_is_written_once_and_read_by_its_group() {
        for (channels, groups, plane) in [(15, 5, 96), (64, 32, 16), (4, 1, 1160), (384, 32, 4096), (96, 32, 4096), (32, 32, 4), (8, 2, 64)] {
            let dims = GroupNormDims { channels, groups, plane };
            for cta_limit in [1, 3, 4, 7, 132] {
                let geo = geometry(dims, cta_limit, usize::MAX).expect("fits without a limit");
                assert!(geo.ctas <= cta_limit);
                let (written, ranges) = slots(dims, &geo);
                let mut sorted = written.clone();
                sorted.sort_unstable();
                sorted.dedup();
                assert_eq!(sorted.len(), written.len(), "{dims:?} {geo:?}: a slot written twice");
                assert!(written.iter().all(|&s| s < geo.ctas + groups), "{dims:?} {geo:?}");
                for (a, b) in ranges {
                    assert!((a..=b).all(|s| written.contains(&s)), "{dims:?} {geo:?}: a group reads an unwritten slot");
                }
            }
        }
    }

    #[test]
    fn shapes_that_do_not_fit_or_are_odd_are_refused() {
        const H200_OPTIN: usize = 232_448 - 256;
        let vae = |hw: usize| GroupNormDims { channels: 384, groups: 32, plane: hw * hw };
        // One CTA per SM of the H200: 64² and 128² fit, 256² does not.
        assert!(geometry(vae(64), 132, H200_OPTIN).is_ok());
        let g128 = geometry(vae(128), 132, H200_OPTIN).expect("128² fits");
        assert!(g128.smem_bytes > 180_000, "{g128:?}");
        assert!(geometry(vae(256), 132, H200_OPTIN).is_err());
        // Capped at 4 CTAs (the emulator), 64² no longer fits: the two-kernel path runs.
        assert!(geometry(vae(64), 4, H200_OPTIN).is_err());
        assert!(geometry(GroupNormDims { channels: 64, groups: 32, plane: 63 }, 132, H200_OPTIN).is_err(), "odd plane");
        assert!(geometry(vae(64), 0, H200_OPTIN).is_err(), "no cooperative launch");
    }
}
