// How fast can split-K partials be added as integers at L2 (docs/next/README.md item 11, form (c))?
// Every block stands for one expert slice: it adds a 2,048-wide partial vector into ONE shared accumulator
// with red.global.add.u64 (fixed point: any order gives the same bits), as 132 slices would at the end of a
// MoE layer's window. Timed four ways with CUDA events, each over `layers` independent accumulators in one
// launch (so launch overhead is amortised):
//   all     132 blocks x 2,048 int64 adds into the same vector, per layer
//   one     1 block x 2,048 adds (the latency of one slice's flush when nothing else adds)
//   f32     132 blocks x 2,048 red.add.f32 (order-dependent; for the rate only)
//   store   132 blocks x 2,048 float stores into their own rows (today's partial rows, without the sum)
//   nvcc -arch=sm_90a -O3 -std=c++17 -o red64 docs/measurements/red64-2026-12-07/red64.cu && ./red64
#include <cstdio>
#include <cstdint>
#include <cuda_runtime.h>

constexpr int kHidden = 2048, kThreads = 256;

__global__ void add_i64(unsigned long long* acc, int layers, float scale) {
  for (int l = 0; l < layers; ++l)
    for (int c = threadIdx.x; c < kHidden; c += kThreads) {
      const float v = 1e-3f * ((blockIdx.x * 7 + c * 13 + l) % 101 - 50);
      const long long q = __float2ll_rn(v * scale);
      asm volatile("red.global.add.u64 [%0], %1;" ::"l"(acc + static_cast<size_t>(l) * kHidden + c), "l"(q) : "memory");
    }
}

__global__ void add_f32(float* acc, int layers) {
  for (int l = 0; l < layers; ++l)
    for (int c = threadIdx.x; c < kHidden; c += kThreads)
      atomicAdd(acc + static_cast<size_t>(l) * kHidden + c, 1e-3f * ((blockIdx.x * 7 + c * 13 + l) % 101 - 50));
}

__global__ void store_rows(float* rows, int layers) {
  for (int l = 0; l < layers; ++l)
    for (int c = threadIdx.x; c < kHidden; c += kThreads)
      rows[(static_cast<size_t>(l) * gridDim.x + blockIdx.x) * kHidden + c] = 1e-3f * ((blockIdx.x * 7 + c * 13 + l) % 101 - 50);
}

template <class F>
float time_ms(F launch, int reps) {
  cudaEvent_t a, b;
  cudaEventCreate(&a), cudaEventCreate(&b);
  launch();  // warm
  cudaEventRecord(a);
  for (int r = 0; r < reps; ++r) launch();
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms;
  cudaEventElapsedTime(&ms, a, b);
  return ms / reps;
}

int main() {
  int sms;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int layers = 26, reps = 20;
  unsigned long long* acc;
  float *accf, *rows;
  cudaMalloc(&acc, sizeof(unsigned long long) * layers * kHidden);
  cudaMalloc(&accf, sizeof(float) * layers * kHidden);
  cudaMalloc(&rows, sizeof(float) * layers * sms * kHidden);
  cudaMemset(acc, 0, sizeof(unsigned long long) * layers * kHidden);
  const float scale = 4294967296.0f;  // 2^32: 32 fraction bits
  const float all = time_ms([&] { add_i64<<<sms, kThreads>>>(acc, layers, scale); }, reps);
  const float one = time_ms([&] { add_i64<<<1, kThreads>>>(acc, layers, scale); }, reps);
  const float f32 = time_ms([&] { add_f32<<<sms, kThreads>>>(accf, layers); }, reps);
  const float st = time_ms([&] { store_rows<<<sms, kThreads>>>(rows, layers); }, reps);
  const float empty = time_ms([&] { add_i64<<<sms, kThreads>>>(acc, 0, scale); }, reps);
  printf("%d SMs, %d layers a launch, %d launches; us a layer (launch overhead: %.2f us a launch, not subtracted)\n",
         sms, layers, reps, empty * 1e3);
  printf("all    %d blocks x %d int64 red.add into one vector: %.3f us\n", sms, kHidden, all * 1e3 / layers);
  printf("one    1 block x %d int64 red.add:                 %.3f us\n", kHidden, one * 1e3 / layers);
  printf("f32    %d blocks x %d f32 red.add:                 %.3f us\n", sms, kHidden, f32 * 1e3 / layers);
  printf("store  %d blocks x %d f32 stores, own rows:         %.3f us\n", sms, kHidden, st * 1e3 / layers);
  const cudaError_t e = cudaGetLastError();
  printf("%s\n", e == cudaSuccess ? "ok" : cudaGetErrorString(e));
  return e != cudaSuccess;
}
