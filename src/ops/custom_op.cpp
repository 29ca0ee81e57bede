// register_custom_op (spore/custom_op.h): turns a user's CustomOp into a primitive registered at
// run time (ops::register_op), with its rules, its CPU kernel and, for pointwise ops, the row
// kernels the fused elementwise programs call (fused::Opcode::kCall); and the loader of kernels
// compiled on their own with MindSpore's AOT entry point (load_aot_kernel, aot_cpu_kernel).
#include "spore/custom_op.h"

#include <dlfcn.h>

#include <cstring>
#include <map>
#include <mutex>

#include "ops/op.h"
#include "ops/precision.h"
#include "spore/grad_mode.h"
#include "spore/ops.h"

namespace spore {
namespace {
using ops::Metas;

ops::AmpClass amp_class(CustomOpTraits::Amp a) {
  switch (a) {
    case CustomOpTraits::Amp::kAllow16:
      return ops::AmpClass::kAllow16;
    case CustomOpTraits::Amp::kFollow:
      return ops::AmpClass::kFollow;
    default:
      return ops::AmpClass::kDefault;
  }
}

// The kernel made from row kernels: every input broadcast to the output and made contiguous, the
// row run once over all elements (float16 / bfloat16 through float32).
void run_rows(const CustomOp& op, const ops::KernelContext& ctx) {
  const NoGradGuard no_grad;                  // the helper copies are not on the tape...
  const ops::PrecisionScope no_amp(nullptr);  // ...nor cast again
  Tensor& out = ctx.outputs[0];
  const DType compute = out.dtype() == kFloat64 ? kFloat64 : kFloat32;
  std::vector<Tensor> in;
  for (const Tensor& x : ctx.inputs) in.push_back(x.to(compute).expand(out.shape()).contiguous());
  Tensor y = compute == out.dtype() ? out : Tensor::empty(out.shape(), compute, out.device());
  const int64_t n = out.numel();
  const bool binary = in.size() == 2;
  if (compute == kFloat64)
    op.cpu_row_f64(in[0].data<double>(), 1, binary ? in[1].data<double>() : nullptr, 1,
                   y.data<double>(), n);
  else
    op.cpu_row_f32(in[0].data<float>(), 1, binary ? in[1].data<float>() : nullptr, 1,
                   y.data<float>(), n);
  if (!y.is_same(out)) {
    const Tensor r = y.to(out.dtype());
    std::memcpy(out.data_ptr(), r.data_ptr(), out.nbytes());
  }
}

std::vector<DType> default_dtypes(const CustomOp& op) {
  std::vector<DType> d;
  if (op.cpu_row_f32) d.insert(d.end(), {kFloat32, kFloat16, kBFloat16});
  if (op.cpu_row_f64) d.push_back(kFloat64);
  if (d.empty()) d.push_back(kFloat32);
  return d;
}
}  // namespace

CustomOpHandle register_custom_op(CustomOp spec) {
  const std::string& name = spec.name;
  const bool rows = spec.cpu_row_f32 || spec.cpu_row_f64;
  SPORE_CHECK(spec.num_inputs >= 1, "[register_custom_op] op '", name,
              "' needs at least one input, got num_inputs=", spec.num_inputs);
  SPORE_CHECK(
      spec.cpu_kernel || rows, "[register_custom_op] op '", name,
      "' has no CPU kernel: give cpu_kernel, or cpu_row_f32 / cpu_row_f64 for a pointwise op");
  SPORE_CHECK(!rows || spec.num_inputs <= 2, "[register_custom_op] op '", name,
              "': row kernels take one or two inputs, the op has ", spec.num_inputs);
  SPORE_CHECK(!spec.traits.pointwise || rows, "[register_custom_op] op '", name,
              "' is marked pointwise but has no row kernels (cpu_row_f32 / cpu_row_f64) to fuse");
  SPORE_CHECK(!spec.traits.idempotent || spec.num_inputs == 1, "[register_custom_op] op '", name,
              "': only a unary op can be idempotent");
  if (spec.dtypes.empty()) spec.dtypes = default_dtypes(spec);
  auto op = std::make_shared<const CustomOp>(std::move(spec));

  ops::OpRules rules;
  rules.infer = [op](const Metas& in, const ops::Attrs&) -> Metas {
    std::vector<Shape> shapes;
    std::vector<DType> dtypes;
    for (const ops::TensorMeta& m : in) {
      shapes.push_back(m.shape);
      dtypes.push_back(m.dtype);
    }
    if (op->infer) {
      auto [shape, dtype] = op->infer(shapes, dtypes);
      return {{shape, dtype}};
    }
    Shape shape = shapes[0];
    for (size_t i = 1; i < shapes.size(); ++i) {
      SPORE_CHECK_TYPE(dtypes[i] == dtypes[0], "input ", i, " has dtype ", dtype_name(dtypes[i]),
                       " but input 0 has ", dtype_name(dtypes[0]), "; cast them to one dtype");
      shape = ops::broadcast_shapes(shape, shapes[i]);
    }
    return {{shape, dtypes[0]}};
  };
  if (op->bprop)
    rules.vjp = [op](const ops::VjpContext& c) -> ops::Tensors {
      return op->bprop(c.inputs, c.out(0), c.g(0));
    };

  ops::OpTraits traits;
  traits.fused = op->traits.pointwise ? ops::fused::Opcode::kCall : ops::fused::Opcode::kNone;
  traits.zero_preserving = op->traits.zero_preserving;
  traits.idempotent = op->traits.idempotent;
  traits.amp = amp_class(op->traits.amp);
  uint32_t flags = op->bprop ? 0u : uint32_t(ops::kNonDiff);
  if (op->traits.impure) flags |= ops::kRandom;  // the passes' "run every call" flag
  if (op->traits.pointwise)
    flags |= ops::kElementwise | (op->num_inputs == 1 ? ops::kUnary : ops::kBinary);
  const ops::OpId id =
      ops::register_op(op->name, op->num_inputs, 1, flags, traits, std::move(rules));

  ops::KernelFn kernel;
  if (op->cpu_kernel) {
    kernel = [op](ops::KernelContext& ctx) {
      std::vector<Tensor> in;
      {
        const NoGradGuard no_grad;
        const ops::PrecisionScope no_amp(nullptr);
        for (const Tensor& x : ctx.inputs) in.push_back(x.contiguous());
      }
      op->cpu_kernel(in, ctx.outputs[0]);
    };
  } else {
    kernel = [op](ops::KernelContext& ctx) { run_rows(*op, ctx); };
  }
  ops::RowKernels row_kernels;
  if (op->cpu_row_f32) row_kernels.f32 = op->cpu_row_f32;
  if (op->cpu_row_f64) row_kernels.f64 = op->cpu_row_f64;
  std::initializer_list<DType> none{};
  ops::detail::register_kernel(id, DeviceType::CPU, std::move(kernel), none,
                               std::move(row_kernels));
  for (DType t : op->dtypes) ops::detail::register_kernel_dtype(id, DeviceType::CPU, t);
  return CustomOpHandle(uint16_t(id));
}

AotKernelFn load_aot_kernel(const std::string& library, const std::string& symbol) {
  static std::mutex mu;
  static std::map<std::string, void*> opened;  // path -> handle, never closed
  const std::lock_guard<std::mutex> lock(mu);
  void*& handle = opened[library];
  if (!handle) {
    handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* why = dlerror();
      opened.erase(library);
      SPORE_THROW(ErrorKind::IOError, "[custom op] cannot load the AOT library '", library,
                  "': ", why ? why : "unknown error",
                  "; give the path of a shared library built for this machine (g++ -shared -fPIC)");
    }
  }
  dlerror();  // clear, so a null symbol's reason is this lookup's
  void* fn = dlsym(handle, symbol.c_str());
  if (!fn) {
    const char* why = dlerror();
    SPORE_THROW(ErrorKind::ValueError, "[custom op] the AOT library '", library,
                "' has no function '", symbol, "' (", why ? why : "null symbol",
                "); declare it extern \"C\" int ", symbol,
                "(int nparam, void** params, int* ndims, int64_t** shapes, const char** dtypes, "
                "void* stream, void* extra) so its name is not mangled");
  }
  return reinterpret_cast<AotKernelFn>(fn);
}

std::function<void(const std::vector<Tensor>&, Tensor&)> aot_cpu_kernel(AotKernelFn fn,
                                                                        std::string what) {
  SPORE_CHECK(fn, "[custom op] '", what, "': the AOT kernel function is null");
  return [fn, what = std::move(what)](const std::vector<Tensor>& inputs, Tensor& out) {
    const size_t n = inputs.size() + 1;
    std::vector<void*> params(n);
    std::vector<int> ndims(n);
    std::vector<std::vector<int64_t>> dims(n);
    std::vector<int64_t*> shapes(n);
    std::vector<const char*> dtypes(n);
    for (size_t i = 0; i < n; ++i) {
      const Tensor& t = i + 1 < n ? inputs[i] : out;
      params[i] = t.data_ptr();
      dims[i] = t.shape();
      ndims[i] = int(dims[i].size());
      shapes[i] = dims[i].data();
      dtypes[i] = dtype_name(t.dtype());
    }
    const int rc =
        fn(int(n), params.data(), ndims.data(), shapes.data(), dtypes.data(), nullptr, nullptr);
    SPORE_CHECK_KIND(ErrorKind::RuntimeError, rc == 0, "[custom op] the AOT kernel '", what,
                     "' returned ", rc, " (0 is success)");
  };
}

std::vector<Tensor> CustomOpHandle::call(std::vector<Tensor> inputs) const {
  SPORE_CHECK(id_ >= ops::kNumOps && int(id_) < ops::num_ops(),
              "this custom op handle is empty; assign it the result of register_custom_op()");
  return ops::call(ops::OpId(id_), std::move(inputs));
}

const char* CustomOpHandle::name() const { return ops::op_name(ops::OpId(id_)); }

}  // namespace spore
