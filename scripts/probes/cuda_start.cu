// Start-up probe (issue 15): where a process's first 0.2-0.35 s of CUDA go before a job can run, call by
// call, each timed from the process's start. Build: nvcc -O2 -arch=sm_90 -cudart static -o
// .carry/start_probe scripts/probes/cuda_start.cu -lpthread -ldl -lrt; run with an argument to skip
// cudaGetDeviceProperties (attributes only). `LOAD=N` (environment) runs N threads beside the start that
// fault in fresh memory over and over, as `subtract`'s read does (`LOAD_HUGE=1`: 2 MiB pages, as mimalloc's);
// whether the runtime's start slows under it is what the probe asks.
#include <cuda_runtime.h>
#include <sys/mman.h>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
using clk = std::chrono::steady_clock;
static const clk::time_point t0 = clk::now();
static void mark(const char *what) {
  std::printf("%7.1f ms  %s\n", std::chrono::duration<double>(clk::now() - t0).count() * 1e3, what);
}
static std::atomic<bool> g_stop{false};
static std::atomic<long> g_faulted_mb{0};
static void fault_loop(bool huge) {
  const size_t bytes = size_t(128) << 20;
  while (!g_stop.load()) {
    void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      std::perror("load thread: mmap");
      return;
    }
    if (huge) madvise(p, bytes, MADV_HUGEPAGE);
    std::memset(p, 1, bytes);
    munmap(p, bytes);
    g_faulted_mb += 128;
  }
}
int main(int argc, char **) {
  mark("main");
  const int load = std::getenv("LOAD") ? std::atoi(std::getenv("LOAD")) : 0;
  const bool huge = std::getenv("LOAD_HUGE") != nullptr;
  std::vector<std::thread> loaders;
  for (int i = 0; i < load; ++i) loaders.emplace_back(fault_loop, huge);
  int drv = 0;
  cudaDriverGetVersion(&drv);
  mark("cudaDriverGetVersion (libcuda loaded)");
  int n = 0;
  cudaGetDeviceCount(&n);
  mark("cudaGetDeviceCount (cuInit)");
  if (argc < 2) {
    cudaDeviceProp p{};
    cudaGetDeviceProperties(&p, 0);
    mark("cudaGetDeviceProperties");
    cudaGetDeviceProperties(&p, 0);
    mark("cudaGetDeviceProperties again");
  } else {
    int v = 0;
    cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, 0);
    cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMajor, 0);
    mark("cudaDeviceGetAttribute x2");
  }
  cudaSetDevice(0);
  mark("cudaSetDevice");
  cudaFree(nullptr);
  mark("cudaFree(nullptr): primary context");
  size_t f = 0, t = 0;
  cudaMemGetInfo(&f, &t);
  mark("cudaMemGetInfo");
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  void *d = nullptr;
  cudaMallocAsync(&d, 400u << 20, s);
  cudaStreamSynchronize(s);
  mark("stream + cudaMallocAsync 400 MB");
  cudaFreeAsync(d, s);
  cudaStreamSynchronize(s);
  mark("cudaFreeAsync");
  g_stop = true;
  for (auto &t : loaders) t.join();
  if (load) std::printf("load: %d threads faulted %ld MB (%s pages)\n", load, g_faulted_mb.load(), huge ? "2 MiB" : "4 KiB");
  return 0;
}
