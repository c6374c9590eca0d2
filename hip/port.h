// Portability layer: the only file in hip/ that includes a vendor runtime header.
// Everything device-side that differs between CUDA (nvcc, sm_90a) and HIP (hipcc, gfx90a/gfx942)
// lives here: the bf16 storage type and its conversions, acquire/release atomics on int32 event
// counters, warp-size-agnostic reductions, 16-byte streaming loads and a wall-clock timer.
#pragma once

#if defined(__HIP_PLATFORM_AMD__) || defined(__HIP__)
#define FD_HIP 1
#include <hip/hip_runtime.h>
#else
#define FD_CUDA 1
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda/atomic>
#endif

#include <stdint.h>

// ---------------------------------------------------------------------------------------------
// Host API names used by the launchers.
#if FD_CUDA
typedef cudaStream_t fd_stream_t;
typedef cudaError_t fd_error_t;
#define fd_success cudaSuccess
#define fd_get_last_error cudaGetLastError
#define fd_get_error_string cudaGetErrorString
#else
typedef hipStream_t fd_stream_t;
typedef hipError_t fd_error_t;
#define fd_success hipSuccess
#define fd_get_last_error hipGetLastError
#define fd_get_error_string hipGetErrorString
#endif

// Launch helpers of the persistent runtime: a cooperative launch (refused by the driver unless
// every block is resident at once, which spin-waiting workers need), the dynamic shared-memory
// limit, and the watchdog's clock rate.
#if FD_CUDA
inline fd_error_t fd_launch_cooperative(const void* kernel, dim3 grid, dim3 block, void** args, size_t smem,
                                        fd_stream_t stream) {
  return cudaLaunchCooperativeKernel(kernel, grid, block, args, smem, stream);
}
inline fd_error_t fd_set_max_dynamic_smem(const void* kernel, int bytes) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
}
// %globaltimer counts nanoseconds.
inline double fd_wall_ticks_per_second() { return 1e9; }
#else
inline fd_error_t fd_launch_cooperative(const void* kernel, dim3 grid, dim3 block, void** args, size_t smem,
                                        fd_stream_t stream) {
  return hipLaunchCooperativeKernel(kernel, grid, block, args, static_cast<unsigned int>(smem), stream);
}
inline fd_error_t fd_set_max_dynamic_smem(const void* kernel, int bytes) {
  return hipFuncSetAttribute(kernel, hipFuncAttributeMaxDynamicSharedMemorySize, bytes);
}
// s_memrealtime runs at a constant 100 MHz on gfx90a and gfx942 (older HIP headers, Debian's
// among them, lack hipDeviceAttributeWallClockRate to ask).
inline double fd_wall_ticks_per_second() { return 1e8; }
#endif

// ---------------------------------------------------------------------------------------------
// Warp (wavefront) size as a compile-time constant: register arrays and reduction loops are sized
// from it. nvcc has no predefined macro for it; every NVIDIA architecture has 32-lane warps.
#if FD_HIP
#ifdef __AMDGCN_WAVEFRONT_SIZE
constexpr int kWarpSize = __AMDGCN_WAVEFRONT_SIZE;
#else
constexpr int kWarpSize = 64;
#endif
#else
constexpr int kWarpSize = 32;
#endif
// The largest block any launcher uses; sizes the per-warp scratch of block reductions.
constexpr int kMaxBlockThreads = 1024;
constexpr int kMaxWarpsPerBlock = kMaxBlockThreads / kWarpSize;

__device__ __forceinline__ int fd_lane() { return threadIdx.x % kWarpSize; }
__device__ __forceinline__ int fd_warp() { return threadIdx.x / kWarpSize; }
__device__ __forceinline__ int fd_num_warps() { return blockDim.x / kWarpSize; }

// ---------------------------------------------------------------------------------------------
// 16x16x16 matrix products on the tensor cores: bf16 operands, fp32 accumulation, a warp per product
// (NVIDIA sm_80 and later, through WMMA). FD_HAS_MMA16 says whether this compilation pass has them;
// where it does not (AMD, older GPUs, the host pass) callers keep their plain-core path. Operand
// pointers are 32-byte aligned, ldm (elements) a multiple of 8; A is row-major, B either layout.
#if FD_CUDA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#include <mma.h>
#define FD_HAS_MMA16 1
namespace fd_mma16 {
namespace w = nvcuda::wmma;
typedef w::fragment<w::matrix_a, 16, 16, 16, __nv_bfloat16, w::row_major> a_t;
typedef w::fragment<w::matrix_b, 16, 16, 16, __nv_bfloat16, w::col_major> b_col_t;  // B(k, n) at p[n * ldm + k]
typedef w::fragment<w::matrix_b, 16, 16, 16, __nv_bfloat16, w::row_major> b_row_t;  // B(k, n) at p[k * ldm + n]
typedef w::fragment<w::accumulator, 16, 16, 16, float> acc_t;
template <class F>
__device__ __forceinline__ void load(F& f, const uint16_t* p, int ldm) {
  w::load_matrix_sync(f, reinterpret_cast<const __nv_bfloat16*>(p), ldm);
}
__device__ __forceinline__ void zero(acc_t& c) { w::fill_fragment(c, 0.f); }
template <class B>
__device__ __forceinline__ void mma(acc_t& c, const a_t& a, const B& b) { w::mma_sync(c, a, b, c); }
// c's 16x16 floats row-major at p (ldm floats a row).
__device__ __forceinline__ void store(float* p, const acc_t& c, int ldm) { w::store_matrix_sync(p, c, ldm, w::mem_row_major); }
// Orders a warp's shared-memory writes (a stored product) before its lanes read them.
__device__ __forceinline__ void sync_warp() { __syncwarp(); }
constexpr uintptr_t kAlign = 32;  // bytes: every operand pointer's alignment
}  // namespace fd_mma16
#else
#define FD_HAS_MMA16 0
#endif

// ---------------------------------------------------------------------------------------------
// bf16 is stored as its raw 16 bits so that host code, ctypes and both compilers agree on layout.
typedef uint16_t fd_bf16;

__device__ __forceinline__ float fd_bits_to_float(uint32_t bits) { return __uint_as_float(bits); }

__device__ __forceinline__ float fd_bf16_to_float(fd_bf16 h) {
  return fd_bits_to_float(static_cast<uint32_t>(h) << 16);
}

// Round to nearest even, NaN stays NaN: the same rounding as torch's .to(torch.bfloat16).
__device__ __forceinline__ fd_bf16 fd_float_to_bf16(float f) {
#if FD_CUDA
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
#else
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<fd_bf16>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<fd_bf16>(u >> 16);
#endif
}

// Rounds a float through bf16 and back: how HF's bf16 activations are stored between ops.
__device__ __forceinline__ float fd_round_bf16(float f) { return fd_bf16_to_float(fd_float_to_bf16(f)); }

// The two bf16 halves of a 32-bit word (element 0 in the low half, little-endian).
__device__ __forceinline__ float fd_bf16_lo(uint32_t w) { return fd_bits_to_float(w << 16); }
__device__ __forceinline__ float fd_bf16_hi(uint32_t w) { return fd_bits_to_float(w & 0xffff0000u); }

// ---------------------------------------------------------------------------------------------
// 16-byte vector loads. fd_load_stream16 is for weights only (data no task ever writes): it
// takes the read-only path and is marked evict-first (each weight is read once per token; ~170 MB a
// layer at normal priority would evict from L2 what is read again: the kernel's code, the cache rows,
// the activations; docs/megakernel.md part 24), and the compiler may reorder it freely, also across
// event waits.
struct alignas(16) fd_vec16 {
  uint32_t x, y, z, w;
};

__device__ __forceinline__ fd_vec16 fd_load_stream16(const void* p) {
  fd_vec16 v;
#if FD_CUDA
  asm("ld.global.cs.nc.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
#else
  const uint32_t* q = static_cast<const uint32_t*>(p);
  typedef uint32_t u32x4 __attribute__((ext_vector_type(4)));
  u32x4 t = __builtin_nontemporal_load(reinterpret_cast<const u32x4*>(q));
  v.x = t.x; v.y = t.y; v.z = t.z; v.w = t.w;
#endif
  return v;
}

// Weights staged in shared memory before a task's inputs are ready (the runtime's staging of a
// task's weight tile). fd_load_shared16 reads 16 bytes of shared memory through a generic pointer.
// On sm_90 the tile arrives by bulk copies (TMA) that complete on an mbarrier, issued by one thread
// while the block still waits for the task's inputs; fd_has_bulk_stage() says whether that exists.
// Elsewhere the block copies the tile with plain loads (fd_stage_copy) before the wait.
// A hint that p's line will be read soon by this SM: it costs no register and nothing waits for it
// (NVIDIA: into L1; elsewhere nothing).
__device__ __forceinline__ void fd_prefetch_l1(const void* p) {
#if FD_CUDA && defined(__CUDA_ARCH__)
  asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
#else
  (void)p;
#endif
}

__device__ __forceinline__ fd_vec16 fd_load_shared16(const void* p) {
#if FD_CUDA && defined(__CUDA_ARCH__)
  fd_vec16 v;
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(a));
  return v;
#else
  return *static_cast<const fd_vec16*>(p);
#endif
}

__device__ __forceinline__ bool fd_has_bulk_stage() {
#if FD_CUDA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  return true;
#else
  return false;
#endif
}

// One thread initialises the mbarrier (arrival count 1); a block barrier must follow.
__device__ __forceinline__ void fd_stage_barrier_init(uint64_t* bar) {
#if FD_CUDA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(bar));
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(a) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#else
  (void)bar;
#endif
}

// One thread: bytes (a multiple of 16, both pointers 16-byte aligned) from global src to shared dst,
// in bulk copies that complete the barrier's current phase once all have landed. Earlier generic
// reads of dst by the block must be ordered before it by a block barrier.
__device__ __forceinline__ void fd_stage_issue(uint64_t* bar, void* dst, const void* src, uint32_t bytes) {
#if FD_CUDA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr uint32_t kPiece = 32 * 1024;
  const uint32_t b = static_cast<uint32_t>(__cvta_generic_to_shared(bar));
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(bytes) : "memory");
  uint64_t policy;  // weights are read once a token: first out of L2, like fd_load_stream16's
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  for (uint32_t off = 0; off < bytes; off += kPiece) {
    const uint32_t n = bytes - off < kPiece ? bytes - off : kPiece;
    const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(static_cast<char*>(dst) + off));
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;"
        ::"r"(d), "l"(static_cast<const char*>(src) + off), "r"(n), "r"(b), "l"(policy)
        : "memory");
  }
#else
  (void)bar, (void)dst, (void)src, (void)bytes;
#endif
}

// Every thread waits until the barrier's phase `parity` has completed (the staged bytes landed).
__device__ __forceinline__ void fd_stage_wait(uint64_t* bar, uint32_t parity) {
#if FD_CUDA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const uint32_t b = static_cast<uint32_t>(__cvta_generic_to_shared(bar));
  uint32_t done = 0;
  while (!done) {
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(b), "r"(parity)
        : "memory");
  }
#else
  (void)bar, (void)parity;
#endif
}

// Whether the barrier's phase `parity` has completed, without waiting (the trace's "resident" word).
__device__ __forceinline__ bool fd_stage_test(uint64_t* bar, uint32_t parity) {
#if FD_CUDA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const uint32_t b = static_cast<uint32_t>(__cvta_generic_to_shared(bar));
  uint32_t done;
  asm volatile(
      "{ .reg .pred p; mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
      : "=r"(done)
      : "r"(b), "r"(parity)
      : "memory");
  return done != 0;
#else
  (void)bar, (void)parity;
  return true;
#endif
}

// The fallback: the whole block copies bytes (a multiple of 16) with 16-byte loads, then a barrier.
__device__ __forceinline__ void fd_stage_copy(void* dst, const void* src, uint32_t bytes) {
  fd_vec16* d = static_cast<fd_vec16*>(dst);
  for (uint32_t i = threadIdx.x; i < bytes / 16; i += blockDim.x)
    d[i] = fd_load_stream16(static_cast<const char*>(src) + 16 * static_cast<size_t>(i));
  __syncthreads();
}

// Activations (written earlier by another task, re-read by many blocks): a plain cached load.
__device__ __forceinline__ fd_vec16 fd_load16(const void* p) {
  return *static_cast<const fd_vec16*>(p);
}

__device__ __forceinline__ void fd_store16(void* p, fd_vec16 v) { *static_cast<fd_vec16*>(p) = v; }

// ---------------------------------------------------------------------------------------------
// Event counters: int32, device (agent) scope. A producer publishes its output with a release
// add; a consumer polls with acquire loads, so the producer's writes are visible after the wait.
__device__ __forceinline__ int fd_load_acquire(const int* p) {
#if FD_CUDA
  cuda::atomic_ref<int, cuda::thread_scope_device> a(*const_cast<int*>(p));
  return a.load(cuda::memory_order_acquire);
#else
  return __hip_atomic_load(p, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_AGENT);
#endif
}

__device__ __forceinline__ void fd_store_release(int* p, int v) {
#if FD_CUDA
  cuda::atomic_ref<int, cuda::thread_scope_device> a(*p);
  a.store(v, cuda::memory_order_release);
#else
  __hip_atomic_store(p, v, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_AGENT);
#endif
}

__device__ __forceinline__ int fd_atomic_add_release(int* p, int v) {
#if FD_CUDA
  cuda::atomic_ref<int, cuda::thread_scope_device> a(*p);
  return a.fetch_add(v, cuda::memory_order_release);
#else
  return __hip_atomic_fetch_add(p, v, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_AGENT);
#endif
}

// Read-modify-write that both publishes this thread's writes and sees those of the earlier adders
// (the last of several adders to arrive sums their partials).
__device__ __forceinline__ int fd_atomic_add_acq_rel(int* p, int v) {
#if FD_CUDA
  cuda::atomic_ref<int, cuda::thread_scope_device> a(*p);
  return a.fetch_add(v, cuda::memory_order_acq_rel);
#else
  return __hip_atomic_fetch_add(p, v, __ATOMIC_ACQ_REL, __HIP_MEMORY_SCOPE_AGENT);
#endif
}

// A signal nobody reads the old value of: a non-returning release add (red.release.gpu on CUDA),
// so the signalling thread does not wait for the counter's round trip. After a block barrier it
// publishes every thread's writes (release is cumulative over what the barrier ordered before it:
// the pattern of CUTLASS's GenericBarrier::arrive_inc).
__device__ __forceinline__ void fd_signal_add_release(int* p, int v) {
#if FD_CUDA && defined(__CUDA_ARCH__)
  asm volatile("red.release.gpu.global.add.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
#elif FD_CUDA
  (void)p, (void)v;
#else
  (void)__hip_atomic_fetch_add(p, v, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_AGENT);
#endif
}

// fp32 accumulation into device memory (the task graph's adding kinds). Relaxed: the adding
// task's release signal publishes the sums. The order of the additions, and so the last bits of
// the sum, vary from run to run.
__device__ __forceinline__ void fd_atomic_add_f32(float* p, float v) {
#if FD_CUDA
  atomicAdd(p, v);
#else
  __hip_atomic_fetch_add(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
#endif
}

// A counter's fetch-add with no ordering (an EXPERT_POOL's take: it hands out an index, not data, whose
// inputs the taker's wait already acquired), device scope.
__device__ __forceinline__ int fd_atomic_add_relaxed(int* p, int v) {
#if FD_CUDA
  return atomicAdd(p, v);
#else
  return __hip_atomic_fetch_add(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
#endif
}

// An integer add into device memory whose old value nobody reads (the split-K slices' fixed-point sum):
// relaxed, device scope; the adding task's release signal publishes it. Integer adds commute, so the
// sum's bits do not depend on their order. red.global.add.u64 on CUDA: no value comes back.
__device__ __forceinline__ void fd_red_add_u64(unsigned long long* p, unsigned long long v) {
#if FD_CUDA && defined(__CUDA_ARCH__)
  asm volatile("red.relaxed.gpu.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#elif FD_CUDA
  (void)p, (void)v;
#else
  (void)__hip_atomic_fetch_add(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
#endif
}

// Integer counts in shared memory, summed by the threads of one block (relaxed, workgroup scope:
// a barrier orders them for the readers).
__device__ __forceinline__ void fd_atomic_add_shared(int* p, int v) {
#if FD_CUDA
  atomicAdd(p, v);
#else
  __hip_atomic_fetch_add(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_WORKGROUP);
#endif
}

// System scope (host-visible): the watchdog's error block is read by the host while the
// persistent kernel may still be running.
__device__ __forceinline__ void fd_store_release_system(int* p, int v) {
#if FD_CUDA
  cuda::atomic_ref<int, cuda::thread_scope_system> a(*p);
  a.store(v, cuda::memory_order_release);
#else
  __hip_atomic_store(p, v, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_SYSTEM);
#endif
}

// ---------------------------------------------------------------------------------------------
// Wall-clock timer for the watchdog. fd_wall_ticks() is monotonic; the host converts with
// fd_wall_ticks_per_second (nanoseconds on NVIDIA's globaltimer, the device's constant
// real-time clock on AMD: hipDeviceAttributeWallClockRate, 100 MHz on gfx90a/gfx942).
__device__ __forceinline__ uint64_t fd_wall_ticks() {
#if FD_CUDA
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#else
  return __builtin_amdgcn_s_memrealtime();
#endif
}

// ---------------------------------------------------------------------------------------------
// Reductions. Warp-level with xor shuffles over kWarpSize lanes; block-level through one float
// per warp in shared memory. Every thread of the block must call the block versions.
__device__ __forceinline__ float fd_shfl_xor(float v, int lane_mask) {
#if FD_CUDA
  return __shfl_xor_sync(0xffffffffu, v, lane_mask, kWarpSize);
#else
  return __shfl_xor(v, lane_mask, kWarpSize);
#endif
}

__device__ __forceinline__ int fd_shfl_xor(int v, int lane_mask) {
#if FD_CUDA
  return __shfl_xor_sync(0xffffffffu, v, lane_mask, kWarpSize);
#else
  return __shfl_xor(v, lane_mask, kWarpSize);
#endif
}

// A bit per lane of the warp, set where pred holds (kWarpSize bits; 64-bit so that both widths fit).
__device__ __forceinline__ unsigned long long fd_warp_ballot(bool pred) {
#if FD_CUDA
  return __ballot_sync(0xffffffffu, pred);
#else
  return __ballot(pred);
#endif
}

__device__ __forceinline__ float fd_warp_sum(float v) {
#pragma unroll
  for (int m = kWarpSize / 2; m > 0; m >>= 1) v += fd_shfl_xor(v, m);
  return v;
}

__device__ __forceinline__ float fd_warp_max(float v) {
#pragma unroll
  for (int m = kWarpSize / 2; m > 0; m >>= 1) v = fmaxf(v, fd_shfl_xor(v, m));
  return v;
}

// (value, index) pair: the larger value wins; on a tie the lower index wins (torch.argmax's
// first-occurrence rule). NaN is treated as larger than everything, as torch.argmax does.
struct fd_argmax_pair {
  float value;
  int index;
};

__device__ __forceinline__ bool fd_argmax_better(float v, int i, float best_v, int best_i) {
  bool v_nan = v != v, b_nan = best_v != best_v;
  if (v_nan || b_nan) return v_nan && (!b_nan || i < best_i);
  return v > best_v || (v == best_v && i < best_i);
}

__device__ __forceinline__ fd_argmax_pair fd_warp_argmax(fd_argmax_pair p) {
#pragma unroll
  for (int m = kWarpSize / 2; m > 0; m >>= 1) {
    float ov = fd_shfl_xor(p.value, m);
    int oi = fd_shfl_xor(p.index, m);
    if (fd_argmax_better(ov, oi, p.value, p.index)) { p.value = ov; p.index = oi; }
  }
  return p;
}

__device__ __forceinline__ float fd_block_sum(float v) {
  __shared__ float partial[kMaxWarpsPerBlock];
  v = fd_warp_sum(v);
  __syncthreads();  // partial[] may still be read by a previous call
  if (fd_lane() == 0) partial[fd_warp()] = v;
  __syncthreads();
  float total = 0.f;
  for (int w = 0; w < fd_num_warps(); ++w) total += partial[w];
  return total;
}

__device__ __forceinline__ float fd_block_max(float v) {
  __shared__ float partial[kMaxWarpsPerBlock];
  v = fd_warp_max(v);
  __syncthreads();
  if (fd_lane() == 0) partial[fd_warp()] = v;
  __syncthreads();
  float best = partial[0];
  for (int w = 1; w < fd_num_warps(); ++w) best = fmaxf(best, partial[w]);
  return best;
}

__device__ __forceinline__ fd_argmax_pair fd_block_argmax(fd_argmax_pair p) {
  __shared__ float partial_v[kMaxWarpsPerBlock];
  __shared__ int partial_i[kMaxWarpsPerBlock];
  p = fd_warp_argmax(p);
  __syncthreads();
  if (fd_lane() == 0) { partial_v[fd_warp()] = p.value; partial_i[fd_warp()] = p.index; }
  __syncthreads();
  fd_argmax_pair best = {partial_v[0], partial_i[0]};
  for (int w = 1; w < fd_num_warps(); ++w)
    if (fd_argmax_better(partial_v[w], partial_i[w], best.value, best.index)) {
      best.value = partial_v[w];
      best.index = partial_i[w];
    }
  return best;
}

// Exported by every launcher: 0 on success, else the runtime's error code (cudaError_t /
// hipError_t), so the Python side can name it with fd_error_string.
#define FD_EXPORT extern "C" __attribute__((visibility("default")))
