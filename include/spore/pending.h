// A deferred action, run once by whichever reader first needs what it changes. The loss-scaled
// step whose outcome the device decides (train/wrappers.cpp) leaves one in the optimizer and in
// the loss-scale manager: reading their step count or scale books the outcome first.
#pragma once
#include <functional>
#include <utility>

namespace spore {

class PendingAction {
 public:
  void set(std::function<void()> f) const { f_ = std::move(f); }  // null: nothing pending
  void run() const {  // runs it (once), if any; it may set a new one
    if (!f_) return;
    const std::function<void()> f = std::move(f_);
    f_ = nullptr;
    f();
  }

 private:
  mutable std::function<void()> f_;
};

}  // namespace spore
