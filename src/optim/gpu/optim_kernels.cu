// optim_kernels.cu — the optimizers' update kernels and the gradient
// clipping kernels of optim_kernels.h.
//
// Update kernels: one grid-stride pass; with every pointer 16-byte aligned,
// elements [0, 4·n4) go as float4 and the < 4 left as scalars, else all as
// scalars. Each element is read and written by one thread, so the result
// does not depend on the grid.
//
// Clipping (clip.h's order): sumsq_chunks_kernel gives chunk c (4096 floats)
// to one block of 256 threads, thread j summing g[4096c + j + 256k]², k =
// 0..15, then the block folds its 256 sums pairwise; clip_finish_kernel (one
// block) reduces the chunk sums the same way and writes the norm and the
// scale; clip_scale_kernel multiplies the gradients when the scale is < 1.
// The host never waits.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/cuda_check.h"
#include "core/error.h"
#include "layers/gpu/sgd_formula.cuh"
#include "optim/clip.h"
#include "optim/gpu/optim_kernels.h"

namespace hpmc::gpu {

namespace {

bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

// ---- SGD ------------------------------------------------------------------------------

// sgd_formula.cuh's update, or with Nesterov (PyTorch's order):
//   g = grad + wd·p;  v = μ·v + g;  p = p − lr·(g + μ·v).
template <bool kMomentum, bool kNesterov>
__device__ __forceinline__ void sgd_one(float& p, float g, float& v, const SgdArgs& a) {
  if (!kNesterov) {
    sgd_update(p, g, v, kMomentum, a.lr, a.momentum, a.weight_decay);
    return;
  }
  const float gg = __fadd_rn(g, __fmul_rn(a.weight_decay, p));
  v = __fadd_rn(__fmul_rn(a.momentum, v), gg);
  p = __fsub_rn(p, __fmul_rn(a.lr, __fadd_rn(gg, __fmul_rn(a.momentum, v))));
}

template <bool kMomentum, bool kNesterov>
__global__ void sgd_kernel(float* __restrict__ p, const float* __restrict__ g,
                           float* __restrict__ v, size_t n, size_t n4, SgdArgs a) {
  const size_t first = size_t(blockIdx.x) * size_t(blockDim.x) + size_t(threadIdx.x);
  const size_t stride = size_t(gridDim.x) * size_t(blockDim.x);
  for (size_t i = first; i < n4; i += stride) {
    float4 pv = reinterpret_cast<const float4*>(p)[i];
    const float4 gv = reinterpret_cast<const float4*>(g)[i];
    float4 vv = make_float4(0.f, 0.f, 0.f, 0.f);
    if (kMomentum) vv = reinterpret_cast<const float4*>(v)[i];
    sgd_one<kMomentum, kNesterov>(pv.x, gv.x, vv.x, a);
    sgd_one<kMomentum, kNesterov>(pv.y, gv.y, vv.y, a);
    sgd_one<kMomentum, kNesterov>(pv.z, gv.z, vv.z, a);
    sgd_one<kMomentum, kNesterov>(pv.w, gv.w, vv.w, a);
    reinterpret_cast<float4*>(p)[i] = pv;
    if (kMomentum) reinterpret_cast<float4*>(v)[i] = vv;
  }
  for (size_t i = 4 * n4 + first; i < n; i += stride) {
    float pv = p[i];
    float vv = 0.f;
    if (kMomentum) vv = v[i];
    sgd_one<kMomentum, kNesterov>(pv, g[i], vv, a);
    p[i] = pv;
    if (kMomentum) v[i] = vv;
  }
}

// ---- Adam / AdamW ---------------------------------------------------------------------

// update_args.h's order, each operation rounded on its own.
__device__ __forceinline__ void adam_one(float& p, float g, float& m, float& v, const AdamArgs& a) {
  if (a.decoupled)
    p = __fmul_rn(p, a.decay);
  else
    g = __fadd_rn(g, __fmul_rn(a.l2, p));
  m = __fadd_rn(__fmul_rn(a.beta1, m), __fmul_rn(a.c1, g));
  v = __fadd_rn(__fmul_rn(a.beta2, v), __fmul_rn(__fmul_rn(a.c2, g), g));
  const float d = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), a.bc2_sqrt), a.eps);
  p = __fsub_rn(p, __fmul_rn(a.step_size, __fdiv_rn(m, d)));
}

__global__ void adam_kernel(float* __restrict__ p, const float* __restrict__ g,
                            float* __restrict__ m, float* __restrict__ v, size_t n, size_t n4,
                            AdamArgs a) {
  const size_t first = size_t(blockIdx.x) * size_t(blockDim.x) + size_t(threadIdx.x);
  const size_t stride = size_t(gridDim.x) * size_t(blockDim.x);
  for (size_t i = first; i < n4; i += stride) {
    float4 pv = reinterpret_cast<const float4*>(p)[i];
    const float4 gv = reinterpret_cast<const float4*>(g)[i];
    float4 mv = reinterpret_cast<const float4*>(m)[i];
    float4 vv = reinterpret_cast<const float4*>(v)[i];
    adam_one(pv.x, gv.x, mv.x, vv.x, a);
    adam_one(pv.y, gv.y, mv.y, vv.y, a);
    adam_one(pv.z, gv.z, mv.z, vv.z, a);
    adam_one(pv.w, gv.w, mv.w, vv.w, a);
    reinterpret_cast<float4*>(p)[i] = pv;
    reinterpret_cast<float4*>(m)[i] = mv;
    reinterpret_cast<float4*>(v)[i] = vv;
  }
  for (size_t i = 4 * n4 + first; i < n; i += stride) {
    float pv = p[i], mv = m[i], vv = v[i];
    adam_one(pv, g[i], mv, vv, a);
    p[i] = pv;
    m[i] = mv;
    v[i] = vv;
  }
}

// ---- clipping -------------------------------------------------------------------------

static_assert(kClipLanes == kBlock, "one thread per lane");
constexpr int kPerLane = int(kClipChunk) / kClipLanes;

// lane[0] += lane[h] pairwise, h = 128 .. 1, as clip.cpp's fold.
__device__ __forceinline__ void fold(double* lane) {
  const int j = int(threadIdx.x);
  for (int h = kClipLanes / 2; h >= 1; h /= 2) {
    if (j < h) lane[j] = __dadd_rn(lane[j], lane[j + h]);
    __syncthreads();
  }
}

__global__ void sumsq_chunks_kernel(const float* __restrict__ g, size_t n, size_t chunks,
                                    double* __restrict__ partial) {
  __shared__ double lane[kClipLanes];
  for (size_t c = blockIdx.x; c < chunks; c += gridDim.x) {
    double acc = 0.0;
    const size_t base = c * kClipChunk + threadIdx.x;
    for (int k = 0; k < kPerLane; ++k) {
      const size_t i = base + size_t(k) * kClipLanes;
      if (i < n) {
        const double x = g[i];
        acc = __dadd_rn(acc, __dmul_rn(x, x));
      }
    }
    lane[threadIdx.x] = acc;
    __syncthreads();
    fold(lane);
    if (threadIdx.x == 0) partial[c] = lane[0];
    __syncthreads();  // lane is reused by the next chunk
  }
}

// scratch[chunks] = the norm, scratch[chunks + 1] = the scale (1 when not clipped).
__global__ void clip_finish_kernel(double* scratch, size_t chunks, double max_norm) {
  __shared__ double lane[kClipLanes];
  double acc = 0.0;
  for (size_t c = threadIdx.x; c < chunks; c += kClipLanes) acc = __dadd_rn(acc, scratch[c]);
  lane[threadIdx.x] = acc;
  __syncthreads();
  fold(lane);
  if (threadIdx.x == 0) {
    const double norm = __dsqrt_rn(lane[0]);
    const double coef = __ddiv_rn(max_norm, __dadd_rn(norm, 1e-6));
    scratch[chunks] = norm;
    scratch[chunks + 1] = coef < 1.0 ? double(__double2float_rn(coef)) : 1.0;
  }
}

__global__ void clip_scale_kernel(float* __restrict__ g, size_t n, const double* coef_at) {
  const float c = float(*coef_at);  // exactly a float
  if (!(c < 1.0f)) return;
  const size_t first = size_t(blockIdx.x) * size_t(blockDim.x) + size_t(threadIdx.x);
  const size_t stride = size_t(gridDim.x) * size_t(blockDim.x);
  for (size_t i = first; i < n; i += stride) g[i] = __fmul_rn(g[i], c);
}

size_t chunks_of(size_t n) { return (n + kClipChunk - 1) / kClipChunk; }

}  // namespace

void sgd_pass(float* p, const float* g, float* v, size_t n, const SgdArgs& a) {
  if (n == 0) return;
  const bool momentum = a.momentum != 0.0f;  // the CPU's test (μ = 0: no state)
  HPMC_CHECK(p && g && (v || !momentum), "sgd_pass: null device buffer (params ", p, ", grads ",
             g, ", momentum ", v, ")");
  HPMC_CHECK(momentum || !a.nesterov, "sgd_pass: nesterov without momentum");
  const bool vec = aligned16(p) && aligned16(g) && (!momentum || aligned16(v));
  const size_t n4 = vec ? n / 4 : 0;
  const unsigned grid = grid_for(n4 > 0 ? n4 : n);
  if (!momentum)
    sgd_kernel<false, false><<<grid, kBlock>>>(p, g, nullptr, n, n4, a);
  else if (!a.nesterov)
    sgd_kernel<true, false><<<grid, kBlock>>>(p, g, v, n, n4, a);
  else
    sgd_kernel<true, true><<<grid, kBlock>>>(p, g, v, n, n4, a);
  HPMC_CUDA_LAUNCH_CHECK("sgd update kernel");
}

void adam_pass(float* p, const float* g, float* m, float* v, size_t n, const AdamArgs& a) {
  if (n == 0) return;
  HPMC_CHECK(p && g && m && v, "adam_pass: null device buffer (params ", p, ", grads ", g, ", m ",
             m, ", v ", v, ")");
  const bool vec = aligned16(p) && aligned16(g) && aligned16(m) && aligned16(v);
  const size_t n4 = vec ? n / 4 : 0;
  adam_kernel<<<grid_for(n4 > 0 ? n4 : n), kBlock>>>(p, g, m, v, n, n4, a);
  HPMC_CUDA_LAUNCH_CHECK("adam update kernel");
}

size_t clip_scratch_doubles(size_t n) { return chunks_of(n) + 2; }

void clip_grad_norm(float* g, size_t n, double max_norm, double* scratch) {
  HPMC_CHECK(scratch && (g || n == 0), "clip_grad_norm: null device buffer (grads ", g,
             ", scratch ", scratch, ")");
  const size_t chunks = chunks_of(n);
  if (chunks > 0) {
    const unsigned grid = unsigned(chunks < 65535 ? chunks : 65535);
    sumsq_chunks_kernel<<<grid, kClipLanes>>>(g, n, chunks, scratch);
    HPMC_CUDA_LAUNCH_CHECK("gradient norm kernel");
  }
  clip_finish_kernel<<<1, kClipLanes>>>(scratch, chunks, max_norm);
  HPMC_CUDA_LAUNCH_CHECK("gradient norm finish kernel");
  if (n > 0) {
    clip_scale_kernel<<<grid_for(n), kBlock>>>(g, n, scratch + chunks + 1);
    HPMC_CUDA_LAUNCH_CHECK("gradient clip kernel");
  }
}

}  // namespace hpmc::gpu
