// mlp_step.h — one whole SGD training step of an MLP in ONE GPU kernel.
//
// The model is a chain of L ≥ 2 linear layers (bias on each) with ReLU
// between them and softmax cross-entropy on the last one's output: the shape
// of configs/mnist_mlp.yaml. At that size a step is ~85 MFLOP but some fifteen
// kernel launches layer by layer, each costing more than its arithmetic. The
// fused step is a cooperative kernel: every block stays resident, and the
// phases of the step hand over without launches: each block waits, by
// release/acquire counts, for just the rows its next work reads (the middle
// layers' backward phases, when there are several, are separated by
// grid-wide barriers; HPMC_FUSED_CHAIN=0 puts a barrier between every phase):
//
//   F(l), l < L−1   act[l] = relu(in(l)·W[l]ᵀ + b[l])         (in(0) = the batch)
//   head            per sample: act[L−2] from F(L−2)'s split sums, logits,
//                   softmax, loss, dlogits, and
//                   dpre[L−2] = (dlogits·W[L−1]) ⊙ (act[L−2] > 0)
//   B(l), L−2 ≥ l ≥ 1   dpre[l−1] = (dpre[l]·W[l]) ⊙ (act[l−1] > 0),
//                   gW[l] = dpre[l]ᵀ·in(l), gb[l] = Σ_rows dpre[l], with the
//                   SGD of W[l] (each tile once dpre[l−1]'s items have read it)
//                   and of b[l]
//   last            gW[0], gW[L−1] and their biases with the SGD update fused
//                   in; the batch's loss added to acc
//
// The batch is read straight from the uint8 dataset on the device through the
// epoch's index array (pixel / 255, rounded as gather_batch rounds it), so a
// step is one launch and no copy. The products are FP32 FFMA, or in tf32 and
// bf16 (MlpStepDesc::precision) tensor-core mma.sync with FP32 sums, each
// operand rounded as the layer-by-layer kernels round it (the head's short
// per-sample products: FFMA on rounded operands). Sums run in a
// fixed order (no atomics), so a step is deterministic; they are not the
// layer-by-layer kernels' order, so the two paths agree to rounding, not bit
// for bit (tests/test_gpu_fused.cpp holds them together).
//
// The host side sees no CUDA type; a build without CUDA links a version whose
// constructor throws (factory_nocuda.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/precision.h"

namespace hpmc::gpu {

constexpr int kMlpStepMaxLayers = 8;
constexpr int kMlpStepMaxClasses = 32;

// Device pointers into the model's parameter and gradient buffers and the
// SGD optimizer's momentum buffer.
struct MlpStepDesc {
  std::vector<int> dims;  // d[0] (input features) .. d[L] (classes)
  std::vector<float*> w, b, gw, gb;  // per layer: W[l] is d[l+1] × d[l], row-major
  std::vector<float*> vw, vb;        // momentum buffers; unused when momentum == 0
  float lr = 0, momentum = 0, weight_decay = 0;  // lr: until MlpStep::set_lr
  int max_batch = 0;
  // The products' operands (core/precision.h); parameters, gradients, momenta,
  // activations and sums stay FP32 in every precision.
  Precision precision = Precision::kFp32;
};

class MlpStep {
 public:
  explicit MlpStep(const MlpStepDesc& desc);  // throws RuntimeError without CUDA
  ~MlpStep();
  MlpStep(const MlpStep&) = delete;
  MlpStep& operator=(const MlpStep&) = delete;

  // One step on samples idx[0..n) (a device array of dataset indices) of a
  // uint8 dataset on the device (d[0] values per sample, fewer than 2^31
  // values in all: the kernel indexes it in 32 bits) with int32 labels, each
  // in [0, classes). acc (2 device doubles) += {Σ loss, Σ correct}.
  // next_idx[0..next_n), if given, are the next step's samples: this step
  // gathers them for it. order_version names the contents of the index array
  // (change it whenever they change): a step uses what its predecessor
  // gathered only if images, idx, n and the version all match.
  void run(const uint8_t* images, const int32_t* labels, const int32_t* idx, int n,
           uint64_t order_version, double* acc, const int32_t* next_idx = nullptr,
           int next_n = 0);

  int blocks() const;  // the cooperative grid's size

  // The learning rate of the next run() calls (desc.lr until set): a
  // schedule changes it step by step, at no cost (it is a kernel argument).
  void set_lr(float lr) { lr_ = lr; }

 private:
  struct State;
  std::unique_ptr<State> s_;
  float lr_ = 0;
};

// Whether the current device can run the fused step (cooperative launch, and
// tensor cores for tf32 and bf16); if not, *why says so.
bool mlp_step_supported(std::string* why, Precision precision = Precision::kFp32);

}  // namespace hpmc::gpu
