/* Spore's C API (AscendCL's role): load a compiled model file (`spore compile`, docs/deploy.md)
 * and run it from C or any language with a C FFI. Plain C99, in libspore_c.so.
 *
 * Stable ABI: only opaque handles, fixed-width integers and enums with explicit values cross the
 * boundary; new functions are appended, existing ones never change (SPORE_C_API_VERSION counts
 * additions). Every function returns a spore_status and never lets a C++ exception through;
 * on failure spore_last_error() holds the message (per thread) naming what was wrong.
 *
 * Threads: a model is immutable once loaded and may be shared by any number of threads; each
 * thread runs through its own context (a context holds the bound buffers and the graphs' memory,
 * and must not be used by two threads at once).
 *
 *   spore_runtime* rt;  spore_model* m;  spore_context* ctx;
 *   spore_runtime_create(0, &rt);
 *   if (spore_model_load_file(rt, "lenet.spore", &m) != SPORE_OK) puts(spore_last_error());
 *   spore_context_create(m, &ctx);
 *   int64_t shape[4] = {1, 1, 28, 28};
 *   spore_context_set_input(ctx, 0, x, sizeof x, SPORE_DTYPE_FLOAT32, shape, 4);
 *   spore_context_run(ctx);
 *   spore_context_get_output(ctx, 0, y, sizeof y);
 *   spore_context_destroy(ctx); spore_model_destroy(m); spore_runtime_destroy(rt);
 */
#ifndef SPORE_SPORE_C_H_
#define SPORE_SPORE_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define SPORE_C_EXPORT __attribute__((visibility("default")))
#else
#define SPORE_C_EXPORT
#endif

#define SPORE_C_API_VERSION 2 /* 2: devices (spore_model_device, spore_buffer_*, run_async) */

typedef enum spore_status {
  SPORE_OK = 0,
  SPORE_ERROR_INVALID_ARGUMENT = 1, /* a null handle or pointer, an index out of range, a size */
  SPORE_ERROR_IO = 2,               /* the file cannot be read, or is not a valid model file */
  SPORE_ERROR_SHAPE = 3,            /* an input's shape is not the model's */
  SPORE_ERROR_DTYPE = 4,            /* an input's dtype is not the model's */
  SPORE_ERROR_NOT_IMPLEMENTED = 5,  /* the model needs what this build does not have */
  SPORE_ERROR_STATE = 6,            /* e.g. run before every input is bound */
  SPORE_ERROR_OUT_OF_MEMORY = 7,
  SPORE_ERROR_INTERNAL = 8 /* a failure the library did not put into words: please report */
} spore_status;

typedef enum spore_dtype {
  SPORE_DTYPE_BOOL = 0,
  SPORE_DTYPE_UINT8 = 1,
  SPORE_DTYPE_INT8 = 2,
  SPORE_DTYPE_INT32 = 3,
  SPORE_DTYPE_INT64 = 4,
  SPORE_DTYPE_FLOAT16 = 5,
  SPORE_DTYPE_BFLOAT16 = 6,
  SPORE_DTYPE_FLOAT32 = 7,
  SPORE_DTYPE_FLOAT64 = 8
} spore_dtype;

typedef struct spore_runtime spore_runtime;
typedef struct spore_model spore_model;
typedef struct spore_context spore_context;
typedef struct spore_buffer spore_buffer;

/* A model input or output. The pointers stay valid while the model lives. shape[i] == -1: the
 * dynamic batch dimension (any size >= 1). */
typedef struct spore_tensor_info {
  const char* name;
  spore_dtype dtype;
  size_t rank;
  const int64_t* shape;
} spore_tensor_info;

SPORE_C_EXPORT uint32_t spore_c_api_version(void);
SPORE_C_EXPORT const char* spore_version(void); /* "0.1.0" */
/* The message of this thread's last failed call ("" when none failed). Valid until the next call
 * on this thread. */
SPORE_C_EXPORT const char* spore_last_error(void);
SPORE_C_EXPORT const char* spore_status_name(spore_status s); /* "SPORE_ERROR_SHAPE" */
SPORE_C_EXPORT size_t spore_dtype_size(spore_dtype t);        /* bytes per element, 0: unknown */

/* The runtime: process-wide settings. num_threads: the CPU threads kernels use (0: default). */
SPORE_C_EXPORT spore_status spore_runtime_create(int32_t num_threads, spore_runtime** out);
SPORE_C_EXPORT spore_status spore_runtime_destroy(spore_runtime* rt);

/* A compiled model, from a .spore file or from its bytes in memory (copied: the buffer may be
 * freed after the call). The runtime must outlive its models. */
SPORE_C_EXPORT spore_status spore_model_load_file(spore_runtime* rt, const char* path,
                                                  spore_model** out);
SPORE_C_EXPORT spore_status spore_model_load_buffer(spore_runtime* rt, const void* data,
                                                    size_t size, spore_model** out);
SPORE_C_EXPORT spore_status spore_model_destroy(spore_model* m);
SPORE_C_EXPORT spore_status spore_model_num_inputs(const spore_model* m, size_t* out);
SPORE_C_EXPORT spore_status spore_model_num_outputs(const spore_model* m, size_t* out);
SPORE_C_EXPORT spore_status spore_model_input_info(const spore_model* m, size_t index,
                                                   spore_tensor_info* out);
SPORE_C_EXPORT spore_status spore_model_output_info(const spore_model* m, size_t index,
                                                    spore_tensor_info* out);

/* A context: one per thread. The model must outlive its contexts. */
SPORE_C_EXPORT spore_status spore_context_create(spore_model* m, spore_context** out);
SPORE_C_EXPORT spore_status spore_context_destroy(spore_context* ctx);
/* Binds a host buffer to input `index` (not copied: it must stay valid until the run). dtype and
 * shape are checked against the model's input; nbytes against the shape. */
SPORE_C_EXPORT spore_status spore_context_set_input(spore_context* ctx, size_t index,
                                                    const void* data, size_t nbytes,
                                                    spore_dtype dtype, const int64_t* shape,
                                                    size_t rank);
/* Optional: binds a host buffer that run() writes output `index` into (an error when it is too
 * small for the output). Without one, read the output with spore_context_get_output. */
SPORE_C_EXPORT spore_status spore_context_set_output(spore_context* ctx, size_t index, void* data,
                                                     size_t nbytes);
/* Runs synchronously: the outputs are ready when it returns (run_async below does not wait). */
SPORE_C_EXPORT spore_status spore_context_run(spore_context* ctx);
/* The last run's output `index`: its shape (valid until the next run) and its bytes. */
SPORE_C_EXPORT spore_status spore_context_output_shape(const spore_context* ctx, size_t index,
                                                       const int64_t** shape, size_t* rank);
SPORE_C_EXPORT spore_status spore_context_get_output(const spore_context* ctx, size_t index,
                                                     void* data, size_t nbytes);

/* ---- Devices (version 2; AscendCL's aclrtMalloc / aclrtMemcpy / aclmdlExecuteAsync roles) ------
 * A model compiled for a device (`spore compile model.onnx --device GPU`) runs there. Host
 * buffers bound with spore_context_set_input / set_output are copied in at each run and out after
 * it; buffers in the device's memory (spore_buffer) are read and written in place instead. A
 * context runs on a stream of its own, so contexts on several threads overlap on the device.
 *
 *   spore_buffer *in, *out;
 *   spore_buffer_create(m, sizeof x, &in);  spore_buffer_create(m, sizeof y, &out);
 *   spore_buffer_write(in, x, sizeof x);
 *   spore_context_set_input_buffer(ctx, 0, in, SPORE_DTYPE_FLOAT32, shape, 4);
 *   spore_context_set_output_buffer(ctx, 0, out);
 *   spore_context_run_async(ctx);   ... other host work ...
 *   spore_buffer_read(out, y, sizeof y);   (waits for the run)
 */

/* The model's target: "CPU", "GPU" (valid while the model lives). */
SPORE_C_EXPORT spore_status spore_model_device(const spore_model* m, const char** out);
/* nbytes of memory where the model runs (its device; the host for a CPU model), uninitialised.
 * A buffer may outlive contexts it was bound to, not runs that use it. */
SPORE_C_EXPORT spore_status spore_buffer_create(const spore_model* m, size_t nbytes,
                                                spore_buffer** out);
SPORE_C_EXPORT spore_status spore_buffer_destroy(spore_buffer* b);
SPORE_C_EXPORT spore_status spore_buffer_size(const spore_buffer* b, size_t* out);
/* Copies nbytes (the buffer's size or less) from host memory into the buffer's start; done when
 * it returns. */
SPORE_C_EXPORT spore_status spore_buffer_write(spore_buffer* b, const void* src, size_t nbytes);
/* Copies nbytes from the buffer's start into host memory, after the work queued on the device so
 * far (a spore_context_run_async that writes the buffer) has run. */
SPORE_C_EXPORT spore_status spore_buffer_read(const spore_buffer* b, void* dst, size_t nbytes);
/* Binds a buffer to input `index` as a tensor of dtype and shape (checked as set_input checks a
 * host buffer; the tensor's bytes must fit in the buffer). The buffer must be the model's
 * device's. */
SPORE_C_EXPORT spore_status spore_context_set_input_buffer(spore_context* ctx, size_t index,
                                                           const spore_buffer* b, spore_dtype dtype,
                                                           const int64_t* shape, size_t rank);
/* Binds a buffer that runs write output `index` into (an error at run when it is too small). */
SPORE_C_EXPORT spore_status spore_context_set_output_buffer(spore_context* ctx, size_t index,
                                                            spore_buffer* b);
/* Queues the run on the context's stream and returns without waiting (a CPU model has run when it
 * returns). Bound host input buffers must stay unchanged until the run completes. The outputs'
 * shapes are known on return; their values after spore_context_synchronize (get_output and
 * spore_buffer_read wait by themselves). */
SPORE_C_EXPORT spore_status spore_context_run_async(spore_context* ctx);
/* Waits until the context's queued runs have completed. */
SPORE_C_EXPORT spore_status spore_context_synchronize(spore_context* ctx);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SPORE_SPORE_C_H_ */
