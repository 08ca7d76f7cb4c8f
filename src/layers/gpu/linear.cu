// linear.cu — LinearProducts and LinearGPU (linear.h): the family's gemm (or
// the tensor-core engine with its epilogue) for the three products, plus
// small kernels of its own for the bias and, without an epilogue, the mask.
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "core/error.h"
#include "layers/gpu/conv2d_kernels.h"
#include "layers/gpu/epilogue_act.cuh"
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
  if (o < out) {
    // Eight rows' loads in flight before their additions, which stay in row
    // order (the same sum): a 1024-feature layer has only 32 blocks, one
    // load at a time left them waiting on memory (7 µs at batch 1024).
    int n = ty;
    for (; n + 7 * kBiasRows < batch; n += 8 * kBiasRows) {
      float v[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) v[u] = dy[size_t(n + u * kBiasRows) * out + o];
#pragma unroll
      for (int u = 0; u < 8; ++u) acc += v[u];
    }
    for (; n < batch; n += kBiasRows) acc += dy[size_t(n) * out + o];
  }
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

// v[i] = mask[i] > 0 ? v[i] : 0: the ReLU's backward (relu_backward's
// operation) in place, where no epilogue applies the mask.
__global__ void mask_kernel(const float* __restrict__ mask, float* v, size_t n) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    v[i] = mask[i] > 0.0f ? v[i] : 0.0f;
}

gemm_tc::Operands operands_of(Precision p) {
  return p == Precision::kTf32 ? gemm_tc::Operands::kTf32 : gemm_tc::Operands::kBf16;
}

}  // namespace

bool LinearProducts::packed_path(Precision p, int n) const {
  return family_ == Family::kIm2col && p == Precision::kBf16 &&
         gemm_tc::packs(n, cfg_.out_features, cfg_.in_features);
}

size_t LinearProducts::workspace_bytes(int n, Precision p) const {
  if (!packed_path(p, n)) return 0;
  const int i = cfg_.in_features, o = cfg_.out_features;
  return gemm_tc::packed_bytes(n, i) + gemm_tc::packed_bytes(o, i) + gemm_tc::packed_bytes(n, o);
}

void LinearProducts::reserve(int max_batch, Precision p) {
  if (packed_path(p, max_batch)) grow_packed(max_batch);
}

void LinearProducts::grow_packed(int n) {
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

void LinearProducts::forward(Precision p, int n, const float* x, const float* w, const float* b,
                             float* y, const Activation& act) {
  const int in = cfg_.in_features, out = cfg_.out_features;
  if (n == 0) return;
  HPMC_CHECK(act.kind != ActKind::kPrelu, "linear: prelu after a linear layer is not fused");
  // y [n, out] = act(b + x [n, in] · Wᵀ)   (W is [out, in])
  // The activation in the products' epilogue where it takes it, else a
  // pass of its own after them.
  const bool in_epilogue = has_epilogue(family_, p) && epilogue_takes(act);
  gemm_tc::Epilogue ep;
  ep.bias = b;
  if (in_epilogue) ep.act = act;
  const bool packed = packed_path(p, n);
  if (!packed) xp_source_ = nullptr;
  if (packed) {
    grow_packed(n);
    gemm_tc::pack_bf16(x, n, in, in, xp_.data<float>());
    gemm_tc::pack_bf16(w, out, in, in, wp_.data<float>());
    xp_source_ = x;
    gemm_tc::gemm_bf16(false, true, n, out, in, xp_.data<float>(), wp_.data<float>(), y, out,
                       false, 0, ep);
  } else if (has_epilogue(family_, p)) {
    gemm_tc::gemm(operands_of(p), false, true, n, out, in, x, in, w, in, y, out, false, 0, ep);
  } else {
    if (b) {
      broadcast_bias_kernel<<<grid_for(size_t(n) * out), kBlock>>>(n, out, b, y);
      HPMC_CUDA_LAUNCH_CHECK("linear bias broadcast");
    }
    gemm_of(family_)(false, true, n, out, in, x, in, w, in, y, out, b != nullptr);
  }
  if (!act.is_none() && !in_epilogue) {
    const size_t count = size_t(n) * out;
    act_inplace_kernel<<<grid_for(count), kBlock>>>(y, (long long)count, 1, out, act);
    HPMC_CUDA_LAUNCH_CHECK("linear activation");
  }
}

void LinearProducts::backward(Precision p, int n, const float* x, const float* dy,
                              const float* w, float* dw, float* db, float* dx,
                              const float* mask) {
  const int in = cfg_.in_features, out = cfg_.out_features;
  if (n == 0) return;
  const bool packed = packed_path(p, n);
  if (packed) {
    // x as forward packed it (the same tensor: a backward without that
    // forward, or on another x, packs it again), W unchanged since forward.
    grow_packed(n);
    if (xp_source_ != x) {
      gemm_tc::pack_bf16(x, n, in, in, xp_.data<float>());
      gemm_tc::pack_bf16(w, out, in, in, wp_.data<float>());
      xp_source_ = x;
    }
    gemm_tc::pack_bf16(dy, n, out, out, dyp_.data<float>());
    // dW [out, in] += dYᵀ · X   (dY is [n, out], X is [n, in])
    gemm_tc::gemm_bf16(true, false, out, in, n, dyp_.data<float>(), xp_.data<float>(), dw, in,
                       true);
  } else {
    gemm_of(family_)(true, false, out, in, n, dy, out, x, in, dw, in, true);
  }
  if (db) {
    bias_grad_kernel<<<unsigned((out + kBiasCols - 1) / kBiasCols), dim3(kBiasCols, kBiasRows)>>>(
        n, out, dy, db);
    HPMC_CUDA_LAUNCH_CHECK("linear bias gradient");
  }
  // dX [n, in] = dY · W   (masked)
  if (!dx) return;
  gemm_tc::Epilogue ep;
  ep.mask = mask;
  ep.ldm = in;
  if (packed) {
    gemm_tc::gemm_bf16(false, false, n, in, out, dyp_.data<float>(), wp_.data<float>(), dx, in,
                       false, 0, ep);
    return;
  }
  if (has_epilogue(family_, p)) {
    gemm_tc::gemm(operands_of(p), false, false, n, in, out, dy, out, w, in, dx, in, false, 0, ep);
    return;
  }
  gemm_of(family_)(false, false, n, in, out, dy, out, w, in, dx, in, false);
  if (mask) {
    const size_t count = size_t(n) * in;
    mask_kernel<<<grid_for(count), kBlock>>>(mask, dx, count);
    HPMC_CUDA_LAUNCH_CHECK("linear input-gradient mask");
  }
}

size_t LinearGPU::workspace_bytes(const Shape& in) const {
  return products_.workspace_bytes(in.n, precision());
}

void LinearGPU::reserve(int max_batch) { products_.reserve(max_batch, precision()); }

void LinearGPU::forward_impl(const Tensor& x, Tensor& y) {
  products_.forward(precision(), x.shape().n, x.data<float>(), param(0),
                    cfg_.bias ? param(1) : nullptr, y.data<float>());
}

void LinearGPU::backward_impl(const Tensor& x, const Tensor& /*y*/, const Tensor& dy, Tensor* dx) {
  products_.backward(precision(), x.shape().n, x.data<float>(), dy.data<float>(), param(0),
                     grad(0), cfg_.bias ? grad(1) : nullptr, dx ? dx->data<float>() : nullptr);
}

HPMC_REGISTER_GPU(Linear)

}  // namespace hpmc::gpu
