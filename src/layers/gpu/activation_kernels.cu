// activation_kernels.cu — the kernels behind activation_kernels.h (what each
// computes, and how it agrees with the CPU, is stated there).
//
// Element-wise forward and backward: one template per direction over the
// activation kind, a grid-stride loop over a 64-bit index, each element
// through activation.cuh's device form. When every pointer is 16-byte
// aligned the kernel reads and writes float4s (the same per-element
// arithmetic) and a scalar tail of fewer than 4 elements.
// prelu: forward finds each element's channel as (i / plane) % c, in 32-bit
// arithmetic when the tensor has fewer than 2^32 elements. Backward writes dx
// and the per-plane partial sums of the slope gradient in one pass: one
// thread per plane below kPreluBlockPlane elements (the plane summed serially
// in element order, as the CPU does), one block of kPreluBlock threads per
// plane from there on (thread t sums elements t, t + kPreluBlock, … serially,
// then a shared-memory tree in a fixed order); a third kernel, one thread per
// channel, adds the channel's partials in sample order and adds the total,
// rounded to float, to dslope. Nothing depends on the GPU model or the grid,
// so two runs give the same bits; no atomics.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/cuda_check.h"
#include "layers/gpu/activation.cuh"
#include "layers/gpu/activation_kernels.h"

namespace hpmc::gpu {

namespace {

__device__ __forceinline__ size_t first_index() {
  return size_t(blockIdx.x) * size_t(blockDim.x) + size_t(threadIdx.x);
}
__device__ __forceinline__ size_t grid_stride() {
  return size_t(gridDim.x) * size_t(blockDim.x);
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// ---- element-wise forward and backward -----------------------------------------

template <Act K>
__global__ void act_forward_kernel(const float* __restrict__ x, float* __restrict__ y, size_t n,
                                   float slope) {
  for (size_t i = first_index(); i < n; i += grid_stride()) y[i] = act_forward<K>(x[i], slope);
}

// n4 float4s, then the n − 4·n4 < 4 scalars after them.
template <Act K>
__global__ void act_forward_vec_kernel(const float4* __restrict__ x, float4* __restrict__ y,
                                       size_t n4, size_t n, float slope) {
  for (size_t i = first_index(); i < n4; i += grid_stride()) {
    const float4 v = x[i];
    y[i] = make_float4(act_forward<K>(v.x, slope), act_forward<K>(v.y, slope),
                       act_forward<K>(v.z, slope), act_forward<K>(v.w, slope));
  }
  const size_t t = 4 * n4 + first_index();
  if (t < n)
    reinterpret_cast<float*>(y)[t] = act_forward<K>(reinterpret_cast<const float*>(x)[t], slope);
}

// `in` is y or x, as act_backward_reads_output<K> says.
template <Act K>
__global__ void act_backward_kernel(const float* __restrict__ in, const float* __restrict__ dy,
                                    float* __restrict__ dx, size_t n, float slope) {
  for (size_t i = first_index(); i < n; i += grid_stride())
    dx[i] = act_backward<K>(in[i], dy[i], slope);
}

template <Act K>
__global__ void act_backward_vec_kernel(const float4* __restrict__ in,
                                        const float4* __restrict__ dy, float4* __restrict__ dx,
                                        size_t n4, size_t n, float slope) {
  for (size_t i = first_index(); i < n4; i += grid_stride()) {
    const float4 v = in[i], g = dy[i];
    dx[i] = make_float4(act_backward<K>(v.x, g.x, slope), act_backward<K>(v.y, g.y, slope),
                        act_backward<K>(v.z, g.z, slope), act_backward<K>(v.w, g.w, slope));
  }
  const size_t t = 4 * n4 + first_index();
  if (t < n)
    reinterpret_cast<float*>(dx)[t] = act_backward<K>(reinterpret_cast<const float*>(in)[t],
                                                      reinterpret_cast<const float*>(dy)[t],
                                                      slope);
}

template <Act K>
void launch_forward(const float* x, float* y, size_t n, float slope, const char* what) {
  if (n == 0) return;
  if (aligned16(x) && aligned16(y)) {
    const size_t n4 = n / 4;
    act_forward_vec_kernel<K><<<grid_for(n4 > 0 ? n4 : 1), kBlock>>>(
        reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(y), n4, n, slope);
  } else {
    act_forward_kernel<K><<<grid_for(n), kBlock>>>(x, y, n, slope);
  }
  HPMC_CUDA_LAUNCH_CHECK(what);
}

template <Act K>
void launch_backward(const float* in, const float* dy, float* dx, size_t n, float slope,
                     const char* what) {
  if (n == 0 || !dx) return;
  if (aligned16(in) && aligned16(dy) && aligned16(dx)) {
    const size_t n4 = n / 4;
    act_backward_vec_kernel<K><<<grid_for(n4 > 0 ? n4 : 1), kBlock>>>(
        reinterpret_cast<const float4*>(in), reinterpret_cast<const float4*>(dy),
        reinterpret_cast<float4*>(dx), n4, n, slope);
  } else {
    act_backward_kernel<K><<<grid_for(n), kBlock>>>(in, dy, dx, n, slope);
  }
  HPMC_CUDA_LAUNCH_CHECK(what);
}

// ---- prelu -----------------------------------------------------------------------

// Index type I: uint32_t when the tensor has fewer than 2^32 elements.
template <typename I>
__global__ void prelu_forward_kernel(const float* __restrict__ x, const float* __restrict__ slope,
                                     float* __restrict__ y, I total, I plane, I c) {
  for (size_t i = first_index(); i < size_t(total); i += grid_stride()) {
    const I ch = (I(i) / plane) % c;
    y[i] = act_forward<Act::kPrelu>(x[i], slope[ch]);
  }
}

// Planes of fewer elements than this are summed by one thread each.
constexpr size_t kPreluBlockPlane = 256;
constexpr int kPreluBlock = 256;
static_assert((kPreluBlock & (kPreluBlock - 1)) == 0, "tree reduction needs a power of two");

// One thread per plane p (sample p / c, channel p % c): dx over the plane and
// part[p] = Σ_e (x > 0 ? 0 : x·dy) in element order, in double.
__global__ void prelu_backward_plane_kernel(const float* __restrict__ x,
                                            const float* __restrict__ slope,
                                            const float* __restrict__ dy, float* __restrict__ dx,
                                            size_t planes, int c, size_t plane,
                                            double* __restrict__ part) {
  for (size_t p = first_index(); p < planes; p += grid_stride()) {
    const float a = slope[p % size_t(c)];
    const size_t base = p * plane;
    double sum = 0.0;
    for (size_t e = 0; e < plane; ++e) {
      const float xv = x[base + e], g = dy[base + e];
      if (!(xv > 0.0f)) sum += double(xv) * double(g);
      if (dx) dx[base + e] = act_backward<Act::kPrelu>(xv, g, a);
    }
    part[p] = sum;
  }
}

// One block of kPreluBlock threads per plane (grid-stride over planes): the
// same terms, summed as the file header says.
__global__ void prelu_backward_block_kernel(const float* __restrict__ x,
                                            const float* __restrict__ slope,
                                            const float* __restrict__ dy, float* __restrict__ dx,
                                            size_t planes, int c, size_t plane,
                                            double* __restrict__ part) {
  __shared__ double s_sum[kPreluBlock];
  const int tid = int(threadIdx.x);
  for (size_t p = blockIdx.x; p < planes; p += gridDim.x) {
    const float a = slope[p % size_t(c)];
    const size_t base = p * plane;
    double sum = 0.0;
    for (size_t e = size_t(tid); e < plane; e += kPreluBlock) {
      const float xv = x[base + e], g = dy[base + e];
      if (!(xv > 0.0f)) sum += double(xv) * double(g);
      if (dx) dx[base + e] = act_backward<Act::kPrelu>(xv, g, a);
    }
    s_sum[tid] = sum;
    __syncthreads();
    for (int half = kPreluBlock / 2; half > 0; half >>= 1) {
      if (tid < half) s_sum[tid] += s_sum[tid + half];
      __syncthreads();
    }
    if (tid == 0) part[p] = s_sum[0];
    __syncthreads();  // s_sum is reused by the next plane
  }
}

// One thread per channel: dslope[ch] += float(Σ_s part[s·c + ch]), s in order.
__global__ void prelu_slope_finish_kernel(const double* __restrict__ part, int n, int c,
                                          float* __restrict__ dslope) {
  for (size_t ch = first_index(); ch < size_t(c); ch += grid_stride()) {
    double sum = 0.0;
    for (int s = 0; s < n; ++s) sum += part[size_t(s) * size_t(c) + ch];
    dslope[ch] += float(sum);
  }
}

}  // namespace

// ---- host functions --------------------------------------------------------------

void sigmoid_forward(const float* x, float* y, size_t n) {
  launch_forward<Act::kSigmoid>(x, y, n, 0.0f, "sigmoid forward kernel");
}
void sigmoid_backward(const float* y, const float* dy, float* dx, size_t n) {
  launch_backward<Act::kSigmoid>(y, dy, dx, n, 0.0f, "sigmoid backward kernel");
}
void tanh_forward(const float* x, float* y, size_t n) {
  launch_forward<Act::kTanh>(x, y, n, 0.0f, "tanh forward kernel");
}
void tanh_backward(const float* y, const float* dy, float* dx, size_t n) {
  launch_backward<Act::kTanh>(y, dy, dx, n, 0.0f, "tanh backward kernel");
}
void leaky_relu_forward(const float* x, float* y, size_t n, float slope) {
  launch_forward<Act::kLeakyRelu>(x, y, n, slope, "leaky_relu forward kernel");
}
void leaky_relu_backward(const float* x, const float* dy, float* dx, size_t n, float slope) {
  launch_backward<Act::kLeakyRelu>(x, dy, dx, n, slope, "leaky_relu backward kernel");
}

void prelu_forward(const float* x, const float* slope, float* y, int n, int c, size_t plane) {
  if (n <= 0 || c <= 0 || plane == 0) return;
  const size_t total = size_t(n) * size_t(c) * plane;
  if (total < (size_t(1) << 32))
    prelu_forward_kernel<uint32_t><<<grid_for(total), kBlock>>>(
        x, slope, y, uint32_t(total), uint32_t(plane), uint32_t(c));
  else
    prelu_forward_kernel<uint64_t><<<grid_for(total), kBlock>>>(x, slope, y, uint64_t(total),
                                                                uint64_t(plane), uint64_t(c));
  HPMC_CUDA_LAUNCH_CHECK("prelu forward kernel");
}

size_t prelu_backward_workspace_bytes(int n, int c) {
  return n > 0 && c > 0 ? size_t(n) * size_t(c) * sizeof(double) : 0;
}

void prelu_backward(const float* x, const float* slope, const float* dy, float* dx,
                    float* dslope, int n, int c, size_t plane, void* workspace) {
  if (n <= 0 || c <= 0 || plane == 0) return;
  const size_t planes = size_t(n) * size_t(c);
  double* part = static_cast<double*>(workspace);
  if (plane < kPreluBlockPlane) {
    prelu_backward_plane_kernel<<<grid_for(planes), kBlock>>>(x, slope, dy, dx, planes, c, plane,
                                                              part);
  } else {
    const unsigned blocks = unsigned(planes < 0x7fffffff ? planes : 0x7fffffff);
    prelu_backward_block_kernel<<<blocks, kPreluBlock>>>(x, slope, dy, dx, planes, c, plane,
                                                         part);
  }
  HPMC_CUDA_LAUNCH_CHECK("prelu backward kernel");
  prelu_slope_finish_kernel<<<grid_for(size_t(c)), kBlock>>>(part, n, c, dslope);
  HPMC_CUDA_LAUNCH_CHECK("prelu slope gradient kernel");
}

}  // namespace hpmc::gpu
