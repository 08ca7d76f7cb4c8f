// elementwise_loss_kernels.h — GPU kernels of the losses whose per-element
// term needs only p and t: bce_with_logits, bce and l1, as a plain host
// function on device pointers (no CUDA type appears here; the loss classes
// are in elementwise_losses.h). The formulas, layouts and
// reductions are the CPU ops' (layers/cpu/bce_loss_ops.h, l1_loss_ops.h);
// the contract is layers/loss.h's: acc (2 doubles on the device) gets
// acc[0] += Σ_s l_s (acc[1] is left alone), and dpred, when non-null, is
// OVERWRITTEN with d(mean loss)/d pred.
//
// Design (as losses.h's MSE): one block per sample sums its elements' loss
// terms in double (strided serial parts, then a fixed shared-memory tree) and
// writes dpred; ONE block then reduces the per-sample losses in a fixed order
// and adds the total to acc on the device. No host synchronisation, no
// floating-point atomics: the same inputs give the same bits on every run and
// GPU. Against the CPU (T = float):
//   dpred  bit for bit for bce and l1 (the same double / float operations);
//          within 1 ulp for bce_with_logits (device exp in double vs glibc's,
//          rounded once to float).
//   acc    to rounding of doubles (the sums are trees, the CPU's serial).
//
// bce's input errors. The CPU throws on a target outside [0, 1] (or NaN) or a
// prediction outside [0, 1] that is not NaN; the GPU cannot without a host
// copy per step, so a bad element's loss term is NaN (acc[0] becomes NaN and
// the trainer stops at the step where it reads it) and its dpred is 0, and
// the first bad element of the batch (smallest sample, then element) is
// recorded in a sticky device status word (kLossStatusInts int32s, zeroed by
// the caller once) unless an earlier report is still pending. The loss reads
// it with take_loss_status() where it syncs anyway and throws the CPU's error
// (bce_range_error in bce_loss_ops.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace hpmc::gpu {

enum class ElementwiseLoss { kBceWithLogits, kBce, kL1 };

// The device status word: {set, sample, element low 32 bits, element high 32
// bits, is_target, value's float bits}.
constexpr int kLossStatusInts = 6;

// Bytes of device workspace for a batch of n samples (a double and an int64
// per sample).
size_t elementwise_loss_workspace_bytes(int n);

// pred, target, dpred: n × per_sample floats; acc: 2 doubles; workspace:
// elementwise_loss_workspace_bytes(n) bytes (8-byte aligned); status:
// kLossStatusInts int32s, used by kBce only (may be null for the others).
// All on the device. n = 0 or per_sample = 0 adds 0 and writes nothing.
void elementwise_loss(ElementwiseLoss kind, const float* pred, const float* target, float* dpred,
                      int n, size_t per_sample, void* workspace, double* acc, int32_t* status);

// The first bad bce input recorded in `status` since it was last cleared.
struct LossStatus {
  bool bad = false;
  int sample = 0;
  size_t element = 0;
  bool is_target = false;
  float value = 0;
};
// Copies the device status word to the host (one small synchronous copy)
// and, when it records an error, zeroes it so the next report starts clean.
LossStatus take_loss_status(int32_t* status);

}  // namespace hpmc::gpu
