// Matmul epilogue fusion for the accelerators, whose matmul library adds a bias and applies an
// activation as the product is written (cuBLASLt's BIAS / RELU_BIAS / GELU_BIAS epilogues):
//
//   matmul(a (..., M, K), b (K, N)) + bias (N) [-> relu | gelu(approximate)]  ->  matmul_epilogue
//
// which is how nn::Dense computes (plus its activation). One kernel instead of two or three, and
// the product never goes through memory unbiased. Every intermediate must have exactly one reader,
// the next op of the chain; relu_grad is first pointed at relu's output (as the CPU's fusion
// does), so a training graph's Dense + ReLU fuses too. float32 / float16 / bfloat16 only (the
// epilogues cuBLASLt has). The CPU has its own, through oneDNN's post-ops
// (backends/cpu/passes/dnnl_fusion.cpp); a backend registers this one for its device
// (backends/cuda/passes/, and the test device's, which runs the op's CPU kernel).
#include <string>
#include <unordered_set>

#include "graph/passes.h"

namespace spore::graph {
namespace {
using ops::OpId;

// The activation the epilogue takes for node u, or "" when it takes none.
std::string activation_of(const Node& u) {
  if (u.op == OpId::Relu) return "relu";
  if (u.op == OpId::Gelu && u.attrs.get_bool("approximate", false)) return "gelu_tanh";
  return "";
}

}  // namespace

size_t fuse_matmul_epilogue(Graph& g, DeviceType device) {
  point_relu_grads_at_outputs(g);  // frees relu's input for the fusion
  size_t fused = 0;
  std::vector<Node*> anchors;
  for (const auto& n : g.nodes)
    if (n->op == OpId::Matmul && n->device.type == device) anchors.push_back(n.get());
  for (Node* n : anchors) {
    const Uses readers(g);  // rebuilt per chain: earlier fusions changed the readers
    Value* cur = n->outputs[0];
    const DType dt = cur->dtype;
    if ((dt != kFloat32 && dt != kFloat16 && dt != kBFloat16) || n->inputs[0]->shape.size() < 2 ||
        n->inputs[0]->shape.back() == 0 || n->inputs[1]->shape.size() != 2)
      continue;
    const int64_t N = cur->shape.back();
    // + bias (N)
    Node* add = readers.single(cur);
    if (!add || add->op != OpId::Add || !same_meta(add->outputs[0], cur)) continue;
    Value* bias = add->inputs[0] == cur ? add->inputs[1] : add->inputs[0];
    if (bias == cur || bias->dtype != dt || bias->shape != Shape{N}) continue;
    std::vector<Node*> chain{n, add};
    cur = add->outputs[0];
    // -> activation
    std::string act;
    if (Node* u = readers.single(cur); u && u->outputs.size() == 1 &&
                                       same_meta(u->outputs[0], cur) &&
                                       !(act = activation_of(*u)).empty()) {
      cur = u->outputs[0];
      chain.push_back(u);
    }
    if (effect_between(g, n, chain.back())) continue;  // it may mutate what the chain reads
    const size_t last = g.index_of(chain.back());
    ops::Attrs attrs;
    attrs.set("act", act);
    std::vector<Value*> ins{n->inputs[0], n->inputs[1], bias};
    ops::Metas in_metas;
    for (const Value* v : ins) in_metas.push_back({v->shape, v->dtype});
    const ops::Metas out = ops::op_def(OpId::MatmulEpilogue).rules.infer(in_metas, attrs);
    Node* f = g.insert_node(last, OpId::MatmulEpilogue, std::move(ins), std::move(attrs), out);
    f->precision = n->precision;
    g.replace_all_uses(cur, f->outputs[0]);
    const std::unordered_set<const Node*> dead(chain.begin(), chain.end());
    std::erase_if(g.nodes, [&](const auto& up) { return dead.count(up.get()) > 0; });
    ++fused;
  }
  g.remove_unused_inputs();
  return fused;
}

}  // namespace spore::graph
