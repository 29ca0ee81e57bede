// Merging per-stage pipeline checkpoints into one and splitting it back
// (spore/parallel/pipeline_checkpoint.h).
#include "spore/parallel/pipeline_checkpoint.h"

#include <charconv>
#include <set>

#include "spore/error.h"

namespace spore::parallel {
namespace {

constexpr const char* kStageOf = "pipeline_stage.";  // + tensor name: the stage that holds it

int64_t int_meta(const io::Metadata& m, const std::string& key, const std::string& which) {
  auto it = m.find(key);
  SPORE_CHECK(it != m.end(), "[pipeline checkpoint] ", which, " has no '", key,
              "' metadata: it is not a per-stage checkpoint of a pipeline (ModelCheckpoint under "
              "pipeline_stages writes them under checkpoints/rank_<r>/)");
  int64_t v = -1;
  const auto [p, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
  SPORE_CHECK(ec == std::errc() && p == it->second.data() + it->second.size() && v >= 0,
              "[pipeline checkpoint] ", which, ": metadata '", key, "' is '", it->second,
              "', expected a non-negative integer");
  return v;
}

// Metadata that differs per stage by design, not copied into the merged file.
bool per_stage_key(const std::string& k) {
  return k == "pipeline_stage" || k == "rank" || k == "group_size" || k.rfind(kStageOf, 0) == 0;
}

}  // namespace

io::Checkpoint merge_stage_checkpoints(const std::vector<io::Checkpoint>& stages) {
  SPORE_CHECK(!stages.empty(), "[pipeline checkpoint] merge: no checkpoints given");
  const int64_t P = int_meta(stages[0].metadata, "pipeline_stages", "checkpoint 0");
  SPORE_CHECK(int64_t(stages.size()) == P, "[pipeline checkpoint] merge: the checkpoints are of a ",
              P, "-stage pipeline but ", stages.size(),
              " were given; give one per stage (one replica's rank_<r>/ files)");
  std::vector<const io::Checkpoint*> by_stage(static_cast<size_t>(P), nullptr);
  for (size_t i = 0; i < stages.size(); ++i) {
    const std::string which = "checkpoint " + std::to_string(i);
    const int64_t s = int_meta(stages[i].metadata, "pipeline_stage", which);
    SPORE_CHECK(int_meta(stages[i].metadata, "pipeline_stages", which) == P,
                "[pipeline checkpoint] merge: ", which, " is of a pipeline of ",
                stages[i].metadata.at("pipeline_stages"), " stages, checkpoint 0 of ", P,
                "; give the files of one run");
    SPORE_CHECK(s < P, "[pipeline checkpoint] merge: ", which, " is stage ", s, " of ", P);
    // pp x mp: the stage's tensors are this rank's pieces (layout.<name> in the metadata).
    for (const auto& [k, v] : stages[i].metadata)
      SPORE_CHECK(k.rfind("layout.", 0) != 0, "[pipeline checkpoint] merge: ", which, " holds ",
                  k.substr(7), " cut as ", v,
                  " (semi_auto_parallel inside the stages): a merged file needs whole tensors. "
                  "Give every rank's file to merge_rank_checkpoints (spore convert --merge does)");
    SPORE_CHECK(
        stages[i].metadata.count("optimizer_shard") == 0, "[pipeline checkpoint] merge: ", which,
        " holds one replica's shard of its stage's optimizer state (optimizer_shard ",
        stages[i].metadata.count("optimizer_shard") ? stages[i].metadata.at("optimizer_shard") : "",
        ", written with enable_parallel_optimizer); a merged file would miss the other "
        "replicas' parts. Give every rank's file to merge_rank_checkpoints (spore convert "
        "--merge does)");
    SPORE_CHECK(by_stage[size_t(s)] == nullptr, "[pipeline checkpoint] merge: stage ", s,
                " is given twice; give one replica's files (one per stage)");
    by_stage[size_t(s)] = &stages[i];
  }
  io::Checkpoint out;
  out.format = io::CheckpointFormat::SafeTensors;
  for (const auto& [k, v] : by_stage[0]->metadata)
    if (!per_stage_key(k)) out.metadata[k] = v;
  std::set<std::string> names;
  for (int64_t s = 0; s < P; ++s) {
    const io::Checkpoint& ck = *by_stage[size_t(s)];
    for (const char* k : {"global_step", "epoch", "step"}) {
      auto a = ck.metadata.find(k), b = by_stage[0]->metadata.find(k);
      const bool same = (a == ck.metadata.end()) == (b == by_stage[0]->metadata.end()) &&
                        (a == ck.metadata.end() || a->second == b->second);
      SPORE_CHECK(same, "[pipeline checkpoint] merge: stage ", s, " was saved at ", k, " ",
                  a == ck.metadata.end() ? "(none)" : a->second, ", stage 0 at ",
                  b == by_stage[0]->metadata.end() ? "(none)" : b->second,
                  "; give files written at the same step");
    }
    for (const auto& [name, t] : ck.tensors) {
      SPORE_CHECK(names.insert(name).second, "[pipeline checkpoint] merge: the tensor '", name,
                  "' is in stage ", s, " and in an earlier stage; the files are not one network's");
      out.tensors.emplace_back(name, t);
      out.metadata[kStageOf + name] = std::to_string(s);
    }
  }
  out.metadata["pipeline_stages"] = std::to_string(P);
  return out;
}

std::vector<io::Checkpoint> split_stage_checkpoint(const io::Checkpoint& merged) {
  const int64_t P = int_meta(merged.metadata, "pipeline_stages", "the merged checkpoint");
  std::vector<io::Checkpoint> out(static_cast<size_t>(P));
  for (int64_t s = 0; s < P; ++s) {
    for (const auto& [k, v] : merged.metadata)
      if (!per_stage_key(k)) out[size_t(s)].metadata[k] = v;
    out[size_t(s)].metadata["pipeline_stage"] = std::to_string(s);
    out[size_t(s)].metadata["rank"] = std::to_string(s);
    out[size_t(s)].metadata["group_size"] = std::to_string(P);
  }
  for (const auto& [name, t] : merged.tensors) {
    const int64_t s = int_meta(merged.metadata, kStageOf + name, "the merged checkpoint");
    SPORE_CHECK(s < P, "[pipeline checkpoint] split: the tensor '", name, "' is on stage ", s,
                " of a ", P, "-stage pipeline");
    out[size_t(s)].tensors.emplace_back(name, t);
  }
  for (int64_t s = 0; s < P; ++s)
    SPORE_CHECK(!out[size_t(s)].tensors.empty(), "[pipeline checkpoint] split: stage ", s,
                " has no tensors in the merged checkpoint");
  return out;
}

}  // namespace spore::parallel
