// SYCL bridge (g++ through cxx_build): converts the cxx types and forwards to the plain C++ API that
// cpp/sycl_host.cpp implements. Include dirs: cxx_build's crate dir (for "astroport/...") and the DPC++
// headers (sycl_host.cpp only; this file includes no SYCL header).
#include "astroport/cpp/sycl_bridge.h"

#include "astroport/cpp/native_convert.h"
#include "astroport/cpp/sycl_host.h"

namespace astroport {

rust::Vec<NativeDevice> sycl_devices() { return from_plain(astroport_sycl::devices()); }

rust::String sycl_runtime_version() { return rust::String::lossy(astroport_sycl::runtime_version()); }

void sycl_release(int32_t device, rust::Slice<const uint64_t> ids) {
    astroport_sycl::release(static_cast<int>(device), std::vector<uint64_t>(ids.begin(), ids.end()));
}

NativeOutcome sycl_run_job(int32_t device, const NativeJob &job, rust::Slice<const NativeBuffer> buffers,
                           rust::Slice<const NativeStep> steps, rust::Slice<const NativeArg> args) {
    return from_plain(astroport_sycl::run_job(static_cast<int>(device), to_plain(job, buffers, steps, args)));
}

}  // namespace astroport
