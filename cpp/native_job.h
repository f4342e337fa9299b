// Plain C++ description of one kernel job, shared by the CUDA (ports/cuda/cuda_host.*) and SYCL
// (cpp/sycl_host.*) host plumbing. No cxx types here: the hosts can be built and tested with nvcc or g++
// alone. cpp/native_convert.h converts from the cxx bridge types (src/backend/native.rs).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace astroport_native {

enum Role : uint8_t { kInput = 0, kOutput = 1, kScalar = 2 };
enum DType : uint8_t { kI32 = 0, kU32 = 1, kF32 = 2, kF64 = 3, kU64 = 4 };

inline size_t dtype_bytes(uint8_t dtype) { return (dtype == kF64 || dtype == kU64) ? 8 : 4; }

struct Arg {
    uint8_t role = kScalar;
    uint8_t dtype = kI32;
    uint64_t count = 0;        // buffers: elements
    uint64_t offset = 0;       // inputs: byte offset into the input blob
    uint64_t scalar_bits = 0;  // scalars: value bits, little-endian
};

struct Job {
    std::string program;                     // build-cache key, with defines
    std::string source;                      // SYCL: kernel source compiled at run time
    std::vector<std::string> defines;        // "NAME=VALUE"
    std::vector<std::string> header_names;   // SYCL: include files handed to the run-time compiler
    std::vector<std::string> header_texts;
    std::string kernel;
    uint64_t global = 0;  // 1-D work-items; the host rounds up to a multiple of local
    uint64_t local = 0;   // 0 = host chooses
    uint32_t warmup = 1;
    uint32_t repeats = 3;
};

struct Outcome {
    std::vector<double> times_s;   // timed repeats, device timer
    double build_s = 0;
    int regs_per_thread = -1;
    double occupancy = -1;
    std::string resources_source;
    uint64_t local_used = 0;
    std::string build_options;
};

struct Device {
    int index = 0;
    std::string name, vendor, driver;
    bool is_gpu = false;
    uint64_t global_mem_bytes = 0, max_alloc_bytes = 0;
    bool fp64 = false;
    uint32_t compute_units = 0;
};

}  // namespace astroport_native
