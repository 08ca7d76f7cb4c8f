#include "model/trainer.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <numeric>
#include <ostream>
#include <sstream>

#include "core/error.h"
#include "core/rng.h"

namespace hpmc {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "--:--";
  long t = long(s + 0.5);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld:%02ld", t / 60, t % 60);
  return buf;
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

}  // namespace

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
  EvalResult r;
  r.samples = data.size();
  if (r.samples == 0) return r;
  batch_size = std::min(batch_size, r.samples);
  model.allocate(std::max(batch_size, model.max_batch()));
  Tensor x = Tensor::empty(model.input_shape().with_batch(batch_size));
  Tensor labels = Tensor::empty(Shape(batch_size, 1, 1, 1), DType::kI32);
  Tensor acc = Tensor::zeros(Shape(2, 1, 1, 1), DType::kF64, model.device());
  Loss& loss = model.loss();
  bool lab = wants_labels(loss);
  std::vector<int32_t> idx(static_cast<size_t>(batch_size));
  for (int b = 0; b < r.samples; b += batch_size) {
    int n = std::min(batch_size, r.samples - b);
    std::iota(idx.begin(), idx.begin() + n, b);
    gather_batch(data, idx.data(), n, x, &labels);
    const Tensor& pred = model.forward(x);
    loss.compute(pred, lab ? labels : x, nullptr, acc);
  }
  double a[2];
  read_acc(acc, a);
  r.loss = a[0] / r.samples;
  if (loss.is_classifier()) r.accuracy = a[1] / r.samples;
  return r;
}

Trainer::Trainer(Model& model, const TrainingConfig& cfg) : model_(model), cfg_(cfg) {
  sgd_.lr = float(cfg.lr);
  sgd_.momentum = float(cfg.momentum);
  sgd_.weight_decay = float(cfg.weight_decay);
}

void Trainer::step(const Tensor& x, const Tensor& target, Tensor& acc) {
  model_.params().zero_grads();
  const Tensor& pred = model_.forward(x);
  Tensor& dpred = model_.output_grad();
  dpred.set_batch(x.shape().n);
  model_.loss().compute(pred, target, &dpred, acc);
  model_.backward(x, dpred);
  sgd_step(model_.params(), sgd_);
}

int Trainer::steps_per_epoch(int n) const {
  int bs = std::min(cfg_.batch_size, n);
  return bs > 0 ? (n + bs - 1) / bs : 0;
}

std::vector<EpochResult> Trainer::fit(const Dataset& train, const Dataset& test,
                                      std::ostream& out, TrainState& state) {
  const int n = train.size();
  if (n == 0) throw DataError("the training set is empty: nothing to train on");
  const int bs = std::min(cfg_.batch_size, n);
  const int steps = steps_per_epoch(n);
  HPMC_CHECK(state.step >= 0 && state.step <= steps, "resumed at step ", state.step,
             " of an epoch of ", steps, " steps");
  model_.allocate(bs);
  Tensor x = Tensor::empty(model_.input_shape().with_batch(bs));
  Tensor labels = Tensor::empty(Shape(bs, 1, 1, 1), DType::kI32);
  Tensor acc = Tensor::zeros(Shape(2, 1, 1, 1), DType::kF64, model_.device());
  const bool lab = wants_labels(model_.loss());

  Progress mode = progress_;
  if (mode == Progress::kAuto) mode = isatty(STDOUT_FILENO) ? Progress::kBar : Progress::kLines;
  const int line_every = std::max(1, steps / 10);

  std::vector<EpochResult> results;
  for (; state.epoch < cfg_.epochs; ++state.epoch, state.step = 0, state.loss_sum = 0,
                                   state.correct = 0, state.epoch_seconds = 0) {
    const int epoch = state.epoch;
    auto t0 = Clock::now();
    const double seconds_before = state.epoch_seconds;
    const int first_step = state.step;
    std::vector<int32_t> order = epoch_order(n, cfg_.seed, epoch, cfg_.shuffle);
    // The accumulator restarts from what the epoch had summed before a resume.
    {
      Tensor h = Tensor::empty(Shape(2, 1, 1, 1), DType::kF64);
      h.data<double>()[0] = state.loss_sum;
      h.data<double>()[1] = state.correct;
      acc.copy_from(h);
    }
    double prev = state.loss_sum;
    int seen = std::min(n, first_step * bs);
    for (int s = first_step; s < steps; ++s) {
      int b = std::min(bs, n - s * bs);
      gather_batch(train, order.data() + size_t(s) * size_t(bs), b, x, &labels);
      step(x, lab ? labels : x, acc);
      seen += b;
      double a[2];
      read_acc(acc, a);
      double batch_loss = (a[0] - prev) / b;
      prev = a[0];
      state.step = s + 1;
      state.global_step += 1;
      state.loss_sum = a[0];
      state.correct = a[1];
      state.epoch_seconds = seconds_before + seconds_since(t0);
      if (!std::isfinite(batch_loss))
        throw DivergedError(str("the training loss became ", batch_loss, " at epoch ", epoch + 1,
                                ", step ", s + 1, " of ", steps, "; lower training.lr (now ",
                                cfg_.lr, ") or check the data"));
      bool last = s + 1 == steps;
      if (mode == Progress::kBar) {
        double el = seconds_since(t0);
        double eta = el / (s + 1 - first_step) * (steps - s - 1);
        const int width = 30;
        int fill = int(double(s + 1) / steps * width);
        std::ostringstream bar;
        bar << "\r  epoch " << epoch + 1 << "/" << cfg_.epochs << " ["
            << std::string(size_t(fill), '=') << std::string(size_t(width - fill), ' ') << "] "
            << std::setw(3) << (s + 1) * 100 / steps << "% loss " << std::fixed
            << std::setprecision(5) << a[0] / seen << " ETA " << format_duration(eta) << "   ";
        out << bar.str() << std::flush;
        if (last) out << "\r" << std::string(bar.str().size(), ' ') << "\r" << std::flush;
      } else if (mode == Progress::kLines && ((s + 1) % line_every == 0) && !last) {
        out << "  epoch " << epoch + 1 << " step " << s + 1 << "/" << steps << "  loss "
            << std::fixed << std::setprecision(5) << a[0] / seen << std::defaultfloat
            << std::setprecision(6) << "\n" << std::flush;
      }
      if (on_step_ && on_step_(state, batch_loss)) {
        if (mode == Progress::kBar) out << "\n";
        return results;
      }
    }
    EpochResult r;
    r.epoch = epoch + 1;
    r.train_seconds = state.epoch_seconds;
    r.images_per_s = (n - std::min(n, first_step * bs)) / std::max(seconds_since(t0), 1e-9);
    r.train_loss = state.loss_sum / n;
    if (model_.loss().is_classifier()) r.train_accuracy = state.correct / n;
    if (test.size() > 0) r.test = evaluate(model_, test, bs);
    r.seconds = seconds_before + seconds_since(t0);

    std::ostringstream line;
    line << "epoch " << r.epoch << "/" << cfg_.epochs << "  train loss " << std::fixed
         << std::setprecision(5) << r.train_loss;
    if (test.size() > 0) line << "  test loss " << r.test.loss;
    if (r.test.accuracy >= 0)
      line << "  test acc " << std::setprecision(2) << 100 * r.test.accuracy << "%";
    line << "  " << std::setprecision(0) << r.images_per_s << " img/s  " << std::setprecision(1)
         << r.seconds << " s";
    out << line.str() << "\n" << std::flush;
    if (!std::isfinite(r.test.loss))
      throw DivergedError(str("the test loss is ", r.test.loss, " after epoch ", r.epoch,
                              "; lower training.lr (now ", cfg_.lr, ")"));
    results.push_back(r);
    if (on_epoch_) {
      TrainState after = state;
      after.epoch = epoch + 1;
      after.step = 0;
      after.loss_sum = after.correct = after.epoch_seconds = 0;
      on_epoch_(r, after);
    }
  }
  return results;
}

}  // namespace hpmc
