#include "model/model.h"

#include <algorithm>
#include <iomanip>
#include <ostream>
#include <set>

#include "core/device.h"
#include "core/error.h"
#include "core/profiler.h"
#include "io/json.h"
#include "model/memory.h"
#include "optim/optimizer.h"
#include "model/registry.h"

namespace hpmc {

namespace {

std::string thousands(size_t n) {
  std::string s = std::to_string(n);
  for (int i = int(s.size()) - 3; i > 0; i -= 3) s.insert(size_t(i), ",");
  return s;
}

}  // namespace

std::unique_ptr<Model> Model::build(const Config& cfg, Impl impl, const Shape& sample,
                                    int num_classes, bool fuse) {
  // The precision before the device: an impl that cannot run it is refused
  // on any machine.
  const Precision prec = cfg.training.precision;
  if (std::string why = precision_refusal(impl, prec); !why.empty())
    throw UsageError(str(cfg.source.where(cfg.root["training"]["precision"], "training.precision"),
                         ": training.precision ", precision_name(prec), " with --impl ",
                         impl_name(impl), ": ", why));
  if (impl_device(impl) == Device::kGPU && gpu::device_count() == 0)
    throw UsageError(str("--impl ", impl_name(impl), " runs on a CUDA GPU, but there is none usable here [",
                         gpu::describe_devices().front(), "]; use --impl cpu"));
  auto m = std::make_unique<Model>();
  m->impl_ = impl;
  m->precision_ = prec;
  m->in_ = sample.with_batch(1);
  const LayerRegistry& reg = LayerRegistry::builtin();
  std::set<std::string> names;
  Shape cur = m->in_;
  for (const LayerNode& ln : cfg.model.layers) {
    MapReader keys(ln.node, ln.path, cfg.source);
    std::string type = keys.require_string("type");
    const LayerType* lt = reg.find(type);
    if (!lt) {
      std::string hint = did_you_mean(type, reg.names());
      std::string known;
      for (const auto& n : reg.names()) known += (known.empty() ? "" : ", ") + n;
      keys.fail("type", str("unknown layer type '", type, "'",
                            hint.empty() ? "" : str(" (did you mean '", hint, "'?)"),
                            "; known types: ", known));
    }
    LayerArgs args;
    args.name = keys.get_string("name", str(type, ln.index + 1));
    if (args.name.empty()) keys.fail("name", "must not be empty");
    if (!is_printable_utf8(args.name))  // it names the layer's tensors in checkpoints
      keys.fail("name", str("must be printable UTF-8 text, got '", printable(args.name), "'"));
    if (!names.insert(args.name).second)
      keys.fail("name", str("layer name '", args.name, "' is used twice; names must be unique"));
    const bool own_impl = keys.has("impl");
    args.impl = parse_impl(keys.get_choice("impl", impl_name(impl), impl_names()));
    if (impl_device(args.impl) != impl_device(impl))
      keys.fail("impl", str("'", impl_name(args.impl), "' runs on the ",
                            device_name(impl_device(args.impl)), " but this run uses --impl ",
                            impl_name(impl), " on the ", device_name(impl_device(impl)),
                            "; a per-layer impl may only pick another implementation of the same "
                            "device"));
    if (std::string why = precision_refusal(args.impl, prec); own_impl && !why.empty())
      keys.fail("impl", str("'", impl_name(args.impl), "' with training.precision ",
                            precision_name(prec), ": ", why));
    args.precision = prec;
    args.in = cur;
    const std::string& lname = args.name;
    LayerPtr layer;
    try {
      layer = reg.create(*lt, read_layer_args(*lt->schema, keys, args));
      layer->set_input_shape(cur);
    } catch (const ShapeError& e) {
      throw ConfigError(str(keys.where(), ": layer '", lname, "' (", type, "): ", e.what()));
    } catch (const ConfigError& e) {
      std::string msg = e.what();
      // Errors from MapReader already carry their location; those thrown by a
      // layer's constructor do not.
      if (msg.rfind(cfg.source.file, 0) == 0 || msg.rfind("--set", 0) == 0) throw;
      throw ConfigError(str(keys.where(), ": layer '", lname, "' (", type, "): ", msg));
    }
    cur = layer->output_shape(cur);
    if (cur.per_sample() > kMaxTensorElements)
      throw ConfigError(str(keys.where(), ": layer '", lname, "' (", type, "): its output ",
                            cur.sample_str(), " holds ", cur.per_sample(),
                            " values per sample, more than ", kMaxTensorElements,
                            "; use fewer channels or a smaller input"));
    for (const ParamSpec& ps : layer->param_specs())
      if (ps.count() > kMaxTensorElements)
        throw ConfigError(str(keys.where(), ": layer '", lname, "' (", type, "): its ",
                              ps.name, " would hold ", ps.count(), " values, more than ",
                              kMaxTensorElements, "; use a narrower layer"));
    YAML::Node resolved = YAML::Clone(keys.resolved());
    if (!own_impl) resolved.remove("impl");  // follow --impl when the run is repeated
    m->resolved_layers_.push_back(resolved);
    m->layers_.push_back(layer);
    m->where_.push_back(keys.where());
  }
  m->out_ = cur;

  // The loss must fit the model's output.
  const std::string loss_where = cfg.source.where(cfg.root["model"]["loss"], "model.loss");
  m->loss_ = make_loss(cfg.model.loss, impl);
  if (std::string why = m->loss_->schema().fit(m->in_, cur, num_classes); !why.empty())
    throw ConfigError(str(loss_where, ": ", why));

  Shape out = m->in_;
  for (size_t i = 0; i < m->layers_.size(); ++i) {
    m->config_names_.push_back(m->layers_[i]->name());
    m->config_index_.push_back(int(i));
    out = m->layers_[i]->output_shape(out);
    m->config_out_.push_back(out);
  }
  if (!cfg.model.features.empty()) {
    m->features_name_ = cfg.model.features;
    for (size_t i = 0; i < m->layers_.size(); ++i)
      if (m->layers_[i]->name() == cfg.model.features) m->features_ = int(i);
    if (m->features_ < 0) {
      std::string hint = did_you_mean(cfg.model.features, m->config_names_);
      throw ConfigError(str(cfg.source.where(cfg.root["model"]["features"], "model.features"),
                            ": model.features names no layer: '", cfg.model.features, "'",
                            hint.empty() ? "" : str(" (did you mean '", hint, "'?)")));
    }
  }
  m->find_first_trained();

  // The GPU rewrite (gpu_rewrite.h): fused layers in place of the runs of
  // layers it links. model.features then indexes the group that ends with it.
  if (fuse && cfg.training.fuse && m->device() == Device::kGPU) {
    std::vector<RewriteNode> nodes;
    for (const LayerPtr& l : m->layers_) nodes.push_back(rewrite_node(*l));
    RewriteOptions o;
    o.fold = cfg.training.fold_upsample;
    o.features = m->features_;
    o.first_trained = m->first_trained_;
    m->rewrite_ = plan_gpu_rewrite(nodes, o);
    m->layers_ = apply_gpu_rewrite(m->rewrite_, m->layers_);
    int features = -1;
    m->config_index_.clear();
    for (size_t g = 0; g < m->rewrite_.groups.size(); ++g) {
      const RewritePlan::Group& group = m->rewrite_.groups[g];
      m->config_index_.push_back(group.first);
      if (group.last == m->features_) features = int(g);
    }
    HPMC_CHECK(m->features_ < 0 || features >= 0, "the GPU rewrite hid model.features '",
               m->features_name_, "' inside a fused layer");
    m->features_ = features;
    m->find_first_trained();
  }

  m->seed_ = cfg.training.seed;
  m->set_mode(false, 0);
  check_parameter_memory(ParamStore::layout_floats(m->layers_), m->device() == Device::kGPU,
                         optimizer_state_buffers(cfg.training.optimizer));
  m->params_.build(m->layers_, m->device());
  return m;
}

void Model::find_first_trained() {
  first_trained_ = int(layers_.size());
  for (size_t i = 0; i < layers_.size(); ++i)
    if (layers_[i]->param_count() > 0) {
      first_trained_ = int(i);
      break;
    }
}

void Model::set_mode(bool training, int64_t step, int64_t first) {
  for (size_t i = 0; i < layers_.size(); ++i) {
    LayerMode m;
    m.training = training;
    m.seed = seed_;
    m.step = step;
    m.first = first;
    m.stream = config_index_[i];  // the config's index: CPU and GPU draw alike, fused or not
    layers_[i]->set_mode(m);
  }
  training_ = training;
}

void Model::print_table(std::ostream& os) const {
  struct Row {
    std::string idx, name, type, impl, in, out, params;
  };
  std::vector<Row> rows;
  rows.push_back({"#", "name", "type", "impl", "input", "output", "params"});
  Shape cur = in_;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& l = *layers_[i];
    Shape out = l.output_shape(cur);
    std::string type = l.type();
    if (!l.describe().empty()) type += " " + l.describe();
    std::string name = l.name() + (int(i) == features_ ? " *" : "");
    rows.push_back({std::to_string(i + 1), name, type, l.impl(), cur.sample_str(),
                    out.sample_str(), thousands(l.param_count())});
    cur = out;
  }
  std::vector<size_t> w(7, 0);
  for (const auto& r : rows) {
    const std::string* f[7] = {&r.idx, &r.name, &r.type, &r.impl, &r.in, &r.out, &r.params};
    for (int k = 0; k < 7; ++k) w[k] = std::max(w[k], f[k]->size());
  }
  for (const auto& r : rows) {
    os << "  " << std::right << std::setw(int(w[0])) << r.idx << "  " << std::left
       << std::setw(int(w[1])) << r.name << "  " << std::setw(int(w[2])) << r.type << "  "
       << std::setw(int(w[3])) << r.impl << "  " << std::right << std::setw(int(w[4])) << r.in
       << " -> " << std::left << std::setw(int(w[5])) << r.out << "  " << std::right
       << std::setw(int(w[6])) << r.params << "\n";
  }
  os << "  total parameters: " << thousands(params_.total()) << " ("
     << std::fixed << std::setprecision(1) << double(params_.total()) * 4 / 1024 << " KiB)"
     << std::defaultfloat << std::setprecision(6) << "; loss: " << loss_->type();
  if (features_ >= 0) {
    Shape f = in_;
    for (int i = 0; i <= features_; ++i) f = layers_[size_t(i)]->output_shape(f);
    os << "; features (*): " << features_name_ << ", " << f.sample_str() << " = "
       << f.per_sample() << " values";
  }
  os << "\n";
  for (const std::string& d : rewrite_.declined) os << "  not fused: " << d << "\n";
}

void Model::check_batch(int n, const std::string& origin) const {
  // Every config layer's output, those inside a fused layer too (it holds them).
  size_t widest = in_.per_sample();
  std::string layer = "the input";
  for (size_t i = 0; i < config_out_.size(); ++i)
    if (config_out_[i].per_sample() > widest) {
      widest = config_out_[i].per_sample();
      layer = "layer '" + config_names_[i] + "'";
    }
  if (size_t(n) * widest > kMaxTensorElements)
    throw ConfigError(str(origin, " ", n, ": the output of ", layer, " (", widest,
                          " values per sample) would hold ", size_t(n) * widest,
                          " values for the batch, more than ", kMaxTensorElements,
                          "; use a batch of at most ", kMaxTensorElements / widest));
}

size_t Model::activation_bytes(int n) const {
  // What allocate(n) allocates: each layer's output, two gradient buffers of
  // the largest tensor, and the output gradient. (A fused layer's inner
  // tensors are its workspace.)
  Shape cur = in_.with_batch(n);
  size_t acts = 0, biggest = cur.count();
  for (size_t i = 0; i < layers_.size(); ++i) {
    cur = layers_[i]->output_shape(cur);
    acts += cur.count();
    biggest = std::max(biggest, cur.count());
  }
  return (acts + 2 * biggest + cur.count()) * sizeof(float);
}

size_t Model::workspace_bytes(int n) const {
  Shape cur = in_.with_batch(n);
  size_t bytes = 0;
  for (size_t i = 0; i < layers_.size(); ++i) {
    bytes += layers_[i]->workspace_bytes(cur);
    cur = layers_[i]->output_shape(cur);
  }
  return bytes;
}

void Model::allocate(int max_batch) {
  HPMC_CHECK(max_batch > 0, "batch size must be positive");
  check_batch(max_batch, "batch size");
  if (max_batch == max_batch_) return;
  max_batch_ = max_batch;
  acts_.clear();
  Shape cur = in_.with_batch(max_batch);
  size_t biggest = cur.count();
  for (size_t i = 0; i < layers_.size(); ++i) {
    cur = layers_[i]->output_shape(cur);
    acts_.push_back(Tensor::empty(cur, DType::kF32, device()));
    biggest = std::max(biggest, cur.count());
    layers_[i]->reserve(max_batch);
  }
  grad_a_ = Tensor::empty(Shape(1, int(biggest), 1, 1), DType::kF32, device());  // checked
  grad_b_ = Tensor::empty(Shape(1, int(biggest), 1, 1), DType::kF32, device());
  dout_ = Tensor::empty(cur, DType::kF32, device());
}

const Tensor& Model::forward(const Tensor& x, int last) {
  int n = x.shape().n;
  HPMC_CHECK(n <= max_batch_, "batch ", n, " exceeds the allocated ", max_batch_);
  if (last < 0) last = int(layers_.size()) - 1;
  HPMC_CHECK(last < int(layers_.size()), "forward to layer ", last, " of ", layers_.size());
  const Tensor* in = &x;
  for (int i = 0; i <= last; ++i) {
    acts_[size_t(i)].set_batch(n);
    ProfileScope scope(profiler_, profiler_ ? layers_[size_t(i)]->name() + " fwd" : std::string());
    layers_[size_t(i)]->forward(*in, acts_[size_t(i)]);
    in = &acts_[size_t(i)];
  }
  return *in;
}

void Model::backward(const Tensor& x, const Tensor& dout) {
  int n = x.shape().n;
  // A layer writes its input gradient into one buffer while it reads its
  // output gradient from the other (the first reads dout); the views give
  // each the right shape.
  Tensor* bufs[2] = {&grad_a_, &grad_b_};
  Tensor views[2];
  const Tensor* dy = &dout;
  int next = 0;  // the buffer the next input gradient goes to (not dy's)
  for (int i = int(layers_.size()) - 1; runs_backward(i); --i) {
    const Tensor& in = layer_input(i, x);
    Tensor* dx = nullptr;
    if (needs_input_grad(i)) {
      views[next] = bufs[next]->view(in.shape().with_batch(n));
      dx = &views[next];
    }
    ProfileScope scope(profiler_, profiler_ ? layers_[size_t(i)]->name() + " bwd" : std::string());
    layers_[size_t(i)]->backward(in, acts_[size_t(i)], *dy, dx);
    dy = dx;
    next ^= 1;
  }
}

const Tensor& Model::layer_input(int i, const Tensor& x) const {
  return i > 0 ? acts_[size_t(i - 1)] : x;
}

std::vector<Model::LayerFlops> Model::layer_flops(int n) const {
  std::vector<LayerFlops> out;
  Shape cur = in_.with_batch(n);
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& l = *layers_[i];
    LayerFlops f;
    f.forward = l.forward_flops(cur);
    if (runs_backward(int(i))) f.backward = l.backward_flops(cur, needs_input_grad(int(i)));
    out.push_back(f);
    cur = l.output_shape(cur);
  }
  return out;
}

double Model::train_flops(int n) const {
  double t = 0;
  for (const LayerFlops& f : layer_flops(n)) t += f.forward + f.backward;
  return t;
}

}  // namespace hpmc
