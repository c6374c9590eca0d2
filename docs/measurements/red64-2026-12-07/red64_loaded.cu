// red64.cu's question under load: every block first streams a routed slice's bytes (786 KB of "weights", 16-byte
// loads, evict-first as the megakernel's) and reduces them to 2,048 values, then either stores them into its own
// partial row (today) or adds them as int64 into ONE shared accumulator (docs/next/README.md item 11, form (c)).
// The difference between the two kernels' times is what the integer adds cost at the end of a real window.
//   nvcc -arch=sm_90a -O3 -std=c++17 -o red64_loaded docs/measurements/red64-2026-12-07/red64_loaded.cu && ./red64_loaded
#include <cstdio>
#include <cstdint>
#include <cuda_runtime.h>

constexpr int kHidden = 2048, kThreads = 256;
constexpr size_t kSliceBytes = 786432;

template <bool kAtomic>
__global__ void slice(const uint4* weights, float* rows, unsigned long long* acc, int layers) {
  __shared__ float out[kHidden];
  for (int l = 0; l < layers; ++l) {
    const uint4* w = weights + (static_cast<size_t>(l % 4) * gridDim.x + blockIdx.x) * (kSliceBytes / 16);
    float s = 0.f;
    for (size_t i = threadIdx.x; i < kSliceBytes / 16; i += kThreads) {
      uint4 v;
      asm volatile("ld.global.cs.nc.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(w + i));
      s += __uint_as_float(v.x & 0x3f800000u) + __uint_as_float(v.w & 0x3f800000u);
    }
    for (int c = threadIdx.x; c < kHidden; c += kThreads) out[c] = s * (c + 1);
    __syncthreads();
    for (int c = threadIdx.x; c < kHidden; c += kThreads) {
      if (kAtomic) {
        const long long q = __float2ll_rn(out[c] * 65536.0f);
        asm volatile("red.global.add.u64 [%0], %1;" ::"l"(acc + static_cast<size_t>(l) * kHidden + c), "l"(q) : "memory");
      } else {
        rows[(static_cast<size_t>(l) * gridDim.x + blockIdx.x) * kHidden + c] = out[c];
      }
    }
    __syncthreads();
  }
}

template <class F>
float time_ms(F launch, int reps) {
  cudaEvent_t a, b;
  cudaEventCreate(&a), cudaEventCreate(&b);
  launch();
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
  const int layers = 26, reps = 10;
  uint4* weights;  // four layers' worth of slices, cycled (416 MB on 132 SMs: far beyond L2)
  float* rows;
  unsigned long long* acc;
  cudaMalloc(&weights, kSliceBytes * sms * 4);
  cudaMemset(weights, 1, kSliceBytes * sms * 4);
  cudaMalloc(&rows, sizeof(float) * layers * sms * kHidden);
  cudaMalloc(&acc, sizeof(unsigned long long) * layers * kHidden);
  cudaMemset(acc, 0, sizeof(unsigned long long) * layers * kHidden);
  float st = 0, at = 0;
  for (int round = 0; round < 3; ++round) {  // interleaved, as the lab times variants
    st += time_ms([&] { slice<false><<<sms, kThreads>>>(weights, rows, acc, layers); }, reps);
    at += time_ms([&] { slice<true><<<sms, kThreads>>>(weights, rows, acc, layers); }, reps);
  }
  st /= 3, at /= 3;
  const double bytes = static_cast<double>(kSliceBytes) * sms;
  printf("%d SMs x %zu KB a layer; us a layer: stores %.2f (%.2f TB/s), int64 adds %.2f (%.2f TB/s), difference %+.2f\n",
         sms, kSliceBytes / 1024, st * 1e3 / layers, bytes / (st * 1e-3 / layers) / 1e12, at * 1e3 / layers,
         bytes / (at * 1e-3 / layers) / 1e12, (at - st) * 1e3 / layers);
  const cudaError_t e = cudaGetLastError();
  printf("%s\n", e == cudaSuccess ? "ok" : cudaGetErrorString(e));
  return e != cudaSuccess;
}
