// Transfer probe (issue 15; docs/perf-notes.md "file to file, second step"): how 400 MB moves between host
// memory and the GPU (pageable from resident pages, into fresh pages, after a parallel first touch, pinned by
// cudaHostRegister) and what the stream-ordered pool's release threshold costs. Build: nvcc -O2 -arch=sm_90
// -cudart static -o .carry/xfer_probe scripts/probes/cuda_transfers.cu -lpthread -ldl -lrt
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
using clk = std::chrono::steady_clock;
static double since(clk::time_point t) { return std::chrono::duration<double>(clk::now() - t).count(); }
int main() {
  const size_t n = 400ull << 20;
  void *dev; cudaMalloc(&dev, n);
  cudaStream_t s; cudaStreamCreate(&s);
  cudaFree(0);
  // resident pageable source
  char *src = (char *)malloc(n); memset(src, 1, n);
  auto t = clk::now(); cudaMemcpy(dev, src, n, cudaMemcpyHostToDevice); printf("H2D pageable resident: %.3f s\n", since(t));
  t = clk::now(); cudaMemcpy(dev, src, n, cudaMemcpyHostToDevice); printf("H2D pageable resident again: %.3f s\n", since(t));
  // D2H into fresh pages
  char *fresh = (char *)malloc(n);
  t = clk::now(); cudaMemcpy(fresh, dev, n, cudaMemcpyDeviceToHost); printf("D2H pageable fresh: %.3f s\n", since(t));
  t = clk::now(); cudaMemcpy(fresh, dev, n, cudaMemcpyDeviceToHost); printf("D2H pageable resident: %.3f s\n", since(t));
  // parallel prefault then D2H
  char *pre = (char *)malloc(n);
  t = clk::now();
  { std::vector<std::thread> th; for (int k = 0; k < 16; ++k) th.emplace_back([=] { for (size_t i = k * (n / 16); i < (k + 1) * (n / 16); i += 4096) pre[i] = 0; }); for (auto &x : th) x.join(); }
  double pf = since(t);
  t = clk::now(); cudaMemcpy(pre, dev, n, cudaMemcpyDeviceToHost); printf("prefault 16 threads %.3f s + D2H %.3f s\n", pf, since(t));
  // register cost
  char *reg = (char *)malloc(n); memset(reg, 2, n);
  t = clk::now(); cudaHostRegister(reg, n, cudaHostRegisterDefault); double rg = since(t);
  t = clk::now(); cudaMemcpy(dev, reg, n, cudaMemcpyHostToDevice); double h = since(t);
  t = clk::now(); cudaMemcpy(reg, dev, n, cudaMemcpyDeviceToHost); double d = since(t);
  t = clk::now(); cudaHostUnregister(reg); printf("register %.3f s, H2D %.3f s, D2H %.3f s, unregister %.3f s\n", rg, h, d, since(t));
  // stream-ordered pool: 2.4 GB per job with the 64 MiB release threshold, then with the pool kept
  cudaMemPool_t pool; cudaDeviceGetDefaultMemPool(&pool, 0);
  for (int keep_all = 0; keep_all < 2; ++keep_all) {
    uint64_t keep = keep_all ? ~0ull : (64ull << 20);
    cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    for (int rep = 0; rep < 3; ++rep) {
      t = clk::now(); void *p[6];
      for (int k = 0; k < 6; ++k) cudaMallocAsync(&p[k], n, s);
      cudaStreamSynchronize(s); double al = since(t);
      t = clk::now(); for (int k = 0; k < 6; ++k) cudaMemsetAsync(p[k], 0xFF, n, s); cudaStreamSynchronize(s); double ms = since(t);
      for (int k = 0; k < 6; ++k) cudaFreeAsync(p[k], s);
      cudaStreamSynchronize(s);
      printf("pool keep %s rep %d: 6 x 400 MB alloc %.4f s, memset %.4f s\n", keep_all ? "all" : "64MiB", rep, al, ms);
    }
  }
  printf("check %d\n", pre[999]);
  return 0;
}
