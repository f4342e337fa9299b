//! Build script, the build-time availability check: each optional model is compiled only when its
//! cargo feature is on AND its tools are found; otherwise a `cargo:warning` says why and the binary
//! reports the model as `not_built` with that reason.
//!
//! - `cuda`: nvcc from $NVCC, else `.tools/cuda` (scripts/setup.sh), else PATH. Kernels in ports/cuda are
//!   compiled for sm_90 (Hopper) plus PTX for newer GPUs and linked with the static CUDA runtime.
//! - `sycl`: the DPC++ runtime from $ASTROPORT_SYCL_ROOT, else `.tools/sycl`. Host glue is plain C++17
//!   built by g++; kernels are compiled at run time (docs/toolchain.md).
//!
//! Provenance (git commit, dirty flag, rustc, features) is embedded for the result rows.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn output(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    // .git/logs/HEAD changes with every commit (.git/HEAD only when the branch does): provenance stays current.
    for dir in ["cl", "cpp", "ports", ".git/HEAD", ".git/logs/HEAD"] {
        println!("cargo:rerun-if-changed={dir}");
    }
    for var in ["NVCC", "ASTROPORT_SYCL_ROOT", "ASTROPORT_TARGET_CPU"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    println!("cargo::rustc-check-cfg=cfg(has_cuda)");
    println!("cargo::rustc-check-cfg=cfg(has_sycl)");

    // Provenance.
    let commit =
        output("git", &["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty = output("git", &["status", "--porcelain", "--untracked-files=no"])
        .map(|s| !s.is_empty())
        .unwrap_or(false);
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let rustc_version = output(&rustc, &["--version"]).unwrap_or_else(|| "rustc (unknown)".into());
    let features: Vec<String> = ["cuda", "sycl"]
        .iter()
        .filter(|f| env::var(format!("CARGO_FEATURE_{}", f.to_uppercase())).is_ok())
        .map(|f| f.to_string())
        .collect();
    println!("cargo:rustc-env=ASTROPORT_GIT_COMMIT={commit}");
    println!("cargo:rustc-env=ASTROPORT_GIT_DIRTY={dirty}");
    println!("cargo:rustc-env=ASTROPORT_RUSTC_VERSION={rustc_version}");
    println!(
        "cargo:rustc-env=ASTROPORT_FEATURES={}",
        if features.is_empty() {
            "none".into()
        } else {
            features.join(",")
        }
    );
    let target_cpu = env::var("ASTROPORT_TARGET_CPU")
        .unwrap_or_else(|_| "x86-64-v3 (.cargo/config.toml)".into());
    println!("cargo:rustc-env=ASTROPORT_TARGET_CPU={target_cpu}");

    let mut bridges: Vec<&str> = Vec::new();
    let mut bridge_sources: Vec<PathBuf> = Vec::new();
    let mut extra_includes: Vec<PathBuf> = Vec::new();

    // CUDA.
    let cuda_status = if env::var("CARGO_FEATURE_CUDA").is_err() {
        "built without the `cuda` cargo feature".to_string()
    } else {
        match find_nvcc(&root) {
            Some(nvcc) => {
                build_cuda(&root, &nvcc);
                bridges.push("src/backend/cuda.rs");
                bridge_sources.push(root.join("cpp/cuda_bridge.cpp"));
                println!("cargo:rustc-cfg=has_cuda");
                "built".into()
            }
            None => {
                let msg = "the `cuda` feature is on but nvcc was not found ($NVCC, .tools/cuda, PATH); run scripts/setup.sh";
                println!("cargo:warning={msg}");
                msg.into()
            }
        }
    };
    println!("cargo:rustc-env=ASTROPORT_CUDA_STATUS={cuda_status}");

    // SYCL.
    let sycl_status = if env::var("CARGO_FEATURE_SYCL").is_err() {
        "built without the `sycl` cargo feature".to_string()
    } else {
        let sycl_root = env::var("ASTROPORT_SYCL_ROOT")
            .map(PathBuf::from)
            .unwrap_or_else(|_| root.join(".tools/sycl"));
        if sycl_root.join("include/sycl/sycl.hpp").exists()
            && sycl_root.join("lib/libsycl.so").exists()
        {
            bridges.push("src/backend/sycl.rs");
            bridge_sources.push(root.join("cpp/sycl_bridge.cpp"));
            bridge_sources.push(root.join("cpp/sycl_host.cpp"));
            extra_includes.push(sycl_root.join("include"));
            let lib = sycl_root.join("lib");
            println!("cargo:rustc-link-search=native={}", lib.display());
            println!("cargo:rustc-link-lib=dylib=sycl");
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
            println!("cargo:rustc-cfg=has_sycl");
            "built".into()
        } else {
            let msg = format!(
                "the `sycl` feature is on but the DPC++ runtime was not found in {} (set ASTROPORT_SYCL_ROOT or run scripts/setup.sh)",
                sycl_root.display()
            );
            println!("cargo:warning={msg}");
            msg
        }
    };
    println!("cargo:rustc-env=ASTROPORT_SYCL_STATUS={sycl_status}");

    if !bridges.is_empty() {
        let mut all = vec!["src/backend/native.rs"];
        all.extend(bridges);
        let mut b = cxx_build::bridges(all);
        b.files(&bridge_sources)
            .std("c++17")
            .include(root.join("cpp"))
            .include(root.join("ports/cuda"))
            .include(root.join("cl/common"))
            .define("SYCL_DISABLE_FSYCL_SYCLHPP_WARNING", None)
            .flag_if_supported("-Wno-deprecated-declarations")
            .flag_if_supported("-Wno-unused-parameter")
            .warnings(false);
        for inc in &extra_includes {
            b.include(inc);
        }
        b.compile("astroport_bridge");
    }
}

fn find_nvcc(root: &Path) -> Option<PathBuf> {
    if let Ok(p) = env::var("NVCC") {
        return Some(PathBuf::from(p));
    }
    let venv = root.join(".tools/cuda/lib");
    if let Ok(entries) = std::fs::read_dir(&venv) {
        for e in entries.flatten() {
            let candidate = e.path().join("site-packages/nvidia/cu13/bin/nvcc");
            if candidate.exists() {
                return Some(candidate);
            }
        }
    }
    output("which", &["nvcc"]).map(PathBuf::from)
}

const NVCC_FLAGS: &[&str] = &[
    "-O3",
    "-std=c++17",
    "-gencode=arch=compute_90,code=sm_90",
    "-gencode=arch=compute_90,code=compute_90",
];

fn build_cuda(root: &Path, nvcc: &Path) {
    let bin = nvcc.parent().unwrap();
    // cc's CUDA mode runs `nvcc` from PATH (setting .compiler() made it pass gcc flags to nvcc).
    let path = format!("{}:{}", bin.display(), env::var("PATH").unwrap_or_default());
    env::set_var("PATH", &path);
    let version = output(nvcc.to_str().unwrap(), &["--version"])
        .and_then(|v| v.lines().last().map(str::to_string))
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=ASTROPORT_NVCC_VERSION={version}");
    println!(
        "cargo:rustc-env=ASTROPORT_NVCC_FLAGS={}",
        NVCC_FLAGS.join(" ")
    );
    let mut b = cc::Build::new();
    // No -G even in dev builds (cc adds it when DEBUG is set: unoptimised kernels, 2-3x the registers).
    b.cuda(true).cudart("static").debug(false).opt_level(3);
    for f in NVCC_FLAGS {
        b.flag(f);
    }
    b.define(
        "ASTROPORT_NVCC_FLAGS",
        Some(format!("\"{}\"", NVCC_FLAGS.join(" ")).as_str()),
    )
    .include(root.join("cl/common"))
    .include(root.join("cpp"))
    .include(root.join("ports/cuda"))
    .warnings(false);
    let mut units: Vec<PathBuf> = std::fs::read_dir(root.join("ports/cuda"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "cu"))
        .collect();
    units.sort();
    // One library per translation unit: with several .cu files cc adds --device-c (relocatable device
    // code), which raised the f64 lens kernel from 42 to 54 registers on sm_90.
    for unit in &units {
        let stem = unit.file_stem().unwrap().to_string_lossy().to_string();
        b.clone()
            .file(unit)
            .compile(&format!("astroport_cuda_{stem}"));
    }
    // The wheel's libcudart_static.a lives beside nvcc's bin folder.
    let lib = bin.parent().unwrap().join("lib");
    println!("cargo:rustc-link-search=native={}", lib.display());
    for l in ["rt", "dl", "pthread"] {
        println!("cargo:rustc-link-lib={l}");
    }
}
