// gemm_large.cu — the FP32 GEMM engine for large products (gemm_large.h):
// C[m×n] (= or +=) op(A)·op(B), row-major, FFMA only.
//
// ---- block and thread tiles ------------------------------------------------------
// A block computes a BM×BN = 128×128 tile of C with 256 threads: 8 warps as
// WGM × WGN = 4 × 2, each warp a 32×64 sub-tile, its 32 lanes as LM × LN =
// 4 × 8 (lanes along n). Thread (lm, ln) of warp (wm, wn) owns the 8×8
// accumulators at rows   wm·32 + g·16 + lm·4 + i   (g < 2, i < 4)
//                 columns wn·64 + h·32 + ln·4 + j   (h < 2, j < 4).
// At each k it reads its A fragment as 2 float4 and its B fragment as 2
// float4 from shared memory: a warp's A read touches 4 consecutive float4
// (one wavefront, broadcast to 8 lanes each), its B read 8 consecutive float4
// (one wavefront, no conflict). 4 LDS.128 per 64 FFMA.
// The fragments of k+1 are read while the FFMAs of k run (two register sets).
//
// ---- shared memory and the loaders -------------------------------------------------
// Per stage: As[BK][BM+4] (k-major: As[k][m]) and Bs[BK][BN+4] (Bs[k][n]).
// Every operand is an R×K matrix "rows × k" (A: rows = m; B: rows = n), stored
// either k-contiguous (element (r, k) at p[r·ld + k]: A plain, B transposed)
// or row-contiguous (at p[k·ld + r]: A transposed, B plain). Three loaders
// copy a tile with cp.async, straight into shared memory:
//   KLoader   k-contiguous: 4-byte copies, transposed on the way. The lanes of
//             a warp cover 8 k × 4 rows (32 bytes of each of 4 rows from global
//             memory; in shared memory banks 4·k + r: all 32 distinct with the
//             row stride BM+4).
//   RVecLoader row-contiguous, p 16-byte aligned and ld % 4 == 0: 16-byte
//             copies of 4 consecutive rows; the piece that straddles the last
//             row copies only its valid bytes (cp.async zero-fills the rest).
//   RLoader   row-contiguous otherwise: 4-byte copies, consecutive lanes on
//             consecutive rows.
// Rows past the matrix (the last block tile of m or n): the k-contiguous and
// 4-byte loaders read the last row again (the clamp is set up once), since a
// row of A only reaches the same row of C, and a row of B the same column,
// which the epilogue never stores; RVecLoader zero-fills them. The k-tail
// (k past K in the last k-tile) is zero-filled: it reaches every output.
// Only the k-tile holding K's end takes the per-element k tests (a
// block-uniform branch), so the main loop's copies carry no predicates.
//
// ---- pipeline (STAGES buffers; tile i in stage i mod STAGES) -------------------------
//   prologue: issue tiles 0 … S−2, one commit group each (empty past the end);
//             wait for tile 0, barrier; read the fragment of k = 0.
//   tile i, at its first k: issue tile i+S−1 into stage (i−1) mod S, commit;
//   at its last k (BK−1): wait until at most S−2 groups are pending (tile i+1
//             has landed), barrier, read the fragment of tile i+1's k = 0; FFMA.
// The barrier at tile i−1's last k comes after every thread's last read of
// tile i−1's stage (its k = BK−1 fragment, read at k = BK−2) and before tile
// i's first k, which overwrites that stage with tile i+S−1; the same barrier
// makes tile i visible. One barrier per k-tile orders both.
// The k-tile is one unrolled body: 512 FFMAs (BK 8) or 1,024 (BK 16, 16 KB of
// instructions). Both hold 128 registers (two blocks per SM) without spills.
//
// ---- epilogue and split-K ---------------------------------------------------------
// Without split: C[m][n] = acc (or C + acc), float4 stores where ldc % 4 == 0
// and C is 16-byte aligned, else scalar; only m < M, n < N are written.
// With split (blockIdx.z = slice, a contiguous range of k-tiles): each slice
// writes its whole partial tile to ws[z][m][n] (row stride N rounded up to 4;
// zeros for a slice without k-tiles) and splitk_sum_kernel writes
// C = (C +) Σ_z ws[z] summed in double, z ascending, rounded once.
//
// Each accumulator is fma(a_k, b_k, acc) over its k in ascending order from
// 0; the configuration changes no bit of an unsplit result.
#include "layers/gpu/gemm_large.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "core/cuda_check.h"
#include "core/error.h"
#include "layers/gpu/cp_async.cuh"
#include "layers/gpu/epilogue_act.cuh"
#include "layers/gpu/scratch.h"

namespace hpmc::gpu::gemm_large {

namespace {

// ---- configuration ---------------------------------------------------------------

template <int BK_, int STAGES_>
struct Cfg {
  static constexpr int BM = 128, BN = 128, BK = BK_, STAGES = STAGES_;
  static constexpr int WGM = 4, WGN = 2, NT = 32 * WGM * WGN;  // 256 threads
  static constexpr int LM = 4, LN = 8;                         // lanes along n
  static constexpr int WT_M = BM / WGM, WT_N = BN / WGN;       // 32 × 64 per warp
  static constexpr int TM = WT_M / LM, TN = WT_N / LN;         // 8 × 8 per thread
  static constexpr int GM = TM / 4, GN = TN / 4;
  static constexpr int SA = BM + 4, SB = BN + 4;  // shared row strides (floats)
  static constexpr int A_STAGE = BK * SA, B_STAGE = BK * SB;
  static constexpr size_t kSmemBytes = size_t(STAGES) * (A_STAGE + B_STAGE) * sizeof(float);
  static_assert(BK % 8 == 0, "the loaders' lanes cover 8 k");
  static_assert(TM % 4 == 0 && TN % 4 == 0, "float4 fragments");
  static_assert(STAGES >= 2, "at least double-buffered");
};
using CfgK8 = Cfg<8, 4>;    // 33 KB of shared memory a block
using CfgK16 = Cfg<16, 3>;  // 50 KB

constexpr int kPlanSMs = 132;    // split plans assume an H100's SM count on every device
constexpr int kBlocksPerSM = 2;  // __launch_bounds__ minimum below
constexpr int kMaxSplits = 16;
constexpr int kMinTilesPerSplit = 8;

// ---- loaders: one ROWS × BK tile of an R × K operand into s[k][row] (row stride S) -----
//
// Each keeps only its thread's first source address and a few ints (the
// 64 accumulators and two fragment sets leave about 30 registers); the
// matrix pointer, ld and K come from the kernel parameters at each issue.
// issue<FULL>(s, k0, p, ld, K): the tile at k0; FULL: all of k0 … k0+BK−1 < K.

enum class Kind { kK, kRVec, kR };  // k-contiguous; row-contiguous 16-byte; row-contiguous 4-byte

// k-contiguous: element (r, k) at p[r·ld + k]. Thread t: k offsets t mod 8 (+8·h),
// rows t/8 + j·(NT/8). Rows j > jlast (past the matrix) read row jlast's again.
template <class C, int ROWS, int S>
struct KLoader {
  static constexpr int RSTEP = C::NT / 8, RJ = ROWS / RSTEP, KH = C::BK / 8;
  static_assert(ROWS % RSTEP == 0, "whole row groups");
  const float* base;  // row min(rowbase + t/8, R−1), k offset t mod 8
  int kq, jlast;

  __device__ __forceinline__ KLoader(const float* p, int ld, int R, int rowbase, int tid)
      : kq(tid % 8) {
    const int r = rowbase + tid / 8;
    base = p + ((long long)min(r, R - 1) * ld + kq);
    jlast = r < R ? min(RJ - 1, (R - 1 - r) / RSTEP) : 0;
  }
  template <bool FULL>
  __device__ __forceinline__ void issue(float* s, int k0, const float* p, int ld, int K) const {
    const long long stride = (long long)RSTEP * ld;
    const float* rp = base + k0;
#pragma unroll
    for (int j = 0; j < RJ; ++j) {
      if (j > 0 && j <= jlast) rp += stride;
#pragma unroll
      for (int h = 0; h < KH; ++h) {
        float* d = s + (h * 8 + kq) * S + tid8() + j * RSTEP;
        if (FULL) {
          copy4(d, rp + h * 8, true);
        } else {
          const bool ok = k0 + h * 8 + kq < K;
          copy4(d, ok ? rp + h * 8 : p, ok);
        }
      }
    }
  }
  __device__ __forceinline__ static int tid8() { return threadIdx.x / 8; }
};

// row-contiguous, 16-byte pieces: element (r, k) at p[k·ld + r], p 16-byte aligned,
// ld % 4 == 0. Thread t: rows 4·(t mod 32) … +3, k offsets t/32 + i·(NT/32).
template <class C, int ROWS, int S>
struct RVecLoader {
  static_assert(ROWS == 128, "32 pieces of 4 rows per k");
  static constexpr int KSTEP = C::NT / 32, PI = C::BK / KSTEP;
  static_assert(C::BK % KSTEP == 0, "whole k steps");
  const float* base;  // k offset t/32, its piece's first row (row 0 if no row is valid)
  int bytes;          // of the piece inside the matrix: 16, or 4·(R − row) at the edge, or 0

  __device__ __forceinline__ RVecLoader(const float* p, int ld, int R, int rowbase, int tid) {
    const int r = rowbase + (tid % 32) * 4;
    bytes = max(0, min(16, 4 * (R - r)));
    base = p + ((long long)(tid / 32) * ld + (bytes ? r : 0));
  }
  template <bool FULL>
  __device__ __forceinline__ void issue(float* s, int k0, const float* p, int ld, int K) const {
    const int kq = threadIdx.x / 32, c = (threadIdx.x % 32) * 4;
    const float* src = base + (long long)k0 * ld;
#pragma unroll
    for (int i = 0; i < PI; ++i) {
      float* d = s + (kq + i * KSTEP) * S + c;
      const float* q = src + (long long)(i * KSTEP) * ld;
      if (FULL) {
        copy16_partial(d, q, bytes);
      } else {
        const bool ok = k0 + kq + i * KSTEP < K;
        copy16_partial(d, ok ? q : p, ok ? bytes : 0);
      }
    }
  }
};

// row-contiguous, 4-byte copies: element (r, k) at p[k·ld + r]. Thread t: row
// t mod ROWS (clamped to the last row), k offsets t/ROWS + e·(NT/ROWS).
template <class C, int ROWS, int S>
struct RLoader {
  static constexpr int KSTEP = C::NT / ROWS, PE = C::BK / KSTEP;
  static_assert(C::NT % ROWS == 0 && C::BK % KSTEP == 0, "RLoader tiling");
  const float* base;  // k offset t/ROWS, row min(rowbase + t mod ROWS, R − 1)

  __device__ __forceinline__ RLoader(const float* p, int ld, int R, int rowbase, int tid) {
    base = p + ((long long)(tid / ROWS) * ld + min(rowbase + tid % ROWS, R - 1));
  }
  template <bool FULL>
  __device__ __forceinline__ void issue(float* s, int k0, const float* p, int ld, int K) const {
    const int kq = threadIdx.x / ROWS, r = threadIdx.x % ROWS;
    const float* src = base + (long long)k0 * ld;
    const long long step = (long long)KSTEP * ld;
#pragma unroll
    for (int e = 0; e < PE; ++e) {
      float* d = s + (kq + e * KSTEP) * S + r;
      if (FULL) {
        copy4(d, src, true);
      } else {
        const bool ok = k0 + kq + e * KSTEP < K;
        copy4(d, ok ? src : p, ok);
      }
      src += step;
    }
  }
};

template <class C, Kind KD, int ROWS, int S>
using LoaderOf = std::conditional_t<
    KD == Kind::kK, KLoader<C, ROWS, S>,
    std::conditional_t<KD == Kind::kRVec, RVecLoader<C, ROWS, S>, RLoader<C, ROWS, S>>>;

// ---- the kernel --------------------------------------------------------------------

struct Params {
  const float* a;
  const float* b;
  float* c;    // C, or the split workspace
  int lda, ldb;
  long long ldc;  // C's row stride, or the workspace's (N rounded up to 4)
  long long split_stride;  // floats between workspace slices (0 without split)
  int M, N, K;
  int tiles_per_split;  // k-tiles per blockIdx.z
  bool accumulate;      // C += (never with split: the sum kernel adds)
  bool vec;             // float4 stores: ldc % 4 == 0 and the output 16-byte aligned
};

template <class C>
__device__ __forceinline__ void read_frag(const float* as, const float* bs, int kk, int ao, int bo,
                                          float (&fa)[C::TM], float (&fb)[C::TN]) {
#pragma unroll
  for (int g = 0; g < C::GM; ++g) {
    const float4 t = *reinterpret_cast<const float4*>(as + kk * C::SA + ao + g * 4 * C::LM);
    fa[g * 4 + 0] = t.x;
    fa[g * 4 + 1] = t.y;
    fa[g * 4 + 2] = t.z;
    fa[g * 4 + 3] = t.w;
  }
#pragma unroll
  for (int h = 0; h < C::GN; ++h) {
    const float4 t = *reinterpret_cast<const float4*>(bs + kk * C::SB + bo + h * 4 * C::LN);
    fb[h * 4 + 0] = t.x;
    fb[h * 4 + 1] = t.y;
    fb[h * 4 + 2] = t.z;
    fb[h * 4 + 3] = t.w;
  }
}

template <class C, Kind KA, Kind KB>
__global__ void __launch_bounds__(C::NT, kBlocksPerSM) gemm_large_kernel(const __grid_constant__ Params P) {
  extern __shared__ __align__(16) float smem[];
  float* const sa = smem;                          // [STAGES][BK][SA]
  float* const sb = smem + C::STAGES * C::A_STAGE;  // [STAGES][BK][SB]
  constexpr int S = C::STAGES;

  const int tid = threadIdx.x;
  const int m0 = blockIdx.x * C::BM, n0 = blockIdx.y * C::BN;
  const LoaderOf<C, KA, C::BM, C::SA> al(P.a, P.lda, P.M, m0, tid);
  const LoaderOf<C, KB, C::BN, C::SB> bl(P.b, P.ldb, P.N, n0, tid);

  const int warp = tid / 32, lane = tid % 32;
  const int wm = warp % C::WGM, wn = warp / C::WGM;
  const int lm = lane / C::LN, ln = lane % C::LN;
  const int ao = wm * C::WT_M + lm * 4, bo = wn * C::WT_N + ln * 4;

  const int ktiles = (P.K + C::BK - 1) / C::BK;
  const int kt0 = blockIdx.z * P.tiles_per_split;
  const int nt = max(0, min(ktiles, kt0 + P.tiles_per_split) - kt0);

  float acc[C::TM][C::TN];
#pragma unroll
  for (int i = 0; i < C::TM; ++i)
#pragma unroll
    for (int j = 0; j < C::TN; ++j) acc[i][j] = 0.f;

  // Copy k-tile t (absolute) into stage st; the k-tail tile takes the tested path.
  auto issue = [&](int t, int st) {
    const int k0 = t * C::BK;
    if (k0 + C::BK <= P.K) {
      al.template issue<true>(sa + st * C::A_STAGE, k0, P.a, P.lda, P.K);
      bl.template issue<true>(sb + st * C::B_STAGE, k0, P.b, P.ldb, P.K);
    } else {
      al.template issue<false>(sa + st * C::A_STAGE, k0, P.a, P.lda, P.K);
      bl.template issue<false>(sb + st * C::B_STAGE, k0, P.b, P.ldb, P.K);
    }
  };

  if (nt > 0) {  // block-uniform
#pragma unroll
    for (int st = 0; st < S - 1; ++st) {
      if (st < nt) issue(kt0 + st, st);
      copy_commit();
    }
    copy_wait<S - 2>();
    __syncthreads();

    float fa[2][C::TM], fb[2][C::TN];
    read_frag<C>(sa, sb, 0, ao, bo, fa[0], fb[0]);
    int rd = 0, wr = S - 1;
    for (int i = 0; i < nt; ++i) {
      const float* as = sa + rd * C::A_STAGE;
      const float* bs = sb + rd * C::B_STAGE;
      const int nx = rd + 1 == S ? 0 : rd + 1;
#pragma unroll
      for (int kk = 0; kk < C::BK; ++kk) {
        if (kk == C::BK - 1) {  // the tile's last k: on to tile i+1
          if (i + 1 < nt) {
            copy_wait<S - 2>();
            __syncthreads();
            read_frag<C>(sa + nx * C::A_STAGE, sb + nx * C::B_STAGE, 0, ao, bo, fa[0], fb[0]);
          }
        } else {
          read_frag<C>(as, bs, kk + 1, ao, bo, fa[(kk + 1) & 1], fb[(kk + 1) & 1]);
        }
        if (kk == 0) {
          if (i + S - 1 < nt) issue(kt0 + i + S - 1, wr);
          copy_commit();
        }
#pragma unroll
        for (int x = 0; x < C::TM; ++x)
#pragma unroll
          for (int y = 0; y < C::TN; ++y) acc[x][y] = fmaf(fa[kk & 1][x], fb[kk & 1][y], acc[x][y]);
      }
      rd = nx;
      wr = wr + 1 == S ? 0 : wr + 1;
    }
    copy_wait<0>();  // no copy may still be landing when the block exits
  }

  // Epilogue: row m, columns n … n+3 of the block's output.
  float* const out = P.c + (long long)blockIdx.z * P.split_stride;
#pragma unroll
  for (int g = 0; g < C::GM; ++g)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int m = m0 + ao + g * 4 * C::LM + i;
      if (m >= P.M) continue;
      float* rowp = out + (long long)m * P.ldc;
#pragma unroll
      for (int h = 0; h < C::GN; ++h) {
        const int n = n0 + bo + h * 4 * C::LN;
        if (n >= P.N) continue;
        const float v[4] = {acc[g * 4 + i][h * 4 + 0], acc[g * 4 + i][h * 4 + 1],
                            acc[g * 4 + i][h * 4 + 2], acc[g * 4 + i][h * 4 + 3]};
        if (P.vec && n + 3 < P.N) {
          float4 o = make_float4(v[0], v[1], v[2], v[3]);
          if (P.accumulate) {
            const float4 old = *reinterpret_cast<const float4*>(rowp + n);
            o.x = old.x + o.x;
            o.y = old.y + o.y;
            o.z = old.z + o.z;
            o.w = old.w + o.w;
          }
          *reinterpret_cast<float4*>(rowp + n) = o;
        } else {
#pragma unroll
          for (int j = 0; j < 4; ++j)
            if (n + j < P.N) rowp[n + j] = P.accumulate ? rowp[n + j] + v[j] : v[j];
        }
      }
    }
}

// C[m][n] = (C[m][n] or bias[n] +) Σ_{z ascending} ws[z][m][n], in double,
// rounded once. A thread takes 4 consecutive columns of a row: float4 loads
// of the slices (ldw % 4 == 0, ws 16-byte aligned), but in a row's last
// group, whose padding past N no slice writes; float4 loads and stores of C
// where vec_c says C allows them. Thread x of the grid picks the columns, y
// the rows (grid-stride): no division per element.
__global__ void __launch_bounds__(256)
    splitk_sum_kernel(const float* __restrict__ ws, int splits, long long slice, long long ldw,
                      int M, int N, float* __restrict__ c, long long ldc, bool accumulate,
                      bool vec_c, const float* __restrict__ bias, const __grid_constant__
                      Activation act, const float* __restrict__ mask, long long ldm) {
  const int n = 4 * (blockIdx.x * blockDim.x + threadIdx.x);
  if (n >= N) return;
  for (int m = blockIdx.y; m < M; m += gridDim.y) {
    double s[4] = {0.0, 0.0, 0.0, 0.0};
    const float* w = ws + m * ldw + n;
    if (n + 3 < N) {
      for (int z = 0; z < splits; ++z) {
        const float4 v = *reinterpret_cast<const float4*>(w + z * slice);
        s[0] += (double)v.x, s[1] += (double)v.y, s[2] += (double)v.z, s[3] += (double)v.w;
      }
    } else {  // the row's last group: the padding past N was never written
      for (int z = 0; z < splits; ++z)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          if (n + j < N) s[j] += (double)w[z * slice + j];
    }
    float* o = c + m * ldc + n;
    const bool full = vec_c && n + 3 < N;
    float r[4];
    if (bias) {  // C = bias + Σ (never with accumulate)
#pragma unroll
      for (int j = 0; j < 4; ++j) r[j] = n + j < N ? float((double)bias[n + j] + s[j]) : 0.f;
    } else if (accumulate) {
      float old[4] = {0.f, 0.f, 0.f, 0.f};
      if (full) {
        const float4 v = *reinterpret_cast<const float4*>(o);
        old[0] = v.x, old[1] = v.y, old[2] = v.z, old[3] = v.w;
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j)
          if (n + j < N) old[j] = o[j];
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) r[j] = float((double)old[j] + s[j]);
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) r[j] = float(s[j]);
    }
    // The epilogue after the rounding (gemm_tc.h's Epilogue): the activation,
    // then the mask.
    if (act.kind != ActKind::kNone)
#pragma unroll
      for (int j = 0; j < 4; ++j) r[j] = apply_relu_family(act, r[j]);
    if (mask)
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (n + j < N) r[j] = mask[m * ldm + n + j] > 0.f ? r[j] : 0.f;
    if (full) {
      *reinterpret_cast<float4*>(o) = make_float4(r[0], r[1], r[2], r[3]);
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (n + j < N) o[j] = r[j];
    }
  }
}

// ---- host side -------------------------------------------------------------------

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

DeviceScratch& workspace() {
  static DeviceScratch s;
  return s;
}

template <class C, Kind KA, Kind KB>
void launch(const Params& p, dim3 grid) {
  auto kernel = gemm_large_kernel<C, KA, KB>;
  // Above 48 KB of dynamic shared memory a kernel must ask first, once per
  // device (bit d of `allowed`; devices past 63 ask on every launch).
  if (C::kSmemBytes > 48 * 1024) {
    static std::atomic<unsigned long long> allowed{0};
    int dev = 0;
    HPMC_CUDA_CHECK(cudaGetDevice(&dev));
    const unsigned long long bit = dev >= 0 && dev < 64 ? 1ull << dev : 0;
    if (!bit || !(allowed.load(std::memory_order_relaxed) & bit)) {
      HPMC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           int(C::kSmemBytes)));
      allowed.fetch_or(bit, std::memory_order_relaxed);
    }
  }
  kernel<<<grid, C::NT, C::kSmemBytes>>>(p);
  HPMC_CUDA_LAUNCH_CHECK("large gemm");
}

template <class C, Kind KA>
void launch_b(Kind kb, const Params& p, dim3 grid) {
  switch (kb) {
    case Kind::kK: launch<C, KA, Kind::kK>(p, grid); return;
    case Kind::kRVec: launch<C, KA, Kind::kRVec>(p, grid); return;
    case Kind::kR: launch<C, KA, Kind::kR>(p, grid); return;
  }
}

template <class C>
void launch_ab(Kind ka, Kind kb, const Params& p, dim3 grid) {
  switch (ka) {
    case Kind::kK: launch_b<C, Kind::kK>(kb, p, grid); return;
    case Kind::kRVec: launch_b<C, Kind::kRVec>(kb, p, grid); return;
    case Kind::kR: launch_b<C, Kind::kR>(kb, p, grid); return;
  }
}

long long tiles(long long x, long long t) { return (x + t - 1) / t; }

}  // namespace

const char* variant_name(Variant v) {
  switch (v) {
    case Variant::kK8: return "K8";
    case Variant::kK16: return "K16";
  }
  return "?";
}

bool applies(long long m, long long n, long long k) {
  return m >= 128 && n >= 128 && m * n * k >= (1ll << 27);
}

bool use_large(long long m, long long n, long long k) {
  const char* env = std::getenv("HPMC_GEMM_LARGE");
  const std::string want = env ? env : "";
  if (want.empty() || want == "auto") return applies(m, n, k);
  if (want == "0") return false;
  if (want == "1") return true;
  throw UsageError(str("HPMC_GEMM_LARGE=", want,
                       ": expected auto (the shape rule, as when unset), 0 (the implicit engine "
                       "for every product) or 1 (the large engine for every product)"));
}

int splits_for(long long m, long long n, long long k, int bk) {
  const long long blocks = tiles(m, 128) * tiles(n, 128);
  const long long slots = (long long)kPlanSMs * kBlocksPerSM;
  if (blocks <= 0 || blocks * 2 > slots) return 1;
  const long long by_fill = slots / blocks;
  const long long by_depth = tiles(k, bk) / kMinTilesPerSplit;
  return int(std::max(1ll, std::min({by_fill, by_depth, (long long)kMaxSplits})));
}

void gemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda,
          const float* b, int ldb, float* c, int ldc, bool accumulate, Variant variant,
          int splits) {
  const auto bad = [&](const char* what) {
    return RuntimeError(str("large gemm: ", what, " (m=", m, " n=", n, " k=", k, " lda=", lda,
                            " ldb=", ldb, " ldc=", ldc, " trans_a=", trans_a,
                            " trans_b=", trans_b, ")"));
  };
  const long long kMax = 1ll << 30;  // 32-bit index arithmetic (k0 + BK, n + 3) stays in range
  if (m < 0 || n < 0 || k < 0 || m >= kMax || n >= kMax || k >= kMax)
    throw bad("a size is outside [0, 2^30)");
  if (lda < std::max(1, trans_a ? m : k) || ldb < std::max(1, trans_b ? k : n) ||
      ldc < std::max(1, n))
    throw bad("leading dimension too small");
  if (splits < 0 || splits > 65535) throw bad(str("split count ", splits, " outside [0, 65535]").c_str());
  if (m == 0 || n == 0 || (k == 0 && accumulate)) return;

  // Row-contiguous operands: A transposed, B plain.
  const auto kind = [](bool row_contig, const float* p, int ld) {
    if (!row_contig) return Kind::kK;
    return aligned16(p) && ld % 4 == 0 ? Kind::kRVec : Kind::kR;
  };
  const Kind ka = kind(trans_a, a, lda), kb = kind(!trans_b, b, ldb);
  const int bk = variant == Variant::kK8 ? CfgK8::BK : CfgK16::BK;
  const long long ktiles = tiles(k, bk);
  if (splits == 0) splits = splits_for(m, n, k, bk);
  splits = int(std::max(1ll, std::min<long long>(splits, std::max(1ll, ktiles))));
  const long long tps = tiles(ktiles, splits);
  splits = int(std::max(1ll, tiles(ktiles, std::max(1ll, tps))));  // no empty trailing slices

  const long long gx = tiles(m, 128), gy = tiles(n, 128);
  if (gx > INT_MAX || gy > 65535) throw bad("grid too large");
  const dim3 grid{unsigned(gx), unsigned(gy), unsigned(splits)};

  Params p{};
  p.a = a;
  p.b = b;
  p.lda = lda;
  p.ldb = ldb;
  p.M = m;
  p.N = n;
  p.K = k;
  p.tiles_per_split = int(std::max(1ll, tps));
  float* ws = nullptr;
  long long ldw = 0, slice = 0;
  if (splits > 1) {
    ldw = splitk_ldw(n);
    slice = ldw * m;
    ws = splitk_workspace(splits, m, n);
    p.c = ws;
    p.ldc = ldw;
    p.split_stride = slice;
    p.accumulate = false;
    p.vec = aligned16(ws);
  } else {
    p.c = c;
    p.ldc = ldc;
    p.split_stride = 0;
    p.accumulate = accumulate;
    p.vec = ldc % 4 == 0 && aligned16(c);
  }
  if (variant == Variant::kK8) launch_ab<CfgK8>(ka, kb, p, grid);
  else launch_ab<CfgK16>(ka, kb, p, grid);

  if (splits > 1) splitk_sum(ws, splits, m, n, c, ldc, accumulate);
}

long long splitk_ldw(int n) { return (n + 3ll) / 4 * 4; }

float* splitk_workspace(int splits, int m, int n) {
  return workspace().floats(size_t(splitk_ldw(n)) * size_t(m) * size_t(splits));
}

void splitk_sum(const float* ws, int splits, int m, int n, float* c, int ldc, bool accumulate,
                const float* bias, const Activation& act, const float* mask, int ldm) {
  const long long ldw = splitk_ldw(n), slice = ldw * m;
  if (m == 0 || n == 0) return;
  const long long gx = tiles(tiles(n, 4), 256);
  const long long gy = std::max(1ll, std::min<long long>({m, 65535, 4096 / gx}));
  const bool vec_c = aligned16(c) && ldc % 4 == 0;
  splitk_sum_kernel<<<dim3(unsigned(gx), unsigned(gy)), 256>>>(ws, splits, slice, ldw, m, n, c,
                                                              ldc, accumulate, vec_c, bias, act,
                                                              mask, ldm);
  HPMC_CUDA_LAUNCH_CHECK("gemm split-K sum");
}

}  // namespace hpmc::gpu::gemm_large
