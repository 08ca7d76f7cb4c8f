// conv_transpose2d.cu — the GPU transposed convolution of conv_transpose2d.h:
// each family's Conv2D kernels run on the equivalent convolution, plus two
// kernels of its own for the bias (added per channel in forward, summed per
// channel in backward); and the layer ConvTranspose2dGPU on top of them.
#include "layers/gpu/conv_transpose2d.h"

#include <cuda_runtime.h>

#include <cstddef>

#include "core/cuda_check.h"
#include "core/error.h"
#include "layers/gpu/conv2d_kernels.h"

namespace hpmc::gpu {

namespace {

// y[i] += b[(i / plane) % C] over the N·C·plane elements: a grid-stride loop.
__global__ void add_channel_bias_kernel(size_t total, size_t plane, int C,
                                        const float* __restrict__ b, float* __restrict__ y) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += size_t(gridDim.x) * blockDim.x)
    y[i] += b[(i / plane) % size_t(C)];
}

constexpr int kSumThreads = 256;

// Block o: db[o] += Σ_{n,j} dy[n][o][j]. Thread t sums, image by image, the
// pixels j ≡ t (mod kSumThreads) of each plane (coalesced reads), in double;
// the block's partials then meet in a fixed tree. The order depends on the
// shape only.
__global__ void __launch_bounds__(kSumThreads)
    channel_sum_kernel(int N, int C, size_t plane, const float* __restrict__ dy,
                       float* __restrict__ db) {
  __shared__ double part[kSumThreads];
  const int o = blockIdx.x;
  double acc = 0;
  for (int n = 0; n < N; ++n) {
    const float* d = dy + (size_t(n) * C + o) * plane;
    for (size_t j = threadIdx.x; j < plane; j += kSumThreads) acc += double(d[j]);
  }
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int half = kSumThreads / 2; half > 0; half /= 2) {
    if (int(threadIdx.x) < half) part[threadIdx.x] += part[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) db[o] = float(double(db[o]) + part[0]);
}

[[noreturn]] void unknown_family(Family family) {
  throw RuntimeError(str("conv_transpose2d: unknown kernel family ", int(family)));
}

}  // namespace

void add_channel_bias(const Conv2dShape& eq, const float* b, float* y) {
  const size_t plane = size_t(eq.H) * eq.W;
  const size_t total = size_t(eq.N) * eq.C * plane;
  if (total == 0) return;
  add_channel_bias_kernel<<<grid_for(total), kBlock>>>(total, plane, eq.C, b, y);
  HPMC_CUDA_LAUNCH_CHECK("conv_transpose2d forward (bias)");
}

void channel_sum(const Conv2dShape& eq, const float* dy, float* db) {
  if (eq.C <= 0) return;
  const size_t plane = size_t(eq.H) * eq.W;
  channel_sum_kernel<<<unsigned(eq.C), kSumThreads>>>(eq.N, eq.C, plane, dy, db);
  HPMC_CUDA_LAUNCH_CHECK("conv_transpose2d backward (bias gradient)");
}

void conv_transpose2d_forward(Family family, const Conv2dShape& eq, const float* x,
                              const float* w, const float* b, float* y) {
  switch (family) {
    case Family::kNaive: naive::conv2d_backward_data(eq, x, w, y); break;
    case Family::kTiled: tiled::conv2d_backward_data(eq, x, w, y); break;
    case Family::kIm2col: implicit::conv2d_backward_data(eq, x, w, y); break;
    default: unknown_family(family);
  }
  if (b) add_channel_bias(eq, b, y);
}

void conv_transpose2d_backward_data(Family family, const Conv2dShape& eq, const float* dy,
                                    const float* w, float* dx) {
  switch (family) {
    case Family::kNaive: naive::conv2d_forward(eq, dy, w, nullptr, dx); return;
    case Family::kTiled: tiled::conv2d_forward(eq, dy, w, nullptr, dx); return;
    case Family::kIm2col: implicit::conv2d_forward(eq, dy, w, nullptr, dx); return;
  }
  unknown_family(family);
}

void conv_transpose2d_backward_params(Family family, const Conv2dShape& eq, const float* x,
                                      const float* dy, float* dw, float* db) {
  // In eq's terms dy is the input and x the output gradient.
  switch (family) {
    case Family::kNaive: naive::conv2d_backward_params(eq, dy, x, dw, nullptr); break;
    case Family::kTiled: tiled::conv2d_backward_params(eq, dy, x, dw, nullptr); break;
    case Family::kIm2col: implicit::conv2d_backward_params(eq, dy, x, dw, nullptr); break;
    default: unknown_family(family);
  }
  if (db) channel_sum(eq, dy, db);
}

void ConvTranspose2dGPU::forward_impl(const Tensor& x, Tensor& y) {
  const float* b = cfg_.bias ? param(1) : nullptr;
  conv_transpose2d_forward(family_, equivalent_conv(x.shape()), x.data<float>(), param(0), b,
                           y.data<float>());
}

void ConvTranspose2dGPU::backward_impl(const Tensor& x, const Tensor& /*y*/, const Tensor& dy,
                                       Tensor* dx) {
  const Conv2dShape eq = equivalent_conv(x.shape());
  float* db = cfg_.bias ? grad(1) : nullptr;
  conv_transpose2d_backward_params(family_, eq, x.data<float>(), dy.data<float>(), grad(0), db);
  if (dx)
    conv_transpose2d_backward_data(family_, eq, dy.data<float>(), param(0), dx->data<float>());
}

HPMC_REGISTER_GPU(ConvTranspose2d)

}  // namespace hpmc::gpu
