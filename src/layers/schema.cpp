// schema.cpp — key schema helpers and LayerArgs.
#include "layers/schema.h"

#include <cmath>
#include <sstream>

#include "core/error.h"

namespace hpmc {

namespace {

std::string number_text(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string((long long)v);
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace

std::string KeySpec::type_text() const {
  switch (type) {
    case KeyType::kInt: return str("int in [", number_text(lo), ", ", number_text(hi), "]");
    case KeyType::kFloat: return str("float in [", number_text(lo), ", ", number_text(hi), "]");
    case KeyType::kBool: return "bool";
    case KeyType::kChoice: {
      std::string s;
      for (const auto& c : choices) s += (s.empty() ? "" : " | ") + c;
      return s;
    }
  }
  return "?";
}

std::string KeySpec::default_text() const {
  if (required()) return "required";
  if (def[0] == '=') return "same as " + def.substr(1);
  return def;
}

KeySpec int_key(std::string name, std::string def, int lo, int hi, std::string doc) {
  KeySpec k;
  k.name = std::move(name);
  k.type = KeyType::kInt;
  k.def = std::move(def);
  k.lo = lo;
  k.hi = hi;
  k.doc = std::move(doc);
  return k;
}

KeySpec float_key(std::string name, std::string def, double lo, double hi, std::string doc) {
  KeySpec k = int_key(std::move(name), std::move(def), 0, 0, std::move(doc));
  k.type = KeyType::kFloat;
  k.lo = lo;
  k.hi = hi;
  return k;
}

KeySpec bool_key(std::string name, std::string def, std::string doc) {
  KeySpec k = int_key(std::move(name), std::move(def), 0, 0, std::move(doc));
  k.type = KeyType::kBool;
  return k;
}

KeySpec choice_key(std::string name, std::string def, std::vector<std::string> choices,
                   std::string doc) {
  KeySpec k = int_key(std::move(name), std::move(def), 0, 0, std::move(doc));
  k.type = KeyType::kChoice;
  k.choices = std::move(choices);
  return k;
}

const KeySpec* LayerSchema::key(const std::string& name) const {
  for (const KeySpec& k : keys)
    if (k.name == name) return &k;
  return nullptr;
}

const LayerArgs::Value& LayerArgs::get(const std::string& key) const {
  auto it = values_.find(key);
  HPMC_CHECK(it != values_.end(), "layer '", name, "': no value for key '", key, "'");
  return it->second;
}

int LayerArgs::i(const std::string& key) const { return int(get(key).num); }
double LayerArgs::f(const std::string& key) const { return get(key).num; }
bool LayerArgs::b(const std::string& key) const { return get(key).num != 0; }
const std::string& LayerArgs::s(const std::string& key) const { return get(key).text; }

LayerArgs& LayerArgs::set(const std::string& key, double v) {
  values_[key] = Value{v, ""};
  return *this;
}

LayerArgs& LayerArgs::set(const std::string& key, const std::string& v) {
  values_[key] = Value{0, v};
  return *this;
}

}  // namespace hpmc
