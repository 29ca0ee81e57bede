// Every rank's checkpoint of a parallel run (ModelCheckpoint writes one per rank, under
// rank_<r>/, when the ranks hold different things) merged into one checkpoint of the whole network
// and its whole optimizer state, as one process would have saved it. `spore convert --merge` runs
// this on a run's checkpoints folder.
//
// What each rank's file may hold, and how it is put back together:
// - pipeline stages ("pipeline_stage" / "pipeline_stages"): each stage's tensors; the stages are
//   joined by merge_stage_checkpoints (pipeline_checkpoint.h), so the result splits back per stage;
// - semi_auto_parallel pieces ("layout.<name>" = Layout::str()): the pieces of a cut tensor, and
//   the optimizer state of a cut parameter cut the same way, placed by the layout; the layout's
//   rank is the rank within the sharding group (the world, or the stage's ranks in world-rank
//   order);
// - ZeRO-1 ("shard.<name>" = "begin:end"): the state of elements [begin, end) of the flattened
//   parameter (or of this rank's piece of it), joined over the ranks holding the same piece;
// - anything else is whole on every rank holding it, and taken from the lowest such rank.
#pragma once
#include <vector>

#include "spore/io/checkpoint.h"

namespace spore::parallel {

// `ranks`: every rank's checkpoint of one step, in any order (each names its "rank" and
// "group_size"). Errors name a missing or repeated rank, files of different steps or runs, and a
// tensor whose pieces or state ranges do not cover it.
io::Checkpoint merge_rank_checkpoints(const std::vector<io::Checkpoint>& ranks);

}  // namespace spore::parallel
