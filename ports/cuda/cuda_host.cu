// CUDA host plumbing (written once for every workload): device list, version, and the job runner behind
// cpp/cuda_bridge.cpp. Kernels are compiled ahead of time by nvcc into this binary and found by name in the
// per-workload tables (ASTROPORT_CUDA_WORKLOADS in cuda_host.h).
#include "cuda_host.h"

#include <cuda_runtime.h>

#include <chrono>
#include <cstring>
#include <limits>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#ifndef ASTROPORT_NVCC_FLAGS
#define ASTROPORT_NVCC_FLAGS "unknown"
#endif

namespace astroport_cuda {
namespace {

using astroport_native::Arg;
using astroport_native::Device;
using astroport_native::Job;
using astroport_native::Outcome;
using astroport_native::Step;
using astroport_native::StepOutcome;

std::string err_text(cudaError_t e) {
    return std::string(cudaGetErrorString(e)) + " (" + cudaGetErrorName(e) + ")";
}

[[noreturn]] void fail(const char *call, const char *file, int line, cudaError_t e) {
    // Clear the (non-sticky) last-error slot so that later calls start clean.
    (void)cudaGetLastError();
    throw std::runtime_error(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                             err_text(e));
}

#define ASTRO_CUDA_CHECK(call)                                         \
    do {                                                               \
        cudaError_t astro_err_ = (call);                               \
        if (astro_err_ != cudaSuccess) fail(#call, __FILE__, __LINE__, astro_err_); \
    } while (0)

std::string version_text(int v) {
    if (v <= 0) return "none";
    return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

int driver_version() {
    int v = 0;
    if (cudaDriverGetVersion(&v) != cudaSuccess) {
        (void)cudaGetLastError();
        v = 0;
    }
    return v;
}

int runtime_version_int() {
    int v = 0;
    if (cudaRuntimeGetVersion(&v) != cudaSuccess) {
        (void)cudaGetLastError();
        v = CUDART_VERSION;
    }
    return v;
}

// Number of devices, or a "no CUDA device" exception carrying the CUDA error string.
int device_count() {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        throw std::runtime_error("no CUDA device: cudaGetDeviceCount: " + err_text(e) + " [driver " +
                                 version_text(driver_version()) + ", runtime " +
                                 version_text(runtime_version_int()) + "]");
    }
    if (n <= 0) throw std::runtime_error("no CUDA device: cudaGetDeviceCount returned 0 devices");
    return n;
}

// ---- RAII holders: destructors ignore errors (the context may already be broken by a kernel fault). ----
struct DeviceBuffer {
    void *ptr = nullptr;
    size_t bytes = 0;
    DeviceBuffer() = default;
    DeviceBuffer(const DeviceBuffer &) = delete;
    DeviceBuffer &operator=(const DeviceBuffer &) = delete;
    DeviceBuffer(DeviceBuffer &&o) noexcept : ptr(o.ptr), bytes(o.bytes) { o.ptr = nullptr; o.bytes = 0; }
    ~DeviceBuffer() {
        if (ptr) (void)cudaFree(ptr);
    }
};

struct Stream {
    cudaStream_t s = nullptr;
    Stream() { ASTRO_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
    Stream(const Stream &) = delete;
    Stream &operator=(const Stream &) = delete;
    ~Stream() {
        if (s) (void)cudaStreamDestroy(s);
    }
};

struct Event {
    cudaEvent_t e = nullptr;
    Event() { ASTRO_CUDA_CHECK(cudaEventCreate(&e)); }
    Event(const Event &) = delete;
    Event &operator=(const Event &) = delete;
    ~Event() {
        if (e) (void)cudaEventDestroy(e);
    }
};

// ---- Kernel tables ----
struct Table {
    const char *workload;
    const KernelEntry *entries;
    int count;
};

std::vector<Table> tables() {
    std::vector<Table> t;
#define ASTROPORT_CUDA_TABLE_ROW(w) t.push_back(Table{#w, w##_kernels, w##_kernel_count});
    ASTROPORT_CUDA_WORKLOADS(ASTROPORT_CUDA_TABLE_ROW)
#undef ASTROPORT_CUDA_TABLE_ROW
    return t;
}

const void *find_kernel(const std::string &name) {
    std::string known;
    for (const Table &t : tables()) {
        for (int i = 0; i < t.count; ++i) {
            if (name == t.entries[i].name) return t.entries[i].func;
            known += known.empty() ? "" : ", ";
            known += t.entries[i].name;
        }
    }
    throw std::runtime_error("unknown CUDA kernel '" + name + "' (compiled kernels: " + known + ")");
}

// First touch of (device, kernel) loads its module (lazy loading is the CUDA 12.2+ default); remember which
// ones were loaded so build_s is reported once.
std::mutex g_loaded_mutex;
std::set<std::pair<int, const void *>> g_loaded;

// Checks a launch's arguments against the kernel's parameter list (count and sizes) with
// cudaFuncGetParamInfo, so a mismatch is an error message rather than garbage pointers on the device.
// Returns false (no check made) when the runtime/driver cannot answer.
bool check_params(const void *func, const Job &job, const Step &step) {
    auto param_size = [&](size_t i, size_t *size) -> cudaError_t {
        size_t off = 0;
        cudaError_t e = cudaFuncGetParamInfo(func, i, &off, size);
        if (e != cudaSuccess) (void)cudaGetLastError();
        return e;
    };
    size_t size = 0;
    cudaError_t e0 = param_size(0, &size);
    if (e0 != cudaSuccess && e0 != cudaErrorInvalidValue) return false;  // not supported here
    size_t n_params = 0;
    if (e0 == cudaSuccess) {
        n_params = 1;
        while (n_params < 4096 && param_size(n_params, &size) == cudaSuccess) ++n_params;
    }
    if (n_params != step.arg_count)
        throw std::runtime_error("CUDA kernel " + step.kernel + " takes " + std::to_string(n_params) +
                                 " parameters, the job passes " + std::to_string(step.arg_count));
    for (size_t i = 0; i < step.arg_count; ++i) {
        const Arg &a = job.args[step.first_arg + i];
        ASTRO_CUDA_CHECK(param_size(i, &size));
        const size_t want = a.is_buffer ? sizeof(void *) : astroport_native::dtype_bytes(a.dtype);
        if (size != want)
            throw std::runtime_error("CUDA kernel " + step.kernel + " parameter " + std::to_string(i) + " is " +
                                     std::to_string(size) + " bytes, the job passes " + std::to_string(want) +
                                     (a.is_buffer ? " (buffer)" : " (scalar, dtype " + std::to_string(a.dtype) + ")"));
    }
    return true;
}

// One launch step, resolved: function, geometry and its parameter pointers.
struct Resolved {
    const void *func = nullptr;
    dim3 grid, block;
    std::vector<size_t> param_slots;  // indices into the job-wide scalar/pointer slot table
};

Outcome run_job_impl(int device, const Job &job, const uint8_t *inputs, size_t inputs_len, uint8_t *outputs,
                     size_t outputs_len) {
    const size_t out_total = astroport_native::validate(job, inputs_len, 0);
    if (outputs_len != out_total)
        throw std::runtime_error("output buffer holds " + std::to_string(outputs_len) + " bytes, the job writes " +
                                 std::to_string(out_total));

    const int n_dev = device_count();
    if (device < 0 || device >= n_dev)
        throw std::runtime_error("CUDA device " + std::to_string(device) + " out of range (" +
                                 std::to_string(n_dev) + " devices)");
    ASTRO_CUDA_CHECK(cudaSetDevice(device));
    ASTRO_CUDA_CHECK(cudaFree(nullptr));  // create the primary context outside the timed module load
    int max_threads_sm = 0;
    ASTRO_CUDA_CHECK(cudaDeviceGetAttribute(&max_threads_sm, cudaDevAttrMaxThreadsPerMultiProcessor, device));

    Outcome out;
    out.build_options = "nvcc " + std::to_string(__CUDACC_VER_MAJOR__) + "." +
                        std::to_string(__CUDACC_VER_MINOR__) + "." + std::to_string(__CUDACC_VER_BUILD__) +
                        ": " + ASTROPORT_NVCC_FLAGS;

    // Buffers first: launch parameters point at them.
    std::vector<DeviceBuffer> buffers(job.buffers.size());
    Stream stream;
    for (size_t i = 0; i < job.buffers.size(); ++i) {
        const astroport_native::Buffer &b = job.buffers[i];
        DeviceBuffer &d = buffers[i];
        d.bytes = b.bytes();
        if (d.bytes > 0) ASTRO_CUDA_CHECK(cudaMalloc(&d.ptr, d.bytes));
        if (b.role == astroport_native::kInput && d.bytes > 0)
            ASTRO_CUDA_CHECK(cudaMemcpyAsync(d.ptr, inputs + b.offset, d.bytes, cudaMemcpyHostToDevice, stream.s));
    }

    // Launch parameter storage: one slot per argument of the job, sized once (params point into it).
    union Scalar {
        int32_t i32;
        uint32_t u32;
        float f32;
        double f64;
        uint64_t u64;
        void *ptr;
    };
    std::vector<Scalar> slots(job.args.size());
    for (size_t a = 0; a < job.args.size(); ++a) {
        const Arg &arg = job.args[a];
        std::memset(&slots[a], 0, sizeof(Scalar));
        if (arg.is_buffer)
            slots[a].ptr = buffers[arg.buffer].ptr;
        else
            std::memcpy(&slots[a], &arg.scalar_bits, astroport_native::dtype_bytes(arg.dtype));  // LE host
    }
    std::vector<std::vector<void *>> params(job.steps.size());

    // Per launch: kernel, module load (first touch), geometry, resources.
    std::vector<Resolved> resolved(job.steps.size());
    out.steps.resize(job.steps.size());
    for (size_t s = 0; s < job.steps.size(); ++s) {
        const Step &step = job.steps[s];
        if (step.is_fill()) continue;
        Resolved &r = resolved[s];
        r.func = find_kernel(step.kernel);
        cudaFuncAttributes attr{};
        {
            std::lock_guard<std::mutex> lock(g_loaded_mutex);
            const bool first = g_loaded.find({device, r.func}) == g_loaded.end();
            const auto t0 = std::chrono::steady_clock::now();
            ASTRO_CUDA_CHECK(cudaFuncGetAttributes(&attr, r.func));
            const auto t1 = std::chrono::steady_clock::now();
            if (first) {
                out.build_s += std::chrono::duration<double>(t1 - t0).count();
                g_loaded.insert({device, r.func});
            }
        }
        const bool params_checked = check_params(r.func, job, step);
        int block = 0;
        std::string block_source;
        if (step.local != 0) {
            if (step.local > static_cast<uint64_t>(attr.maxThreadsPerBlock))
                throw std::runtime_error("local size " + std::to_string(step.local) + " exceeds kernel " +
                                         step.kernel + "'s limit of " + std::to_string(attr.maxThreadsPerBlock) +
                                         " threads per block");
            block = static_cast<int>(step.local);
            block_source = "block from job";
        } else {
            int min_grid = 0;
            cudaError_t e = cudaOccupancyMaxPotentialBlockSize(&min_grid, &block, r.func, 0, 0);
            if (e != cudaSuccess || block <= 0) {
                (void)cudaGetLastError();
                block = attr.maxThreadsPerBlock < 256 ? attr.maxThreadsPerBlock : 256;
                block_source = "block 256 default";
            } else {
                block_source = "block from cudaOccupancyMaxPotentialBlockSize";
            }
        }
        const uint64_t grid64 = (step.global + static_cast<uint64_t>(block) - 1) / static_cast<uint64_t>(block);
        if (grid64 > 0x7fffffffull)
            throw std::runtime_error("grid of " + std::to_string(grid64) + " blocks exceeds the 2^31-1 limit");
        r.grid = dim3(static_cast<unsigned>(grid64));
        r.block = dim3(static_cast<unsigned>(block));
        int active_blocks = 0;
        ASTRO_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&active_blocks, r.func, block, 0));
        StepOutcome &so = out.steps[s];
        so.local_used = static_cast<uint64_t>(block);
        so.regs_per_thread = attr.numRegs;
        so.occupancy = max_threads_sm > 0 ? static_cast<double>(active_blocks) * block / max_threads_sm : -1.0;
        so.resources_source = "cudaFuncGetAttributes + cudaOccupancyMaxActiveBlocksPerMultiprocessor; local mem " +
                              std::to_string(attr.localSizeBytes) + " B; static smem " +
                              std::to_string(attr.sharedSizeBytes) + " B; const " +
                              std::to_string(attr.constSizeBytes) + " B; " + std::to_string(active_blocks) +
                              " blocks/SM of " + std::to_string(block) + " (max " + std::to_string(max_threads_sm) +
                              " threads/SM, kernel max " + std::to_string(attr.maxThreadsPerBlock) +
                              " threads/block); " + block_source + "; binary sm_" +
                              std::to_string(attr.binaryVersion) + ", ptx " + std::to_string(attr.ptxVersion) +
                              (params_checked ? "; params checked" : "; params unchecked");
        for (uint64_t a = step.first_arg; a < step.first_arg + step.arg_count; ++a)
            params[s].push_back(job.args[a].is_buffer ? static_cast<void *>(&slots[a].ptr)
                                                      : static_cast<void *>(&slots[a]));
    }

    auto poison = [&]() {
        for (size_t i = 0; i < job.buffers.size(); ++i)
            if (job.buffers[i].role != astroport_native::kInput && buffers[i].bytes > 0)
                ASTRO_CUDA_CHECK(cudaMemsetAsync(buffers[i].ptr, 0xFF, buffers[i].bytes, stream.s));
    };
    // Runs the step sequence; with events (n_steps + 1 of them), records one before each step and after the last.
    auto sequence = [&](std::vector<Event> *events) {
        for (size_t s = 0; s < job.steps.size(); ++s) {
            if (events) ASTRO_CUDA_CHECK(cudaEventRecord((*events)[s].e, stream.s));
            const Step &step = job.steps[s];
            if (step.is_fill()) {
                DeviceBuffer &b = buffers[step.fill_buffer];
                if (b.bytes > 0) ASTRO_CUDA_CHECK(cudaMemsetAsync(b.ptr, step.fill_byte, b.bytes, stream.s));
            } else {
                ASTRO_CUDA_CHECK(cudaLaunchKernel(resolved[s].func, resolved[s].grid, resolved[s].block,
                                                  params[s].data(), 0, stream.s));
                ASTRO_CUDA_CHECK(cudaGetLastError());
            }
        }
        if (events) ASTRO_CUDA_CHECK(cudaEventRecord(events->back().e, stream.s));
    };

    poison();
    ASTRO_CUDA_CHECK(cudaStreamSynchronize(stream.s));
    for (uint32_t w = 0; w < job.warmup; ++w) sequence(nullptr);
    ASTRO_CUDA_CHECK(cudaStreamSynchronize(stream.s));

    std::vector<Event> events(job.steps.size() + 1);
    // Appends the whole sequence's and each step's time of the events just recorded (synchronised).
    auto record = [&]() {
        float ms = 0;
        ASTRO_CUDA_CHECK(cudaEventElapsedTime(&ms, events.front().e, events.back().e));
        out.times_s.push_back(static_cast<double>(ms) * 1e-3);
        for (size_t s = 0; s < job.steps.size(); ++s) {
            ASTRO_CUDA_CHECK(cudaEventElapsedTime(&ms, events[s].e, events[s + 1].e));
            out.step_times_s.push_back(static_cast<double>(ms) * 1e-3);
        }
    };
    out.times_s.reserve(job.repeats);
    for (uint32_t r = 0; r < job.repeats; ++r) {
        sequence(&events);
        ASTRO_CUDA_CHECK(cudaEventSynchronize(events.back().e));
        record();
    }

    // Verification run on re-poisoned outputs and scratch. A single-shot job (repeats == 0: one iteration of
    // an adaptive algorithm) times this run instead.
    poison();
    const bool single_shot = job.repeats == 0;
    sequence(single_shot ? &events : nullptr);
    ASTRO_CUDA_CHECK(cudaStreamSynchronize(stream.s));
    if (single_shot) record();
    size_t pos = 0;
    for (size_t i = 0; i < job.buffers.size(); ++i) {
        if (job.buffers[i].role != astroport_native::kOutput || buffers[i].bytes == 0) continue;
        ASTRO_CUDA_CHECK(cudaMemcpyAsync(outputs + pos, buffers[i].ptr, buffers[i].bytes, cudaMemcpyDeviceToHost,
                                         stream.s));
        pos += buffers[i].bytes;
    }
    ASTRO_CUDA_CHECK(cudaStreamSynchronize(stream.s));
    return out;
}

}  // namespace

std::vector<Device> devices() {
    const int n = device_count();
    const std::string driver = "CUDA driver " + version_text(driver_version()) + " / runtime " +
                               version_text(runtime_version_int());
    std::vector<Device> out;
    out.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
        cudaDeviceProp p{};
        ASTRO_CUDA_CHECK(cudaGetDeviceProperties(&p, i));
        Device d;
        d.index = i;
        d.name = p.name;
        d.vendor = "NVIDIA";
        d.driver = driver + ", sm_" + std::to_string(p.major) + std::to_string(p.minor);
        d.is_gpu = true;
        d.global_mem_bytes = p.totalGlobalMem;
        d.max_alloc_bytes = p.totalGlobalMem;
        d.fp64 = true;
        d.compute_units = static_cast<uint32_t>(p.multiProcessorCount);
        out.push_back(std::move(d));
    }
    return out;
}

uint64_t free_memory(int device) {
    ASTRO_CUDA_CHECK(cudaSetDevice(device));
    size_t free_bytes = 0, total_bytes = 0;
    ASTRO_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    return static_cast<uint64_t>(free_bytes);
}

std::string runtime_version() {
    return "runtime " + version_text(runtime_version_int()) + ", driver " + version_text(driver_version());
}

Outcome run_job(int device, const Job &job, const uint8_t *inputs, size_t inputs_len, uint8_t *outputs,
                size_t outputs_len) {
    try {
        return run_job_impl(device, job, inputs, inputs_len, outputs, outputs_len);
    } catch (const std::runtime_error &e) {
        std::string kernels;
        for (const Step &s : job.steps)
            if (!s.is_fill()) kernels += (kernels.empty() ? "" : ",") + s.kernel;
        throw std::runtime_error("CUDA job " + job.program + " [" + kernels + "] on device " + std::to_string(device) +
                                 ": " + e.what());
    }
}

}  // namespace astroport_cuda
