#include "model/trainer.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <memory>
#include <numeric>
#include <ostream>
#include <sstream>

#include "core/error.h"
#include "core/device.h"
#include "core/profiler.h"
#include "core/progress.h"
#include "core/rng.h"
#include "data/augment.h"
#include "layers/gpu/factory.h"
#include "model/batches.h"
#include "model/registry.h"
#include "model/step_strategy.h"

namespace hpmc {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The target a loss compares the output with: the input itself for an
// autoencoder (mse), the labels for a classifier.
bool wants_labels(const Loss& loss) { return loss.target_dtype() == DType::kI32; }

// Reads the loss accumulator; on the CPU it is host memory already.
void read_acc(const Tensor& acc, double out[2]) {
  Tensor h = acc.device() == Device::kCPU ? acc : acc.to_device(Device::kCPU);
  out[0] = h.data<double>()[0];
  out[1] = h.data<double>()[1];
}

// A host accumulator holding {loss sum, correct count}.
Tensor epoch_sums(double loss_sum, double correct) {
  Tensor h = Tensor::empty(Shape(2, 1, 1, 1), DType::kF64);
  h.data<double>()[0] = loss_sum;
  h.data<double>()[1] = correct;
  return h;
}

// x *= s on x's device.
void scale_tensor(Tensor& x, float s) {
  if (x.device() == Device::kGPU) {
    gpu::scale(x.data<float>(), x.numel(), s);
    return;
  }
  float* p = x.data<float>();
  for (size_t i = 0; i < x.numel(); ++i) p[i] *= s;
}

// FNV-1a over a tensor's bytes (copied to the host first where needed).
uint64_t hash_of(const Tensor& t) {
  Tensor h = t.device() == Device::kCPU ? t : t.to_device(Device::kCPU);
  const unsigned char* p = static_cast<const unsigned char*>(h.raw());
  uint64_t x = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < h.numel() * dtype_size(h.dtype()); ++i) x = (x ^ p[i]) * 0x100000001b3ull;
  return x;
}

// The sums of a model's loss (and accuracy, and MSE for an autoencoder
// trained with another loss) over samples [lo, hi) of the feeder, in batches.
struct EvalSums {
  double loss = 0, correct = 0, mse = 0;
};
EvalSums evaluate_range(Model& model, BatchFeeder& feed, int batch_size, int lo, int hi,
                        bool* with_mse) {
  EvalSums s;
  Loss& loss = model.loss();
  const bool lab = wants_labels(loss);
  // An autoencoder trained with another loss also reports its MSE.
  LossPtr mse = !lab && loss.kind() != LossKind::kMseLoss ? make_loss("mse", model.impl()) : nullptr;
  *with_mse = mse != nullptr;
  if (hi <= lo) return s;
  model.set_mode(false, 0);
  Tensor acc = Tensor::zeros(Shape(2, 1, 1, 1), DType::kF64, model.device());
  Tensor mse_acc = mse ? Tensor::zeros(Shape(2, 1, 1, 1), DType::kF64, model.device()) : Tensor();
  for (int b = lo; b < hi; b += batch_size) {
    int n = std::min(batch_size, hi - b);
    feed.load(b, n);
    const Tensor& pred = model.forward(feed.x());
    loss.compute(pred, lab ? feed.labels() : feed.x(), nullptr, acc);
    if (mse) mse->compute(pred, feed.x(), nullptr, mse_acc);
  }
  loss.check_status();
  double a[2];
  read_acc(acc, a);
  s.loss = a[0];
  s.correct = a[1];
  if (mse) {
    read_acc(mse_acc, a);
    s.mse = a[0];
  }
  return s;
}

}  // namespace

Shard shard_of(int samples, int slots, int slot) {
  HPMC_CHECK(slots > 0 && slot >= 0 && slot < slots && samples >= 0, "part ", slot, " of ",
             slots, " of ", samples, " samples");
  const int base = samples / slots, extra = samples % slots;
  return {slot * base + std::min(slot, extra), base + (slot < extra ? 1 : 0)};
}

std::vector<int32_t> epoch_order(int n, uint64_t seed, int epoch, bool shuffle) {
  if (!shuffle) {
    std::vector<int32_t> order(size_t(n > 0 ? n : 0));
    std::iota(order.begin(), order.end(), 0);
    return order;
  }
  Rng rng(seed, 0x5eed0000ull + uint64_t(epoch));
  return random_permutation(n, rng);
}

EvalResult evaluate(Model& model, const Dataset& data, int batch_size) {
  if (data.size() == 0) return EvalResult{};
  batch_size = std::min(batch_size, data.size());
  BatchFeeder feed(data, model.device(), batch_size, model.input_shape());
  return evaluate(model, feed, batch_size);
}

EvalResult evaluate(Model& model, BatchFeeder& feed, int batch_size) {
  return evaluate(model, feed, batch_size, *dist::make_single_communicator());
}

EvalResult evaluate(Model& model, BatchFeeder& feed, int batch_size, dist::Communicator& comm) {
  EvalResult r;
  r.samples = feed.size();
  if (r.samples == 0) return r;
  batch_size = std::min({batch_size, r.samples, feed.max_batch()});
  model.allocate(std::max(batch_size, model.max_batch()));
  const Shard mine = shard_of(r.samples, comm.size(), comm.rank());
  bool with_mse = false;
  const EvalSums s =
      evaluate_range(model, feed, batch_size, mine.begin, mine.begin + mine.count, &with_mse);
  double sums[3] = {s.loss, s.correct, s.mse};
  comm.allreduce_sum(sums, 3, "the test loss sums");
  r.loss = sums[0] / r.samples;
  if (model.loss().is_classifier()) r.accuracy = sums[1] / r.samples;
  if (with_mse) r.mse = sums[2] / r.samples;
  return r;
}

Trainer::Trainer(Model& model, const TrainingConfig& cfg, dist::Communicator& comm)
    : model_(model), cfg_(cfg), opt_(make_optimizer(cfg.optimizer, model.params())), comm_(comm) {
  if (cfg.clip_grad_norm > 0) clip_ = std::make_unique<GradClipper>(cfg.clip_grad_norm);
}

void Trainer::set_run_steps(int64_t steps) {
  if (steps == run_steps_ && schedule_) return;
  run_steps_ = steps;
  schedule_.reset();
}

double Trainer::next_lr() {
  if (!schedule_) schedule_ = std::make_unique<Schedule>(cfg_.schedule, cfg_.optimizer.lr, run_steps_);
  return schedule_->lr(opt_->steps());
}

Trainer::~Trainer() = default;

void Trainer::prepare_strategy(const BatchFeeder& feed) {
  if (strategy_feed_ == &feed) return;
  strategy_.reset();
  strategy_ = choose_step_strategy(model_, *opt_, cfg_, feed,
                                   [this](BatchFeeder& f, int begin, int n, Tensor& acc) {
                                     train_layers(f, begin, n, acc);
                                   },
                                   comm_.size());
  strategy_feed_ = &feed;
}

std::string Trainer::step_path(const BatchFeeder& feed) {
  prepare_strategy(feed);
  return strategy_->describe();
}

void Trainer::train_batch(BatchFeeder& feed, int begin, int n, Tensor& acc) {
  prepare_strategy(feed);
  strategy_->run(feed, begin, n, acc, next_lr(), profiler_);
}

void Trainer::train_layers(BatchFeeder& feed, int begin, int n, Tensor& acc) {
  const int64_t s = global_step_++;
  model_.params().zero_grads();
  const int ranks = comm_.size(), slots = ranks * cfg_.grad_accumulation;
  for (int k = 0; k < cfg_.grad_accumulation; ++k) {
    const Shard part = shard_of(n, slots, k * ranks + comm_.rank());
    if (part.count == 0) continue;  // the rank still joins the all-reduce, with zeros
    {
      ProfileScope scope(profiler_, "gather batch");
      feed.load(begin + part.begin, part.count);
    }
    const Tensor* x = &feed.x();
    if (cfg_.augment.active()) {
      ProfileScope scope(profiler_, "augment");
      ensure_buffer(augmented_, *x);
      augment_batch(*x, augmented_, feed.data().sample_shape(), cfg_.augment, cfg_.seed, s,
                    part.begin);
      x = &augmented_;
    }
    const bool lab = wants_labels(model_.loss());
    accumulate(*x, lab ? feed.labels() : *x, acc, s, part.begin,
               slots == 1 ? 1.0 : double(part.count) / n);
  }
  update();
}

void Trainer::ensure_buffer(Tensor& buf, const Tensor& like) {
  const Shape want = like.shape().with_batch(std::max(like.shape().n, model_.max_batch()));
  if (!buf.defined() || buf.device() != like.device() || buf.capacity() < want.count() ||
      buf.shape().per_sample() != want.per_sample())
    buf = Tensor::empty(want, DType::kF32, like.device());
}

void Trainer::step(const Tensor& x, const Tensor& target, Tensor& acc) {
  const int64_t s = global_step_++;
  model_.params().zero_grads();
  accumulate(x, target, acc, s, 0, 1.0);
  update();
}

void Trainer::accumulate(const Tensor& x, const Tensor& target, Tensor& acc, int64_t s,
                         int64_t first, double weight) {
  model_.set_mode(true, s, first);
  const Tensor* in = &x;
  if (cfg_.input_noise.active()) {  // the model sees the noisy input; the target stays
    ProfileScope scope(profiler_, "input noise");
    ensure_buffer(noisy_, x);
    add_input_noise(x, noisy_, cfg_.input_noise, cfg_.seed, s, first);
    in = &noisy_;
  }
  const Tensor& pred = model_.forward(*in);
  Tensor& dpred = model_.output_grad();
  dpred.set_batch(x.shape().n);
  {
    ProfileScope scope(profiler_, "loss");
    model_.loss().compute(pred, target, &dpred, acc);
    // The loss gives the gradient of this micro-batch's mean; weighted by
    // its share, the parts' gradients add up to that of the step's mean.
    if (weight != 1.0) scale_tensor(dpred, float(weight));
  }
  model_.backward(*in, dpred);
}

void Trainer::update() {
  if (comm_.size() > 1) {
    ProfileScope scope(profiler_, "gradient all-reduce");
    Tensor& g = model_.params().grads();
    comm_.allreduce_sum(g.data<float>(), g.numel(), g.device(), "the gradient all-reduce");
  }
  if (clip_) {
    ProfileScope scope(profiler_, "clip_grad_norm");
    clip_->clip(model_.params());
  }
  const double lr = next_lr();
  ProfileScope scope(profiler_, opt_->type());
  opt_->step(lr);
}

int Trainer::step_samples(int n) const {
  const int64_t g = int64_t(comm_.size()) * cfg_.batch_size * cfg_.grad_accumulation;
  return int(std::min<int64_t>(g, n));
}

int Trainer::steps_per_epoch(int n) const {
  const int g = step_samples(n);
  return g > 0 ? int((int64_t(n) + g - 1) / g) : 0;
}

void Trainer::broadcast_buffers() {
  Tensor& b = model_.params().buffers();
  if (comm_.size() > 1 && b.numel() > 0)
    comm_.broadcast(b.raw(), b.numel() * sizeof(float), 0, b.device(),
                    "rank 0's running statistics");
}

void Trainer::check_ranks_agree(const TrainState& state, int n, const std::string& when) {
  if (comm_.size() == 1) return;
  struct Item {
    const char* what;
    uint64_t value;
  };
  uint64_t opt_hash = 0;
  for (size_t i = 0; i < opt_->state_names().size(); ++i)
    opt_hash = opt_hash * 31 + hash_of(opt_->state(i));
  std::vector<Item> mine = {
      {"training-set size", uint64_t(n)},
      {"samples per step", uint64_t(step_samples(n))},
      {"epoch", uint64_t(state.epoch)},
      {"step", uint64_t(state.step)},
      {"global step", uint64_t(state.global_step)},
      {"weights (hash)", hash_of(model_.params().params())},
      {"optimizer state (hash)", opt_hash},
  };
  std::vector<uint64_t> root(mine.size());
  for (size_t i = 0; i < mine.size(); ++i) root[i] = mine[i].value;
  comm_.broadcast(root.data(), root.size() * sizeof(uint64_t), 0, Device::kCPU,
                  "the check that the ranks agree");
  for (size_t i = 0; i < mine.size(); ++i)
    if (root[i] != mine[i].value)
      throw RuntimeError(str(
          "rank ", comm_.rank(), "'s ", mine[i].what, " is ", mine[i].value, " but rank 0's is ",
          root[i], " ", when, "; ",
          state.global_step == 0 || when.rfind("at the start", 0) == 0
              ? "every rank must read the same config, data and checkpoint (on several hosts: a "
                "shared filesystem, or identical copies at the same paths)"
              : "the ranks' weights drifted apart, which the all-reduce must not allow; please "
                "report it with the command and the MPI library (hpmc info)"));
}

void Trainer::sync_loss(TrainState& state) {
  model_.loss().check_status();
  double a[2];
  read_acc(acc_, a);
  if (comm_.size() > 1) {
    // Each rank holds its samples' sums since the last look. The total moves
    // to rank 0 (the others restart from 0), which is where a resumed run
    // starts from too: so a resume on the same ranks sums in the same order.
    comm_.allreduce_sum(a, 2, "the training loss sums");
    acc_.copy_from(epoch_sums(comm_.rank() == 0 ? a[0] : 0, comm_.rank() == 0 ? a[1] : 0));
  }
  state.loss_sum = a[0];
  state.correct = a[1];
  if (!std::isfinite(a[0]))
    throw DivergedError(str("the training loss became ", a[0], " in epoch ", state.epoch + 1,
                            " by step ", state.step, "; lower ", cfg_.optimizer.key("lr"), " (now ",
                            cfg_.optimizer.lr, ") or check the data"));
}

std::vector<EpochResult> Trainer::fit(const Dataset& train, const Dataset& test,
                                      std::ostream& out, TrainState& state) {
  const int n = train.size();
  if (n == 0) throw DataError("the training set is empty: nothing to train on");
  n_train_ = n;
  const int bs = std::min(cfg_.batch_size, n);  // a micro-batch of one rank, at most
  const int gs = step_samples(n);               // a step of every rank
  const int steps = steps_per_epoch(n);
  HPMC_CHECK(state.step >= 0 && state.step <= steps, "resumed at step ", state.step,
             " of an epoch of ", steps, " steps");
  HPMC_CHECK(opt_->steps() == state.global_step, "the optimizer has taken ", opt_->steps(),
             " steps but the run ", state.global_step, ": restore its state with the position");
  set_run_steps(int64_t(cfg_.epochs) * steps);
  next_lr();  // a schedule that cannot run this long fails before any step
  model_.allocate(bs);
  model_.set_profiler(profiler_);
  BatchFeeder feed(train, model_.device(), bs, model_.input_shape());
  strategy_feed_ = nullptr;  // choose the step strategy afresh for this feeder
  std::unique_ptr<BatchFeeder> test_feed;
  if (test.size() > 0)
    test_feed = std::make_unique<BatchFeeder>(test, model_.device(), std::min(bs, test.size()),
                                              model_.input_shape());
  acc_ = Tensor::zeros(Shape(2, 1, 1, 1), DType::kF64, model_.device());
  const bool on_gpu = model_.device() == Device::kGPU;
  const bool several = comm_.size() > 1;
  check_ranks_agree(state, n, "at the start of training");
  stop_wanted_ = false;

  Progress mode = progress_;
  if (mode == Progress::kAuto) mode = isatty(STDOUT_FILENO) ? Progress::kBar : Progress::kLines;
  const int line_every = std::max(1, steps / 10);
  // How often the host looks at the loss: every step on the CPU (free), about
  // 1% of an epoch on the GPU (each look is a device->host copy and a sync).
  const int look_every = on_gpu ? std::max(1, steps / 100) : 1;

  std::vector<EpochResult> results;
  for (; state.epoch < cfg_.epochs; ++state.epoch, state.step = 0, state.loss_sum = 0,
                                   state.correct = 0, state.epoch_seconds = 0) {
    const int epoch = state.epoch;
    if (on_gpu) gpu::synchronize();
    auto t0 = Clock::now();
    const double seconds_before = state.epoch_seconds;
    const int first_step = state.step;
    feed.set_order(epoch_order(n, cfg_.seed, epoch, cfg_.shuffle));
    // The accumulator restarts from what the epoch had summed before a resume
    // (on rank 0: the ranks' accumulators are added when read).
    acc_.copy_from(epoch_sums(comm_.rank() == 0 ? state.loss_sum : 0,
                              comm_.rank() == 0 ? state.correct : 0));
    for (int s = first_step; s < steps; ++s) {
      const int b = int(std::min<int64_t>(gs, n - int64_t(s) * gs));
      global_step_ = state.global_step;
      train_batch(feed, s * gs, b, acc_);
      if (profiler_) profiler_->step_done();
      state.step = s + 1;
      state.global_step += 1;
      const bool last = s + 1 == steps;
      const bool look = last || (s + 1) % look_every == 0;
      if (look) {
        sync_loss(state);
        state.epoch_seconds = seconds_before + seconds_since(t0);
      }
      const int seen = int(std::min<int64_t>(n, int64_t(s + 1) * gs));
      if (look && mode == Progress::kBar) {
        double el = seconds_since(t0);
        double eta = el / (s + 1 - first_step) * (steps - s - 1);
        std::ostringstream bar;
        bar << "\r  epoch " << epoch + 1 << "/" << cfg_.epochs << " "
            << progress_bar(s + 1, steps) << " loss " << std::fixed
            << std::setprecision(5) << state.loss_sum / seen << " ETA " << format_duration(eta)
            << "   ";
        out << bar.str() << std::flush;
        if (last) out << "\r" << std::string(bar.str().size(), ' ') << "\r" << std::flush;
      } else if (mode == Progress::kLines && ((s + 1) % line_every == 0) && !last) {
        if (!look) sync_loss(state);
        out << "  epoch " << epoch + 1 << " step " << s + 1 << "/" << steps << "  loss "
            << std::fixed << std::setprecision(5) << state.loss_sum / seen << std::defaultfloat
            << std::setprecision(6) << "\n" << std::flush;
      }
      bool stop = on_step_ && on_step_(state);
      if (several) {  // the ranks stop together, after the same step: they vote when they look
        stop_wanted_ = stop_wanted_ || stop;
        double vote = stop_wanted_ ? 1 : 0;
        if (look) comm_.allreduce_sum(&vote, 1, "the vote to stop");
        stop = look && vote > 0;
      }
      if (stop) {
        if (mode == Progress::kBar) out << "\n";
        sync_loss(state);
        model_.set_profiler(nullptr);
        model_.set_mode(false, 0);  // what follows (outputs, evaluation) evaluates
        return results;
      }
    }
    EpochResult r;
    r.epoch = epoch + 1;
    r.train_seconds = state.epoch_seconds;
    r.images_per_s = (n - std::min<int64_t>(n, int64_t(first_step) * gs)) /
                     std::max(seconds_since(t0), 1e-9);
    r.train_loss = state.loss_sum / n;
    if (model_.loss().is_classifier()) r.train_accuracy = state.correct / n;
    {
      TrainState after = state;
      after.epoch = epoch + 1;
      after.step = 0;
      check_ranks_agree(after, n, str("after epoch ", epoch + 1));
    }
    broadcast_buffers();  // evaluation and the checkpoint use rank 0's running statistics
    if (test.size() > 0) {
      model_.set_profiler(nullptr);  // the table is about training steps
      r.test = evaluate(model_, *test_feed, bs, comm_);
      model_.set_profiler(profiler_);
    }
    r.seconds = seconds_before + seconds_since(t0);

    std::ostringstream line;
    line << "epoch " << r.epoch << "/" << cfg_.epochs << "  train loss " << std::fixed
         << std::setprecision(5) << r.train_loss;
    if (test.size() > 0) line << "  test loss " << r.test.loss;
    if (r.test.mse >= 0) line << "  test mse " << r.test.mse;
    if (r.test.accuracy >= 0)
      line << "  test acc " << std::setprecision(2) << 100 * r.test.accuracy << "%";
    line << "  " << std::setprecision(0) << r.images_per_s << " img/s  " << std::setprecision(1)
         << r.seconds << " s";
    out << line.str() << "\n" << std::flush;
    if (!std::isfinite(r.test.loss))
      throw DivergedError(str("the test loss is ", r.test.loss, " after epoch ", r.epoch,
                              "; lower ", cfg_.optimizer.key("lr"), " (now ", cfg_.optimizer.lr, ")"));
    results.push_back(r);
    if (on_epoch_) {
      TrainState after = state;
      after.epoch = epoch + 1;
      after.step = 0;
      after.loss_sum = after.correct = after.epoch_seconds = 0;
      model_.set_profiler(nullptr);
      on_epoch_(r, after);
      model_.set_profiler(profiler_);
    }
  }
  model_.set_profiler(nullptr);
  model_.set_mode(false, 0);
  return results;
}

}  // namespace hpmc
