// Threaded-copy probe (issue 15; docs/perf-notes.md "pageable copies from several threads"): can pageable
// copies, split over host threads each with a stream of its own, beat registering the pages (the difference
// job's pin 37 ms, copies, unpin 25 ms at 10k)? Moves what the 10k difference job moves: four 400 MB planes up
// from resident pageable memory, two 400 MB planes down into touched pages. Build: nvcc -O2 -arch=sm_90
// -cudart static -o .carry/threaded_copies scripts/probes/cuda_threaded_copies.cu -lpthread -ldl -lrt
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>
using clk = std::chrono::steady_clock;
static double since(clk::time_point t) { return std::chrono::duration<double>(clk::now() - t).count(); }

struct Plane {
  char *host;
  char *dev;
};

// Copies every plane in parts of `part` bytes, the parts dealt round-robin to `threads` threads, each with a
// non-blocking stream of its own; returns the wall time until all are done.
static double threaded(std::vector<Plane> &planes, size_t bytes, size_t part, int threads, bool up,
                       std::vector<cudaStream_t> &streams) {
  std::vector<std::pair<size_t, size_t>> jobs;  // (plane, offset)
  for (size_t p = 0; p < planes.size(); ++p)
    for (size_t o = 0; o < bytes; o += part) jobs.push_back({p, o});
  auto t = clk::now();
  std::vector<std::thread> pool;
  for (int k = 0; k < threads; ++k)
    pool.emplace_back([&, k] {
      cudaSetDevice(0);
      for (size_t j = k; j < jobs.size(); j += threads) {
        const Plane &pl = planes[jobs[j].first];
        const size_t o = jobs[j].second, n = std::min(part, bytes - o);
        if (up)
          cudaMemcpyAsync(pl.dev + o, pl.host + o, n, cudaMemcpyHostToDevice, streams[k]);
        else
          cudaMemcpyAsync(pl.host + o, pl.dev + o, n, cudaMemcpyDeviceToHost, streams[k]);
      }
      cudaStreamSynchronize(streams[k]);
    });
  for (auto &th : pool) th.join();
  return since(t);
}

int main() {
  const size_t bytes = 400ull << 20;
  cudaFree(0);
  std::vector<Plane> inputs(4), outputs(2);
  for (auto *set : {&inputs, &outputs})
    for (auto &p : *set) {
      p.host = static_cast<char *>(malloc(bytes));
      memset(p.host, 1, bytes);  // resident pages (inputs as read from files, outputs touched beforehand)
      cudaMalloc(&p.dev, bytes);
      cudaMemset(p.dev, 2, bytes);
    }
  std::vector<cudaStream_t> streams(16);
  for (auto &s : streams) cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaDeviceSynchronize();
  for (int rep = 0; rep < 3; ++rep) {
    // What the job does now: register the inputs, copy on one stream, unregister.
    auto t = clk::now();
    for (auto &p : inputs) cudaHostRegister(p.host, bytes, cudaHostRegisterDefault);
    const double reg = since(t);
    const double up = threaded(inputs, bytes, bytes, 1, true, streams);
    t = clk::now();
    for (auto &p : inputs) cudaHostUnregister(p.host);
    const double unreg = since(t);
    const double down = threaded(outputs, bytes, bytes, 1, false, streams);
    printf("rep %d registered: pin %.1f + up %.1f + unpin %.1f = %.1f ms; down pageable 1 thread %.1f ms\n", rep,
           reg * 1e3, up * 1e3, unreg * 1e3, (reg + up + unreg) * 1e3, down * 1e3);
    for (int threads : {1, 2, 4, 8, 16})
      for (size_t part : {size_t{16} << 20, size_t{64} << 20}) {
        const double u = threaded(inputs, bytes, part, threads, true, streams);
        const double d = threaded(outputs, bytes, part, threads, false, streams);
        printf("rep %d pageable %2d threads, %3zu MB parts: up 1.6 GB %.1f ms, down 0.8 GB %.1f ms\n", rep,
               threads, part >> 20, u * 1e3, d * 1e3);
      }
  }
  // The copies arrived: one byte of each plane checked.
  char probe = 0;
  cudaMemcpy(&probe, inputs[3].dev + bytes - 1, 1, cudaMemcpyDeviceToHost);
  printf("check %d %s\n", probe, cudaGetErrorString(cudaGetLastError()));
  return 0;
}
