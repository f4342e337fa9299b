//! The difference image and its variance on every backend: D = I − R ⊗ K and VD = VI + VR ⊗ K², with K a
//! 21 × 21 kernel varying as a degree-2 polynomial over the field (cl/common/imgsub.h has the arithmetic and
//! the layout). This is the step GAISP moved to the GPU, one work-item per output pixel.
//!
//! `subtract` gives it the fitted kernel (fit.rs). `run imgsub` and `bench` use the kernel that matches the
//! field's PSFs if they were Gaussian: at 5 × 5 places, flux_ratio × a normalised Gaussian of σ² = σ_sci² −
//! σ_ref² (σ = FWHM/2.3548 of each image's PSF there), fitted per tap by least squares to the six spatial
//! terms. That difference is not noise-limited (the PSFs are Moffat and the science one elliptical), but every
//! backend computes the same convolution as in the pipeline. The `cpu` model's arithmetic is in convolve.rs.

use super::convolve::{convolve, Kernel, Real};
use super::field::{generate, FieldSpec, Image};
use crate::backend::{
    resident_id, Accelerator, BufferSpec, DType, HostDestination, HostSlice, HostVec, KernelJob,
    LaterDestination, Launch, Local, Precision, Program, ReadBack, Step, StepArg, Target,
};
use crate::exec::{self, DeviceBudget, Field, Measured, RunError, RunOptions, SinglePass};
use crate::workload::{Accuracy, Verdict, Work, Workload};
use rayon::prelude::*;
use serde::Serialize;
use std::sync::Arc;

pub static PROGRAM: Program = Program {
    name: "imgsub",
    opencl: include_str!("../../../cl/imgsub.cl"),
    sycl: include_str!("../../../ports/sycl/imgsub.cpp"),
    headers: &[
        (
            "astro_dialect.h",
            include_str!("../../../cl/common/astro_dialect.h"),
        ),
        ("imgsub.h", include_str!("../../../cl/common/imgsub.h")),
    ],
    opencl_options: "",
};

/// Kernel half width and side, and the spatial terms (cl/common/imgsub.h).
pub const HALF: usize = 10;
/// Pixels of a row per device work-item (IMG_PIXELS_F32 and _F64 in cl/common/imgsub.h): float32 takes
/// more on CPUs than on GPUs (the header says why); CUDA is built with the GPU value.
fn pixels_per_item(mode: Precision, gpu: bool) -> usize {
    match (mode, gpu) {
        (Precision::F32, true) => 4,
        (Precision::F32, false) => 8,
        (Precision::F64, _) => 4,
    }
}
pub const SIDE: usize = 2 * HALF + 1;
pub const TERMS: usize = 6;
const TAPS: usize = SIDE * SIDE;

/// Tolerances, relative to the convolved reference R ⊗ K at each pixel (for D) and to VD: the 1e-6
/// for float32 (GAISP reports 9.7e-8 against its CPU code); float64 to 1e-12.
pub const TOL_F32_REL: f64 = 1e-6;
pub const TOL_F64_REL: f64 = 1e-12;

/// Fitted kernel terms smaller than this are set to 0 (see [`VaryingKernel::gaussian_match`]).
const KBAR_FLOOR: f64 = 1e-15;

/// A spatially varying kernel, Kbar tap-major (`kbar[tap * TERMS + m]`), and the background
/// b0 + b1 x̂ + b2 ŷ subtracted with it (0 for a kernel that is not fitted).
#[derive(Debug, Clone, PartialEq)]
pub struct VaryingKernel {
    pub kbar: Vec<f64>,
    pub background: [f64; 3],
}

impl VaryingKernel {
    /// A kernel from its Kbar, with no background. Terms smaller than KBAR_FLOOR are set to 0: a Gaussian's
    /// far taps fall below 1e-40, which as float32 (and squared for the variance) would be denormal, and x86
    /// cores compute those 10-100x slower; they are far below float32's resolution of a kernel that sums to
    /// order 1.
    pub fn from_kbar(mut kbar: Vec<f64>) -> VaryingKernel {
        assert_eq!(
            kbar.len(),
            TAPS * TERMS,
            "Kbar has {TAPS} taps of {TERMS} terms"
        );
        for v in kbar.iter_mut() {
            if v.abs() < KBAR_FLOOR {
                *v = 0.0;
            }
        }
        VaryingKernel {
            kbar,
            background: [0.0; 3],
        }
    }

    /// The device buffer: Kbar then the three background terms (cl/common/imgsub.h).
    pub fn device_terms(&self) -> Vec<f64> {
        let mut v = self.kbar.clone();
        v.extend_from_slice(&self.background);
        v
    }

    /// A constant kernel (no spatial variation): the matched filter of detection.
    pub fn constant(taps: &[f64]) -> VaryingKernel {
        assert_eq!(taps.len(), TAPS);
        let mut kbar = vec![0.0; TAPS * TERMS];
        for (t, &k) in taps.iter().enumerate() {
            kbar[t * TERMS] = k;
        }
        VaryingKernel::from_kbar(kbar)
    }

    /// The Gaussian PSF match of a field (module docs), fitted at 5 × 5 places.
    pub fn gaussian_match(spec: &FieldSpec) -> VaryingKernel {
        let n = spec.size as f64 - 1.0;
        let places: Vec<(f64, f64)> = (0..25)
            .map(|k| (n * (k % 5) as f64 / 4.0, n * (k / 5) as f64 / 4.0))
            .collect();
        let design = nalgebra::DMatrix::from_fn(places.len(), TERMS, |s, m| {
            let (x, y) = places[s];
            spatial_terms(2.0 * x / n - 1.0, 2.0 * y / n - 1.0)[m]
        });
        // Least squares for every tap at once: the design is the same, only the right-hand side differs.
        let pinv = design
            .clone()
            .pseudo_inverse(1e-12)
            .expect("the 25 x 6 design has full rank");
        let mut samples = nalgebra::DMatrix::zeros(places.len(), TAPS);
        for (s, &(x, y)) in places.iter().enumerate() {
            let sigma = |image| spec.psf_at(image, x, y).fwhm / 2.354_820_045;
            let s2 = (sigma(Image::Science).powi(2) - sigma(Image::Reference).powi(2)).max(0.25);
            let g = |t: usize| {
                let (u, v) = (
                    (t % SIDE) as f64 - HALF as f64,
                    (t / SIDE) as f64 - HALF as f64,
                );
                (-(u * u + v * v) / (2.0 * s2)).exp()
            };
            let sum: f64 = (0..TAPS).map(g).sum();
            for t in 0..TAPS {
                samples[(s, t)] = spec.flux_ratio * g(t) / sum;
            }
        }
        let fit = pinv * samples; // TERMS x TAPS
        let mut kbar = vec![0.0; TAPS * TERMS];
        for t in 0..TAPS {
            for m in 0..TERMS {
                kbar[t * TERMS + m] = fit[(m, t)];
            }
        }
        VaryingKernel::from_kbar(kbar)
    }

    /// The kernel's value at tap (u, v) for the pixel at normalised place (xh, yh), as the devices form it.
    pub fn at(&self, u: i64, v: i64, xh: f64, yh: f64) -> f64 {
        let t = (v + HALF as i64) as usize * SIDE + (u + HALF as i64) as usize;
        let [a, b, k3] = tap_row_terms(&self.kbar[t * TERMS..][..TERMS], yh);
        a + xh * (b + xh * k3)
    }
}

/// One tap's terms along a row at ŷ, from its six Kbar terms: the tap is a + x̂(b + x̂ k3) with
/// a = k0 + ŷ(k2 + ŷ k5) and b = k1 + ŷ k4 (Horner, as cl/common/imgsub.h forms it).
#[inline(always)]
pub fn tap_row_terms<T: Real>(k: &[T], yh: T) -> [T; 3] {
    [k[0] + yh * (k[2] + yh * k[5]), k[1] + yh * k[4], k[3]]
}

/// The fitted background B = b0 + b1 x̂ + b2 ŷ at (x̂, ŷ), summed in the order cl/common/imgsub.h's
/// `IMGSUB_BACKGROUND` sums it.
#[inline(always)]
pub fn background_at<T: Real>(bg: &[T], xh: T, yh: T) -> T {
    bg[0] + (bg[1] * xh + bg[2] * yh)
}

/// The six monomials of degree ≤ 2 in the order of cl/common/imgsub.h.
pub fn spatial_terms(xh: f64, yh: f64) -> [f64; TERMS] {
    [1.0, xh, yh, xh * xh, xh * yh, yh * yh]
}

/// One difference image to compute: a registered pair (the image convolved and the one it is subtracted
/// from, with their variances) and the kernel, in both precisions.
#[derive(Debug)]
pub struct DifferenceProblem {
    pub preset: String,
    pub nx: usize,
    pub ny: usize,
    pub kernel: VaryingKernel,
    /// 0: the kernel varies per pixel; T: it is constant over T × T tiles (cl/common/imgsub.h).
    pub tile: usize,
    pub pass: Pass,
    /// Kbar and the background as float32, in the device's layout.
    terms32: Vec<f32>,
    terms64: Vec<f64>,
    /// The convolved image, its variance, the image it is subtracted from, its variance: shared, so that
    /// `subtract` measures the PSF on the last two while this pass runs.
    images32: [Arc<Vec<f32>>; 4],
    /// The same in float64, made when a float64 run or the reference first needs them (3.4 GB at ast3).
    images64: std::sync::OnceLock<[Vec<f64>; 4]>,
    /// Caps the device memory a band may use (bytes), below what the device reports: forces tiling.
    pub device_mem_cap: Option<u64>,
}

/// A difference and its matched filter run together on an accelerator, band by band
/// ([`DifferenceProblem::difference_and_filter`]): the buffers that stay there across the bands' jobs. The
/// four images, uploaded once (beside the fit by [`KeptPlanes::upload_images`], else by the first job); the
/// filter's two inputs are formed band by band over the image subtracted from and its variance, whose rows
/// are spent once their band's difference is done; the mask; and a band's outputs, reused by every other job
/// (each read back into the caller's planes, beside the next job where the device can). The caller releases
/// them ([`KeptPlanes::ids`]).
#[derive(Debug, Clone, Copy)]
pub struct KeptPlanes {
    pub nx: usize,
    pub ny: usize,
    /// Convolved image, its variance, the image it is subtracted from, its variance.
    pub images: [u64; 4],
    /// A band's D and VD, and two bands' significance (the last job filters two): two sets, taken by
    /// turns where a job's read-back lands beside the next job ([`Accelerator::read_backs_land_later`]),
    /// which must not overwrite what is still being copied; else the first only.
    pub bands: [[u64; 4]; 2],
    /// The mask's words ([`KeptPlanes::mask_words`]), up with the first job for every band's filter inputs
    /// (a band's own upload, 17 MB of pageable copy at 10k, held each CUDA job up by 2-2.5 ms).
    pub mask: u64,
    /// The images are on the device already ([`KeptPlanes::upload_images`]): the first job keeps their
    /// contents instead of uploading them.
    images_on_device: bool,
}

/// What the matched filter of a kept difference takes besides it: the mask, the sign D is filtered with,
/// the convolved image's variance scaled by `corr` + 1, the filter's taps.
#[derive(Clone, Copy)]
pub struct MatchedFilter<'a> {
    pub mask: &'a [u8],
    pub sign: f32,
    pub corr: f32,
    pub taps: &'a [f64],
}

/// Releases resident buffers when dropped: on every path out of a pass that kept them, errors included.
pub struct ReleaseOnDrop<'a> {
    pub dev: &'a dyn Accelerator,
    pub ids: Vec<u64>,
}

impl Drop for ReleaseOnDrop<'_> {
    fn drop(&mut self) {
        self.dev.release(&self.ids);
    }
}

/// The rows of a band of [`DifferenceProblem::difference_and_filter`] asked for `band_rows` (at least the
/// kernel's half-width, at most the image).
fn pipeline_band_rows(band_rows: usize, ny: usize) -> usize {
    band_rows.max(HALF).min(ny).max(1)
}

/// Waits, when dropped, for read-backs still landing from the device's last job ([`Accelerator::settle`]):
/// on every way out of a pipeline, so that no copy outlives the memory it lands in.
struct SettleOnDrop<'a>(&'a dyn Accelerator);

impl Drop for SettleOnDrop<'_> {
    fn drop(&mut self) {
        // The error, if any, is the job's after it, already on its way up; or there is no one to tell.
        let _ = self.0.settle();
    }
}

/// One job's rows of the three planes (D, VD and the significance of the bands it filtered), handed on to
/// the caller once they have landed.
struct BandsHome<'p> {
    row0: usize,
    diff: LentRows<'p>,
    variance: LentRows<'p>,
    filtered: Vec<(usize, LentRows<'p>)>,
}

/// Rows of a plane lent to a job's read-back, kept as an address until the copy has landed: no reference to
/// them is made, moved or used while a device's copy that lands after its job may still be writing them.
struct LentRows<'p> {
    address: *mut f32,
    len: usize,
    lent: std::marker::PhantomData<&'p mut [f32]>,
}

impl<'p> LentRows<'p> {
    fn new(rows: &'p mut [f32]) -> Self {
        LentRows {
            address: rows.as_mut_ptr(),
            len: rows.len(),
            lent: std::marker::PhantomData,
        }
    }
    fn len(&self) -> usize {
        self.len
    }
    /// Where the job's read-back lands.
    fn destination(&mut self) -> HostDestination<'_> {
        // SAFETY: the rows of an exclusive borrow of `'p` (new), lent here to one job for the borrow of self.
        HostDestination::f32(unsafe { std::slice::from_raw_parts_mut(self.address, self.len) })
    }
    /// The rows, once the read-back into them has landed.
    ///
    /// # Safety
    /// The job's copy into them has landed (its job has returned, or the next one, for a later read-back).
    unsafe fn landed(self) -> &'p mut [f32] {
        // SAFETY: the rows of an exclusive borrow of `'p` (new), no longer written by anyone (the caller).
        unsafe { std::slice::from_raw_parts_mut(self.address, self.len) }
    }
}

/// The device time of [`DifferenceProblem::difference_and_filter`]'s jobs, by pass.
#[derive(Debug, Clone, Copy, Default)]
pub struct PipelineTimes {
    /// The difference's launches.
    pub difference_s: f64,
    /// The filter's inputs and launches, and the fills that poison the band buffers.
    pub filter_s: f64,
    pub jobs: usize,
}

impl KeptPlanes {
    /// Fresh ids for an nx × ny difference on `dev` run with its matched filter in bands of `band_rows`
    /// rows, when it fits: `opts` single-shot (resident buffers need it), and the four whole images, a
    /// band's four outputs (two sets of them where they are taken by turns) and the mask within 70 % of
    /// the device's memory (`cap` lowers it). `None`
    /// otherwise: the planes then come home between the passes.
    pub fn for_device(
        dev: &dyn Accelerator,
        nx: usize,
        ny: usize,
        band_rows: usize,
        cap: Option<u64>,
        opts: &RunOptions,
    ) -> Option<KeptPlanes> {
        let budget = DeviceBudget::of(dev.info()).capped(cap);
        let n = nx * ny;
        let plane = (n * DType::F32.bytes()) as u64;
        let band = (pipeline_band_rows(band_rows, ny) * nx) as u64;
        let sets = if dev.read_backs_land_later() { 2 } else { 1 };
        let bytes =
            4 * plane + sets * 4 * band * DType::F32.bytes() as u64 + n.next_multiple_of(4) as u64;
        let fits = bytes as f64 <= budget.mem as f64 * 0.7 && plane <= budget.max_alloc;
        let usable = opts.warmup == 0 && opts.repeats == 0 && n <= i32::MAX as usize && fits;
        usable.then(|| KeptPlanes {
            nx,
            ny,
            images: std::array::from_fn(|_| resident_id()),
            bands: std::array::from_fn(|_| std::array::from_fn(|_| resident_id())),
            mask: resident_id(),
            images_on_device: false,
        })
    }

    /// Uploads `images` (convolved image, its variance, the image it is subtracted from, its variance) into
    /// their resident buffers ahead of the difference: the planes it returns have them there, and the
    /// difference's first job keeps them. Made beside the fit, whose jobs are small: one job per image, each
    /// after `turn` returns (not before the first), so that the caller can fit them between the fit's jobs.
    pub fn upload_images(
        self,
        dev: &dyn Accelerator,
        images: [&[f32]; 4],
        mut turn: impl FnMut(),
    ) -> Result<KeptPlanes, RunError> {
        let n = self.nx * self.ny;
        let gpu = dev.info().is_gpu;
        for (k, (&id, image)) in self.images.iter().zip(images).enumerate() {
            assert_eq!(image.len(), n, "one value per pixel");
            if k > 0 {
                turn();
            }
            let buffers = vec![
                BufferSpec::Resident {
                    id,
                    dtype: DType::F32,
                    len: n,
                    init: Some(HostSlice::F32(image)),
                    read_back: ReadBack::No,
                },
                BufferSpec::Scratch {
                    dtype: DType::U32,
                    len: 1,
                },
            ];
            // A job has at least one step: this one's fills a word of scratch.
            let fill = Step::Fill { buffer: 1, byte: 0 };
            let job =
                RunOptions::single_shot().job(&PROGRAM, program_defines(gpu), buffers, vec![fill]);
            exec::run_plan(dev, &[job], 0)?;
        }
        Ok(KeptPlanes {
            images_on_device: true,
            ..self
        })
    }

    /// D = I - R ⊗ K - B in float64 at every `stride`-th pixel of every `stride`-th row, row by row
    /// (`imgsub_sky_item`), from the images already on `dev` ([`KeptPlanes::upload_images`]) and the
    /// kernel's `terms` ([`VaryingKernel::device_terms`]): the sky samples of subtract.rs's background
    /// correction. `None` where the images are not there or the device has no float64.
    pub fn sky_samples(
        &self,
        dev: &dyn Accelerator,
        terms: &[f64],
        stride: usize,
    ) -> Result<Option<Vec<f64>>, RunError> {
        if !self.images_on_device || !dev.info().fp64 {
            return Ok(None);
        }
        let n = self.nx * self.ny;
        let (across, down) = (self.nx.div_ceil(stride), self.ny.div_ceil(stride));
        let samples = across * down;
        let image = |i: usize| BufferSpec::Resident {
            id: self.images[i],
            dtype: DType::F32,
            len: n,
            init: None,
            read_back: ReadBack::No,
        };
        let buffers = vec![
            BufferSpec::Input(HostSlice::F64(terms)),
            image(0),
            image(2),
            BufferSpec::Output {
                dtype: DType::F64,
                len: samples,
            },
        ];
        let sky = Launch {
            kernel: "imgsub_sky_f64".into(),
            args: vec![
                StepArg::Buffer(0),
                StepArg::Buffer(1),
                StepArg::Buffer(2),
                StepArg::I32(self.nx as i32),
                StepArg::I32(self.ny as i32),
                StepArg::I32(stride as i32),
                StepArg::I32(across as i32),
                StepArg::I32(samples as i32),
                StepArg::Buffer(3),
            ],
            global: samples,
            local: Local::Prefer(128),
        };
        let gpu = dev.info().is_gpu;
        let job = RunOptions::single_shot().job(
            &PROGRAM,
            program_defines(gpu),
            buffers,
            vec![Step::Launch(sky)],
        );
        let mut run = exec::run_plan(dev, &[job], 0)?;
        match run.outputs.pop().and_then(|mut o| o.pop()) {
            Some(HostVec::F64(sky)) if sky.len() == samples => Ok(Some(sky)),
            _ => Err(RunError::Failed(
                "the sky samples came back in an unexpected form".into(),
            )),
        }
    }

    /// Every resident buffer's id.
    pub fn ids(&self) -> Vec<u64> {
        let mut ids = self.images.to_vec();
        ids.extend(self.bands.as_flattened());
        ids.push(self.mask);
        ids
    }

    /// The mask's bytes as the words the device reads (4 pixels a word, little-endian), zero-padded.
    fn mask_words(mask: &[u8]) -> std::borrow::Cow<'_, [u32]> {
        match bytemuck::try_cast_slice::<u8, u32>(mask) {
            Ok(words) if cfg!(target_endian = "little") => std::borrow::Cow::Borrowed(words),
            _ => std::borrow::Cow::Owned(
                mask.par_chunks(4)
                    .map(|c| {
                        c.iter()
                            .enumerate()
                            .fold(0u32, |w, (k, &b)| w | (b as u32) << (8 * k))
                    })
                    .collect(),
            ),
        }
    }
}

/// What a problem computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// D = I − R ⊗ K − B and VD = VI + VR ⊗ K².
    Difference,
    /// The significance Σ P D / √(Σ P² VD) with a constant kernel P over a difference and its variance
    /// (detection's matched filter; 0 where Σ P² VD is not positive): one output plane.
    MatchedFilter,
}

impl Pass {
    /// The planes the pass gives back, on every backend: D and VD, or the significance.
    pub fn outputs(self) -> usize {
        match self {
            Pass::Difference => 2,
            Pass::MatchedFilter => 1,
        }
    }
}

/// The presets: `tiny` 256², `ci` 1024², `ast3` 10240² (the seed's camera, AST3).
pub const PRESETS: [&str; 3] = ["tiny", "ci", "ast3"];

impl DifferenceProblem {
    pub fn preset(preset: &str, seed: u64) -> Result<Self, String> {
        let size = match preset {
            "tiny" => 256,
            "ci" => 1024,
            "ast3" => 10_240,
            other => {
                return Err(format!(
                    "unknown preset '{other}' for imgsub (expected {})",
                    PRESETS.join(", ")
                ))
            }
        };
        Ok(Self::new(preset, FieldSpec::new(size, seed)?))
    }

    /// The difference problem of a field made from `spec`, with the Gaussian PSF match as its kernel.
    pub fn new(preset: &str, spec: FieldSpec) -> Self {
        let field = generate(&spec);
        let kernel = VaryingKernel::gaussian_match(&spec);
        let images = [
            field.reference.data,
            field.reference.variance,
            field.science.data,
            field.science.variance,
        ];
        Self::from_images(preset, spec.size, spec.size, images, kernel, 0)
    }

    /// The difference of `images` (convolved image, its variance, the image it is subtracted from, its
    /// variance; nx × ny each, row-major) under `kernel`.
    pub fn from_images(
        preset: &str,
        nx: usize,
        ny: usize,
        images: [Vec<f32>; 4],
        kernel: VaryingKernel,
        tile: usize,
    ) -> Self {
        Self::from_shared_images(preset, nx, ny, images.map(Arc::new), kernel, tile)
    }

    /// [`DifferenceProblem::from_images`] with images shared with the caller.
    pub fn from_shared_images(
        preset: &str,
        nx: usize,
        ny: usize,
        images: [Arc<Vec<f32>>; 4],
        kernel: VaryingKernel,
        tile: usize,
    ) -> Self {
        // A matched filter has no image to subtract from: its last two are empty.
        assert!(
            images.iter().all(|i| i.len() == nx * ny || i.is_empty()),
            "{nx} x {ny} images"
        );
        let terms64 = kernel.device_terms();
        DifferenceProblem {
            preset: preset.into(),
            nx,
            ny,
            terms32: terms64.iter().map(|&v| v as f32).collect(),
            terms64,
            kernel,
            tile,
            pass: Pass::Difference,
            images32: images,
            images64: std::sync::OnceLock::new(),
            device_mem_cap: None,
        }
    }

    /// The matched filter of a difference `diff` and its variance with the constant kernel `taps` (21 × 21):
    /// outputs the significance Σ P D / √(Σ P² VD), computed where the sums are (one plane leaves a device
    /// instead of two).
    pub fn matched_filter(
        nx: usize,
        ny: usize,
        diff: Vec<f32>,
        variance: Vec<f32>,
        taps: &[f64],
    ) -> Self {
        let mut problem = Self::from_images(
            "matched filter",
            nx,
            ny,
            [diff, variance, Vec::new(), Vec::new()],
            VaryingKernel::constant(taps),
            0,
        );
        problem.pass = Pass::MatchedFilter;
        problem
    }

    /// The images given back, for the caller to reuse their memory: without a copy when no one else holds
    /// them any longer, else copied.
    pub fn into_images(self) -> [Vec<f32>; 4] {
        self.images32
            .map(|a| Arc::try_unwrap(a).unwrap_or_else(|a| a.as_ref().clone()))
    }

    fn images64(&self) -> &[Vec<f64>; 4] {
        self.images64.get_or_init(|| {
            self.images32
                .each_ref()
                .map(|v| v.par_iter().map(|&x| x as f64).collect::<Vec<f64>>())
        })
    }

    /// Where the kernel of pixel `x` along an axis of `n` is evaluated (imgsub_place in cl/common/imgsub.h).
    fn place(&self, x: usize, n: usize) -> usize {
        x.checked_div(self.tile)
            .map_or(x, |t| (t * self.tile + self.tile / 2).min(n - 1))
    }

    /// The pass on the CPU in `mode`, into float64 planes (as many as [`Pass::outputs`]).
    fn cpu_planes_into(&self, mode: Precision, outputs: &mut [Vec<f64>]) {
        match mode {
            Precision::F32 => {
                let [a, b, c, d] = self.images32.each_ref().map(|v| v.as_slice());
                self.cpu_pass_into(&self.terms32, [a, b, c, d], outputs);
            }
            Precision::F64 => {
                let [a, b, c, d] = self.images64();
                self.cpu_pass_into(&self.terms64, [a, b, c, d], outputs);
            }
        }
    }

    /// The pass on the CPU in precision T (convolve.rs has the arithmetic), into given planes of any
    /// precision O: D and VD, or the matched filter's significance alone.
    fn cpu_pass_into<T: Real, O: Real>(
        &self,
        terms: &[T],
        images: [&[T]; 4],
        outputs: &mut [Vec<O>],
    ) {
        let (nx, ny) = (self.nx, self.ny);
        let [r, vr, sci, vsci] = images;
        let sx = 2.0 / (nx.max(2) - 1) as f64;
        let sy = 2.0 / (ny.max(2) - 1) as f64;
        let xh: Vec<T> = (0..nx)
            .map(|x| T::from_f64(self.place(x, nx) as f64 * sx - 1.0))
            .collect();
        let yh: Vec<T> = (0..ny)
            .map(|y| T::from_f64(self.place(y, ny) as f64 * sy - 1.0))
            .collect();
        let kbar = &terms[..TAPS * TERMS];
        let bg = &terms[TAPS * TERMS..];
        if self.pass == Pass::MatchedFilter {
            // A constant kernel: K = Kbar_0, as the device's filter takes it.
            let taps: Vec<T> = kbar.iter().step_by(TERMS).copied().collect();
            let kernel = Kernel::Constant { taps: &taps };
            let [snr] = outputs else {
                unreachable!("the matched filter gives one plane (Pass::outputs)")
            };
            // The significance as the devices form it, in T.
            convolve(nx, ny, r, vr, kernel, [snr], |_, c, w, [snr_row]| {
                for x in 0..nx {
                    let snr = if w[x] > T::ZERO {
                        c[x] / w[x].sqrt()
                    } else {
                        T::ZERO
                    };
                    snr_row[x] = O::from_f64(snr.to_f64());
                }
            });
        } else {
            let (xh, yh) = (&xh[..], &yh[..]);
            let kernel = match self.tile {
                0 => Kernel::Varying { kbar, xh, yh },
                tile => Kernel::Tiled { kbar, xh, yh, tile },
            };
            let [diff, var] = outputs else {
                unreachable!("the difference gives two planes (Pass::outputs)")
            };
            convolve(
                nx,
                ny,
                r,
                vr,
                kernel,
                [diff, var],
                |y, c, w, [d_row, v_row]| {
                    for x in 0..nx {
                        let at = y * nx + x;
                        let background = background_at(bg, xh[x], yh[y]);
                        d_row[x] =
                            O::from_f64(sci[at].to_f64() - c[x].to_f64() - background.to_f64());
                        v_row[x] = O::from_f64(vsci[at].to_f64() + w[x].to_f64());
                    }
                },
            );
        }
    }

    /// The device jobs: bands of output rows, each with the reference rows its kernel reaches.
    fn device_plan(
        &self,
        mode: Precision,
        budget: DeviceBudget,
        opts: &RunOptions,
    ) -> Vec<KernelJob<'_>> {
        let (nx, ny) = (self.nx, self.ny);
        let budget = budget.capped(self.device_mem_cap);
        let dtype = match mode {
            Precision::F32 => DType::F32,
            Precision::F64 => DType::F64,
        };
        let outputs = self.pass.outputs();
        let band = band_rows(self.pass, nx, ny, dtype, budget);
        let mut jobs = Vec::new();
        let mut row0 = 0;
        while row0 < ny {
            let rows = band.min(ny - row0);
            let ref_row0 = row0.saturating_sub(HALF);
            let ref_end = (row0 + rows + HALF).min(ny);
            let slice = |k: usize, a: usize, b: usize| match mode {
                Precision::F32 => HostSlice::F32(&self.images32[k][a * nx..b * nx]),
                Precision::F64 => HostSlice::F64(&self.images64()[k][a * nx..b * nx]),
            };
            let terms = match mode {
                Precision::F32 => HostSlice::F32(&self.terms32),
                Precision::F64 => HostSlice::F64(&self.terms64),
            };
            let output = BufferSpec::Output {
                dtype,
                len: rows * nx,
            };
            let image = |k: usize, a: usize, b: usize| BufferSpec::Input(slice(k, a, b));
            let mut buffers = vec![
                BufferSpec::Input(terms),
                image(0, ref_row0, ref_end),
                image(1, ref_row0, ref_end),
            ];
            let at = BandRows {
                nx,
                ny,
                row0,
                rows,
                ref_row0,
                sci_row0: row0,
            };
            let launch = match self.pass {
                Pass::Difference => {
                    buffers.push(image(2, row0, row0 + rows));
                    buffers.push(image(3, row0, row0 + rows));
                    difference_launch(mode, [0, 1, 2, 3, 4, 5, 6], at, self.tile, budget.gpu)
                }
                Pass::MatchedFilter => filter_launch(mode, [0, 1, 2, 3], at, budget.gpu),
            };
            buffers.extend(std::iter::repeat_n(output, outputs));
            let steps = vec![Step::Launch(launch)];
            jobs.push(opts.job(&PROGRAM, program_defines(budget.gpu), buffers, steps));
            row0 += rows;
        }
        jobs
    }
}

/// The build defines of the program's jobs: float32 pixels per work-item for this kind of device. Every
/// job of the program takes the same (the fit's stamp sums too), so a process builds it once per device.
pub(super) fn program_defines(gpu: bool) -> Vec<(String, String)> {
    vec![(
        "IMG_PIXELS_F32".into(),
        pixels_per_item(Precision::F32, gpu).to_string(),
    )]
}

/// A resident float32 buffer `id` of `rows`' length whose contents the job reads back into `rows` (`later`:
/// possibly after the job returns, [`ReadBack::IntoLater`]).
fn read_into<'a>(id: u64, rows: &'a mut LentRows, later: bool) -> BufferSpec<'a> {
    let len = rows.len();
    let into = rows.destination();
    BufferSpec::Resident {
        id,
        dtype: DType::F32,
        len,
        init: None,
        read_back: match later {
            // SAFETY: `difference_and_filter` hands a band on only once the next job has returned, and
            // settles the device on every way out (SettleOnDrop) before the planes' borrow can end.
            true => ReadBack::IntoLater(unsafe { LaterDestination::new(into) }),
            false => ReadBack::Into(into),
        },
    }
}

/// Where a launch of the difference or the filter works in an nx × ny image: output rows [row0, row0 + rows),
/// read from buffers whose first rows are `ref_row0` (the convolved image, or the filter's inputs) and
/// `sci_row0` (the image subtracted from).
#[derive(Debug, Clone, Copy)]
struct BandRows {
    nx: usize,
    ny: usize,
    row0: usize,
    rows: usize,
    ref_row0: usize,
    sci_row0: usize,
}

impl BandRows {
    /// The band's place in the image: nx, ny, row0, rows (the kernels' arguments in that order).
    fn args(&self) -> [StepArg; 4] {
        [self.nx, self.ny, self.row0, self.rows].map(|v| StepArg::I32(v as i32))
    }
}

/// The difference's launch (imgsub_difference in cl/common/imgsub.h) over the rows `at`: the buffers by
/// index (kernel terms, convolved image and its variance, image subtracted from and its variance, D, VD).
fn difference_launch(
    mode: Precision,
    [terms, conv, conv_var, sci, sci_var, diff, diff_var]: [usize; 7],
    at: BandRows,
    tile: usize,
    gpu: bool,
) -> Launch {
    let mut args = vec![
        StepArg::Buffer(terms),
        StepArg::Buffer(conv),
        StepArg::Buffer(conv_var),
        StepArg::I32(at.ref_row0 as i32),
        StepArg::Buffer(sci),
        StepArg::Buffer(sci_var),
        StepArg::I32(at.sci_row0 as i32),
    ];
    args.extend(at.args());
    args.extend([
        StepArg::I32(tile as i32),
        StepArg::Buffer(diff),
        StepArg::Buffer(diff_var),
    ]);
    Launch {
        kernel: format!("imgsub_difference_{}", mode.name()),
        args,
        global: at.rows * at.nx.div_ceil(pixels_per_item(mode, gpu)),
        local: Local::Prefer(256),
    }
}

/// The matched filter's launch (imgsub_filter in cl/common/imgsub.h) over the rows `at`: the buffers by
/// index (constant kernel terms, D and VD, the significance).
fn filter_launch(
    mode: Precision,
    [terms, diff, variance, snr]: [usize; 4],
    at: BandRows,
    gpu: bool,
) -> Launch {
    let mut args = vec![
        StepArg::Buffer(terms),
        StepArg::Buffer(diff),
        StepArg::Buffer(variance),
        StepArg::I32(at.ref_row0 as i32),
    ];
    args.extend(at.args());
    args.push(StepArg::Buffer(snr));
    Launch {
        kernel: format!("imgsub_filter_{}", mode.name()),
        args,
        global: at.rows * at.nx.div_ceil(pixels_per_item(mode, gpu)),
        local: Local::Prefer(256),
    }
}

/// Output rows per band of a pass's device plan: its planes within 70 % of the device's memory.
fn band_rows(pass: Pass, nx: usize, ny: usize, dtype: DType, budget: DeviceBudget) -> usize {
    // Per output row: a reference and its variance row (plus the halo), the science rows, the outputs.
    let planes = pass.outputs()
        + match pass {
            Pass::Difference => 4,
            Pass::MatchedFilter => 2,
        };
    let row_bytes = (planes * nx * dtype.bytes()) as u64;
    let by_mem = ((budget.mem as f64 * 0.7) as u64 / row_bytes).max(1);
    let by_alloc = (budget.max_alloc / (nx * dtype.bytes()) as u64).max(1);
    (by_mem.min(by_alloc) as usize)
        .saturating_sub(2 * HALF)
        .clamp(1, ny)
}

impl DifferenceProblem {
    /// Runs in float32 on `target` and returns the output planes as float32 (no widening: at 10k each plane
    /// is 400 MB), with the times (device events on accelerators, the host clock on `cpu`): D and VD, or the
    /// matched filter's significance alone.
    pub fn run_f32(
        &self,
        target: &Target,
        opts: &RunOptions,
    ) -> Result<(Vec<Vec<f32>>, exec::TimeStats), RunError> {
        match target {
            Target::Cpu(_) => {
                // Straight into float32 planes, poisoned before each run.
                let n = self.nx * self.ny;
                let mut planes = vec![vec![f32::NAN; n]; self.pass.outputs()];
                let [a, b, c, d] = self.images32.each_ref().map(|v| v.as_slice());
                let ((), times) = exec::time_host_prepared(
                    opts,
                    "host clock",
                    &mut planes,
                    |p| {
                        p.iter_mut()
                            .for_each(|v| v.par_iter_mut().for_each(|x| *x = f32::NAN))
                    },
                    |planes| {
                        self.cpu_pass_into(&self.terms32, [a, b, c, d], planes);
                        Ok(())
                    },
                )?;
                Ok((planes, times))
            }
            Target::Device(dev) => {
                let jobs = self.plan(Precision::F32, DeviceBudget::of(dev.info()), opts);
                let run = exec::run_plan(dev.as_ref(), &jobs, opts.warmup)?;
                let mut planes: Vec<Vec<f32>> = Vec::new();
                for band in run.outputs {
                    planes.resize_with(band.len(), Vec::new);
                    for (plane, out) in planes.iter_mut().zip(band) {
                        match out {
                            // One band: its vector is the plane.
                            HostVec::F32(v) if plane.is_empty() => *plane = v,
                            HostVec::F32(v) => plane.extend_from_slice(&v),
                            other => plane.extend(other.to_f64().iter().map(|&x| x as f32)),
                        }
                    }
                }
                Ok((planes, run.times))
            }
        }
    }

    /// The difference and its matched filter on `dev`, pipelined in single-shot jobs of `band_rows` rows
    /// (at least [`HALF`]) over `kept`'s resident buffers. Job k computes band k of D and VD, forms the
    /// filter's inputs of its pixels (imgsub_filter_inputs in cl/common/imgsub.h) over the image subtracted
    /// from and its variance (the difference has read them there), and filters band k − 1, whose rows reach
    /// at most HALF rows into band k; the last job filters its own band too. The band buffers are poisoned
    /// before each job. Each band is read back straight into its rows of `planes` (D, VD and the
    /// significance, nx × ny each: no vector per band), and goes to the caller as soon as it is home, D
    /// (unsigned: I − R ⊗ K − B) and VD to `on_difference`, the significance to `on_significance` (first
    /// row, values), so that the caller writes them while the next is computed.
    #[allow(clippy::too_many_arguments)]
    pub fn difference_and_filter<'p>(
        &self,
        dev: &dyn Accelerator,
        kept: &KeptPlanes,
        filter: &MatchedFilter,
        band_rows: usize,
        planes: [&'p mut [f32]; 3],
        mut on_difference: impl FnMut(usize, &'p mut [f32], &'p mut [f32]),
        mut on_significance: impl FnMut(usize, &'p mut [f32]),
    ) -> Result<PipelineTimes, RunError> {
        let (nx, ny) = (self.nx, self.ny);
        assert_eq!(
            (kept.nx, kept.ny, self.pass),
            (nx, ny, Pass::Difference),
            "kept planes of this difference"
        );
        let MatchedFilter {
            mask,
            sign,
            corr,
            taps,
        } = *filter;
        let n = nx * ny;
        assert_eq!(mask.len(), n, "one mask byte per pixel");
        assert!(planes.iter().all(|p| p.len() == n), "three whole planes");
        // The planes' rows not yet lent to a job, taken from the front band by band.
        let [mut diff_rows, mut variance_rows, mut snr_rows] = planes;
        let take = |rows: &mut &'p mut [f32], count: usize| -> &'p mut [f32] {
            let (band, rest) = std::mem::take(rows).split_at_mut(count);
            *rows = rest;
            band
        };
        if i32::try_from(n).is_err() {
            return Err(RunError::Failed(format!(
                "difference: {n} pixels exceed the kernels' 32-bit count"
            )));
        }
        let filter_terms: Vec<f32> = VaryingKernel::constant(taps)
            .device_terms()
            .iter()
            .map(|&v| v as f32)
            .collect();
        let gpu = dev.info().is_gpu;
        let band_rows = pipeline_band_rows(band_rows, ny);
        let bands: Vec<(usize, usize)> = (0..ny)
            .step_by(band_rows)
            .map(|row0| (row0, band_rows.min(ny - row0)))
            .collect();
        let words = KeptPlanes::mask_words(mask);
        let mut times = PipelineTimes::default();
        // Where the device can, a job's bands are read back beside the next job's kernels (every job but
        // the last), into the other set of band buffers by turns, and handed on once the next job is back.
        // On every way out, nothing is left copying into the planes.
        let later = dev.read_backs_land_later();
        let _settled = SettleOnDrop(dev);
        let mut landing: Option<BandsHome<'p>> = None;
        // SAFETY (every `landed`): a band is handed on once its job has returned, and for a later read-back
        // the next job too.
        let mut hand_on = |home: BandsHome<'p>| {
            on_difference(home.row0, unsafe { home.diff.landed() }, unsafe {
                home.variance.landed()
            });
            for (row0, snr) in home.filtered {
                on_significance(row0, unsafe { snr.landed() });
            }
        };
        for (k, &(row0, rows)) in bands.iter().enumerate() {
            let last = k + 1 == bands.len();
            let (set, this_later) = match later {
                true => (&kept.bands[k % 2], !last),
                false => (&kept.bands[0], false),
            };
            // The images go up with the first job unless they are there already.
            let image = |i: usize| BufferSpec::Resident {
                id: kept.images[i],
                dtype: DType::F32,
                len: n,
                init: (k == 0 && !kept.images_on_device).then(|| HostSlice::F32(&self.images32[i])),
                read_back: ReadBack::No,
            };
            let mut diff = LentRows::new(take(&mut diff_rows, rows * nx));
            let mut variance = LentRows::new(take(&mut variance_rows, rows * nx));
            let mut buffers = vec![
                BufferSpec::Input(HostSlice::F32(&self.terms32)),
                image(0),
                image(1),
                image(2),
                image(3),
                BufferSpec::Resident {
                    id: kept.mask,
                    dtype: DType::U32,
                    len: words.len(),
                    init: (k == 0).then(|| HostSlice::U32(&words)),
                    read_back: ReadBack::No,
                },
                BufferSpec::Input(HostSlice::F32(&filter_terms)),
                read_into(set[0], &mut diff, this_later),
                read_into(set[1], &mut variance, this_later),
            ];
            let poison = |buffer| Step::Fill { buffer, byte: 0xFF };
            let whole_rows = |row0, rows| BandRows {
                nx,
                ny,
                row0,
                rows,
                ref_row0: 0,
                sci_row0: 0,
            };
            let mut steps = vec![
                poison(7),
                poison(8),
                Step::Launch(difference_launch(
                    Precision::F32,
                    [0, 1, 2, 3, 4, 7, 8],
                    whole_rows(row0, rows),
                    self.tile,
                    gpu,
                )),
                // The inputs: sign·D over the image subtracted from, their variance over its variance.
                Step::Launch(Launch {
                    kernel: "imgsub_filter_inputs_f32".into(),
                    args: vec![
                        StepArg::Buffer(7),
                        StepArg::Buffer(8),
                        StepArg::Buffer(4),
                        StepArg::Buffer(5),
                        StepArg::F32(sign),
                        StepArg::F32(corr),
                        StepArg::I32((row0 * nx) as i32),
                        StepArg::I32((rows * nx) as i32),
                        StepArg::Buffer(3),
                        StepArg::Buffer(4),
                    ],
                    global: rows * nx,
                    local: Local::Prefer(256),
                }),
            ];
            let mut filtered: Vec<(usize, LentRows<'p>)> = (k > 0)
                .then(|| bands[k - 1])
                .into_iter()
                .chain(last.then_some((row0, rows)))
                .map(|(row0, rows)| (row0, LentRows::new(take(&mut snr_rows, rows * nx))))
                .collect();
            for (i, (row0, snr)) in filtered.iter_mut().enumerate() {
                let (row0, rows) = (*row0, snr.len() / nx);
                buffers.push(read_into(set[2 + i], snr, this_later));
                let snr = buffers.len() - 1;
                steps.push(poison(snr));
                steps.push(Step::Launch(filter_launch(
                    Precision::F32,
                    [6, 3, 4, snr],
                    whole_rows(row0, rows),
                    gpu,
                )));
            }
            let job = RunOptions::single_shot().job(&PROGRAM, program_defines(gpu), buffers, steps);
            let run = exec::run_plan(dev, &[job], 0)?;
            for step in &run.steps {
                match step.name.starts_with("imgsub_difference") {
                    true => times.difference_s += step.median_s,
                    false => times.filter_s += step.median_s,
                }
            }
            times.jobs += 1;
            let home = BandsHome {
                row0,
                diff,
                variance,
                filtered,
            };
            // The job before's bands have landed now that this one is back; this one's too, unless they
            // land beside the next.
            if let Some(before) = landing.take() {
                hand_on(before);
            }
            match this_later {
                true => landing = Some(home),
                false => hand_on(home),
            }
        }
        Ok(times)
    }
}

impl SinglePass for DifferenceProblem {
    type Mode = Precision;
    /// The difference and its variance, or the matched filter's significance alone (as a device gives it).
    fn run_cpu(&self, mode: Precision) -> Field {
        let mut planes = vec![vec![0.0f64; self.nx * self.ny]; self.pass.outputs()];
        self.cpu_planes_into(mode, &mut planes);
        Field::new(planes)
    }
    /// The previous repeat's planes (poisoned) are written again: at 10240² two fresh float64 planes are
    /// 1.6 GB of pages to fault in, which on a virtual machine that hands freed pages back to its host cost
    /// more than the convolution (docs/perf-notes.md, "the allocator").
    fn run_cpu_into(&self, mode: Precision, out: &mut Field) {
        let pixels = self.nx * self.ny;
        let planes = &mut out.components;
        if planes.len() == self.pass.outputs() && planes.iter().all(|p| p.len() == pixels) {
            self.cpu_planes_into(mode, planes)
        } else {
            *out = self.run_cpu(mode)
        }
    }
    fn plan(&self, mode: Precision, budget: DeviceBudget, opts: &RunOptions) -> Vec<KernelJob<'_>> {
        self.device_plan(mode, budget, opts)
    }
    /// The bands' planes joined: D and VD, or the significance.
    fn assemble(&self, _mode: Precision, outputs: Vec<Vec<HostVec>>) -> Field {
        let mut planes: Vec<Vec<f64>> = Vec::new();
        for band in outputs {
            planes.resize_with(band.len(), Vec::new);
            for (plane, out) in planes.iter_mut().zip(band) {
                plane.extend(out.to_f64());
            }
        }
        Field::new(planes)
    }
}

/// The scale D's error is judged against at a pixel (issue 15's 1e-6): the larger of its two operands, the
/// image subtracted from and the convolved image, at least 1 electron. A float32 D cannot do better than
/// that: the unconvolved image is float32 itself, and rounding D alone costs half an ulp of D, which where a
/// source is in the unconvolved image only (a transient) is several times the convolved image.
pub fn difference_error_scale(unconvolved: f64, convolved: f64) -> f64 {
    unconvolved.abs().max(convolved.abs()).max(1.0)
}

/// The difference workload's own figures in a row.
#[derive(Debug, Clone, Serialize)]
pub struct DifferenceDetails {
    /// Worst error of D relative to its operands ([`difference_error_scale`]), and of VD over VD, at any
    /// pixel: the figures the tolerance judges.
    pub max_rel_difference: f64,
    pub max_rel_variance: f64,
    /// Worst error of D over the convolved image R ⊗ K alone (shown, not judged: it exceeds the float32
    /// bound where D is many times the convolved image).
    pub max_rel_difference_of_convolved: f64,
    /// Kernel sum (photometric scale) at the field's centre and corner.
    pub kernel_sum_centre: f64,
    pub kernel_sum_corner: f64,
}

impl Workload for DifferenceProblem {
    type Mode = Precision;
    type Output = Field;
    type Reference = Field;
    type Details = DifferenceDetails;

    fn name(&self) -> &'static str {
        "imgsub"
    }
    fn preset(&self) -> &str {
        &self.preset
    }
    fn describe(&self) -> String {
        let tile = if self.tile > 0 {
            format!(", constant over {0}×{0} tiles", self.tile)
        } else {
            String::new()
        };
        format!(
            "{}×{} px, {SIDE}×{SIDE} kernel of degree 2{tile}, difference and variance",
            self.nx, self.ny
        )
    }
    fn modes(&self) -> Vec<Precision> {
        vec![Precision::F32, Precision::F64]
    }
    fn work(&self, _output: &Field) -> Option<Work> {
        Some(Work {
            units: (self.nx * self.ny * TAPS) as f64,
            unit_name: "pixel-taps",
        })
    }
    fn pipe_instructions(&self, mode: Precision) -> Option<f64> {
        // Per pixel-tap: the kernel from its two row terms (2 FMA), 1 FMA for D, 2 for VD; the row terms
        // themselves (4) are shared by the pixels of a work-item (cl/common/imgsub.h). The floor is for GPUs.
        Some(5.0 + 4.0 / pixels_per_item(mode, true) as f64)
    }
    fn reference(&self) -> Field {
        self.run_cpu(Precision::F64)
    }
    fn execute(
        &self,
        target: &Target,
        mode: Precision,
        opts: &RunOptions,
    ) -> Result<Measured<Field>, RunError> {
        exec::single_pass(self, target, mode, opts)
    }
    fn verify(
        &self,
        result: &Field,
        reference: &Field,
        mode: Precision,
    ) -> Verdict<DifferenceDetails> {
        let n2 = self.nx * self.ny;
        let complete =
            result.components.len() == 2 && result.components.iter().all(|c| c.len() == n2);
        let sci = self.images32[2].as_slice();
        let (mut rel_d, mut rel_d_conv, mut rel_v, mut max_abs, mut sum2, mut non_finite) =
            (0.0f64, 0.0f64, 0.0f64, 0.0f64, 0.0f64, 0u64);
        if complete {
            let pixels = result.components[0]
                .iter()
                .zip(&result.components[1])
                .zip(reference.components[0].iter().zip(&reference.components[1]))
                .zip(sci);
            for (((&d, &v), (&d_ref, &v_ref)), &s) in pixels {
                if !(d.is_finite() && v.is_finite()) {
                    non_finite += 1;
                    continue;
                }
                // R ⊗ K + B: what the kernel made of the reference.
                let convolved = s as f64 - d_ref;
                let e = (d - d_ref).abs();
                max_abs = max_abs.max(e);
                sum2 += e * e;
                rel_d = rel_d.max(e / difference_error_scale(s as f64, convolved));
                rel_d_conv = rel_d_conv.max(e / convolved.abs().max(1e-30));
                rel_v = rel_v.max((v - v_ref).abs() / v_ref.abs().max(1e-30));
            }
        }
        let tol = match mode {
            Precision::F32 => TOL_F32_REL,
            Precision::F64 => TOL_F64_REL,
        };
        let max_rel = rel_d.max(rel_v);
        let sum = |xh: f64, yh: f64| {
            let mut s = 0.0;
            for v in -(HALF as i64)..=HALF as i64 {
                for u in -(HALF as i64)..=HALF as i64 {
                    s += self.kernel.at(u, v, xh, yh);
                }
            }
            s
        };
        Verdict {
            accuracy: Accuracy {
                max_abs,
                max_rel,
                rms_abs: (sum2 / n2 as f64).sqrt(),
                non_finite: if complete { non_finite } else { n2 as u64 },
                tolerance_abs: f64::INFINITY,
                tolerance_rel: tol,
                unit: "electron".into(),
                pass: complete && non_finite == 0 && max_rel <= tol,
            },
            unconverged: None,
            failure: None,
            details: DifferenceDetails {
                max_rel_difference: rel_d,
                max_rel_variance: rel_v,
                max_rel_difference_of_convolved: rel_d_conv,
                kernel_sum_centre: sum(0.0, 0.0),
                kernel_sum_corner: sum(1.0, 1.0),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fitted kernel holds the flux ratio (each sample is normalised to it) and matches a Gaussian of
    /// the wider science PSF: its second moment grows towards the corners as the PSFs do.
    #[test]
    fn the_gaussian_match_keeps_the_flux_ratio_and_widens_outwards() {
        let spec = FieldSpec::new(512, 1).unwrap();
        let k = VaryingKernel::gaussian_match(&spec);
        let moment = |xh: f64, yh: f64| {
            let (mut s, mut m2) = (0.0, 0.0);
            for v in -(HALF as i64)..=HALF as i64 {
                for u in -(HALF as i64)..=HALF as i64 {
                    let w = k.at(u, v, xh, yh);
                    s += w;
                    m2 += w * (u * u + v * v) as f64;
                }
            }
            (s, m2 / s)
        };
        let (s0, m0) = moment(0.0, 0.0);
        let (s1, m1) = moment(1.0, 1.0);
        assert!(
            (s0 - 0.5).abs() < 1e-3 && (s1 - 0.5).abs() < 1e-3,
            "{s0} {s1}"
        );
        assert!(m1 > m0, "{m0} {m1}");
    }
}
