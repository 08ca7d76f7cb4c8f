// linear.h — the GPU fully connected layer: the same layer as LinearCPU
// (schema, config, validation, shapes and parameters from LinearSpec) running the
// gemm of one kernel family of conv2d_kernels.h. No CUDA types.
//
// x [N, in], W [out, in], b [out], y [N, out] (row-major device arrays):
//   forward   y = b + x · Wᵀ
//   backward  dW += dYᵀ · X;  db += Σ_n dY (a fixed summation order that
//             depends on N only: deterministic);  dX = dY · W (if requested)
//
// LinearProducts runs these for LinearGPU and for the linear steps of a
// fused layer (layers/fused_spec.h), which add an activation after the layer
// (forward) and the mask of a ReLU before it (on dX). In tf32 and bf16 on the
// im2col family the products run on the tensor-core engine (gemm_tc.h),
// whose epilogue adds the bias (no broadcast pass), applies the activation
// (relu, leaky_relu) and the mask: the bits of the separate passes, with
// fewer kernels (has_epilogue, epilogue_takes). Elsewhere the bias is
// broadcast first, and an activation or mask runs as the activation
// layer's operation on the product, in place.
//
// In bf16 on the im2col family, when the forward product is one the
// tensor-core engine packs (gemm_tc::packs), the products pack each operand
// once: x and W in forward (kept for backward: x for the weight gradient, W
// for the input gradient), dY in backward, and run the three products on
// gemm_tc::gemm_bf16 — three packing passes a step instead of gemm_tc::gemm's
// six, the same bits. workspace_bytes counts the packed copies.
#pragma once

#include <string>
#include <vector>

#include "core/precision.h"
#include "core/tensor.h"
#include "layers/epilogue_act.h"
#include "layers/gpu/family.h"
#include "layers/layer.h"
#include "layers/linear_spec.h"

namespace hpmc::gpu {

class LinearProducts {
 public:
  LinearProducts(const LinearConfig& cfg, Family family) : cfg_(cfg), family_(family) {}

  // Whether activations and masks run in the products' epilogues in
  // precision p (im2col in tf32 or bf16), rather than as kernels of their own.
  static bool has_epilogue(Family family, Precision p) {
    return family == Family::kIm2col && p != Precision::kFp32;
  }
  // The activations that epilogue applies: relu and leaky_relu (a compare
  // and a multiply; sigmoid's and tanh's exp would slow every store of the
  // product). Others run as a pass of their own after the products.
  static bool epilogue_takes(const Activation& a) {
    return a.kind == ActKind::kNone || a.kind == ActKind::kRelu || a.kind == ActKind::kLeakyRelu;
  }
  size_t workspace_bytes(int n, Precision p) const;
  void reserve(int max_batch, Precision p);

  // y [n, out] = act(x · Wᵀ + b)   (b null: no bias; act: not prelu)
  void forward(Precision p, int n, const float* x, const float* w, const float* b, float* y,
               const Activation& act = {});
  // dW += dYᵀ · X, db += Σ_n dY (db null: no bias), and, if dx is not null,
  // dX = dY · W, or with a mask (n × in): dX[i][j] = mask[i][j] > 0 ?
  // (dY · W)[i][j] : 0, the backward of a ReLU whose output is this layer's
  // input (pass x). w is the W of the forward pass on x (bf16 reuses its
  // packed copy when x is the forward's).
  void backward(Precision p, int n, const float* x, const float* dy, const float* w, float* dw,
                float* db, float* dx, const float* mask = nullptr);

 private:
  // Whether a batch of n runs on packed bf16 operands (see above).
  bool packed_path(Precision p, int n) const;
  // The packed copies for batches up to n (grown, never shrunk).
  void grow_packed(int n);

  LinearConfig cfg_;
  Family family_;
  Tensor xp_, wp_, dyp_;              // packed x, W, dY (bf16 pairs in FP32 storage)
  int packed_batch_ = 0;              // the batch xp_ and dyp_ hold room for
  const float* xp_source_ = nullptr;  // the x that xp_ holds, packed by forward
};

class LinearGPU : public LayerGPU<LinearSpec> {
 public:
  // Throws ConfigError for an invalid config (see linear_check_config).
  LinearGPU(std::string name, const LinearConfig& cfg, Family family)
      : LayerGPU(std::move(name), cfg), family_(family), products_(cfg_, family) {}
  // The family that args.impl names.
  explicit LinearGPU(const LayerArgs& args)
      : LayerGPU(args), family_(family_of(args.impl, args.name)), products_(cfg_, family_) {}

  const char* impl() const override { return family_name(family_); }
  Family family() const { return family_; }
  size_t workspace_bytes(const Shape& in) const override;
  void reserve(int max_batch) override;

 protected:
  void forward_impl(const Tensor& x, Tensor& y) override;
  void backward_impl(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;

 private:
  Family family_;
  LinearProducts products_;
};

}  // namespace hpmc::gpu
