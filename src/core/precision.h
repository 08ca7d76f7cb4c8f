// precision.h — the arithmetic the matrix products of a model run in
// (training.precision, `--precision`).
//
//   fp32  exact FP32: operands and sums in FP32 (the default; every path
//         computes today's results bit for bit)
//   tf32  tensor-core TF32 operands (10-bit mantissas), FP32 sums: GPU only
//   bf16  operands rounded to bfloat16 (8-bit mantissas, round to nearest
//         even), products and sums in FP32 (core/bf16.h, core/bf16gemm.h)
//
// Only the operands of the products (convolutions and linear layers:
// forward, input and weight gradients) change. Master weights, gradients,
// optimizer state, activations between layers on the CPU, losses,
// reductions and batch-norm statistics stay FP32, and checkpoints hold FP32.
// BF16 has FP32's exponent range, so no loss scaling is needed.
// Which impl runs which precision is model/impl.h's precision_refusal.
#pragma once

#include <string>
#include <vector>

namespace hpmc {

enum class Precision { kFp32, kTf32, kBf16 };

const std::vector<std::string>& precision_names();  // "fp32", "tf32", "bf16"
const char* precision_name(Precision p);
// UsageError listing the choices for anything else.
Precision parse_precision(const std::string& s);

// The precision of the products the calling thread runs now. Layer::forward
// and Layer::backward set it to the layer's precision() around the device
// implementation (a ScopedPrecision), so that the GPU kernel families below
// a layer (gpu::implicit::conv2d_*, gpu::implicit::gemm and the fused
// layers built on them) pick their tensor-core kernels without a precision
// argument in every call; outside any scope it is fp32. A thread-local
// state, as PyTorch's autocast is.
Precision current_precision();

class ScopedPrecision {
 public:
  explicit ScopedPrecision(Precision p);
  ~ScopedPrecision();
  ScopedPrecision(const ScopedPrecision&) = delete;
  ScopedPrecision& operator=(const ScopedPrecision&) = delete;

 private:
  Precision saved_;
};

}  // namespace hpmc
