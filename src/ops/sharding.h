// The dispatcher's sharding hook: the one thing the ops layer knows about operator-level
// parallelism (MindSpore's semi_auto_parallel).
//
// A layer above (parallel, src/parallel/sharding.cpp) implements ShardingHook and makes it current
// on the thread (ShardingHookScope) while a sharded network's forward pass runs. ops::call offers
// every op to the hook first; the hook either declines (no input is sharded) or runs the op itself
// on the ranks' local pieces, with the collectives the layouts need, as ordinary ops. The hook
// runs with itself suspended, so those ops dispatch normally (autograd records them, Graph mode
// traces them); the backward pass needs no hook because each collective op carries its own
// gradient rule.
#pragma once
#include <optional>

#include "ops/op.h"

namespace spore::ops {

class ShardingHook {
 public:
  virtual ~ShardingHook() = default;
  // The outputs, or nullopt: run the op as written.
  virtual std::optional<Tensors> call(OpId op, const Tensors& inputs, const Attrs& attrs) = 0;
};

ShardingHook* current_sharding();
// Makes h current on this thread until destroyed (nests; restores the previous one).
class ShardingHookScope {
 public:
  explicit ShardingHookScope(ShardingHook* h);
  ~ShardingHookScope();
  ShardingHookScope(const ShardingHookScope&) = delete;
  ShardingHookScope& operator=(const ShardingHookScope&) = delete;

 private:
  ShardingHook* prev_;
};

}  // namespace spore::ops
