// linear.h — the GPU fully connected layer: the same layer as LinearCPU
// (schema, config, validation, shapes and parameters from LinearSpec) running the
// gemm of one kernel family of conv2d_kernels.h. No CUDA types.
//
// x [N, in], W [out, in], b [out], y [N, out] (row-major device arrays):
//   forward   y = b (broadcast, if bias) then y (+)= x · Wᵀ
//   backward  dW += dYᵀ · X;  db += Σ_n dY (one thread per feature, summed
//             in batch order: deterministic);  dX = dY · W (if requested)
//
// In bf16 on the im2col family, when the forward product is one the
// tensor-core engine packs (gemm_tc::packs), the layer packs each operand
// once: x and W in forward (kept for backward: x for the weight gradient, W
// for the input gradient), dY in backward, and runs the three products on
// gemm_tc::gemm_bf16 — three packing passes a step instead of gemm_tc::gemm's
// six, the same bits — with the bias added in the forward product's
// epilogue rather than broadcast first (the same bits again).
// workspace_bytes counts the packed copies.
#pragma once

#include <string>
#include <vector>

#include "layers/gpu/family.h"
#include "layers/layer.h"
#include "layers/linear_spec.h"

namespace hpmc::gpu {

class LinearGPU : public LayerGPU<LinearSpec> {
 public:
  // Throws ConfigError for an invalid config (see linear_check_config).
  LinearGPU(std::string name, const LinearConfig& cfg, Family family)
      : LayerGPU(std::move(name), cfg), family_(family) {}
  // The family that args.impl names.
  explicit LinearGPU(const LayerArgs& args)
      : LayerGPU(args), family_(family_of(args.impl, args.name)) {}

  const char* impl() const override { return family_name(family_); }
  Family family() const { return family_; }
  size_t workspace_bytes(const Shape& in) const override;
  void reserve(int max_batch) override;

 protected:
  void forward_impl(const Tensor& x, Tensor& y) override;
  void backward_impl(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;

 private:
  // Whether a batch of n runs on packed bf16 operands (see above).
  bool packed_path(int n) const;
  // The packed copies for batches up to n (grown, never shrunk).
  void grow_packed(int n);

  Family family_;
  Tensor xp_, wp_, dyp_;              // packed x, W, dY (bf16 pairs in FP32 storage)
  int packed_batch_ = 0;              // the batch xp_ and dyp_ hold room for
  const float* xp_source_ = nullptr;  // the x that xp_ holds, packed by forward
};

}  // namespace hpmc::gpu
