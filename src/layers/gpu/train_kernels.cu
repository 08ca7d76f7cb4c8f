// train_kernels.cu — the two training-loop kernels of factory.h: the SGD step
// over the whole parameter buffer, and the batch gather from a uint8 dataset
// held on the device.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/cuda_check.h"
#include "core/error.h"
#include "layers/gpu/factory.h"
#include "layers/gpu/sgd_formula.cuh"

namespace hpmc::gpu {

namespace {

// ---- SGD ------------------------------------------------------------------------------

// One element: sgd_update of sgd_formula.cuh, with the momentum branch fixed
// at compile time.
template <bool kMomentum>
__device__ __forceinline__ void sgd_one(float& p, float g, float& v, float lr, float mu,
                                        float wd) {
  sgd_update(p, g, v, kMomentum, lr, mu, wd);
}

// One grid-stride kernel over the whole buffer. With `vec`, elements
// [0, 4·n4) go as float4 (all pointers used are 16-byte aligned; checked by
// the caller) and the remaining n − 4·n4 < 4 scalars follow; without, n4 = 0
// and every element is scalar. Each element is read and written by exactly
// one thread. Without momentum, v is never touched (as the CPU: it may be
// null, and stays zero).
template <bool kMomentum>
__global__ void sgd_kernel(float* __restrict__ p, const float* __restrict__ g,
                           float* __restrict__ v, size_t n, size_t n4, float lr, float mu,
                           float wd) {
  const size_t first = size_t(blockIdx.x) * size_t(blockDim.x) + size_t(threadIdx.x);
  const size_t stride = size_t(gridDim.x) * size_t(blockDim.x);
  for (size_t i = first; i < n4; i += stride) {
    float4 pv = reinterpret_cast<const float4*>(p)[i];
    const float4 gv = reinterpret_cast<const float4*>(g)[i];
    float4 vv = make_float4(0.f, 0.f, 0.f, 0.f);
    if (kMomentum) vv = reinterpret_cast<const float4*>(v)[i];
    sgd_one<kMomentum>(pv.x, gv.x, vv.x, lr, mu, wd);
    sgd_one<kMomentum>(pv.y, gv.y, vv.y, lr, mu, wd);
    sgd_one<kMomentum>(pv.z, gv.z, vv.z, lr, mu, wd);
    sgd_one<kMomentum>(pv.w, gv.w, vv.w, lr, mu, wd);
    reinterpret_cast<float4*>(p)[i] = pv;
    if (kMomentum) reinterpret_cast<float4*>(v)[i] = vv;
  }
  for (size_t i = 4 * n4 + first; i < n; i += stride) {
    float pv = p[i];
    float vv = 0.f;
    if (kMomentum) vv = v[i];
    sgd_one<kMomentum>(pv, g[i], vv, lr, mu, wd);
    p[i] = pv;
    if (kMomentum) v[i] = vv;
  }
}

bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

// ---- batch gather ---------------------------------------------------------------------

// Element t = i·per + e of the batch: x[t] = images[idx[i]·per + e] / 255,
// rounded as the CPU's table (float(v) / 255.0f, an IEEE division), so the two
// are bit-equal; float32 images (npy) are copied as they are. Labels (when y
// is non-null): y[i] = labels[idx[i]]. The caller guarantees every idx[i] <
// the dataset's size (it is an epoch order); a negative index writes NaN
// pixels and label −1, never reading outside.
__device__ __forceinline__ float pixel_value(uint8_t v) { return __fdiv_rn(float(v), 255.0f); }
__device__ __forceinline__ float pixel_value(float v) { return v; }

template <typename T>
__global__ void gather_kernel(const T* __restrict__ images, const int32_t* __restrict__ labels,
                              size_t per, const int32_t* __restrict__ idx, int n,
                              float* __restrict__ x, int32_t* __restrict__ y) {
  const size_t first = size_t(blockIdx.x) * size_t(blockDim.x) + size_t(threadIdx.x);
  const size_t stride = size_t(gridDim.x) * size_t(blockDim.x);
  const size_t total = size_t(n) * per;
  for (size_t t = first; t < total; t += stride) {
    const size_t i = t / per;
    const size_t e = t - i * per;
    const int32_t j = idx[i];
    x[t] = j < 0 ? __int_as_float(0x7fc00000) : pixel_value(images[size_t(j) * per + e]);
  }
  if (y)
    for (size_t i = first; i < size_t(n); i += stride) {
      const int32_t j = idx[i];
      y[i] = j < 0 ? -1 : labels[j];
    }
}

template <typename T>
void gather(const T* images, const int32_t* labels, size_t sample_elems, const int32_t* idx,
            int n, float* x, int32_t* y) {
  HPMC_CHECK(n >= 0, "gather_batch: negative batch size ", n);
  if (n == 0) return;
  HPMC_CHECK(idx && x, "gather_batch: null device pointer (idx ", idx, ", x ", x, ")");
  HPMC_CHECK(!y || labels, "gather_batch: labels wanted but the dataset has none on the device");
  if (sample_elems == 0 && !y) return;
  HPMC_CHECK(sample_elems == 0 || images, "gather_batch: null device images");
  const size_t total = size_t(n) * sample_elems;
  gather_kernel<T><<<grid_for(total > size_t(n) ? total : size_t(n)), kBlock>>>(
      images, labels, sample_elems, idx, n, x, y);
  HPMC_CUDA_LAUNCH_CHECK("gather_batch kernel");
}

}  // namespace

void sgd_step(float* params, const float* grads, float* momentum, size_t n, float lr,
              float momentum_factor, float weight_decay) {
  if (n == 0) return;
  const bool use_momentum = momentum_factor != 0.0f;  // the CPU's test (mu == 0 → no buffer)
  HPMC_CHECK(params && grads && (momentum || !use_momentum),
             "sgd_step: null device buffer (params ", params, ", grads ", grads, ", momentum ",
             momentum, ")");
  const bool vec =
      aligned16(params) && aligned16(grads) && (!use_momentum || aligned16(momentum));
  const size_t n4 = vec ? n / 4 : 0;
  // A thread per float4 (the < 4 leftover scalars need fewer), or per scalar.
  const unsigned grid = grid_for(n4 > 0 ? n4 : n);
  if (use_momentum)
    sgd_kernel<true><<<grid, kBlock>>>(params, grads, momentum, n, n4, lr, momentum_factor,
                                       weight_decay);
  else
    sgd_kernel<false><<<grid, kBlock>>>(params, grads, nullptr, n, n4, lr, momentum_factor,
                                        weight_decay);
  HPMC_CUDA_LAUNCH_CHECK("sgd_step kernel");
}

void gather_batch(const uint8_t* images, const int32_t* labels, size_t sample_elems,
                  const int32_t* idx, int n, float* x, int32_t* y) {
  gather(images, labels, sample_elems, idx, n, x, y);
}

void gather_batch(const float* images, const int32_t* labels, size_t sample_elems,
                  const int32_t* idx, int n, float* x, int32_t* y) {
  gather(images, labels, sample_elems, idx, n, x, y);
}

}  // namespace hpmc::gpu
