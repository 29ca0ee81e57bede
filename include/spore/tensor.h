// Tensor: a value-semantics handle (shared ownership) on a strided view of a Storage.
// Views (reshape, permute, slice, expand, ...) share storage; contiguous() copies when needed.
// Shapes and strides are in elements; strides may be 0 (broadcast) but never negative.
#pragma once
#include <functional>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "spore/allocator.h"
#include "spore/context.h"
#include "spore/device.h"
#include "spore/dtype.h"
#include "spore/error.h"

namespace spore {

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);  // "(2, 3)"
int64_t shape_numel(const Shape& s);
Shape contiguous_strides(const Shape& s);
// Strides that view (shape, strides) as new_shape without a copy; false when impossible.
bool view_strides(const Shape& shape, const Shape& strides, const Shape& new_shape, Shape* out);

namespace autograd {
struct Node;
}
namespace graph {
struct Value;
}

// Owns one block of device memory.
class Storage {
 public:
  Storage(size_t nbytes, Device device);  // from the allocator
  Storage(void* external, size_t nbytes, Device device, std::function<void(void*)> deleter);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  Allocator* allocator_ = nullptr;
  std::function<void(void*)> deleter_;
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;  // null for a symbolic (traced) tensor
  int64_t offset = 0;                // in elements
  Shape shape, strides;
  DType dtype = kFloat32;
  Device device;
  bool requires_grad = false;
  std::shared_ptr<autograd::Node> grad_fn;  // the op that produced this tensor, while recording
  int output_nr = 0;                        // which output of grad_fn
  std::shared_ptr<TensorImpl> grad;         // accumulated by backward()
  std::shared_ptr<graph::Value> traced;     // Graph mode: the symbolic value this stands for
};

// A nested initializer list of numbers: tensor({{1, 2}, {3, 4}}).
struct NestedList {
  std::vector<double> values;
  Shape shape;
  NestedList(double v) : values{v} {}  // NOLINT
  NestedList(std::initializer_list<NestedList> items);
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // -- factories -------------------------------------------------------------------------------
  static Tensor empty(const Shape& shape, DType dtype = kFloat32, Device device = {});

  // -- metadata --------------------------------------------------------------------------------
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Shape& strides() const { return impl().strides; }
  int64_t dim() const { return int64_t(impl().shape.size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t numel() const { return shape_numel(impl().shape); }
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().device; }
  int64_t offset() const { return impl().offset; }
  bool is_contiguous() const;
  bool is_symbolic() const { return impl().storage == nullptr; }
  size_t nbytes() const { return size_t(numel()) * itemsize(dtype()); }

  // -- data access ---------------------------------------------------------------------------
  // Address of element 0 of the view, in the tensor's device's memory: only the CPU may read it
  // on the host (kernels of the device read it there). item, to_vector and str copy to the host.
  void* data_ptr() const;
  template <typename T>
  T* data() const {
    SPORE_CHECK_TYPE(dtype_of_v<T> == dtype(), "data<", dtype_name(dtype_of_v<T>),
                     ">() called on a tensor of dtype ", dtype_name(dtype()));
    return static_cast<T*>(data_ptr());
  }
  // Overwrites this contiguous tensor's bytes with nbytes() bytes from host memory, in place (a
  // compiled graph that captured it sees the new values); waits until they are in place.
  void copy_from_host(const void* src) const;
  template <typename T>
  T item() const;  // the value of a one-element tensor, converted to T
  template <typename T>
  std::vector<T> to_vector() const;  // all elements in row-major order, converted to T

  // -- views (no copy) -------------------------------------------------------------------------
  Tensor reshape(const Shape& shape) const;  // view when possible, else a copy; one -1 allowed
  Tensor view(const Shape& shape) const;     // view or error
  Tensor permute(const std::vector<int64_t>& axes) const;
  Tensor transpose(int64_t a, int64_t b) const;
  Tensor t() const { return transpose(-2, -1); }
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;  // slice + squeeze
  Tensor expand(const Shape& shape) const;          // -1 keeps a dim; broadcast rules
  Tensor broadcast_to(const Shape& shape) const { return expand(shape); }
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor contiguous() const;  // this, if already contiguous
  Tensor clone() const;       // always a copy
  Tensor to(DType dtype) const;
  // A copy on `device` (this tensor, if already there); differentiable: the gradient goes back.
  // non_blocking: a copy to a device may still be queued on the device's stream when this returns.
  Tensor to(Device device, bool non_blocking = false) const;
  Tensor cpu() const { return to(Device{}); }
  Tensor astype(DType dtype) const { return to(dtype); }
  Tensor detach() const;  // shares storage, no autograd history

  // -- autograd --------------------------------------------------------------------------------
  bool requires_grad() const { return impl().requires_grad; }
  Tensor& set_requires_grad(bool r = true);
  Tensor grad() const;  // accumulated by backward(); undefined if none
  void zero_grad();
  void backward(const Tensor& gradient = {}) const;  // accumulates into leaves' grad()
  bool is_leaf() const { return impl().grad_fn == nullptr; }

  // -- arithmetic sugar (the ops in spore/ops.h) ------------------------------------------------
  Tensor operator-() const;
  Tensor sum(std::vector<int64_t> axes = {}, bool keepdims = false) const;
  Tensor mean(std::vector<int64_t> axes = {}, bool keepdims = false) const;
  Tensor matmul(const Tensor& other) const;

  // -- printing --------------------------------------------------------------------------------
  std::string str() const;  // numpy-style

  TensorImpl& impl() const {
    SPORE_CHECK_KIND(ErrorKind::RuntimeError, impl_,
                     "use of an undefined (default-constructed) Tensor");
    return *impl_;
  }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Factories. dtype defaults to float32, device to the current device (spore/context.h); the
// values are made on the host and copied there. *_like follow their argument's device.
Tensor zeros(const Shape& shape, DType dtype = kFloat32, Device device = current_device());
Tensor ones(const Shape& shape, DType dtype = kFloat32, Device device = current_device());
Tensor full(const Shape& shape, double value, DType dtype = kFloat32,
            Device device = current_device());
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);
Tensor scalar_tensor(double value, DType dtype = kFloat32,
                     Device device = current_device());  // 0-d
Tensor arange(double start, double end, double step = 1, DType dtype = kFloat32,
              Device device = current_device());
inline Tensor arange(double end, DType dtype = kFloat32) { return arange(0, end, 1, dtype); }
Tensor linspace(double start, double end, int64_t steps, DType dtype = kFloat32,
                Device device = current_device());
Tensor eye(int64_t n, int64_t m = -1, DType dtype = kFloat32, Device device = current_device());
Tensor rand(const Shape& shape, DType dtype = kFloat32,
            Device device = current_device());  // U[0, 1)
Tensor randn(const Shape& shape, DType dtype = kFloat32,
             Device device = current_device());  // N(0, 1)
Tensor uniform(const Shape& shape, double low, double high, DType dtype = kFloat32,
               Device device = current_device());
Tensor normal(const Shape& shape, double mean, double stddev, DType dtype = kFloat32,
              Device device = current_device());
Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype = kInt64,
               Device device = current_device());
Tensor randperm(int64_t n, DType dtype = kInt64, Device device = current_device());
// Copies the elements of a host buffer.
Tensor from_buffer(const void* data, const Shape& shape, DType dtype,
                   Device device = current_device());
template <typename T>
Tensor from_vector(const std::vector<T>& v, const Shape& shape, Device device = current_device()) {
  SPORE_CHECK(int64_t(v.size()) == shape_numel(shape), "from_vector: ", v.size(),
              " values do not fill shape ", shape_str(shape), " (", shape_numel(shape),
              " elements)");
  return from_buffer(v.data(), shape, dtype_of_v<T>, device);
}
Tensor tensor(const NestedList& values, DType dtype = kFloat32, Device device = current_device());

}  // namespace spore
