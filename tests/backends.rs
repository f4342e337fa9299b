//! Cross-backend agreement and the host plumbing's guarantees, on whatever this machine offers. Each test
//! fails unless every device found ran (tests/common: ASTROPORT_REQUIRE names the ones that must exist).

mod common;

use astroport::backend::{
    discover, resident_id, Accelerator, BufferSpec, Choice, DType, HostDestination, HostSlice,
    HostVec, JobOutput, KernelArg, KernelJob, LaterDestination, Launch, Local, Model, Program,
    ReadBack, Step, StepArg, Target,
};
use astroport::bench;
use astroport::exec::{DeviceBudget, RunOptions, SinglePass};
use astroport::results::Status;
use astroport::workload::lens::{
    LensMode, LensOptions, LensProblem, Preset, TOL_F32_ABS, TOL_F64_REL,
};

#[test]
fn required_backends_are_present() {
    let d = discover();
    let devices = common::devices(&d);
    eprintln!(
        "devices: {:?}",
        devices.iter().map(|t| t.id()).collect::<Vec<_>>()
    );
}

/// Every backend found agrees with the f64 cpu reference at the tiny preset within the stated
/// tolerances (f32: |Δg| ≤ 1e-4″; f64: relative 1e-10), and every f32 backend reaches ≤ 2e-5″.
#[test]
fn all_backends_agree_with_reference_tiny() {
    let problem = LensProblem::preset(Preset::Tiny, &LensOptions::default()).unwrap();
    let d = discover();
    let choices: Vec<Choice> = d.targets.iter().map(Choice::Run).collect();
    let opts = RunOptions {
        warmup: 1,
        repeats: 2,
    };
    let modes = [LensMode::F32, LensMode::F64];
    let rows = bench::run(&problem, &modes, &choices, &opts, &mut |_| {});
    assert_eq!(rows.len(), 2 * d.targets.len());
    for r in &rows {
        assert_eq!(
            r.status,
            Status::Ok,
            "{} {}: {}",
            r.backend,
            r.precision,
            r.reason
        );
        let a = r.accuracy.as_ref().unwrap();
        assert_eq!(a.non_finite, 0);
        match r.precision.as_str() {
            "f32" => {
                assert_eq!(
                    a.tolerance_abs, TOL_F32_ABS,
                    "the stated f32 tolerance is the one applied"
                );
                assert!(
                    a.max_abs <= 2e-5,
                    "{}: f32 max_abs {}",
                    r.backend,
                    a.max_abs
                );
            }
            _ => assert!(
                a.max_rel <= TOL_F64_REL,
                "{}: f64 max_rel {}",
                r.backend,
                a.max_rel
            ),
        }
        let t = r.time_s.as_ref().unwrap();
        assert!(
            t.min > 0.0 && t.min <= t.median && t.median <= t.max,
            "{}: times {t:?}",
            r.backend
        );
        assert_eq!(t.repeats, 2);
    }
    common::assert_ran(&common::devices(&d), &common::ran_ok(&rows));
    eprintln!("{}", astroport::report::terminal(&rows));
}

/// Same at the ci preset (1024² × 702 halos), on the device backends only (the cpu rows are the
/// reference). Also checks that the device f32 result is not a copy of the cpu f32 result.
#[test]
fn device_backends_agree_at_ci() {
    let problem = LensProblem::preset(Preset::Ci, &LensOptions::default()).unwrap();
    let d = discover();
    let devices = common::devices(&d);
    let choices: Vec<Choice> = devices.iter().map(|t| Choice::Run(t)).collect();
    let modes = [LensMode::F32, LensMode::F64];
    let rows = bench::run(&problem, &modes, &choices, &RunOptions::once(), &mut |_| {});
    for r in &rows {
        assert_eq!(
            r.status,
            Status::Ok,
            "{} {}: {}",
            r.backend,
            r.precision,
            r.reason
        );
        let a = r.accuracy.as_ref().unwrap();
        if r.precision == "f32" {
            assert!(
                a.max_abs > 0.0,
                "{}: an f32 result identical to f64 means the f32 path was not used",
                r.backend
            );
        }
        eprintln!(
            "{} {} max_abs {:.3e} max_rel {:.3e}",
            r.backend, r.precision, a.max_abs, a.max_rel
        );
    }
    common::assert_ran(&devices, &common::ran_ok(&rows));
}

/// A grid split into bands (tiling) gives the same result as one launch, to f32 rounding (a vectorising
/// compiler may treat band edges differently: a few ulp of the ~30″ total, ulp(32) = 3.8e-6″).
#[test]
fn tiled_run_equals_single_band() {
    let problem = LensProblem::preset(
        Preset::Tiny,
        &LensOptions {
            n: Some(200),
            ..Default::default()
        },
    )
    .unwrap();
    let d = discover();
    let devices = common::devices(&d);
    let mut ran = Vec::new();
    for t in &devices {
        let Target::Device(dev) = t else {
            unreachable!()
        };
        // The whole device, and a budget of 7 rows' worth of the two float32 outputs (200 px × 4 B × 2).
        let run = |mem: u64| {
            let budget = DeviceBudget {
                max_alloc: dev.info().max_alloc_bytes,
                mem,
                gpu: dev.info().is_gpu,
            };
            let jobs = problem.plan(LensMode::F32, budget, &RunOptions::once());
            let bands = jobs.len();
            let outs = jobs
                .iter()
                .map(|j| {
                    dev.run(j)
                        .unwrap_or_else(|e| panic!("{}: {e}", t.id()))
                        .outputs
                })
                .collect();
            (bands, problem.assemble(LensMode::F32, outs))
        };
        let (bands_a, a) = run(200 * 4 * 2 * 7);
        let (bands_b, b) = run(dev.info().global_mem_bytes);
        assert!(
            bands_a > 10 && bands_b == 1,
            "{}: bands {bands_a} / {bands_b}",
            t.id()
        );
        let mut worst = 0.0f64;
        for c in 0..2 {
            assert_eq!(a.components[c].len(), 200 * 200);
            for (x, y) in a.components[c].iter().zip(&b.components[c]) {
                assert!(
                    x.is_finite(),
                    "{}: unwritten pixel in the tiled run",
                    t.id()
                );
                worst = worst.max((x - y).abs());
            }
        }
        assert!(
            worst <= 8e-6,
            "{}: tiled and single-band results differ by {worst:e}″",
            t.id()
        );
        ran.push(t.id());
    }
    common::assert_ran(&devices, &ran);
}

static NOOP: Program = Program {
    name: "selftest",
    opencl: "__kernel void writes_nothing(__global float *out, const int n) { }\n",
    sycl: "#include <sycl/sycl.hpp>\nnamespace syclexp = sycl::ext::oneapi::experimental;\n\
           extern \"C\" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))\n\
           void writes_nothing(float *out, int n) { }\n",
    headers: &[],
    opencl_options: "",
};

/// Output buffers are poisoned: a kernel that writes nothing returns NaN, never stale or zero data, on every
/// device model (CUDA's `writes_nothing` is in ports/cuda/selftest.cu).
#[test]
fn unwritten_outputs_stay_poisoned() {
    let d = discover();
    let devices = common::devices(&d);
    let mut ran = Vec::new();
    for t in &devices {
        let Target::Device(dev) = t else {
            unreachable!()
        };
        let job = KernelJob::single(
            &NOOP,
            vec![],
            "writes_nothing",
            vec![
                KernelArg::Output {
                    dtype: DType::F32,
                    len: 1000,
                },
                KernelArg::I32(1000),
            ],
            1000,
            Local::Auto,
            1,
            1,
        );
        let out = dev.run(&job).unwrap_or_else(|e| panic!("{}: {e}", t.id()));
        match &out.outputs[0] {
            HostVec::F32(v) => assert!(
                v.len() == 1000 && v.iter().all(|x| x.is_nan()),
                "{}: not poisoned",
                t.id()
            ),
            other => panic!("unexpected output {other:?}"),
        }
        ran.push(t.id());
    }
    common::assert_ran(&devices, &ran);
}

/// A job on resident buffer `id` of `data`'s length (uploaded from it with `init`) between two outputs of 10
/// and 20 values, through a kernel that writes nothing. A function, not a closure: the job borrows the
/// destination a read-back lends it.
fn resident_job<'a>(
    id: u64,
    data: &'a [f32],
    init: bool,
    read_back: ReadBack<'a>,
) -> KernelJob<'a> {
    let launch = Launch {
        kernel: "writes_nothing".into(),
        args: vec![StepArg::Buffer(1), StepArg::I32(data.len() as i32)],
        global: data.len(),
        local: Local::Auto,
    };
    let output = |len| BufferSpec::Output {
        dtype: DType::F32,
        len,
    };
    let resident = BufferSpec::Resident {
        id,
        dtype: DType::F32,
        len: data.len(),
        init: init.then_some(HostSlice::F32(data)),
        read_back,
    };
    let buffers = vec![output(10), resident, output(20)];
    RunOptions::single_shot().job(&NOOP, vec![], buffers, vec![Step::Launch(launch)])
}

/// [`resident_job`] run on `dev`; a failure panics with the device's id.
fn run_resident(
    dev: &dyn Accelerator,
    id: u64,
    data: &[f32],
    init: bool,
    read_back: ReadBack,
) -> JobOutput {
    dev.run(&resident_job(id, data, init, read_back))
        .unwrap_or_else(|e| panic!("{}: {e}", dev.id()))
}

/// A read-back landing later that is large (36 MiB: on CUDA it goes through the staging lanes on a thread
/// beside the next job) is whole when the next job is back, and that job, uploading new data into the very
/// buffer being copied out of (through the lanes too), waits for the copy first: the copy holds the old
/// values, the buffer the new.
#[test]
fn a_large_read_back_landing_later_is_whole_and_not_overwritten() {
    let d = discover();
    let devices = common::devices(&d);
    let n = 9 << 20;
    let old: Vec<f32> = (0..n).map(|i| (i % 1_000_003) as f32).collect();
    let new: Vec<f32> = old.iter().map(|v| -v - 1.0).collect();
    let mut ran = Vec::new();
    for t in &devices {
        let Target::Device(dev) = t else {
            unreachable!()
        };
        let id = resident_id();
        run_resident(dev.as_ref(), id, &old, true, ReadBack::No);
        let mut later = vec![f32::NAN; n];
        // SAFETY: `later` is read only after the next job has returned.
        let later_into = unsafe { LaterDestination::new(HostDestination::f32(&mut later)) };
        run_resident(
            dev.as_ref(),
            id,
            &old,
            false,
            ReadBack::IntoLater(later_into),
        );
        run_resident(dev.as_ref(), id, &new, true, ReadBack::No);
        assert!(
            later == old,
            "{}: the copy landed later holds the old values",
            t.id()
        );
        let mut now = vec![f32::NAN; n];
        run_resident(
            dev.as_ref(),
            id,
            &new,
            false,
            ReadBack::Into(HostDestination::f32(&mut now)),
        );
        assert!(now == new, "{}: the buffer holds the new values", t.id());
        dev.release(&[id]);
        ran.push(t.id());
    }
    common::assert_ran(&devices, &ran);
}

/// A resident buffer uploaded by one job stays on the device for the next, which reads it back unchanged
/// through a kernel that writes nothing (resident buffers are not poisoned by the host), in buffer order
/// between two outputs (which come back poisoned), or into the caller's memory (`ReadBack::Into`, of the
/// buffer's size only), or there later (`ReadBack::IntoLater`: landed when the next job or `settle` is back);
/// a resident buffer with both initial data and read_back is refused.
#[test]
fn resident_buffers_are_read_back_by_a_later_job() {
    let d = discover();
    let devices = common::devices(&d);
    let data: Vec<f32> = (0..1000).map(|i| i as f32 * 0.5 - 7.0).collect();
    let mut ran = Vec::new();
    for t in &devices {
        let Target::Device(dev) = t else {
            unreachable!()
        };
        let id = resident_id();
        let uploaded = run_resident(dev.as_ref(), id, &data, true, ReadBack::No);
        assert_eq!(uploaded.outputs.len(), 2, "{}: the two outputs", t.id());
        let out = run_resident(dev.as_ref(), id, &data, false, ReadBack::Returned);
        let poisoned = |v: &[f32], len| v.len() == len && v.iter().all(|x| x.is_nan());
        match &out.outputs[..] {
            [HostVec::F32(a), HostVec::F32(v), HostVec::F32(b)] => {
                assert!(poisoned(a, 10) && poisoned(b, 20), "{}: outputs", t.id());
                assert_eq!(v, &data, "{}: resident data read back", t.id());
            }
            other => panic!("{}: unexpected outputs {other:?}", t.id()),
        }
        // Read back into the caller's memory instead: not among the outputs, every value there.
        let mut into = vec![f32::NAN; data.len()];
        let out = run_resident(
            dev.as_ref(),
            id,
            &data,
            false,
            ReadBack::Into(HostDestination::f32(&mut into)),
        );
        assert_eq!(out.outputs.len(), 2, "{}: the two outputs only", t.id());
        assert_eq!(
            into,
            data,
            "{}: resident data read into the caller's memory",
            t.id()
        );
        // Read back later: landed once the device's next job is back (one that reads it back again),
        // or once settle() is back; the memory is not read before (LaterDestination's contract).
        let (mut later, mut again) = (vec![f32::NAN; data.len()], vec![f32::NAN; data.len()]);
        // SAFETY: `later` is read only after the next job has returned.
        let later_into = unsafe { LaterDestination::new(HostDestination::f32(&mut later)) };
        run_resident(
            dev.as_ref(),
            id,
            &data,
            false,
            ReadBack::IntoLater(later_into),
        );
        run_resident(
            dev.as_ref(),
            id,
            &data,
            false,
            ReadBack::Into(HostDestination::f32(&mut again)),
        );
        assert_eq!(later, data, "{}: read back later, next job back", t.id());
        assert_eq!(again, data, "{}: read back by the next job", t.id());
        let mut settled = vec![f32::NAN; data.len()];
        // SAFETY: `settled` is read only after settle() has returned.
        let settled_into = unsafe { LaterDestination::new(HostDestination::f32(&mut settled)) };
        run_resident(
            dev.as_ref(),
            id,
            &data,
            false,
            ReadBack::IntoLater(settled_into),
        );
        dev.settle()
            .unwrap_or_else(|e| panic!("{}: settle: {e}", t.id()));
        assert_eq!(settled, data, "{}: read back later, settled", t.id());
        let mut short = vec![0.0f32; 10];
        let refused = dev
            .run(&resident_job(
                id,
                &data,
                false,
                ReadBack::Into(HostDestination::f32(&mut short)),
            ))
            .err()
            .map(|e| e.to_string());
        assert!(
            refused
                .as_deref()
                .is_some_and(|e| e.contains("read back into 40 bytes")),
            "{}: a destination of another size: {refused:?}",
            t.id()
        );
        let refused = dev
            .run(&resident_job(id, &data, true, ReadBack::Returned))
            .err()
            .map(|e| e.to_string());
        assert!(
            refused.as_deref().is_some_and(|e| e.contains("read_back")),
            "{}: initial data and read_back together: {refused:?}",
            t.id()
        );
        dev.release(&[id]);
        ran.push(t.id());
    }
    common::assert_ran(&devices, &ran);
}

/// A kernel that does not compile surfaces the build log, naming the program and device.
#[test]
fn build_failure_shows_the_log() {
    static BROKEN: Program = Program {
        name: "broken",
        opencl: "__kernel void k(__global float *o) { o[0] = undefined_name; }\n",
        sycl: "",
        headers: &[],
        opencl_options: "",
    };
    let d = discover();
    // OpenCL builds at run time and returns the compiler's log (SYCL: the same through its JIT; CUDA is
    // compiled ahead of time by nvcc).
    let opencl: Vec<&Target> = common::devices(&d)
        .into_iter()
        .filter(|t| t.model() == Model::Opencl)
        .collect();
    assert!(!opencl.is_empty(), "no OpenCL device to build on");
    for t in opencl {
        let Target::Device(dev) = t else {
            unreachable!()
        };
        let job = KernelJob::single(
            &BROKEN,
            vec![],
            "k",
            vec![KernelArg::Output {
                dtype: DType::F32,
                len: 1,
            }],
            1,
            Local::Auto,
            0,
            1,
        );
        let err = dev.run(&job).expect_err("build must fail").to_string();
        assert!(
            err.contains("broken") && err.contains("undefined_name"),
            "{}: {err}",
            t.id()
        );
    }
}
