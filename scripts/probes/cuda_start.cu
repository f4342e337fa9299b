// Start-up probe (issue 15): where a process's first 0.2-0.35 s of CUDA go before a job can run, call by
// call, each timed from the process's start. Build: nvcc -O2 -arch=sm_90 -cudart static -o
// .carry/start_probe scripts/probes/cuda_start.cu -lpthread -ldl -lrt; run with an argument to skip
// cudaGetDeviceProperties (attributes only).
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
using clk = std::chrono::steady_clock;
static const clk::time_point t0 = clk::now();
static void mark(const char *what) {
  std::printf("%7.1f ms  %s\n", std::chrono::duration<double>(clk::now() - t0).count() * 1e3, what);
}
int main(int argc, char **) {
  mark("main");
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
  return 0;
}
