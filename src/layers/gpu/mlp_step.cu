// mlp_step.cu — the fused MLP training step (mlp_step.h describes the phases).
//
// Products. Every matrix product of the step is cut into output tiles of TM×16,
// TM = 16 (the forward and input-gradient products) or 64 (the weight
// gradients: the 320×784 first-layer gradient is then 245 tiles, about one per
// block, instead of 980, and the 160×320 middle one 60 instead of 200, so that
// no block takes three backward items). Every weight gradient has the SGD
// update in its epilogue, and the bias gradient and update too (the row sums of
// its A, which is the layer's dpre). A block of 256 threads computes a tile:
// each thread a 4×4 micro-tile (16 FMAs per 8 floats read from shared memory;
// 2×2 micro-tiles left the multiply bound by shared-memory wavefronts), the
// threads in k-groups (16 for TM = 16, 4 for TM = 64) that split each chunk of
// 64 k-offsets and whose sums are then added in group order. Where a phase has
// fewer tiles than the grid has blocks (the first layer's 64×320 output is 80
// tiles), a tile's chunks are split over several blocks and the last one
// to finish adds the splits in split order (product() has the details).
// In tf32 and bf16 (the kernel's template argument P) the tiles, ring and
// reductions are the same; a warp multiplies a 16×16 block of the tile on
// tensor cores (mma_chunk), the warps in k-groups of 8 (TM = 16) or 2 (TM =
// 64) k-splits, and its FP32 operands are rounded as they enter a fragment.
//
// Latency. At this size a phase is a few microseconds and each trip to L2
// costs a good part of one, so the loads are what matter. A block streams the
// chunks of all its work items of a product through a ring of kStages
// shared-memory buffers filled by cp.async, kStages − 1 chunks ahead of the
// one being multiplied; an item's epilogue operands (bias, mask, parameters
// and momenta) ride along with its last chunk. The batch itself is gathered
// (pixel / 255, rounded as gather_batch rounds it) into one of two float
// buffers by the previous step, which knows the next step's samples, in its
// head phase where most blocks are idle; only a step that follows none
// gathers its own batch first, behind one more grid barrier. The loss and
// the resetting of the next step's hand-off counts run on the last blocks.
//
// Hand-overs. The products depend on each other row by row, so instead of a
// grid barrier between phases each block waits only for the rows (or
// columns) its next item reads, counted as they are written (Handoff, Net's
// counts): a block starts the next layer while others still finish this
// one. One release or acquire atomic by one thread hands work over (split
// counts, hand-off counts, grid_barrier), not fences by every thread: at a
// phase's start, what costs is chains of dependent instructions, code not yet
// in the instruction cache, and round trips (docs/fused-step.md has the
// traces). HPMC_FUSED_CHAIN=0 puts the grid barriers back (same results).
//
// Every sum runs in a fixed order, with no floating-point atomics: a step is
// deterministic. In a build with -DHPMC_FUSED_PROBES=ON, HPMC_FUSED_TIMING=1
// in the environment prints the phases' microseconds (block 0's clock) to
// stderr after every step, and HPMC_FUSED_TRACE=file writes one step's
// events of every block; both synchronize each step, so they are for study,
// not for timing runs.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/cuda_check.h"
#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"
#include "layers/gpu/mlp_step.h"
#include "layers/gpu/mma.cuh"
#include "layers/gpu/sgd_formula.cuh"

namespace hpmc::gpu {

namespace {

constexpr int kThreads = 256;
// Output tiles: TM rows (A's) × kTN columns (B's), TM = 16 or 64 by product
// (see product()); a block's threads form kThreads·TM / 1024 k-groups.
constexpr int kTN = 16;
constexpr int kTMShort = 16;  // the forward and input-gradient products
constexpr int kTMTall = 64;   // the weight gradients (with SGD)
constexpr int kTileElems = kTMTall * kTN;  // the largest tile
constexpr int kChunk = 64;              // k per ring slot
constexpr int kStages = 3;              // the cp.async ring
constexpr int kMaxSplit = 8;            // k-splits of a tile across blocks
// A chunk of an operand in shared memory, by its layout in global memory:
//   k-fast (element (r, k) at r·ld + k): rows of k, s[r·kRowK + k]
//   r-fast (element (r, k) at k·ld + r): rows of r, s[k·(R + 4) + r] (R: the tile's rows)
// so that a 16-byte copy moves 4 adjacent elements either way. The padding
// keeps rows 16-byte aligned and spreads a warp's reads over the banks.
constexpr int kRowK = kChunk + 4;
constexpr int slot_floats(int rows) {
  return kChunk * (rows + 4) > rows * kRowK ? kChunk * (rows + 4) : rows * kRowK;
}
constexpr int kSlotA = slot_floats(kTMTall), kSlotB = slot_floats(kTN);
static_assert(kTN * kChunk / 4 == kThreads, "whole 16-byte copies per thread");

// ---- what the kernel sees ------------------------------------------------------------

struct Net {
  int L = 0, n = 0;
  int d[kMlpStepMaxLayers + 1] = {};
  float* w[kMlpStepMaxLayers] = {};
  float* b[kMlpStepMaxLayers] = {};
  float* gw[kMlpStepMaxLayers] = {};
  float* gb[kMlpStepMaxLayers] = {};
  float* vw[kMlpStepMaxLayers] = {};
  float* vb[kMlpStepMaxLayers] = {};
  float* act[kMlpStepMaxLayers] = {};   // act[l]: n × d[l+1], after ReLU (l < L−1)
  float* dpre[kMlpStepMaxLayers] = {};  // dpre[l]: n × d[l+1], d loss / d pre-activation
  float* x[2] = {};                     // batch buffers, max_batch × d[0]
  int32_t* y[2] = {};                   // and their labels, max_batch
  int cur = 0;                          // x[cur] is this step's batch...
  int gather = 0;                       // ...once gathered, if this is set
  const uint8_t* images = nullptr;
  const int32_t* labels = nullptr;
  const int32_t* idx = nullptr;
  const int32_t* next_idx = nullptr;  // the next step's samples, into x[cur ^ 1] (null: none)
  int next_n = 0;
  double* loss = nullptr;  // per sample
  int* correct = nullptr;  // per sample: argmax == label
  double* acc = nullptr;
  // Split sums of forward layer l: tiles × splits × 256 floats from ws + ws0[l], and
  // the splits done per tile from tile_count + tc0[l] (0 between steps). Each
  // layer has its own, as chained layers (`chain`) overlap.
  float* ws = nullptr;
  int* tile_count = nullptr;
  long long ws0[kMlpStepMaxLayers] = {};
  int tc0[kMlpStepMaxLayers] = {};
  unsigned long long* arrived = nullptr;  // the grid barrier's count (grid_barrier)
  // Hand-off counts (Handoff), in two sets: a step uses `counts` (all 0 at its
  // start) and zeroes `counts_next`, the set its successor uses.
  // * middle layer l's column blocks of 16, from counts + col0[l]: how many of
  //   the input-gradient product's items have read their slice of W[l], so
  //   that the weight-gradient product may update it in the same phase;
  // * with `chain`, act[l]'s readiness from counts + rd0[l]: for l < L−2 one
  //   per 16-row tile and 64 columns (the next layer's chunk), the tiles of
  //   it finished; for l = L−2 one per 16-row tile, the items of it written
  //   (head_chain: the head waits for them);
  // * with `chain`, the head's rows done from counts + hr0, one per 16 rows;
  // * with `chain` and L ≥ 3, dpre[0]'s columns done from counts + g0, one per
  //   64 columns: the 16-row × 16-column tiles of them written;
  // * with `chain`, the head's losses written from counts + lr0, one per 16
  //   rows (the loss's log runs after the row's hand-off).
  int* counts = nullptr;
  int* counts_next = nullptr;
  int col0[kMlpStepMaxLayers] = {}, rd0[kMlpStepMaxLayers] = {}, hr0 = 0, g0 = 0, lr0 = 0;
  int counts_total = 0;
  // The phases hand over by counts instead of grid barriers (all but the
  // barriers between middle layers' backward phases, when there are several),
  // so a block starts on the next product as soon as the rows it needs are
  // done; and (head_chain, when the last hidden layer's items and the batch's
  // head rows fit the grid side by side) the head rows run on blocks of their
  // own, waiting for their rows the same way.
  int chain = 0, head_chain = 0;
  unsigned long long* times = nullptr;  // development aid, see stamp()
  unsigned long long* trace = nullptr;  // development aid, see trace()
  float lr = 0, mu = 0, wd = 0, inv_n = 0;
  int momentum = 0;
  int head_splits = 1;  // k-splits of the last hidden layer's forward (head_row adds them)
};

// ---- shared memory (dynamic: more than the 48 KB a static array may hold) --------------

struct Smem {
  double part[kThreads];         // the loss reduction
  float a[kStages][kSlotA];      // the chunk ring
  float b[kStages][kSlotB];
  float ep[kStages][2][kTileElems];  // SGD epilogue: the tile's parameters and momenta
  float red[kThreads * 16];          // the k-groups' sums: group g's tile at g·TM·kTN
  float z[kMlpStepMaxClasses];       // head: logits, then dlogits
  int cnt[kThreads];
  int flag;
  int trace_n;  // events this block has traced (thread 0's)
};

// Development aids, built only with -DHPMC_FUSED_PROBES=ON (CMake): even
// untaken, their dozen call sites cost the step 0.5 µs.
#ifndef HPMC_FUSED_PROBES
#define HPMC_FUSED_PROBES 0
#endif
constexpr bool kProbes = HPMC_FUSED_PROBES != 0;

// HPMC_FUSED_TRACE=file: thread 0 of every block records (event, global
// time, SM clock) at the points below; the host writes one step's records
// to the file.
constexpr int kTraceCap = 128;
enum TraceEvent {
  kTrPhase = 1,     // a phase starts (after the grid barrier)
  kTrFirstChunk,    // a product's first chunk has landed
  kTrSummed,        // an item's sum is complete (k-groups reduced)
  kTrPartial,       // a split's partial sum is written (every thread past the barrier)
  kTrCounted,       // the tile counter answered
  kTrFinished,      // the item's epilogue is done
  kTrArrive,        // the block reaches the grid barrier
  kTrEnd,           // the block is done
  kTrHeadStaged,    // head_row: W[L−1] and the row are in shared memory
  kTrHeadLogits,    // head_row: the logits are computed
  kTrHeadLoss,      // head_row: the loss and dlogits are written
  kTrStart,         // a product with items for this block starts
  kTrWaited,        // a hand-off wait of an item's copies is over
  kTrIssued,        // a product's first ring position is issued
};


// Out of line, so that the probes change the step's code little. Its
// arguments are plain values: a reference to the kernel's Net would make the
// compiler copy all of Net to the stack.
__device__ __noinline__ void trace_record(unsigned long long* trace, int* n, int event) {
  if (*n < kTraceCap) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    unsigned long long* r = trace + 3 * ((long long)blockIdx.x * kTraceCap + (*n)++);
    r[0] = (unsigned long long)event;
    r[1] = t;
    r[2] = (unsigned long long)clock64();  // the SM's cycles: its clock rate, with r[1]
  }
}
__device__ __forceinline__ void trace(const Net& net, Smem& sm, int event) {
  if constexpr (kProbes)
    if (net.trace && threadIdx.x == 0) trace_record(net.trace, &sm.trace_n, event);
}

// ---- cp.async: global → shared without a register, completed in groups -----------------
// (sm_80 and later; older GPUs copy through a register at once, and the
// commit/wait calls have nothing to wait for.)

__device__ __forceinline__ void cp_async4(void* dst, const void* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned d = unsigned(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src),
               "r"(valid ? 4 : 0));  // a size of 0 reads nothing and writes zero
#else
  *static_cast<float*>(dst) = valid ? *static_cast<const float*>(src) : 0.0f;
#endif
}
// Copies `bytes` (0..16) of src and zero-fills the rest of the 16 at dst.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned d = unsigned(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(bytes));
#else
  for (int i = 0; i < 4; ++i)
    static_cast<float*>(dst)[i] = 4 * i < bytes ? static_cast<const float*>(src)[i] : 0.0f;
#endif
}
__device__ __forceinline__ void cp_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N>
__device__ __forceinline__ void cp_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}
__device__ __forceinline__ void cp_wait_all() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;\n" ::);
#endif
}

// ---- synchronisation between blocks ------------------------------------------------------
// Release and acquire at GPU scope, one thread for the block: the block's
// barrier orders its threads' writes before thread 0's release, and the
// acquire before every thread's later reads (the pattern of CUTLASS's
// split-K semaphore), so no thread needs a separate fence.

__device__ __forceinline__ int atomic_add_acq_rel(int* p, int v) {
  int old;
  asm volatile("atom.add.acq_rel.gpu.s32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}
__device__ __forceinline__ unsigned long long atomic_add_release(unsigned long long* p,
                                                                 unsigned long long v) {
  unsigned long long old;
  asm volatile("atom.add.release.gpu.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
  return old;
}
__device__ __forceinline__ unsigned long long load_acquire(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.acquire.gpu.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ int load_acquire(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void add_release(int* p, int v) {
  asm volatile("red.release.gpu.global.add.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// Every block of the (co-resident) grid waits here for all the others. The
// count only grows, across launches too: the G arrivals of one barrier take
// it from a multiple of G to the next (64 bits: it never wraps).
__device__ __forceinline__ void grid_barrier(unsigned long long* arrived) {
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned long long G = gridDim.x;
    const unsigned long long target = (atomic_add_release(arrived, 1) / G + 1) * G;
    while (load_acquire(arrived) < target) {
    }
  }
  __syncthreads();
}

// ---- SGD: the formula of the SGD kernel (sgd_formula.cuh) ------------------------------

__device__ __forceinline__ void sgd_one(float& p, float g, float& v, const Net& net) {
  sgd_update(p, g, v, net.momentum != 0, net.lr, net.mu, net.wd);
}

// ---- products ------------------------------------------------------------------------

// The operands' arithmetic (MlpStepDesc::precision), a template argument of
// the kernel: kOpF32 multiplies with FFMA on 4×4 micro-tiles; kOpTf32 and
// kOpBf16 on tensor cores (mma.sync m16n8k8, FP32 accumulators), each FP32
// operand rounded as it enters a fragment, as the layer-by-layer kernels do.
enum OpKind { kOpF32, kOpTf32, kOpBf16 };

// x as a product's operand of kind P: rounded to tf32 (to nearest, ties
// away) or bf16 (to nearest even), as the tensor cores receive it.
template <int P>
__device__ __forceinline__ float op_round(float x) {
  if constexpr (P == kOpTf32) return __uint_as_float(mma::tf32(x));
  else if constexpr (P == kOpBf16) return __bfloat162float(__float2bfloat16_rn(x));
  else return x;
}

// A matrix operand, element (r, k): f[r·ld + k] when KFAST (consecutive k
// adjacent), else f[k·ld + r].
struct Operand {
  const float* f;
  int ld;
};

enum EpiKind {
  kEpiForward,  // out[m·ld + j] = relu(v + bias[j])
  kEpiMasked,   // out[m·ld + j] = mask[m·ld + j] > 0 ? v : 0
  kEpiGrad,     // out[m·ld + j] = v
  kEpiGradSgd,  // out (the gradient) = v, then SGD on param/mom at the same place
};

struct Epilogue {
  float* out;
  int ld;
  const float* bias;
  const float* mask;
  float* param;
  float* mom;  // null without momentum
  // SGD only, optional: the bias gradient gb[m] = Σ_k A(m, k) of the output
  // rows m and the SGD update of the bias b[m] (momenta bv[m], or null).
  float* gb = nullptr;
  float* b = nullptr;
  float* bv = nullptr;
};

// The first `have` (0..4) of src's floats into dst, zeros after them, one
// by one: for operands whose rows are not 16-byte aligned. Out of line, so
// that the usual (aligned) path's code stays short: the step runs most of
// its code once, and its instruction-cache misses show (docs/fused-step.md).
__device__ __noinline__ void copy_unaligned4(float* dst, const float* src, const float* base,
                                             int have) {
#pragma unroll
  for (int i = 0; i < 4; ++i) cp_async4(dst + i, i < have ? src + i : base, i < have);
}

// Copy rows [r0, r0 + R) × k [k0, k0 + 64) of an operand into a slot laid
// out as above, zeros outside rows × kdim. Each 16-byte piece moves 4
// adjacent elements (k-fast: along k; r-fast: along rows): with one 16-byte
// copy when ld is a multiple of 4 (vec), else one by one. R / 16 pieces a thread.
template <bool KFAST, int R>
__device__ __forceinline__ void copy_chunk(const Operand& o, bool vec, int rows, int r0, int kdim,
                                           int k0, float* s) {
#pragma unroll 1
  for (int c = 0; c < R / 16; ++c) {
    const int t = int(threadIdx.x) + c * kThreads;
    const int r = KFAST ? t / (kChunk / 4) : 4 * (t % (R / 4));
    const int k = KFAST ? 4 * (t % (kChunk / 4)) : t / (R / 4);
    const int gr = r0 + r, gk = k0 + k;
    float* dst = KFAST ? s + r * kRowK + k : s + k * (R + 4) + r;
    // How many of the 4 adjacent elements exist (along k, or along rows).
    int have = KFAST ? (gr < rows ? kdim - gk : 0) : (gk < kdim ? rows - gr : 0);
    have = have < 0 ? 0 : (have > 4 ? 4 : have);
    const float* src = o.f + (KFAST ? (long long)gr * o.ld + gk : (long long)gk * o.ld + gr);
    if (vec) cp_async16(dst, have > 0 ? src : o.f, 4 * have);
    else copy_unaligned4(dst, src, o.f, have);
  }
}

// Operand values at k-offsets k..k+3 of a chunk for four local rows of a
// thread: v[i][q] = element (row i, k + q), from a slot of a tile with R rows
// shared by R / 4 threads. A k-fast slot's rows are r + (R / 4)·i (a
// quarter-warp's threads then read rows in different banks), an r-fast
// slot's r + i (one 16-byte load per k); `r` is the thread's first row.
template <bool KFAST, int R>
__device__ __forceinline__ void fragment(const float* s, int r, int k, float (&v)[4][4]) {
  if (KFAST) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float4 f = *reinterpret_cast<const float4*>(s + (r + (R / 4) * i) * kRowK + k);
      v[i][0] = f.x;
      v[i][1] = f.y;
      v[i][2] = f.z;
      v[i][3] = f.w;
    }
  } else {
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const float4 f = *reinterpret_cast<const float4*>(s + (k + q) * (R + 4) + r);
      v[0][q] = f.x;
      v[1][q] = f.y;
      v[2][q] = f.z;
      v[3][q] = f.w;
    }
  }
}
// The local row of a thread's i-th micro-tile row (see fragment): t is the
// thread's index along that side of the tile, which has R rows.
template <bool KFAST, int R>
__device__ __forceinline__ int frag_row(int t, int i) {
  return KFAST ? t + (R / 4) * i : 4 * t + i;
}
template <bool KFAST>
__device__ __forceinline__ int frag_first(int t) {
  return KFAST ? t : 4 * t;
}

// Element (r, k) of a chunk's slot (see above) of a tile with R rows.
template <bool KFAST, int R>
__device__ __forceinline__ float slot_at(const float* s, int r, int k) {
  return KFAST ? s[r * kRowK + k] : s[k * (R + 4) + r];
}

// The tensor-core multiply of a warp (P: kOpTf32 or kOpBf16): its 16 rows
// r0.. of the A slot (a tile of TM rows) times the B slot's 16 columns, over
// k-offsets k0..k0 + KW, into d[n-half][4] in mma's accumulator layout
// (lane l holds rows l/4 and l/4 + 8, columns 2·(l%4) and 2·(l%4) + 1 of
// each 16×8 half).
template <bool KFA, bool KFB, int TM, int P, int KW>
__device__ __forceinline__ void mma_chunk(const float* sa, const float* sb, int r0, int k0,
                                          float (&d)[2][4]) {
  const int lane = int(threadIdx.x) % 32, gq = lane / 4, tq = lane % 4;
  const int ra = r0 + gq;
#pragma unroll
  for (int kk = 0; kk < KW; kk += 8) {
    const int k = k0 + kk;
    if constexpr (P == kOpTf32) {
      const uint32_t a[4] = {mma::tf32(slot_at<KFA, TM>(sa, ra, k + tq)),
                             mma::tf32(slot_at<KFA, TM>(sa, ra + 8, k + tq)),
                             mma::tf32(slot_at<KFA, TM>(sa, ra, k + tq + 4)),
                             mma::tf32(slot_at<KFA, TM>(sa, ra + 8, k + tq + 4))};
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int c = 8 * h + gq;
        const uint32_t b[2] = {mma::tf32(slot_at<KFB, kTN>(sb, c, k + tq)),
                               mma::tf32(slot_at<KFB, kTN>(sb, c, k + tq + 4))};
        mma::tf32_m16n8k8(d[h], a, b);
      }
    } else {
      const int k2 = k + 2 * tq;
      const uint32_t a[2] = {
          mma::bf16x2(slot_at<KFA, TM>(sa, ra, k2), slot_at<KFA, TM>(sa, ra, k2 + 1)),
          mma::bf16x2(slot_at<KFA, TM>(sa, ra + 8, k2), slot_at<KFA, TM>(sa, ra + 8, k2 + 1))};
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int c = 8 * h + gq;
        mma::bf16_m16n8k8(
            d[h], a, mma::bf16x2(slot_at<KFB, kTN>(sb, c, k2), slot_at<KFB, kTN>(sb, c, k2 + 1)));
      }
    }
  }
}

// What is done with a finished output (m, j) of the tile at (m0, j0). ep, if
// not null, holds the epilogue's operands for the tile, fetched along with
// its last chunk: the bias (forward), the mask (masked) or the parameters
// and momenta (SGD); else they are read here.
template <EpiKind E>
__device__ __forceinline__ void finish(const Epilogue& e, const Net& net, const float* ep,
                                       int m0, int j0, int m, int j, float v) {
  const long long at = (long long)m * e.ld + j;
  const int t = (m - m0) * kTN + (j - j0);
  if constexpr (E == kEpiForward) {
    const float z = v + (ep ? ep[j - j0] : e.bias[j]);
    e.out[at] = z < 0.0f ? 0.0f : z;
  } else if constexpr (E == kEpiMasked) {
    e.out[at] = (ep ? ep[t] : e.mask[at]) > 0.0f ? v : 0.0f;
  } else if constexpr (E == kEpiGrad) {
    e.out[at] = v;
  } else {
    e.out[at] = v;
    float p = ep ? ep[t] : e.param[at];
    float mom = !e.mom ? 0.0f : ep ? ep[kTileElems + t] : e.mom[at];
    sgd_one(p, v, mom, net);
    e.param[at] = p;
    if (e.mom) e.mom[at] = mom;
  }
}

// The epilogue operands of the tile at (m0, j0) into one ring slot's ep:
// 4 adjacent elements of a tile row a piece, 16 bytes at once when `vec`
// (the rows are 16-byte aligned), else one by one.
template <EpiKind E, int TM>
__device__ __forceinline__ void copy_epilogue(const Epilogue& e, bool vec, int M, int N, int m0,
                                              int j0, float (*ep)[kTileElems]) {
  const int tid = int(threadIdx.x);
  if constexpr (E == kEpiForward) {
    if (tid < kTN) cp_async4(&ep[0][tid], e.bias + (j0 + tid < N ? j0 + tid : 0), j0 + tid < N);
  } else if constexpr (E == kEpiMasked || E == kEpiGradSgd) {
#pragma unroll
    for (int c = 0; c < (TM * kTN / 4 + kThreads - 1) / kThreads; ++c) {
      const int i = 4 * (tid + c * kThreads);  // the piece's first element
      if (i >= TM * kTN) break;
      const int m = m0 + i / kTN, j = j0 + i % kTN;
      int have = m < M ? N - j : 0;
      have = have < 0 ? 0 : (have > 4 ? 4 : have);
      const long long at = have > 0 ? (long long)m * e.ld + j : 0;
      const float* src = E == kEpiMasked ? e.mask : e.param;
      if (vec) cp_async16(&ep[0][i], src + at, 4 * have);
      else copy_unaligned4(&ep[0][i], src + at, src, have);
      if (E == kEpiGradSgd && e.mom) {
        if (vec) cp_async16(&ep[1][i], e.mom + at, 4 * have);
        else copy_unaligned4(&ep[1][i], e.mom + at, e.mom, have);
      }
    }
  }
}

// A block's work items u, u + G, u + 2G, ... of a product, walked without a
// division per item (each costs a chain of dependent integer instructions,
// and a phase is short enough for that to show): u = t·S + s with tile
// t = tr·tn + tc, all advanced by G = dt·S + ds, dt = dtr·tn + dtc.
struct ItemWalk {
  int s, tr, tc;  // the current item: split s of the tile at tile row tr, column tc
  int S, tn, ds, dtr, dtc;
  __device__ __forceinline__ void init(int u, int G, int S_, int tn_) {
    S = S_;
    tn = tn_;
    const int t = u / S, dt = G / S;
    s = u - t * S;
    tr = t / tn;
    tc = t - tr * tn;
    ds = G - dt * S;
    dtr = dt / tn;
    dtc = dt - dtr * tn;
  }
  __device__ __forceinline__ int tile() const { return tr * tn + tc; }
  __device__ __forceinline__ void next() {
    s += ds;
    const int carry = s >= S ? 1 : 0;  // ds < S: at most one carry
    s -= carry * S;
    tc += dtc + carry;  // < 2·tn
    tr += dtr;
    if (tc >= tn) {
      tc -= tn;
      tr += 1;
    }
  }
};

// The number of k-splits of a product of `tiles` tiles and `chunks` chunks
// over a grid of G blocks, and the chunks per split: enough splits for the
// items to about fill the grid when the tiles alone would not, for the
// forward products only (one a phase, so they share one workspace). The
// input gradients do not split: their items then need no count or fix-up,
// and the blocks they leave free take the weight gradients' items (phase 3:
// 80 + 200 items instead of 240 + 200, 6.7 → 6.1 µs).
__host__ __device__ __forceinline__ void item_splits(bool may_split, int tiles, int chunks,
                                                     int G, int& S, int& cps) {
  S = 1;
  cps = chunks;
  if (!may_split) return;
  S = G / tiles;
  S = S > chunks ? chunks : S;
  S = S < 1 ? 1 : (S > kMaxSplit ? kMaxSplit : S);
  cps = (chunks + S - 1) / S;
  S = (chunks + cps - 1) / cps;  // no empty split
}

// Ordering between two products of one phase, by tile column (blocks of kTN
// columns): a product with `signal` adds 1 to signal[column] once an item's
// operands have all landed; one with `wait` holds each item's epilogue until
// wait[column] reaches `target`. The middle layers' weight gradients update
// W[l] in their epilogue this way, after every input-gradient item has read
// the slice of W[l] it needs.
//
// Between forward layers (Net::chain): with `ready` (the previous layer's
// counts, one per 16-row tile and 64 columns of its output, which is this
// product's A), an item's A chunk is copied only once its count reaches the
// number of 16-column tiles in those 64 columns. With `done`, an item adds 1
// to done[tile row · ⌈tn / done_tiles⌉ + tile column / done_tiles] once its
// results are written: a finished tile, or (defer) a split's partial sum.
//
// After the head (Net::chain): with `rows` (the head's rows done, a count per
// 16 rows of the batch), an item's A chunk is copied only once the batch rows
// it covers are all done: A's rows m0.. (an input gradient), or with
// rows_along_k its k-offsets k0.. (a weight gradient, whose k is the batch).
// With `groups` (dpre[0]'s columns done, a count per 64), the first layer's
// weight gradient waits for the columns that are its A's rows.
//
// `done` is indexed done[tile row · done_stride + tile column / done_tiles].
struct Handoff {
  int* signal = nullptr;
  const int* wait = nullptr;
  int target = 0;
  const int* ready = nullptr;
  int* done = nullptr;
  int done_tiles = 1, done_stride = 0;
  const int* rows = nullptr;
  bool rows_along_k = false;
  const int* groups = nullptr;
};

// Thread 0's wait for a count to reach `want` (an acquire load each time).
__device__ __forceinline__ void spin_until(const int* c, int want) {
  while (load_acquire(c) < want) {
  }
}

// Waits, thread 0 then the block, until *c reaches want. Block-uniform.
__device__ __forceinline__ void wait_count(const int* c, int want) {
  if (threadIdx.x == 0) spin_until(c, want);
  __syncthreads();
}

// Waits, the first warp then the block, until batch rows [r0, r1) of n are
// all counted in rows (a count per 16 rows: how many of them are done). A
// lane a count: one after another, each would cost a round trip to L2 even
// when it is already done. Block-uniform.
__device__ __forceinline__ void wait_rows(const int* rows, int r0, int r1, int n) {
  if (threadIdx.x < 32)
    for (int t = r0 / kTMShort + int(threadIdx.x); t * kTMShort < r1; t += 32) {
      spin_until(rows + t, min(kTMShort, n - t * kTMShort));
    }
  __syncthreads();
}

// Waits, the first warp then the block, until columns [c0, c1) of an n × N
// matrix are done in `groups` (a count per 64 columns: its 16 × 16 tiles
// written), a lane a count. Block-uniform.
__device__ __forceinline__ void wait_groups(const int* groups, int c0, int c1, int N, int n) {
  if (threadIdx.x < 32) {
    const int rt = (n + kTMShort - 1) / kTMShort, tn = (N + kTN - 1) / kTN;
    constexpr int kCT = kChunk / kTN;
    for (int g = c0 / kChunk + int(threadIdx.x); g * kChunk < c1; g += 32) {
      spin_until(groups + g, rt * min(kCT, tn - g * kCT));
    }
  }
  __syncthreads();
}

// C[M×N] = Σ_k A(m, k)·B(j, k), then the epilogue, over this block's share.
//
// Tiles of TM×kTN outputs, 4×4 of them a thread: the block's threads form KG
// k-groups of TM threads, group g summing k-offsets [g·GK, (g + 1)·GK) of
// every chunk in order; the groups' sums are then added in group order, each
// thread finishing outputs tid, tid + 256, ... of the tile. Work items: each tile's k range is cut
// into S splits of equal chunk counts (the last may be shorter;
// item_splits). The items of a phase's products are numbered one after
// another from `first`; block b takes items b, b + G, ... (G the grid size),
// and its (item, chunk) pairs form one stream through the cp.async ring. A
// split's sum goes to the workspace; the block that completes a tile's last
// split (a counter per tile says which) adds the S sums in split order — the
// same order whoever finishes last — and runs the epilogue. With `defer` a
// split product leaves its split sums in the workspace, uncounted, for the
// next phase to add (the last hidden layer's, which head_row finishes).
// Splits use forward layer `layer`'s workspace and counts.
// Returns the first item number after this product's. Block-uniform.
template <bool KFA, bool KFB, EpiKind E, int TM, int P>
__device__ int product(const Net& net, Smem& sm, int first, const Operand& A, const Operand& B,
                       int M, int N, int K, const Epilogue& epi, bool defer = false,
                       const Handoff& ho = Handoff{}, int layer = 0) {
  constexpr int RT = TM / 4, CT = kTN / 4;        // threads along a tile's rows, columns
  constexpr int KG = kThreads / (RT * CT);        // k-groups: 16 (TM = 16) or 4 (TM = 64)
  constexpr int GK = kChunk / KG;                 // k-offsets per group and chunk
  constexpr int kElems = TM * kTN;                // outputs of a tile
  constexpr int kPer = kElems / kThreads;         // outputs a thread finishes
  static_assert(KG * RT * CT == kThreads && GK % 4 == 0, "4×4 micro-tiles cover the tile");
  // On tensor cores a warp multiplies 16 rows × the 16 columns; the tile's
  // TM / 16 row blocks take WR warps, and the kThreads / 32 / WR groups of
  // them split each chunk's k-offsets (8 groups of 8 for TM = 16, 2 of 32
  // for TM = 64).
  constexpr bool kMma = P != kOpF32;
  constexpr int WR = TM / 16, KGT = kThreads / 32 / WR, GKT = kChunk / KGT;
  static_assert(KGT * WR * 32 == kThreads && GKT % 8 == 0, "16×16 warp tiles cover the tile");
  constexpr int KGX = kMma ? KGT : KG;  // the groups whose sums are added
  static_assert(KGX * kElems <= kThreads * 16, "the groups' sums fit Smem::red");
  const int tn = (N + kTN - 1) / kTN;
  const int tiles = ((M + TM - 1) / TM) * tn;
  const int G = int(gridDim.x);
  const int chunks = K > kChunk ? (K + kChunk - 1) / kChunk : 1;
  int S, cps;  // splits, chunks per split
  item_splits(E == kEpiForward, tiles, chunks, G, S, cps);  // see item_splits
  const int items = tiles * S;
  // This block's first item of the product, and how many it has: without a
  // division where first < G and items ≤ G (the usual case; a division is a
  // chain of a dozen dependent instructions).
  int u0 = int(blockIdx.x) - first;
  if (first >= G) u0 %= G;
  if (u0 < 0) u0 += G;
  const int mine = u0 >= items ? 0 : items - u0 <= G ? 1 : (items - u0 + G - 1) / G;
  if (mine == 0) return first + items;
  trace(net, sm, kTrStart);
  auto item_len = [&](const ItemWalk& w) {
    const int left = chunks - w.s * cps;
    return left < cps ? left : cps;
  };
  // An item's last chunk owns its ring slot from its copy to the epilogue,
  // so the epilogue's operands travel with it (when one block finishes the tile).
  const bool ep_ring = E != kEpiGrad && S == 1;

  auto vec = [](const Operand& o) {
    return o.ld % 4 == 0 && (reinterpret_cast<uintptr_t>(o.f) & 15) == 0;
  };
  const bool avec = vec(A), bvec = vec(B);
  // The epilogue's operands (mask, or parameters and momenta) share out's layout.
  const bool evec = epi.ld % 4 == 0 &&
                    ((reinterpret_cast<uintptr_t>(E == kEpiMasked ? epi.mask : epi.param) |
                      reinterpret_cast<uintptr_t>(epi.mom)) & 15) == 0;
  const int tid = int(threadIdx.x);
  const int g = tid / (RT * CT), lt = tid % (RT * CT);
  const int ty = lt / CT, tx = lt % CT;  // rows frag_row<KFA, TM>(ty, i), columns ...<KFB, kTN>
  const int wg = tid / 32 / WR, wr = tid / 32 % WR;  // tensor cores: the warp's group, row block

  // The issue cursor: item ii (iw), chunk ic within it. Ring position q is
  // issued at loop step q − (kStages − 1): one call site, so one copy of the code.
  ItemWalk iw;
  iw.init(u0, G, S, tn);
  ItemWalk cw = iw;  // the compute cursor's item
  int ii = 0, ic = 0, ilen = item_len(iw);
  float acc[4][4] = {};
  float tacc[2][4] = {};  // tensor cores: the warp's 16×16 outputs
  float bsum = 0.0f;  // the bias gradient of row m0 + tid (epi.gb)
  int ci = 0, cc = 0, clen = item_len(cw);  // the compute cursor
  for (int p = 1 - kStages; ci < mine; ++p) {
    if (p >= 0) {
      cp_wait<kStages - 2>();  // this thread's copies of position p have landed
      __syncthreads();         // everyone's have; and position p − 1's slot is free
      if (p == 0) trace(net, sm, kTrFirstChunk);
    }
    if (ii < mine) {  // issue position p + kStages − 1
      const int k0 = (iw.s * cps + ic) * kChunk, slot = (p + kStages - 1) % kStages;
      const int m0 = iw.tr * TM, j0 = iw.tc * kTN;
      // A bias, or the tile's own parameters and momenta, are ready now: they
      // are copied before any wait (a mask, act[l − 1], only after it).
      constexpr bool early_ep = E != kEpiMasked;
      if (early_ep && ep_ring && ic == ilen - 1)
        copy_epilogue<E, TM>(epi, evec, M, N, m0, j0, sm.ep[slot]);
      // The head's rows: m0.. for an input gradient, whose B (W[l]) is ready
      // and copied first, and which waits once per item (the rows are the
      // item's); k0.. for a weight gradient, whose B (act[l − 1]) is only
      // known complete through them. dpre[0]'s columns: once per item.
      if (!ho.rows_along_k) copy_chunk<KFB, kTN>(B, bvec, N, j0, K, k0, sm.b[slot]);
      if (ho.rows && (ho.rows_along_k || ic == 0)) {
        wait_rows(ho.rows, ho.rows_along_k ? k0 : m0,
                  ho.rows_along_k ? min(k0 + kChunk, K) : min(m0 + TM, M), net.n);
        trace(net, sm, kTrWaited);
      }
      if (ho.rows_along_k) copy_chunk<KFB, kTN>(B, bvec, N, j0, K, k0, sm.b[slot]);
      if (ho.groups && ic == 0) {  // (B: the batch)
        wait_groups(ho.groups, m0, min(m0 + TM, M), M, net.n);
        trace(net, sm, kTrWaited);
      }
      if (E == kEpiForward && ho.ready) {  // the previous layer's rows m0.., columns k0..k0 + 63
        constexpr int kCT = kChunk / kTN;  // 16-column tiles a chunk
        const int g = k0 / kChunk;
        wait_count(ho.ready + iw.tr * chunks + g, min(kCT, (K + kTN - 1) / kTN - g * kCT));
        trace(net, sm, kTrWaited);
      }
      copy_chunk<KFA, TM>(A, avec, M, m0, K, k0, sm.a[slot]);
      if (!early_ep && ep_ring && ic == ilen - 1)
        copy_epilogue<E, TM>(epi, evec, M, N, m0, j0, sm.ep[slot]);
      if (++ic == ilen && ++ii < mine) {
        ic = 0;
        iw.next();
        ilen = item_len(iw);
      }
    }
    cp_commit();  // an empty group past the end keeps the counting simple
    if (p == 1 - kStages) trace(net, sm, kTrIssued);
    if (p < 0) continue;
    const int slot = p % kStages;
    if (cc == 0) {
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int j = 0; j < 4; ++j) tacc[h][j] = 0.0f;
    }
    if constexpr (E == kEpiGradSgd && !KFA) {
      // The bias gradient: the items of the first column tile add up their A
      // rows (all of the batch, in k order), a thread a row.
      if (epi.gb && cw.tc == 0 && tid < TM) {
        if (cc == 0) bsum = 0.0f;
        const float* a = sm.a[slot] + tid;
#pragma unroll 8
        for (int k = 0; k < kChunk; ++k) bsum += a[k * (TM + 4)];
      }
    }
    if constexpr (kMma) {
      mma_chunk<KFA, KFB, TM, P, GKT>(sm.a[slot], sm.b[slot], 16 * wr, wg * GKT, tacc);
    } else {
      // Not unrolled: a phase runs this once, so its code arrives in the
      // instruction cache as it runs (docs/fused-step.md); a loop fetches once.
#pragma unroll 1
      for (int kk = 0; kk < GK; kk += 4) {
        const int k = g * GK + kk;
        float a[4][4], b[4][4];
        fragment<KFA, TM>(sm.a[slot], frag_first<KFA>(ty), k, a);
        fragment<KFB, kTN>(sm.b[slot], frag_first<KFB>(tx), k, b);
#pragma unroll
        for (int q = 0; q < 4; ++q)
#pragma unroll
          for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i][q], b[j][q], acc[i][j]);
      }
    }
    if (++cc < clen) continue;
    // The item is summed: reduce the groups in order, then finish or hand over.
    const int t = cw.tile(), s = cw.s, tc = cw.tc, tr = cw.tr;
    auto signal_done = [&]() {  // block-uniform; after the item's results are written
      if ((E == kEpiForward || E == kEpiMasked) && ho.done) {
        __syncthreads();
        if (tid == 0) add_release(ho.done + tr * ho.done_stride + tc / ho.done_tiles, 1);
      }
    };
    const int m0 = cw.tr * TM, j0 = cw.tc * kTN;
    if (++ci < mine) {
      cc = 0;
      cw.next();
      clen = item_len(cw);
    }
    // The groups' sums into shared memory, then each thread adds its outputs'
    // (elements tid, tid + 256, ...) over the groups in group order.
    if constexpr (kMma) {
      const int lane = tid % 32, row = 16 * wr + lane / 4, col = 2 * (lane % 4);
      float* red = sm.red + wg * kElems;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        red[row * kTN + 8 * h + col] = tacc[h][0];
        red[row * kTN + 8 * h + col + 1] = tacc[h][1];
        red[(row + 8) * kTN + 8 * h + col] = tacc[h][2];
        red[(row + 8) * kTN + 8 * h + col + 1] = tacc[h][3];
      }
    } else {
      float* red = sm.red + g * kElems;
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          red[frag_row<KFA, TM>(ty, i) * kTN + frag_row<KFB, kTN>(tx, j)] = acc[i][j];
    }
    __syncthreads();  // also: every thread's copies of the item have landed
    if (ho.signal && tid == 0) add_release(&ho.signal[tc], 1);
    float v[kPer];
#pragma unroll
    for (int c = 0; c < kPer; ++c) {
      v[c] = sm.red[tid + c * kThreads];
#pragma unroll
      for (int q = 1; q < KGX; ++q) v[c] += sm.red[q * kElems + tid + c * kThreads];
    }
    __syncthreads();  // red is free for the next item
    trace(net, sm, kTrSummed);
    if (S == 1) {
      if (ho.wait) {
        wait_count(&ho.wait[tc], ho.target);
      }
      const float* ep = ep_ring ? &sm.ep[slot][0][0] : nullptr;
#pragma unroll
      for (int c = 0; c < kPer; ++c) {
        const int e = tid + c * kThreads, m = m0 + e / kTN, jj = j0 + e % kTN;
        if (m < M && jj < N) finish<E>(epi, net, ep, m0, j0, m, jj, v[c]);
      }
      if constexpr (E == kEpiGradSgd) {
        if (epi.gb && tc == 0 && tid < TM && m0 + tid < M) {
          const int m = m0 + tid;
          float pb = epi.b[m], vb = epi.bv ? epi.bv[m] : 0.0f;
          epi.gb[m] = bsum;
          sgd_one(pb, bsum, vb, net);
          epi.b[m] = pb;
          if (epi.bv) epi.bv[m] = vb;
        }
      }
      signal_done();
      trace(net, sm, kTrFinished);
      continue;
    }
    float* part = net.ws + net.ws0[layer] + (long long)t * S * kElems;
    int* count = net.tile_count + net.tc0[layer] + t;
#pragma unroll
    for (int c = 0; c < kPer; ++c) part[s * kElems + tid + c * kThreads] = v[c];
    if (defer) {  // the head adds the splits (head_row)
      signal_done();
      continue;
    }
    __syncthreads();
    trace(net, sm, kTrPartial);
    if (tid == 0) sm.flag = atomic_add_acq_rel(count, 1) == S - 1;
    __syncthreads();
    trace(net, sm, kTrCounted);
    if (sm.flag) {  // block-uniform: this block completed the tile
      float pv[kPer][kMaxSplit];  // all loads in flight at once, then the sums in split order
#pragma unroll
      for (int c = 0; c < kPer; ++c)
#pragma unroll
        for (int q = 0; q < kMaxSplit; ++q)
          pv[c][q] = q < S ? __ldcg(part + q * kElems + tid + c * kThreads) : 0.0f;
#pragma unroll
      for (int c = 0; c < kPer; ++c) {
        const int i = tid + c * kThreads, m = m0 + i / kTN, jj = j0 + i % kTN;
        float v = 0.0f;
#pragma unroll
        for (int q = 0; q < kMaxSplit; ++q)
          if (q < S) v += pv[c][q];
        if (m < M && jj < N) finish<E>(epi, net, nullptr, m0, j0, m, jj, v);
      }
      if (tid == 0) *count = 0;  // ready for the next step
      signal_done();
      trace(net, sm, kTrFinished);
    }
  }
  cp_wait_all();
  __syncthreads();  // the ring and red are free for whatever comes next
  return first + items;
}

// Samples idx[0..count) of the dataset into x (pixel / 255, as gather_batch
// rounds it) and their labels into y; `first` is this thread's index among
// `stride`. 32-bit indices (the batch is at most 2^31 floats, and FusedStep
// checks the dataset's pixel offsets): 64-bit divisions made this the
// kernel's largest piece of code. Out of line, for its two call sites.
__device__ __noinline__ void gather(const uint8_t* images, const int32_t* labels,
                                    const int32_t* idx, int count, int row, float* x, int32_t* y,
                                    int first, int stride) {
#pragma unroll 1
  for (int i = first; i < count; i += stride) y[i] = labels[idx[i]];
  const int total = count * row;
#pragma unroll 1
  for (int i = first; i < total; i += stride) {
    const int s = i / row, e = i - s * row;
    x[i] = __fdiv_rn(float(images[idx[s] * row + e]), 255.0f);
  }
}

// ---- the head ----------------------------------------------------------------------

// For each sample r (one block per sample, the grid's blocks in turn): its
// last hidden activations, from the forward's S split sums (S > 1: the
// forward product leaves them, `defer`, and the row is added here in split
// order, plus the bias, through the ReLU, and written to act[L−2] as the
// fix-up would; this saves the forward phase a count and a fix-up); the
// logits z = act[L−2][r]·W[L−1]ᵀ + b[L−1] (16 threads a class split k and
// add in a fixed butterfly); softmax cross-entropy as ce_sample_kernel
// computes it (first maximum, exp and the sum in double, softmax rounded to
// float), a lane per class, the maximum and the sum as butterflies; dlogits into dpre[L−1]; and dpre[L−2][r] =
// (dlogits·W[L−1]) ⊙ (act[L−2][r] > 0), a thread per element. Where they fit,
// W[L−1] and the sample's activations are first copied into the (idle) chunk
// ring together, and the label (gathered with the batch) read meanwhile: one
// trip to L2 for all.
constexpr int kHeadStage = kStages * (kSlotA + kSlotB);  // sm.a and sm.b, adjacent

// With `ready` (Net::head_chain) the row's forward items are waited for here,
// by count, once W[L−1]'s copy is on its way: ready[r / 16] reaches `want`.
// With rows_done, the row is counted there once written (a count per 16 rows),
// and with losses_done its loss, which is computed after that hand-off.
template <int P>
__device__ void head_row(const Net& net, Smem& sm, int r, int S, const int* ready = nullptr,
                         int want = 0, int* rows_done = nullptr, int* losses_done = nullptr) {
  const int tid = int(threadIdx.x), lane = tid % 32, wp = tid / 32;
  const int L = net.L, K = net.d[L - 1], C = net.d[L];
  float* act = net.act[L - 2] + (long long)r * K;
  const float* h = act;
  const float* W = net.w[L - 1];
  const bool staged = (long long)C * K + K <= kHeadStage;  // block-uniform
  float* stage = &sm.a[0][0];  // a and b are adjacent and idle in this phase
  if (staged)
    for (int i = tid; i < C * K; i += kThreads) cp_async4(stage + i, W + i, true);
  if (ready) wait_count(ready + r / kTMShort, want);
  if (staged) {
    if (S == 1)
      for (int i = tid; i < K; i += kThreads) cp_async4(stage + C * K + i, h + i, true);
    cp_commit();
  }
  if (S > 1) {  // the row from the last hidden layer's split sums, as product()'s fix-up would
    const int tn = (K + kTN - 1) / kTN;
    const float* bias = net.b[L - 2];
    for (int k = tid; k < K; k += kThreads) {
      constexpr int kTile = kTMShort * kTN;
      const long long tile = (r / kTMShort) * tn + k / kTN;
      const float* part =
          net.ws + net.ws0[L - 2] + tile * S * kTile + (r % kTMShort) * kTN + k % kTN;
      float pv[kMaxSplit];
#pragma unroll
      for (int q = 0; q < kMaxSplit; ++q) pv[q] = q < S ? __ldcg(part + q * kTile) : 0.0f;
      float v = 0.0f;
#pragma unroll
      for (int q = 0; q < kMaxSplit; ++q)
        if (q < S) v += pv[q];
      const float z = v + bias[k];
      const float y = z < 0.0f ? 0.0f : z;
      act[k] = y;  // for the last layer's weight gradient, and this block below if not staged
      if (staged) stage[C * K + k] = y;
    }
  }
  if (tid == 0) sm.flag = net.y[net.cur][r];  // while the copies fly
  if (staged) {
    cp_wait_all();
    W = stage;
    h = stage + C * K;
  }
  __syncthreads();
  trace(net, sm, kTrHeadStaged);
  // The logits: 16 threads a class, every class at once (16 classes a pass).
  for (int j0 = 0; j0 < C; j0 += kThreads / 16) {
    const int j = j0 + tid / 16, i = tid % 16;
    float part = 0.0f;
    if (j < C) {
      const float* wj = W + (long long)j * K;
      for (int k = i; k < K; k += 16) part = fmaf(op_round<P>(h[k]), op_round<P>(wj[k]), part);
    }
#pragma unroll
    for (int off = 8; off > 0; off >>= 1) part += __shfl_xor_sync(0xffffffffu, part, off);
    if (j < C && i == 0) sm.z[j] = part + net.b[L - 1][j];
  }
  __syncthreads();
  trace(net, sm, kTrHeadLogits);
  double loss_sum = 1.0, loss_m = 0.0;  // thread 0's, for the loss
  float loss_z = 0.0f;
  int loss_ok = 0;
  if (wp == 0) {  // lane j holds class j; the reductions are fixed butterflies
    const int label = sm.flag;
    const float z = lane < C ? sm.z[lane] : -INFINITY;
    float mz = z;  // the first maximum: the larger value, on a tie the smaller class
    int arg = lane < C ? lane : C;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
      const float oz = __shfl_xor_sync(0xffffffffu, mz, off);
      const int oa = __shfl_xor_sync(0xffffffffu, arg, off);
      if (oz > mz || (oz == mz && oa < arg)) {
        mz = oz;
        arg = oa;
      }
    }
    const double m = double(mz);
    const double e = lane < C ? exp(double(z) - m) : 0.0;
    double sum = e;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    const float zlabel = __shfl_sync(0xffffffffu, z, label);
    if (lane == 0) {  // the loss itself after the row's hand-off, below
      loss_sum = sum;
      loss_m = m;
      loss_z = zlabel;
      loss_ok = arg == label ? 1 : 0;
    }
    const double inv_sum = 1.0 / sum;
    if (lane < C) {
      const float softmax = float(e * inv_sum);
      const float gz = (softmax - (lane == label ? 1.0f : 0.0f)) * net.inv_n;
      net.dpre[L - 1][(long long)r * C + lane] = gz;
      sm.z[lane] = gz;  // dlogits, for the input gradient
    }
  }
  __syncthreads();
  trace(net, sm, kTrHeadLoss);
  float* dh = net.dpre[L - 2] + (long long)r * K;
  for (int k = tid; k < K; k += kThreads) {
    float s = 0.0f;
    for (int j = 0; j < C; ++j)
      s = fmaf(op_round<P>(sm.z[j]), op_round<P>(W[(long long)j * K + k]), s);
    dh[k] = h[k] > 0.0f ? s : 0.0f;
  }
  __syncthreads();  // sm.z, sm.flag and the stage are reused by the block's next sample
  if (rows_done && tid == 0) add_release(rows_done + r / kTMShort, 1);
  // The loss (a double log) after the hand-off, off the backward's path;
  // counted in losses_done for the block that adds up the batch's loss.
  if (tid == 0) {
    net.loss[r] = log(loss_sum) - (double(loss_z) - loss_m);
    net.correct[r] = loss_ok;
    if (losses_done) add_release(losses_done + r / kTMShort, 1);
  }
}

// Development aid: with a non-null net.times, block 0 stamps the global timer
// at the start and after each phase.
__device__ __forceinline__ void stamp(const Net& net, int& i) {
  if (kProbes && net.times && blockIdx.x == 0 && threadIdx.x == 0) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    net.times[i] = t;
  }
  ++i;
}

// ---- the step ------------------------------------------------------------------------

template <int P>
__global__ void __launch_bounds__(kThreads, 2) mlp_step_kernel(const Net net) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Smem& sm = *reinterpret_cast<Smem*>(smem_raw);
  const int L = net.L, n = net.n;
  const int gthread = int(blockIdx.x) * kThreads + int(threadIdx.x);
  const int gthreads = int(gridDim.x) * kThreads;
  const float* x = net.x[net.cur];
  if (threadIdx.x == 0) sm.trace_n = 0;
  auto barrier = [&]() {
    trace(net, sm, kTrArrive);
    grid_barrier(net.arrived);
    trace(net, sm, kTrPhase);
  };
  int ts = 0;
  stamp(net, ts);
  if (net.gather) {  // grid-uniform
    gather(net.images, net.labels, net.idx, n, net.d[0], net.x[net.cur], net.y[net.cur],
           gthread, gthreads);
    barrier();
  }
  stamp(net, ts);

  const int G = int(gridDim.x), b = int(blockIdx.x);
  // Forward through the hidden layers: chained by counts (net.chain), or a
  // grid barrier after each.
  for (int l = 0; l < L - 1; ++l) {
    const bool last = l == L - 2;
    const int tn = (net.d[l + 1] + kTN - 1) / kTN;
    Handoff ho;
    if (net.chain) {  // grid-uniform
      if (l > 0) ho.ready = net.counts + net.rd0[l - 1];
      if (!last || net.head_chain) {
        ho.done = net.counts + net.rd0[l];
        ho.done_tiles = last ? tn : kChunk / kTN;
        ho.done_stride = (tn + ho.done_tiles - 1) / ho.done_tiles;
      }
    }
    product<true, true, kEpiForward, kTMShort, P>(
        net, sm, 0, Operand{l == 0 ? x : net.act[l - 1], net.d[l]}, Operand{net.w[l], net.d[l]},
        n, net.d[l + 1], net.d[l],
        Epilogue{net.act[l], net.d[l + 1], net.b[l], nullptr, nullptr, nullptr}, last, ho, l);
    if (!net.chain || (last && !net.head_chain)) barrier();
    stamp(net, ts);
  }

  // The output layer, the loss and the first input gradient, a block per
  // sample; blocks left over gather the next batch. With head_chain the head
  // rows run on the last n blocks, which the last forward layer's items leave
  // free, each as soon as its rows are written; else on blocks 0.. after a
  // barrier.
  // (One call site each for head_row and gather: the code is large.)
  const int hb = net.head_chain ? G - n : 0;  // the first head block
  const int* ready = net.head_chain ? net.counts + net.rd0[L - 2] : nullptr;
  const int want = ((net.d[L - 1] + kTN - 1) / kTN) * net.head_splits;  // a row tile's items
  // With the chain, what follows (the middle layer's backward, or with one
  // hidden layer the last phase) starts on each block as soon as the rows it
  // needs are done, counted in head_rows.
  int* head_rows = net.chain ? net.counts + net.hr0 : nullptr;
  for (int r = b - hb; r >= 0 && r < n; r += G)
    head_row<P>(net, sm, r, net.head_splits, ready, want, head_rows,
             net.chain ? net.counts + net.lr0 : nullptr);
  const int gb = net.head_chain ? 0 : n, ge = net.head_chain ? hb : G;  // the gathering blocks
  const bool spare = ge > gb;  // grid-uniform: blocks gather the next batch here
  if (spare && net.next_idx && b >= gb && b < ge)
    gather(net.images, net.labels, net.next_idx, net.next_n, net.d[0], net.x[net.cur ^ 1],
           net.y[net.cur ^ 1], (b - gb) * kThreads + int(threadIdx.x), (ge - gb) * kThreads);
  if (!net.chain) barrier();
  stamp(net, ts);

  // Backward through the middle layers.
  int last_first = 0;
  for (int l = L - 2; l >= 1; --l) {
    const int out = net.d[l + 1], in = net.d[l];
    const int* rows = l == L - 2 ? head_rows : nullptr;  // else after a barrier
    // dpre[l−1] = (dpre[l]·W[l]) ⊙ (act[l−1] > 0): A(m, k) = dpre[l][m][k], B(i, k) = W[l][k][i]
    // Its items count the columns of W[l] they have read and wait for the head's
    // rows; with the chain, dpre[0]'s columns are counted for the last phase.
    int* cols = net.counts + net.col0[l];
    Handoff in_ho;
    in_ho.signal = cols;
    in_ho.rows = rows;
    if (net.chain && l == 1) {
      in_ho.done = net.counts + net.g0;
      in_ho.done_tiles = kChunk / kTN;  // done_stride 0: a count per 64 columns, all rows
    }
    const int first = product<true, false, kEpiMasked, kTMShort, P>(
        net, sm, 0, Operand{net.dpre[l], out}, Operand{net.w[l], in}, n, in, out,
        Epilogue{net.dpre[l - 1], in, nullptr, net.act[l - 1], nullptr, nullptr}, false, in_ho);
    // gW[l] = dpre[l]ᵀ·act[l−1]: A(j, r) = dpre[l][r][j], B(i, r) = act[l−1][r][i], with the
    // update of W[l]: each tile waits for all the input gradient's items of its column
    // tile (`first` items over that product's column tiles) to have read W[l]; and gb[l],
    // the update of b[l] (last read by this step's forward and head).
    Handoff gw_ho;
    gw_ho.wait = cols;
    gw_ho.target = first / ((in + kTN - 1) / kTN);
    gw_ho.rows = rows;
    gw_ho.rows_along_k = true;
    const int end = product<false, false, kEpiGradSgd, kTMTall, P>(
        net, sm, first, Operand{net.dpre[l], out}, Operand{net.act[l - 1], in}, out, in, n,
        Epilogue{net.gw[l], in, nullptr, nullptr, net.w[l], net.vw[l], net.gb[l], net.b[l],
                 net.vb[l]},
        false, gw_ho);
    // The blocks that took a second item here start the last phase's items last.
    if (l == 1) last_first = end % G;
    if (!net.chain || l > 1) barrier();
    stamp(net, ts);
  }

  // The last phase: the next batch (if no block was spare before), the first
  // and last layers' gradients with the update fused in, their biases', and
  // the batch's loss.
  // With the chain, each waits for what it reads: dpre[0] (from the middle
  // backward, or with one hidden layer from the head) and the head's rows.
  if (!spare && net.next_idx)
    gather(net.images, net.labels, net.next_idx, net.next_n, net.d[0], net.x[net.cur ^ 1],
           net.y[net.cur ^ 1], gthread, gthreads);
  if (b == max(G - 2, 0))  // the next step's hand-off counts (a block with few items)
    for (int i = int(threadIdx.x); i < net.counts_total; i += kThreads) net.counts_next[i] = 0;
  if (blockIdx.x == gridDim.x - 1) {  // block-uniform: the batch's loss, in a fixed order
    if (net.chain) wait_rows(net.counts + net.lr0, 0, n, n);
    double s = 0.0;
    int c = 0;
    for (int r = int(threadIdx.x); r < n; r += kThreads) {
      s += net.loss[r];
      c += net.correct[r];
    }
    sm.part[threadIdx.x] = s;
    sm.cnt[threadIdx.x] = c;
    __syncthreads();
    for (int half = kThreads / 2; half > 0; half >>= 1) {
      if (int(threadIdx.x) < half) {
        sm.part[threadIdx.x] += sm.part[threadIdx.x + half];
        sm.cnt[threadIdx.x] += sm.cnt[threadIdx.x + half];
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      net.acc[0] += sm.part[0];
      net.acc[1] += double(sm.cnt[0]);
    }
  }
  stamp(net, ts);
  // gW[L−1] = dpre[L−1]ᵀ·act[L−2] first (its rows, the head's, are done early),
  // then gW[0] = dpre[0]ᵀ·X: A(j, r) = dpre[0][r][j], B(i, r) = x[r][i]. One
  // call site, not unrolled: the product's code is large, and every copy of
  // it is fetched into the instruction cache as it runs (docs/fused-step.md).
  int first = last_first;
#pragma unroll 1
  for (int i = 0; i < 2; ++i) {
    const int l = i == 0 ? L - 1 : 0;  // the layer
    // gW[L−1] waits for the head's rows; gW[0] for dpre[0]'s columns (the
    // middle backward's) or, with one hidden layer, for the head's rows.
    Handoff ho;
    ho.rows = i == 0 || L == 2 ? head_rows : nullptr;
    ho.rows_along_k = true;
    ho.groups = i == 1 && net.chain && L >= 3 ? net.counts + net.g0 : nullptr;
    first = product<false, false, kEpiGradSgd, kTMTall, P>(
        net, sm, first, Operand{net.dpre[l], net.d[l + 1]},
        Operand{l == 0 ? x : net.act[l - 1], net.d[l]}, net.d[l + 1], net.d[l], n,
        Epilogue{net.gw[l], net.d[l], nullptr, nullptr, net.w[l], net.vw[l], net.gb[l], net.b[l],
                 net.vb[l]},
        false, ho);
  }
  stamp(net, ts);
  trace(net, sm, kTrEnd);
  if (kProbes && net.times) {
    barrier();
    stamp(net, ts);
  }
}

// The kernel for the operands of precision p.
const void* step_kernel(Precision p) {
  switch (p) {
    case Precision::kFp32: return reinterpret_cast<const void*>(mlp_step_kernel<kOpF32>);
    case Precision::kTf32: return reinterpret_cast<const void*>(mlp_step_kernel<kOpTf32>);
    case Precision::kBf16: return reinterpret_cast<const void*>(mlp_step_kernel<kOpBf16>);
  }
  throw RuntimeError(str("fused MLP step: unknown precision ", int(p)));
}

}  // namespace

struct MlpStep::State {
  Net net;
  const void* kernel = nullptr;  // step_kernel(the precision)
  int blocks = 0, max_batch = 0;
  Tensor acts, dpres, loss, correct, x, y, ws, tile_count, arrived, counts;
  // Which samples the previous run gathered for its successor, into x[buf].
  struct Ready {
    bool valid = false;
    const uint8_t* images = nullptr;
    const int32_t* labels = nullptr;
    const int32_t* idx = nullptr;
    int n = 0, buf = 0;
    uint64_t version = 0;
  } ready;
  int parity = 0;  // which set of hand-off counts the next step uses
  bool timing = false;  // HPMC_FUSED_TIMING was set when the step was built
  Tensor times;         // then: the phase stamps of the last step
  std::string trace_path;  // HPMC_FUSED_TRACE: where the 30th step's trace goes
  long long runs = 0;
};

MlpStep::MlpStep(const MlpStepDesc& d) : s_(std::make_unique<State>()) {
  const int L = int(d.dims.size()) - 1;
  HPMC_CHECK(L >= 2 && L <= kMlpStepMaxLayers, "fused MLP step: ", L, " layers (2 to ",
             kMlpStepMaxLayers, " supported)");
  HPMC_CHECK(d.dims[L] >= 1 && d.dims[L] <= kMlpStepMaxClasses, "fused MLP step: ", d.dims[L],
             " classes (at most ", kMlpStepMaxClasses, ")");
  HPMC_CHECK(int(d.w.size()) == L && int(d.b.size()) == L && int(d.gw.size()) == L &&
                 int(d.gb.size()) == L,
             "fused MLP step: pointers for ", d.w.size(), " layers, dims for ", L);
  HPMC_CHECK(d.max_batch >= 1, "fused MLP step: max batch ", d.max_batch);
  std::string why;
  if (!mlp_step_supported(&why, d.precision)) throw RuntimeError("fused MLP step: " + why);
  Net& net = s_->net;
  s_->kernel = step_kernel(d.precision);
  net.L = L;
  net.momentum = d.momentum != 0.0f;
  net.lr = d.lr;
  lr_ = d.lr;
  net.mu = d.momentum;
  net.wd = d.weight_decay;
  // Each buffer starts on 16 bytes, for the 16-byte copies.
  auto round4 = [](size_t v) { return (v + 3) & ~size_t(3); };
  size_t act_elems = 0, dpre_elems = 0;
  for (int l = 0; l <= L; ++l) {
    HPMC_CHECK(d.dims[l] >= 1, "fused MLP step: layer width ", d.dims[l]);
    net.d[l] = d.dims[l];
  }
  for (int l = 0; l < L; ++l) {
    net.w[l] = d.w[l];
    net.b[l] = d.b[l];
    net.gw[l] = d.gw[l];
    net.gb[l] = d.gb[l];
    if (net.momentum) {
      HPMC_CHECK(l < int(d.vw.size()) && l < int(d.vb.size()) && d.vw[l] && d.vb[l],
                 "fused MLP step: momentum without its buffers");
      net.vw[l] = d.vw[l];
      net.vb[l] = d.vb[l];
    }
    dpre_elems += round4(size_t(d.max_batch) * d.dims[l + 1]);
    if (l < L - 1) act_elems += round4(size_t(d.max_batch) * d.dims[l + 1]);
  }
  auto floats = [](size_t n) {
    HPMC_CHECK(n < size_t(1) << 31, "fused MLP step: a workspace of ", n, " floats");
    return Tensor::empty(Shape(int(n), 1, 1, 1), DType::kF32, Device::kGPU);
  };
  s_->acts = floats(act_elems);
  s_->dpres = floats(dpre_elems);
  const size_t xs = round4(size_t(d.max_batch) * size_t(d.dims[0]));
  s_->x = floats(2 * xs);
  s_->y = Tensor::empty(Shape(2 * d.max_batch, 1, 1, 1), DType::kI32, Device::kGPU);
  // The split workspaces and tile counts, one per forward layer.
  const int row_tiles = (d.max_batch + kTMShort - 1) / kTMShort;
  int all_tiles = 0;
  for (int l = 0; l < L - 1; ++l) {
    net.ws0[l] = (long long)all_tiles * kMaxSplit * kTMShort * kTN;
    net.tc0[l] = all_tiles;
    all_tiles += row_tiles * ((d.dims[l + 1] + kTN - 1) / kTN);
  }
  s_->ws = floats(size_t(all_tiles) * kMaxSplit * kTMShort * kTN);
  s_->tile_count = Tensor::zeros(Shape(all_tiles, 1, 1, 1), DType::kI32, Device::kGPU);
  s_->loss = Tensor::empty(Shape(d.max_batch, 1, 1, 1), DType::kF64, Device::kGPU);
  s_->correct = Tensor::empty(Shape(d.max_batch, 1, 1, 1), DType::kI32, Device::kGPU);
  float* ap = s_->acts.data<float>();
  float* dp = s_->dpres.data<float>();
  for (int l = 0; l < L; ++l) {
    net.dpre[l] = dp;
    dp += round4(size_t(d.max_batch) * d.dims[l + 1]);
    if (l < L - 1) {
      net.act[l] = ap;
      ap += round4(size_t(d.max_batch) * d.dims[l + 1]);
    }
  }
  net.x[0] = s_->x.data<float>();
  net.x[1] = net.x[0] + xs;
  net.y[0] = s_->y.data<int32_t>();
  net.y[1] = net.y[0] + d.max_batch;
  net.loss = s_->loss.data<double>();
  net.correct = s_->correct.data<int32_t>();
  net.ws = s_->ws.data<float>();
  net.tile_count = s_->tile_count.data<int32_t>();
  for (int l = 1; l < L - 1; ++l) {
    net.col0[l] = net.counts_total;
    net.counts_total += (d.dims[l] + kTN - 1) / kTN;
  }
  for (int l = 0; l < L - 1; ++l) {
    net.rd0[l] = net.counts_total;
    net.counts_total += row_tiles * (l < L - 2 ? (d.dims[l + 1] + kChunk - 1) / kChunk : 1);
  }
  net.hr0 = net.counts_total;
  net.counts_total += row_tiles;
  net.g0 = net.counts_total;
  net.counts_total += (d.dims[1] + kChunk - 1) / kChunk;
  net.lr0 = net.counts_total;
  net.counts_total += row_tiles;
  s_->counts = Tensor::zeros(Shape(2 * net.counts_total, 1, 1, 1), DType::kI32, Device::kGPU);
  s_->arrived = Tensor::zeros(Shape(1, 1, 1, 1), DType::kF64, Device::kGPU);  // a u64 count
  net.arrived = reinterpret_cast<unsigned long long*>(s_->arrived.data<double>());

  int dev = 0, sms = 0, per_sm = 0;
  HPMC_CUDA_CHECK(cudaGetDevice(&dev));
  HPMC_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  HPMC_CUDA_CHECK(cudaFuncSetAttribute(s_->kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       int(sizeof(Smem))));
  HPMC_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, s_->kernel, kThreads,
                                                                sizeof(Smem)));
  HPMC_CHECK(per_sm >= 1, "fused MLP step: the kernel does not fit on a multiprocessor");
  // Two blocks per multiprocessor where they fit: 16 warps hide more latency
  // than 8, at a slightly dearer grid barrier.
  s_->blocks = sms * std::min(per_sm, 2);
  s_->max_batch = d.max_batch;
  const char* timing = std::getenv("HPMC_FUSED_TIMING");
  const char* trace = std::getenv("HPMC_FUSED_TRACE");
  if (kProbes) {
    s_->timing = timing != nullptr;
    if (trace) s_->trace_path = trace;
  } else if (timing || trace) {
    std::fprintf(stderr,
                 "hpmc: HPMC_FUSED_TIMING and HPMC_FUSED_TRACE are ignored: this build has no "
                 "fused-step probes (configure with -DHPMC_FUSED_PROBES=ON)\n");
  }
  const char* chain = std::getenv("HPMC_FUSED_CHAIN");
  net.chain = !(chain && std::string(chain) == "0");
}

MlpStep::~MlpStep() = default;

int MlpStep::blocks() const { return s_->blocks; }

void MlpStep::run(const uint8_t* images, const int32_t* labels, const int32_t* idx, int n,
                  uint64_t order_version, double* acc, const int32_t* next_idx, int next_n) {
  HPMC_CHECK(n >= 0 && n <= s_->max_batch && next_n >= 0 && next_n <= s_->max_batch,
             "fused MLP step: batch ", n, ", next ", next_n, " (at most ", s_->max_batch, ")");
  if (n == 0) return;
  Net net = s_->net;
  net.lr = lr_;
  net.n = n;
  net.inv_n = float(1.0 / double(n));  // the loss's scale (losses.cu)
  {  // as product() splits the last hidden layer's forward, whose sums head_row adds
    const int L = net.L;
    const int tiles = ((n + kTMShort - 1) / kTMShort) * ((net.d[L - 1] + kTN - 1) / kTN);
    const int chunks = net.d[L - 2] > kChunk ? (net.d[L - 2] + kChunk - 1) / kChunk : 1;
    int cps = 0;
    item_splits(true, tiles, chunks, s_->blocks, net.head_splits, cps);
    net.head_chain = net.chain && tiles * net.head_splits + n <= s_->blocks;
  }
  net.images = images;
  net.labels = labels;
  net.idx = idx;
  net.acc = acc;
  State::Ready& r = s_->ready;
  const bool ready = r.valid && r.images == images && r.labels == labels && r.idx == idx && r.n == n &&
                     r.version == order_version;
  net.cur = ready ? r.buf : 0;
  net.gather = ready ? 0 : 1;
  r.valid = next_n > 0 && next_idx;
  if (r.valid) {
    net.next_idx = next_idx;
    net.next_n = next_n;
    r = State::Ready{true, images, labels, next_idx, next_n, net.cur ^ 1, order_version};
  }
  const bool timing = s_->timing;
  if (timing) {
    if (s_->times.numel() == 0)
      s_->times = Tensor::zeros(Shape(2 * kMlpStepMaxLayers + 8, 1, 1, 1), DType::kF64, Device::kGPU);
    net.times = reinterpret_cast<unsigned long long*>(s_->times.data<double>());
  }
  Tensor trace;
  const bool tracing = !s_->trace_path.empty() && ++s_->runs == 30;
  if (tracing) {  // development aid: every block's events of this step, to a file
    trace = Tensor::zeros(Shape(s_->blocks * kTraceCap * 3, 1, 1, 1), DType::kF64, Device::kGPU);
    net.trace = reinterpret_cast<unsigned long long*>(trace.data<double>());
  }
  int32_t* counts = s_->counts.data<int32_t>();
  net.counts = counts + s_->parity * net.counts_total;
  net.counts_next = counts + (s_->parity ^ 1) * net.counts_total;
  s_->parity ^= 1;
  void* args[] = {&net};
  HPMC_CUDA_CHECK(cudaLaunchCooperativeKernel(s_->kernel, dim3(unsigned(s_->blocks)),
                                              dim3(kThreads), args, sizeof(Smem), nullptr));
  HPMC_CUDA_LAUNCH_CHECK("fused MLP step kernel");
  if (tracing) {
    Tensor h = trace.to_device(Device::kCPU);
    const auto* r = reinterpret_cast<const unsigned long long*>(h.data<double>());
    if (FILE* f = std::fopen(s_->trace_path.c_str(), "w")) {
      for (int b = 0; b < s_->blocks; ++b)
        for (int i = 0; i < kTraceCap; ++i) {
          const unsigned long long* e = r + 3 * ((long long)b * kTraceCap + i);
          if (e[0]) std::fprintf(f, "%d %llu %llu %llu\n", b, e[0], e[1], e[2]);
        }
      std::fclose(f);
    }
  }
  if (timing) {  // development aid: microseconds of each phase, to stderr
    Tensor h = s_->times.to_device(Device::kCPU);
    const auto* t = reinterpret_cast<const unsigned long long*>(h.data<double>());
    const int phases = 2 * (net.L - 1) + 4;
    std::fprintf(stderr, "fused step phases (us, gather first):");
    for (int i = 1; i <= phases; ++i) std::fprintf(stderr, " %.2f", (t[i] - t[i - 1]) * 1e-3);
    std::fprintf(stderr, "\n");
  }
}

bool mlp_step_supported(std::string* why, Precision precision) {
  if (device_count() == 0) {
    if (why) *why = "no CUDA device is visible";
    return false;
  }
  int dev = 0, coop = 0;
  HPMC_CUDA_CHECK(cudaGetDevice(&dev));
  if (precision != Precision::kFp32) {
    int major = 0, minor = 0;
    HPMC_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    HPMC_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    if (major < 8) {
      if (why)
        *why = str("training.precision ", precision_name(precision),
                   " needs tensor cores of compute capability 8.0 or newer; GPU ", dev, " is ",
                   major, ".", minor);
      return false;
    }
  }
  HPMC_CUDA_CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev));
  if (!coop) {
    if (why) *why = "the device cannot launch cooperative kernels";
    return false;
  }
  int smem = 0;
  HPMC_CUDA_CHECK(cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  if (size_t(smem) < sizeof(Smem)) {
    if (why)
      *why = "the device has " + std::to_string(smem / 1024) + " KB of shared memory per block, " +
             "the fused step needs " + std::to_string((sizeof(Smem) + 1023) / 1024) + " KB";
    return false;
  }
  return true;
}

}  // namespace hpmc::gpu
