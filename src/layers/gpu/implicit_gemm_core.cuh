// implicit_gemm_core.cuh — the tiled, register-blocked, double-buffered FP32
// GEMM main loop shared by the implicit-GEMM convolutions and the plain GEMM
// (conv2d_implicit_gemm.cu describes the mappings; this file is the engine).
//
// The engine computes, for one block, a BM×BN tile of C[m][n] = Σ_k A(m,k)·B(k,n)
// over a range of BK-wide k-tiles. Where A and B come from is left to two
// "loaders" (template parameters), where C goes to an "epilogue":
//   loader.load(k0)    global → registers for the k-tile starting at k0; every
//                      element is predicated (0 outside the matrix);
//   loader.store(s)    registers → one shared-memory buffer, k-major s[k][row];
//   epi.kAlongM        whether C is contiguous along m (conv outputs) or n;
//   epi.store_mcol / epi.store_nrow   write 4 consecutive m / n of a column / row.
//
// Shared memory: As[2][BK][BM+4], Bs[2][BK][BN+4] (two buffers). Row stride
// BM+4 (a multiple of 4 floats) keeps every fragment read 16-byte aligned and
// makes the k-fast loader stores (lanes = 8 k × 4 rows) hit 32 distinct banks.
//
// Registers: thread (tm, tn) owns TM×TN accumulators at rows
//   g·4·THR_M + tm·4 + i  (g < TM/4, i < 4)   and columns   h·4·THR_N + tn·4 + j,
// so its A (B) fragment at one k is TM/4 (TN/4) float4 reads from shared memory,
// and a warp's float4 reads are consecutive (conflict-free or broadcast).
// The lanes of a warp run along m (tm = tid mod THR_M) when C is contiguous
// along m, else along n, so that the epilogue's float4 stores are coalesced.
//
// Pipeline (one __syncthreads per k-tile):
//   prologue: load tile t0 → regs → buffer 0; barrier
//   for t:    if (t+1 < t1) load tile t+1 → regs      (global loads in flight…)
//             FFMA on buffer cur                        (…while this computes)
//             if (t+1 < t1) store regs → buffer cur^1
//             barrier
// Buffer cur^1 was last read in iteration t−1, which ended with a barrier, so
// overwriting it in iteration t races with no reader; what iteration t writes
// is read in t+1, after the barrier that ends t. All branches on t are
// block-uniform, so every thread reaches every barrier.
//
// Each accumulator is the sequence acc = fma(a_k, b_k, acc) over k ascending,
// starting from 0, whatever the tile configuration: the tile shape changes no
// bit of the result (only split-K, which regroups k, does).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace hpmc::gpu::implicit_detail {

constexpr int kBK = 8;   // k-tile depth, the same for every configuration
constexpr int kPad = 4;  // shared-memory row padding, in floats

// A block tile of BM×BN outputs, TM×TN per thread, MINB blocks per SM asked
// of the register allocator (__launch_bounds__).
template <int BM_, int BN_, int TM_, int TN_, int MINB_>
struct TileCfg {
  static constexpr int BM = BM_, BN = BN_, TM = TM_, TN = TN_, MINB = MINB_;
  static constexpr int THR_M = BM / TM, THR_N = BN / TN, NT = THR_M * THR_N;
  static constexpr int GM = TM / 4, GN = TN / 4;
  static_assert(TM % 4 == 0 && TN % 4 == 0, "fragments are float4 groups");
  static_assert(BM % TM == 0 && BN % TN == 0, "threads tile the block exactly");
  static_assert(NT % 32 == 0 && NT <= 1024, "whole warps");
  // Unrolling of the BK loop for the kernels whose loaders hold the most
  // state (weight gradient, plain GEMM): the 8×8 tile spills under the
  // 128-register cap of 2 blocks/SM when fully unrolled.
  static constexpr int KU_HEAVY = TM * TN >= 64 ? 2 : 8;
};

template <class Cfg>
struct Smem {
  float a[2][kBK][Cfg::BM + kPad];
  float b[2][kBK][Cfg::BN + kPad];
};

// ---- how the threads of a block cover one ROWS×BK tile ------------------------
//
// RowFast: consecutive threads take consecutive rows (coalesced when the global
// operand is contiguous along the row index); thread t owns row t mod ROWS and
// the k offsets t/ROWS + e·(NT/ROWS), e < ELEMS. Covered exactly once: t/ROWS
// ranges over [0, NT/ROWS) and ELEMS·NT/ROWS = BK.
template <int ROWS, int NT>
struct RowFast {
  static_assert(NT % ROWS == 0 && (ROWS * kBK) % NT == 0, "RowFast tiling");
  static constexpr int ELEMS = ROWS * kBK / NT;
  static constexpr int KSTEP = NT / ROWS;
  __device__ __forceinline__ static int row(int tid) { return tid % ROWS; }
  __device__ __forceinline__ static int kk(int tid, int e) { return tid / ROWS + e * KSTEP; }
  __device__ __forceinline__ static void store(float (*s)[ROWS + kPad], int tid,
                                               const float (&v)[ELEMS]) {
#pragma unroll
    for (int e = 0; e < ELEMS; ++e) s[kk(tid, e)][row(tid)] = v[e];
  }
};

// KFast: consecutive threads take consecutive k (coalesced when the operand is
// contiguous along k); thread t owns k offset t mod BK and rows
// t/BK + e·(NT/BK), e < ELEMS. Covered exactly once: ELEMS·NT/BK = ROWS.
template <int ROWS, int NT>
struct KFast {
  static_assert(NT % kBK == 0 && (ROWS * kBK) % NT == 0, "KFast tiling");
  static constexpr int ELEMS = ROWS * kBK / NT;
  static constexpr int RSTEP = NT / kBK;
  __device__ __forceinline__ static int kk(int tid) { return tid % kBK; }
  __device__ __forceinline__ static int row(int tid, int e) { return tid / kBK + e * RSTEP; }
  __device__ __forceinline__ static void store(float (*s)[ROWS + kPad], int tid,
                                               const float (&v)[ELEMS]) {
#pragma unroll
    for (int e = 0; e < ELEMS; ++e) s[kk(tid)][row(tid, e)] = v[e];
  }
};

// ---- a strided matrix operand: element (row, k) = p[row·rs + k·ks] ---------------
//
// rows × kdim elements; ROW_FAST picks the thread mapping (true when rs == 1).
// The thread's element e of the tile at k0 lies at base + k0·ks + e·estride:
// base is its first element of the first tile, estride the fixed step between
// its elements (KSTEP·ks along k for RowFast, RSTEP·rs along the rows for
// KFast). A load happens only when the element's row is below `rows` (bit e of
// rmask) and its k below kdim (k0 + e·KSTEP < klimit for RowFast, k0 < klimit
// for KFast); addresses that fail either test are never dereferenced (base is
// p itself when none of the thread's rows is valid).
template <int ROWS, int NT, bool ROW_FAST>
struct MatLoader {
  using Map = std::conditional_t<ROW_FAST, RowFast<ROWS, NT>, KFast<ROWS, NT>>;
  static constexpr int ELEMS = Map::ELEMS;
  static_assert(ELEMS <= 32, "row-valid bits fit an unsigned");
  const float* base;
  long long ks, estride;
  int klimit;  // kdim − (the thread's first k offset): element e valid iff k0 + e·KSTEP < klimit
  int tid;
  unsigned rmask;  // bit e: element e's row is below `rows`
  float v[ELEMS];

  __device__ __forceinline__ MatLoader(const float* p, int rows, int kdim, long long rs,
                                       long long ks_, int row0, int tid_)
      : ks(ks_), tid(tid_), rmask(0) {
    int row, kfirst;
    if constexpr (ROW_FAST) {
      row = row0 + Map::row(tid);
      kfirst = Map::kk(tid, 0);
      estride = (long long)Map::KSTEP * ks;
      if (row < rows) rmask = ~0u;
    } else {
      row = row0 + Map::row(tid, 0);
      kfirst = Map::kk(tid);
      estride = (long long)Map::RSTEP * rs;
#pragma unroll
      for (int e = 0; e < ELEMS; ++e)
        if (row + e * Map::RSTEP < rows) rmask |= 1u << e;
    }
    klimit = kdim - kfirst;
    base = rmask ? p + ((long long)row * rs + (long long)kfirst * ks) : p;
  }

  __device__ __forceinline__ void load(int k0) {
    const float* tile = base + (long long)k0 * ks;  // dereferenced only when in range
#pragma unroll
    for (int e = 0; e < ELEMS; ++e) {
      int k = k0;
      if constexpr (ROW_FAST) k += e * Map::KSTEP;
      float t = 0.f;
      if (((rmask >> e) & 1u) && k < klimit) t = __ldg(tile + e * estride);
      v[e] = t;
    }
  }
  __device__ __forceinline__ void store(float (*s)[ROWS + kPad]) { Map::store(s, tid, v); }
};

// ---- the main loop ---------------------------------------------------------------

// Thread coordinates in the THR_M × THR_N grid; lanes run along m or along n.
template <class Cfg, bool LANES_M>
__device__ __forceinline__ void thread_coords(int tid, int& tm, int& tn) {
  if constexpr (LANES_M) {
    tm = tid % Cfg::THR_M;
    tn = tid / Cfg::THR_M;
  } else {
    tn = tid % Cfg::THR_N;
    tm = tid / Cfg::THR_N;
  }
}

// acc = Σ over k-tiles [kt0, kt1) of A-tile · B-tile; acc = 0 for an empty range.
// KU: how many of the BK steps of a tile are unrolled (kBK = all). Full
// unrolling lets the compiler fetch the next step's fragments early, which
// costs registers: where that would spill under the MINB register cap, a
// kernel asks for 2 (-Xptxas -v shows no spills for any kernel).
template <class Cfg, int KU, class AL, class BL>
__device__ __forceinline__ void mainloop(AL& al, BL& bl, Smem<Cfg>& sm, int kt0, int kt1, int tm,
                                         int tn, float (&acc)[Cfg::TM][Cfg::TN]) {
#pragma unroll
  for (int i = 0; i < Cfg::TM; ++i)
#pragma unroll
    for (int j = 0; j < Cfg::TN; ++j) acc[i][j] = 0.f;
  if (kt0 >= kt1) return;  // block-uniform

  al.load(kt0 * kBK);
  bl.load(kt0 * kBK);
  al.store(sm.a[0]);
  bl.store(sm.b[0]);
  __syncthreads();

  for (int kt = kt0; kt < kt1; ++kt) {
    const int cur = (kt - kt0) & 1;
    const bool more = kt + 1 < kt1;  // block-uniform
    if (more) {
      al.load((kt + 1) * kBK);
      bl.load((kt + 1) * kBK);
    }
#pragma unroll KU
    for (int kk = 0; kk < kBK; ++kk) {
      float a[Cfg::TM], b[Cfg::TN];
#pragma unroll
      for (int g = 0; g < Cfg::GM; ++g) {
        const float4 t =
            *reinterpret_cast<const float4*>(&sm.a[cur][kk][g * 4 * Cfg::THR_M + tm * 4]);
        a[g * 4 + 0] = t.x;
        a[g * 4 + 1] = t.y;
        a[g * 4 + 2] = t.z;
        a[g * 4 + 3] = t.w;
      }
#pragma unroll
      for (int h = 0; h < Cfg::GN; ++h) {
        const float4 t =
            *reinterpret_cast<const float4*>(&sm.b[cur][kk][h * 4 * Cfg::THR_N + tn * 4]);
        b[h * 4 + 0] = t.x;
        b[h * 4 + 1] = t.y;
        b[h * 4 + 2] = t.z;
        b[h * 4 + 3] = t.w;
      }
#pragma unroll
      for (int i = 0; i < Cfg::TM; ++i)
#pragma unroll
        for (int j = 0; j < Cfg::TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    if (more) {
      al.store(sm.a[cur ^ 1]);
      bl.store(sm.b[cur ^ 1]);
    }
    __syncthreads();
  }
}

// Hand the accumulators to the epilogue in groups of four consecutive outputs
// along its contiguous axis. m0, n0: the block's first row and column.
template <class Cfg, class Epi>
__device__ __forceinline__ void epilogue(const Epi& epi, const float (&acc)[Cfg::TM][Cfg::TN],
                                         int m0, int n0, int tm, int tn) {
  if constexpr (Epi::kAlongM) {
#pragma unroll
    for (int g = 0; g < Cfg::GM; ++g) {
      const int m = m0 + g * 4 * Cfg::THR_M + tm * 4;
#pragma unroll
      for (int h = 0; h < Cfg::GN; ++h)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int n = n0 + h * 4 * Cfg::THR_N + tn * 4 + j;
          const float v[4] = {acc[g * 4 + 0][h * 4 + j], acc[g * 4 + 1][h * 4 + j],
                              acc[g * 4 + 2][h * 4 + j], acc[g * 4 + 3][h * 4 + j]};
          epi.store_mcol(m, n, v);
        }
    }
  } else {
#pragma unroll
    for (int g = 0; g < Cfg::GM; ++g)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int m = m0 + g * 4 * Cfg::THR_M + tm * 4 + i;
#pragma unroll
        for (int h = 0; h < Cfg::GN; ++h) {
          const int n = n0 + h * 4 * Cfg::THR_N + tn * 4;
          const float v[4] = {acc[g * 4 + i][h * 4 + 0], acc[g * 4 + i][h * 4 + 1],
                              acc[g * 4 + i][h * 4 + 2], acc[g * 4 + i][h * 4 + 3]};
          epi.store_nrow(m, n, v);
        }
      }
  }
}

// ---- epilogues -------------------------------------------------------------------

// C row-major: out[m·ld + n] (= or +=). In a split-K launch each blockIdx.z
// writes its own slice, out + z·split_stride.
struct MatOut {
  static constexpr bool kAlongM = false;
  float* out;
  long long ld, split_stride;
  int M, N;
  bool accumulate;
  bool vec;  // ld % 4 == 0, out 16-byte aligned and split_stride % 4 == 0

  // Four consecutive columns n..n+3 of row m (n is a multiple of 4 relative to
  // the aligned block origin, so with vec the float4 is aligned).
  __device__ __forceinline__ void store_nrow(int m, int n, const float (&v)[4]) const {
    if (m >= M || n >= N) return;
    float* row = out + (long long)blockIdx.z * split_stride + (long long)m * ld;
    if (vec && n + 3 < N) {
      float4 o = make_float4(v[0], v[1], v[2], v[3]);
      if (accumulate) {
        const float4 old = *reinterpret_cast<const float4*>(row + n);
        o.x = old.x + o.x;
        o.y = old.y + o.y;
        o.z = old.z + o.z;
        o.w = old.w + o.w;
      }
      *reinterpret_cast<float4*>(row + n) = o;
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (n + j < N) row[n + j] = accumulate ? row[n + j] + v[j] : v[j];
    }
  }
};

}  // namespace hpmc::gpu::implicit_detail
