// Tensor, Storage and the factories. The methods that are sugar for ops of the compiler layer
// (views, contiguous, to, sum...) are defined in ops/tensor_methods.cpp, backward in autograd.
#include "spore/tensor.h"

#include <cmath>
#include <cstring>

#include "backends/backend.h"
#include "core/random.h"
#include "ops/op.h"
#include "spore/context.h"

namespace spore {

std::string shape_str(const Shape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}
int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}
Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= std::max<int64_t>(s[i], 1);
  }
  return st;
}

// ---- Storage ---------------------------------------------------------------------------------
Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  allocator_ = &get_backend(device.type).allocator(device.index);
  data_ = allocator_->allocate(nbytes);
}
Storage::Storage(void* external, size_t nbytes, Device device, std::function<void(void*)> deleter)
    : data_(external), nbytes_(nbytes), device_(device), deleter_(std::move(deleter)) {}
Storage::~Storage() {
  if (allocator_)
    allocator_->deallocate(data_, nbytes_);
  else if (deleter_)
    deleter_(data_);
}

NestedList::NestedList(std::initializer_list<NestedList> items) {
  SPORE_CHECK(items.size() > 0, "tensor(): empty nested list; use zeros({0}) for an empty tensor");
  const Shape& inner = items.begin()->shape;
  for (const NestedList& it : items) {
    SPORE_CHECK(it.shape == inner, "tensor(): ragged nested list: found sub-lists of shapes ",
                shape_str(inner), " and ", shape_str(it.shape),
                "; every row must have the same length");
    values.insert(values.end(), it.values.begin(), it.values.end());
  }
  shape.push_back(int64_t(items.size()));
  shape.insert(shape.end(), inner.begin(), inner.end());
}

// ---- Tensor ----------------------------------------------------------------------------------
Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape)
    SPORE_CHECK(d >= 0, "empty(): negative dimension in shape ", shape_str(shape));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(size_t(shape_numel(shape)) * itemsize(dtype), device);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  impl->device = device;
  return Tensor(std::move(impl));
}

int64_t Tensor::size(int64_t d) const { return shape()[size_t(ops::normalize_axis(d, dim()))]; }

bool Tensor::is_contiguous() const {
  const auto& sh = shape();
  const auto& st = strides();
  int64_t expected = 1;
  for (size_t i = sh.size(); i-- > 0;) {
    if (sh[i] == 1) continue;
    if (st[i] != expected) return false;
    expected *= sh[i];
  }
  return true;
}

void* Tensor::data_ptr() const {
  const TensorImpl& t = impl();
  // No storage and not traced: a parameter this rank released (parallel::release_storage: it
  // belongs to another pipeline stage).
  SPORE_CHECK_KIND(
      ErrorKind::RuntimeError, t.storage || t.traced, "this tensor ", shape_str(t.shape),
      " holds no data on this rank: it is a parameter of another pipeline stage "
      "(pipeline_stages), released here; only the rank that trains its stage holds it. "
      "Run the network through its pipeline (Model.eval / predict) or merge the "
      "per-stage checkpoints (spore convert --merge)");
  SPORE_CHECK_KIND(ErrorKind::RuntimeError, t.storage,
                   "cannot read the data of a symbolic tensor while tracing a graph: its value is "
                   "only known when the compiled graph runs. Compute with ops instead of reading "
                   "values on the host inside construct().");
  return static_cast<char*>(t.storage->data()) + t.offset * int64_t(itemsize(t.dtype));
}

void Tensor::copy_from_host(const void* src) const {
  SPORE_CHECK(is_contiguous() && !is_symbolic(),
              "copy_from_host(): needs a concrete contiguous tensor");
  copy_bytes(data_ptr(), device(), src, Device{}, nbytes(), /*blocking=*/true);
}

template <typename T>
T Tensor::item() const {
  SPORE_CHECK(numel() == 1, "item(): expected a tensor with one element, got shape ",
              shape_str(shape()));
  Tensor c = to(Device{}).to(dtype_of_v<T>);
  return *static_cast<const T*>(c.data_ptr());
}
template <typename T>
std::vector<T> Tensor::to_vector() const {
  Tensor c = to(Device{}).to(dtype_of_v<T>).contiguous();
  const T* p = static_cast<const T*>(c.data_ptr());
  return std::vector<T>(p, p + c.numel());
}
#define SPORE_INSTANTIATE(T)          \
  template T Tensor::item<T>() const; \
  template std::vector<T> Tensor::to_vector<T>() const;
SPORE_INSTANTIATE(bool)
SPORE_INSTANTIATE(uint8_t)
SPORE_INSTANTIATE(int8_t)
SPORE_INSTANTIATE(int32_t)
SPORE_INSTANTIATE(int64_t)
SPORE_INSTANTIATE(Half)
SPORE_INSTANTIATE(BFloat16)
SPORE_INSTANTIATE(float)
SPORE_INSTANTIATE(double)
#undef SPORE_INSTANTIATE

// Strides for viewing (shape, strides) as new_shape without a copy, if possible (torch's rule:
// every group of old dims merged into new dims must be contiguous within itself).
bool view_strides(const Shape& shape, const Shape& strides, const Shape& new_shape, Shape* out) {
  out->assign(new_shape.size(), 0);
  if (shape.empty() || shape_numel(shape) == 0) {  // 0-d or empty: any shape of the same numel
    *out = contiguous_strides(new_shape);
    return true;
  }
  int64_t view_d = int64_t(new_shape.size()) - 1;
  int64_t chunk_base_stride = strides.empty() ? 1 : strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= shape[d];
    if (d == 0 || (shape[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
        (*out)[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

Tensor Tensor::detach() const {
  auto impl = std::make_shared<TensorImpl>(this->impl());
  impl->requires_grad = false;
  impl->grad_fn.reset();
  impl->grad.reset();
  impl->output_nr = 0;
  return Tensor(std::move(impl));
}

Tensor& Tensor::set_requires_grad(bool r) {
  SPORE_CHECK_TYPE(!r || is_floating(dtype()),
                   "set_requires_grad: only floating-point tensors can "
                   "require gradients, got dtype ",
                   dtype_name(dtype()));
  impl().requires_grad = r;
  return *this;
}
Tensor Tensor::grad() const { return impl().grad ? Tensor(impl().grad) : Tensor(); }
void Tensor::zero_grad() { impl().grad.reset(); }

// ---- factories -------------------------------------------------------------------------------
namespace {
// Fills a fresh contiguous tensor on the host with f(i) for each flat index i, then moves it to
// `device`.
template <typename F>
Tensor generate(const Shape& shape, DType dtype, Device device, F f) {
  Tensor t = Tensor::empty(shape, dtype, Device{});
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = static_cast<T*>(t.data_ptr());
    const int64_t n = t.numel();
    for (int64_t i = 0; i < n; ++i) p[i] = T(f(i));
  });
  return t.to(device);
}
}  // namespace

Tensor full(const Shape& shape, double value, DType dtype, Device device) {
  return generate(shape, dtype, device, [value](int64_t) { return value; });
}
Tensor zeros(const Shape& shape, DType dtype, Device device) {
  return full(shape, 0, dtype, device);
}
Tensor ones(const Shape& shape, DType dtype, Device device) {
  return full(shape, 1, dtype, device);
}
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.dtype(), t.device()); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), t.dtype(), t.device()); }
Tensor full_like(const Tensor& t, double v) { return full(t.shape(), v, t.dtype(), t.device()); }
Tensor scalar_tensor(double value, DType dtype, Device device) {
  return full({}, value, dtype, device);
}

Tensor arange(double start, double end, double step, DType dtype, Device device) {
  SPORE_CHECK(step != 0, "arange: step must be non-zero");
  const int64_t n = std::max<int64_t>(0, int64_t(std::ceil((end - start) / step)));
  return generate({n}, dtype, device, [=](int64_t i) { return start + double(i) * step; });
}
Tensor linspace(double start, double end, int64_t steps, DType dtype, Device device) {
  SPORE_CHECK(steps >= 0, "linspace: steps must be non-negative, got ", steps);
  const double d = steps > 1 ? (end - start) / double(steps - 1) : 0;
  return generate({steps}, dtype, device,
                  [=](int64_t i) { return i == steps - 1 ? end : start + double(i) * d; });
}
Tensor eye(int64_t n, int64_t m, DType dtype, Device device) {
  if (m < 0) m = n;
  SPORE_CHECK(n >= 0, "eye: n must be non-negative, got ", n);
  return generate({n, m}, dtype, device, [=](int64_t i) { return (i / m == i % m) ? 1.0 : 0.0; });
}
Tensor uniform(const Shape& shape, double low, double high, DType dtype, Device device) {
  const uint64_t s = random::seed(), base = random::reserve(uint64_t(shape_numel(shape)));
  return generate(shape, dtype, device, [=](int64_t i) {
    return low + (high - low) * random::uniform(s, base + uint64_t(i));
  });
}
Tensor normal(const Shape& shape, double mean, double stddev, DType dtype, Device device) {
  const uint64_t s = random::seed(), base = random::reserve(uint64_t(shape_numel(shape)));
  return generate(shape, dtype, device,
                  [=](int64_t i) { return mean + stddev * random::normal(s, base + uint64_t(i)); });
}
Tensor rand(const Shape& shape, DType dtype, Device device) {
  return uniform(shape, 0, 1, dtype, device);
}
Tensor randn(const Shape& shape, DType dtype, Device device) {
  return normal(shape, 0, 1, dtype, device);
}
Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype, Device device) {
  SPORE_CHECK(high > low, "randint: high (", high, ") must be greater than low (", low, ")");
  const uint64_t s = random::seed(), base = random::reserve(uint64_t(shape_numel(shape)));
  const uint64_t range = uint64_t(high - low);
  return generate(shape, dtype, device, [=](int64_t i) {
    return double(low + int64_t(random::bits(s, base + uint64_t(i)) % range));
  });
}
Tensor randperm(int64_t n, DType dtype, Device device) {
  std::vector<int64_t> p(size_t(std::max<int64_t>(n, 0)));
  for (int64_t i = 0; i < n; ++i) p[size_t(i)] = i;
  const uint64_t s = random::seed(), base = random::reserve(uint64_t(n));
  for (int64_t i = n - 1; i > 0; --i)  // Fisher-Yates
    std::swap(p[size_t(i)], p[size_t(random::bits(s, base + uint64_t(i)) % uint64_t(i + 1))]);
  return generate({n}, dtype, device, [&](int64_t i) { return double(p[size_t(i)]); });
}
Tensor from_buffer(const void* data, const Shape& shape, DType dtype, Device device) {
  Tensor t = Tensor::empty(shape, dtype, Device{});
  if (t.nbytes()) std::memcpy(t.data_ptr(), data, t.nbytes());
  return t.to(device);
}
Tensor tensor(const NestedList& values, DType dtype, Device device) {
  return generate(values.shape, dtype, device, [&](int64_t i) { return values.values[size_t(i)]; });
}

}  // namespace spore
