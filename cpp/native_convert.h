// Conversions between the cxx bridge types (src/backend/native.rs) and the plain job types
// (cpp/native_job.h), written once for both C++-hosted models.
#pragma once
#include "astroport/cpp/native_job.h"
#include "astroport/src/backend/native.rs.h"
#include "rust/cxx.h"

namespace astroport {

inline astroport_native::Job to_plain(const NativeJob &j) {
    astroport_native::Job p;
    p.program = std::string(j.program);
    p.source = std::string(j.source);
    for (const auto &d : j.defines) p.defines.emplace_back(std::string(d));
    for (const auto &n : j.header_names) p.header_names.emplace_back(std::string(n));
    for (const auto &t : j.header_texts) p.header_texts.emplace_back(std::string(t));
    p.kernel = std::string(j.kernel);
    p.global = j.global;
    p.local = j.local;
    p.warmup = j.warmup;
    p.repeats = j.repeats;
    return p;
}

inline std::vector<astroport_native::Arg> to_plain(rust::Slice<const NativeArg> args) {
    std::vector<astroport_native::Arg> out;
    out.reserve(args.size());
    for (const auto &a : args) out.push_back({a.role, a.dtype, a.count, a.offset, a.scalar_bits});
    return out;
}

inline NativeOutcome from_plain(astroport_native::Outcome &&o) {
    NativeOutcome r;
    for (double t : o.times_s) r.times_s.push_back(t);
    r.build_s = o.build_s;
    r.regs_per_thread = o.regs_per_thread;
    r.occupancy = o.occupancy;
    r.resources_source = rust::String(o.resources_source);
    r.local_used = o.local_used;
    r.build_options = rust::String(o.build_options);
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
