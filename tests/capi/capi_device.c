/* The C API's device buffers (run by tests/python/test_deploy.py with SPORE_TEST_DEVICE=1, which
 * builds this file with cc against include/ and libspore_c): a model compiled for a device runs
 * from host buffers and from buffers in the device's memory, synchronously and queued
 * (run_async), with the outputs of the CPU model compiled from the same ONNX file; a buffer too
 * small for an input, an output or a write, and a CPU buffer bound to a device model, are errors
 * naming the problem.
 *
 *   capi_device DEVICE_MODEL.spore CPU_MODEL.spore   (one float32 input (N, 1, 28, 28), output
 *                                                     (N, 10))
 */
#include <math.h>
#include <spore/spore_c.h>
#include <stdio.h>
#include <string.h>

static int failures = 0;

static void check(int ok, const char* what) {
  if (!ok) {
    printf("FAIL %s (last error: %s)\n", what, spore_last_error());
    ++failures;
  } else {
    printf("ok   %s\n", what);
  }
}

static void expect_error(spore_status got, spore_status want, const char* needle,
                         const char* what) {
  const char* msg = spore_last_error();
  if (got != want || !strstr(msg, needle)) {
    printf("FAIL %s: status %s (want %s), message: %s (want it to contain \"%s\")\n", what,
           spore_status_name(got), spore_status_name(want), msg, needle);
    ++failures;
  } else {
    printf("ok   %s: %s: %s\n", what, spore_status_name(got), msg);
  }
}

/* The largest difference over the largest magnitude of want. */
static double rel_error(const float* got, const float* want, int n) {
  double scale = 1e-30, err = 0;
  for (int i = 0; i < n; ++i) {
    if (fabs(want[i]) > scale) scale = fabs(want[i]);
    if (fabs(got[i] - want[i]) > err) err = fabs(got[i] - want[i]);
  }
  return err / scale;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s DEVICE_MODEL.spore CPU_MODEL.spore\n", argv[0]);
    return 2;
  }
  static float x[2 * 28 * 28], want[2 * 10], y_host[2 * 10], y_dev[2 * 10];
  for (int i = 0; i < 2 * 28 * 28; ++i) x[i] = (float)((i * 37 % 101) - 50) / 50.0f;
  const int64_t shape[4] = {2, 1, 28, 28};
  spore_runtime* rt = NULL;
  spore_model *dev = NULL, *cpu = NULL;
  spore_context *ctx = NULL, *cpu_ctx = NULL;
  check(spore_c_api_version() >= 2, "C API version 2 (devices)");
  check(spore_runtime_create(0, &rt) == SPORE_OK, "runtime");
  check(spore_model_load_file(rt, argv[1], &dev) == SPORE_OK, "load the device model");
  check(spore_model_load_file(rt, argv[2], &cpu) == SPORE_OK, "load the CPU model");
  if (!dev || !cpu) return 1;
  const char* where = NULL;
  check(spore_model_device(dev, &where) == SPORE_OK && strcmp(where, "CPU") != 0,
        "the device model's target is not the CPU");
  printf("     device model target: %s\n", where ? where : "?");

  /* The reference: the CPU model from host buffers. */
  check(spore_context_create(cpu, &cpu_ctx) == SPORE_OK, "CPU context");
  spore_context_set_input(cpu_ctx, 0, x, sizeof x, SPORE_DTYPE_FLOAT32, shape, 4);
  check(spore_context_run(cpu_ctx) == SPORE_OK, "CPU run");
  spore_context_get_output(cpu_ctx, 0, want, sizeof want);

  /* The device model from host buffers: copied in and out by the runtime. */
  check(spore_context_create(dev, &ctx) == SPORE_OK, "device context");
  check(spore_context_set_input(ctx, 0, x, sizeof x, SPORE_DTYPE_FLOAT32, shape, 4) == SPORE_OK,
        "bind a host input");
  check(spore_context_run(ctx) == SPORE_OK, "run from host buffers");
  check(spore_context_get_output(ctx, 0, y_host, sizeof y_host) == SPORE_OK, "read the output");
  double e = rel_error(y_host, want, 20);
  printf("     host buffers: relative error %.3g against the CPU model\n", e);
  check(e <= 1e-5, "host buffers give the CPU model's outputs");

  /* Device buffers: written once, read in place by the run, the output written on the device. */
  spore_buffer *in = NULL, *out = NULL, *tiny = NULL;
  size_t size = 0;
  check(spore_buffer_create(dev, sizeof x, &in) == SPORE_OK, "input buffer");
  check(spore_buffer_create(dev, sizeof y_dev, &out) == SPORE_OK, "output buffer");
  check(spore_buffer_size(in, &size) == SPORE_OK && size == sizeof x, "buffer size");
  check(spore_buffer_write(in, x, sizeof x) == SPORE_OK, "write the input buffer");
  check(spore_context_set_input_buffer(ctx, 0, in, SPORE_DTYPE_FLOAT32, shape, 4) == SPORE_OK,
        "bind the input buffer");
  check(spore_context_set_output_buffer(ctx, 0, out) == SPORE_OK, "bind the output buffer");
  for (int round = 0; round < 2; ++round) {
    memset(y_dev, 0, sizeof y_dev);
    check(spore_context_run_async(ctx) == SPORE_OK, "run_async from device buffers");
    if (round == 0) check(spore_context_synchronize(ctx) == SPORE_OK, "synchronize");
    /* round 1: the read waits for the queued run by itself */
    check(spore_buffer_read(out, y_dev, sizeof y_dev) == SPORE_OK, "read the output buffer");
    check(memcmp(y_dev, y_host, sizeof y_dev) == 0, "device buffers give the host buffers' output");
  }

  /* Errors naming the problem. */
  check(spore_buffer_create(dev, 16, &tiny) == SPORE_OK, "a 16-byte buffer");
  expect_error(spore_context_set_input_buffer(ctx, 0, tiny, SPORE_DTYPE_FLOAT32, shape, 4),
               SPORE_ERROR_INVALID_ARGUMENT, "6272 bytes, the buffer 16",
               "an input buffer too small");
  expect_error(spore_buffer_write(tiny, x, sizeof x), SPORE_ERROR_INVALID_ARGUMENT,
               "do not fit in the 16-byte buffer", "a write past the buffer");
  check(spore_context_set_output_buffer(ctx, 0, tiny) == SPORE_OK, "bind a small output buffer");
  expect_error(spore_context_run(ctx), SPORE_ERROR_INVALID_ARGUMENT, "the bound buffer has 16",
               "an output buffer too small");
  spore_buffer* host_buf = NULL;
  check(spore_buffer_create(cpu, sizeof x, &host_buf) == SPORE_OK, "a CPU model's buffer");
  expect_error(spore_context_set_input_buffer(ctx, 0, host_buf, SPORE_DTYPE_FLOAT32, shape, 4),
               SPORE_ERROR_INVALID_ARGUMENT, "the buffer is on CPU:0",
               "a host buffer bound to a device model");

  spore_buffer_destroy(host_buf);
  spore_buffer_destroy(tiny);
  spore_buffer_destroy(out);
  spore_buffer_destroy(in);
  spore_context_destroy(ctx);
  spore_context_destroy(cpu_ctx);
  spore_model_destroy(dev);
  spore_model_destroy(cpu);
  spore_runtime_destroy(rt);
  printf("%d failure(s)\n", failures);
  return failures ? 1 : 0;
}
