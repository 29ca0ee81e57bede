// Every rank's checkpoint merged into one whole checkpoint (spore/parallel/rank_checkpoint.h).
#include "spore/parallel/rank_checkpoint.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>

#include "spore/error.h"
#include "spore/ops.h"
#include "spore/parallel/pipeline_checkpoint.h"
#include "spore/parallel/sharding.h"

namespace spore::parallel {
namespace {

constexpr const char* kLayout = "layout.";  // + tensor name: how it is cut (semi_auto_parallel)
constexpr const char* kShard = "shard.";    // + optimizer name: its ZeRO-1 state range here
constexpr const char* kParam = "param.";    // + optimizer name: the tensor it stands for

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

int64_t to_int(const std::string& v, const std::string& what) {
  int64_t x = -1;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  SPORE_CHECK(ec == std::errc() && p == v.data() + v.size() && x >= 0, "[checkpoint merge] ", what,
              " is '", v, "', expected a non-negative integer");
  return x;
}

int64_t meta_int(const io::Checkpoint& ck, const std::string& key, const std::string& which) {
  auto it = ck.metadata.find(key);
  SPORE_CHECK(it != ck.metadata.end(), "[checkpoint merge] ", which, " has no '", key,
              "' metadata: it is not one rank's checkpoint of a parallel run (ModelCheckpoint "
              "writes those under checkpoints/rank_<r>/)");
  return to_int(it->second, which + "'s metadata '" + key + "'");
}

// Metadata that belongs to one rank, not to the merged network.
bool per_rank_key(const std::string& k) {
  return k == "rank" || k == "group_size" || k == "optimizer_shard" || starts_with(k, kLayout) ||
         starts_with(k, kShard) || starts_with(k, kParam);
}

struct RankFile {
  int64_t rank = 0;  // in the sharding group (a layout's rank)
  const io::Checkpoint* ck = nullptr;
  std::string which;  // "rank <world rank>" for messages
};

// The whole tensor from its pieces: piece_of[g] is group rank g's piece (or null where that rank
// has none), placed by the layout; ranks holding the same piece hold the same values, and the
// first is taken. Every piece must be there.
Tensor assemble(const std::string& name, const Layout& l,
                const std::vector<const Tensor*>& piece_of, const std::vector<RankFile>& ranks) {
  const Tensor* first = nullptr;
  for (const Tensor* t : piece_of)
    if (t && !first) first = t;
  SPORE_ASSERT(first != nullptr);
  const Shape ps = first->shape();
  SPORE_CHECK(l.dims.size() == ps.size(), "[checkpoint merge] '", name, "' is cut as ", l.str(),
              " (", l.dims.size(), " dimensions) but its piece has shape ", shape_str(ps));
  Shape whole = ps;
  int64_t pieces = 1;
  for (size_t d = 0; d < ps.size(); ++d) whole[d] *= l.dims[d].parts, pieces *= l.dims[d].parts;
  Tensor out = Tensor::empty(whole, first->dtype());
  std::set<std::vector<int64_t>> placed;
  for (size_t g = 0; g < piece_of.size(); ++g) {
    if (!piece_of[g]) continue;
    SPORE_CHECK(piece_of[g]->shape() == ps && piece_of[g]->dtype() == first->dtype(),
                "[checkpoint merge] '", name, "' has shape ", shape_str(piece_of[g]->shape()),
                " on ", ranks[g].which, " and ", shape_str(ps),
                " on another rank; the files are not one run's");
    std::vector<int64_t> idx(ps.size());
    for (size_t d = 0; d < ps.size(); ++d) idx[d] = l.piece(d, int(g));
    if (!placed.insert(idx).second) continue;
    Tensor dst = out;
    for (size_t d = 0; d < ps.size(); ++d)
      dst = dst.slice(int64_t(d), idx[d] * ps[d], (idx[d] + 1) * ps[d]);
    assign(dst, *piece_of[g]);
  }
  SPORE_CHECK(int64_t(placed.size()) == pieces, "[checkpoint merge] '", name, "' is cut as ",
              l.str(), " into ", pieces, " pieces but the files hold ", placed.size(),
              " of them; give every rank's file");
  return out;
}

// ZeRO-1 state `name` of the optimizer's parameter `opt_name` (the tensor `param`): each rank
// holding it keeps elements [begin, end) of its (piece of the) flattened parameter. Joined per
// piece, then the pieces assembled by the layout.
Tensor join_state(const std::string& name, const std::string& opt_name, const std::string& param,
                  const Layout& l, const std::vector<RankFile>& ranks) {
  std::map<std::vector<int64_t>, std::pair<Tensor, std::vector<std::pair<int64_t, int64_t>>>> flat;
  std::vector<Tensor> joined(ranks.size());
  std::vector<const Tensor*> piece_of(ranks.size(), nullptr);
  for (size_t g = 0; g < ranks.size(); ++g) {
    const io::Checkpoint& ck = *ranks[g].ck;
    const Tensor* st = ck.find(name);
    if (!st) continue;
    const Tensor* p = ck.find(param);
    SPORE_CHECK(p != nullptr, "[checkpoint merge] ", ranks[g].which, " holds the optimizer state '",
                name, "' but not the parameter '", param, "' that gives it its shape");
    auto it = ck.metadata.find(kShard + opt_name);
    SPORE_CHECK(it != ck.metadata.end(), "[checkpoint merge] ", ranks[g].which,
                " holds part of the optimizer state '", name, "' with no '", kShard, opt_name,
                "' range in its metadata; the file is damaged or not one rank's of a ZeRO-1 run");
    const size_t colon = it->second.find(':');
    SPORE_CHECK(colon != std::string::npos, "[checkpoint merge] ", ranks[g].which, ": '", kShard,
                opt_name, "' is '", it->second, "', expected begin:end");
    const int64_t a = to_int(it->second.substr(0, colon), kShard + opt_name),
                  b = to_int(it->second.substr(colon + 1), kShard + opt_name);
    SPORE_CHECK(a <= b && b <= p->numel() && st->numel() == b - a, "[checkpoint merge] ",
                ranks[g].which, ": the state '", name, "' has ", st->numel(),
                " values for the range ", it->second, " of '", param, "' (", p->numel(),
                " values); the file is damaged");
    std::vector<int64_t> key(p->shape().size());
    for (size_t d = 0; d < key.size() && d < l.dims.size(); ++d) key[d] = l.piece(d, int(g));
    auto& [buf, got] = flat[key];
    if (!buf.defined()) buf = Tensor::empty({p->numel()}, st->dtype());
    if (std::find(got.begin(), got.end(), std::make_pair(a, b)) == got.end()) {
      assign(buf.slice(0, a, b), st->reshape({-1}));
      got.emplace_back(a, b);
    }
    joined[g] = buf.view(p->shape());
  }
  for (auto& [key, entry] : flat) {  // the ranges of each piece must tile it
    auto& got = entry.second;
    std::sort(got.begin(), got.end());
    int64_t at = 0;
    for (const auto& [a, b] : got) {
      SPORE_CHECK(a == at, "[checkpoint merge] the optimizer state '", name, "' has ",
                  a > at ? "no rank holding" : "two ranks holding", " its elements from ",
                  std::min(a, at), " on; give every rank's file of one step");
      at = b;
    }
    SPORE_CHECK(at == entry.first.numel(), "[checkpoint merge] the optimizer state '", name,
                "' is held up to element ", at, " of ", entry.first.numel(),
                "; give every rank's file of one step");
  }
  for (size_t g = 0; g < ranks.size(); ++g)
    if (joined[g].defined()) piece_of[g] = &joined[g];
  return assemble(name, l, piece_of, ranks);
}

// One sharding group's files (a stage's ranks, or every rank), in group-rank order.
io::Checkpoint merge_group(const std::vector<RankFile>& ranks) {
  const io::Checkpoint& lead = *ranks[0].ck;
  std::map<std::string, Layout> layouts;
  for (const auto& [k, v] : lead.metadata)
    if (starts_with(k, kLayout)) layouts.emplace(k.substr(7), Layout::parse(v));
  std::set<std::string> zero_params;             // optimizer names with a ZeRO-1 range on some rank
  std::map<std::string, std::string> tensor_of;  // optimizer name -> the tensor it stands for
  for (const RankFile& r : ranks)
    for (const auto& [k, v] : r.ck->metadata) {
      if (starts_with(k, kShard)) zero_params.insert(k.substr(6));
      if (starts_with(k, kParam)) {
        auto [it, fresh] = tensor_of.emplace(k.substr(6), v);
        SPORE_CHECK(fresh || it->second == v, "[checkpoint merge] ", r.which,
                    " says the optimizer's '", k.substr(6), "' is '", v, "' and another rank '",
                    it->second, "'; the files are not one run's");
      }
      if (!starts_with(k, kLayout)) continue;
      auto it = lead.metadata.find(k);
      SPORE_CHECK(it != lead.metadata.end() && it->second == v, "[checkpoint merge] ", r.which,
                  " cuts '", k.substr(7), "' as ", v, " and ", ranks[0].which, " as ",
                  it == lead.metadata.end() ? "(whole)" : it->second,
                  "; the files are not one run's");
    }
  std::vector<std::string> names;  // in the order the lowest ranks saved them
  std::set<std::string> seen;
  for (const RankFile& r : ranks)
    for (const auto& [name, t] : r.ck->tensors)
      if (seen.insert(name).second) names.push_back(name);
  // A cut or ZeRO-1 run's optimizer state is placed by its parameter, and files written before
  // "param.<name>" was recorded cannot say which tensor "moments.param3" follows.
  SPORE_CHECK((layouts.empty() && zero_params.empty()) || !tensor_of.empty() ||
                  !lead.metadata.count("optimizer"),
              "[checkpoint merge] ", ranks[0].which,
              " holds cut tensors or part of the optimizer "
              "state but no param.<name> metadata saying which tensor each optimizer parameter "
              "is (it was written before Spore recorded it). Resume the run with --resume so "
              "that it saves again, or use its final whole checkpoint");
  // The tensor an optimizer name stands for: "param.<name>", or a tensor of that name.
  const auto tensor_named = [&](const std::string& opt_name) -> std::string {
    auto it = tensor_of.find(opt_name);
    if (it != tensor_of.end()) return it->second;
    return seen.count(opt_name) ? opt_name : "";
  };

  io::Checkpoint out;
  for (const auto& [k, v] : lead.metadata)
    if (!per_rank_key(k)) out.metadata[k] = v;
  for (const std::string& name : names) {
    std::vector<const Tensor*> piece_of(ranks.size(), nullptr);
    for (size_t g = 0; g < ranks.size(); ++g) piece_of[g] = ranks[g].ck->find(name);
    // Optimizer state is "<slot>.<optimizer name>" (moments.param3).
    const size_t dot = name.find('.');
    const std::string opt_name = dot == std::string::npos ? "" : name.substr(dot + 1);
    const std::string param = layouts.count(name) || opt_name.empty() ? "" : tensor_named(opt_name);
    if (layouts.count(name)) {
      out.tensors.emplace_back(name, assemble(name, layouts.at(name), piece_of, ranks));
    } else if (!param.empty() && zero_params.count(opt_name)) {
      const Tensor* p = nullptr;
      for (const RankFile& r : ranks)
        if (!p) p = r.ck->find(param);
      SPORE_CHECK(p != nullptr, "[checkpoint merge] no file holds the parameter '", param,
                  "' of the optimizer state '", name, "'");
      const Layout l = layouts.count(param) ? layouts.at(param) : Layout::whole(p->dim());
      out.tensors.emplace_back(name, join_state(name, opt_name, param, l, ranks));
    } else if (!param.empty() && layouts.count(param)) {  // a cut parameter's state, cut like it
      out.tensors.emplace_back(name, assemble(name, layouts.at(param), piece_of, ranks));
    } else {  // whole on every rank holding it
      const Tensor* t = nullptr;
      for (const Tensor* x : piece_of)
        if (!t) t = x;
      out.tensors.emplace_back(name, *t);
    }
  }
  return out;
}

}  // namespace

io::Checkpoint merge_rank_checkpoints(const std::vector<io::Checkpoint>& cks) {
  SPORE_CHECK(!cks.empty(), "[checkpoint merge] no checkpoints given");
  const int64_t G = meta_int(cks[0], "group_size", "checkpoint 0");
  std::vector<const io::Checkpoint*> by_rank(size_t(G), nullptr);
  for (size_t i = 0; i < cks.size(); ++i) {
    const std::string which = "checkpoint " + std::to_string(i);
    const int64_t r = meta_int(cks[i], "rank", which);
    SPORE_CHECK(meta_int(cks[i], "group_size", which) == G, "[checkpoint merge] ", which,
                " is of a run on ", cks[i].metadata.at("group_size"), " ranks, checkpoint 0 of ", G,
                "; give the files of one run");
    SPORE_CHECK(r < G, "[checkpoint merge] ", which, " is rank ", r, " of ", G);
    SPORE_CHECK(by_rank[size_t(r)] == nullptr, "[checkpoint merge] rank ", r,
                " is given twice; give one file per rank");
    by_rank[size_t(r)] = &cks[i];
    for (const char* k : {"global_step", "epoch", "step"}) {
      auto a = cks[i].metadata.find(k), b = cks[0].metadata.find(k);
      const std::string va = a == cks[i].metadata.end() ? "(none)" : a->second,
                        vb = b == cks[0].metadata.end() ? "(none)" : b->second;
      SPORE_CHECK(va == vb, "[checkpoint merge] ", which, " (rank ", r, ") was saved at ", k, " ",
                  va, ", checkpoint 0 at ", vb, "; give every rank's file of the same step");
    }
  }
  std::string missing;
  for (int64_t r = 0; r < G; ++r)
    if (!by_rank[size_t(r)]) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
  SPORE_CHECK(missing.empty(), "[checkpoint merge] the run had ", G,
              " ranks but there is no file of rank ", missing,
              "; give every rank's file (rank_<r>/ for r in 0..", G - 1, ")");

  const bool piped = cks[0].metadata.count("pipeline_stages") > 0;
  const int64_t P = piped ? meta_int(cks[0], "pipeline_stages", "checkpoint 0") : 1;
  SPORE_CHECK(P >= 1, "[checkpoint merge] pipeline_stages is 0");
  // A stage's ranks in world-rank order are its sharding group's ranks 0, 1, ...
  std::vector<std::vector<RankFile>> stage(static_cast<size_t>(P));
  for (int64_t r = 0; r < G; ++r) {
    const io::Checkpoint& ck = *by_rank[size_t(r)];
    const std::string which = "rank " + std::to_string(r);
    const int64_t s = piped ? meta_int(ck, "pipeline_stage", which) : 0;
    SPORE_CHECK(s < P, "[checkpoint merge] ", which, " is stage ", s, " of ", P);
    stage[size_t(s)].push_back({int64_t(stage[size_t(s)].size()), &ck, which});
  }
  if (!piped) return merge_group(stage[0]);
  std::vector<io::Checkpoint> stages;
  for (int64_t s = 0; s < P; ++s) {
    SPORE_CHECK(!stage[size_t(s)].empty(), "[checkpoint merge] no rank holds stage ", s, " of ", P);
    stages.push_back(merge_group(stage[size_t(s)]));
    stages.back().metadata["pipeline_stage"] = std::to_string(s);
  }
  return merge_stage_checkpoints(stages);
}

}  // namespace spore::parallel
