// Plain C++ description of one job, shared by the CUDA (ports/cuda/cuda_host.*) and SYCL (cpp/sycl_host.*)
// host plumbing. No cxx types here: the hosts can be built and tested with nvcc or g++ alone.
// cpp/native_convert.h converts from the cxx bridge types (src/backend/native.rs), which document the fields.
//
// A job is device buffers that live for the whole job plus an ordered list of steps (kernel launches and
// buffer fills) on one in-order stream/queue. Both hosts: upload inputs once, poison outputs and scratch
// with 0xFF, run the sequence `warmup` times, time it `repeats` times (whole sequence and each step),
// re-poison, run it once more and copy each output to the caller's host memory. Host memory is named by
// address (Buffer::host): the caller's arrays are read and written in place, never gathered into a blob. With
// repeats == 0 (single-shot: one iteration of an adaptive algorithm) that last run is the timed one.
// Resident buffers (role kResident) outlive the job: each host keeps them per (device, resident_id) until
// released, never poisons them, and (re)allocates one that is missing or smaller than the job's count. A
// resident buffer with `read_back` is copied to its host address after the job, as an output is (with
// `read_back_later`, possibly beside the next job).
#pragma once
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace astroport_native {

enum Role : uint8_t { kInput = 0, kOutput = 1, kScratch = 2, kResident = 3 };
enum DType : uint8_t { kI32 = 0, kU32 = 1, kF32 = 2, kF64 = 3, kU64 = 4 };

inline size_t dtype_bytes(uint8_t dtype) { return (dtype == kF64 || dtype == kU64) ? 8 : 4; }

struct Buffer {
    uint8_t role = kInput;
    uint8_t dtype = kF32;
    uint64_t count = 0;   // elements
    // Inputs and resident initial data: address of the host data uploaded; outputs: address the last run's
    // data are copied to. Owned by the caller, valid for the whole job.
    uint64_t host = 0;
    uint64_t resident_id = 0;
    uint64_t init_count = 0;  // resident: elements uploaded from `host` before the job (0: keep contents)
    bool read_back = false;   // resident: copied to `host` after the job (never with init_count)
    // With read_back: the copy may land after the job returns, by the time the device's next job (or the
    // host's settle call) returns; a host without that ability copies it as read_back alone.
    bool read_back_later = false;
    size_t bytes() const { return static_cast<size_t>(count) * dtype_bytes(dtype); }
    size_t init_bytes() const { return static_cast<size_t>(init_count) * dtype_bytes(dtype); }
    // Outputs and read-back resident buffers: the last run's data go to `host`.
    bool copied_back() const { return role == kOutput || (role == kResident && read_back); }
    const void *host_source() const { return reinterpret_cast<const void *>(host); }
    void *host_destination() const { return reinterpret_cast<void *>(host); }
};

struct Arg {
    bool is_buffer = false;
    uint32_t buffer = 0;       // buffers: index into Job::buffers
    uint8_t dtype = kI32;      // scalars
    uint64_t scalar_bits = 0;  // scalars: value bits, little-endian
};

struct Step {
    std::string kernel;  // empty: a fill
    uint32_t fill_buffer = 0;
    uint8_t fill_byte = 0;
    uint64_t global = 0;  // 1-D work-items; the host rounds up to a multiple of local
    uint64_t local = 0;   // 0 = host chooses
    uint64_t first_arg = 0, arg_count = 0;
    bool is_fill() const { return kernel.empty(); }
};

struct Job {
    std::string program;                    // build-cache key, with defines
    std::string source;                     // SYCL: kernel source compiled at run time
    std::vector<std::string> defines;       // "NAME=VALUE"
    std::vector<std::string> header_names;  // SYCL: include files handed to the run-time compiler
    std::vector<std::string> header_texts;
    uint32_t warmup = 1;
    uint32_t repeats = 3;
    std::vector<Buffer> buffers;
    std::vector<Step> steps;
    std::vector<Arg> args;  // every launch's arguments, back to back
};

struct StepOutcome {
    int regs_per_thread = -1;
    double occupancy = -1;
    std::string resources_source;
    uint64_t local_used = 0;
};

struct Outcome {
    std::vector<double> times_s;       // timed repeats, whole sequence, device timer
    std::vector<double> step_times_s;  // repeat-major: [r * steps.size() + s]
    std::vector<StepOutcome> steps;
    double build_s = 0;
    std::string build_options;
};

// Checks every index and size of a job against itself, before any device work. Written once for both hosts.
inline void validate(const Job &job, size_t max_alloc) {
    auto fail = [](const std::string &m) -> void { throw std::runtime_error(m); };
    if (job.steps.empty()) fail("job " + job.program + " has no steps");
    if (job.header_names.size() != job.header_texts.size())
        fail("job " + job.program + ": header_names and header_texts differ in length");
    for (size_t i = 0; i < job.buffers.size(); ++i) {
        const Buffer &b = job.buffers[i];
        const std::string name = "buffer " + std::to_string(i);
        if (b.role > kResident) fail(name + ": unknown role " + std::to_string(b.role));
        if (b.role == kResident && job.warmup + job.repeats > 0) fail(name + ": resident buffers need a single-shot job");
        if (b.role == kResident && (b.init_count > b.count || (b.init_count > 0 && b.host == 0)))
            fail(name + ": resident initial data larger than the buffer, or missing");
        if (b.read_back && (b.role != kResident || b.init_count > 0))
            fail(name + ": only a resident buffer without initial data is read back");
        if (b.read_back_later && !b.read_back) fail(name + ": read back later but not read back");
        if (b.dtype > kU64) fail(name + ": unknown dtype " + std::to_string(b.dtype));
        if (b.count > std::numeric_limits<size_t>::max() / dtype_bytes(b.dtype)) fail(name + ": count overflows");
        const size_t bytes = b.bytes();
        if (max_alloc && bytes > max_alloc)
            fail(name + ": " + std::to_string(bytes) + " bytes exceed the device's max allocation of " +
                 std::to_string(max_alloc));
        if ((b.role == kInput || b.copied_back()) && bytes > 0 && b.host == 0)
            fail(name + ": no host memory for its " + std::to_string(bytes) + " bytes");
    }
    for (size_t s = 0; s < job.steps.size(); ++s) {
        const Step &st = job.steps[s];
        const std::string name = "step " + std::to_string(s) + " (" + (st.is_fill() ? "fill" : st.kernel) + ")";
        if (st.is_fill()) {
            if (st.fill_buffer >= job.buffers.size()) fail(name + ": fill names a missing buffer");
            continue;
        }
        if (st.global == 0) fail(name + ": global work size is 0");
        if (st.first_arg > job.args.size() || st.arg_count > job.args.size() - st.first_arg)
            fail(name + ": argument range outside the job's argument list");
        for (uint64_t a = st.first_arg; a < st.first_arg + st.arg_count; ++a) {
            const Arg &arg = job.args[a];
            if (arg.is_buffer && arg.buffer >= job.buffers.size())
                fail(name + ": argument " + std::to_string(a - st.first_arg) + " names a missing buffer");
            if (!arg.is_buffer && arg.dtype > kU64)
                fail(name + ": argument " + std::to_string(a - st.first_arg) + " has unknown dtype");
        }
    }
}

struct Device {
    int index = 0;
    std::string name, vendor, driver;
    bool is_gpu = false;
    uint64_t global_mem_bytes = 0, max_alloc_bytes = 0;
    bool fp64 = false;
    uint32_t compute_units = 0;
};

}  // namespace astroport_native
