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

#define SPORE_C_API_VERSION 1

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
/* Runs synchronously: the outputs are ready when it returns. */
SPORE_C_EXPORT spore_status spore_context_run(spore_context* ctx);
/* The last run's output `index`: its shape (valid until the next run) and its bytes. */
SPORE_C_EXPORT spore_status spore_context_output_shape(const spore_context* ctx, size_t index,
                                                       const int64_t** shape, size_t* rank);
SPORE_C_EXPORT spore_status spore_context_get_output(const spore_context* ctx, size_t index,
                                                     void* data, size_t nbytes);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SPORE_SPORE_C_H_ */
