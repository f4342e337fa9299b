// SYCL host plumbing (see sycl_host.h). Plain C++17 host code compiled by g++ against DPC++'s runtime
// headers; kernels are SYCL free-function kernels compiled at run time (sycl_ext_oneapi_kernel_compiler,
// source_language::sycl, served by libsycl-jit.so).
//
// Device enumeration, as measured with the DPC++ 2026.1.2 wheel (libsycl.so.9), Intel's OpenCL CPU runtime
// (libintelocl.so) and Debian's PoCL 3.1:
//  * SYCL reaches OpenCL only through the ICD loader that the process has loaded under the soname
//    libOpenCL.so.1: the wheel's Khronos loader, or Debian's ocl-icd when something (Rust's opencl3) loaded it
//    first. Both honour OCL_ICD_VENDORS, and it is read once per process, when the loader first initialises.
//    With nothing set, the loader reads /etc/OpenCL/vendors, which lists only PoCL, so SYCL sees no Intel
//    device at all. With OCL_ICD_VENDORS=<repo>/.tools/icd it sees PoCL and Intel's CPU device.
//  * Enumerating the PoCL device does not fail; building for it does: PoCL 3.1 takes no SPIR-V (IL version
//    n/a) and build() throws UR_RESULT_ERROR_INVALID_BINARY. It also has no USM.
//  * So devices() keeps the devices that support USM device allocations, which this plumbing needs anyway;
//    that drops PoCL whatever the platform order, with no environment variable. Nothing here calls setenv:
//      - ONEAPI_DEVICE_SELECTOR=opencl:<n> also works but <n> depends on the ICD loader's platform order;
//      - SYCL_DEVICE_ALLOWLIST=PlatformName:{{Intel.*}} works but prints deprecation warnings; the
//        non-deprecated DeviceVendorId key cannot tell them apart (both report 0x8086);
//      - setting OCL_ICD_VENDORS/OCL_ICD_FILENAMES here would also change what the OpenCL backend sees in the
//        same process, and only if SYCL happened to initialise the loader first (Debian's ocl-icd ignores
//        OCL_ICD_FILENAMES altogether).
//    A user-set ONEAPI_DEVICE_SELECTOR / SYCL_DEVICE_ALLOWLIST is honoured by the runtime as usual.
#include "astroport/cpp/sycl_host.h"

#include <sycl/sycl.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace syclex = sycl::ext::oneapi::experimental;
using astroport_native::Arg;
using astroport_native::Device;
using astroport_native::Job;
using astroport_native::Outcome;
using astroport_native::Step;
using astroport_native::StepOutcome;

namespace astroport_sycl {
namespace {

// One usable device with its context and a profiling, in-order queue whose asynchronous errors are collected
// (SYCL's default async handler would terminate the process).
struct DeviceState {
    sycl::device dev;
    sycl::context ctx;
    std::vector<std::string> async_errors;
    std::unique_ptr<sycl::queue> queue;

    explicit DeviceState(const sycl::device &d) : dev(d), ctx(d) {
        auto handler = [this](sycl::exception_list list) {
            for (auto &e : list) {
                try {
                    std::rethrow_exception(e);
                } catch (const std::exception &ex) {
                    async_errors.emplace_back(ex.what());
                } catch (...) {
                    async_errors.emplace_back("unknown asynchronous SYCL error");
                }
            }
        };
        queue = std::make_unique<sycl::queue>(
            ctx, dev, handler,
            sycl::property_list{sycl::property::queue::enable_profiling{}, sycl::property::queue::in_order{}});
    }

    // Waits for the queue and turns collected asynchronous errors into an exception.
    void sync(const char *what) {
        queue->wait_and_throw();
        if (!async_errors.empty()) {
            std::string msg = std::string("SYCL asynchronous error during ") + what + ": " + async_errors.front();
            async_errors.clear();
            throw std::runtime_error(msg);
        }
    }
};

struct Built {
    sycl::kernel_bundle<sycl::bundle_state::executable> bundle;
};

struct UsmBuffer {
    void *ptr = nullptr;
    size_t bytes = 0;
    const sycl::context *ctx = nullptr;
    UsmBuffer() = default;
    UsmBuffer(const UsmBuffer &) = delete;
    UsmBuffer &operator=(const UsmBuffer &) = delete;
    UsmBuffer(UsmBuffer &&o) noexcept : ptr(o.ptr), bytes(o.bytes), ctx(o.ctx) { o.ptr = nullptr; }
    UsmBuffer &operator=(UsmBuffer &&o) noexcept {
        if (this != &o) {
            free_now();
            ptr = o.ptr;
            bytes = o.bytes;
            ctx = o.ctx;
            o.ptr = nullptr;
        }
        return *this;
    }
    ~UsmBuffer() { free_now(); }
    void free_now() {
        if (ptr) {
            try {
                sycl::free(ptr, *ctx);
            } catch (...) {
            }
            ptr = nullptr;
        }
    }
};

struct State {
    std::mutex mutex;  // serialises everything: enumeration, builds and launches (timings stay undisturbed)
    bool enumerated = false;
    std::vector<std::unique_ptr<DeviceState>> devices;
    std::vector<std::string> skipped;  // devices the runtime sees but this plumbing cannot use, with why
    std::map<std::string, Built> cache;
    std::map<std::pair<int, uint64_t>, UsmBuffer> resident;  // BufferSpec::Resident buffers, until release()
};

State &state() {
    static State *s = new State();  // never destroyed: SYCL objects must not outlive the runtime at exit
    return *s;
}

std::string describe(const sycl::device &d) {
    std::string s = d.get_info<sycl::info::device::name>();
    try {
        s += " [" + d.get_platform().get_info<sycl::info::platform::name>() + ", driver " +
             d.get_info<sycl::info::device::driver_version>() + "]";
    } catch (...) {
    }
    return s;
}

// Enumerates once per process; caller holds the mutex. Retries on the next call if it threw.
void enumerate_locked(State &st) {
    if (st.enumerated) return;
    std::vector<sycl::device> all;
    try {
        all = sycl::device::get_devices();
    } catch (const std::exception &e) {
        throw std::runtime_error(std::string("SYCL runtime could not enumerate devices: ") + e.what());
    }
    std::vector<std::unique_ptr<DeviceState>> usable;
    std::vector<std::string> skipped;
    for (const auto &d : all) {
        if (!d.has(sycl::aspect::usm_device_allocations)) {
            skipped.push_back(describe(d) + ": no USM device allocations (e.g. PoCL: no SPIR-V, no USM)");
            continue;
        }
        try {
            usable.push_back(std::make_unique<DeviceState>(d));
        } catch (const std::exception &e) {
            skipped.push_back(describe(d) + ": context/queue creation failed: " + e.what());
        }
    }
    if (usable.empty()) {
        std::ostringstream m;
        // "no device" in the text: src/backend/sycl.rs classifies the absence by it.
        m << "SYCL runtime started but found no device this host can use (" << all.size() << " seen";
        for (const auto &s : skipped) m << "; skipped " << s;
        m << "). SYCL reaches Intel's OpenCL CPU runtime through the OpenCL ICD loader: set OCL_ICD_VENDORS to a "
             "folder holding an .icd file that names libintelocl.so (this repo: .tools/icd) before the process "
             "starts; ONEAPI_DEVICE_SELECTOR/SYCL_DEVICE_ALLOWLIST, if set, must not exclude it.";
        throw std::runtime_error(m.str());
    }
    st.devices = std::move(usable);
    st.skipped = std::move(skipped);
    st.enumerated = true;
}

DeviceState &device_locked(State &st, int index) {
    enumerate_locked(st);
    if (index < 0 || static_cast<size_t>(index) >= st.devices.size())
        throw std::runtime_error("SYCL device index " + std::to_string(index) + " out of range (" +
                                 std::to_string(st.devices.size()) + " usable devices)");
    return *st.devices[static_cast<size_t>(index)];
}

std::string join(const std::vector<std::string> &v, const char *sep) {
    std::string out;
    for (size_t i = 0; i < v.size(); ++i) {
        if (i) out += sep;
        out += v[i];
    }
    return out;
}

// USM device allocation freed on every path.

// A kernel argument ready for handler::set_arg.
struct LaunchArg {
    uint8_t kind = 0;  // 0 pointer, else astroport_native::DType of a scalar
    void *ptr = nullptr;
    uint64_t bits = 0;
};

void set_arg(sycl::handler &h, int i, const LaunchArg &a, bool is_ptr) {
    if (is_ptr) {
        h.set_arg(i, a.ptr);
        return;
    }
    switch (a.kind) {
        case astroport_native::kI32: {
            int32_t v = static_cast<int32_t>(static_cast<uint32_t>(a.bits));
            h.set_arg(i, v);
            break;
        }
        case astroport_native::kU32: {
            uint32_t v = static_cast<uint32_t>(a.bits);
            h.set_arg(i, v);
            break;
        }
        case astroport_native::kF32: {
            uint32_t b = static_cast<uint32_t>(a.bits);
            float v;
            std::memcpy(&v, &b, sizeof v);
            h.set_arg(i, v);
            break;
        }
        case astroport_native::kF64: {
            double v;
            std::memcpy(&v, &a.bits, sizeof v);
            h.set_arg(i, v);
            break;
        }
        case astroport_native::kU64: {
            uint64_t v = a.bits;
            h.set_arg(i, v);
            break;
        }
        default:
            throw std::runtime_error("scalar argument " + std::to_string(i) + ": unknown dtype " +
                                     std::to_string(a.kind));
    }
}

template <typename Info>
std::string kernel_info(const sycl::kernel &k, const sycl::device &d, const char *name) {
    try {
        return std::string(name) + "=" + std::to_string(k.get_info<Info>(d));
    } catch (...) {
        return std::string();
    }
}

Outcome run_job_locked(State &st, int device, const Job &job) {
    DeviceState &ds = device_locked(st, device);
    sycl::queue &q = *ds.queue;
    Outcome out;
    const uint64_t max_alloc = ds.dev.get_info<sycl::info::device::max_mem_alloc_size>();
    astroport_native::validate(job, max_alloc);

    // ---- build (cached per device, program and defines) ----
    std::vector<std::string> opts;
    opts.reserve(job.defines.size());
    for (const auto &d : job.defines) opts.push_back("-D" + d);
    out.build_options = join(opts, " ");
    std::string key = std::to_string(device) + '\x1f' + job.program + '\x1f' + join(job.defines, "\x1e");
    auto it = st.cache.find(key);
    if (it == st.cache.end()) {
        std::string log;
        auto t0 = std::chrono::steady_clock::now();
        try {
            syclex::include_files inc;
            for (size_t i = 0; i < job.header_names.size(); ++i) inc.add(job.header_names[i], job.header_texts[i]);
            auto src = syclex::create_kernel_bundle_from_source(ds.ctx, syclex::source_language::sycl, job.source,
                                                                syclex::properties{inc});
            auto exe = syclex::build(src, std::vector<sycl::device>{ds.dev},
                                     syclex::properties{syclex::build_options{opts}, syclex::save_log{&log}});
            out.build_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            it = st.cache.emplace(key, Built{std::move(exe)}).first;
        } catch (const std::exception &e) {
            std::string msg = "SYCL build of program '" + job.program + "' (" + out.build_options + ") on " +
                              describe(ds.dev) + " failed: " + e.what();
            if (!log.empty() && std::string(e.what()).find(log) == std::string::npos) msg += "\nbuild log:\n" + log;
            throw std::runtime_error(msg);
        }
    }
    auto &bundle = it->second.bundle;  // ext_oneapi_get_kernel is non-const

    // ---- per launch: kernel, geometry, resources (SYCL exposes no register count) ----
    std::string plat;
    try {
        plat = ds.dev.get_platform().get_info<sycl::info::platform::name>();
    } catch (...) {
    }
    std::vector<sycl::kernel> kernels;
    std::vector<size_t> kernel_of(job.steps.size(), 0);
    std::vector<sycl::nd_range<1>> ranges;
    std::vector<size_t> range_of(job.steps.size(), 0);
    out.steps.resize(job.steps.size());
    for (size_t s = 0; s < job.steps.size(); ++s) {
        const Step &step = job.steps[s];
        if (step.is_fill()) continue;
        if (!bundle.ext_oneapi_has_kernel(step.kernel))
            throw std::runtime_error("program '" + job.program + "' has no kernel '" + step.kernel +
                                     "' (free-function kernels must be extern \"C\")");
        sycl::kernel kernel = bundle.ext_oneapi_get_kernel(step.kernel);
        size_t kernel_max = ds.dev.get_info<sycl::info::device::max_work_group_size>();
        try {
            kernel_max =
                std::min(kernel_max, kernel.get_info<sycl::info::kernel_device_specific::work_group_size>(ds.dev));
        } catch (...) {
        }
        uint64_t local = step.local ? step.local : std::min<uint64_t>(kernel_max, 256);
        if (local == 0) local = 1;
        const uint64_t global = (step.global + local - 1) / local * local;
        StepOutcome &so = out.steps[s];
        so.local_used = local;
        std::string src = "n/a: SYCL on " + plat + " (" + (ds.dev.is_gpu() ? "GPU" : ds.dev.is_cpu() ? "CPU" : "device") +
                          ") exposes no register count or occupancy";
        std::vector<std::string> info;
        for (auto &x : {kernel_info<sycl::info::kernel_device_specific::private_mem_size>(kernel, ds.dev,
                                                                                          "private_mem_size_bytes"),
                        kernel_info<sycl::info::kernel_device_specific::work_group_size>(kernel, ds.dev,
                                                                                        "max_work_group_size"),
                        kernel_info<sycl::info::kernel_device_specific::preferred_work_group_size_multiple>(
                            kernel, ds.dev, "preferred_work_group_size_multiple")})
            if (!x.empty()) info.push_back(x);
        if (!info.empty()) src += "; kernel info: " + join(info, ", ");
        so.resources_source = src;
        kernel_of[s] = kernels.size();
        kernels.push_back(std::move(kernel));
        range_of[s] = ranges.size();
        ranges.emplace_back(sycl::range<1>(static_cast<size_t>(global)), sycl::range<1>(static_cast<size_t>(local)));
    }

    // ---- buffers ----
    std::vector<UsmBuffer> buffers;  // freed on every path
    buffers.reserve(job.buffers.size());
    // Declared after `buffers`, so destroyed first: on an error path, work already queued finishes before
    // its allocations are freed.
    struct QueueDrain {
        sycl::queue &q;
        ~QueueDrain() {
            try {
                q.wait();
            } catch (...) {
            }
        }
    } drain{q};
    std::vector<void *> ptrs(job.buffers.size(), nullptr);
    auto allocate = [&](size_t i, size_t bytes, uint8_t dtype) {
        UsmBuffer b;
        b.ctx = &ds.ctx;
        b.bytes = bytes;
        b.ptr = sycl::malloc_device(std::max<size_t>(bytes, astroport_native::dtype_bytes(dtype)), ds.dev,
                                    ds.ctx);  // never a null pointer arg
        if (!b.ptr)
            throw std::runtime_error("buffer " + std::to_string(i) + ": sycl::malloc_device of " +
                                     std::to_string(bytes) + " bytes failed");
        return b;
    };
    for (size_t i = 0; i < job.buffers.size(); ++i) {
        const astroport_native::Buffer &a = job.buffers[i];
        const size_t bytes = a.bytes();
        if (a.role == astroport_native::kResident) {
            // Kept per (device, id) until release(); replaced (contents lost) when missing or too small.
            UsmBuffer &kept = st.resident[{device, a.resident_id}];
            if (!kept.ptr || kept.bytes < bytes) kept = allocate(i, bytes, a.dtype);
            ptrs[i] = kept.ptr;
            if (a.init_count) q.memcpy(kept.ptr, a.host_source(), a.init_bytes());
            buffers.emplace_back();
            continue;
        }
        UsmBuffer b = allocate(i, bytes, a.dtype);
        ptrs[i] = b.ptr;
        if (a.role == astroport_native::kInput && bytes) q.memcpy(b.ptr, a.host_source(), bytes);
        buffers.push_back(std::move(b));
    }
    std::vector<LaunchArg> largs(job.args.size());
    for (size_t i = 0; i < job.args.size(); ++i) {
        const Arg &a = job.args[i];
        if (a.is_buffer) {
            largs[i].ptr = ptrs[a.buffer];
        } else {
            largs[i].kind = a.dtype;
            largs[i].bits = a.scalar_bits;
        }
    }
    auto poison = [&]() {
        for (size_t i = 0; i < job.buffers.size(); ++i)
            if ((job.buffers[i].role == astroport_native::kOutput || job.buffers[i].role == astroport_native::kScratch) &&
                buffers[i].bytes)
                q.memset(buffers[i].ptr, 0xFF, buffers[i].bytes);  // NaN for f32/f64
    };
    poison();
    ds.sync("upload/poison");

    // Enqueues the step sequence; returns one event per step.
    auto sequence = [&]() {
        std::vector<sycl::event> events;
        events.reserve(job.steps.size());
        for (size_t s = 0; s < job.steps.size(); ++s) {
            const Step &step = job.steps[s];
            if (step.is_fill()) {
                events.push_back(q.memset(ptrs[step.fill_buffer], step.fill_byte,
                                          job.buffers[step.fill_buffer].bytes()));
                continue;
            }
            events.push_back(q.submit([&](sycl::handler &h) {
                for (uint64_t a = 0; a < step.arg_count; ++a) {
                    const size_t k = static_cast<size_t>(step.first_arg + a);
                    set_arg(h, static_cast<int>(a), largs[k], job.args[k].is_buffer);
                }
                h.parallel_for(ranges[range_of[s]], kernels[kernel_of[s]]);
            }));
        }
        return events;
    };

    // ---- warm-up, timed repeats, verification run ----
    for (uint32_t w = 0; w < job.warmup; ++w) sequence();
    ds.sync("warm-up");
    out.times_s.reserve(job.repeats);
    auto record = [&](std::vector<sycl::event> &events) {
        uint64_t first = UINT64_MAX, last = 0;
        for (auto &ev : events) {
            const uint64_t t0 = ev.get_profiling_info<sycl::info::event_profiling::command_start>();
            const uint64_t t1 = ev.get_profiling_info<sycl::info::event_profiling::command_end>();
            first = std::min(first, t0);
            last = std::max(last, t1);
            out.step_times_s.push_back(t1 >= t0 ? static_cast<double>(t1 - t0) * 1e-9 : 0.0);
        }
        out.times_s.push_back(last >= first ? static_cast<double>(last - first) * 1e-9 : 0.0);
    };
    for (uint32_t r = 0; r < job.repeats; ++r) {
        std::vector<sycl::event> events = sequence();
        events.back().wait();
        ds.sync("timed sequence");
        record(events);
    }
    // A single-shot job (repeats == 0: one iteration of an adaptive algorithm) times the verification run.
    poison();
    std::vector<sycl::event> final_events = sequence();
    if (job.repeats == 0) {
        final_events.back().wait();
        ds.sync("timed verification run");
        record(final_events);
    }
    for (size_t i = 0; i < job.buffers.size(); ++i) {
        const astroport_native::Buffer &b = job.buffers[i];
        if (b.copied_back() && b.bytes()) q.memcpy(b.host_destination(), ptrs[i], b.bytes());
    }
    ds.sync("verification run");
    return out;
}

}  // namespace

std::vector<Device> devices() {
    State &st = state();
    std::lock_guard<std::mutex> lock(st.mutex);
    try {
        enumerate_locked(st);
        std::vector<Device> out;
        for (size_t i = 0; i < st.devices.size(); ++i) {
            const sycl::device &d = st.devices[i]->dev;
            Device r;
            r.index = static_cast<int>(i);
            r.name = d.get_info<sycl::info::device::name>();
            r.vendor = d.get_info<sycl::info::device::vendor>();
            r.driver = d.get_info<sycl::info::device::driver_version>();
            r.is_gpu = d.is_gpu();
            r.global_mem_bytes = d.get_info<sycl::info::device::global_mem_size>();
            r.max_alloc_bytes = d.get_info<sycl::info::device::max_mem_alloc_size>();
            r.fp64 = d.has(sycl::aspect::fp64);
            r.compute_units = d.get_info<sycl::info::device::max_compute_units>();
            out.push_back(std::move(r));
        }
        return out;
    } catch (const sycl::exception &e) {
        throw std::runtime_error(std::string("SYCL device query failed: ") + e.what());
    }
}

std::string runtime_version() {
    State &st = state();
    std::lock_guard<std::mutex> lock(st.mutex);
    std::ostringstream s;
    s << "DPC++ libsycl " << __LIBSYCL_MAJOR_VERSION << '.' << __LIBSYCL_MINOR_VERSION << '.'
      << __LIBSYCL_PATCH_VERSION << " (headers " << __SYCL_COMPILER_VERSION << "), kernels built at run time "
      << "(sycl_ext_oneapi_kernel_compiler)";
    try {
        enumerate_locked(st);
        for (size_t i = 0; i < st.devices.size(); ++i) {
            const sycl::device &d = st.devices[i]->dev;
            s << "; device " << i << ": " << d.get_info<sycl::info::device::name>() << " on "
              << d.get_platform().get_info<sycl::info::platform::name>() << " ("
              << d.get_platform().get_info<sycl::info::platform::version>() << "), driver "
              << d.get_info<sycl::info::device::driver_version>();
        }
        for (const auto &k : st.skipped) s << "; skipped " << k;
    } catch (const std::exception &e) {
        s << "; no usable device: " << e.what();
    }
    return s.str();
}

void release(int device, const std::vector<uint64_t> &ids) {
    State &st = state();
    std::lock_guard<std::mutex> lock(st.mutex);
    for (uint64_t id : ids) st.resident.erase({device, id});
}

Outcome run_job(int device, const Job &job) {
    State &st = state();
    std::lock_guard<std::mutex> lock(st.mutex);
    try {
        return run_job_locked(st, device, job);
    } catch (const sycl::exception &e) {
        throw std::runtime_error("SYCL job '" + job.program + "': " + e.what());
    }
}

}  // namespace astroport_sycl
