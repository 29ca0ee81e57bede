// Grad mode: whether ops run now are recorded for autograd (a per-thread flag). Part of the core
// layer so kernels and other low layers can switch recording off without depending on autograd.
#pragma once

namespace spore {

bool is_grad_enabled();
// RAII: no recording inside the scope (MindSpore's _no_grad, torch.no_grad).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};
// Forces grad mode on inside the scope (used for higher-order gradients).
class EnableGradGuard {
 public:
  EnableGradGuard();
  ~EnableGradGuard();
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace spore
