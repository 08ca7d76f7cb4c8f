// bf16gemm_amx.cpp — hpmc's bf16 GEMM on AMX tiles (Sapphire Rapids and
// later; see bf16gemm.h), and the check that this machine may run it.
//
// C[M×N] = alpha · op(Â)[M×K] · op(B̂)[K×N] + beta · C, Â and B̂ the operands
// rounded to bf16 as they are packed (bf16_pack_avx512.h: vcvtne2ps2bf16,
// bf16.h's rule), multiplied by TDPBF16PS.
//
// The tiles: one configuration (palette 1) for every call, all eight tiles
// 16 rows of 64 bytes.
//   tmm0-3  C: 16 × 16 FP32 accumulators; tmm(2·mi + ni) holds rows 16·mi..
//           and columns 16·ni.. of a 32 × 32 block of C (mi, ni = 0 or 1);
//   tmm4-5  A, rows 0-15 and 16-31 of the block: row i holds 32 bf16,
//           op(Â)(i, 32t .. 32t+31), as 16 pairs;
//   tmm6-7  B, columns 0-15 and 16-31 of the block: row p holds 16 pairs,
//           (op(B̂)(32t+2p, j), op(B̂)(32t+2p+1, j)) for 16 columns j.
// A PAIR is two bf16 neighbours along K in a 32-bit word, the even k in the
// low half (bf16_pack_avx512.h). TDPBF16PS tmm_c, tmm_a, tmm_b adds, for
// every row i and column j, Σ_p a[i][p].lo·b[p][j].lo + a[i][p].hi·b[p][j].hi
// into c[i][j]: 16 pairs, 32 values of k, per instruction. tmm4 meets tmm6
// and tmm7 into tmm0 and tmm1, tmm5 meets them into tmm2 and tmm3.
//
// The packs hold whole tiles of 256 words (1 KiB: 16 rows of 64 bytes),
// which tileloadd reads with a 64-byte stride; KT = ⌈K/32⌉ tiles cover K.
//   Ap: op(Â) in 16-row panels, each panel's KT tiles side by side: tile
//       (q, t) of rows 16q.. at Ap + (q·KT + t)·256, its row i at + 16·i.
//   Bp: op(B̂) for one block of columns, in 16-column panels, the same way:
//       tile (q, t) at Bp + (q·KT + t)·256, its row p at + 16·p. A panel is
//       thus 16 pairs a row over all of K, pair p of column j at word
//       16·p + j: the avx512_bf16 kernel's B micro-panel at NR = 16, which
//       the same packs fill (and then zeros up to KT·16 rows).
// Rows past M, columns past N and k past K are zeros, so every tile is
// whole; only the store to C is masked.
//
// The loops:
//   pack all of op(A) → Ap (or take it packed: Bf16PackedA, the same words)
//   for jc in N by kNC:
//     pack op(B)[all k, jc..] → Bp
//     for ic in M by kMC:
//       for tc in K's tiles by kKT:
//         for ir in MC by 32, jr in NC by 32:
//           tile_kernel: the 32 × 32 block's accumulators (fewer tiles at
//           the edges) start at zero in the first K block, else are loaded
//           from acc; they take the block's K tiles in order and are stored
//           to acc; after the last K block, C = alpha · acc + beta · C.
// acc holds the MC × NC block's FP32 accumulators between K blocks, a
// 32 × 32 array per block of C. Storing and loading them is exact, so each
// element of C gets the sum of one pass over t = 0 .. KT-1, whatever kKT,
// kMC, kNC, M, N, the leading dimensions or whether A came packed
// (bf16gemm.h, determinism).
//
// The block sizes are a first choice, not tuned (docs/PERFORMANCE.md#cpu-bf16:
// 8% of the tile peak over the CIFAR step on a 16-core Xeon): kKT = 16 tiles
// make 32 KiB of a pair of A panels (L1), and with kNC = 256 columns 256 KiB
// of Bp (L2); acc is kMC·kNC·4 = 128 KiB. Ap holds
// all of op(A) in bf16, half the bytes of A's floats (the fallback copies A
// whole as floats), and Bp all of K for kNC columns, in buffers each thread
// keeps for its next call.
//
// bf16gemm_amx_emulated runs the same packs, loops and stores with the tile
// kernel replaced by scalar code that does what Intel's pseudo-code for
// TDPBF16PS says, so that tests check all but the tile instructions on
// machines without AMX.
//
// Every function here carries a target attribute instead of relying on the
// build's -march. bf16gemm.cpp calls in only where bf16gemm_amx_supported(),
// and the entry points check it again: a tile instruction before Linux has
// granted the tile data kills the process.
#include "core/bf16gemm.h"

#include <string>

#include "core/error.h"

// AMX intrinsics came with GCC 11 and Clang 12, the tile data permission
// with Linux 5.16 (checked at run time).
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && \
    ((defined(__clang__) && __clang_major__ >= 12) || (!defined(__clang__) && __GNUC__ >= 11))

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which
// -Wmaybe-uninitialized reports once inlined (GCC bug 105593, fixed in
// GCC 13). Quieted for this file only, as in sgemm_avx512.cpp.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/bf16.h"
#include "core/bf16_pack_avx512.h"
#include "core/gemm_avx512_common.h"

#define HPMC_AMX                                                                \
  __attribute__((                                                               \
      target("amx-tile,amx-bf16,avx512f,avx512vl,avx512bw,avx512dq,avx512bf16," \
             "avx2,fma")))

// tileloadd, with a "memory" clobber: GCC 12's _tile_loadd names no memory
// operand, so the compiler would not know that it reads the packs and acc.
#define HPMC_TILE_LOAD(tmm, base, stride) \
  __asm__ volatile("tileloadd (%0,%1,1), %%tmm" #tmm ::"r"(base), "r"(long(stride)) : "memory")

namespace hpmc {

namespace {

using bf16_pack::low_mask16;
using bf16_pack::pack_cols;
using bf16_pack::pack_rows8;
using bf16_pack::transpose8x16;
using gemm_avx512::scale_c;

// ---- may this machine run it -------------------------------------------------

// Linux's arch_prctl request for an XSAVE component (asm/prctl.h, Linux
// 5.16) and the tile data's component number.
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

// Why the amx path cannot run here, or "" where it can: the CPU's features,
// the OS's XSAVE state, then Linux's permission for the tile data, which
// holds for the whole process (every thread, those started later too).
std::string find_amx_missing() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  // CPUID leaf 7, subleaf 0: EDX bit 22 AMX-BF16, bit 24 AMX-TILE.
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) d = 0;
  const bool tile = d & (1u << 24), bf16 = d & (1u << 22);
  if (!tile || !bf16)
    return str("this CPU lacks ", !tile && !bf16 ? "AMX-TILE and AMX-BF16"
                                  : !tile        ? "AMX-TILE"
                                                 : "AMX-BF16");
  if (!bf16gemm_avx512_supported())
    return "this CPU lacks AVX512_BF16 (with F, VL, BW, DQ), which the amx path's packs use";
  // XGETBV needs OSXSAVE (CPUID leaf 1, ECX bit 27); XCR0 bits 17 and 18 are
  // the tile configuration and data states, which the OS must save.
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return "the OS has not enabled XSAVE";
  unsigned xcr0 = 0, xcr0_high = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0), "=d"(xcr0_high) : "c"(0));
  (void)xcr0_high;
  if ((xcr0 & (3u << 17)) != (3u << 17))
    return "the OS does not enable the AMX tile state (XCR0 bits 17, 18: Linux 5.16 or later)";
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0)
    return str("Linux refused this process the AMX tile data (arch_prctl ARCH_REQ_XCOMP_PERM: ",
               std::strerror(errno), ")");
  return "";
}

const std::string& amx_missing() {
  static const std::string why = find_amx_missing();
  return why;
}

void require_amx(const char* what) {
  if (!bf16gemm_amx_supported())
    throw RuntimeError(
        str(what, ": hpmc's AMX bf16 GEMM cannot run here: ", bf16gemm_amx_missing()));
}

void require_packs(const char* what) {
  if (!bf16gemm_avx512_supported())
    throw RuntimeError(str(what, ": this CPU lacks AVX512_BF16, which the amx path's packs use"));
}

// ---- the tiles ---------------------------------------------------------------

constexpr int kTileWords = 256;     // a packed tile: 16 rows of 16 words
constexpr long kTileRowBytes = 64;  // its rows' stride
constexpr int kBlock = 32;          // a block of C: 2 × 2 tiles
constexpr long kAccRowBytes = kBlock * sizeof(float);  // acc's rows' stride: 128 bytes

// LDTILECFG's 64-byte operand: palette 1; tiles 0-7 each 16 rows of 64
// bytes (C: 16 FP32, A: 32 bf16, B: 16 pairs a row); tiles 8-15 unused, so
// zero; start_row and the reserved bytes zero, as the instruction requires.
struct alignas(64) TileConfig {
  uint8_t palette_id;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];  // bytes per row, tile by tile
  uint8_t rows[16];    // rows, tile by tile
};
static_assert(sizeof(TileConfig) == 64 && offsetof(TileConfig, colsb) == 16 &&
                  offsetof(TileConfig, rows) == 48,
              "LDTILECFG's layout");

constexpr TileConfig kTileConfig = {
    1, 0, {}, {64, 64, 64, 64, 64, 64, 64, 64}, {16, 16, 16, 16, 16, 16, 16, 16}};

// The calling thread's tiles configured for the kernel (the configuration is
// per thread, so every call loads it), and released on leaving, by an
// exception too: released tiles are back in their initial state, which the
// OS need not save.
class TileScope {
 public:
  HPMC_AMX explicit TileScope(bool use_tiles) : on_(use_tiles) {
    if (on_) _tile_loadconfig(&kTileConfig);
  }
  HPMC_AMX ~TileScope() {
    if (on_) _tile_release();
  }
  TileScope(const TileScope&) = delete;
  TileScope& operator=(const TileScope&) = delete;

 private:
  bool on_;
};

// acc (a 32 × 32 FP32 block, 128-byte rows) ← its accumulators plus
// Ap · Bp over kt K tiles, on MT × NT C tiles (MT, NT = 1 or 2): a[mi] is
// the first A tile of rows 16·mi.. of the block, b[ni] the first B tile of
// columns 16·ni..; the tiles of a panel follow one another 256 words apart.
// The accumulators start at zero where `first`, else from acc.
template <int MT, int NT>
HPMC_AMX void tile_kernel(int kt, const uint32_t* const a[2], const uint32_t* const b[2],
                          bool first, float* acc) {
  float* const acc00 = acc;
  float* const acc01 = acc + 16;
  float* const acc10 = acc + 16 * kBlock;
  float* const acc11 = acc + 16 * kBlock + 16;
  if (first) {
    _tile_zero(0);
    if constexpr (NT == 2) _tile_zero(1);
    if constexpr (MT == 2) _tile_zero(2);
    if constexpr (MT == 2 && NT == 2) _tile_zero(3);
  } else {
    HPMC_TILE_LOAD(0, acc00, kAccRowBytes);
    if constexpr (NT == 2) HPMC_TILE_LOAD(1, acc01, kAccRowBytes);
    if constexpr (MT == 2) HPMC_TILE_LOAD(2, acc10, kAccRowBytes);
    if constexpr (MT == 2 && NT == 2) HPMC_TILE_LOAD(3, acc11, kAccRowBytes);
  }
  for (int t = 0; t < kt; ++t) {
    const ptrdiff_t at = ptrdiff_t(t) * kTileWords;
    HPMC_TILE_LOAD(4, a[0] + at, kTileRowBytes);
    if constexpr (MT == 2) HPMC_TILE_LOAD(5, a[1] + at, kTileRowBytes);
    HPMC_TILE_LOAD(6, b[0] + at, kTileRowBytes);
    if constexpr (NT == 2) HPMC_TILE_LOAD(7, b[1] + at, kTileRowBytes);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (NT == 2) _tile_dpbf16ps(1, 4, 7);
    if constexpr (MT == 2) _tile_dpbf16ps(2, 5, 6);
    if constexpr (MT == 2 && NT == 2) _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, acc00, kAccRowBytes);
  if constexpr (NT == 2) _tile_stored(1, acc01, kAccRowBytes);
  if constexpr (MT == 2) _tile_stored(2, acc10, kAccRowBytes);
  if constexpr (MT == 2 && NT == 2) _tile_stored(3, acc11, kAccRowBytes);
}

// tile_kernel without tiles (bf16gemm_amx_emulated), with the same tiles in
// and the same acc out: TDPBF16PS as the pseudo-code of Intel's intrinsics
// guide reads, for each row i and column j of a C tile, over the pairs p in
// order, c += a.lo·b.lo, then c += a.hi·b.hi (the product of two bf16 is
// exact in FP32; each sum is rounded to nearest even). It checks the packs
// and the loops, not the instruction's arithmetic: the SDM's pseudo-code sums
// the even and the odd products apart and adds them to c at the end of the
// instruction, and the hardware promises neither order, so the tests hold
// the real kernel to the error bounds, not to these bits. Denormal sums are
// not flushed to zero here.
void emulated_kernel(int mt, int nt, int kt, const uint32_t* const a[2], const uint32_t* const b[2],
                     bool first, float* acc) {
  auto lo = [](uint32_t w) { return bf16_to_float(uint16_t(w)); };
  auto hi = [](uint32_t w) { return bf16_to_float(uint16_t(w >> 16)); };
  for (int mi = 0; mi < mt; ++mi)
    for (int ni = 0; ni < nt; ++ni) {
      float* blk = acc + mi * 16 * kBlock + ni * 16;
      for (int i = 0; i < 16; ++i)
        for (int j = 0; j < 16; ++j) {
          float s = first ? 0.f : blk[i * kBlock + j];
          for (int t = 0; t < kt; ++t) {
            const uint32_t* arow = a[mi] + ptrdiff_t(t) * kTileWords + 16 * i;  // row i
            const uint32_t* bcol = b[ni] + ptrdiff_t(t) * kTileWords + j;       // column j
            for (int p = 0; p < 16; ++p) {
              s += lo(arow[p]) * lo(bcol[16 * p]);
              s += hi(arow[p]) * hi(bcol[16 * p]);
            }
          }
          blk[i * kBlock + j] = s;
        }
    }
}

HPMC_AMX void run_kernel(bool emulate, int mt, int nt, int kt, const uint32_t* const a[2],
                         const uint32_t* const b[2], bool first, float* acc) {
  if (emulate)
    emulated_kernel(mt, nt, kt, a, b, first, acc);
  else if (mt == 2 && nt == 2)
    tile_kernel<2, 2>(kt, a, b, first, acc);
  else if (mt == 2)
    tile_kernel<2, 1>(kt, a, b, first, acc);
  else if (nt == 2)
    tile_kernel<1, 2>(kt, a, b, first, acc);
  else
    tile_kernel<1, 1>(kt, a, b, first, acc);
}

// ---- the packs ---------------------------------------------------------------

inline int k_tiles(int k) { return (k + 31) / 32; }
inline int m_room_for(int m) { return (m + 15) / 16 * 16; }

// An A tile from memory rows whose K runs along memory (A as given): row i
// of the tile ← src[i·lds + 0 .. kc-1] as bf16, in order (32 bf16 are 16
// pairs, the even k low); zeros past kc and from row `rows` on.
HPMC_BF16_INLINE void a_tile_from_rows(const float* src, ptrdiff_t lds, int rows, int kc,
                                       uint32_t* tile) {
  const __mmask16 m0 = low_mask16(kc), m1 = low_mask16(kc - 16);
  for (int i = 0; i < 16; ++i) {
    __m512i w = _mm512_setzero_si512();
    if (i < rows) {
      const float* s = src + i * lds;
      w = (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(m1, s + 16),
                                       _mm512_maskz_loadu_ps(m0, s));
    }
    _mm512_storeu_si512(tile + 16 * i, w);
  }
}

// An A tile from memory rows that run across K (A transposed): memory row
// k holds op(A)(0 .. rows-1, k) at src[k·lds ..]; kc rows. pack_cols makes
// the tile transposed (pair p of row i at word 16·p + i), and two 8 × 16
// register transposes turn it.
HPMC_BF16_INLINE void a_tile_from_cols(const float* src, ptrdiff_t lds, int rows, int kc,
                                       uint32_t* tile) {
  alignas(64) uint32_t by_pair[kTileWords];
  const int pairs = (kc + 1) / 2;
  pack_cols<1>(src, lds, rows, kc, by_pair, 16);
  std::fill(by_pair + 16 * pairs, by_pair + kTileWords, 0u);
  for (int h = 0; h < 2; ++h) {  // pairs 8h .. 8h+7
    __m512 r[8];
    for (int q = 0; q < 8; ++q)
      r[q] = _mm512_castsi512_ps(_mm512_load_si512(by_pair + 16 * (8 * h + q)));
    __m256 out[16];
    transpose8x16(r, out);  // out[i] = pairs 8h .. 8h+7 of row i
    for (int i = 0; i < 16; ++i)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(tile + 16 * i + 8 * h),
                          _mm256_castps_si256(out[i]));
  }
}

// Ap ← op(A) (m × k) in the header's layout. trans: op(A)(i, k) =
// a[k·lda + i], else a[i·lda + k].
HPMC_BF16 void pack_a(bool trans, const float* a, ptrdiff_t lda, int m, int k, uint32_t* ap) {
  const int kt = k_tiles(k);
  for (int i0 = 0; i0 < m; i0 += 16) {
    const int rows = std::min(16, m - i0);
    uint32_t* tile = ap + ptrdiff_t(i0 / 16) * kt * kTileWords;
    for (int t = 0; t < kt; ++t, tile += kTileWords) {
      const int k0 = 32 * t, kc = std::min(32, k - k0);
      if (trans)
        a_tile_from_cols(a + k0 * lda + i0, lda, rows, kc, tile);
      else
        a_tile_from_rows(a + i0 * lda + k0, lda, rows, kc, tile);
    }
  }
}

// Bp ← op(B)[all k, j0 .. j0+nc-1] (nc ≤ kNC) in the header's layout. trans:
// op(B)(k, j) = b[j·ldb + k], else b[k·ldb + j].
HPMC_BF16 void pack_b(bool trans, const float* b, ptrdiff_t ldb, int k, int j0, int nc,
                      uint32_t* bp) {
  const int kt = k_tiles(k), pairs = (k + 1) / 2;
  for (int jr = 0; jr < nc; jr += 16) {
    const int cols = std::min(16, nc - jr);
    uint32_t* panel = bp + ptrdiff_t(jr / 16) * kt * kTileWords;
    if (!trans) {  // K across rows
      pack_cols<1>(b + j0 + jr, ldb, cols, k, panel, 16);
    } else {  // K along memory, 8 columns at a time
      for (int jj = 0; jj < 16; jj += 8)
        pack_rows8(b + (j0 + jr + jj) * ldb, ldb, std::clamp(cols - jj, 0, 8), k, panel + jj, 16);
    }
    std::fill(panel + ptrdiff_t(16) * pairs, panel + ptrdiff_t(kt) * kTileWords, 0u);
  }
}

// ---- the loops -----------------------------------------------------------------

constexpr int kKT = 16;   // K tiles in a block
constexpr int kMC = 128;  // rows of a block of C (a multiple of kBlock)
constexpr int kNC = 256;  // columns of Bp (a multiple of kBlock)

thread_local gemm_avx512::PackBuffer<uint32_t> a_pack, b_pack;
thread_local gemm_avx512::PackBuffer<float> acc_pack;

// C(i, j) = alpha · acc(i, j) + beta · C(i, j) for i < mr, j < nr, acc a
// 32 × 32 block: gemm_avx512::store_tile's arithmetic (C not read when
// beta == 0).
HPMC_BF16 void store_block(const float* acc, float* c, ptrdiff_t ldc, int mr, int nr, float alpha,
                           float beta) {
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  for (int i = 0; i < mr; ++i)
    for (int h = 0; h < 2 && 16 * h < nr; ++h) {
      const __mmask16 mask = low_mask16(nr - 16 * h);
      const __m512 x = _mm512_loadu_ps(acc + i * kBlock + 16 * h);
      float* cp = c + i * ldc + 16 * h;
      const __m512 r =
          beta == 0.f ? _mm512_mul_ps(va, x)
                      : _mm512_fmadd_ps(va, x, _mm512_mul_ps(vb, _mm512_maskz_loadu_ps(mask, cp)));
      _mm512_mask_storeu_ps(cp, mask, r);
    }
}

// The loops of the header for all of op(A) packed at ap (m × k): C =
// alpha · op(Â) · op(B̂) + beta · C, with m, n, k > 0 and alpha != 0.
HPMC_AMX void gemm_tiles(bool emulate, const uint32_t* ap, bool trans_b, int m, int n, int k,
                         float alpha, const float* b, ptrdiff_t ldb, float beta, float* c,
                         ptrdiff_t ldc) {
  const int kt = k_tiles(k);
  const ptrdiff_t panel = ptrdiff_t(kt) * kTileWords;  // a 16-row or 16-column panel's words
  uint32_t* bp = b_pack.get(size_t(panel) * size_t((std::min(n, kNC) + 15) / 16));
  float* acc = acc_pack.get(size_t(kMC) * kNC);
  TileScope tiles(!emulate);
  for (int jc = 0; jc < n; jc += kNC) {
    const int nc = std::min(kNC, n - jc);
    pack_b(trans_b, b, ldb, k, jc, nc, bp);
    for (int ic = 0; ic < m; ic += kMC) {
      const int mc = std::min(kMC, m - ic);
      for (int tc = 0; tc < kt; tc += kKT) {
        const int tn = std::min(kKT, kt - tc);
        const bool first = tc == 0, last = tc + tn == kt;
        for (int ir = 0; ir < mc; ir += kBlock) {
          const int mr = std::min(kBlock, mc - ir);
          const uint32_t* a0 = ap + (ic + ir) / 16 * panel + ptrdiff_t(tc) * kTileWords;
          const uint32_t* const a[2] = {a0, mr > 16 ? a0 + panel : nullptr};
          for (int jr = 0; jr < nc; jr += kBlock) {
            const int nr = std::min(kBlock, nc - jr);
            const uint32_t* b0 = bp + jr / 16 * panel + ptrdiff_t(tc) * kTileWords;
            const uint32_t* const bt[2] = {b0, nr > 16 ? b0 + panel : nullptr};
            float* blk = acc + (ir / kBlock * (kNC / kBlock) + jr / kBlock) * kBlock * kBlock;
            run_kernel(emulate, mr > 16 ? 2 : 1, nr > 16 ? 2 : 1, tn, a, bt, first, blk);
            if (last) store_block(blk, c + (ic + ir) * ldc + jc + jr, ldc, mr, nr, alpha, beta);
          }
        }
      }
    }
  }
}

// A product from A as given: packed whole into this thread's buffer first.
void gemm_unpacked(bool emulate, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                   const float* a, int lda, const float* b, int ldb, float beta, float* c,
                   int ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0 || alpha == 0.f) {
    scale_c(m, n, beta, c, ldc);
    return;
  }
  uint32_t* ap = a_pack.get(bf16gemm_amx_packed_a_words(m, k));
  pack_a(trans_a, a, lda, m, k, ap);
  gemm_tiles(emulate, ap, trans_b, m, n, k, alpha, b, ldb, beta, c, ldc);
}

// A product from a packed A.
void gemm_packed(bool emulate, const Bf16PackedA& a, bool trans_b, int n, float alpha,
                 const float* b, int ldb, float beta, float* c, int ldc) {
  if (a.path != Bf16GemmPath::kAmx)
    throw RuntimeError(
        str("bf16gemm_amx_packed_a: A was packed for the ", bf16gemm_path_name(a.path), " path"));
  if (a.m <= 0 || n <= 0) return;
  if (a.k <= 0 || alpha == 0.f) {
    scale_c(a.m, n, beta, c, ldc);
    return;
  }
  gemm_tiles(emulate, a.words.get(), trans_b, a.m, n, a.k, alpha, b, ldb, beta, c, ldc);
}

}  // namespace

bool bf16gemm_amx_supported() { return amx_missing().empty(); }

const char* bf16gemm_amx_missing() { return amx_missing().c_str(); }

void bf16gemm_amx(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                  int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  require_amx("bf16gemm_amx");
  gemm_unpacked(false, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void bf16gemm_amx_pack_a(bool trans_a, int m, int k, const float* a, int lda, Bf16PackedA& out) {
  require_packs("bf16gemm_amx_pack_a");
  uint32_t* w = out.start(Bf16GemmPath::kAmx, trans_a, m, k, bf16gemm_amx_packed_a_words(m, k));
  if (w) pack_a(trans_a, a, lda, m, k, w);
}

size_t bf16gemm_amx_packed_a_words(int m, int k) {
  return m <= 0 || k <= 0 ? 0 : size_t(m_room_for(m)) * size_t(k_tiles(k)) * 16;
}

void bf16gemm_amx_packed_a(const Bf16PackedA& a, bool trans_b, int n, float alpha, const float* b,
                           int ldb, float beta, float* c, int ldc) {
  require_amx("bf16gemm_amx_packed_a");
  gemm_packed(false, a, trans_b, n, alpha, b, ldb, beta, c, ldc);
}

HPMC_AMX float bf16gemm_amx_peak_loop(long iters) {
  require_amx("bf16gemm_amx_peak_loop");
  // A: bf16 2^-20 everywhere, B: 1.0 (pairs 0x3580 3580, 0x3f80 3f80): each
  // instruction adds 32 · 2^-20 to every accumulator, finite for any run.
  alignas(64) static const struct Ops {
    uint32_t a[kTileWords], b[kTileWords];
    Ops() {
      for (int i = 0; i < kTileWords; ++i) a[i] = 0x35803580u, b[i] = 0x3f803f80u;
    }
  } ops;
  alignas(64) float out[16 * 16];
  TileScope tiles(true);
  HPMC_TILE_LOAD(4, ops.a, kTileRowBytes);
  HPMC_TILE_LOAD(5, ops.a, kTileRowBytes);
  HPMC_TILE_LOAD(6, ops.b, kTileRowBytes);
  HPMC_TILE_LOAD(7, ops.b, kTileRowBytes);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (long i = 0; i < iters; ++i) {  // four independent chains, as tile_kernel's block
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  float sum = 0;
  _tile_stored(0, out, 64);
  sum += out[0];
  _tile_stored(1, out, 64);
  sum += out[0];
  _tile_stored(2, out, 64);
  sum += out[0];
  _tile_stored(3, out, 64);
  return sum + out[0];
}

void bf16gemm_amx_emulated(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                           const float* a, int lda, const float* b, int ldb, float beta, float* c,
                           int ldc) {
  require_packs("bf16gemm_amx_emulated");
  gemm_unpacked(true, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void bf16gemm_amx_emulated_packed_a(const Bf16PackedA& a, bool trans_b, int n, float alpha,
                                    const float* b, int ldb, float beta, float* c, int ldc) {
  require_packs("bf16gemm_amx_emulated_packed_a");
  gemm_packed(true, a, trans_b, n, alpha, b, ldb, beta, c, ldc);
}

}  // namespace hpmc

#else  // not x86-64 Linux with GCC 11 or Clang 12: the amx path is not built

namespace hpmc {

namespace {
constexpr const char* kNotBuilt =
    "hpmc's AMX bf16 GEMM is not built here (it needs x86-64 Linux and GCC 11 or Clang 12)";
}

bool bf16gemm_amx_supported() { return false; }

const char* bf16gemm_amx_missing() { return kNotBuilt; }

void bf16gemm_amx(bool, bool, int, int, int, float, const float*, int, const float*, int, float,
                  float*, int) {
  throw RuntimeError(kNotBuilt);
}

void bf16gemm_amx_pack_a(bool, int, int, const float*, int, Bf16PackedA&) {
  throw RuntimeError(kNotBuilt);
}

size_t bf16gemm_amx_packed_a_words(int, int) { return 0; }

float bf16gemm_amx_peak_loop(long) { throw RuntimeError(kNotBuilt); }

void bf16gemm_amx_packed_a(const Bf16PackedA&, bool, int, float, const float*, int, float, float*,
                           int) {
  throw RuntimeError(kNotBuilt);
}

void bf16gemm_amx_emulated(bool, bool, int, int, int, float, const float*, int, const float*, int,
                           float, float*, int) {
  throw RuntimeError(kNotBuilt);
}

void bf16gemm_amx_emulated_packed_a(const Bf16PackedA&, bool, int, float, const float*, int, float,
                                    float*, int) {
  throw RuntimeError(kNotBuilt);
}

}  // namespace hpmc

#endif
