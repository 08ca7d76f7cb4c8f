// linear.cu — LinearGPU: the family's gemm for the three products, plus two
// small kernels of its own for the bias.
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "core/error.h"
#include "layers/gpu/conv2d_kernels.h"
#include "layers/gpu/gemm_tc.h"
#include "layers/gpu/linear.h"

namespace hpmc::gpu {

namespace {

// y[n, o] = b[o] for every n < batch, o < out (one thread per element).
__global__ void broadcast_bias_kernel(int batch, int out, const float* __restrict__ b,
                                      float* __restrict__ y) {
  const size_t total = size_t(batch) * out;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += size_t(gridDim.x) * blockDim.x)
    y[i] = b[i % size_t(out)];
}

// db[o] += Σ_n dy[n, o]. A block of kBiasCols × kBiasRows threads takes
// kBiasCols consecutive features (a warp reads 128 consecutive bytes of a row);
// thread row r sums rows r, r + kBiasRows, … in order, then the kBiasRows
// partial sums are added pairwise in shared memory in a fixed tree. The order
// depends on the batch size only, so the bits do not depend on the launch. (One
// thread per feature summing the whole batch left the GPU idle: a 10-feature
// layer at batch 4096 spent 0.2 ms here.)
constexpr int kBiasCols = 32, kBiasRows = 32;
__global__ void __launch_bounds__(kBiasCols* kBiasRows)
    bias_grad_kernel(int batch, int out, const float* __restrict__ dy, float* __restrict__ db) {
  __shared__ float part[kBiasRows][kBiasCols + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int o = blockIdx.x * kBiasCols + tx;
  float acc = 0.f;
  if (o < out)
    for (int n = ty; n < batch; n += kBiasRows) acc += dy[size_t(n) * out + o];
  part[ty][tx] = acc;
  for (int half = kBiasRows / 2; half > 0; half /= 2) {
    __syncthreads();
    if (ty < half) part[ty][tx] += part[ty + half][tx];
  }
  if (ty == 0 && o < out) db[o] += part[0][tx];
}

using GemmFn = void (*)(bool, bool, int, int, int, const float*, int, const float*, int, float*,
                        int, bool);

GemmFn gemm_of(Family f) {
  switch (f) {
    case Family::kNaive: return naive::gemm;
    case Family::kTiled: return tiled::gemm;
    case Family::kIm2col: return implicit::gemm;
  }
  throw RuntimeError(str("linear: unknown kernel family ", int(f)));
}

}  // namespace

bool LinearGPU::packed_path(int n) const {
  return family_ == Family::kIm2col && precision() == Precision::kBf16 &&
         gemm_tc::packs(n, cfg_.out_features, cfg_.in_features);
}

size_t LinearGPU::workspace_bytes(const Shape& in) const {
  if (!packed_path(in.n)) return 0;
  const int n = in.n, i = cfg_.in_features, o = cfg_.out_features;
  return gemm_tc::packed_bytes(n, i) + gemm_tc::packed_bytes(o, i) + gemm_tc::packed_bytes(n, o);
}

void LinearGPU::reserve(int max_batch) {
  if (packed_path(max_batch)) grow_packed(max_batch);
}

void LinearGPU::grow_packed(int n) {
  const auto floats = [](size_t bytes) { return Shape(1, int((bytes + 3) / 4), 1, 1); };
  const int i = cfg_.in_features, o = cfg_.out_features;
  if (!wp_.defined())
    wp_ = Tensor::empty(floats(gemm_tc::packed_bytes(o, i)), DType::kF32, Device::kGPU);
  if (n <= packed_batch_) return;
  xp_ = Tensor(), dyp_ = Tensor();  // the old ones first: the device may not hold both
  xp_ = Tensor::empty(floats(gemm_tc::packed_bytes(n, i)), DType::kF32, Device::kGPU);
  dyp_ = Tensor::empty(floats(gemm_tc::packed_bytes(n, o)), DType::kF32, Device::kGPU);
  packed_batch_ = n;
  xp_source_ = nullptr;
}

void LinearGPU::forward_impl(const Tensor& x, Tensor& y) {
  const int n = x.shape().n, in = cfg_.in_features, out = cfg_.out_features;
  float* yp = y.data<float>();
  if (n == 0) return;
  // y [n, out] = b + x [n, in] · Wᵀ   (W is [out, in])
  if (packed_path(n)) {  // the bias in the product's epilogue
    grow_packed(n);
    gemm_tc::pack_bf16(x.data<float>(), n, in, in, xp_.data<float>());
    gemm_tc::pack_bf16(param(0), out, in, in, wp_.data<float>());
    xp_source_ = x.data<float>();
    gemm_tc::gemm_bf16(false, true, n, out, in, xp_.data<float>(), wp_.data<float>(), yp, out,
                       false, 0, cfg_.bias ? param(1) : nullptr);
    return;
  }
  xp_source_ = nullptr;
  if (cfg_.bias) {
    broadcast_bias_kernel<<<grid_for(size_t(n) * out), kBlock>>>(n, out, param(1), yp);
    HPMC_CUDA_LAUNCH_CHECK("linear bias broadcast");
  }
  gemm_of(family_)(false, true, n, out, in, x.data<float>(), in, param(0), in, yp, out,
                   cfg_.bias);
}

void LinearGPU::backward_impl(const Tensor& x, const Tensor& /*y*/, const Tensor& dy, Tensor* dx) {
  const int n = x.shape().n, in = cfg_.in_features, out = cfg_.out_features;
  if (n == 0) return;
  const float* dyp = dy.data<float>();
  const bool packed = packed_path(n);
  if (packed) {
    // x as forward packed it (the same tensor: a backward without that
    // forward, or on another x, packs it again), W unchanged since forward.
    grow_packed(n);
    if (xp_source_ != x.data<float>()) {
      gemm_tc::pack_bf16(x.data<float>(), n, in, in, xp_.data<float>());
      gemm_tc::pack_bf16(param(0), out, in, in, wp_.data<float>());
      xp_source_ = x.data<float>();
    }
    gemm_tc::pack_bf16(dyp, n, out, out, dyp_.data<float>());
    // dW [out, in] += dYᵀ · X   (dY is [n, out], X is [n, in])
    gemm_tc::gemm_bf16(true, false, out, in, n, dyp_.data<float>(), xp_.data<float>(), grad(0),
                       in, true);
  } else {
    gemm_of(family_)(true, false, out, in, n, dyp, out, x.data<float>(), in, grad(0), in, true);
  }
  if (cfg_.bias) {
    bias_grad_kernel<<<unsigned((out + kBiasCols - 1) / kBiasCols), dim3(kBiasCols, kBiasRows)>>>(
        n, out, dyp, grad(1));
    HPMC_CUDA_LAUNCH_CHECK("linear bias gradient");
  }
  // dX [n, in] = dY · W
  if (!dx) return;
  if (packed)
    gemm_tc::gemm_bf16(false, false, n, in, out, dyp_.data<float>(), wp_.data<float>(),
                       dx->data<float>(), in, false);
  else
    gemm_of(family_)(false, false, n, in, out, dyp, out, param(0), in, dx->data<float>(), in,
                     false);
}

HPMC_REGISTER_GPU(Linear)

}  // namespace hpmc::gpu
