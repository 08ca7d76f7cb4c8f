// bench.cpp — `hpmc bench`: time whole training steps, like `caffe time`.
//
// The model is built from the config (with the same overrides as `hpmc run`)
// and trained on synthetic images of the format's shape unless --real-data
// is given. After --warmup steps, --repeats runs of --steps steps are timed
// with a host clock between two gpu::synchronize() calls (no-ops on the
// CPU). A step is Trainer::step on a batch from a BatchFeeder: gather,
// forward, loss, backward and SGD, as in `hpmc run`. The report gives the
// median (min, max) of ms/step, images/s, the epoch-equivalent time and the
// achieved FLOP/s against the device's peak in the model's precision (FP32
// lanes; on the GPU in tf32 and bf16 the dense tensor-core rate, core/device.h;
// on the CPU in bf16, the measured rate of AVX512_BF16 dot products), then a
// per-region table from one more run under the Profiler, and a last line for
// scripts:
//   bench: <config> impl=<impl> precision=<p> batch=<n> ms/step=<x> img/s=<y> epoch_s=<z>
//          tflops=<t> peak_frac=<f>
//
// Under mpirun (N ranks) every rank runs the same steps, data parallel
// (model/trainer.h), and the figures above are rank 0's: its ms/step and
// its own samples' images/s. Then come each rank's median, the aggregate
// images/s (the step's samples over the slowest rank's median step), and,
// timed in the same run after the parallel runs, rank 0 training alone at
// its batch while the others wait in a barrier that does not spin: the
// scaling efficiency is aggregate / (N × that single-rank rate). The last
// line then adds ranks=N rank_img/s= single_img/s= scaling= efficiency=, and
// its img/s= is the aggregate.
#include "cli/bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <ostream>
#include <sstream>
#include <thread>

#include "cli/commands.h"
#include "cli/session.h"
#include "core/device.h"
#include "core/error.h"
#include "core/bf16gemm.h"
#include "core/profiler.h"
#include "core/sgemm.h"
#include "core/threads.h"
#include "dist/communicator.h"
#include "model/batches.h"
#include "model/trainer.h"

namespace hpmc {

CpuPeak estimate_cpu_peak(const std::string& cpuinfo, int cores) {
  CpuPeak p;
  p.cores = cores;
  std::istringstream in(cpuinfo);
  std::string line, flags, mhz;
  auto value = [](const std::string& l) {
    size_t c = l.find(':');
    if (c == std::string::npos) return std::string();
    size_t b = l.find_first_not_of(" \t", c + 1);
    return b == std::string::npos ? std::string() : l.substr(b);
  };
  while (std::getline(in, line)) {
    if (p.model.empty() && line.rfind("model name", 0) == 0) p.model = value(line);
    if (mhz.empty() && line.rfind("cpu MHz", 0) == 0) mhz = value(line);
    if (flags.empty() && (line.rfind("flags", 0) == 0 || line.rfind("Features", 0) == 0))
      flags = " " + value(line) + " ";
  }
  if (p.model.empty()) p.model = "unknown CPU";
  auto has = [&](const char* f) { return flags.find(str(" ", f, " ")) != std::string::npos; };
  if (has("avx512f")) {
    p.simd = "AVX-512F";
    p.simd_floats = 16;
  } else if (has("avx2") && has("fma")) {
    p.simd = "AVX2+FMA";
    p.simd_floats = 8;
  } else {
    p.simd = "SSE/NEON";
    p.simd_floats = 4;
  }
  // The nominal clock: "Intel(R) Xeon(R) ... @ 2.20GHz", else the current "cpu MHz".
  size_t at = p.model.find('@');
  if (at != std::string::npos) {
    double ghz = std::atof(p.model.c_str() + at + 1);
    if (ghz > 0 && p.model.find("GHz", at) != std::string::npos) p.ghz = ghz;
  }
  if (p.ghz <= 0 && !mhz.empty()) p.ghz = std::atof(mhz.c_str()) / 1000;
  if (p.ghz < 0 || !std::isfinite(p.ghz)) p.ghz = 0;
  p.flops = double(p.cores) * p.fma_units * p.simd_floats * 2.0 * p.ghz * 1e9;
  return p;
}

Spread spread(std::vector<double> v) {
  Spread s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  s.min = v.front();
  s.max = v.back();
  s.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  return s;
}

namespace {

using Clock = std::chrono::steady_clock;

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// 12345.6 -> "12,346"
std::string grouped(double v) {
  std::string s = fmt("%.0f", v);
  size_t start = s[0] == '-' ? 1 : 0;
  for (int i = int(s.size()) - 3; i > int(start); i -= 3) s.insert(size_t(i), ",");
  return s;
}

std::string read_text(const char* path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void check_count(const char* flag, int v, int lo, int hi) {
  if (v < lo || v > hi)
    throw UsageError(str(flag, " ", v, ": must be between ", lo, " and ", hi));
}

// Runs training steps on full steps of the trainer (its ranks' batches),
// walking through the training set in the trainer's epoch order and starting
// a new order when it runs out.
class StepLoop {
 public:
  // `bs`: a micro-batch of one rank, at most.
  StepLoop(Model& model, Trainer& trainer, const Dataset& train, const TrainingConfig& t, int bs)
      : trainer_(trainer),
        train_(train),
        seed_(t.seed),
        shuffle_(t.shuffle),
        bs_(trainer.step_samples(train.size())),
        batches_(train.size() / bs_),
        feed_(train, model.device(), bs, model.input_shape()),
        acc_(Tensor::zeros(Shape(2, 1, 1, 1), DType::kF64, model.device())) {}

  std::string step_path() { return trainer_.step_path(feed_); }

  void run(int steps, Profiler* prof = nullptr) {
    for (int i = 0; i < steps; ++i, ++done_) {
      const int b = int(done_ % batches_);
      if (b == 0) feed_.set_order(epoch_order(train_.size(), seed_, int(done_ / batches_), shuffle_));
      trainer_.train_batch(feed_, b * bs_, bs_, acc_);
      if (prof) prof->step_done();
    }
  }

  // Mean per-sample loss over every step so far (over every rank: each rank
  // calls it at the same point); a DivergedError if it is not finite (the
  // timings of a diverged run mean little).
  double mean_loss() const {
    Tensor h = acc_.device() == Device::kCPU ? acc_ : acc_.to_device(Device::kCPU);
    double sum = h.data<double>()[0];
    trainer_.comm().allreduce_sum(&sum, 1, "the benchmark's loss sums");
    double mean = sum / std::max<double>(1, double(done_) * bs_);
    if (!std::isfinite(mean))
      throw DivergedError(str("the training loss became ", mean, " during the benchmark (after ",
                              done_, " steps); lower training.lr with --set training.lr=..."));
    return mean;
  }

 private:
  Trainer& trainer_;
  const Dataset& train_;
  uint64_t seed_;
  bool shuffle_;
  int bs_, batches_;  // samples per step (every rank's), full steps per pass
  BatchFeeder feed_;
  Tensor acc_;
  long done_ = 0;
};

}  // namespace

void cmd_bench(const BenchOptions& o, std::ostream& out) {
  check_count("--steps", o.steps, 1, 1000000);
  check_count("--warmup", o.warmup, 0, 1000000);
  check_count("--repeats", o.repeats, 1, 1000);

  CommonOptions co = o;
  if (!o.real_data)  // first, so that an explicit --set data.synthetic=... still wins
    co.overrides.insert(co.overrides.begin(), Override{"data.synthetic=true", "hpmc bench (synthetic data)"});
  Session s = open_session(with_chosen_impl(co, out), out);
  load_session_data(s, out);
  Model& model = *s.model;
  const Config& cfg = s.cfg;
  const Dataset& train = s.data.train;
  if (train.size() == 0) throw DataError("the training set is empty: nothing to time");
  const int bs = std::min(cfg.training.batch_size, train.size());
  const bool on_gpu = model.device() == Device::kGPU;
  const int threads = num_threads();
  dist::Communicator& world = dist::world();
  const int ranks = world.size();
  // A step's samples over every rank (Trainer::step_samples), and this rank's.
  const int gs = int(std::min<int64_t>(
      int64_t(ranks) * cfg.training.batch_size * cfg.training.grad_accumulation, train.size()));
  const double rank_samples = double(gs) / ranks;
  const Precision prec = model.precision();
  const bool bf16 = prec == Precision::kBf16;

  // The device and its peak in the model's precision: FP32 lanes for fp32,
  // the dense tensor-core rate for tf32 and bf16 (0 where the device's is not
  // known: no fraction is shown then).
  std::string device;
  double peak = 0;
  std::string peak_line;
  if (on_gpu) {
    gpu::DevicePeak d = gpu::device_peak();
    device = str("GPU ", d.name);
    if (prec == Precision::kFp32) {
      peak = d.fp32_flops;
      peak_line = str("GPU FP32 peak: ", d.sms, " SMs x ", d.fp32_lanes_per_sm,
                      " FP32 lanes x 2 x ", fmt("%.3f", d.clock_ghz), " GHz = ",
                      fmt("%.1f", peak / 1e12), " TFLOP/s");
    } else {
      const bool b = prec == Precision::kBf16;
      const int per = b ? d.bf16_per_sm_clock : d.tf32_per_sm_clock;
      peak = b ? d.bf16_flops : d.tf32_flops;
      peak_line = per > 0 ? str("GPU ", b ? "BF16" : "TF32", " tensor-core peak (dense): ", d.sms,
                                " SMs x ", per, " FLOP/clock x ", fmt("%.3f", d.clock_ghz),
                                " GHz = ", fmt("%.1f", peak / 1e12), " TFLOP/s")
                          : str("GPU ", b ? "BF16" : "TF32", " tensor-core peak: not known for ",
                                d.name, " (no fraction shown)");
    }
  } else {
    int cores = threads;
    unsigned hw = std::thread::hardware_concurrency();
    if (hw > 0) cores = std::min(cores, int(hw));
    CpuPeak c = estimate_cpu_peak(read_text("/proc/cpuinfo"), cores);
    device = str("CPU ", c.model);
    // The measured FMA (or bf16 dot-product) rate is the peak; the nominal
    // FP32 figure is shown beside it.
    MeasuredPeak m = bf16 ? measure_cpu_bf16_peak(threads) : measure_cpu_fma_peak(threads);
    peak = m.flops;
    peak_line = str("CPU ", bf16 ? "BF16" : "FP32", " peak (measured: ", m.threads, " thread",
                    m.threads == 1 ? "" : "s", " of ", m.isa, m.width == 32 ? "" : " FMAs",
                    ") = ", fmt("%.1f", peak / 1e9), " GFLOP/s");
    if (c.ghz > 0)
      peak_line += str("; nominal ", c.cores, " x ", c.fma_units, " FMA units x ", c.simd_floats,
                       " floats x 2 x ", fmt("%.2f", c.ghz), " GHz = ", fmt("%.1f", c.flops / 1e9));
  }
  const double rate_unit = on_gpu ? 1e12 : 1e9;
  const char* rate_name = on_gpu ? "TFLOP/s" : "GFLOP/s";

  const double step_flops = model.train_flops(bs) * rank_samples / bs;  // one rank's step
  // An epoch of the training set the config names (the official size for
  // synthetic MNIST and CIFAR-10).
  const int epoch_images = int(std::max<size_t>(1, s.probe.train));
  out << "benchmark: device " << device << ", impl " << impl_name(s.impl) << ", precision "
      << precision_name(prec) << ", batch " << bs
      << (cfg.training.grad_accumulation > 1
              ? str(" x ", cfg.training.grad_accumulation, " micro-batches a step")
              : std::string())
      << ", threads " << threads << ", data "
      << (cfg.data.synthetic ? "synthetic" : str("real (", cfg.data.path, ")"))
      << (ranks > 1 ? str("; ", ranks, " ranks, ", gs, " samples a step over all (figures "
                          "below: rank 0's until 'data parallel')")
                    : std::string())
      << "\n";
  out << "  " << peak_line << "\n";
  if (!on_gpu && bf16)
    out << "  CPU GEMM: " << bf16gemm_path_name(bf16gemm_path()) << " (bf16 operands, FP32 sums)\n";
  else if (!on_gpu)
    out << "  CPU GEMM: " << sgemm_path_name(sgemm_path()) << " (float)\n";
  out << "  work: " << fmt("%.4g", step_flops / rank_samples / 1e6)
      << " MFLOP per training sample ("
      << fmt("%.4g", step_flops / 1e9)
      << " GFLOP per step; forward + backward matrix products, 2 FLOPs per multiply-add)\n";
  out << "  warm-up " << o.warmup << " steps, then " << o.repeats << " runs of " << o.steps
      << " steps (gather, forward, loss, backward, optimizer)\n"
      << std::flush;

  model.params().init(cfg.training.seed);
  model.allocate(bs);
  Trainer trainer(model, cfg.training);
  trainer.set_run_steps(int64_t(o.warmup) + int64_t(o.repeats) * o.steps);  // a cosine's span
  StepLoop loop(model, trainer, train, cfg.training, bs);
  out << "  step: " << loop.step_path() << "\n" << std::flush;

  loop.run(o.warmup);
  if (on_gpu) gpu::synchronize();
  loop.mean_loss();

  std::vector<double> ms;
  for (int r = 0; r < o.repeats; ++r) {
    if (on_gpu) gpu::synchronize();
    world.barrier("the start of a timed run");  // the ranks start together
    auto t0 = Clock::now();
    loop.run(o.steps);
    if (on_gpu) gpu::synchronize();
    double t = std::chrono::duration<double, std::milli>(Clock::now() - t0).count() / o.steps;
    ms.push_back(t);
    out << "  run " << r + 1 << "/" << o.repeats << ": " << fmt("%.3f", t) << " ms/step, "
        << grouped(rank_samples * 1000 / t) << " img/s" << (ranks > 1 ? " (rank 0)" : "") << "\n"
        << std::flush;
  }
  const double loss = loop.mean_loss();

  const Spread m = spread(ms);
  auto ips = [&](double t) { return rank_samples * 1000 / t; };
  auto rate = [&](double t) { return step_flops / (t / 1000); };
  const double best_ips = ips(m.min), worst_ips = ips(m.max), med_ips = ips(m.median);
  char line[256];
  out << "result (median of " << o.repeats << " runs; min .. max):\n";
  std::snprintf(line, sizeof line, "  %-20s %12.3f   (%.3f .. %.3f)\n", "ms/step", m.median, m.min,
                m.max);
  out << line;
  std::snprintf(line, sizeof line, "  %-20s %12s   (%s .. %s)\n", "images/s", grouped(med_ips).c_str(),
                grouped(worst_ips).c_str(), grouped(best_ips).c_str());
  out << line;
  std::snprintf(line, sizeof line, "  %-20s %12.2f   (%.2f .. %.2f; %s images)\n",
                "epoch-equivalent s", epoch_images / med_ips, epoch_images / best_ips,
                epoch_images / worst_ips, grouped(epoch_images).c_str());
  out << line;
  std::snprintf(line, sizeof line, "  %-20s %12.4g   (%.4g .. %.4g)\n", rate_name,
                rate(m.median) / rate_unit, rate(m.max) / rate_unit, rate(m.min) / rate_unit);
  out << line;
  if (peak > 0) {
    std::snprintf(line, sizeof line, "  %-20s %11.1f%%   (%.1f%% .. %.1f%%)%s\n",
                  prec == Precision::kBf16   ? "of BF16 peak"
                  : prec == Precision::kTf32 ? "of TF32 peak"
                                             : "of FP32 peak",
                  100 * rate(m.median) / peak, 100 * rate(m.max) / peak, 100 * rate(m.min) / peak,
                  on_gpu ? "" : bf16 ? " of the measured bf16 rate" : " of the measured FMA rate");
    out << line;
  }
  out << "  mean training loss over the " << o.warmup + o.repeats * o.steps << " steps: "
      << fmt("%.5g", loss) << "\n";

  // One more run under the profiler, for the per-region table.
  Profiler prof(model.device());
  trainer.set_profiler(&prof);
  model.set_profiler(&prof);
  loop.run(o.steps, &prof);
  model.set_profiler(nullptr);
  trainer.set_profiler(nullptr);
  loop.mean_loss();

  std::map<std::string, double> flops;
  const auto lf = model.layer_flops(bs);
  const double calls = rank_samples / bs;  // a layer's passes per step (micro-batches)
  for (size_t i = 0; i < lf.size(); ++i) {
    flops[model.layers()[i]->name() + " fwd"] = lf[i].forward * calls;
    flops[model.layers()[i]->name() + " bwd"] = lf[i].backward * calls;
  }
  flops["fused step"] = step_flops;  // the fused MLP step: the whole step in one region
  const auto regions = prof.regions();
  const double steps = double(std::max(1L, prof.steps()));
  double total_ms = 0;
  for (const auto& r : regions) total_ms += r.ms;
  out << "per region (one profiled run of " << o.steps << " steps, "
      << (on_gpu ? "CUDA events" : "steady clock") << "; ms and FLOPs per step):\n";
  std::snprintf(line, sizeof line, "  %-24s %10s %7s %12s %10s %8s\n", "region", "ms", "share",
                "MFLOP", rate_name, "of peak");
  out << line;
  auto peak_str = [&](double flops_per_s) {
    return peak > 0 && flops_per_s > 0 ? fmt("%.1f%%", 100 * flops_per_s / peak) : std::string("-");
  };
  for (const auto& r : regions) {
    const double rms = r.ms / steps;
    auto f = flops.find(r.name);
    const double fl = f == flops.end() ? 0 : f->second;
    std::string fs = fl > 0 ? fmt("%.4g", fl / 1e6) : "-";
    const double rate_r = fl > 0 && rms > 0 ? fl / (rms / 1000) : 0;
    std::string rs = rate_r > 0 ? fmt("%.4g", rate_r / rate_unit) : "-";
    std::snprintf(line, sizeof line, "  %-24s %10.4f %6.1f%% %12s %10s %8s\n", r.name.c_str(), rms,
                  total_ms > 0 ? 100 * r.ms / total_ms : 0.0, fs.c_str(), rs.c_str(),
                  peak_str(rate_r).c_str());
    out << line;
  }
  const double step_ms = total_ms / steps;
  const double step_rate = step_ms > 0 ? step_flops / (step_ms / 1000) : 0;
  std::snprintf(line, sizeof line, "  %-24s %10.4f %6.1f%% %12.4g %10.4g %8s\n", "step (sum)",
                step_ms, 100.0, step_flops / 1e6, step_rate / rate_unit,
                peak_str(step_rate).c_str());
  out << line;

  if (ranks == 1) {
    out << "bench: " << o.config << " impl=" << impl_name(s.impl)
        << " precision=" << precision_name(prec) << " batch=" << bs << " ms/step=" << fmt("%.4f", m.median) << " img/s=" << fmt("%.0f", med_ips)
        << " epoch_s=" << fmt("%.3f", epoch_images / med_ips)
        << " tflops=" << fmt("%.4g", rate(m.median) / 1e12)
        << " peak_frac=" << (peak > 0 ? fmt("%.4f", rate(m.median) / peak) : std::string("na"))
        << "\n"
        << std::flush;
    return;
  }

  // Data parallel: every rank's median, the aggregate, and rank 0 alone.
  std::vector<double> medians(size_t(ranks), 0.0);
  medians[size_t(world.rank())] = m.median;
  world.allreduce_sum(medians.data(), medians.size(), "the ranks' medians");
  const double slowest = *std::max_element(medians.begin(), medians.end());
  const double aggregate = gs * 1000 / slowest;
  double single = 0;  // rank 0 alone: images/s at its batch
  std::string single_path;
  world.barrier("the end of the parallel runs");
  if (world.rank() == 0) {
    std::unique_ptr<dist::Communicator> solo = dist::make_single_communicator();
    Trainer alone(model, cfg.training, *solo);
    alone.set_run_steps(int64_t(o.warmup) + int64_t(o.repeats) * o.steps);
    StepLoop one(model, alone, train, cfg.training, bs);
    one.run(o.warmup);
    std::vector<double> ms1;
    for (int r = 0; r < o.repeats; ++r) {
      if (on_gpu) gpu::synchronize();
      auto t0 = Clock::now();
      one.run(o.steps);
      if (on_gpu) gpu::synchronize();
      ms1.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count() /
                    o.steps);
    }
    one.mean_loss();
    single = alone.step_samples(train.size()) * 1000 / spread(ms1).median;
    single_path = one.step_path();
  }
  world.barrier("rank 0's single-rank runs");  // the others wait here, idle
  const double scaling = single > 0 ? aggregate / single : 0;
  out << "data parallel (" << ranks << " ranks, " << world.backend() << "; a step is " << gs
      << " samples, " << fmt("%.0f", rank_samples) << " a rank):\n";
  for (int r = 0; r < ranks; ++r)
    out << "  rank " << r << ": " << fmt("%.3f", medians[size_t(r)]) << " ms/step, "
        << grouped(rank_samples * 1000 / medians[size_t(r)]) << " img/s\n";
  out << "  aggregate: " << grouped(aggregate) << " img/s (" << gs << " samples a step at the "
      << "slowest rank's median, " << fmt("%.3f", slowest) << " ms)\n";
  out << "  one rank alone (rank 0 at batch " << bs << ", the others idle, same run): "
      << grouped(single) << " img/s; step: " << single_path << "\n";
  out << "  scaling: " << fmt("%.2f", scaling) << "x on " << ranks << " ranks, efficiency "
      << fmt("%.1f", 100 * scaling / ranks) << "% (aggregate / (" << ranks
      << " x one rank alone))\n";
  out << "bench: " << o.config << " impl=" << impl_name(s.impl)
      << " precision=" << precision_name(prec) << " batch=" << bs << " ranks=" << ranks << " ms/step=" << fmt("%.4f", slowest)
      << " img/s=" << fmt("%.0f", aggregate) << " epoch_s=" << fmt("%.3f", epoch_images / aggregate)
      << " tflops=" << fmt("%.4g", rate(slowest) * ranks / 1e12)
      << " peak_frac=" << (peak > 0 ? fmt("%.4f", rate(slowest) / peak) : std::string("na"))
      << " rank_img/s=" << fmt("%.0f", aggregate / ranks) << " single_img/s=" << fmt("%.0f", single)
      << " scaling=" << fmt("%.3f", scaling) << " efficiency=" << fmt("%.4f", scaling / ranks)
      << "\n"
      << std::flush;
}

}  // namespace hpmc
