// gemm_tc.cu — the tensor-core GEMM engine (gemm_tc.h): C (= or +=)
// op(A)·op(B) with operands rounded to tf32 or bf16 and FP32 sums.
//
// ---- shared memory ---------------------------------------------------------------------
// Each operand's k-tile is 128 rows (m for A, n for B) × KT values of k in
// 32-bit words: a bf16 word holds k = 2w (its lower half, as the mma
// fragments want it) and 2w + 1; a tf32 word holds k = w. KT = 32 (bf16) or
// 16 (tf32) is 16 words either way. A k-contiguous operand (below) is kept
// row by row, word [r][w] at r·kRowWords + w, rows padded to kRowWords = 20,
// so that a warp's fragment loads (rows g = lane/4 + const, words t = lane%4
// + const) fall in 32 distinct banks: 20·g + t mod 32 covers 0…31 for g < 8,
// t < 4. A row-contiguous one is kept as it lies in memory, word by word
// along k: [r][w] at w·kColWords + r, kColWords = 136, so that the same
// loads fall in banks 8·t + g (distinct again) and a thread's 4 consecutive
// rows are one 16-byte store. Two buffers of both operands: 40 KB.
//
// ---- fragments (PTX ISA: mma.m16n8k16 .bf16, mma.m16n8k8 .tf32) ------------------------
// With g = lane/4, t = lane%4 and a k-step of 8 words starting at word w0
// (16 bf16 or 8 tf32 values), both formats and both layouts read the same
// words [r][w]:
//   A (16×k, row)             a0 = [g][w0+t]  a1 = [g+8][w0+t]  a2 = [g][w0+4+t]  a3 = [g+8][w0+4+t]
//   B (k×8, col; rows are n)  b0 = [g][w0+t]  b1 = [g][w0+4+t]
//   C (16×8, FP32)            c0, c1 at (g, 2t), (g, 2t+1); c2, c3 at (g+8, 2t), (g+8, 2t+1)
// so one loop serves both; only the conversion and the mma instruction differ.
//
// ---- loaders -----------------------------------------------------------------------------
// An operand is read either k-contiguous (element (r, k) at p[r·ld + k]: A
// plain, B transposed) or row-contiguous (at p[k·ld + r]: A transposed, B
// plain), 4 consecutive values a thread (16-byte loads where the pointer and
// ld allow, else 4-byte), past the matrix as zeros. k-contiguous values are
// converted and stored 2 or 4 words at a time; row-contiguous ones 4 words
// (4 rows) at a time, a bf16 thread holding the same rows at k = 2w and
// 2w + 1 for its words (the first layout scattered them a half-word at a
// time, 16 lanes to a bank: 4–9% of the peak where an operand was
// row-contiguous; docs/gemm-large-tuning.md).
//
// ---- pipeline of the staged loop (tf32; bf16 below packs(); the packed loop: below) ------
// Tile kt+1 is loaded into registers while the mma loop works on tile kt
// from shared memory; then it is converted into the other buffer and one
// barrier orders both (every warp has finished reading that buffer, tile
// kt−1, before the barrier of the previous iteration).
#include "layers/gpu/gemm_tc.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/cuda_check.h"
#include "core/error.h"
#include "layers/gpu/cp_async.cuh"
#include "layers/gpu/epilogue_act.cuh"
#include "layers/gpu/gemm_large.h"
#include "layers/gpu/mma.cuh"
#include "layers/gpu/scratch.h"

namespace hpmc::gpu::gemm_tc {

namespace {

constexpr int kBM = 128, kBN = 128, kThreads = 256;
constexpr int kRowWords = 20;   // k-contiguous: a row's 16 words of data, 4 of padding
constexpr int kColWords = 136;  // row-contiguous: a word's 128 rows, 8 of padding
constexpr int kWarpM = 64, kWarpN = 32;  // 8 warps as 2 (m) × 4 (n)
constexpr int kMmaM = kWarpM / 16, kMmaN = kWarpN / 8;  // 4 × 4 mma tiles a warp
constexpr int kTileWords = kBM * kRowWords;
static_assert(16 * kColWords <= kTileWords, "both layouts fit a tile's buffer");

// Word [r][w] of a k-tile in shared memory (see above).
template <bool KCONT>
__device__ __forceinline__ uint32_t word(const uint32_t* s, int r, int w) {
  return KCONT ? s[r * kRowWords + w] : s[w * kColWords + r];
}

// Fragments by mma::ldmatrix_x4 (mma.cuh): lane l receives word l%4 of row
// l/4 of each 8×8 matrix, which is the fragments' [g][w0+t] for both formats.
// A k-contiguous tile's rows are 16-byte aligned (kRowWords·4 = 80 bytes),
// and the 8 rows of a matrix fall in 8 distinct 4-bank groups. trans (the
// packed loop's row-contiguous tiles): the matrices transposed, which is the
// fragment layout for a tile stored along k.
using mma::ldmatrix_x4;

// The operand formats (mma.cuh): rounding and the instruction.
struct Tf32 {
  static constexpr int KT = 16;  // k values per tile
  __device__ __forceinline__ static uint32_t one(float x) { return gpu::mma::tf32(x); }
  __device__ __forceinline__ static void mma(float (&d)[4], const uint32_t (&a)[4],
                                             const uint32_t (&b)[2]) {
    gpu::mma::tf32_m16n8k8(d, a, b);
  }
};

struct Bf16 {
  static constexpr int KT = 32;
  __device__ __forceinline__ static uint32_t pair(float lo, float hi) {
    return gpu::mma::bf16x2(lo, hi);
  }
  __device__ __forceinline__ static void mma(float (&d)[4], const uint32_t (&a)[4],
                                             const uint32_t (&b)[2]) {
    gpu::mma::bf16_m16n8k16(d, a, b);
  }
};

// One operand's share of a k-tile: PER = 128·KT / 256 values a thread, in
// groups of 4. KCONT: element (r, k) at p[r·ld + k]; else at p[k·ld + r].
template <class P, bool KCONT>
struct Operand {
  static constexpr int KT = P::KT, PER = kBM * KT / kThreads, G = PER / 4;
  static constexpr int KV = KT / 4;              // KCONT: float4s along k in a row
  static constexpr int RSTEP = kThreads / KV;    // KCONT: rows between a thread's groups
  static_assert(G == KT / 8, "both mappings give a thread the same number of groups");
  float v[PER];

  // Row-contiguous: the k (within the tile) of a thread's group i: tf32 one
  // k a group (word k); bf16 the two k of a word in groups 2p and 2p + 1.
  __device__ __forceinline__ static int kof(int i) {
    const int w = threadIdx.x / 32;
    return P::KT == Bf16::KT ? 2 * (w + (i >> 1) * 8) + (i & 1) : w + i * 8;
  }

  __device__ __forceinline__ void load(const float* __restrict__ p, int ld, int R, int K,
                                       int r0, int k0, bool vec) {
    const int t = threadIdx.x;
#pragma unroll
    for (int i = 0; i < G; ++i) {
      int r, k;
      if (KCONT) r = r0 + t / KV + i * RSTEP, k = k0 + (t % KV) * 4;
      else r = r0 + (t % 32) * 4, k = k0 + kof(i);
      const bool full = KCONT ? (r < R && k + 3 < K) : (k < K && r + 3 < R);
      const float* q = KCONT ? p + ((long long)r * ld + k) : p + ((long long)k * ld + r);
      if (vec && full) {
        const float4 f = __ldg(reinterpret_cast<const float4*>(q));
        v[4 * i] = f.x, v[4 * i + 1] = f.y, v[4 * i + 2] = f.z, v[4 * i + 3] = f.w;
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const bool ok = KCONT ? (r < R && k + j < K) : (k < K && r + j < R);
          v[4 * i + j] = ok ? __ldg(q + j) : 0.f;
        }
      }
    }
  }

  __device__ __forceinline__ void store(uint32_t* s) const {
    const int t = threadIdx.x;
#pragma unroll
    for (int i = 0; i < G; ++i) {
      if (KCONT) {
        const int row = t / KV + i * RSTEP, kk = (t % KV) * 4;  // kk: value index in the tile
        if constexpr (P::KT == Bf16::KT) {
          const uint2 w = make_uint2(Bf16::pair(v[4 * i], v[4 * i + 1]),
                                     Bf16::pair(v[4 * i + 2], v[4 * i + 3]));
          *reinterpret_cast<uint2*>(s + row * kRowWords + kk / 2) = w;
        } else {
          const uint4 w = make_uint4(Tf32::one(v[4 * i]), Tf32::one(v[4 * i + 1]),
                                     Tf32::one(v[4 * i + 2]), Tf32::one(v[4 * i + 3]));
          *reinterpret_cast<uint4*>(s + row * kRowWords + kk) = w;
        }
      } else {
        const int row = (t % 32) * 4;
        if constexpr (P::KT == Bf16::KT) {
          if (i % 2 == 0) {  // groups i (k = 2w) and i + 1 (k = 2w + 1) make word w
            const float* lo = v + 4 * i;
            const float* hi = v + 4 * i + 4;
            const uint4 q = make_uint4(Bf16::pair(lo[0], hi[0]), Bf16::pair(lo[1], hi[1]),
                                       Bf16::pair(lo[2], hi[2]), Bf16::pair(lo[3], hi[3]));
            *reinterpret_cast<uint4*>(s + (kof(i) / 2) * kColWords + row) = q;
          }
        } else {
          const uint4 q = make_uint4(Tf32::one(v[4 * i]), Tf32::one(v[4 * i + 1]),
                                     Tf32::one(v[4 * i + 2]), Tf32::one(v[4 * i + 3]));
          *reinterpret_cast<uint4*>(s + kof(i) * kColWords + row) = q;
        }
      }
    }
  }
};

// C (+)= a warp's accumulators (its 64×32 sub-tile at rows r0…, columns
// c0…), 16 rows at a time, through the epilogue `ep` (gemm_tc.h): with
// accumulate or a mask, all of a group's 16 loads of C (or of the bias) and
// of the mask are issued before the first store (one load latency per
// group, not one per element: a k = 64 weight gradient of 8192×784 spent
// 0.07 ms here with the loads one after another). A lane's two consecutive
// columns go as one 8-byte access where C allows it (pair: C 8-byte
// aligned, ldc even; mpair: the same for the mask). EPI: the epilogue's
// activation and mask apply (an instantiation of its own, so that the plain
// stores stay as they were); else only its bias.
template <bool EPI>
__device__ __forceinline__ void store_acc(const float (&acc)[kMmaM][kMmaN][4],
                                          float* __restrict__ C, int ldc, int M, int N, int r0,
                                          int c0, int g, int tq, bool accumulate, bool pair,
                                          const Epilogue& ep, bool mpair) {
#pragma unroll
  for (int i = 0; i < kMmaM; ++i) {
    float old[kMmaN][4], keep[kMmaN][4];
#pragma unroll
    for (int j = 0; j < kMmaN; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = r0 + i * 16 + g + 8 * h, col = c0 + j * 8 + 2 * tq;
        const float* o = C + (long long)row * ldc + col;
        float2 v = make_float2(0.f, 0.f), k = make_float2(1.f, 1.f);
        if (ep.bias) {
          if (col < N) v.x = ep.bias[col];
          if (col + 1 < N) v.y = ep.bias[col + 1];
        } else if (accumulate && row < M) {
          if (pair && col + 1 < N) v = *reinterpret_cast<const float2*>(o);
          else if (col < N) v.x = o[0], v.y = col + 1 < N ? o[1] : 0.f;
        }
        if (EPI && ep.mask && row < M) {
          const float* q = ep.mask + (long long)row * ep.ldm + col;
          if (mpair && col + 1 < N) k = __ldg(reinterpret_cast<const float2*>(q));
          else if (col < N) k.x = __ldg(q), k.y = col + 1 < N ? __ldg(q + 1) : 0.f;
        }
        old[j][2 * h] = v.x, old[j][2 * h + 1] = v.y;
        keep[j][2 * h] = k.x, keep[j][2 * h + 1] = k.y;
      }
#pragma unroll
    for (int j = 0; j < kMmaN; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = r0 + i * 16 + g + 8 * h, col = c0 + j * 8 + 2 * tq;
        if (row >= M) continue;
        float* o = C + (long long)row * ldc + col;
        float2 v = make_float2(old[j][2 * h] + acc[i][j][2 * h],
                               old[j][2 * h + 1] + acc[i][j][2 * h + 1]);
        if constexpr (EPI) {
          v.x = apply_relu_family(ep.act, v.x);
          v.y = apply_relu_family(ep.act, v.y);
          if (ep.mask) {
            v.x = keep[j][2 * h] > 0.f ? v.x : 0.f;
            v.y = keep[j][2 * h + 1] > 0.f ? v.y : 0.f;
          }
        }
        if (pair && col + 1 < N) {
          *reinterpret_cast<float2*>(o) = v;
        } else {
          if (col < N) o[0] = v.x;
          if (col + 1 < N) o[1] = v.y;
        }
      }
  }
}

// Whether the mask's pairs of columns can be read as one 8-byte load.
bool mask_pairs(const Epilogue& ep) {
  return ep.mask && ep.ldm % 2 == 0 && (reinterpret_cast<uintptr_t>(ep.mask) & 7u) == 0;
}

// C[M×N] (= or +=) op(A)·op(B); block (x, y, z) computes rows y·128…, columns
// x·128… over k-tiles z·tps … z·tps + tps − 1 (all of them without split-K),
// into C + z·split_stride (the split-K workspace's slice z).
template <class P, bool TA, bool TB, bool EPI>
__global__ void __launch_bounds__(kThreads, 2)
    gemm_tc_kernel(int M, int N, int K, const float* __restrict__ A, int lda, bool vec_a,
                   const float* __restrict__ B, int ldb, bool vec_b, float* __restrict__ C,
                   int ldc, bool accumulate, int tps, long long split_stride,
                   const __grid_constant__ Epilogue ep, bool mpair) {
  __shared__ __align__(16) uint32_t smem[2][2][kTileWords];  // [buffer][A, B]
  const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
  C += blockIdx.z * split_stride;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int wm = warp / 4, wn = warp % 4, g = lane / 4, tq = lane % 4;

  Operand<P, !TA> oa;  // A plain is k-contiguous
  Operand<P, TB> ob;   // B transposed is k-contiguous
  float acc[kMmaM][kMmaN][4];
#pragma unroll
  for (int i = 0; i < kMmaM; ++i)
#pragma unroll
    for (int j = 0; j < kMmaN; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

  const int kt0 = blockIdx.z * tps;
  const int ktiles = max(0, min((K + P::KT - 1) / P::KT - kt0, tps));  // this slice's
  if (ktiles > 0) {
    oa.load(A, lda, M, K, m0, kt0 * P::KT, vec_a);
    ob.load(B, ldb, N, K, n0, kt0 * P::KT, vec_b);
    oa.store(smem[0][0]);
    ob.store(smem[0][1]);
  }
  __syncthreads();
  for (int kt = 0; kt < ktiles; ++kt) {
    const int cur = kt & 1;
    const bool more = kt + 1 < ktiles;
    if (more) {
      oa.load(A, lda, M, K, m0, (kt0 + kt + 1) * P::KT, vec_a);
      ob.load(B, ldb, N, K, n0, (kt0 + kt + 1) * P::KT, vec_b);
    }
    const uint32_t* sa = smem[cur][0];
    const uint32_t* sb = smem[cur][1];
#pragma unroll
    for (int w0 = 0; w0 < 16; w0 += 8) {  // two k-steps of 8 words
      uint32_t a[kMmaM][4], b[kMmaN][2];
      // k-contiguous operands by ldmatrix: for A, matrices (rows +0..7 | +8..15)
      // × (words w0.. | w0+4..), lane l addressing row l%16 of words
      // w0 + 4·(l/16); for B, two n-tiles at once, (words w0.. | w0+4..) ×
      // (tile j | j+1), lane l addressing row l%8 + 8·(l/16) of words
      // w0 + 4·((l/8)%2). Row-contiguous ones word by word.
#pragma unroll
      for (int i = 0; i < kMmaM; ++i) {
        const int r = wm * kWarpM + i * 16;
        if constexpr (!TA) {
          ldmatrix_x4(a[i], sa + (r + lane % 16) * kRowWords + w0 + 4 * (lane / 16));
        } else {
          a[i][0] = word<false>(sa, r + g, w0 + tq);
          a[i][1] = word<false>(sa, r + g + 8, w0 + tq);
          a[i][2] = word<false>(sa, r + g, w0 + tq + 4);
          a[i][3] = word<false>(sa, r + g + 8, w0 + tq + 4);
        }
      }
#pragma unroll
      for (int j = 0; j < kMmaN; j += 2) {
        const int r = wn * kWarpN + j * 8;
        if constexpr (TB) {
          uint32_t q[4];
          ldmatrix_x4(q, sb + (r + lane % 8 + 8 * (lane / 16)) * kRowWords + w0 +
                             4 * ((lane / 8) % 2));
          b[j][0] = q[0], b[j][1] = q[1], b[j + 1][0] = q[2], b[j + 1][1] = q[3];
        } else {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            b[j + h][0] = word<false>(sb, r + 8 * h + g, w0 + tq);
            b[j + h][1] = word<false>(sb, r + 8 * h + g, w0 + tq + 4);
          }
        }
      }
#pragma unroll
      for (int i = 0; i < kMmaM; ++i)
#pragma unroll
        for (int j = 0; j < kMmaN; ++j) P::mma(acc[i][j], a[i], b[j]);
    }
    if (more) {
      oa.store(smem[cur ^ 1][0]);
      ob.store(smem[cur ^ 1][1]);
    }
    __syncthreads();
  }

  store_acc<EPI>(acc, C, ldc, M, N, m0 + wm * kWarpM, n0 + wn * kWarpN, g, tq, accumulate,
                 ldc % 2 == 0 && (reinterpret_cast<uintptr_t>(C) & 7u) == 0, ep, mpair);
}

// ---- bf16: packed operands, a cp.async pipeline, ldmatrix -----------------------------
//
// In bf16 each operand is first packed (pack_bf16_kernel): rounded to bf16
// once, in its own layout, each row padded with zeros to a multiple of 8
// values (ldp), so that every 16-byte chunk of 8 values is aligned and lies
// wholly inside or outside the matrix. Half the bytes of FP32 reach the SMs,
// and they go straight to shared memory by cp.async, kStages k-tiles deep,
// with no registers in between (the staged loop above loads a k-tile of
// FP32 values into registers and rounds it there: about 140 TFLOP/s at
// 4096³ and 80 at 1024³, stalled on those loads; docs/gemm-large-tuning.md).
//
// A stage holds both operands' k-tiles of kBK16 = 32 values, 8 KB each:
//   k-contiguous (A plain, B transposed): 128 rows × 4 chunks, row r's chunk
//     c at byte 64·r + 16·(c ^ ((r/2) % 4)); the 8 rows one ldmatrix reads
//     (any 8 consecutive from a multiple of 8) fall in 8 distinct 16-byte
//     bank groups;
//   row-contiguous (A transposed, B plain): 32 rows (k) × 16 chunks, chunk c
//     of row k at 256·k + 16·(c ^ (k % 8)): the same, for ldmatrix.trans.
// Fragments come by ldmatrix.x4 (.trans for row-contiguous tiles), which
// hands lane l the PTX fragment layout (see the table at the top) directly.
constexpr int kBK16 = 32, kStages = 3;
constexpr int kTileBytes = kBM * kBK16 * 2;  // 8 KB; both layouts
static_assert(kStages * 2 * kTileBytes <= 48 * 1024, "static shared memory");

__device__ __forceinline__ int kcont_off(int r, int c) {
  return 64 * r + 16 * (c ^ ((r >> 1) & 3));
}
__device__ __forceinline__ int rcont_off(int k, int c) { return 256 * k + 16 * (c ^ (k & 7)); }

// One operand's k-tile [k0, k0 + 32) of rows [r0, r0 + 128) into a stage:
// 512 chunks, two a thread. KCONT: row r at p + r·ldp (R rows), else k row
// at p + k·ldp (K rows); chunks past ldp or the rows read nothing and are
// zeros.
template <bool KCONT>
__device__ __forceinline__ void load_tile(unsigned char* s, const uint16_t* __restrict__ p,
                                          int ldp, int R, int K, int r0, int k0) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int idx = threadIdx.x + kThreads * i;
    int off;
    const uint16_t* q = p;
    bool ok;
    if (KCONT) {
      const int r = idx >> 2, c = idx & 3;
      ok = r0 + r < R && k0 + 8 * c < ldp;
      if (ok) q = p + (long long)(r0 + r) * ldp + k0 + 8 * c;
      off = kcont_off(r, c);
    } else {
      const int k = idx >> 4, c = idx & 15;
      ok = k0 + k < K && r0 + 8 * c < ldp;
      if (ok) q = p + (long long)(k0 + k) * ldp + r0 + 8 * c;
      off = rcont_off(k, c);
    }
    copy16(reinterpret_cast<float*>(s + off), reinterpret_cast<const float*>(q), ok);
  }
}

// C[M×N] (= or +=) op(A)·op(B) from packed bf16 operands (lda, ldb: their
// ldp); block (x, y, z) as gemm_tc_kernel's.
template <bool TA, bool TB, bool EPI>
__global__ void __launch_bounds__(kThreads, 2)
    gemm_bf16_kernel(int M, int N, int K, const uint16_t* __restrict__ A, int lda,
                     const uint16_t* __restrict__ B, int ldb, float* __restrict__ C, int ldc,
                     bool accumulate, int tps, long long split_stride,
                     const __grid_constant__ Epilogue ep, bool mpair) {
  __shared__ __align__(128) unsigned char smem[kStages][2][kTileBytes];  // [stage][A, B]
  const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
  C += blockIdx.z * split_stride;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int wm = warp / 4, wn = warp % 4, g = lane / 4, tq = lane % 4;
  const int kt0 = blockIdx.z * tps;
  const int nt = max(0, min((K + kBK16 - 1) / kBK16 - kt0, tps));

  float acc[kMmaM][kMmaN][4];
#pragma unroll
  for (int i = 0; i < kMmaM; ++i)
#pragma unroll
    for (int j = 0; j < kMmaN; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

  const auto issue = [&](int t) {  // k-tile t of the slice into stage t % kStages
    const int k0 = (kt0 + t) * kBK16;
    load_tile<!TA>(smem[t % kStages][0], A, lda, M, K, m0, k0);
    load_tile<TB>(smem[t % kStages][1], B, ldb, N, K, n0, k0);
  };
#pragma unroll
  for (int t = 0; t < kStages - 1; ++t) {
    if (t < nt) issue(t);
    copy_commit();
  }
  for (int t = 0; t < nt; ++t) {
    copy_wait<kStages - 2>();  // tile t has landed (this thread's part)
    __syncthreads();           // everyone's part; everyone is done with tile t − 1's stage
    if (t + kStages - 1 < nt) issue(t + kStages - 1);
    copy_commit();
    const unsigned char* sa = smem[t % kStages][0];
    const unsigned char* sb = smem[t % kStages][1];
#pragma unroll
    for (int ks = 0; ks < 2; ++ks) {  // two k-steps of 16
      uint32_t a[kMmaM][4], b[kMmaN][2];
#pragma unroll
      for (int i = 0; i < kMmaM; ++i) {
        const int r = wm * kWarpM + i * 16;
        if constexpr (!TA)  // rows r + l%16, chunk 2ks + l/16
          ldmatrix_x4(a[i], sa + kcont_off(r + lane % 16, 2 * ks + lane / 16), false);
        else  // k rows 16ks + l%8 + 8·(l/16), chunk r/8 + (l/8)%2
          ldmatrix_x4(a[i], sa + rcont_off(16 * ks + lane % 8 + 8 * (lane / 16),
                                           r / 8 + (lane / 8) % 2),
                      true);
      }
#pragma unroll
      for (int j = 0; j < kMmaN; j += 2) {
        const int r = wn * kWarpN + j * 8;
        uint32_t q[4];
        if constexpr (TB)  // n rows r + l%8 + 8·(l/16), chunk 2ks + (l/8)%2
          ldmatrix_x4(q, sb + kcont_off(r + lane % 8 + 8 * (lane / 16), 2 * ks + (lane / 8) % 2),
                      false);
        else  // k rows 16ks + l%8 + 8·((l/8)%2), chunk r/8 + l/16
          ldmatrix_x4(q,
                      sb + rcont_off(16 * ks + lane % 8 + 8 * ((lane / 8) % 2), r / 8 + lane / 16),
                      true);
        b[j][0] = q[0], b[j][1] = q[1], b[j + 1][0] = q[2], b[j + 1][1] = q[3];
      }
#pragma unroll
      for (int i = 0; i < kMmaM; ++i)
#pragma unroll
        for (int j = 0; j < kMmaN; ++j) Bf16::mma(acc[i][j], a[i], b[j]);
    }
  }
  copy_wait<0>();
  store_acc<EPI>(acc, C, ldc, M, N, m0 + wm * kWarpM, n0 + wn * kWarpN, g, tq, accumulate,
                 ldc % 2 == 0 && (reinterpret_cast<uintptr_t>(C) & 7u) == 0, ep, mpair);
}

// dst[r·ldp + c] = bf16(src[r·ld + c]) for c < cols, 0 for cols ≤ c < ldp:
// one thread per 8 values (one 16-byte store).
__global__ void __launch_bounds__(256)
    pack_bf16_kernel(const float* __restrict__ src, int rows, int cols, int ld, bool vec,
                     uint16_t* __restrict__ dst, int ldp) {
  const int per_row = ldp / 8;
  const long long total = (long long)rows * per_row;
  for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total;
       e += (long long)gridDim.x * blockDim.x) {
    const int r = int(e / per_row), c = int(e - (long long)r * per_row) * 8;
    const float* q = src + (long long)r * ld + c;
    float v[8];
    if (vec && c + 8 <= cols) {
      const float4 x = __ldg(reinterpret_cast<const float4*>(q));
      const float4 y = __ldg(reinterpret_cast<const float4*>(q) + 1);
      v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w, v[4] = y.x, v[5] = y.y, v[6] = y.z,
      v[7] = y.w;
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = c + j < cols ? __ldg(q + j) : 0.f;
    }
    const uint4 w = make_uint4(Bf16::pair(v[0], v[1]), Bf16::pair(v[2], v[3]),
                               Bf16::pair(v[4], v[5]), Bf16::pair(v[6], v[7]));
    *reinterpret_cast<uint4*>(dst + (long long)r * ldp + c) = w;
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// Whether the epilogue's activation or mask apply (the kernels' EPI).
bool full_epilogue(const Epilogue& ep) { return !ep.act.is_none() || ep.mask; }

template <class P, bool EPI>
auto staged_kernel(bool ta, bool tb) {
  return ta ? (tb ? gemm_tc_kernel<P, true, true, EPI> : gemm_tc_kernel<P, true, false, EPI>)
            : (tb ? gemm_tc_kernel<P, false, true, EPI> : gemm_tc_kernel<P, false, false, EPI>);
}

template <class P>
void launch(bool ta, bool tb, dim3 grid, int m, int n, int k, const float* a, int lda, bool va,
            const float* b, int ldb, bool vb, float* c, int ldc, bool acc, int tps,
            long long stride, const Epilogue& ep) {
  auto kernel =
      full_epilogue(ep) ? staged_kernel<P, true>(ta, tb) : staged_kernel<P, false>(ta, tb);
  kernel<<<grid, kThreads>>>(m, n, k, a, lda, va, b, ldb, vb, c, ldc, acc, tps, stride, ep,
                             mask_pairs(ep));
}

// Packs into `buf` (grown as needed).
const void* pack_into(DeviceScratch& buf, const float* src, int rows, int cols, int ld) {
  void* dst = buf.floats((packed_bytes(rows, cols) + 3) / 4);
  pack_bf16(src, rows, cols, ld, dst);
  return dst;
}

DeviceScratch& packed(int which) {
  static DeviceScratch bufs[2];
  return bufs[which];
}

}  // namespace

const char* operands_name(Operands p) { return p == Operands::kTf32 ? "tf32" : "bf16"; }

int splits_for(Operands p, long long m, long long n, long long k) {
  return gemm_large::splits_for(m, n, k, p == Operands::kTf32 ? Tf32::KT : Bf16::KT);
}

namespace {

// The checks and the split-K plan both entry points share: false when there
// is nothing to do.
struct Plan {
  dim3 grid;
  int tps = 1;
  float* out = nullptr;  // C, or the split workspace
  int ldo = 0;
  long long stride = 0;
  bool acc = false;
};

bool plan(Operands p, int m, int n, int k, float* c, int ldc, bool accumulate, int splits,
          const Epilogue& ep, Plan& pl) {
  if (splits < 0 || splits > 65535)
    throw RuntimeError(str("tensor-core gemm (", operands_name(p), "): split count ", splits,
                           " outside [0, 65535]"));
  if (ep.bias && accumulate)
    throw RuntimeError(str("tensor-core gemm (", operands_name(p),
                           "): a bias with accumulate (C += A·B + bias)"));
  if (!ep.act.is_none() && ep.act.kind != ActKind::kRelu && ep.act.kind != ActKind::kLeakyRelu)
    throw RuntimeError(str("tensor-core gemm (", operands_name(p), "): ", activation_text(ep.act),
                           " in the epilogue (it takes relu and leaky_relu)"));
  if (ep.mask && ep.ldm < n)
    throw RuntimeError(str("tensor-core gemm (", operands_name(p), "): mask row stride ", ep.ldm,
                           " < n=", n));
  if (m == 0 || n == 0 || (k == 0 && accumulate && ep.is_plain())) return false;
  int dev = 0, major = 0;
  HPMC_CUDA_CHECK(cudaGetDevice(&dev));
  HPMC_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  if (major < 8)
    throw RuntimeError(str("tensor-core gemm (", operands_name(p), "): device ", dev,
                           " has compute capability ", major,
                           ".x; tf32 and bf16 tensor cores need 8.0 or newer"));
  const long long gx = (n + kBN - 1) / kBN, gy = (m + kBM - 1) / kBM;
  if (gy > 65535)
    throw RuntimeError(str("tensor-core gemm: m=", m, " needs ", gy,
                           " row blocks, more than one launch takes (65535)"));
  // Split-K: contiguous slices of k-tiles, none empty (as gemm_large).
  const int kt = p == Operands::kTf32 ? Tf32::KT : Bf16::KT;
  const long long ktiles = (k + kt - 1) / kt;
  if (splits == 0) splits = splits_for(p, m, n, k);
  splits = int(std::max(1ll, std::min<long long>(splits, ktiles)));
  const long long tps = std::max(1ll, (ktiles + splits - 1) / splits);
  splits = int(std::max(1ll, (ktiles + tps - 1) / tps));
  pl.grid = dim3(unsigned(gx), unsigned(gy), unsigned(splits));
  pl.tps = int(tps);
  pl.out = c, pl.ldo = ldc, pl.stride = 0, pl.acc = accumulate;
  if (splits > 1) {  // each slice written whole, then summed in double, slice 0 first
    pl.out = gemm_large::splitk_workspace(splits, m, n);
    pl.ldo = int(gemm_large::splitk_ldw(n));
    pl.stride = pl.ldo * (long long)m;
    pl.acc = false;
  }
  return true;
}

void finish(const Plan& pl, int m, int n, float* c, int ldc, bool accumulate,
            const Epilogue& ep) {
  HPMC_CUDA_LAUNCH_CHECK("tensor-core gemm");
  if (pl.grid.z > 1)
    gemm_large::splitk_sum(pl.out, int(pl.grid.z), m, n, c, ldc, accumulate, ep.bias, ep.act,
                           ep.mask, ep.ldm);
}

// The slices' kernels run no epilogue with split-K: the sum applies it.
Epilogue slice_epilogue(const Plan& pl, const Epilogue& ep) {
  return pl.grid.z > 1 ? Epilogue{} : ep;
}

void check_sizes(Operands p, bool trans_a, bool trans_b, int m, int n, int k, int lda, int ldb,
                 int ldc) {
  constexpr int kMax = 1 << 30;
  if (m < 0 || n < 0 || k < 0 || m >= kMax || n >= kMax || k >= kMax)
    throw RuntimeError(str("tensor-core gemm (", operands_name(p), "): size m=", m, " n=", n,
                           " k=", k, " outside [0, 2^30)"));
  if (lda < std::max(1, trans_a ? m : k) || ldb < std::max(1, trans_b ? k : n) ||
      ldc < std::max(1, n))
    throw RuntimeError(str("tensor-core gemm (", operands_name(p),
                           "): leading dimension too small (m=", m, " n=", n, " k=", k,
                           " lda=", lda, " ldb=", ldb, " ldc=", ldc, ", trans_a=", trans_a,
                           " trans_b=", trans_b, ")"));
}

template <bool EPI>
auto packed_kernel(bool ta, bool tb) {
  return ta ? (tb ? gemm_bf16_kernel<true, true, EPI> : gemm_bf16_kernel<true, false, EPI>)
            : (tb ? gemm_bf16_kernel<false, true, EPI> : gemm_bf16_kernel<false, false, EPI>);
}

void run_bf16(const Plan& pl, bool trans_a, bool trans_b, int m, int n, int k, const void* a,
              const void* b, const Epilogue& ep) {
  const auto* pa = static_cast<const uint16_t*>(a);
  const auto* pb = static_cast<const uint16_t*>(b);
  const int lpa = packed_ld(trans_a ? m : k), lpb = packed_ld(trans_b ? k : n);
  const dim3 g = pl.grid;
  float* o = pl.out;
  const int ldo = pl.ldo, t = pl.tps;
  const long long st = pl.stride;
  const bool acc = pl.acc;
  const Epilogue e = slice_epilogue(pl, ep);
  auto kernel = full_epilogue(e) ? packed_kernel<true>(trans_a, trans_b)
                                 : packed_kernel<false>(trans_a, trans_b);
  kernel<<<g, kThreads>>>(m, n, k, pa, lpa, pb, lpb, o, ldo, acc, t, st, e, mask_pairs(e));
}

}  // namespace

bool packs(long long m, long long n, long long k) { return gemm_large::applies(m, n, k); }

int packed_ld(int cols) { return std::max(8, (cols + 7) / 8 * 8); }

size_t packed_bytes(int rows, int cols) { return size_t(rows) * size_t(packed_ld(cols)) * 2; }

void pack_bf16(const float* src, int rows, int cols, int ld, void* dst) {
  if (rows <= 0) return;
  const int ldp = packed_ld(cols);
  const long long threads = (long long)rows * ldp / 8;
  const unsigned blocks = unsigned(std::min<long long>((threads + 255) / 256, 8192));
  pack_bf16_kernel<<<blocks, 256>>>(src, rows, cols, ld, aligned16(src) && ld % 4 == 0,
                                    static_cast<uint16_t*>(dst), ldp);
  HPMC_CUDA_LAUNCH_CHECK("tensor-core gemm: bf16 packing");
}

void gemm_bf16(bool trans_a, bool trans_b, int m, int n, int k, const void* a, const void* b,
               float* c, int ldc, bool accumulate, int splits, const Epilogue& ep) {
  check_sizes(Operands::kBf16, trans_a, trans_b, m, n, k, trans_a ? m : k, trans_b ? k : n, ldc);
  Plan pl;
  if (!plan(Operands::kBf16, m, n, k, c, ldc, accumulate, splits, ep, pl)) return;
  run_bf16(pl, trans_a, trans_b, m, n, k, a, b, ep);
  finish(pl, m, n, c, ldc, accumulate, ep);
}

void gemm(Operands p, bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda,
          const float* b, int ldb, float* c, int ldc, bool accumulate, int splits,
          const Epilogue& ep) {
  check_sizes(p, trans_a, trans_b, m, n, k, lda, ldb, ldc);
  Plan pl;
  if (!plan(p, m, n, k, c, ldc, accumulate, splits, ep, pl)) return;
  const Epilogue e = slice_epilogue(pl, ep);
  if (p == Operands::kTf32) {
    const bool va = aligned16(a) && lda % 4 == 0, vb = aligned16(b) && ldb % 4 == 0;
    launch<Tf32>(trans_a, trans_b, pl.grid, m, n, k, a, lda, va, b, ldb, vb, pl.out, pl.ldo,
                 pl.acc, pl.tps, pl.stride, e);
  } else if (!packs(m, n, k)) {
    const bool va = aligned16(a) && lda % 4 == 0, vb = aligned16(b) && ldb % 4 == 0;
    launch<Bf16>(trans_a, trans_b, pl.grid, m, n, k, a, lda, va, b, ldb, vb, pl.out, pl.ldo,
                 pl.acc, pl.tps, pl.stride, e);
  } else {
    const void* pa = pack_into(packed(0), a, trans_a ? k : m, trans_a ? m : k, lda);
    const void* pb = pack_into(packed(1), b, trans_b ? n : k, trans_b ? k : n, ldb);
    run_bf16(pl, trans_a, trans_b, m, n, k, pa, pb, ep);
  }
  finish(pl, m, n, c, ldc, accumulate, ep);
}

}  // namespace hpmc::gpu::gemm_tc
