// Operator-level sharding (spore/parallel/sharding.h): layouts, the collective ops that move
// pieces between layouts (each with its gradient rule), and the engine the dispatcher consults
// (ops/sharding.h) while a ShardedCell runs.
//
// Conventions that make the gradients right without a backward hook:
// - a whole (replicated) tensor is identical on every rank, and so is its gradient;
// - an op whose work is cut over some ranks (its output or its contraction is cut there) sees an
//   input kept whole over those ranks through a mirror: identity forward, all-reduce (sum) of the
//   gradient backward, since each rank then holds only its share of that gradient;
// - a partial sum (a matmul over a cut contraction, a reduction over a cut dim) is resolved at
//   once by an all-reduce (gradient: identity) or a reduce-scatter (gradient: all-gather).
#include "spore/parallel/sharding.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string_view>
#include <unordered_map>

#include "ops/op.h"
#include "ops/sharding.h"
#include "spore/custom_op.h"
#include "spore/grad_mode.h"
#include "spore/ops.h"
#include "spore/parallel/parallel.h"

namespace spore::parallel {

// ---- layouts ------------------------------------------------------------------------------------
bool Layout::is_whole() const {
  return std::none_of(dims.begin(), dims.end(), [](const DimSplit& s) { return s.cut(); });
}
bool Layout::operator==(const Layout& o) const {
  if (dims.size() != o.dims.size()) return false;
  for (size_t i = 0; i < dims.size(); ++i)
    if (!(dims[i] == o.dims[i])) return false;
  return true;
}
std::string Layout::str() const {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += dims[i].cut() ? std::to_string(dims[i].parts) + "@" + std::to_string(dims[i].stride) : "1";
  }
  return s + "]";
}

Layout Layout::parse(const std::string& s) {
  const char* form =
      "; expected Layout::str()'s form, e.g. \"[4@2, 1, 2@1]\" (pieces@rank stride per "
      "dimension, 1 for a whole one)";
  SPORE_CHECK(s.size() >= 2 && s.front() == '[' && s.back() == ']', "[semi_auto_parallel] layout '",
              s, "' is not in brackets", form);
  // One positive integer from text, or an error naming the layout and the item.
  const auto number = [&](std::string_view t, std::string_view item) {
    int64_t v = 0;
    const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    SPORE_CHECK(ec == std::errc() && p == t.data() + t.size() && v >= 1,
                "[semi_auto_parallel] layout '", s, "': '", item,
                "' is not a positive pieces or pieces@stride", form);
    return v;
  };
  Layout l;
  std::string_view body(s.data() + 1, s.size() - 2);
  while (!body.empty()) {
    const size_t comma = body.find(',');
    std::string_view item = body.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    const size_t at = item.find('@');
    DimSplit d;
    d.parts = number(item.substr(0, at), item);
    if (at != std::string_view::npos) d.stride = number(item.substr(at + 1), item);
    l.dims.push_back(d);
    if (comma == std::string_view::npos) break;
    body.remove_prefix(comma + 1);
  }
  return l;
}

GroupPtr sharding_group() {
  const int64_t P = get_auto_parallel_context().pipeline_stages;
  if (P <= 1) return world();
  static std::mutex mu;
  static std::map<int64_t, GroupPtr> cache;  // by the number of stages
  std::lock_guard lk(mu);
  auto it = cache.find(P);
  if (it != cache.end()) return it->second;
  const GroupPtr w = world();
  SPORE_CHECK(w->size() % P == 0, "[semi_auto_parallel] pipeline_stages = ", P,
              " does not divide the ", w->size(), " ranks; launch a multiple of ", P, " ranks");
  // Model's placement: world rank r runs stage r % P of replica r / P.
  GroupPtr g = w->split(int(w->rank() % P), int(w->rank() / P));  // collective over the world
  cache[P] = g;
  return g;
}

namespace {
// The strategies cut over the sharding group (the world, or this rank's pipeline stage): "world"
// below means that group.
int64_t world_size() { return sharding_group()->size(); }
int world_rank() { return sharding_group()->rank(); }

std::string splits_str(const std::vector<DimSplit>& s) {
  std::string out;
  for (const DimSplit& d : s)
    out += (out.empty() ? "" : ",") + std::to_string(d.parts) + "@" + std::to_string(d.stride);
  return out;
}

// Two cuts may be used together when they occupy different digits of the rank number.
bool disjoint(const DimSplit& a, const DimSplit& b) {
  if (!a.cut() || !b.cut()) return true;
  return b.stride % (a.stride * a.parts) == 0 || a.stride % (b.stride * b.parts) == 0;
}
bool valid_set(const std::vector<DimSplit>& cuts) {
  const int64_t n = world_size();
  for (size_t i = 0; i < cuts.size(); ++i) {
    if (!cuts[i].cut()) continue;
    if (n % (cuts[i].stride * cuts[i].parts) != 0) return false;
    for (size_t j = i + 1; j < cuts.size(); ++j)
      if (cuts[j].cut() && (cuts[i] == cuts[j] || !disjoint(cuts[i], cuts[j]))) return false;
  }
  return true;
}
void add_cut(std::vector<DimSplit>& set, const DimSplit& s) {
  if (!s.cut()) return;
  for (const DimSplit& x : set)
    if (x == s) return;
  set.push_back(s);
}
std::vector<DimSplit> cuts_of(const Layout& l) {
  std::vector<DimSplit> out;
  for (const DimSplit& s : l.dims) add_cut(out, s);
  return out;
}
// The cuts in `used` that `have` lacks: the ranks an input is mirrored over.
std::vector<DimSplit> missing(const std::vector<DimSplit>& used, const Layout& have) {
  std::vector<DimSplit> out;
  const std::vector<DimSplit> h = cuts_of(have);
  for (const DimSplit& u : used)
    if (std::none_of(h.begin(), h.end(), [&](const DimSplit& x) { return x == u; }))
      out.push_back(u);
  return out;
}

Shape whole_shape(const Shape& piece, const Layout& l) {
  Shape s = piece;
  for (size_t d = 0; d < s.size() && d < l.dims.size(); ++d) s[d] *= l.dims[d].parts;
  return s;
}

// ---- what the engine knows: layouts by tensor ---------------------------------------------------
struct Entry {
  std::weak_ptr<TensorImpl> impl;
  Layout layout;
};
std::mutex g_table_mu;
std::unordered_map<const TensorImpl*, Entry> g_table;
size_t g_sweep_at = 1024;

void set_layout(const Tensor& t, const Layout& l) {
  std::lock_guard lk(g_table_mu);
  if (g_table.size() >= g_sweep_at) {  // forget tensors that died (traces, old steps)
    for (auto it = g_table.begin(); it != g_table.end();)
      it = it->second.impl.expired() ? g_table.erase(it) : std::next(it);
    g_sweep_at = std::max<size_t>(1024, 2 * g_table.size());
  }
  if (l.is_whole())
    g_table.erase(t.impl_ptr().get());
  else
    g_table[t.impl_ptr().get()] = Entry{t.impl_ptr(), l};
}

std::mutex g_log_mu;
std::vector<std::string> g_log;
std::set<std::string> g_log_seen;
void log_line(std::string s) {
  std::lock_guard lk(g_log_mu);
  if (g_log_seen.insert(s).second) g_log.push_back(std::move(s));
}

// ---- groups: the ranks that differ only in some cuts' digits ------------------------------------
int64_t digits_of(int64_t r,
                  const std::vector<DimSplit>& cuts) {  // the rank's value in those digits
  int64_t v = 0;
  for (const DimSplit& c : cuts) v += ((r / c.stride) % c.parts) * c.stride;
  return v;
}
// The sharding group split by `cuts`' digits, cached per base group and cuts. replicas: the ranks
// that agree with this one on every digit (the complement), else the ranks that differ only there.
GroupPtr split_by(const std::vector<DimSplit>& cuts, bool replicas) {
  static std::mutex mu;
  static std::map<std::string, GroupPtr> cache;
  std::lock_guard lk(mu);
  const GroupPtr base = sharding_group();
  const std::string key =
      std::to_string(uintptr_t(base.get())) + (replicas ? "|r|" : "|g|") + splits_str(cuts);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  const int r = world_rank();
  const int64_t mine = digits_of(r, cuts);
  // Collective over the sharding group: every rank reaches here in the same order (same network,
  // same rules).
  GroupPtr g = replicas ? base->split(int(mine), r) : base->split(int(r - mine), int(mine));
  cache[key] = g;
  return g;
}
GroupPtr group_for(const std::vector<DimSplit>& cuts) { return split_by(cuts, false); }
GroupPtr replicas_for(const std::vector<DimSplit>& cuts) { return split_by(cuts, true); }
std::string ranks_of(const std::vector<DimSplit>& cuts) {
  const int r = world_rank();
  const int64_t base = r - digits_of(r, cuts);
  std::string s;
  for (int64_t q = 0; q < world_size(); ++q)
    if (q - digits_of(q, cuts) == base) s += (s.empty() ? "" : " ") + std::to_string(q);
  return s;
}

// ---- the collective ops -------------------------------------------------------------------------
enum class Kind { Gather, Slice, AllReduce, Mirror, ReduceScatter, AllToAll };
struct Coll {
  Kind kind;
  int64_t dim = -1;   // Gather / Slice / ReduceScatter: the dim; AllToAll: the dim made whole
  int64_t dim2 = -1;  // AllToAll: the dim that gets cut
  std::vector<DimSplit> cuts;
};
const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Gather:
      return "all_gather";
    case Kind::Slice:
      return "slice";
    case Kind::AllReduce:
      return "all_reduce";
    case Kind::Mirror:
      return "mirror";
    case Kind::ReduceScatter:
      return "reduce_scatter";
    case Kind::AllToAll:
      return "all_to_all";
  }
  return "?";
}
std::string coll_name(const Coll& c) {
  std::string s = std::string("shard_") + kind_name(c.kind);
  if (c.dim >= 0) s += "_d" + std::to_string(c.dim);
  if (c.dim2 >= 0) s += "_to" + std::to_string(c.dim2);
  return s + "[" + splits_str(c.cuts) + "]";
}

// Moves axis `from` of t to position `to`.
Tensor move_axis(const Tensor& t, int64_t from, int64_t to) {
  std::vector<int64_t> axes;
  for (int64_t i = 0; i < t.dim(); ++i)
    if (i != from) axes.push_back(i);
  axes.insert(axes.begin() + to, from);
  return t.permute(axes);
}
// t with dim d split into (p, size / p).
Tensor split_dim(const Tensor& t, int64_t d, int64_t p) {
  Shape s = t.shape();
  s[size_t(d)] /= p;
  s.insert(s.begin() + d, p);
  return t.reshape(s);
}
void write(Tensor& out, const Tensor& r) {
  const Tensor c = r.contiguous();
  std::memcpy(out.data_ptr(), c.data_ptr(), out.nbytes());
}

Tensor apply(const Coll& c, const Tensor& x);

// comm_count / DryRunScope (the strategy search's trials): global, since a compiled step may run
// the kernels on another thread.
std::atomic<int64_t> g_comm_bytes{0}, g_comm_calls{0};
std::atomic<bool> g_dry{false};

// What this rank sends for c on input x (ring algorithms).
int64_t sent_bytes(const Coll& c, const Tensor& x, int64_t p) {
  const int64_t b = int64_t(x.nbytes());
  switch (c.kind) {
    case Kind::AllReduce:
      return 2 * (p - 1) * b / p;
    case Kind::Gather:
      return (p - 1) * b;
    case Kind::ReduceScatter:
    case Kind::AllToAll:
      return (p - 1) * b / p;
    case Kind::Slice:
    case Kind::Mirror:
      return 0;
  }
  return 0;
}

CustomOpHandle coll_op(const Coll& c) {
  static std::mutex mu;
  static std::map<std::string, CustomOpHandle> ops;
  const std::string name = coll_name(c);
  // The subgroup exists before the op runs: made here, where every rank of the sharding group
  // asks in the same order. The kernel looks it up when it runs, since one op (one name) serves
  // every sharding group: the world's, and each pipeline stage's when pipeline_stages > 1.
  if (!c.cuts.empty()) group_for(c.cuts);
  {
    std::lock_guard lk(mu);
    auto it = ops.find(name);
    if (it != ops.end()) return it->second;
  }
  const int64_t p = c.cuts.empty() ? 1 : c.cuts[0].parts;
  CustomOp op;
  op.name = name;
  op.num_inputs = 1;
  // integer inputs: labels, token ids; half precision: amp's float16 / bfloat16 activations
  op.dtypes = {kFloat32, kFloat64, kInt32, kInt64, kFloat16, kBFloat16};
  op.infer = [c, p](const std::vector<Shape>& s,
                    const std::vector<DType>& t) -> std::pair<Shape, DType> {
    Shape out = s[0];
    auto dim_ok = [&](int64_t d) {
      SPORE_CHECK(d < int64_t(out.size()), "dim ", d, " is out of range for shape ",
                  shape_str(out));
    };
    switch (c.kind) {
      case Kind::Gather:
        dim_ok(c.dim);
        out[size_t(c.dim)] *= p;
        break;
      case Kind::Slice:
      case Kind::ReduceScatter:
        dim_ok(c.dim);
        SPORE_CHECK(out[size_t(c.dim)] % p == 0, "dim ", c.dim, " of ", shape_str(out),
                    " does not split into ", p, " equal pieces; make it a multiple of ", p,
                    " or change the strategy");
        out[size_t(c.dim)] /= p;
        break;
      case Kind::AllToAll:
        dim_ok(c.dim);
        dim_ok(c.dim2);
        SPORE_CHECK(out[size_t(c.dim2)] % p == 0, "dim ", c.dim2, " of ", shape_str(out),
                    " does not split into ", p, " equal pieces");
        out[size_t(c.dim)] *= p;
        out[size_t(c.dim2)] /= p;
        break;
      default:
        break;
    }
    return {out, t[0]};
  };
  op.bprop = [c](const std::vector<Tensor>&, const Tensor&,
                 const Tensor& dout) -> std::vector<Tensor> {
    Coll b = c;
    switch (c.kind) {
      case Kind::Gather:
        b.kind = Kind::Slice;
        break;
      case Kind::Slice:
        b.kind = Kind::Gather;
        break;
      case Kind::AllReduce:
        return {dout};  // every rank's summand gets the whole gradient
      case Kind::Mirror:
        b.kind = Kind::AllReduce;
        break;
      case Kind::ReduceScatter:
        b.kind = Kind::Gather;
        break;
      case Kind::AllToAll:
        std::swap(b.dim, b.dim2);
        break;
    }
    return {apply(b, dout)};
  };
  op.cpu_kernel = [c, p](const std::vector<Tensor>& in, Tensor& out) {
    const GroupPtr g = c.cuts.empty() ? nullptr : group_for(c.cuts);
    const NoGradGuard no_grad;
    const Tensor& x = in[0];
    if (const int64_t sent = sent_bytes(c, x, p); sent > 0) {
      g_comm_bytes += sent;
      ++g_comm_calls;
    }
    if (g_dry && c.kind != Kind::Slice && c.kind != Kind::Mirror) {  // count only: no data moves
      if (c.kind == Kind::AllReduce)
        write(out, x);
      else
        std::memset(out.data_ptr(), 0, out.nbytes());
      return;
    }
    switch (c.kind) {
      case Kind::Mirror:
        write(out, x);
        break;
      case Kind::AllReduce:
        write(out, x);
        g->all_reduce(out, ReduceOp::Sum);
        break;
      case Kind::Gather: {  // (p, ...) from the group, pieces in rank-digit order = piece order
        const Tensor buf = g->all_gather(x);
        Shape s = out.shape();
        write(out, move_axis(buf, 0, c.dim).reshape(s));
        break;
      }
      case Kind::Slice: {
        const int64_t q = (world_rank() / c.cuts[0].stride) % p, n = out.shape()[size_t(c.dim)];
        write(out, x.slice(c.dim, q * n, (q + 1) * n));
        break;
      }
      case Kind::ReduceScatter: {  // blocks by destination first
        const Tensor packed = move_axis(split_dim(x, c.dim, p), c.dim, 0).contiguous();
        g->reduce_scatter(packed, out, ReduceOp::Sum);
        break;
      }
      case Kind::AllToAll: {  // send block j (piece j of dim2) to rank j; receive their pieces of
                              // dim
        const Tensor packed = move_axis(split_dim(x, c.dim2, p), c.dim2, 0).contiguous();
        Tensor recv = Tensor::empty(packed.shape(), packed.dtype());
        g->all_to_all(packed, recv);
        write(out, move_axis(recv, 0, c.dim).reshape(out.shape()));
        break;
      }
    }
  };
  CustomOpHandle h = register_custom_op(std::move(op));
  std::lock_guard lk(mu);
  ops[name] = h;
  return h;
}

Tensor apply(const Coll& c, const Tensor& x) { return coll_op(c)(x); }

void log_coll(const Coll& c, const Tensor& x, const Layout& from, const Layout& to) {
  std::string s = kind_name(c.kind);
  if (c.kind == Kind::AllToAll)
    s += " dims " + std::to_string(c.dim) + "->" + std::to_string(c.dim2);
  else if (c.dim >= 0)
    s += " dim " + std::to_string(c.dim);
  s += " of " + std::string(dtype_name(x.dtype())) + shape_str(whole_shape(x.shape(), from)) + " " +
       from.str() + " -> " + to.str() + " (ranks " + ranks_of(c.cuts) + ")";
  log_line(std::move(s));
}

// The gradient all-reduce over `cuts` for an input kept whole there (floating inputs only).
Tensor mirror(const Tensor& x, const Layout& l, const std::vector<DimSplit>& cuts) {
  if (cuts.empty() || !is_floating(x.dtype())) return x;
  const Coll c{Kind::Mirror, -1, -1, cuts};
  log_coll(c, x, l, l);
  return apply(c, x);
}

// Moves x from layout `from` to `to` (same rank): first the cuts `to` does not share (all-to-all
// when another dim takes the same cut, else all-gather), then the new cuts (local slices).
Tensor move(const Tensor& x, Layout from, const Layout& to) {
  if (from.dims.size() != to.dims.size()) from = Layout::whole(int64_t(to.dims.size()));
  if (from == to) return x;
  Tensor cur = x;
  for (size_t d = 0; d < from.dims.size(); ++d) {
    const DimSplit s = from.dims[d];
    if (!s.cut() || s == to.dims[d]) continue;
    Layout next = from;
    int64_t e = -1;
    for (size_t k = 0; k < to.dims.size(); ++k)
      if (k != d && to.dims[k] == s && !from.dims[k].cut()) e = int64_t(k);
    Coll c{e >= 0 ? Kind::AllToAll : Kind::Gather, int64_t(d), e, {s}};
    next.dims[d] = {};
    if (e >= 0) next.dims[size_t(e)] = s;
    log_coll(c, cur, from, next);
    cur = apply(c, cur);
    from = next;
  }
  for (size_t d = 0; d < to.dims.size(); ++d) {
    if (!to.dims[d].cut() || from.dims[d] == to.dims[d]) continue;
    Layout next = from;
    next.dims[d] = to.dims[d];
    const Coll c{Kind::Slice, int64_t(d), -1, {to.dims[d]}};
    log_coll(c, cur, from, next);
    cur = apply(c, cur);
    from = next;
  }
  return cur;
}

Layout fitted(const Tensor& t) {  // the table's layout, or whole when it does not fit t's rank
  Layout l = layout_of(t);
  if (l.dims.size() != size_t(t.dim())) l = Layout::whole(t.dim());
  return l;
}

thread_local const OpStrategy* g_strategy = nullptr;  // OpStrategyScope

// ---- the engine ---------------------------------------------------------------------------------
class Engine : public ops::ShardingHook {
 public:
  std::optional<ops::Tensors> call(ops::OpId id, const ops::Tensors& in,
                                   const ops::Attrs& a) override {
    bool any = false;
    for (const Tensor& t : in)
      if (t.defined() && !fitted(t).is_whole()) any = true;
    if (!any) return std::nullopt;
    const OpStrategy* s = g_strategy;
    if (s && id == (s->op == OpStrategy::Op::Matmul ? ops::OpId::Matmul : ops::OpId::Conv2d)) {
      g_strategy = nullptr;  // consumed: the layer's later ops (bias add, activation) are not its
      if (s->input) {
        ops::Tensors moved = in;
        moved[0] = redistribute(in[0], *s->input);
        return call_with(id, moved, a, s->output ? &*s->output : nullptr);
      }
      return call_with(id, in, a, s->output ? &*s->output : nullptr);
    }
    return call_with(id, in, a, nullptr);
  }

 private:
  // out_request: the output layout the layer's strategy asks of a cut contraction (MatMul).
  std::optional<ops::Tensors> call_with(ops::OpId id, const ops::Tensors& in, const ops::Attrs& a,
                                        const Layout* out_request) {
    using ops::OpId;
    const ops::OpDef& def = ops::op_def(id);
    std::optional<ops::Tensors> out;
    if (def.has(ops::kElementwise))
      out = elementwise(id, in, a);
    else if (id == OpId::Matmul)
      out = matmul(in, a, out_request);
    else if (id == OpId::Sum || id == OpId::Mean)
      out = reduce(id, in, a);
    else if (id == OpId::Reshape)
      out = reshape(in, a);
    else if (id == OpId::Permute)
      out = permute(in, a);
    else if (id == OpId::Copy)
      out = same_layout(id, in, a);
    else if (id == OpId::Softmax || id == OpId::LogSoftmax)
      out = along_axis(id, in, a, a.get_int("axis"));
    else if (id == OpId::LayerNorm)
      out = layer_norm(in, a);
    else if (id == OpId::IndexSelect)
      out = index_select(in, a);
    else if (id == OpId::Gather)
      out = gather(in, a);
    else if (id == OpId::Slice)
      out = along_axis(id, in, a, a.get_int("dim"));
    else if (id == OpId::Conv2d)
      out = conv2d(in, a);
    else if (id == OpId::MaxPool2d || id == OpId::AvgPool2d || id == OpId::AdaptiveAvgPool2d)
      out = pool(id, in, a);
    if (!out) out = on_whole(id, in, a);
    return out;
  }

  static Tensor run1(ops::OpId id, const ops::Tensors& in, const ops::Attrs& a, const Layout& l) {
    Tensor y = ops::call1(id, in, a);
    set_layout(y, l);
    return y;
  }

  // Ops without a rule: every input whole, the op as written, outputs whole.
  static ops::Tensors on_whole(ops::OpId id, const ops::Tensors& in, const ops::Attrs& a) {
    ops::Tensors w;
    for (const Tensor& t : in)
      w.push_back(t.defined() ? move(t, fitted(t), Layout::whole(t.dim())) : t);
    log_line(std::string("whole: ") + ops::op_name(id) +
             " has no sharding rule; its inputs are gathered");
    return ops::call(id, std::move(w), a);
  }

  // Numpy broadcasting: each output dim takes the first input cut along it (not broadcast there).
  static std::optional<ops::Tensors> elementwise(ops::OpId id, const ops::Tensors& in,
                                                 const ops::Attrs& a) {
    std::vector<Layout> ls;
    std::vector<Shape> ws;
    Shape out_shape;
    for (const Tensor& t : in) {
      ls.push_back(fitted(t));
      ws.push_back(whole_shape(t.shape(), ls.back()));
      out_shape = ops::broadcast_shapes(out_shape, ws.back());
    }
    const size_t R = out_shape.size();
    Layout out = Layout::whole(int64_t(R));
    for (size_t j = 0; j < R; ++j)
      for (size_t i = 0; i < in.size() && !out.dims[j].cut(); ++i) {
        const int64_t d = int64_t(j) - int64_t(R - ws[i].size());
        if (d >= 0 && ws[i][size_t(d)] == out_shape[j] && ls[i].dims[size_t(d)].cut())
          out.dims[j] = ls[i].dims[size_t(d)];
      }
    if (!valid_set(out.dims)) return std::nullopt;
    const std::vector<DimSplit> used = cuts_of(out);
    ops::Tensors local;
    for (size_t i = 0; i < in.size(); ++i) {
      Layout want = Layout::whole(int64_t(ws[i].size()));
      for (size_t d = 0; d < ws[i].size(); ++d) {
        const size_t j = d + (R - ws[i].size());
        if (ws[i][d] == out_shape[j]) want.dims[d] = out.dims[j];
      }
      local.push_back(mirror(move(in[i], ls[i], want), want, missing(used, want)));
    }
    return ops::Tensors{run1(id, local, a, out)};
  }

  // a (..., M, K) @ b (..., K, N): the contraction takes b's cut (parameters stay put), else a's.
  static std::optional<ops::Tensors> matmul(const ops::Tensors& in, const ops::Attrs& a,
                                            const Layout* out_request) {
    const Layout la = fitted(in[0]), lb = fitted(in[1]);
    const Shape wa = whole_shape(in[0].shape(), la), wb = whole_shape(in[1].shape(), lb);
    const size_t ra = wa.size(), rb = wb.size();
    const DimSplit k = lb.dims[rb - 2].cut() ? lb.dims[rb - 2] : la.dims[ra - 1];
    const Shape batch =
        ops::broadcast_shapes(Shape(wa.begin(), wa.end() - 2), Shape(wb.begin(), wb.end() - 2));
    const size_t R = batch.size() + 2;
    Layout out = Layout::whole(int64_t(R));
    for (size_t j = 0; j < batch.size(); ++j) {
      for (const auto* side : {&la, &lb}) {
        const Shape& w = side == &la ? wa : wb;
        const int64_t d = int64_t(j) - int64_t(batch.size() - (w.size() - 2));
        if (!out.dims[j].cut() && d >= 0 && w[size_t(d)] == batch[j] && side->dims[size_t(d)].cut())
          out.dims[j] = side->dims[size_t(d)];
      }
    }
    out.dims[R - 2] = la.dims[ra - 2];
    out.dims[R - 1] = lb.dims[rb - 1];
    std::vector<DimSplit> used = out.dims;
    used.push_back(k);
    if (!valid_set(used)) return std::nullopt;
    used = cuts_of(out);
    add_cut(used, k);
    auto want = [&](const Shape& w, const DimSplit& row, const DimSplit& col) {
      Layout l = Layout::whole(int64_t(w.size()));
      for (size_t d = 0; d + 2 < w.size(); ++d) {
        const size_t j = d + (batch.size() - (w.size() - 2));
        if (w[d] == batch[j]) l.dims[d] = out.dims[j];
      }
      l.dims[w.size() - 2] = row;
      l.dims[w.size() - 1] = col;
      return l;
    };
    const Layout wa_l = want(wa, out.dims[R - 2], k), wb_l = want(wb, k, out.dims[R - 1]);
    const Tensor x = mirror(move(in[0], la, wa_l), wa_l, missing(used, wa_l));
    const Tensor y = mirror(move(in[1], lb, wb_l), wb_l, missing(used, wb_l));
    Tensor z = ops::call1(ops::OpId::Matmul, {x, y}, a);
    if (k.cut()) {  // partial sums over the contraction's ranks
      int64_t rs = -1;
      if (const Layout* req = out_request)
        for (size_t j = 0; j < R && j < req->dims.size(); ++j)
          if (req->dims[j] == k && !out.dims[j].cut() && k.cut()) rs = int64_t(j);
      Layout partial = out;
      const Coll c{rs >= 0 ? Kind::ReduceScatter : Kind::AllReduce, rs, -1, {k}};
      if (rs >= 0) out.dims[size_t(rs)] = k;
      log_coll(c, z, partial, out);
      z = apply(c, z);
    }
    set_layout(z, out);
    return ops::Tensors{z};
  }

  // Sum / Mean: reduced cut dims become an all-reduce of the local results.
  static std::optional<ops::Tensors> reduce(ops::OpId id, const ops::Tensors& in,
                                            const ops::Attrs& a) {
    const Layout l = fitted(in[0]);
    const int64_t r = in[0].dim();
    const std::vector<int64_t> axes = ops::normalize_axes(a.get_ints("axes", {}), r);
    const bool keep = a.get_bool("keepdims", false);
    Layout out;
    std::vector<DimSplit> cut;
    int64_t pieces = 1;
    for (int64_t d = 0; d < r; ++d) {
      const bool red = axes.empty() || std::find(axes.begin(), axes.end(), d) != axes.end();
      if (!red)
        out.dims.push_back(l.dims[size_t(d)]);
      else {
        if (keep) out.dims.push_back({});
        if (l.dims[size_t(d)].cut()) {
          cut.push_back(l.dims[size_t(d)]);
          pieces *= l.dims[size_t(d)].parts;
        }
      }
    }
    Tensor y = ops::call1(id, in, a);
    if (!cut.empty()) {
      if (id == ops::OpId::Mean) y = y * (1.0 / double(pieces));  // equal pieces: the mean of means
      const Coll c{Kind::AllReduce, -1, -1, cut};
      log_coll(c, y, out, out);
      y = apply(c, y);
    }
    set_layout(y, out);
    return ops::Tensors{y};
  }

  // conv2d(x (N, C, H, W), w (O, C, kh, kw)[, bias (O)]): like a matmul with N rows, O columns and
  // the contraction over C (the weight's cut first); the spatial dims whole. With a cut contraction
  // the partial sums are all-reduced before the bias is added (once).
  static std::optional<ops::Tensors> conv2d(const ops::Tensors& in, const ops::Attrs& a) {
    if (a.get_int("groups", 1) != 1) return std::nullopt;
    const Layout lx = fitted(in[0]), lw = fitted(in[1]);
    const DimSplit k = lw.dims[1].cut() ? lw.dims[1] : lx.dims[1];
    const Layout out{{lx.dims[0], lw.dims[0], {}, {}}};
    std::vector<DimSplit> used = {out.dims[0], out.dims[1], k};
    if (!valid_set(used)) return std::nullopt;
    used = cuts_of(out);
    add_cut(used, k);
    const Layout wx{{out.dims[0], k, {}, {}}}, ww{{out.dims[1], k, {}, {}}}, wb{{out.dims[1]}};
    ops::Tensors local{mirror(move(in[0], lx, wx), wx, missing(used, wx)),
                       mirror(move(in[1], lw, ww), ww, missing(used, ww))};
    Tensor bias;
    if (in.size() > 2) bias = mirror(move(in[2], fitted(in[2]), wb), wb, missing(used, wb));
    if (bias.defined() && !k.cut()) local.push_back(bias);
    Tensor y = ops::call1(ops::OpId::Conv2d, local, a);
    if (k.cut()) {
      const Coll c{Kind::AllReduce, -1, -1, {k}};
      log_coll(c, y, out, out);
      y = apply(c, y);
      if (bias.defined()) y = y + bias.reshape({-1, 1, 1});
    }
    set_layout(y, out);
    return ops::Tensors{y};
  }

  // 2-d pooling works per (N, C): those cuts stay; the spatial dims are made whole.
  static std::optional<ops::Tensors> pool(ops::OpId id, const ops::Tensors& in,
                                          const ops::Attrs& a) {
    const Layout l = fitted(in[0]);
    const Layout w{{l.dims[0], l.dims[1], {}, {}}};
    ops::Tensors out = ops::call(id, {move(in[0], l, w)}, a);
    for (const Tensor& t : out)
      if (t.dim() == 4) set_layout(t, w);
    return out;
  }

  static std::optional<ops::Tensors> same_layout(ops::OpId id, const ops::Tensors& in,
                                                 const ops::Attrs& a) {
    return ops::Tensors{run1(id, in, a, fitted(in[0]))};
  }

  // Softmax over `axis`, Slice along it: that dim whole, the others keep their cuts.
  static std::optional<ops::Tensors> along_axis(ops::OpId id, const ops::Tensors& in,
                                                const ops::Attrs& a, int64_t axis) {
    const Layout l = fitted(in[0]);
    Layout w = l;
    w.dims[size_t(ops::normalize_axis(axis, in[0].dim()))] = {};
    return ops::Tensors{run1(id, {move(in[0], l, w)}, a, w)};
  }

  // The normalized (last) dims whole; gamma and beta mirrored over the input's cuts.
  static std::optional<ops::Tensors> layer_norm(const ops::Tensors& in, const ops::Attrs& a) {
    const Layout l = fitted(in[0]);
    const int64_t k = a.get_int("normalized_ndim"), r = in[0].dim();
    Layout w = l;
    for (int64_t d = r - k; d < r; ++d) w.dims[size_t(d)] = {};
    const std::vector<DimSplit> used = cuts_of(w);
    ops::Tensors local{move(in[0], l, w)};
    for (size_t i = 1; i < in.size(); ++i) {
      const Layout wi = Layout::whole(in[i].dim());
      local.push_back(mirror(move(in[i], fitted(in[i]), wi), wi, used));
    }
    ops::Tensors out = ops::call(ops::OpId::LayerNorm, local, a);
    set_layout(out[0], w);
    for (size_t i = 1; i < out.size(); ++i) {  // the statistics: the leading dims' cuts
      Layout s = Layout::whole(out[i].dim());
      for (int64_t d = 0; d < out[i].dim() && d < r - k; ++d) s.dims[size_t(d)] = w.dims[size_t(d)];
      set_layout(out[i], s);
    }
    return out;
  }

  // index_select(table, axis, ids): rows picked by a cut index list; the table whole and mirrored.
  static std::optional<ops::Tensors> index_select(const ops::Tensors& in, const ops::Attrs& a) {
    const int64_t axis = ops::normalize_axis(a.get_int("axis"), in[0].dim());
    const Layout li = fitted(in[1]);
    Layout out = Layout::whole(in[0].dim());
    out.dims[size_t(axis)] = li.dims[0];
    const Layout wt = Layout::whole(in[0].dim());
    const Tensor table = mirror(move(in[0], fitted(in[0]), wt), wt, cuts_of(li));
    return ops::Tensors{run1(ops::OpId::IndexSelect, {table, in[1]}, a, out)};
  }

  // gather(x, axis, index) (same rank): the axis whole; the other dims cut as the index is.
  static std::optional<ops::Tensors> gather(const ops::Tensors& in, const ops::Attrs& a) {
    const int64_t axis = ops::normalize_axis(a.get_int("axis"), in[0].dim());
    Layout w = fitted(in[1]);
    if (w.dims.size() != size_t(in[0].dim())) return std::nullopt;
    w.dims[size_t(axis)] = {};
    const Tensor x = move(in[0], fitted(in[0]), w);
    const Tensor idx = move(in[1], fitted(in[1]), w);
    return ops::Tensors{run1(ops::OpId::Gather, {x, idx}, a, w)};
  }

  static std::optional<ops::Tensors> permute(const ops::Tensors& in, const ops::Attrs& a) {
    const Layout l = fitted(in[0]);
    Layout out;
    for (int64_t ax : a.get_ints("axes"))
      out.dims.push_back(l.dims[size_t(ops::normalize_axis(ax, in[0].dim()))]);
    return ops::Tensors{run1(ops::OpId::Permute, in, a, out)};
  }

  // Reshape: dims are matched in groups of equal element counts; a cut on a group's leading input
  // dim moves to the group's first output dim (so a size-1 dim inserted in front of a cut dim
  // takes the cut: unsqueeze after the cut dim instead). The target may be the
  // piece's shape or the whole tensor's.
  static std::optional<ops::Tensors> reshape(const ops::Tensors& in, const ops::Attrs& a) {
    const Layout l = fitted(in[0]);
    const Shape& piece = in[0].shape();
    const Shape whole = whole_shape(piece, l);
    Shape target = a.get_ints("shape");
    const bool whole_target =
        shape_numel(target) == shape_numel(whole) && shape_numel(whole) != shape_numel(piece);
    const Shape& src = whole_target ? whole : piece;
    Layout out = Layout::whole(int64_t(target.size()));
    size_t i = 0, j = 0;
    while (i < src.size() || j < target.size()) {
      // one group: [i0, i) -> [j0, j) with equal products
      const size_t i0 = i, j0 = j;
      int64_t pi = 1, pj = 1;
      if (i < src.size()) pi *= src[i++];
      if (j < target.size()) pj *= target[j++];
      while (pi != pj) {
        if (pi < pj && i < src.size())
          pi *= src[i++];
        else if (j < target.size())
          pj *= target[j++];
        else
          return std::nullopt;
      }
      // The cut input dim must lead its group (only size-1 dims before it); the piece is then a
      // contiguous block of the group, which is a cut of the group's first output dim (even of
      // local size 1: one of several heads).
      for (size_t d = i0; d < i; ++d) {
        if (!l.dims[d].cut()) continue;
        for (size_t e = i0; e < d; ++e)
          if (src[e] != 1 || l.dims[e].cut()) return std::nullopt;  // a cut inside a merged group
        if (j0 >= j) return std::nullopt;
        out.dims[j0] = l.dims[d];
        if (whole_target) {
          if (target[j0] % l.dims[d].parts != 0) return std::nullopt;
          target[j0] /= l.dims[d].parts;
        }
      }
    }
    ops::Attrs b = a;
    b.set("shape", target);
    return ops::Tensors{run1(ops::OpId::Reshape, in, b, out)};
  }
};

Engine& engine() {
  static Engine e;
  return e;
}
}  // namespace

// ---- public API ---------------------------------------------------------------------------------
Layout layout_from_strategy(const std::vector<int64_t>& pieces, int64_t device_num) {
  int64_t prod = 1;
  for (int64_t p : pieces) {
    SPORE_CHECK(p >= 1, "[shard] a strategy entry must be >= 1 pieces, got ", shape_str(pieces));
    prod *= p;
  }
  SPORE_CHECK(device_num % prod == 0, "[shard] strategy ", shape_str(pieces), " uses ", prod,
              " devices, which does not divide device_num ", device_num,
              "; the product of a strategy's pieces must divide the number of ranks");
  Layout l;
  int64_t stride = device_num / prod;  // the repeat is the fastest digit
  l.dims.resize(pieces.size());
  for (size_t d = pieces.size(); d-- > 0;) {
    l.dims[d] = pieces[d] > 1 ? DimSplit{stride, pieces[d]} : DimSplit{};
    stride *= pieces[d];
  }
  return l;
}

DenseLayouts dense_layouts(const Strategy& st, int64_t n) {
  SPORE_CHECK(st.size() == 2 && st[0].size() == 2 && st[1].size() == 2,
              "[Dense.shard] expected a strategy ((m, k), (n, k)) for the input (M, K) and the "
              "weight (N, K), got ",
              st.size(), " entries");
  SPORE_CHECK(st[0][1] == st[1][1], "[Dense.shard] the input's k (", st[0][1],
              ") and the weight's k (", st[1][1], ") must be equal: both cut the contraction");
  // device matrix (m, k, n): x = (m, k), weight = (n, k), out = (m, n)
  const Layout dm = layout_from_strategy({st[0][0], st[0][1], st[1][0]}, n);
  DenseLayouts r;
  r.x.dims = {dm.dims[0], dm.dims[1]};
  r.weight.dims = {dm.dims[2], dm.dims[1]};
  r.bias.dims = {dm.dims[2]};
  r.out.dims = {dm.dims[0], dm.dims[2]};
  return r;
}

bool semi_auto_active() {
  const ParallelMode m = get_auto_parallel_context().parallel_mode;
  return (m == ParallelMode::SemiAutoParallel || m == ParallelMode::AutoParallel) &&
         get_group_size() > 1;
}

CommCount comm_count() { return {g_comm_bytes, g_comm_calls}; }
void reset_comm_count() {
  g_comm_bytes = 0;
  g_comm_calls = 0;
}
DryRunScope::DryRunScope() : prev_(g_dry.exchange(true)) {}
DryRunScope::~DryRunScope() { g_dry = prev_; }

void unshard_parameter(Tensor& p, const Tensor& whole) {
  Tensor copy;
  {
    const NoGradGuard no_grad;
    copy = whole.detach().clone();
  }
  TensorImpl& impl = p.impl();
  impl.storage = copy.impl().storage;
  impl.shape = copy.impl().shape;
  impl.strides = copy.impl().strides;
  impl.offset = copy.impl().offset;
  set_layout(p, Layout::whole(p.dim()));
}

bool in_sharded_region() { return ops::current_sharding() == &engine(); }

Layout layout_of(const Tensor& t) {
  if (!t.defined()) return {};
  std::lock_guard lk(g_table_mu);
  auto it = g_table.find(t.impl_ptr().get());
  if (it == g_table.end() || it->second.impl.lock() != t.impl_ptr() ||
      it->second.layout.dims.size() != size_t(t.dim()))
    return Layout::whole(t.dim());
  return it->second.layout;
}

Tensor mark_piece(const Tensor& t, const Layout& l) {
  SPORE_CHECK(l.dims.size() == size_t(t.dim()), "[sharding] layout ", l.str(), " has ",
              l.dims.size(), " dims but the tensor ", shape_str(t.shape()), " has ", t.dim());
  SPORE_CHECK(valid_set(l.dims), "[sharding] layout ", l.str(), " does not fit ", world_size(),
              " ranks (each cut must use its own digits of the rank number)");
  set_layout(t, l);
  return t;
}

Tensor distribute(const Tensor& full, const Layout& l) {
  SPORE_CHECK(l.dims.size() == size_t(full.dim()), "[sharding] layout ", l.str(), " has ",
              l.dims.size(), " dims but the tensor ", shape_str(full.shape()), " has ", full.dim());
  Tensor t = move(full, Layout::whole(full.dim()), l);
  set_layout(t, l);
  return t;
}

Tensor redistribute(const Tensor& x, const Layout& to) {
  const ops::ShardingHookScope off(nullptr);
  Tensor y = move(x, fitted(x), to);
  set_layout(y, to);
  return y;
}

Tensor gather_whole(const Tensor& x) { return redistribute(x, Layout::whole(x.dim())); }

void shard_parameter(Tensor& p, const Layout& l) {
  SPORE_CHECK(l.dims.size() == size_t(p.dim()), "[shard] layout ", l.str(), " has ", l.dims.size(),
              " dims but the parameter ", shape_str(p.shape()), " has ", p.dim());
  const Layout cur = fitted(p);
  if (cur == l) return;
  SPORE_CHECK(cur.is_whole(), "[shard] the parameter ", shape_str(p.shape()), " is already cut as ",
              cur.str(), "; shard() each layer once");
  for (size_t d = 0; d < l.dims.size(); ++d)
    SPORE_CHECK(p.shape()[d] % l.dims[d].parts == 0, "[shard] dim ", d, " of the parameter ",
                shape_str(p.shape()), " does not split into ", l.dims[d].parts,
                " equal pieces; change the strategy or the layer size");
  Tensor piece;
  {
    const NoGradGuard no_grad;
    Tensor t = p.detach();
    for (size_t d = 0; d < l.dims.size(); ++d) {
      if (!l.dims[d].cut()) continue;
      const int64_t n = t.shape()[d] / l.dims[d].parts, q = l.piece(d, world_rank());
      t = t.slice(int64_t(d), q * n, (q + 1) * n);
    }
    piece = t.clone();
  }
  TensorImpl& impl =
      p.impl();  // in place: every holder of p (cells, checkpoint lists) sees the piece
  impl.storage = piece.impl().storage;
  impl.shape = piece.impl().shape;
  impl.strides = piece.impl().strides;
  impl.offset = piece.impl().offset;
  set_layout(p, l);
}

OpStrategyScope::OpStrategyScope(const OpStrategy* s) : prev_(g_strategy) {
  if (s) g_strategy = s;
}
OpStrategyScope::~OpStrategyScope() { g_strategy = prev_; }

ShardedCell::ShardedCell(nn::CellPtr network, bool pipeline_stage)
    : net_(std::move(network)), pipeline_stage_(pipeline_stage) {
  SPORE_CHECK(net_ != nullptr, "[ShardedCell] network is null");
  register_cell("network", net_);
  set_cls_name("ShardedCell");
}

std::vector<Tensor> ShardedCell::forward(const std::vector<Tensor>& inputs) {
  if (!semi_auto_active()) return net_->forward(inputs);
  const AutoParallelContext& ctx = get_auto_parallel_context();
  const int64_t n = world_size();
  // (With pipeline stages the job's ranks are also accepted, as MindSpore counts device_num.)
  SPORE_CHECK(ctx.device_num == 0 || ctx.device_num == n || ctx.device_num == get_group_size(),
              "[ShardedCell] device_num is ", ctx.device_num, " but the job has ", get_group_size(),
              " ranks", ctx.pipeline_stages > 1 ? " and each stage " : "",
              ctx.pipeline_stages > 1 ? std::to_string(n) : std::string(), "; set device_num to ",
              get_group_size(), " (or 0)");
  std::vector<Tensor> xs;
  if (pipeline_stage_) {
    // A stage's activation (or the data, on stage 0): whole on every rank of the stage; each
    // takes its piece of the batch.
    const int64_t dp = !ctx.dataset_strategy.empty() && !ctx.dataset_strategy[0].empty()
                           ? ctx.dataset_strategy[0][0]
                           : 1;
    for (const Tensor& x : inputs) {
      std::vector<int64_t> st(size_t(std::max<int64_t>(x.dim(), 1)), 1);
      st[0] = dp;
      xs.push_back(x.dim() == 0 ? x : distribute(x, layout_from_strategy(st, n)));
    }
  }
  for (size_t i = 0; i < inputs.size() && !pipeline_stage_; ++i) {
    std::vector<int64_t> st =
        i < ctx.dataset_strategy.size() ? ctx.dataset_strategy[i] : std::vector<int64_t>{n};
    SPORE_CHECK(int64_t(st.size()) <= inputs[i].dim(), "[ShardedCell] dataset_strategy entry ", i,
                " ", shape_str(st), " has more dims than input ", i, " ",
                shape_str(inputs[i].shape()));
    st.resize(size_t(inputs[i].dim()), 1);
    const Layout l = layout_from_strategy(st, n);
    xs.push_back(ctx.full_batch ? distribute(inputs[i], l) : mark_piece(inputs[i], l));
  }
  std::vector<Tensor> outs;
  {
    const ops::ShardingHookScope on(&engine());
    outs = net_->forward(xs);
  }
  for (Tensor& y : outs) y = gather_whole(y);
  return outs;
}

std::vector<std::string> redistribution_log() {
  std::lock_guard lk(g_log_mu);
  return g_log;
}
void clear_redistribution_log() {
  std::lock_guard lk(g_log_mu);
  g_log.clear();
  g_log_seen.clear();
}

GroupPtr replica_group_of(const Layout& l) {
  SPORE_CHECK(valid_set(l.dims), "[sharding] layout ", l.str(), " does not fit ", world_size(),
              " ranks (each cut must use its own digits of the rank number)");
  return replicas_for(cuts_of(l));
}

int64_t local_bytes(const std::vector<Tensor>& tensors) {
  int64_t b = 0;
  for (const Tensor& t : tensors)
    if (t.defined()) b += int64_t(t.nbytes());
  return b;
}

}  // namespace spore::parallel
