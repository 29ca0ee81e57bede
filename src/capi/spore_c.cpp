// The C API (spore/spore_c.h) over spore::CompiledModel / InferenceSession: libspore_c.so. Every
// entry point runs its body inside guard(), which turns any exception into a status code and this
// thread's last-error text, so nothing C++ crosses the boundary.
#include "spore/spore_c.h"

#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "spore/context.h"
#include "spore/deploy.h"
#include "spore/ops.h"
#include "spore/version.h"

struct spore_runtime {
  int32_t num_threads = 0;
};

struct spore_model {
  spore::CompiledModel model;
  spore::Device device;                                     // where it runs
  std::vector<std::vector<int64_t>> in_shapes, out_shapes;  // what spore_tensor_info points at
};

// Memory on a model's device: a uint8 tensor of its size.
struct spore_buffer {
  spore::Tensor bytes;
};

struct spore_context {
  spore_model* model;
  spore::InferenceSession session;
  std::unique_ptr<spore::Stream> stream;  // a device model's runs and copies (null on the CPU)
  std::vector<spore::Tensor> inputs;      // bound host buffers or device buffers (undefined: not
                                          // bound)
  std::vector<void*> out_data;            // bound host output buffers (nullptr: none)
  std::vector<size_t> out_bytes;
  std::vector<spore_buffer*> out_buffers;  // bound device output buffers (nullptr: none)
  std::vector<spore::Tensor> outputs;      // the last run's
  explicit spore_context(spore_model* m) : model(m), session(m->model) {}
};

namespace {

thread_local std::string t_last_error;

const spore::DType kDTypes[] = {spore::kBool,     spore::DType::UInt8, spore::DType::Int8,
                                spore::kInt32,    spore::kInt64,       spore::kFloat16,
                                spore::kBFloat16, spore::kFloat32,     spore::kFloat64};

spore_dtype to_c(spore::DType t) {
  for (int i = 0; i < 9; ++i)
    if (kDTypes[i] == t) return spore_dtype(i);
  return SPORE_DTYPE_FLOAT32;
}

// A failure found by this layer: its status and message.
struct CError {
  spore_status status;
  std::string message;
};

template <class F>
spore_status guard(const char* fn, F&& body) {
  try {
    body();
    t_last_error.clear();
    return SPORE_OK;
  } catch (const CError& e) {
    t_last_error = std::string(fn) + ": " + e.message;
    return e.status;
  } catch (const spore::Error& e) {
    t_last_error = std::string(fn) + ": " + e.what();
    switch (e.kind()) {
      case spore::ErrorKind::IOError:
        return SPORE_ERROR_IO;
      case spore::ErrorKind::TypeError:
        return SPORE_ERROR_DTYPE;
      case spore::ErrorKind::NotImplemented:
        return SPORE_ERROR_NOT_IMPLEMENTED;
      case spore::ErrorKind::ValueError:
      case spore::ErrorKind::IndexError:
        return SPORE_ERROR_INVALID_ARGUMENT;
      default:
        return std::strstr(e.what(), "internal error") ? SPORE_ERROR_INTERNAL : SPORE_ERROR_STATE;
    }
  } catch (const std::bad_alloc&) {
    t_last_error = std::string(fn) + ": out of memory";
    return SPORE_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    t_last_error = std::string(fn) + ": internal error: " + e.what();
    return SPORE_ERROR_INTERNAL;
  } catch (...) {
    t_last_error = std::string(fn) + ": internal error: an unknown exception";
    return SPORE_ERROR_INTERNAL;
  }
}

template <class... A>
void require(bool ok, spore_status s, const A&... msg) {
  if (!ok) throw CError{s, spore::detail::concat(msg...)};
}

std::string dims(const int64_t* shape, size_t rank) {
  std::string s = "(";
  for (size_t i = 0; i < rank; ++i)
    s += (i ? ", " : "") + (shape[i] < 0 ? std::string("N") : std::to_string(shape[i]));
  return s + (rank == 1 ? ",)" : ")");
}

void fill(const spore::ModelTensorInfo& io, const std::vector<int64_t>& shape,
          spore_tensor_info* out) {
  out->name = io.name.c_str();
  out->dtype = to_c(io.dtype);
  out->rank = shape.size();
  out->shape = shape.data();
}

// The target's device 0 ("CPU" -> the host).
spore::Device device_of(const spore::CompiledModel& m) {
  for (spore::DeviceType t : {spore::DeviceType::CPU, spore::DeviceType::GPU,
                              spore::DeviceType::Ascend, spore::DeviceType::Test})
    if (m.device() == spore::device_type_name(t)) return spore::Device{t, 0};
  return spore::Device{};
}

spore_model* make_model(spore::CompiledModel m) {
  const spore::Device d = device_of(m);
  auto* h = new spore_model{std::move(m), d, {}, {}};
  for (const auto& io : h->model.inputs()) h->in_shapes.push_back(io.shape);
  for (const auto& io : h->model.outputs()) h->out_shapes.push_back(io.shape);
  return h;
}

}  // namespace

extern "C" {

uint32_t spore_c_api_version(void) { return SPORE_C_API_VERSION; }
const char* spore_version(void) { return SPORE_VERSION; }
const char* spore_last_error(void) { return t_last_error.c_str(); }

const char* spore_status_name(spore_status s) {
  switch (s) {
    case SPORE_OK:
      return "SPORE_OK";
    case SPORE_ERROR_INVALID_ARGUMENT:
      return "SPORE_ERROR_INVALID_ARGUMENT";
    case SPORE_ERROR_IO:
      return "SPORE_ERROR_IO";
    case SPORE_ERROR_SHAPE:
      return "SPORE_ERROR_SHAPE";
    case SPORE_ERROR_DTYPE:
      return "SPORE_ERROR_DTYPE";
    case SPORE_ERROR_NOT_IMPLEMENTED:
      return "SPORE_ERROR_NOT_IMPLEMENTED";
    case SPORE_ERROR_STATE:
      return "SPORE_ERROR_STATE";
    case SPORE_ERROR_OUT_OF_MEMORY:
      return "SPORE_ERROR_OUT_OF_MEMORY";
    case SPORE_ERROR_INTERNAL:
      return "SPORE_ERROR_INTERNAL";
  }
  return "SPORE_ERROR_UNKNOWN";
}

size_t spore_dtype_size(spore_dtype t) { return unsigned(t) < 9 ? spore::itemsize(kDTypes[t]) : 0; }

spore_status spore_runtime_create(int32_t num_threads, spore_runtime** out) {
  return guard(__func__, [&] {
    require(out != nullptr, SPORE_ERROR_INVALID_ARGUMENT, "out is null");
    *out = nullptr;
    require(num_threads >= 0, SPORE_ERROR_INVALID_ARGUMENT, "num_threads is ", num_threads,
            "; expected 0 (the default) or a positive count");
    if (num_threads > 0) spore::set_num_threads(num_threads);
    *out = new spore_runtime{num_threads};
  });
}

spore_status spore_runtime_destroy(spore_runtime* rt) {
  return guard(__func__, [&] { delete rt; });
}

spore_status spore_model_load_file(spore_runtime* rt, const char* path, spore_model** out) {
  return guard(__func__, [&] {
    require(out != nullptr, SPORE_ERROR_INVALID_ARGUMENT, "out is null");
    *out = nullptr;
    require(rt != nullptr, SPORE_ERROR_INVALID_ARGUMENT, "the runtime is null");
    require(path != nullptr, SPORE_ERROR_INVALID_ARGUMENT, "path is null");
    *out = make_model(spore::CompiledModel::load(path));
  });
}

spore_status spore_model_load_buffer(spore_runtime* rt, const void* data, size_t size,
                                     spore_model** out) {
  return guard(__func__, [&] {
    require(out != nullptr, SPORE_ERROR_INVALID_ARGUMENT, "out is null");
    *out = nullptr;
    require(rt != nullptr, SPORE_ERROR_INVALID_ARGUMENT, "the runtime is null");
    require(data != nullptr || size == 0, SPORE_ERROR_INVALID_ARGUMENT, "data is null");
    *out = make_model(spore::CompiledModel::from_buffer(data, size, "<buffer>"));
  });
}

spore_status spore_model_destroy(spore_model* m) {
  return guard(__func__, [&] { delete m; });
}

spore_status spore_model_num_inputs(const spore_model* m, size_t* out) {
  return guard(__func__, [&] {
    require(m && out, SPORE_ERROR_INVALID_ARGUMENT, "the model or out is null");
    *out = m->model.inputs().size();
  });
}

spore_status spore_model_num_outputs(const spore_model* m, size_t* out) {
  return guard(__func__, [&] {
    require(m && out, SPORE_ERROR_INVALID_ARGUMENT, "the model or out is null");
    *out = m->model.outputs().size();
  });
}

spore_status spore_model_input_info(const spore_model* m, size_t index, spore_tensor_info* out) {
  return guard(__func__, [&] {
    require(m && out, SPORE_ERROR_INVALID_ARGUMENT, "the model or out is null");
    require(index < m->model.inputs().size(), SPORE_ERROR_INVALID_ARGUMENT, "input index ", index,
            " is out of range; the model has ", m->model.inputs().size(), " input(s)");
    fill(m->model.inputs()[index], m->in_shapes[index], out);
  });
}

spore_status spore_model_output_info(const spore_model* m, size_t index, spore_tensor_info* out) {
  return guard(__func__, [&] {
    require(m && out, SPORE_ERROR_INVALID_ARGUMENT, "the model or out is null");
    require(index < m->model.outputs().size(), SPORE_ERROR_INVALID_ARGUMENT, "output index ", index,
            " is out of range; the model has ", m->model.outputs().size(), " output(s)");
    fill(m->model.outputs()[index], m->out_shapes[index], out);
  });
}

spore_status spore_context_create(spore_model* m, spore_context** out) {
  return guard(__func__, [&] {
    require(out != nullptr, SPORE_ERROR_INVALID_ARGUMENT, "out is null");
    *out = nullptr;
    require(m != nullptr, SPORE_ERROR_INVALID_ARGUMENT, "the model is null");
    auto* c = new spore_context(m);
    c->inputs.resize(m->model.inputs().size());
    c->out_data.resize(m->model.outputs().size(), nullptr);
    c->out_bytes.resize(m->model.outputs().size(), 0);
    c->out_buffers.resize(m->model.outputs().size(), nullptr);
    if (m->device.type != spore::DeviceType::CPU)
      c->stream = spore::get_backend(m->device.type).new_stream(m->device.index);
    *out = c;
  });
}

spore_status spore_context_destroy(spore_context* ctx) {
  return guard(__func__, [&] { delete ctx; });
}

}  // extern "C"

namespace {

// Input `index` of ctx's model as dtype and shape: checked against the model, returned as a shape.
spore::Shape checked_input(const spore_context* ctx, size_t index, spore_dtype dtype,
                           const int64_t* shape, size_t rank) {
  require(ctx != nullptr, SPORE_ERROR_INVALID_ARGUMENT, "the context is null");
  const auto& ins = ctx->model->model.inputs();
  require(index < ins.size(), SPORE_ERROR_INVALID_ARGUMENT, "input index ", index,
          " is out of range; the model has ", ins.size(), " input(s)");
  const spore::ModelTensorInfo& io = ins[index];
  require(shape != nullptr || rank == 0, SPORE_ERROR_INVALID_ARGUMENT, "input \"", io.name,
          "\": shape is null");
  require(unsigned(dtype) < 9, SPORE_ERROR_DTYPE, "input \"", io.name, "\": dtype code ",
          int(dtype), " is not a spore_dtype");
  require(kDTypes[dtype] == io.dtype, SPORE_ERROR_DTYPE, "input \"", io.name, "\" must be ",
          spore::dtype_name(io.dtype), ", got ", spore::dtype_name(kDTypes[dtype]));
  bool fits = rank == io.shape.size();
  for (size_t d = 0; fits && d < rank; ++d)
    fits = io.shape[d] < 0 ? shape[d] >= 1 : shape[d] == io.shape[d];
  require(fits, SPORE_ERROR_SHAPE, "input \"", io.name, "\" must have shape ",
          dims(io.shape.data(), io.shape.size()), ", got ", dims(shape, rank));
  return spore::Shape(shape, shape + rank);
}

// Waits for a device context's queued work (a CPU model's has run already).
void wait_for(const spore_context* ctx) {
  if (ctx->stream) ctx->stream->synchronize();
}

}  // namespace

extern "C" {

spore_status spore_context_set_input(spore_context* ctx, size_t index, const void* data,
                                     size_t nbytes, spore_dtype dtype, const int64_t* shape,
                                     size_t rank) {
  return guard(__func__, [&] {
    const spore::Shape s = checked_input(ctx, index, dtype, shape, rank);
    const spore::ModelTensorInfo& io = ctx->model->model.inputs()[index];
    const size_t need = size_t(spore::shape_numel(s)) * spore::itemsize(io.dtype);
    require(nbytes == need, SPORE_ERROR_INVALID_ARGUMENT, "input \"", io.name, "\": ", nbytes,
            " bytes given, a ", spore::dtype_name(io.dtype), dims(shape, rank), " tensor has ",
            need);
    require(data != nullptr || need == 0, SPORE_ERROR_INVALID_ARGUMENT, "input \"", io.name,
            "\": data is null");
    // A view of the caller's buffer: read (copied into the graph's arena) only by run().
    auto storage = std::make_shared<spore::Storage>(const_cast<void*>(data), nbytes,
                                                    spore::Device{}, [](void*) {});
    auto impl = std::make_shared<spore::TensorImpl>();
    impl->storage = std::move(storage);
    impl->shape = s;
    impl->strides = spore::contiguous_strides(s);
    impl->dtype = io.dtype;
    ctx->inputs[index] = spore::Tensor(std::move(impl));
  });
}

spore_status spore_context_set_output(spore_context* ctx, size_t index, void* data, size_t nbytes) {
  return guard(__func__, [&] {
    require(ctx != nullptr, SPORE_ERROR_INVALID_ARGUMENT, "the context is null");
    require(index < ctx->out_data.size(), SPORE_ERROR_INVALID_ARGUMENT, "output index ", index,
            " is out of range; the model has ", ctx->out_data.size(), " output(s)");
    require(data != nullptr || nbytes == 0, SPORE_ERROR_INVALID_ARGUMENT, "data is null");
    ctx->out_data[index] = data;
    ctx->out_bytes[index] = nbytes;
  });
}

}  // extern "C"

namespace {

// A run queued on ctx's stream: inputs in, the graphs, the outputs into the bound buffers (host
// buffers are written when it returns, device buffers in stream order).
void queue_run(spore_context* ctx) {
  require(ctx != nullptr, SPORE_ERROR_INVALID_ARGUMENT, "the context is null");
  const auto& ins = ctx->model->model.inputs();
  for (size_t i = 0; i < ins.size(); ++i)
    require(ctx->inputs[i].defined(), SPORE_ERROR_STATE, "input ", i, " (\"", ins[i].name,
            "\") is not bound; call spore_context_set_input first");
  ctx->outputs.clear();
  // Everything this run queues (input copies, kernels, output copies) goes on the context's
  // stream, in order.
  std::optional<spore::StreamGuard> on;
  if (ctx->stream) on.emplace(*ctx->stream);
  std::vector<spore::Tensor> y = ctx->session.run(ctx->inputs);
  for (size_t k = 0; k < y.size(); ++k) y[k] = y[k].contiguous();
  ctx->outputs = std::move(y);
  for (size_t k = 0; k < ctx->outputs.size(); ++k) {
    const spore::Tensor& t = ctx->outputs[k];
    const char* name = ctx->model->model.outputs()[k].name.c_str();
    if (spore_buffer* b = ctx->out_buffers[k]) {
      require(b->bytes.nbytes() >= t.nbytes(), SPORE_ERROR_INVALID_ARGUMENT, "output ", k, " (\"",
              name, "\") is ", spore::dtype_name(t.dtype()), spore::shape_str(t.shape()), ", ",
              t.nbytes(), " bytes; the bound buffer has ", b->bytes.nbytes());
      spore::copy_bytes(b->bytes.data_ptr(), b->bytes.device(), t.data_ptr(), t.device(),
                        t.nbytes(), /*blocking=*/false);
    }
    if (!ctx->out_data[k]) continue;
    require(ctx->out_bytes[k] >= t.nbytes(), SPORE_ERROR_INVALID_ARGUMENT, "output ", k, " (\"",
            name, "\") is ", spore::dtype_name(t.dtype()), spore::shape_str(t.shape()), ", ",
            t.nbytes(), " bytes; the bound buffer has ", ctx->out_bytes[k]);
    spore::copy_bytes(ctx->out_data[k], spore::Device{}, t.data_ptr(), t.device(), t.nbytes(),
                      /*blocking=*/true);
  }
}

}  // namespace

extern "C" {

spore_status spore_context_run(spore_context* ctx) {
  return guard(__func__, [&] {
    queue_run(ctx);
    wait_for(ctx);
  });
}

spore_status spore_context_run_async(spore_context* ctx) {
  return guard(__func__, [&] { queue_run(ctx); });
}

spore_status spore_context_synchronize(spore_context* ctx) {
  return guard(__func__, [&] {
    require(ctx != nullptr, SPORE_ERROR_INVALID_ARGUMENT, "the context is null");
    wait_for(ctx);
  });
}

spore_status spore_context_output_shape(const spore_context* ctx, size_t index,
                                        const int64_t** shape, size_t* rank) {
  return guard(__func__, [&] {
    require(ctx && shape && rank, SPORE_ERROR_INVALID_ARGUMENT,
            "the context, shape or rank is null");
    require(!ctx->outputs.empty(), SPORE_ERROR_STATE, "the context has not run yet");
    require(index < ctx->outputs.size(), SPORE_ERROR_INVALID_ARGUMENT, "output index ", index,
            " is out of range; the model has ", ctx->outputs.size(), " output(s)");
    *shape = ctx->outputs[index].shape().data();
    *rank = ctx->outputs[index].shape().size();
  });
}

spore_status spore_context_get_output(const spore_context* ctx, size_t index, void* data,
                                      size_t nbytes) {
  return guard(__func__, [&] {
    require(ctx != nullptr, SPORE_ERROR_INVALID_ARGUMENT, "the context is null");
    require(!ctx->outputs.empty(), SPORE_ERROR_STATE, "the context has not run yet");
    require(index < ctx->outputs.size(), SPORE_ERROR_INVALID_ARGUMENT, "output index ", index,
            " is out of range; the model has ", ctx->outputs.size(), " output(s)");
    const spore::Tensor& t = ctx->outputs[index];
    require(nbytes >= t.nbytes() && (data != nullptr || t.nbytes() == 0),
            SPORE_ERROR_INVALID_ARGUMENT, "output ", index, " is ", spore::dtype_name(t.dtype()),
            spore::shape_str(t.shape()), ", ", t.nbytes(), " bytes; the buffer has ", nbytes);
    if (t.nbytes()) {
      std::optional<spore::StreamGuard> on;
      if (ctx->stream) on.emplace(*ctx->stream);  // after the run that made it
      spore::copy_bytes(data, spore::Device{}, t.data_ptr(), t.device(), t.nbytes(),
                        /*blocking=*/true);
    }
  });
}

// ---- devices ------------------------------------------------------------------------------------

spore_status spore_model_device(const spore_model* m, const char** out) {
  return guard(__func__, [&] {
    require(m && out, SPORE_ERROR_INVALID_ARGUMENT, "the model or out is null");
    *out = spore::device_type_name(m->device.type);
  });
}

spore_status spore_buffer_create(const spore_model* m, size_t nbytes, spore_buffer** out) {
  return guard(__func__, [&] {
    require(out != nullptr, SPORE_ERROR_INVALID_ARGUMENT, "out is null");
    *out = nullptr;
    require(m != nullptr, SPORE_ERROR_INVALID_ARGUMENT, "the model is null");
    require(nbytes <= (size_t(1) << 40), SPORE_ERROR_INVALID_ARGUMENT, "nbytes is ", nbytes,
            "; at most 2^40 bytes");
    *out =
        new spore_buffer{spore::Tensor::empty({int64_t(nbytes)}, spore::DType::UInt8, m->device)};
  });
}

spore_status spore_buffer_destroy(spore_buffer* b) {
  return guard(__func__, [&] { delete b; });
}

spore_status spore_buffer_size(const spore_buffer* b, size_t* out) {
  return guard(__func__, [&] {
    require(b && out, SPORE_ERROR_INVALID_ARGUMENT, "the buffer or out is null");
    *out = b->bytes.nbytes();
  });
}

spore_status spore_buffer_write(spore_buffer* b, const void* src, size_t nbytes) {
  return guard(__func__, [&] {
    require(b != nullptr, SPORE_ERROR_INVALID_ARGUMENT, "the buffer is null");
    require(src != nullptr || nbytes == 0, SPORE_ERROR_INVALID_ARGUMENT, "src is null");
    require(nbytes <= b->bytes.nbytes(), SPORE_ERROR_INVALID_ARGUMENT, nbytes,
            " bytes do not fit in the ", b->bytes.nbytes(), "-byte buffer");
    if (nbytes)
      spore::copy_bytes(b->bytes.data_ptr(), b->bytes.device(), src, spore::Device{}, nbytes,
                        /*blocking=*/true);
  });
}

spore_status spore_buffer_read(const spore_buffer* b, void* dst, size_t nbytes) {
  return guard(__func__, [&] {
    require(b != nullptr, SPORE_ERROR_INVALID_ARGUMENT, "the buffer is null");
    require(dst != nullptr || nbytes == 0, SPORE_ERROR_INVALID_ARGUMENT, "dst is null");
    require(nbytes <= b->bytes.nbytes(), SPORE_ERROR_INVALID_ARGUMENT, "the buffer has ",
            b->bytes.nbytes(), " bytes, ", nbytes, " were asked for");
    if (nbytes == 0) return;
    // After every run queued on the device so far, whichever context's stream it is on.
    spore::synchronize(b->bytes.device());
    spore::copy_bytes(dst, spore::Device{}, b->bytes.data_ptr(), b->bytes.device(), nbytes,
                      /*blocking=*/true);
  });
}

spore_status spore_context_set_input_buffer(spore_context* ctx, size_t index, const spore_buffer* b,
                                            spore_dtype dtype, const int64_t* shape, size_t rank) {
  return guard(__func__, [&] {
    const spore::Shape s = checked_input(ctx, index, dtype, shape, rank);
    const spore::ModelTensorInfo& io = ctx->model->model.inputs()[index];
    require(b != nullptr, SPORE_ERROR_INVALID_ARGUMENT, "input \"", io.name,
            "\": the buffer is null");
    require(b->bytes.device() == ctx->model->device, SPORE_ERROR_INVALID_ARGUMENT, "input \"",
            io.name, "\": the buffer is on ", spore::to_string(b->bytes.device()),
            ", the model runs on ", spore::to_string(ctx->model->device),
            "; create it with spore_buffer_create on this model");
    const size_t need = size_t(spore::shape_numel(s)) * spore::itemsize(io.dtype);
    require(need <= b->bytes.nbytes(), SPORE_ERROR_INVALID_ARGUMENT, "input \"", io.name, "\": a ",
            spore::dtype_name(io.dtype), dims(shape, rank), " tensor has ", need,
            " bytes, the buffer ", b->bytes.nbytes());
    auto impl = std::make_shared<spore::TensorImpl>();  // the buffer's bytes seen as that tensor
    impl->storage = b->bytes.impl().storage;
    impl->offset = b->bytes.offset();
    impl->shape = s;
    impl->strides = spore::contiguous_strides(s);
    impl->dtype = io.dtype;
    impl->device = b->bytes.device();
    ctx->inputs[index] = spore::Tensor(std::move(impl));
  });
}

spore_status spore_context_set_output_buffer(spore_context* ctx, size_t index, spore_buffer* b) {
  return guard(__func__, [&] {
    require(ctx != nullptr, SPORE_ERROR_INVALID_ARGUMENT, "the context is null");
    require(index < ctx->out_buffers.size(), SPORE_ERROR_INVALID_ARGUMENT, "output index ", index,
            " is out of range; the model has ", ctx->out_buffers.size(), " output(s)");
    require(b == nullptr || b->bytes.device() == ctx->model->device, SPORE_ERROR_INVALID_ARGUMENT,
            "output ", index, ": the buffer is on ",
            spore::to_string(b ? b->bytes.device() : spore::Device{}), ", the model runs on ",
            spore::to_string(ctx->model->device),
            "; create it with spore_buffer_create on this model");
    ctx->out_buffers[index] = b;
  });
}

}  // extern "C"
