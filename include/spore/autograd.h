// PyNative automatic differentiation. A tape records an op only while gradients are wanted (grad
// mode on and some input requires grad). value_and_grad / grad follow MindSpore: they return the
// function's value and the gradients with respect to the given tensors (the weights).
#pragma once
#include <functional>
#include <utility>
#include <vector>

#include "spore/grad_mode.h"
#include "spore/tensor.h"

namespace spore {

// The same values with no history: gradients do not flow through it.
Tensor stop_gradient(const Tensor& x);

namespace autograd {

struct GradOptions {
  Tensor sens;                // output gradient (default: ones like the output)
  bool create_graph = false;  // record the backward pass too (higher-order gradients)
  // Called during the backward pass with (index into inputs, gradient) as soon as that input's
  // gradient is final, so work on it (data parallel's all-reduce) overlaps the rest of backward.
  // Every input is reported exactly once (unreached ones with their zeros, at the end).
  std::function<void(size_t, const Tensor&)> on_grad_ready;
};
// d(output)/d(inputs). An input the output does not depend on gets zeros.
std::vector<Tensor> grad(const Tensor& output, const std::vector<Tensor>& inputs,
                         const GradOptions& opts = {});
// Accumulates d(root)/d(leaf) into every leaf's .grad() (PyTorch's backward()).
void backward(const Tensor& root, const Tensor& gradient = {});

}  // namespace autograd

// MindSpore's value_and_grad(fn, grad_position=None, weights=params): returns a callable that runs
// fn(args...) and returns {value, gradients of value w.r.t. params}. fn must return a Tensor
// (the first of a pair/tuple is taken as the value when has_aux-style outputs are needed).
template <typename F>
auto value_and_grad(F fn, std::vector<Tensor> params, Tensor sens = {}) {
  return [fn = std::move(fn), params = std::move(params), sens](auto&&... args) {
    std::vector<bool> prev;
    prev.reserve(params.size());
    for (const Tensor& p : params) {
      prev.push_back(p.requires_grad());
      const_cast<Tensor&>(p).set_requires_grad(true);
    }
    struct Restore {
      const std::vector<Tensor>& ps;
      const std::vector<bool>& pv;
      ~Restore() {
        for (size_t i = 0; i < ps.size(); ++i) const_cast<Tensor&>(ps[i]).set_requires_grad(pv[i]);
      }
    } restore{params, prev};
    EnableGradGuard enable;
    Tensor value = fn(std::forward<decltype(args)>(args)...);
    std::vector<Tensor> grads = autograd::grad(value, params, {.sens = sens});
    return std::pair<Tensor, std::vector<Tensor>>(value.detach(), std::move(grads));
  };
}
// Gradients only.
template <typename F>
auto grad(F fn, std::vector<Tensor> params) {
  auto vg = value_and_grad(std::move(fn), std::move(params));
  return [vg](auto&&... args) { return vg(std::forward<decltype(args)>(args)...).second; };
}

}  // namespace spore
