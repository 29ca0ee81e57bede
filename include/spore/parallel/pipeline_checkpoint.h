// Per-stage checkpoints of a pipeline (ModelCheckpoint under pipeline_stages writes one per rank,
// under rank_<r>/, with metadata pipeline_stage and pipeline_stages) merged into one checkpoint of
// the whole network, and one such checkpoint split back into its stages. `spore convert --merge /
// --split` runs these on files.
//   merged: every stage's tensors, in stage order, and the stages' common metadata (epoch, step,
//           lr, ...), plus pipeline_stages and "pipeline_stage.<tensor>" = its stage for each
//           tensor (what split needs).
//   split:  per stage, its tensors in their order and the metadata with pipeline_stage = s,
//           rank = s and group_size = pipeline_stages.
#pragma once
#include <vector>

#include "spore/io/checkpoint.h"

namespace spore::parallel {

// `stages`: one checkpoint per stage, in any order (each names its stage in its metadata); with
// dp x pipeline, give one replica's. Errors name the missing stage, a repeated one, a tensor held
// by two stages, or stages written at different steps.
io::Checkpoint merge_stage_checkpoints(const std::vector<io::Checkpoint>& stages);
// A checkpoint from merge_stage_checkpoints back into its stages (index = stage).
std::vector<io::Checkpoint> split_stage_checkpoint(const io::Checkpoint& merged);

}  // namespace spore::parallel
