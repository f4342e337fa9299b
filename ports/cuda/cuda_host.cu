// CUDA host plumbing (written once for every workload): device list, version, and the job runner behind
// cpp/cuda_bridge.cpp. Kernels are compiled ahead of time by nvcc into this binary and found by name in the
// per-workload tables (ASTROPORT_CUDA_WORKLOADS in cuda_host.h).
#include "cuda_host.h"

#include <cuda_runtime.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <tuple>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
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
// A device allocation; with `stream` set it came from the stream-ordered pool and goes back to it.
struct DeviceBuffer {
    void *ptr = nullptr;
    size_t bytes = 0;
    cudaStream_t stream = nullptr;
    DeviceBuffer() = default;
    DeviceBuffer(const DeviceBuffer &) = delete;
    DeviceBuffer &operator=(const DeviceBuffer &) = delete;
    DeviceBuffer(DeviceBuffer &&o) noexcept : ptr(o.ptr), bytes(o.bytes), stream(o.stream) {
        o.ptr = nullptr;
        o.bytes = 0;
    }
    ~DeviceBuffer() {
        if (!ptr) return;
        if (stream)
            (void)cudaFreeAsync(ptr, stream);
        else
            (void)cudaFree(ptr);
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

// Name -> host stub, built once (an iterative workload looks kernels up every job).
const void *find_kernel(const std::string &name) {
    static std::mutex mutex;
    static std::map<std::string, const void *> *index = nullptr;
    std::lock_guard<std::mutex> lock(mutex);
    if (!index) {
        index = new std::map<std::string, const void *>();
        for (const Table &t : tables())
            for (int i = 0; i < t.count; ++i) index->emplace(t.entries[i].name, t.entries[i].func);
    }
    auto it = index->find(name);
    if (it != index->end()) return it->second;
    std::string known;
    for (const auto &kv : *index) known += (known.empty() ? "" : ", ") + kv.first;
    throw std::runtime_error("unknown CUDA kernel '" + name + "' (compiled kernels: " + known + ")");
}

// Resident buffers (astroport_native::kResident), per (device, id), until release().
std::mutex g_resident_mutex;
std::map<std::pair<int, uint64_t>, DeviceBuffer> g_resident;

// The device pointer of a job's resident buffer: the kept one when it is large enough, else a new one.
void *resident_buffer(int device, uint64_t id, size_t bytes) {
    std::lock_guard<std::mutex> lock(g_resident_mutex);
    DeviceBuffer &b = g_resident[{device, id}];
    if (b.ptr && b.bytes >= bytes) return b.ptr;
    if (b.ptr) {
        (void)cudaFree(b.ptr);
        b.ptr = nullptr;
        b.bytes = 0;
    }
    ASTRO_CUDA_CHECK(cudaMalloc(&b.ptr, bytes > 0 ? bytes : 8));
    b.bytes = bytes;
    return b.ptr;
}

// First touch of (device, kernel) loads its module (lazy loading is the CUDA 12.2+ default); remember which
// ones were loaded so build_s is reported once.
std::mutex g_loaded_mutex;
std::set<std::pair<int, const void *>> g_loaded;

// The kernel's parameter sizes (cudaFuncGetParamInfo), or false when the runtime/driver cannot answer.
bool param_sizes(const void *func, std::vector<size_t> *sizes) {
    auto param_size = [&](size_t i, size_t *size) -> cudaError_t {
        size_t off = 0;
        cudaError_t e = cudaFuncGetParamInfo(func, i, &off, size);
        if (e != cudaSuccess) (void)cudaGetLastError();
        return e;
    };
    size_t size = 0;
    cudaError_t e0 = param_size(0, &size);
    if (e0 != cudaSuccess && e0 != cudaErrorInvalidValue) return false;  // not supported here
    sizes->clear();
    if (e0 == cudaSuccess) {
        sizes->push_back(size);
        while (sizes->size() < 4096 && param_size(sizes->size(), &size) == cudaSuccess) sizes->push_back(size);
    }
    return true;
}

// Checks a launch's arguments against the kernel's parameter sizes, so a mismatch is an error message
// rather than garbage pointers on the device.
void check_params(const std::vector<size_t> &sizes, const Job &job, const Step &step) {
    if (sizes.size() != step.arg_count)
        throw std::runtime_error("CUDA kernel " + step.kernel + " takes " + std::to_string(sizes.size()) +
                                 " parameters, the job passes " + std::to_string(step.arg_count));
    for (size_t i = 0; i < step.arg_count; ++i) {
        const Arg &a = job.args[step.first_arg + i];
        const size_t want = a.is_buffer ? sizeof(void *) : astroport_native::dtype_bytes(a.dtype);
        if (sizes[i] != want)
            throw std::runtime_error("CUDA kernel " + step.kernel + " parameter " + std::to_string(i) + " is " +
                                     std::to_string(sizes[i]) + " bytes, the job passes " + std::to_string(want) +
                                     (a.is_buffer ? " (buffer)" : " (scalar, dtype " + std::to_string(a.dtype) + ")"));
    }
}

// What a launch of one kernel at one requested block size needs, found once per process: block size,
// resources, parameter sizes (an iterative workload launches the same kernels every job).
struct LaunchInfo {
    int block = 0;
    StepOutcome resources;
    bool params_known = false;
    std::vector<size_t> param_sizes;
};

std::mutex g_launch_mutex;
std::map<std::tuple<int, const void *, uint64_t>, LaunchInfo> g_launch;

// Returns the launch facts for (device, func, step.local), adding the module-load time of a first touch to
// *build_s.
LaunchInfo launch_info(int device, const void *func, const Step &step, int max_threads_sm, double *build_s) {
    std::lock_guard<std::mutex> lock(g_launch_mutex);
    auto key = std::make_tuple(device, func, step.local);
    auto it = g_launch.find(key);
    if (it != g_launch.end()) return it->second;
    cudaFuncAttributes attr{};
    {
        std::lock_guard<std::mutex> loaded(g_loaded_mutex);
        const bool first = g_loaded.find({device, func}) == g_loaded.end();
        const auto t0 = std::chrono::steady_clock::now();
        ASTRO_CUDA_CHECK(cudaFuncGetAttributes(&attr, func));
        const auto t1 = std::chrono::steady_clock::now();
        if (first) {
            *build_s += std::chrono::duration<double>(t1 - t0).count();
            g_loaded.insert({device, func});
        }
    }
    LaunchInfo info;
    info.params_known = param_sizes(func, &info.param_sizes);
    std::string block_source;
    if (step.local != 0) {
        if (step.local > static_cast<uint64_t>(attr.maxThreadsPerBlock))
            throw std::runtime_error("local size " + std::to_string(step.local) + " exceeds kernel " + step.kernel +
                                     "'s limit of " + std::to_string(attr.maxThreadsPerBlock) + " threads per block");
        info.block = static_cast<int>(step.local);
        block_source = "block from job";
    } else {
        int min_grid = 0;
        cudaError_t e = cudaOccupancyMaxPotentialBlockSize(&min_grid, &info.block, func, 0, 0);
        if (e != cudaSuccess || info.block <= 0) {
            (void)cudaGetLastError();
            info.block = attr.maxThreadsPerBlock < 256 ? attr.maxThreadsPerBlock : 256;
            block_source = "block 256 default";
        } else {
            block_source = "block from cudaOccupancyMaxPotentialBlockSize";
        }
    }
    const int block = info.block;
    int active_blocks = 0;
    ASTRO_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&active_blocks, func, block, 0));
    StepOutcome &so = info.resources;
    so.local_used = static_cast<uint64_t>(block);
    so.regs_per_thread = attr.numRegs;
    so.occupancy = max_threads_sm > 0 ? static_cast<double>(active_blocks) * block / max_threads_sm : -1.0;
    so.resources_source = "cudaFuncGetAttributes + cudaOccupancyMaxActiveBlocksPerMultiprocessor; local mem " +
                          std::to_string(attr.localSizeBytes) + " B; static smem " +
                          std::to_string(attr.sharedSizeBytes) + " B; const " + std::to_string(attr.constSizeBytes) +
                          " B; " + std::to_string(active_blocks) + " blocks/SM of " + std::to_string(block) +
                          " (max " + std::to_string(max_threads_sm) + " threads/SM, kernel max " +
                          std::to_string(attr.maxThreadsPerBlock) + " threads/block); " + block_source +
                          "; binary sm_" + std::to_string(attr.binaryVersion) + ", ptx " +
                          std::to_string(attr.ptxVersion) +
                          (info.params_known ? "; params checked" : "; params unchecked");
    g_launch.emplace(key, info);
    return info;
}

// A stream that does not synchronise with the legacy default stream.
cudaStream_t new_stream() {
    cudaStream_t s = nullptr;
    ASTRO_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return s;
}

// One stream per device for every job (creating one per job cost more than small jobs' kernels), and one job
// at a time per process so that jobs sharing it never interleave.
std::mutex g_job_mutex;
cudaStream_t device_stream(int device) {
    static std::map<int, cudaStream_t> streams;
    auto it = streams.find(device);
    if (it != streams.end()) return it->second;
    const cudaStream_t s = new_stream();
    // Jobs' own buffers come from the device's stream-ordered pool (cudaMalloc/cudaFree per job synchronise
    // the device); the pool keeps up to 64 MiB between jobs, so free memory as the driver reports it stays
    // close to the truth.
    cudaMemPool_t pool = nullptr;
    if (cudaDeviceGetDefaultMemPool(&pool, device) == cudaSuccess) {
        uint64_t keep = 64ull << 20;
        (void)cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    }
    (void)cudaGetLastError();
    streams.emplace(device, s);
    return s;
}

// Makes `device` current, with its primary context created (cudaFree(nullptr)): a no-op once it exists.
void select_device(int device) {
    const int n_dev = device_count();
    if (device < 0 || device >= n_dev)
        throw std::runtime_error("CUDA device " + std::to_string(device) + " out of range (" +
                                 std::to_string(n_dev) + " devices)");
    ASTRO_CUDA_CHECK(cudaSetDevice(device));
    ASTRO_CUDA_CHECK(cudaFree(nullptr));
}

// With ASTROPORT_TRACE_JOBS set, each job prints the wall clock of its phases to stderr (finding where a
// job's fixed cost goes without a profiler on the lent machine).
struct PhaseTrace {
    bool on = std::getenv("ASTROPORT_TRACE_JOBS") != nullptr;
    std::chrono::steady_clock::time_point last = std::chrono::steady_clock::now();
    std::string text;
    void mark(const char *phase) {
        if (!on) return;
        const auto now = std::chrono::steady_clock::now();
        char buf[64];
        std::snprintf(buf, sizeof buf, " %s %.2f", phase, std::chrono::duration<double>(now - last).count() * 1e3);
        text += buf;
        last = now;
    }
};

// A copy this large goes through the staging lanes (below) or, before they exist, from pinned memory;
// smaller ones go the runtime's own way.
constexpr size_t kLargeCopy = size_t{32} << 20;

// The old way for large inputs, while no staging lanes are ready: pinned for their upload (registering 400
// MB of resident pages takes 10-23 ms and the copy then runs at 44 GB/s, against 62 ms through the
// runtime's pageable staging; H200 machine, docs/perf-notes.md). A range that cannot be registered is
// copied pageable. Unpinned when the job ends.
struct PinnedUploads {
    std::vector<void *> ranges;
    void pin(const void *host, size_t bytes) {
        if (bytes < kLargeCopy) return;
        void *p = const_cast<void *>(host);
        if (cudaHostRegister(p, bytes, cudaHostRegisterDefault) == cudaSuccess)
            ranges.push_back(p);
        else
            (void)cudaGetLastError();  // copied pageable; the error is cleared so no later check reports it
    }
    ~PinnedUploads() {
        for (void *p : ranges) (void)cudaHostUnregister(p);
    }
};

// ---- Staged copies ----
// Large copies between pageable host memory and the device go through page-locked staging buffers on
// several threads at once ("lanes"), each lane with its own stream and two buffers (one filled or emptied
// by the host while the other's DMA runs). The runtime's own pageable path copies on one thread (6.5 GB/s
// up, 16 GB/s down on the H200 machine) and serialises copies from several threads; locking the host
// memory instead (PinnedUploads) costs about 10 ms per 400 MB, and 6 to unlock (docs/perf-notes.md). The
// lanes are made once per device by prepare(): their memory mapped beside the context's creation and
// locked after it (cudaHostAlloc there held up the first job's uploads by 80-100 ms). A job before that,
// or any job with ASTROPORT_CUDA_STAGING=0, copies the old way; ASTROPORT_CUDA_STAGING=LxM sets L lanes of
// M MiB buffers. 8 lanes of 2 MiB (32 MiB, cache-resident): at 10k 1.6 GB up in 35-37 ms and 0.8 GB down in
// 20 ms, as fast as 16 lanes, and faster than 8 MiB buffers (41-71 and 29-42 ms).
struct StagingShape {
    int lanes = 8;
    size_t chunk = size_t{2} << 20;
    bool on = true;
    // Two buffers per lane.
    size_t bytes() const { return 2 * chunk * static_cast<size_t>(lanes); }
};

const StagingShape &staging_shape() {
    static const StagingShape shape = [] {
        StagingShape s;
        const char *v = std::getenv("ASTROPORT_CUDA_STAGING");
        if (!v) return s;
        int lanes = 0, mib = 0;
        if (std::string(v) == "0")
            s.on = false;
        else if (std::sscanf(v, "%dx%d", &lanes, &mib) == 2 && lanes > 0 && lanes <= 64 && mib > 0 && mib <= 64) {
            s.lanes = lanes;
            s.chunk = static_cast<size_t>(mib) << 20;
        }
        return s;
    }();
    return shape;
}

struct StagingLane {
    void *buffer[2] = {nullptr, nullptr};
    cudaStream_t stream = nullptr;
    cudaEvent_t done[2] = {nullptr, nullptr};
};

struct Staging {
    size_t chunk = 0;
    std::vector<StagingLane> lanes;
};

std::mutex g_staging_mutex;
std::map<int, Staging *> g_staging;  // complete ones only; kept for the process

// The lanes' host memory: mapped and its pages touched (in 2 MiB pages where the kernel allows), not yet
// locked. Null when staging is off or the memory cannot be had.
void *staging_memory() {
    const StagingShape &shape = staging_shape();
    if (!shape.on) return nullptr;
    const size_t bytes = shape.bytes();
    void *p = std::aligned_alloc(size_t{2} << 20, bytes);
    if (!p) return nullptr;
#ifdef MADV_HUGEPAGE
    (void)madvise(p, bytes, MADV_HUGEPAGE);
#endif
    std::memset(p, 0, bytes);
    return p;
}

// Makes `device`'s staging lanes in `memory` (from staging_memory; the device current on this thread): the
// memory locked, a stream and two events per lane. On any failure none are kept. Returns seconds taken.
double make_staging(int device, void *memory) {
    if (!memory) return 0.0;
    const auto start = std::chrono::steady_clock::now();
    const StagingShape &shape = staging_shape();
    if (cudaHostRegister(memory, shape.bytes(), cudaHostRegisterDefault) != cudaSuccess) {
        (void)cudaGetLastError();
        std::free(memory);
        return 0.0;
    }
    auto *st = new Staging();
    st->chunk = shape.chunk;
    st->lanes.resize(static_cast<size_t>(shape.lanes));
    bool ok = true;
    for (size_t l = 0; l < st->lanes.size() && ok; ++l) {
        StagingLane &lane = st->lanes[l];
        for (int k = 0; k < 2 && ok; ++k) {
            lane.buffer[k] = static_cast<char *>(memory) + (2 * l + k) * shape.chunk;
            ok = cudaEventCreateWithFlags(&lane.done[k], cudaEventDisableTiming) == cudaSuccess;
        }
        ok = ok && cudaStreamCreateWithFlags(&lane.stream, cudaStreamNonBlocking) == cudaSuccess;
    }
    if (!ok) {
        (void)cudaGetLastError();
        for (StagingLane &lane : st->lanes) {
            for (int k = 0; k < 2; ++k)
                if (lane.done[k]) (void)cudaEventDestroy(lane.done[k]);
            if (lane.stream) (void)cudaStreamDestroy(lane.stream);
        }
        delete st;
        (void)cudaHostUnregister(memory);
        (void)cudaGetLastError();
        std::free(memory);
        return 0.0;
    }
    {
        std::lock_guard<std::mutex> lock(g_staging_mutex);
        g_staging.emplace(device, st);
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The device's staging lanes if they are ready (never waits for them).
Staging *staging_if_ready(int device) {
    std::lock_guard<std::mutex> lock(g_staging_mutex);
    auto it = g_staging.find(device);
    return it == g_staging.end() ? nullptr : it->second;
}

// One copy of a job's through the lanes; all copies of one run_staged call go the same way.
struct StagedCopy {
    void *dst;
    const void *src;
    size_t bytes;
};

// Runs work(0 .. n-1) on n threads and joins them all, also when starting one fails (then rethrown).
template <typename Work>
void run_on_threads(size_t n, Work work) {
    std::vector<std::thread> threads;
    try {
        for (size_t t = 0; t < n; ++t) threads.emplace_back(work, t);
    } catch (...) {
        for (std::thread &t : threads) t.join();
        throw;
    }
    for (std::thread &t : threads) t.join();
}

// One lane's chunks, in order: an upload fills a buffer once its last DMA is done and enqueues the next;
// a download enqueues the DMAs into both buffers ahead and empties each as it lands.
void lane_copies(StagingLane &lane, const std::vector<StagedCopy> &chunks, bool to_device) {
    const size_t n = chunks.size();
    if (to_device) {
        for (size_t k = 0; k < n; ++k) {
            const int slot = static_cast<int>(k % 2);
            if (k >= 2) ASTRO_CUDA_CHECK(cudaEventSynchronize(lane.done[slot]));
            std::memcpy(lane.buffer[slot], chunks[k].src, chunks[k].bytes);
            ASTRO_CUDA_CHECK(cudaMemcpyAsync(chunks[k].dst, lane.buffer[slot], chunks[k].bytes,
                                             cudaMemcpyHostToDevice, lane.stream));
            ASTRO_CUDA_CHECK(cudaEventRecord(lane.done[slot], lane.stream));
        }
        ASTRO_CUDA_CHECK(cudaStreamSynchronize(lane.stream));
        return;
    }
    auto enqueue = [&](size_t k) {
        const int slot = static_cast<int>(k % 2);
        ASTRO_CUDA_CHECK(cudaMemcpyAsync(lane.buffer[slot], chunks[k].src, chunks[k].bytes,
                                         cudaMemcpyDeviceToHost, lane.stream));
        ASTRO_CUDA_CHECK(cudaEventRecord(lane.done[slot], lane.stream));
    };
    for (size_t k = 0; k < n && k < 2; ++k) enqueue(k);
    for (size_t k = 0; k < n; ++k) {
        const int slot = static_cast<int>(k % 2);
        ASTRO_CUDA_CHECK(cudaEventSynchronize(lane.done[slot]));
        std::memcpy(chunks[k].dst, lane.buffer[slot], chunks[k].bytes);
        if (k + 2 < n) enqueue(k + 2);
    }
}

// Runs `copies` (all host to device, or all device to host) through the lanes: chunk c of them all, in
// order, on lane c % lanes, each lane on a thread of its own. Returns when every byte has landed. The
// device memory must be usable from other streams (its allocating stream synchronised).
void run_staged(int device, Staging &st, const std::vector<StagedCopy> &copies, bool to_device) {
    const size_t lanes = st.lanes.size();
    std::vector<std::vector<StagedCopy>> per_lane(lanes);
    size_t c = 0;
    for (const StagedCopy &cp : copies)
        for (size_t off = 0; off < cp.bytes; off += st.chunk, ++c)
            per_lane[c % lanes].push_back(StagedCopy{static_cast<char *>(cp.dst) + off,
                                                     static_cast<const char *>(cp.src) + off,
                                                     std::min(st.chunk, cp.bytes - off)});
    std::vector<std::string> errors(lanes);
    run_on_threads(std::min(lanes, c), [&](size_t l) {
        try {
            ASTRO_CUDA_CHECK(cudaSetDevice(device));
            lane_copies(st.lanes[l], per_lane[l], to_device);
        } catch (const std::exception &e) {
            errors[l] = e.what();
        }
    });
    for (const std::string &e : errors) {
        if (e.empty()) continue;
        // A failed lane may have DMAs still queued on its stream (into device memory the job frees, or
        // through buffers the next job fills): every lane is drained before the error goes up.
        for (StagingLane &lane : st.lanes) (void)cudaStreamSynchronize(lane.stream);
        (void)cudaGetLastError();
        throw std::runtime_error("staged copy: " + e);
    }
}

// Whether every page of [p, p + bytes) is mapped already (mincore; false when it cannot say).
bool pages_mapped(const void *p, size_t bytes) {
    const uintptr_t first = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{4095};
    const size_t span = reinterpret_cast<uintptr_t>(p) + bytes - first;
    std::vector<unsigned char> mapped((span + 4095) / 4096);
    if (mincore(reinterpret_cast<void *>(first), span, mapped.data()) != 0) return false;
    return std::all_of(mapped.begin(), mapped.end(), [](unsigned char m) { return (m & 1) != 0; });
}

// Writes one byte of every 4 KiB page of each copy's destination (its source is not read), on `threads`
// threads: the pages are mapped (first touch) by many threads, where a lane would otherwise fault them in one
// by one as it copies. The bytes are overwritten by the download. Destinations whose pages are all mapped
// already (subtract maps its planes beside the fit) are left alone: touching them again took 1-8 ms a job.
void touch_pages(const std::vector<StagedCopy> &all, size_t threads) {
    constexpr size_t kPage = 4096;
    std::vector<StagedCopy> copies;
    for (const StagedCopy &c : all)
        if (!pages_mapped(c.dst, c.bytes)) copies.push_back(c);
    size_t total = 0;
    for (const StagedCopy &c : copies) total += c.bytes;
    if (total == 0) return;
    const size_t share = (total / threads + kPage - 1) / kPage * kPage;
    run_on_threads(threads, [&](size_t t) {
        // This thread's bytes [t·share, (t + 1)·share) of the copies laid end to end.
        const size_t begin = t * share, end = std::min(total, begin + share);
        size_t at = 0;
        for (const StagedCopy &c : copies) {
            const size_t from = std::max(begin, at), to = std::min(end, at + c.bytes);
            for (size_t k = from; k < to; k += kPage) static_cast<volatile char *>(c.dst)[k - at] = 0;
            at += c.bytes;
        }
    });
}

// ---- Read-backs that land with the next job (Buffer::read_back_later) ----
// A job's later read-backs are copied on a thread of their own once its kernels are done, beside the next
// job's kernels: a pipeline over bands then downloads band k while band k + 1 is computed (at 10k each band's
// three planes are 4-7 ms of copying). Every job that reaches the device waits for the one before's before
// it uses the staging lanes or one of the resident buffers being copied, and before it returns (failing
// too); so do settle() and release(). One per device, guarded by g_job_mutex; kept for the process (never
// destroyed: a joinable thread met by a static destructor at exit would abort it).
struct PendingReadBack {
    std::thread worker;
    std::vector<uint64_t> resident_ids;  // the device buffers it copies out of
    bool failed = false;
    std::string error;
};
std::map<int, PendingReadBack> &g_pending = *new std::map<int, PendingReadBack>();

// Waits for `device`'s pending read-back, if any (g_job_mutex held); throws its error.
void finish_pending(int device) {
    auto it = g_pending.find(device);
    if (it == g_pending.end()) return;
    if (it->second.worker.joinable()) it->second.worker.join();
    const bool failed = it->second.failed;
    const std::string error = std::move(it->second.error);
    g_pending.erase(it);
    if (failed) throw std::runtime_error("the job before's read-back: " + error);
}

// Whether `device`'s pending read-back copies out of resident buffer `id` (g_job_mutex held).
bool pending_reads(int device, uint64_t id) {
    auto it = g_pending.find(device);
    if (it == g_pending.end()) return false;
    const std::vector<uint64_t> &ids = it->second.resident_ids;
    return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// finish_pending on a path that is failing already, or that has nobody to report to.
void finish_pending_quietly(int device) {
    try {
        finish_pending(device);
    } catch (...) {
    }
}

// finish_pending_quietly for a job that failed with g_job_mutex released.
void finish_pending_after_failure(int device) {
    std::lock_guard<std::mutex> lock(g_job_mutex);
    finish_pending_quietly(device);
}

// A stream of its own for the later read-backs that do not go through the lanes (g_job_mutex held).
cudaStream_t read_back_stream(int device) {
    static std::map<int, cudaStream_t> streams;
    auto it = streams.find(device);
    if (it == streams.end()) it = streams.emplace(device, new_stream()).first;
    return it->second;
}

// Starts copying `staged` (through the lanes) and `plain` (the runtime's way) home on a thread, out of the
// resident buffers `ids`; the device's kernels that wrote them are done. The one before must be finished.
void start_pending(int device, Staging *staging, std::vector<StagedCopy> staged, std::vector<StagedCopy> plain,
                   std::vector<uint64_t> ids) {
    const cudaStream_t stream = read_back_stream(device);
    PendingReadBack &p = g_pending[device];
    p.resident_ids = std::move(ids);
    p.worker = std::thread([device, staging, stream, staged = std::move(staged), plain = std::move(plain), &p] {
        try {
            ASTRO_CUDA_CHECK(cudaSetDevice(device));
            for (const StagedCopy &c : plain)
                ASTRO_CUDA_CHECK(cudaMemcpyAsync(c.dst, c.src, c.bytes, cudaMemcpyDeviceToHost, stream));
            if (!staged.empty()) run_staged(device, *staging, staged, false);
            ASTRO_CUDA_CHECK(cudaStreamSynchronize(stream));
        } catch (const std::exception &e) {
            p.failed = true;
            try {
                p.error = e.what();
            } catch (...) {  // no memory for the message: failed says enough
            }
        } catch (...) {
            p.failed = true;
        }
    });
}

// Declared after a job's PinnedUploads and buffers: on every path its stream's work ends before they go.
struct StreamDrain {
    cudaStream_t s;
    ~StreamDrain() { (void)cudaStreamSynchronize(s); }
};

// One launch step, resolved: function, geometry and its parameter pointers.
struct Resolved {
    const void *func = nullptr;
    dim3 grid, block;
    std::vector<size_t> param_slots;  // indices into the job-wide scalar/pointer slot table
};

Outcome run_job_impl(int device, const Job &job, PhaseTrace &trace) {
    astroport_native::validate(job, 0);

    select_device(device);
    int max_threads_sm = 0;
    ASTRO_CUDA_CHECK(cudaDeviceGetAttribute(&max_threads_sm, cudaDevAttrMaxThreadsPerMultiProcessor, device));
    trace.mark("select");

    Outcome out;
    out.build_options = "nvcc " + std::to_string(__CUDACC_VER_MAJOR__) + "." +
                        std::to_string(__CUDACC_VER_MINOR__) + "." + std::to_string(__CUDACC_VER_BUILD__) +
                        ": " + ASTROPORT_NVCC_FLAGS;

    // Buffers first: launch parameters point at them. `owned` frees the job's own; resident ones stay.
    std::vector<DeviceBuffer> owned(job.buffers.size());
    std::vector<void *> ptrs(job.buffers.size(), nullptr);
    const cudaStream_t stream = device_stream(device);
    PinnedUploads pinned;
    // Whatever happens below, the job's work is finished before its buffers are freed or unpinned.
    StreamDrain drain{stream};
    Staging *const staging = staging_if_ready(device);  // null: the old way
    std::vector<StagedCopy> staged_uploads;
    // Uploads a buffer's host data: through the staging lanes when large (after the loop), else enqueued.
    auto upload = [&](void *dev, const void *host, size_t bytes) {
        if (staging && bytes >= kLargeCopy) {
            staged_uploads.push_back(StagedCopy{dev, host, bytes});
            return;
        }
        pinned.pin(host, bytes);
        ASTRO_CUDA_CHECK(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, stream));
    };
    for (size_t i = 0; i < job.buffers.size(); ++i) {
        const astroport_native::Buffer &b = job.buffers[i];
        const size_t bytes = b.bytes();
        if (b.role == astroport_native::kResident) {
            // Not reallocated, written or uploaded into while the job before still copies out of it.
            if (pending_reads(device, b.resident_id)) finish_pending(device);
            ptrs[i] = resident_buffer(device, b.resident_id, bytes);
            if (b.init_count > 0) upload(ptrs[i], b.host_source(), b.init_bytes());
            continue;
        }
        DeviceBuffer &d = owned[i];
        d.bytes = bytes;
        if (d.bytes > 0) {
            ASTRO_CUDA_CHECK(cudaMallocAsync(&d.ptr, d.bytes, stream));
            d.stream = stream;
        }
        ptrs[i] = d.ptr;
        if (b.role == astroport_native::kInput && d.bytes > 0) upload(d.ptr, b.host_source(), d.bytes);
    }
    if (!staged_uploads.empty()) {
        // The lanes are free once the job before's read-back is home.
        finish_pending(device);
        // The pool's allocations are stream-ordered: the lanes' streams may use them once they are made.
        ASTRO_CUDA_CHECK(cudaStreamSynchronize(stream));
        trace.mark("buffers+small_uploads_enqueued");
        run_staged(device, *staging, staged_uploads, true);
        trace.mark("staged_uploads");
    }

    trace.mark("buffers+uploads_enqueued");
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
            slots[a].ptr = ptrs[arg.buffer];
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
        const LaunchInfo info = launch_info(device, r.func, step, max_threads_sm, &out.build_s);
        if (info.params_known) check_params(info.param_sizes, job, step);
        const uint64_t block = static_cast<uint64_t>(info.block);
        const uint64_t grid64 = (step.global + block - 1) / block;
        if (grid64 > 0x7fffffffull)
            throw std::runtime_error("grid of " + std::to_string(grid64) + " blocks exceeds the 2^31-1 limit");
        r.grid = dim3(static_cast<unsigned>(grid64));
        r.block = dim3(static_cast<unsigned>(block));
        out.steps[s] = info.resources;
        for (uint64_t a = step.first_arg; a < step.first_arg + step.arg_count; ++a)
            params[s].push_back(job.args[a].is_buffer ? static_cast<void *>(&slots[a].ptr)
                                                      : static_cast<void *>(&slots[a]));
    }

    auto poison = [&]() {
        for (size_t i = 0; i < job.buffers.size(); ++i) {
            const uint8_t role = job.buffers[i].role;
            if ((role == astroport_native::kOutput || role == astroport_native::kScratch) && owned[i].bytes > 0)
                ASTRO_CUDA_CHECK(cudaMemsetAsync(owned[i].ptr, 0xFF, owned[i].bytes, stream));
        }
    };
    // Runs the step sequence; with events (n_steps + 1 of them), records one before each step and after the last.
    auto sequence = [&](std::vector<Event> *events) {
        for (size_t s = 0; s < job.steps.size(); ++s) {
            if (events) ASTRO_CUDA_CHECK(cudaEventRecord((*events)[s].e, stream));
            const Step &step = job.steps[s];
            if (step.is_fill()) {
                const size_t bytes = job.buffers[step.fill_buffer].bytes();
                if (bytes > 0)
                    ASTRO_CUDA_CHECK(cudaMemsetAsync(ptrs[step.fill_buffer], step.fill_byte, bytes, stream));
            } else {
                ASTRO_CUDA_CHECK(cudaLaunchKernel(resolved[s].func, resolved[s].grid, resolved[s].block,
                                                  params[s].data(), 0, stream));
                ASTRO_CUDA_CHECK(cudaGetLastError());
            }
        }
        if (events) ASTRO_CUDA_CHECK(cudaEventRecord(events->back().e, stream));
    };

    trace.mark("launch_info");
    // Events are recorded in stream order, so uploads and poisoning need no synchronisation before timing.
    poison();
    for (uint32_t w = 0; w < job.warmup; ++w) sequence(nullptr);
    if (job.warmup > 0) ASTRO_CUDA_CHECK(cudaStreamSynchronize(stream));

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
    // The large downloads, for the lanes; while the runs go on, the host pages they will land in are
    // mapped (a room's are fresh: faulted in by the lanes' copies, 800 MB took 40-50 ms there instead of 20).
    auto staged_home = [&](const astroport_native::Buffer &b) {
        return staging && b.copied_back() && b.bytes() >= kLargeCopy;
    };
    // Later read-backs (read_back_later) are set aside, to be copied after the job returns.
    std::vector<StagedCopy> staged_downloads, later_staged, later_plain;
    std::vector<uint64_t> later_ids;
    for (size_t i = 0; i < job.buffers.size(); ++i) {
        const astroport_native::Buffer &b = job.buffers[i];
        if (!b.copied_back() || b.bytes() == 0) continue;
        const StagedCopy copy{b.host_destination(), ptrs[i], b.bytes()};
        if (b.read_back_later) {
            (staged_home(b) ? later_staged : later_plain).push_back(copy);
            later_ids.push_back(b.resident_id);
        } else if (staged_home(b))
            staged_downloads.push_back(copy);
    }
    if (!staged_downloads.empty() || !later_staged.empty()) {
        std::vector<StagedCopy> all(staged_downloads);
        all.insert(all.end(), later_staged.begin(), later_staged.end());
        touch_pages(all, staging->lanes.size());
        trace.mark("runs+pages_touched");
    }
    // The job before's read-back lands beside this job's runs.
    finish_pending(device);
    trace.mark("runs+read_back_before");
    ASTRO_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (single_shot) record();
    trace.mark("uploads+runs");
    // The rest the runtime's way; the runs are done (synchronised above), so the lanes may read theirs.
    for (size_t i = 0; i < job.buffers.size(); ++i) {
        const astroport_native::Buffer &b = job.buffers[i];
        if (!b.copied_back() || b.bytes() == 0 || staged_home(b) || b.read_back_later) continue;
        ASTRO_CUDA_CHECK(cudaMemcpyAsync(b.host_destination(), ptrs[i], b.bytes(), cudaMemcpyDeviceToHost, stream));
    }
    if (!staged_downloads.empty()) {
        run_staged(device, *staging, staged_downloads, false);
        trace.mark("staged_downloads");
    }
    ASTRO_CUDA_CHECK(cudaStreamSynchronize(stream));
    trace.mark("downloads");
    if (!later_staged.empty() || !later_plain.empty())
        start_pending(device, staging, std::move(later_staged), std::move(later_plain), std::move(later_ids));
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

double prepare(int device) {
    static std::set<int> prepared;
    std::lock_guard<std::mutex> lock(g_job_mutex);
    if (prepared.count(device)) return 0.0;
    const auto start = std::chrono::steady_clock::now();
    // The staging lanes' pages are touched on a thread of their own while the context is made (mostly a
    // wait on the driver), then locked.
    void *memory = nullptr;
    std::thread touch([&memory] { memory = staging_memory(); });
    try {
        select_device(device);
        (void)device_stream(device);
    } catch (...) {
        touch.join();
        std::free(memory);
        throw;
    }
    touch.join();
    const double made = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double staging_s = make_staging(device, memory);
    if (std::getenv("ASTROPORT_TRACE_JOBS"))
        std::fprintf(stderr, "cuda prepare: context %.1f ms, staging lanes locked in %.1f ms\n", made * 1e3,
                     staging_s * 1e3);
    prepared.insert(device);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

bool staged_copies(int device) { return staging_if_ready(device) != nullptr; }

uint64_t free_memory(int device) {
    ASTRO_CUDA_CHECK(cudaSetDevice(device));
    size_t free_bytes = 0, total_bytes = 0;
    ASTRO_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    return static_cast<uint64_t>(free_bytes);
}

void settle(int device) {
    std::lock_guard<std::mutex> lock(g_job_mutex);
    finish_pending(device);
}

void release(int device, const std::vector<uint64_t> &ids) {
    {
        // No read-back may still be copying out of what is freed (its error, if any, has no one to go to:
        // whoever released without settling has given up on the data).
        std::lock_guard<std::mutex> job_lock(g_job_mutex);
        finish_pending_quietly(device);
    }
    std::lock_guard<std::mutex> lock(g_resident_mutex);
    for (uint64_t id : ids) g_resident.erase({device, id});  // DeviceBuffer's destructor frees
}

std::string runtime_version() {
    return "runtime " + version_text(runtime_version_int()) + ", driver " + version_text(driver_version());
}

Outcome run_job(int device, const Job &job) {
    try {
        PhaseTrace trace;
        std::lock_guard<std::mutex> lock(g_job_mutex);
        trace.mark("lock");
        Outcome out = run_job_impl(device, job, trace);
        trace.mark("unpin+free");
        if (trace.on) {
            size_t bytes = 0;
            for (const auto &b : job.buffers) bytes += b.bytes();
            std::fprintf(stderr, "cuda job %s (%zu steps, %.1f MB of buffers), ms:%s\n", job.program.c_str(),
                         job.steps.size(), bytes / 1e6, trace.text.c_str());
        }
        return out;
    } catch (const std::runtime_error &e) {
        // A failed job leaves no read-back of the job before behind it.
        finish_pending_after_failure(device);
        std::string kernels;
        for (const Step &s : job.steps)
            if (!s.is_fill()) kernels += (kernels.empty() ? "" : ",") + s.kernel;
        throw std::runtime_error("CUDA job " + job.program + " [" + kernels + "] on device " + std::to_string(device) +
                                 ": " + e.what());
    } catch (...) {
        finish_pending_after_failure(device);
        throw;
    }
}

}  // namespace astroport_cuda
