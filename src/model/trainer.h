// trainer.h — mini-batch training and evaluation.
//
// An epoch visits every training sample once, in an order drawn from
// (seed, epoch) so that it does not depend on what ran before; the last,
// partial batch is trained on, not dropped. After each epoch the trainer
// evaluates the test set and reports train loss, test loss (and accuracy for
// a classifier), images/s and the epoch's time. A NaN or Inf loss stops the
// run with a DivergedError. On the GPU the loss is accumulated on the device
// and read back only at progress updates (about every 1% of an epoch), at
// checkpoints and at the end of the epoch; NaN is detected at those reads.
//
// Data parallelism and gradient accumulation. A step (one optimizer update)
// takes G = ranks × training.batch_size × training.grad_accumulation
// consecutive samples of the epoch's order (fewer in the last step). Every
// rank draws the same order; the step's g samples are split as evenly as
// possible into ranks × K parts (shard_of), and rank r's k-th micro-batch is
// part k·ranks + r (K = grad_accumulation). Each micro-batch runs forward,
// loss and backward, its loss gradient weighted by its share of the step's
// samples (count / g), so that the summed gradients are those of the mean
// loss over all g samples, whatever the split; the ranks then sum their
// gradients (an all-reduce, dist/communicator.h) and each applies the same
// update. N ranks at batch B, or K micro-batches of B, thus train like one
// process at batch N·K·B, to float32 rounding (the sums are ordered
// differently), with these exceptions: batch norm normalises each
// micro-batch by its own statistics (and its running statistics are rank
// 0's: they are broadcast to every rank before each evaluation, as PyTorch's
// DistributedDataParallel broadcasts buffers); dropout, input noise and
// augmentation draw from each sample's position in the whole step's batch
// (LayerMode::first), so they match the single process exactly. A rank whose
// part is empty still joins the all-reduce. Steps count updates: the
// schedule, checkpoint_every, log_every and the global step all count them.
// The fused MLP step declines under either (it updates each layer as soon as
// its gradient is done). The loss and accuracy sums are added over the ranks
// whenever they are read, the test set is evaluated in shards, one per rank,
// and the weights are checked to be identical on every rank after each epoch.
#pragma once

#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "dist/communicator.h"
#include "model/config.h"
#include "model/model.h"
#include "optim/clip.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"

namespace hpmc {
class Profiler;
}

namespace hpmc {

struct EvalResult {
  double loss = 0;
  double accuracy = -1;  // fraction correct; -1 when the loss is not a classifier's
  // The mean squared error of the reconstruction, for an autoencoder trained
  // with another loss (bce, l1, ...), so that runs with different losses
  // compare in one unit; -1 otherwise (with mse it is `loss`).
  double mse = -1;
  int samples = 0;
};

struct EpochResult {
  int epoch = 0;  // 1-based
  double train_loss = 0, train_accuracy = -1;
  EvalResult test;
  double seconds = 0;       // whole epoch, evaluation included
  double train_seconds = 0; // training steps only
  double images_per_s = 0;  // training images / train_seconds
};

// The order in which epoch `epoch` (0-based) visits n samples.
std::vector<int32_t> epoch_order(int n, uint64_t seed, int epoch, bool shuffle);

// Part `slot` of `samples` split into `slots` parts as evenly as possible:
// the first samples % slots parts hold one sample more. begin is relative to
// the first sample.
struct Shard {
  int begin = 0, count = 0;
};
Shard shard_of(int samples, int slots, int slot);

class BatchFeeder;
class StepStrategy;

// Mean loss (and accuracy) of the model over a dataset, in batches.
EvalResult evaluate(Model& model, const Dataset& data, int batch_size);
// The same through a feeder that already holds the data on the model's
// device (the trainer keeps one, so the test set is uploaded once per run).
EvalResult evaluate(Model& model, BatchFeeder& feed, int batch_size);
// The same over the ranks of `comm`: each evaluates its contiguous share of
// the samples and the sums are added, so every rank gets the whole result.
EvalResult evaluate(Model& model, BatchFeeder& feed, int batch_size, dist::Communicator& comm);

// Where training stands: enough, with the weights and the optimizer's state,
// to continue exactly (a checkpoint stores all of it).
struct TrainState {
  int epoch = 0;            // 0-based epoch in progress (== epochs when done)
  int step = 0;             // steps of that epoch already taken
  int64_t global_step = 0;  // steps taken since the run began
  double loss_sum = 0;      // this epoch's summed per-sample loss so far
  double correct = 0;       // this epoch's correct predictions so far
  double epoch_seconds = 0; // training time already spent on this epoch
};

class Trainer {
 public:
  enum class Progress { kAuto, kBar, kLines, kQuiet };

  // Builds the optimizer (optim/optimizer.h: fresh state, no steps taken),
  // the schedule and the gradient clipping cfg asks for, over the model's
  // parameter store. `comm` is the ranks the model is trained over (the
  // process's world: one rank without mpirun).
  Trainer(Model& model, const TrainingConfig& cfg, dist::Communicator& comm = dist::world());
  ~Trainer();

  // The optimizer: its state and step count are what a checkpoint saves and
  // a resume restores (model/checkpoint.h). fit() requires its step count to
  // equal the state's global_step.
  Optimizer& optimizer() { return *opt_; }
  const Optimizer& optimizer() const { return *opt_; }
  // The run's length in optimizer steps, which a cosine schedule without
  // total_steps spans; fit() sets it (epochs × steps per epoch), callers of
  // step() and train_batch() may.
  void set_run_steps(int64_t steps);
  // The learning rate of the next step: the schedule at the optimizer's
  // step count.
  double next_lr();
  void set_progress(Progress p) { progress_ = p; }
  // Called after every epoch with its result and the state after it.
  void on_epoch(std::function<void(const EpochResult&, const TrainState&)> f) {
    on_epoch_ = std::move(f);
  }
  // Called after every step; return true to stop training after this step
  // (fit() then returns with state.epoch < epochs). state.loss_sum and
  // state.correct are current only after sync_loss(state).
  void on_step(std::function<bool(TrainState&)> f) { on_step_ = std::move(f); }
  // Read the device's loss accumulator into state (a host copy on the GPU)
  // and stop with a DivergedError if it is not finite.
  void sync_loss(TrainState& state);

  // Train until cfg.epochs, starting from `state` (a fresh state starts at
  // the beginning). `test` may be empty (size 0) to skip evaluation.
  std::vector<EpochResult> fit(const Dataset& train, const Dataset& test, std::ostream& out,
                               TrainState& state);
  std::vector<EpochResult> fit(const Dataset& train, const Dataset& test, std::ostream& out) {
    TrainState fresh;
    return fit(train, test, out, fresh);
  }
  // Samples per step (update) over all ranks: ranks × batch_size ×
  // grad_accumulation, at most the training set's size.
  int step_samples(int train_size) const;
  int steps_per_epoch(int train_size) const;
  dist::Communicator& comm() { return comm_; }

  // One step on a prepared batch: training mode (Model::set_mode) at the
  // trainer's global step, zero grads, forward, loss, backward, gradient
  // clipping (if training.clip_grad_norm), the optimizer's update at
  // next_lr(); the global step then advances. Adds the batch's summed loss
  // (and correct count) to acc. With training.input_noise the model sees x
  // with the noise of this step (data/augment.h) while the loss compares
  // with `target` as given (for an autoencoder, the clean x).
  void step(const Tensor& x, const Tensor& target, Tensor& acc);

  // One step on order[begin, begin + n) of the feeder, by the step strategy
  // chosen for its data (model/step_strategy.h): the fused kernel of
  // model/fused_step.h where the model fits it, else train_layers(). With
  // several ranks or micro-batches, [begin, begin + n) is the whole step's
  // batch, of which this rank trains its parts (see the top of this file).
  void train_batch(BatchFeeder& feed, int begin, int n, Tensor& acc);
  // How train_batch() trains on this feeder's data: "fused: ..." or
  // "layer by layer: <why not fused>" (StepStrategy::describe).
  std::string step_path(const BatchFeeder& feed);

  void set_profiler(Profiler* p) { profiler_ = p; }

 private:
  Model& model_;
  TrainingConfig cfg_;
  std::unique_ptr<Optimizer> opt_;
  std::unique_ptr<GradClipper> clip_;
  std::unique_ptr<Schedule> schedule_;  // built on first use, for run_steps_
  int64_t run_steps_ = 0;
  Progress progress_ = Progress::kAuto;
  std::function<void(const EpochResult&, const TrainState&)> on_epoch_;
  std::function<bool(TrainState&)> on_step_;
  Profiler* profiler_ = nullptr;
  Tensor acc_;  // the loss accumulator of the epoch in progress, on the model's device
  dist::Communicator& comm_;
  // The step strategy, chosen once per feeder (its data decides, too).
  void prepare_strategy(const BatchFeeder& feed);
  // The layer-by-layer step on the step's batch order[begin, begin + n):
  // for each of this rank's micro-batches, gather, data.augment (flipped and
  // cropped as drawn for this step; an autoencoder's target is the augmented
  // image) and accumulate(); then update().
  void train_layers(BatchFeeder& feed, int begin, int n, Tensor& acc);
  // Forward, loss and backward of one micro-batch at step `s` whose first
  // sample is at position `first` of the step's batch, its loss gradient
  // multiplied by `weight` (its share of the step's samples); adds its
  // gradients to the gradient buffer and its loss to acc.
  void accumulate(const Tensor& x, const Tensor& target, Tensor& acc, int64_t s, int64_t first,
                  double weight);
  // The gradients summed over the ranks, clipped, and the optimizer's update.
  void update();
  // Rank 0's layer buffers (batch norm's running statistics) to every rank.
  void broadcast_buffers();
  // Stops with a RuntimeError where this rank's position or weights differ
  // from rank 0's (`when`: "at the start", "after epoch 3").
  void check_ranks_agree(const TrainState& state, int n, const std::string& when);
  bool stop_wanted_ = false;  // a stop asked for on this rank, for the next vote
  const BatchFeeder* strategy_feed_ = nullptr;
  std::unique_ptr<StepStrategy> strategy_;
  int n_train_ = 0;
  int64_t global_step_ = 0;  // the step the next step() trains (fit() sets it)
  // The augmented batch and the noisy input, on the model's device, allocated
  // at first use (only runs with data.augment / training.input_noise have them).
  Tensor augmented_, noisy_;
  void ensure_buffer(Tensor& buf, const Tensor& like);
};

}  // namespace hpmc
