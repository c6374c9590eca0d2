// Seeded sampling of one token from a row of logits, by ONE block, without sorting the vocabulary:
// the device twin of fleet_decode/sampling.py (same Philox bits, same thresholds, same draw).
//
//   token = argmax over allowed i of  logits[i] / T - log(-log(u_i)),
//   u_i   = ((philox4x32_10(counter = {i, position, 0, 0}, key = seed)[0] >> 8) + 0.5) * 2^-24
//
// (the Gumbel-max trick: an exact draw from softmax(logits / T) over the allowed tokens). The allowed
// set is a threshold on the logits' order-preserving integer keys: top-k (fewer than k logits strictly
// larger), then top-p within it (the mass of the strictly larger ones below p), each the largest key
// that qualifies, found by a 16-way search over the keys with block-wide counts and sums. Every reduction is a fixed tree for a given block
// size (no atomics), so a block of the same size always picks the same token.
#pragma once
#include "common.h"

struct fd_sampling {
  float temperature;  // 0: greedy (torch.argmax's first maximum)
  int top_k;          // 0: no top-k
  float top_p;        // >= 1: no top-p
  unsigned int seed_lo, seed_hi;
};

// Philox4x32-10 (Salmon et al., SC'11; Random123's philox4x32), counter in place.
__device__ __forceinline__ void fd_philox4x32_10(uint32_t c[4], uint32_t k0, uint32_t k1) {
#pragma unroll
  for (int r = 0; r < 10; ++r) {
    if (r) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    const unsigned long long p0 = 0xD2511F53ull * c[0], p1 = 0xCD9E8D57ull * c[2];
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k0, n2 = static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k1;
    c[0] = n0;
    c[1] = static_cast<uint32_t>(p1);
    c[2] = n2;
    c[3] = static_cast<uint32_t>(p0);
  }
}

// u in (0, 1), exact in fp32: never 0 or 1, so the Gumbel noise is finite.
__device__ __forceinline__ float fd_philox_uniform(fd_sampling s, int position, int index) {
  uint32_t c[4] = {static_cast<uint32_t>(index), static_cast<uint32_t>(position), 0u, 0u};
  fd_philox4x32_10(c, s.seed_lo, s.seed_hi);
  return (static_cast<float>(c[0] >> 8) + 0.5f) * 5.9604644775390625e-08f;  // 2^-24
}

// Keys ordered as the fp32 values are (negatives' lower 31 bits flipped); every key is >= kLowestKey.
constexpr int kLowestKey = -2147483647 - 1;
__device__ __forceinline__ int fd_order_key(float x) {
  const int bits = __float_as_int(x);
  return bits < 0 ? bits ^ 0x7fffffff : bits;
}

// The unnormalised probability mass exp((x - max) / T) of the logits whose key is >= key.
__device__ __forceinline__ float fd_mass_from(const float* x, int n, int key, float max_x, float temperature) {
  float mass = 0.f;
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    if (fd_order_key(x[i]) >= key) mass += expf((x[i] - max_x) / temperature);
  return fd_block_sum(mass);
}

// Intervals one pass of fd_largest_key cuts the key range into: it shrinks about this many times per
// pass over the logits, so 32-bit keys take 8 passes instead of a bisection's 32.
constexpr int kSearchWays = 16;

// The largest key K in [lo, hi) whose measure, the sum of term(x) over the logits x with key >= K, is
// at least `need`, given that lo qualifies and hi does not (the measure only shrinks as K grows). Each
// pass measures the kSearchWays - 1 thresholds lo + step, lo + 2 step, ... inside (lo, hi) at once and
// keeps the interval from the last that qualifies to the next. A logit adds its term to the sum of
// every threshold at or below its key: (key - lo) / step of them. Counts (term 1) are exact in fp32
// below 2^24; sums run in a fixed order. Every thread holds the same lo and hi throughout.
template <class Term>
__device__ __forceinline__ int fd_largest_key(const float* x, int n, int lo, int hi, float need, Term term) {
  __shared__ float partial[kSearchWays - 1][kMaxWarpsPerBlock];
  while (static_cast<long long>(hi) - lo > 1) {
    const long long span = static_cast<long long>(hi) - lo;
    const int ways = span < kSearchWays ? static_cast<int>(span) : kSearchWays;
    const unsigned int step = static_cast<unsigned int>(span / ways);  // (ways - 1) steps stay below hi
    float sums[kSearchWays - 1];
#pragma unroll
    for (int j = 0; j < kSearchWays - 1; ++j) sums[j] = 0.f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      const int key = fd_order_key(x[i]);
      if (key < lo) continue;
      // key - lo < 2^32: exact in unsigned arithmetic
      const unsigned int passed = min(static_cast<unsigned int>(ways - 1),
                                      (static_cast<unsigned int>(key) - static_cast<unsigned int>(lo)) / step);
      if (passed == 0) continue;  // below every threshold: no term computed
      const float t = term(x[i]);
#pragma unroll
      for (int j = 0; j < kSearchWays - 1; ++j)
        if (static_cast<unsigned int>(j) < passed) sums[j] += t;
    }
    __syncthreads();  // partial[] may still be read by the previous pass
#pragma unroll
    for (int j = 0; j < kSearchWays - 1; ++j) {
      const float s = fd_warp_sum(sums[j]);
      if (fd_lane() == 0) partial[j][fd_warp()] = s;
    }
    __syncthreads();
    // The measure shrinks along the thresholds: the new interval is from the last one with enough to
    // the first without.
    int next_lo = lo, next_hi = hi;
    for (int j = ways - 2; j >= 0; --j) {
      float total = 0.f;
      for (int w = 0; w < fd_num_warps(); ++w) total += partial[j][w];
      const int threshold = static_cast<int>(lo + static_cast<long long>(step) * (j + 1));
      if (total >= need) {
        next_lo = threshold;
        break;
      }
      next_hi = threshold;
    }
    lo = next_lo;
    hi = next_hi;
  }
  return lo;
}
