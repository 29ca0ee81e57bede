// Name mapping between MindSpore's model zoo and Spore's models (mindspore_names.h): a table of
// regex rewrites per model family, applied in one direction or the other.
#include "models/mindspore_names.h"

#include <regex>
#include <vector>

#include "spore/error.h"

namespace spore::models {
namespace {

struct Rule {
  const char* spore;  // pattern on Spore's side ($1.. captures)
  const char* ms;     // the zoo's side
};

// Each rule is written both ways: a regex on one side with its replacement on the other.
struct Rewrite {
  std::regex spore_rx, ms_rx;
  std::string spore_fmt, ms_fmt;
};

std::vector<Rewrite> compile(std::initializer_list<Rule> rules) {
  std::vector<Rewrite> out;
  for (const Rule& r : rules) {
    // Both sides are literal names with (\d+) / (.*) groups; the formats use $1, $2.
    auto to_fmt = [](std::string s) {
      int n = 0;
      std::string f;
      for (size_t i = 0; i < s.size(); ++i) {
        if (s.compare(i, 5, "(\\d+)") == 0)
          f += "$" + std::to_string(++n), i += 4;
        else if (s.compare(i, 4, "(.*)") == 0)
          f += "$" + std::to_string(++n), i += 3;
        else if (s[i] == '\\')
          continue;
        else
          f += s[i];
      }
      return f;
    };
    out.push_back({std::regex(std::string("^") + r.spore + "$"),
                   std::regex(std::string("^") + r.ms + "$"), to_fmt(r.spore), to_fmt(r.ms)});
  }
  return out;
}

const std::vector<Rewrite>& rules_for(const std::string& model) {
  static const std::vector<Rewrite> none;
  static const std::vector<Rewrite> resnet_stem = compile({
      {"stem\\.0\\.(.*)", "conv1\\.(.*)"},
      {"stem\\.1\\.(.*)", "bn1\\.(.*)"},
  });
  static const std::vector<Rewrite> resnet_basic = compile({
      {"stem\\.0\\.(.*)", "conv1\\.(.*)"},
      {"stem\\.1\\.(.*)", "bn1\\.(.*)"},
      {"layer(\\d+)\\.(\\d+)\\.bn1\\.(.*)", "layer(\\d+)\\.(\\d+)\\.bn1d\\.(.*)"},
      {"layer(\\d+)\\.(\\d+)\\.bn2\\.(.*)", "layer(\\d+)\\.(\\d+)\\.bn2d\\.(.*)"},
  });
  if (model == "resnet18" || model == "resnet34") return resnet_basic;
  if (model == "resnet50") return resnet_stem;
  if (model == "lenet" || model == "mlp" || model.empty()) return none;
  SPORE_THROW(ErrorKind::ValueError, "[mindspore names] unknown model \"", model,
              "\" (known: lenet, mlp, resnet18, resnet34, resnet50, auto)");
}

// Optimizer state names its parameter after a prefix ("moments.", MindSpore's Momentum).
const char* const kStatePrefixes[] = {"moments.", "accum.", "moment1.", "moment2."};

std::string rename(const std::vector<Rewrite>& rules, const std::string& name, bool to_ms) {
  for (const char* p : kStatePrefixes) {
    const size_t n = std::char_traits<char>::length(p);
    if (name.size() > n && name.compare(0, n, p) == 0)
      return p + rename(rules, name.substr(n), to_ms);
  }
  for (const Rewrite& r : rules) {
    const std::regex& rx = to_ms ? r.spore_rx : r.ms_rx;
    if (std::regex_match(name, rx))
      return std::regex_replace(name, rx, to_ms ? r.ms_fmt : r.spore_fmt);
  }
  return name;
}

std::string resolve(const std::string& model, const io::NamedTensors& tensors) {
  return model == "auto" ? guess_naming(tensors) : model;
}

bool has(const io::NamedTensors& ts, const std::string& name) {
  for (const auto& [n, t] : ts)
    if (n == name) return true;
  return false;
}

}  // namespace

std::string guess_naming(const io::NamedTensors& tensors) {
  const bool resnet = has(tensors, "stem.1.gamma") || has(tensors, "bn1.gamma") ||
                      has(tensors, "layer1.0.conv1.weight");
  if (!resnet) return "";
  return has(tensors, "layer1.0.conv3.weight") ? "resnet50" : "resnet18";
}

std::string to_mindspore_name(const std::string& model, const std::string& name) {
  return rename(rules_for(model), name, true);
}
std::string from_mindspore_name(const std::string& model, const std::string& name) {
  return rename(rules_for(model), name, false);
}

io::NamedTensors to_mindspore_names(const std::string& model, const io::NamedTensors& tensors) {
  const auto& rules = rules_for(resolve(model, tensors));
  io::NamedTensors out;
  for (const auto& [n, t] : tensors) out.emplace_back(rename(rules, n, true), t);
  return out;
}
io::NamedTensors from_mindspore_names(const std::string& model, const io::NamedTensors& tensors) {
  const auto& rules = rules_for(resolve(model, tensors));
  io::NamedTensors out;
  for (const auto& [n, t] : tensors) out.emplace_back(rename(rules, n, false), t);
  return out;
}

}  // namespace spore::models
