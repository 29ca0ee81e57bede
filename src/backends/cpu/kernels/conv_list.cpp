// The convolution implementation lists' machinery (conv_list.h): SPORE_CONV_IMPL, walking a list,
// the first-call timing of a timed entry, the per-geometry cache of choices and their log line.
// The entries and the lists are in nn_conv.cpp.
#include "backends/cpu/kernels/conv_list.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "core/log.h"
#include "spore/error.h"

namespace spore::cpu {
namespace {

// ---- SPORE_CONV_IMPL ----------------------------------------------------------------------------
struct Override {
  std::string spec;
  bool exclude = false;            // "-a,-b"
  std::vector<std::string> names;  // empty: no override
};

std::vector<std::string> all_names() {
  std::vector<std::string> r;
  for (ConvProp p : {ConvProp::kForward, ConvProp::kBackwardData, ConvProp::kBackwardWeight})
    for (const ConvImpl& e : conv_impls(p))
      if (std::find(r.begin(), r.end(), e.name) == r.end()) r.push_back(e.name);
  return r;
}

Override parse(const std::string& spec) {
  Override o;
  o.spec = spec;
  const std::vector<std::string> known = all_names();
  std::string known_str;
  for (const std::string& n : known) known_str += (known_str.empty() ? "" : ", ") + n;
  std::stringstream ss(spec);
  std::string item;
  int minus = 0, plus = 0;
  while (std::getline(ss, item, ',')) {
    item.erase(std::remove_if(item.begin(), item.end(), [](char c) { return c == ' '; }),
               item.end());
    if (item.empty()) continue;
    const bool neg = item[0] == '-';
    if (neg) item.erase(0, 1);
    (neg ? minus : plus)++;
    SPORE_CHECK(std::find(known.begin(), known.end(), item) != known.end(), "SPORE_CONV_IMPL='",
                spec, "': unknown convolution implementation '", item,
                "'; the lists have: ", known_str);
    o.names.push_back(item);
  }
  SPORE_CHECK(minus == 0 || plus == 0, "SPORE_CONV_IMPL='", spec,
              "': either names to keep (a,b) or names to drop (-a,-b), not both");
  o.exclude = minus > 0;
  return o;
}

std::mutex g_mu;               // guards everything below
bool g_override_read = false;  // SPORE_CONV_IMPL read
Override g_override;
uint64_t g_generation = 0;  // bumped by set_conv_impl_override: choices made meanwhile are stale

const Override& current_override() {  // under g_mu
  if (!g_override_read) {             // a bad value throws at every conv until it is fixed
    const char* e = std::getenv("SPORE_CONV_IMPL");
    g_override = parse(e ? e : "");
    g_override_read = true;
  }
  return g_override;
}

bool named(const Override& o, const char* name) {
  return std::find(o.names.begin(), o.names.end(), name) != o.names.end();
}

// The list an override leaves, and whether its entries are forced (a kept list: no timing).
std::vector<const ConvImpl*> narrowed(ConvProp prop, const Override& o, bool* forced) {
  const std::vector<ConvImpl>& list = conv_impls(prop);
  std::vector<const ConvImpl*> r;
  bool any_named = false;
  for (const ConvImpl& e : list) any_named = any_named || named(o, e.name);
  *forced = !o.exclude && any_named;
  for (const ConvImpl& e : list) {
    if (o.exclude && named(o, e.name)) continue;
    if (*forced && !named(o, e.name)) continue;
    r.push_back(&e);
  }
  return r;
}

// ---- timed entries ------------------------------------------------------------------------------
struct Verdict {
  bool wins;
  double self_ms, next_ms;
  std::string next;
};
struct KeyHash {
  size_t operator()(const std::vector<int64_t>& k) const {
    size_t h = k.size();
    for (int64_t v : k) h ^= std::hash<int64_t>()(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h;
  }
};
std::map<std::pair<std::string, std::vector<int64_t>>, Verdict> g_verdicts;  // (entry, desc key)
// The choice per desc key under the current override (cleared when it changes).
std::unordered_map<std::vector<int64_t>, const ConvImpl*, KeyHash> g_choices;

std::string ms(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f ms", v);
  return buf;
}

// Walks the list: the first entry that takes d. next (optional): the entry after a chosen timed
// one that also takes d (what it is timed against). Under g_mu.
ConvChoice walk(const ConvDesc& d, const ConvImpl** next = nullptr) {
  bool forced = false;
  const Override& o = current_override();
  const std::vector<const ConvImpl*> list = narrowed(d.prop, o, &forced);
  ConvChoice c;
  for (size_t i = 0; i < list.size(); ++i) {
    const ConvImpl& e = *list[i];
    std::string why = e.why_not(d);
    if (why.empty() && e.timed && !forced) {
      auto it = g_verdicts.find({e.name, d.key()});
      if (it != g_verdicts.end() && !it->second.wins)
        why = it->second.next + " measured faster at the first call (" + ms(it->second.next_ms) +
              " vs " + ms(it->second.self_ms) + ")";
      else if (it != g_verdicts.end())
        c.note = "timed at the first call: " + ms(it->second.self_ms) + " vs " + it->second.next +
                 " " + ms(it->second.next_ms);
      else
        c.note =
            "not timed yet: at the first call it runs against the next entry that takes the conv";
      if (why.empty() && it == g_verdicts.end() && next) {
        *next = nullptr;
        for (size_t k = i + 1; k < list.size() && !*next; ++k)
          if (list[k]->why_not(d).empty()) *next = list[k];
      }
    }
    if (why.empty()) {
      c.impl = &e;
      if (forced) c.note = "SPORE_CONV_IMPL=" + o.spec;
      return c;
    }
    c.declined.emplace_back(e.name, std::move(why));
  }
  return c;
}

double seconds(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

const char* conv_prop_name(ConvProp p) {
  switch (p) {
    case ConvProp::kForward:
      return "forward";
    case ConvProp::kBackwardData:
      return "backward_data";
    case ConvProp::kBackwardWeight:
      return "backward_weight";
  }
  return "?";
}

std::string ConvDesc::str() const {
  std::ostringstream s;
  s << conv_prop_name(prop) << " " << dtype_name(dtype) << " x " << N << "x" << C << "x" << H << "x"
    << W << (blocked_x ? " (blocked)" : "") << " w " << O << "x" << C / G << "x" << kh << "x" << kw
    << " -> " << N << "x" << O << "x" << OH << "x" << OW << (blocked_y ? " (blocked)" : "")
    << " stride " << sh << "x" << sw << " pad " << pt << "," << pb << "," << pl << "," << pr;
  if (dh != 1 || dw != 1) s << " dilation " << dh << "x" << dw;
  if (G != 1) s << " groups " << G;
  if (bias) s << " bias";
  if (scale) s << " scale/shift";
  if (residual) s << " residual";
  if (!act.empty()) s << " act=" << act;
  if (constant_weights) s << " constant weights";
  return s.str();
}

std::vector<int64_t> ConvDesc::key() const {
  return {int64_t(prop),
          int64_t(dtype),
          N,
          C,
          H,
          W,
          O,
          kh,
          kw,
          OH,
          OW,
          sh,
          sw,
          pt,
          pb,
          pl,
          pr,
          dh,
          dw,
          G,
          blocked_x,
          blocked_y,
          lanes,
          bias,
          fused,
          scale,
          residual,
          int64_t(std::hash<std::string>()(act)),
          constant_weights};
}

std::string ConvChoice::str() const {
  std::string s = name();
  if (!note.empty()) s += " (" + note + ")";
  if (!declined.empty()) {
    s += impl ? "; declined: " : ": every entry declined: ";
    for (size_t i = 0; i < declined.size(); ++i)
      s += (i ? "; " : "") + declined[i].first + ": " + declined[i].second;
  }
  return s;
}

ConvChoice choose_conv(const ConvDesc& d) {
  std::lock_guard<std::mutex> lock(g_mu);
  return walk(d);
}

void run_conv(ConvProp prop, ops::KernelContext& ctx) {
  const ConvDesc d = ConvDesc::of(prop, ctx);
  const std::vector<int64_t> key = d.key();
  const ConvImpl* impl = nullptr;
  const ConvImpl* next = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (auto it = g_choices.find(key); it != g_choices.end()) impl = it->second;
  }
  if (!impl) {
    // First call of this geometry: walk the list (unlocked entries may build oneDNN primitives and
    // time them; the walk itself is serialised, as those are rare).
    ConvChoice c;
    uint64_t gen;
    {
      std::lock_guard<std::mutex> lock(g_mu);
      gen = g_generation;
      c = walk(d, &next);
    }
    SPORE_CHECK_KIND(ErrorKind::NotImplemented, c.impl,
                     "[conv2d] no CPU convolution implementation takes ", d.str(), ": ", c.str());
    if (c.impl->timed && next) {
      // A timed entry's first call: it and the next entry each write the whole output from the
      // inputs; a warm-up each (oneDNN builds its primitive), then best of three in turn, then the
      // winner once more so the output is what later calls compute.
      const ConvImpl& self = *c.impl;
      auto run_self = [&] { self.run(ctx, d); };
      auto run_next = [&] { next->run(ctx, d); };
      run_next();
      run_self();
      double ts = 1e30, tn = 1e30;
      for (int k = 0; k < 3; ++k) {
        tn = std::min(tn, seconds(run_next));
        ts = std::min(ts, seconds(run_self));
      }
      const bool wins = ts < tn;
      if (!wins) run_next();
      std::lock_guard<std::mutex> lock(g_mu);
      g_verdicts[{self.name, key}] = {wins, ts * 1e3, tn * 1e3, next->name};
      c = walk(d);
      if (gen == g_generation) g_choices[key] = c.impl;
      if (log::enabled(log::Level::Debug)) log::debug("conv {}: {}", d.str(), c.str());
      return;
    }
    if (log::enabled(log::Level::Debug)) log::debug("conv {}: {}", d.str(), c.str());
    std::lock_guard<std::mutex> lock(g_mu);
    if (gen == g_generation) g_choices[key] = c.impl;
    impl = c.impl;
  }
  impl->run(ctx, d);
}

void set_conv_impl_override(const std::string& spec) {
  Override o = parse(spec);  // throws on a bad spec, before anything changes
  std::lock_guard<std::mutex> lock(g_mu);
  g_override_read = true;
  g_override = std::move(o);
  ++g_generation;
  g_choices.clear();
}

std::string conv_impl_override() {
  std::lock_guard<std::mutex> lock(g_mu);
  return current_override().spec;
}

}  // namespace spore::cpu
