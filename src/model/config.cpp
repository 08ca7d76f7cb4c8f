#include "model/config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/error.h"
#include "io/json.h"

namespace hpmc {

namespace {

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
  auto it = overrides.find(path);
  if (it != overrides.end()) return it->second;
  if (node && node.Mark().line >= 0)
    return str(file, ":", node.Mark().line + 1, ":", node.Mark().column + 1);
  return file;
}

MapReader::MapReader(const YAML::Node& node, std::string path, const ConfigSource& src)
    : node_(node), path_(std::move(path)), src_(src) {
  if (!node_ || node_.IsNull()) {
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

void MapReader::fail(const std::string& key, const std::string& msg) const {
  throw ConfigError(str(where(key), ": ", key_path(key), ": ", msg));
}

bool MapReader::has(const std::string& key) const {
  YAML::Node v = node_[key];
  return v && !v.IsNull();
}

YAML::Node MapReader::value(const std::string& key) {
  known_.insert(key);
  return node_[key];
}

int MapReader::get_int(const std::string& key, int def, int lo, int hi) {
  YAML::Node v = value(key);
  if (!v || v.IsNull()) {
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
  if (!v || v.IsNull()) {
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
  if (!ok) fail(key, str("expected a non-negative integer, got '", scalar_text(v), "'"));
  resolved_[key] = x;
  return x;
}

double MapReader::get_float(const std::string& key, double def, double lo, double hi) {
  YAML::Node v = value(key);
  if (!v || v.IsNull()) {
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
  if (!ok) fail(key, str("expected a number, got '", scalar_text(v), "'"));
  if (!std::isfinite(x)) fail(key, str("must be a finite number, got '", v.Scalar(), "'"));
  if (x < lo || x > hi) fail(key, str("must be between ", lo, " and ", hi, ", got ", x));
  resolved_[key] = x;
  return x;
}

bool MapReader::get_bool(const std::string& key, bool def) {
  YAML::Node v = value(key);
  if (!v || v.IsNull()) {
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
  if (v && !v.IsNull()) {
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
      bool digits = std::all_of(p.begin(), p.end(), ::isdigit);
      size_t idx = digits ? std::stoul(p) : cur.size();
      if (!digits || idx >= cur.size())
        throw UsageError(str(origin, ": '", walked, "' is a list of ", cur.size(),
                             " entries; use an index 0..", cur.size() - 1, " after it"));
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

Config read_document(YAML::Node root, ConfigSource src, const std::string& default_name) {
  Config cfg;
  cfg.resolved = YAML::Node(YAML::NodeType::Map);
  MapReader top(root, "", src);
  cfg.name = top.get_string("name", default_name);
  if (cfg.name.empty() || cfg.name.find('/') != std::string::npos)
    top.fail("name", str("must be a non-empty name without '/', got '", cfg.name, "'"));
  if (!is_printable_utf8(cfg.name))  // it names the run's files and goes into checkpoints
    top.fail("name", str("must be printable UTF-8 text, got '", printable(cfg.name), "'"));
  cfg.resolved["name"] = cfg.name;

  {
    MapReader d(top.get_node("data"), "data", src);
    cfg.data.format = d.get_choice("format", "", {"mnist", "cifar10"});
    cfg.data.path = d.get_string("path", "data/" + cfg.data.format);
    cfg.data.train_limit = d.get_int("train_limit", 0, 0, std::numeric_limits<int>::max());
    cfg.data.test_limit = d.get_int("test_limit", 0, 0, std::numeric_limits<int>::max());
    cfg.data.synthetic = d.get_bool("synthetic", false);
    d.finish();
    cfg.resolved["data"] = d.resolved();
  }
  {
    if (!top.has("model")) top.fail("model", "is required (loss, layers)");
    MapReader m(top.get_node("model"), "model", src);
    cfg.model.loss = m.get_choice("loss", "", {"mse", "softmax_cross_entropy"});
    cfg.model.features = m.get_string("features", "");
    YAML::Node layers = m.get_node("layers");
    if (!layers || layers.IsNull()) m.fail("layers", "is required: a list of layers");
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
    MapReader t(top.get_node("training"), "training", src);
    auto& tr = cfg.training;
    tr.epochs = t.get_int("epochs", tr.epochs, 1, 1000000);
    tr.batch_size = t.get_int("batch_size", tr.batch_size, 1, 1 << 20);
    tr.lr = t.get_float("lr", tr.lr, 0.0, 1e6);
    tr.momentum = t.get_float("momentum", tr.momentum, 0.0, 0.999999);
    tr.weight_decay = t.get_float("weight_decay", tr.weight_decay, 0.0, 1e6);
    tr.seed = t.get_u64("seed", tr.seed);
    tr.shuffle = t.get_bool("shuffle", tr.shuffle);
    tr.threads = t.get_int("threads", tr.threads, 0, 4096);
    tr.fuse = t.get_bool("fuse", tr.fuse);
    tr.fold_upsample = t.get_bool("fold_upsample", tr.fold_upsample);
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

Config parse_text(const std::string& text, const std::string& file, const std::string& default_name,
                  const std::vector<Override>& overrides) {
  YAML::Node root;
  try {
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
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::error_code ec;
    bool exists = std::filesystem::exists(path, ec);
    throw ConfigError(str(path, ": ", exists ? "cannot read the config file (permissions?)"
                                             : "no such config file; the configs shipped with "
                                               "hpmc are in configs/"));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_text(ss.str(), path, std::filesystem::path(path).stem().string(), overrides);
}

Config parse_config(const std::string& yaml_text, const std::string& name_for_errors,
                    const std::vector<Override>& overrides) {
  return parse_text(yaml_text, name_for_errors,
                    std::filesystem::path(name_for_errors).stem().string(), overrides);
}

}  // namespace hpmc
