#include "model/config.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <sstream>

#include <yaml-cpp/eventhandler.h>

#include "core/error.h"
#include "core/regular_file.h"
#include "io/json.h"
#include "model/registry.h"

namespace hpmc {

namespace {

// A config is a page of YAML; anything near this size is the wrong file.
constexpr size_t kMaxConfigBytes = size_t(1) << 20;

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string scalar_text(const YAML::Node& n) {
  if (n.IsScalar()) return n.Scalar();
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a mapping";
  return "nothing";
}

// "123", "-5", "+99999999999999999999": an integer, whatever its size.
bool is_integer_literal(const YAML::Node& n) {
  if (!n.IsScalar()) return false;
  const std::string& s = n.Scalar();
  size_t i = !s.empty() && (s[0] == '-' || s[0] == '+') ? 1 : 0;
  return i < s.size() && std::all_of(s.begin() + long(i), s.end(), ::isdigit);
}

// A decimal number too large for a double, such as 1e999.
bool overflows_double(const YAML::Node& n) {
  if (!n.IsScalar() || n.Scalar().empty()) return false;
  const char* p = n.Scalar().c_str();
  char* end = nullptr;
  errno = 0;
  double x = std::strtod(p, &end);
  return *end == '\0' && errno == ERANGE && std::isinf(x);
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

}  // namespace

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = std::numeric_limits<size_t>::max();
  for (const auto& c : candidates) {
    size_t d = edit_distance(word, c);
    if (d < best_d) best_d = d, best = c;
  }
  size_t limit = std::max<size_t>(2, word.size() / 3);
  if (best_d <= limit) return best;
  // "batch" for "batch_size": a prefix of at least 4 letters is a good hint too.
  if (word.size() >= 4)
    for (const auto& c : candidates)
      if (c.rfind(word, 0) == 0 || word.rfind(c, 0) == 0) return c;
  return "";
}

// ---- ConfigSource / MapReader ----------------------------------------------

std::string ConfigSource::where(const YAML::Node& node, const std::string& path) const {
  // The override that set this value, or a mapping or list around it
  // (--set 'training.input_noise={type: mask}' names training.input_noise.type).
  for (std::string p = path;;) {
    auto it = overrides.find(p);
    if (it != overrides.end()) return it->second;
    const size_t dot = p.rfind('.');
    if (dot == std::string::npos) break;
    p.resize(dot);
  }
  if (node && node.Mark().line >= 0)
    return str(file, ":", node.Mark().line + 1, ":", node.Mark().column + 1);
  return file;
}

MapReader::MapReader(const YAML::Node& node, std::string path, const ConfigSource& src)
    : node_(node), path_(std::move(path)), src_(src) {
  if (!node_) {
    node_ = YAML::Node(YAML::NodeType::Map);
  } else if (!node_.IsMap()) {
    throw ConfigError(str(src_.where(node_, path_), ": ", path_.empty() ? "the document" : path_,
                          " must be a mapping of keys to values, got ", scalar_text(node_)));
  }
  // YAML allows a list or a mapping as a key ("? [a, b]: 1"); a config does not.
  for (auto it = node_.begin(); it != node_.end(); ++it)
    if (it->first.IsSequence() || it->first.IsMap())
      throw ConfigError(str(src_.where(it->first, path_), ": ",
                            path_.empty() ? "the document" : path_, " has a key that is ",
                            scalar_text(it->first), "; keys must be plain names"));
}

std::string MapReader::key_path(const std::string& key) const {
  if (key.empty()) return path_;
  return path_.empty() ? key : path_ + "." + key;
}

std::string MapReader::where(const std::string& key) const {
  if (!key.empty() && node_[key]) return src_.where(node_[key], key_path(key));
  return src_.where(node_, path_);
}

std::string MapReader::key_where(const std::string& key) const {
  for (auto it = node_.begin(); it != node_.end(); ++it)
    if (it->first.IsScalar() && it->first.Scalar() == key)
      return src_.where(it->first, key_path(key));
  return where(key);
}

void MapReader::fail(const std::string& key, const std::string& msg) const {
  throw ConfigError(str(where(key), ": ", key_path(key), ": ", msg));
}

bool MapReader::has(const std::string& key) const { return bool(node_[key]); }

YAML::Node MapReader::value(const std::string& key) {
  known_.insert(key);
  YAML::Node v = node_[key];
  // "epochs: ~", "epochs:" and "--set training.epochs=" are slips, not requests for the default.
  if (v && v.IsNull())  // named at its key: an empty value's position is the next line's
    throw ConfigError(str(key_where(key), ": ", key_path(key),
                          ": needs a value; to use the default, leave the key out"));
  return v;
}

int MapReader::get_int(const std::string& key, int def, int lo, int hi) {
  YAML::Node v = value(key);
  if (!v) {
    resolved_[key] = def;
    return def;
  }
  long long x = 0;
  bool ok = v.IsScalar();
  if (ok) {
    try {
      x = v.as<long long>();
    } catch (const YAML::Exception&) {
      ok = false;
    }
  }
  if (!ok && is_integer_literal(v))
    fail(key, str("out of range, must be between ", lo, " and ", hi, ", got ", v.Scalar()));
  if (!ok) fail(key, str("expected an integer, got '", scalar_text(v), "'"));
  if (x < lo || x > hi)
    fail(key, str("must be between ", lo, " and ", hi, ", got ", x));
  resolved_[key] = int(x);
  return int(x);
}

void MapReader::check_misspelled(const std::string& key) const {
  // A required key that is missing is often a typo of one that is present:
  // report the typo, where it is, rather than the absence.
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    std::string k = it->first.as<std::string>();
    if (k != key && !known_.count(k) && did_you_mean(k, {key}) == key)
      throw ConfigError(str(src_.where(it->first, key_path(k)), ": unknown key '", key_path(k),
                            "' (did you mean '", key, "'?)"));
  }
}

int MapReader::require_int(const std::string& key, int lo, int hi) {
  if (!has(key)) check_misspelled(key);
  if (!has(key)) fail(key, "is required (an integer)");
  return get_int(key, 0, lo, hi);
}

uint64_t MapReader::get_u64(const std::string& key, uint64_t def) {
  YAML::Node v = value(key);
  if (!v) {
    resolved_[key] = def;
    return def;
  }
  std::string s = v.IsScalar() ? v.Scalar() : "";
  bool ok = !s.empty() && std::all_of(s.begin(), s.end(), ::isdigit);
  uint64_t x = 0;
  if (ok) {
    try {
      x = v.as<uint64_t>();
    } catch (const YAML::Exception&) {
      ok = false;
    }
  }
  if (!ok && !s.empty() && std::all_of(s.begin(), s.end(), ::isdigit))
    fail(key, str("out of range, must be between 0 and ", std::numeric_limits<uint64_t>::max(),
                  ", got ", s));
  if (!ok) fail(key, str("expected a non-negative integer, got '", scalar_text(v), "'"));
  resolved_[key] = x;
  return x;
}

double MapReader::get_float(const std::string& key, double def, double lo, double hi) {
  YAML::Node v = value(key);
  if (!v) {
    resolved_[key] = def;
    return def;
  }
  double x = 0;
  bool ok = v.IsScalar();
  if (ok) {
    try {
      x = v.as<double>();
    } catch (const YAML::Exception&) {
      ok = false;
    }
  }
  if (!ok && overflows_double(v))
    fail(key, str("out of range, must be between ", lo, " and ", hi, ", got ", v.Scalar()));
  if (!ok) fail(key, str("expected a number, got '", scalar_text(v), "'"));
  if (!std::isfinite(x)) fail(key, str("must be a finite number, got '", v.Scalar(), "'"));
  if (x < lo || x > hi) fail(key, str("must be between ", lo, " and ", hi, ", got ", x));
  resolved_[key] = x;
  return x;
}

bool MapReader::get_bool(const std::string& key, bool def) {
  YAML::Node v = value(key);
  if (!v) {
    resolved_[key] = def;
    return def;
  }
  try {
    if (v.IsScalar()) {
      bool b = v.as<bool>();
      resolved_[key] = b;
      return b;
    }
  } catch (const YAML::Exception&) {
  }
  fail(key, str("expected true or false, got '", scalar_text(v), "'"));
}

std::string MapReader::get_string(const std::string& key, const std::string& def) {
  YAML::Node v = value(key);
  std::string s = def;
  if (v) {
    if (!v.IsScalar()) fail(key, str("expected a string, got ", scalar_text(v)));
    s = v.Scalar();
  }
  resolved_[key] = s;
  return s;
}

std::string MapReader::require_string(const std::string& key) {
  if (!has(key)) check_misspelled(key);
  if (!has(key)) fail(key, "is required");
  return get_string(key, "");
}

std::string MapReader::get_choice(const std::string& key, const std::string& def,
                                  const std::vector<std::string>& choices) {
  if (def.empty() && !has(key)) check_misspelled(key);
  if (def.empty() && !has(key)) fail(key, str("is required (one of: ", join(choices, ", "), ")"));
  std::string s = get_string(key, def);
  if (std::find(choices.begin(), choices.end(), s) == choices.end()) {
    std::string hint = did_you_mean(s, choices);
    fail(key, str("unknown value '", s, "'", hint.empty() ? "" : str(" (did you mean '", hint, "'?)"),
                  "; choose one of: ", join(choices, ", ")));
  }
  return s;
}

YAML::Node MapReader::get_node(const std::string& key) { return value(key); }

void MapReader::finish() {
  std::vector<std::string> known(known_.begin(), known_.end());
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    std::string k = it->first.as<std::string>();
    if (known_.count(k)) continue;
    std::string hint = did_you_mean(k, known);
    std::string where_k = src_.where(it->first, key_path(k));
    throw ConfigError(str(where_k, ": unknown key '", key_path(k), "'",
                          hint.empty() ? "" : str(" (did you mean '", hint, "'?)"),
                          "; known keys here: ", join(known, ", ")));
  }
}

// ---- overrides ------------------------------------------------------------

void apply_override(YAML::Node root, const std::string& assignment, ConfigSource& src,
                    const std::string& origin_in) {
  const std::string origin = origin_in.empty() ? "--set " + assignment : origin_in;
  auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw UsageError(str(origin, ": expected KEY=VALUE with a dotted key, e.g. "
                         "--set training.epochs=2"));
  std::string key = assignment.substr(0, eq), text = assignment.substr(eq + 1);
  std::vector<std::string> parts;
  std::stringstream ss(key);
  for (std::string p; std::getline(ss, p, '.');) {
    if (p.empty())
      throw UsageError(str(origin, ": empty component in key '", key, "'"));
    parts.push_back(p);
  }
  YAML::Node value;
  try {
    value = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw UsageError(str(origin, ": the value is not valid YAML (", e.msg, ")"));
  }
  YAML::Node cur = root;
  std::string walked;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& p = parts[i];
    bool last = i + 1 == parts.size();
    if (cur.IsSequence()) {
      const size_t n = cur.size();
      const std::string use = n == 0 ? "it has no entry to set"
                                     : str("use an index 0..", n - 1, " after it");
      if (!std::all_of(p.begin(), p.end(), ::isdigit))
        throw UsageError(str(origin, ": '", p, "' is not a list index: '", walked,
                             "' is a list of ", n, " entries; ", use));
      // Digit by digit, stopping at n: an index of any length is just out of range.
      size_t idx = 0;
      for (char c : p)
        if ((idx = idx * 10 + size_t(c - '0')) >= n) break;
      if (idx >= n)
        throw UsageError(str(origin, ": index ", p, " is out of range: '", walked,
                             "' is a list of ", n, " entries; ", use));
      if (last) {
        cur[idx] = value;
      } else {
        YAML::Node next = cur[idx];
        cur.reset(next);
      }
    } else {
      if (!cur.IsMap() && !cur.IsNull())
        throw UsageError(str(origin, ": '", walked, "' is a value, not a section"));
      if (last) {
        cur[p] = value;
      } else {
        if (!cur[p] || cur[p].IsNull()) cur[p] = YAML::Node(YAML::NodeType::Map);
        YAML::Node next = cur[p];
        cur.reset(next);
      }
    }
    walked += (walked.empty() ? "" : ".") + p;
  }
  src.overrides[key] = origin;
}

// ---- the document -----------------------------------------------------------

namespace {

// The run name becomes file names (<weights_dir>/<name>.safetensors, runs/<name>) and
// checkpoint metadata, so it must be one short, printable, valid UTF-8 path component.
constexpr size_t kMaxRunNameBytes = 100;

// The name as a message may show it: control bytes (and every non-ASCII byte
// when it is not valid UTF-8) as \xNN, cut at 40 bytes.
std::string printable_name(const std::string& name) {
  const bool utf8 = is_valid_utf8(name);
  std::string out;
  for (size_t i = 0; i < name.size(); ++i) {
    if (i >= 40 && (!utf8 || (static_cast<unsigned char>(name[i]) & 0xC0) != 0x80))
      return out + "...";
    auto c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c == 0x7F || (!utf8 && c >= 0x80)) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out;
}

// What is wrong with `name` as a run name, or "".
std::string run_name_problem(const std::string& name) {
  const std::string shown = str("got '", printable_name(name), "'");
  if (name.empty()) return "must not be empty";
  if (!is_valid_utf8(name)) return str("must be valid UTF-8, ", shown);
  if (name.size() > kMaxRunNameBytes)
    return str("must be at most ", kMaxRunNameBytes, " bytes long, got ", name.size(), " bytes: ",
               shown);
  if (std::any_of(name.begin(), name.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7F; }))
    return str("must not contain control characters, ", shown);
  if (name.find('/') != std::string::npos)
    return str("must not contain '/' (it names files; put directories in output.dir or "
               "output.weights_dir), ", shown);
  if (name == "." || name == "..") return str("must not be '.' or '..', ", shown);
  return "";
}

// The images and npy formats' keys; each is an error with a format that
// does not use it (rather than an unknown key), and data.split_seed without
// data.test_fraction is one too (it would change nothing).
void read_data_options(MapReader& d, const std::string& format, DataOptions& o) {
  const bool images = format == "images", npy = format == "npy";
  for (const auto& [key, owner] : {std::pair<std::string, std::string>{"size", "images"},
                                   {"channels", "images"},
                                   {"layout", "npy"}})
    if (d.has(key) && format != owner)
      d.fail(key, str("applies to format ", owner, " only; the ", format, " format's ",
                      key == "layout" ? "layout is fixed" : "images come as they are stored",
                      "; remove the key"));
  for (const char* key : {"test_fraction", "split_seed"})
    if (d.has(key) && !images && !npy)
      d.fail(key, str("applies to formats images and npy only; the ", format,
                      " format's test split is in its files; remove the key"));
  if (images) {
    // Read even when absent, so that a misspelt key gets a did-you-mean.
    if (YAML::Node v = d.get_node("size")) {
      auto side = [&](size_t i) -> int {
        const YAML::Node& e = v[i];
        long long x = 0;
        try {
          x = e.IsScalar() ? e.as<long long>() : 0;
        } catch (const YAML::Exception&) {
          x = 0;
        }
        if (x < 1 || x > 65536)
          d.fail("size", str("each side must be an integer from 1 to 65536, got '",
                             e.IsScalar() ? e.Scalar() : std::string("a list or mapping"), "'"));
        return int(x);
      };
      if (!v.IsSequence() || v.size() != 2)
        d.fail("size", "must be [height, width], e.g. [64, 64]");
      o.height = side(0);
      o.width = side(1);
      YAML::Node r(YAML::NodeType::Sequence);
      r.SetStyle(YAML::EmitterStyle::Flow);
      r.push_back(o.height);
      r.push_back(o.width);
      d.set_resolved("size", r);
    }
    if (d.get_node("channels")) {
      o.channels = d.get_int("channels", 0, 1, 3);
      if (o.channels == 2) d.fail("channels", "must be 1 (grey) or 3 (RGB), got 2");
    }
  }
  if (npy) o.layout = d.get_choice("layout", "auto", {"auto", "nhw", "nhwc", "nchw"});
  if (images || npy) {
    o.test_fraction = d.get_float("test_fraction", 0.0, 0.0, 1.0);
    if (o.test_fraction >= 1.0)
      d.fail("test_fraction", "must be below 1 (1 leaves no training samples), got 1");
    if (d.has("split_seed") && o.test_fraction == 0)
      d.fail("split_seed", "seeds data.test_fraction's split, which is not set; remove the key "
                           "or set data.test_fraction");
    o.split_seed = d.get_u64("split_seed", o.split_seed);
  }
}

Config read_document(YAML::Node root, ConfigSource src, const std::string& default_name) {
  Config cfg;
  cfg.resolved = YAML::Node(YAML::NodeType::Map);
  MapReader top(root, "", src);
  cfg.name = top.get_string("name", default_name);
  if (std::string why = run_name_problem(cfg.name); !why.empty()) {
    if (top.has("name")) top.fail("name", why);
    throw ConfigError(str(src.file, ": the run name (name; by default the config's file name "
                          "without .yaml) ", why, "; set name: in the config, or --set name=NAME"));
  }
  cfg.resolved["name"] = cfg.name;

  {
    MapReader d(top.get_node("data"), "data", src);
    cfg.data.format = d.get_choice("format", "", {"mnist", "cifar10", "images", "npy"});
    cfg.data.path = d.get_string("path", "data/" + cfg.data.format);
    cfg.data.train_limit = d.get_int("train_limit", 0, 0, std::numeric_limits<int>::max());
    cfg.data.test_limit = d.get_int("test_limit", 0, 0, std::numeric_limits<int>::max());
    cfg.data.synthetic = d.get_bool("synthetic", false);
    read_data_options(d, cfg.data.format, cfg.data.options);
    {
      MapReader a(d.get_node("augment"), "data.augment", src);
      auto& aug = cfg.training.augment;
      aug.hflip = a.get_bool("hflip", aug.hflip);
      aug.crop_padding = a.get_int("crop_padding", aug.crop_padding, 0, 1024);
      a.finish();
      d.set_resolved("augment", a.resolved());
    }
    d.finish();
    cfg.resolved["data"] = d.resolved();
  }
  {
    if (!top.has("model")) top.fail("model", "is required (loss, layers)");
    MapReader m(top.get_node("model"), "model", src);
    cfg.model.loss = m.get_choice("loss", "", LayerRegistry::builtin().loss_names());
    cfg.model.features = m.get_string("features", "");
    YAML::Node layers = m.get_node("layers");
    if (!layers) m.fail("layers", "is required: a list of layers");
    if (!layers.IsSequence() || layers.size() == 0)
      m.fail("layers", "must be a non-empty list of layers, each with a 'type'");
    for (size_t i = 0; i < layers.size(); ++i)
      cfg.model.layers.push_back({layers[i], str("model.layers.", i), int(i)});
    m.finish();
    YAML::Node mr = m.resolved();
    mr["layers"] = YAML::Clone(layers);
    cfg.resolved["model"] = mr;
  }
  {
    redirect_lr_override(root, src);  // --lr into training.optimizer.lr
    MapReader t(top.get_node("training"), "training", src);
    auto& tr = cfg.training;
    tr.epochs = t.get_int("epochs", tr.epochs, 1, 1000000);
    tr.batch_size = t.get_int("batch_size", tr.batch_size, 1, 1 << 20);
    tr.grad_accumulation = t.get_int("grad_accumulation", tr.grad_accumulation, 1, 1 << 16);
    read_optim_config(t, src, tr.optimizer, tr.schedule, tr.clip_grad_norm);
    tr.seed = t.get_u64("seed", tr.seed);
    tr.shuffle = t.get_bool("shuffle", tr.shuffle);
    tr.threads = t.get_int("threads", tr.threads, 0, 4096);
    tr.fuse = t.get_bool("fuse", tr.fuse);
    tr.fold_upsample = t.get_bool("fold_upsample", tr.fold_upsample);
    tr.precision = parse_precision(
        t.get_choice("precision", precision_name(tr.precision), precision_names()));
    {
      // {type: gaussian, std: S} | {type: mask, p: P} | {type: none}; each type
      // knows only its own key.
      MapReader n(t.get_node("input_noise"), "training.input_noise", src);
      auto& noise = tr.input_noise;
      const std::string type = n.get_choice("type", "none", {"none", "gaussian", "mask"});
      if (type == "gaussian") {
        noise.type = InputNoiseConfig::Type::kGaussian;
        noise.std = n.get_float("std", noise.std, 0.0, 1e3);
      } else if (type == "mask") {
        noise.type = InputNoiseConfig::Type::kMask;
        noise.p = n.get_float("p", noise.p, 0.0, 1.0);
        if (noise.p >= 1.0)
          n.fail("p", "must be below 1 (p = 1 sets every input value to 0), got 1");
      }
      for (const auto& [key, owner] : {std::pair<std::string, std::string>{"std", "gaussian"},
                                       {"p", "mask"}})
        if (type != owner && n.has(key))
          n.fail(key, str("belongs to type: ", owner, ", but the type is ", type,
                          type == "none" ? " (the default)" : "", "; remove the key or set type: ",
                          owner));
      n.finish();
      t.set_resolved("input_noise", n.resolved());
    }
    t.finish();
    cfg.resolved["training"] = t.resolved();
  }
  {
    MapReader o(top.get_node("output"), "output", src);
    auto& out = cfg.output;
    out.dir = o.get_string("dir", "runs/" + cfg.name);
    out.weights_dir = o.get_string("weights_dir", out.weights_dir);
    out.checkpoint_every = o.get_int("checkpoint_every", 0, 0, std::numeric_limits<int>::max());
    out.log_every = o.get_int("log_every", 0, 0, std::numeric_limits<int>::max());
    out.recon_count = o.get_int("recon_count", out.recon_count, 1, 1024);
    out.recon_every_epoch = o.get_bool("recon_every_epoch", false);
    if (out.dir.empty()) o.fail("dir", "must not be empty");
    if (out.weights_dir.empty()) o.fail("weights_dir", "must not be empty");
    o.finish();
    cfg.resolved["output"] = o.resolved();
  }
  top.finish();

  cfg.source = std::move(src);
  cfg.root = root;
  return cfg;
}

// Finds what the node tree loses: a key given twice in one mapping (YAML::Node
// keeps the first) and a second document after '---' (YAML::Load reads only
// the first). It walks the parser's events, tracking the dotted path of each
// node so that a duplicate is named as the rest of the config names keys.
class StructureCheck : public YAML::EventHandler {
 public:
  explicit StructureCheck(std::string file) : file_(std::move(file)) {}

  void OnDocumentStart(const YAML::Mark& m) override {
    if (++documents_ > 1)
      throw ConfigError(str(at(m), ": a second YAML document starts here; a config is one "
                            "document: delete it (from its '---' on) or move it to a file of its "
                            "own"));
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& m, YAML::anchor_t) override { leaf(m, nullptr); }
  void OnAlias(const YAML::Mark& m, YAML::anchor_t anchor) override {
    auto it = anchored_.find(anchor);
    leaf(m, it == anchored_.end() ? nullptr : &it->second);
  }
  void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t anchor,
                const std::string& value) override {
    if (anchor) anchored_[anchor] = value;
    leaf(m, &value);
  }
  void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    open(false, m);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    open(true, m);
  }
  void OnMapEnd() override { close(); }

 private:
  struct Frame {
    bool map = false;
    std::string path;
    bool in_value = false;  // map: the next node is the value of `key`
    std::string key;
    size_t index = 0;  // sequence: the next entry's index
    std::map<std::string, YAML::Mark> keys;
  };

  std::string at(const YAML::Mark& m) const {
    return str(file_, ":", m.line + 1, ":", m.column + 1);
  }
  static std::string child(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }

  // The path of a node that starts at `m`; a mapping key (`scalar`: its text,
  // null for a key that is not a scalar) is checked against its siblings.
  std::string begin_node(const YAML::Mark& m, const std::string* scalar) {
    if (stack_.empty()) return "";
    Frame& f = stack_.back();
    if (!f.map) return child(f.path, std::to_string(f.index));
    if (f.in_value) return child(f.path, f.key);
    f.key = scalar ? *scalar : "?";
    if (scalar) {
      auto [first, fresh] = f.keys.emplace(*scalar, m);
      if (!fresh)
        throw ConfigError(str(at(m), ": duplicate key '", child(f.path, *scalar),
                              "', first given at ", at(first->second),
                              "; a key may appear once in a mapping: remove one of them"));
    }
    return child(f.path, f.key);
  }
  // The node that began last has ended.
  void end_node() {
    if (stack_.empty()) return;
    Frame& f = stack_.back();
    if (f.map) f.in_value = !f.in_value;
    else ++f.index;
  }
  void leaf(const YAML::Mark& m, const std::string* scalar) {
    begin_node(m, scalar);
    end_node();
  }
  void open(bool map, const YAML::Mark& m) {
    Frame f;
    f.map = map;
    f.path = begin_node(m, nullptr);
    stack_.push_back(std::move(f));
  }
  void close() {
    stack_.pop_back();
    end_node();
  }

  std::string file_;
  int documents_ = 0;
  std::vector<Frame> stack_;
  std::map<YAML::anchor_t, std::string> anchored_;  // scalar anchors, for aliased keys
};

Config parse_text(const std::string& text, const std::string& file, const std::string& default_name,
                  const std::vector<Override>& overrides) {
  YAML::Node root;
  try {
    std::istringstream in(text);
    YAML::Parser parser(in);
    StructureCheck check(file);
    while (parser.HandleNextDocument(check)) {
    }
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw ConfigError(str(file, ":", e.mark.line + 1, ":", e.mark.column + 1,
                          ": not valid YAML: ", e.msg));
  }
  if (!root || root.IsNull()) throw ConfigError(str(file, ": the config is empty"));
  if (!root.IsMap())
    throw ConfigError(str(file, ": the config must be a mapping with data, model, training and "
                          "output sections"));
  ConfigSource src;
  src.file = file;
  for (const auto& o : overrides) apply_override(root, o.assignment, src, o.origin);
  return read_document(root, std::move(src), default_name);
}

}  // namespace

Config load_config(const std::string& path, const std::vector<Override>& overrides) {
  RegularFile f(path);
  if (!f.ok()) {
    if (f.missing())
      throw ConfigError(str(path, ": no such config file; the configs shipped with hpmc are in "
                            "configs/"));
    throw ConfigError(str(path, ": ", f.why(),
                          f.problem() == FileProblem::kUnreadable
                              ? ""
                              : "; give a YAML config file, e.g. configs/fashion_ae.yaml"));
  }
  // Read one byte past the cap, so that a file that grew since fstat() is caught too.
  std::string text;
  if (f.size() <= kMaxConfigBytes && !f.read_up_to(text, kMaxConfigBytes + 1))
    throw ConfigError(str(path, ": cannot read the config file: ", std::strerror(errno)));
  if (f.size() > kMaxConfigBytes || text.size() > kMaxConfigBytes)
    throw ConfigError(str(path, ": the config file is ", std::max<uint64_t>(f.size(), text.size()),
                          " bytes, more than the ", kMaxConfigBytes, " bytes (1 MiB) a config may "
                          "have; is this the right file?"));
  return parse_text(text, path, std::filesystem::path(path).stem().string(), overrides);
}

Config parse_config(const std::string& yaml_text, const std::string& name_for_errors,
                    const std::vector<Override>& overrides) {
  return parse_text(yaml_text, name_for_errors,
                    std::filesystem::path(name_for_errors).stem().string(), overrides);
}

}  // namespace hpmc
