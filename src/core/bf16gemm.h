// bf16gemm.h — GEMM with bfloat16 operands and FP32 sums (training.precision:
// bf16 on the CPU).
//
// C[M×N] = alpha · op(Â)[M×K] · op(B̂)[K×N] + beta · C, with the layout and
// arguments of sgemm (sgemm.h: row-major, leading dimensions, op(X) = X or
// X^T, beta == 0 does not read C), where Â and B̂ are A and B rounded to
// bf16 by bf16.h's rule. The product of two bf16 values is exact in FP32;
// the products are summed, and alpha and beta applied, in FP32.
//
// Three paths, chosen once per process (HPMC_BF16_GEMM=amx|avx512_bf16|
// fallback|auto forces one; auto, the default, takes the first the machine
// can run):
//   * amx: hpmc's kernel on AMX tiles (bf16gemm_amx.cpp, Sapphire Rapids and
//     later): A and B rounded to bf16 as they are packed into 16 × 32-bf16
//     tiles, multiplied by TDPBF16PS into 16 × 16 FP32 accumulator tiles.
//     Taken when the CPU has AMX-TILE and AMX-BF16 (with AVX512_BF16, which
//     its packs use), the OS enables the tile state and Linux grants this
//     process the tile data (arch_prctl ARCH_REQ_XCOMP_PERM, asked once);
//     bf16gemm_amx_missing() says which of these failed. Each call loads its
//     thread's tile configuration and releases the tiles on return (the CIFAR
//     AE's bf16 step: 0.48x its fp32 step on a 16-core Xeon;
//     docs/PERFORMANCE.md#cpu-bf16).
//   * avx512_bf16: hpmc's packed, cache-blocked kernel (bf16gemm_avx512.cpp),
//     which rounds A and B to bf16 while packing them and multiplies with
//     vdpbf16ps (two products added into each FP32 lane per instruction).
//     Taken when the CPU has AVX512_BF16 (with F, VL, BW, DQ), whatever
//     -march the binary was built with.
//   * fallback: A and B rounded to bf16 into float copies, then sgemm.
// All three multiply the same operands, so they form the same products; only
// the order and the FP32 rounding of the sums differ (vdpbf16ps and
// TDPBF16PS treat denormal sums as zero), within FP32's K·u. Their bits may
// therefore differ from one path to another. Each call runs on the calling
// thread only; hpmc threads around it.
//
// Determinism: on the amx and avx512_bf16 paths, each element of C is summed
// over k in an order fixed by K alone, whatever M, N, the leading dimensions
// or the tile it falls in, so splitting a product by rows or columns over
// several calls gives the same bits as one call (tests/test_bf16.cpp checks
// both on the machine it runs on).
//   * avx512_bf16: K is taken in pairs (k, k+1), one vdpbf16ps each, the
//     pairs cut into near-equal blocks by K alone, each block summed in
//     registers and then added to C.
//   * amx: K is taken in tiles of 32 values (k = 32t .. 32t+31, zeros past
//     K), one TDPBF16PS each, all added into one FP32 accumulator in the
//     order t = 0, 1, ...; the cache blocking over K only stores the
//     accumulator and loads it back (exactly), and alpha · acc + beta · C is
//     applied once at the end. Within a tile the instruction's own summation
//     order and rounding apply (Intel defines them per element of C, from its
//     row of A and column of B alone).
// The fallback is as deterministic as sgemm.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

namespace hpmc {

enum class Bf16GemmPath { kAmx, kAvx512Bf16, kFallback };

// The path bf16gemm() takes: HPMC_BF16_GEMM's, or amx where
// bf16gemm_amx_supported(), else avx512_bf16 where
// bf16gemm_avx512_supported(), else fallback. Decided on first use (a path
// the machine cannot run, or an unknown name, is an error then).
Bf16GemmPath bf16gemm_path();
const char* bf16gemm_path_name(Bf16GemmPath p);
// Whether this CPU (and OS) can run the avx512_bf16 path.
bool bf16gemm_avx512_supported();
// Whether this CPU and OS can run the amx path (the first call asks Linux
// for the tile data); bf16gemm_amx_missing() says why not, in a few words,
// or is empty where it can.
bool bf16gemm_amx_supported();
const char* bf16gemm_amx_missing();

void bf16gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
              int lda, const float* b, int ldb, float beta, float* c, int ldc);

// Each path directly, for tests and benchmarks. bf16gemm_avx512 requires
// bf16gemm_avx512_supported(); bf16gemm_amx throws where
// !bf16gemm_amx_supported().
void bf16gemm_amx(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                  int lda, const float* b, int ldb, float beta, float* c, int ldc);
void bf16gemm_avx512(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                     int lda, const float* b, int ldb, float beta, float* c, int ldc);
void bf16gemm_fallback(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                       const float* a, int lda, const float* b, int ldb, float beta, float* c,
                       int ldc);

// An A operand packed once for several products with it: op(A) rounded to
// bf16 and laid out as one path's kernel reads it (avx512_bf16's micro-panels
// or amx's tiles: bf16gemm_avx512.cpp, bf16gemm_amx.cpp), so that a product
// with many B — a convolution's weights with each image's column matrix —
// packs A once instead of once a call. A product with a packed A gives the
// bits its path's unpacked call gives for the same operands. The words are
// grown on demand and kept for the next pack into the same object; packing
// is the only writer, products only read them (several threads may share one
// packed A).
struct Bf16PackedA {
  struct Free {
    void operator()(uint32_t* p) const { std::free(p); }
  };
  Bf16GemmPath path = Bf16GemmPath::kFallback;  // the layout: the path that packed it
  bool trans = false;  // A was given transposed: op(A) = A^T
  int m = 0, k = 0;    // op(A) is m × k
  std::unique_ptr<uint32_t[], Free> words;  // 64-byte aligned
  size_t capacity = 0;                      // words allocated

  // Records that `packer` packs an m × k op(A) (transposed: A was given
  // transposed) into `count` words and returns them, 64-byte aligned (the
  // ones held where they suffice, else new ones: the old are dropped, not
  // copied); null where m or k is 0 or less: no words, a product with it
  // only scales C.
  uint32_t* start(Bf16GemmPath packer, bool transposed, int rows, int depth, size_t count);
};

// Whether bf16gemm_path() multiplies a packed A (amx, avx512_bf16: yes;
// fallback: no).
bool bf16gemm_packs_a();
// Packs op(A) (m × k; A as bf16gemm takes it) into `out` in the layout of
// bf16gemm_path(); requires bf16gemm_packs_a(): elsewhere, call bf16gemm
// with A each time.
void bf16gemm_pack_a(bool trans_a, int m, int k, const float* a, int lda, Bf16PackedA& out);
// The words bf16gemm_pack_a keeps for an m × k op(A) (0 where
// !bf16gemm_packs_a()), for memory estimates.
size_t bf16gemm_packed_a_words(int m, int k);
// C[M×N] = alpha · op(Â) · op(B̂) + beta · C for a packed op(A) (M = a.m,
// K = a.k), on the path that packed it (a.path).
void bf16gemm_packed_a(const Bf16PackedA& a, bool trans_b, int n, float alpha, const float* b,
                       int ldb, float beta, float* c, int ldc);

// The same for each packing path directly, for tests and benchmarks (each
// requires its path's support; a product checks the pack's layout).
void bf16gemm_avx512_pack_a(bool trans_a, int m, int k, const float* a, int lda,
                            Bf16PackedA& out);
size_t bf16gemm_avx512_packed_a_words(int m, int k);
void bf16gemm_avx512_packed_a(const Bf16PackedA& a, bool trans_b, int n, float alpha,
                              const float* b, int ldb, float beta, float* c, int ldc);
// bf16gemm_amx_pack_a needs only AVX512_BF16 (its packs), so that tests
// can check its layout anywhere.
void bf16gemm_amx_pack_a(bool trans_a, int m, int k, const float* a, int lda, Bf16PackedA& out);
size_t bf16gemm_amx_packed_a_words(int m, int k);
void bf16gemm_amx_packed_a(const Bf16PackedA& a, bool trans_b, int n, float alpha,
                           const float* b, int ldb, float beta, float* c, int ldc);

// A B operand read from memory row by row through shifts and masks, instead
// of made whole first: the column matrix of a stride-1 convolution whose
// output is as wide as its input, read straight from the image (conv2d_ops.h)
// rather than copied out by im2col. "Stored" is B as bf16gemm takes it (K ×
// N, or N × K where trans_b). Stored row i = g·group + t (g: an input
// channel, t: a kernel tap) holds, at column j, x[g·group_stride + offset[t]
// + j] where bit j of the tap's mask (words mask[t·mask_words ..], bit j of
// word j / 64 at j % 64) is set, and 0 where it is not. Masked-off positions
// are never read (AVX-512 masked loads), so they may lie outside x. The
// masks hold at least ⌈columns / 64⌉ + 2 words, zero past the columns (the
// packs read mask bits up to 47 past the last column, and use none of them).
struct Bf16ShiftedB {
  const float* x = nullptr;
  int group = 1;                     // stored rows per group (a channel's taps)
  ptrdiff_t group_stride = 0;        // floats from one group's data to the next
  const ptrdiff_t* offset = nullptr;  // [group]: each tap's shift
  const uint64_t* mask = nullptr;     // [group][mask_words]
  int mask_words = 0;
};

// Whether bf16gemm_path() reads a Bf16ShiftedB (avx512_bf16: yes; amx,
// fallback: no, make B whole and call the forms above).
bool bf16gemm_takes_shifted_b();
// bf16gemm and bf16gemm_packed_a with B from `b`: the bits of the same call
// with B made whole first (the same words are packed). Require
// bf16gemm_takes_shifted_b() (the packed form: an A packed by that path).
void bf16gemm_shifted_b(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                        const float* a, int lda, const Bf16ShiftedB& b, float beta, float* c,
                        int ldc);
void bf16gemm_packed_a_shifted_b(const Bf16PackedA& a, bool trans_b, int n, float alpha,
                                 const Bf16ShiftedB& b, float beta, float* c, int ldc);
// The avx512_bf16 path's forms directly, for tests (requires
// bf16gemm_avx512_supported()).
void bf16gemm_avx512_shifted_b(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                               const float* a, int lda, const Bf16ShiftedB& b, float beta,
                               float* c, int ldc);
void bf16gemm_avx512_packed_a_shifted_b(const Bf16PackedA& a, bool trans_b, int n, float alpha,
                                        const Bf16ShiftedB& b, float beta, float* c, int ldc);

// hpmc bench's measured peak of the amx path: `iters` rounds of four
// independent TDPBF16PS (16 × 16 × 32 multiply-adds each: 65,536 FLOPs a
// round) on the calling thread; returns a value that depends on all of them.
// Requires bf16gemm_amx_supported().
float bf16gemm_amx_peak_loop(long iters);

// For tests: the amx path with its tile kernel replaced by scalar code that
// follows Intel's pseudo-code for TDPBF16PS (bf16gemm_amx.cpp) — the same
// packs, loops and stores, without tile instructions, so it runs wherever
// bf16gemm_avx512_supported(). Its bits need not be the hardware's.
void bf16gemm_amx_emulated(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                           const float* a, int lda, const float* b, int ldb, float beta, float* c,
                           int ldc);
void bf16gemm_amx_emulated_packed_a(const Bf16PackedA& a, bool trans_b, int n, float alpha,
                                    const float* b, int ldb, float beta, float* c, int ldc);

}  // namespace hpmc
