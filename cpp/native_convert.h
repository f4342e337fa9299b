// Conversions between the cxx bridge types (src/backend/native.rs) and the plain job types
// (cpp/native_job.h), written once for both C++-hosted models.
#pragma once
#include "astroport/cpp/native_job.h"
#include "astroport/src/backend/native.rs.h"
#include "rust/cxx.h"

namespace astroport {

inline astroport_native::Job to_plain(const NativeJob &j, rust::Slice<const NativeBuffer> buffers,
                                     rust::Slice<const NativeStep> steps, rust::Slice<const NativeArg> args) {
    astroport_native::Job p;
    p.program = std::string(j.program);
    p.source = std::string(j.source);
    for (const auto &d : j.defines) p.defines.emplace_back(std::string(d));
    for (const auto &n : j.header_names) p.header_names.emplace_back(std::string(n));
    for (const auto &t : j.header_texts) p.header_texts.emplace_back(std::string(t));
    p.warmup = j.warmup;
    p.repeats = j.repeats;
    for (const auto &b : buffers) p.buffers.push_back({b.role, b.dtype, b.count, b.host, b.resident_id, b.init_count, b.read_back,
                                                 b.read_back_later});
    for (const auto &s : steps) {
        astroport_native::Step q;
        q.kernel = std::string(s.kernel);
        q.fill_buffer = s.fill_buffer;
        q.fill_byte = s.fill_byte;
        q.global = s.global;
        q.local = s.local;
        q.first_arg = s.first_arg;
        q.arg_count = s.arg_count;
        p.steps.push_back(std::move(q));
    }
    for (const auto &a : args) p.args.push_back({a.is_buffer, a.buffer, a.dtype, a.scalar_bits});
    return p;
}

inline NativeOutcome from_plain(astroport_native::Outcome &&o) {
    NativeOutcome r;
    for (double t : o.times_s) r.times_s.push_back(t);
    for (double t : o.step_times_s) r.step_times_s.push_back(t);
    for (const auto &s : o.steps) {
        NativeStepOutcome n;
        n.regs_per_thread = s.regs_per_thread;
        n.occupancy = s.occupancy;
        n.resources_source = rust::String::lossy(s.resources_source);
        n.local_used = s.local_used;
        r.steps.push_back(std::move(n));
    }
    r.build_s = o.build_s;
    r.build_options = rust::String::lossy(o.build_options);
    return r;
}

inline rust::Vec<NativeDevice> from_plain(const std::vector<astroport_native::Device> &devs) {
    rust::Vec<NativeDevice> out;
    for (const auto &d : devs) {
        NativeDevice n;
        n.index = d.index;
        n.name = rust::String(d.name);
        n.vendor = rust::String(d.vendor);
        n.driver = rust::String(d.driver);
        n.is_gpu = d.is_gpu;
        n.global_mem_bytes = d.global_mem_bytes;
        n.max_alloc_bytes = d.max_alloc_bytes;
        n.fp64 = d.fp64;
        n.compute_units = d.compute_units;
        out.push_back(std::move(n));
    }
    return out;
}

}  // namespace astroport
