/* The C API's error paths (run by tests/python/test_deploy.py, which builds this file with cc
 * against include/ and libspore_c): a bad file, a truncated buffer, a wrong input shape, a wrong
 * dtype, running unbound and null handles each return their error status with a message naming
 * the problem; then two threads share one model through a context each and get equal outputs.
 *
 *   capi_errors MODEL.spore     (a model with one float32 input of shape (N, 1, 28, 28))
 */
#include <pthread.h>
#include <spore/spore_c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

static void expect(spore_status got, spore_status want, const char* needle, const char* what) {
  const char* msg = spore_last_error();
  if (got != want || (needle && !strstr(msg, needle))) {
    printf("FAIL %s: status %s (want %s), message: %s (want it to contain \"%s\")\n", what,
           spore_status_name(got), spore_status_name(want), msg, needle ? needle : "");
    ++failures;
  } else {
    printf("ok   %s: %s: %s\n", what, spore_status_name(got), msg);
  }
}

static spore_model* model;
static float input[2 * 28 * 28];
static float outputs[2][2 * 10];

static void* run_thread(void* arg) {
  int t = *(int*)arg;
  spore_context* ctx = NULL;
  int64_t shape[4] = {2, 1, 28, 28};
  if (spore_context_create(model, &ctx) != SPORE_OK) return NULL;
  for (int i = 0; i < 10; ++i) {
    spore_context_set_input(ctx, 0, input, sizeof input, SPORE_DTYPE_FLOAT32, shape, 4);
    spore_context_set_output(ctx, 0, outputs[t], sizeof outputs[t]);
    if (spore_context_run(ctx) != SPORE_OK) {
      printf("FAIL thread %d: %s\n", t, spore_last_error());
      ++failures;
      break;
    }
  }
  spore_context_destroy(ctx);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  spore_runtime* rt = NULL;
  spore_model* m = NULL;
  spore_context* ctx = NULL;
  expect(spore_runtime_create(0, &rt), SPORE_OK, NULL, "runtime");

  /* A file that is not a model. */
  const char junk[100] = "this is not a model file; it is long enough to be read as a header....";
  expect(spore_model_load_buffer(rt, junk, sizeof junk, &m), SPORE_ERROR_IO, "field magic",
         "bad file");
  expect(spore_model_load_file(rt, "/nonexistent/model.spore", &m), SPORE_ERROR_IO,
         "/nonexistent/model.spore", "missing file");

  /* The real model, then the same bytes cut short. */
  FILE* f = fopen(argv[1], "rb");
  if (!f) return 2;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char* bytes = malloc((size_t)n);
  if (fread(bytes, 1, (size_t)n, f) != (size_t)n) return 2;
  fclose(f);
  expect(spore_model_load_buffer(rt, bytes, (size_t)n - 10, &m), SPORE_ERROR_IO, "field file_size",
         "truncated file");
  expect(spore_model_load_buffer(rt, bytes, (size_t)n, &model), SPORE_OK, NULL, "model");
  free(bytes);

  expect(spore_context_create(model, &ctx), SPORE_OK, NULL, "context");
  expect(spore_context_run(ctx), SPORE_ERROR_STATE, "is not bound", "run before binding");
  float x[3 * 28 * 28] = {0};
  int64_t bad_shape[4] = {1, 3, 28, 28};
  expect(spore_context_set_input(ctx, 0, x, sizeof x, SPORE_DTYPE_FLOAT32, bad_shape, 4),
         SPORE_ERROR_SHAPE, "must have shape (N, 1, 28, 28), got (1, 3, 28, 28)", "wrong shape");
  int64_t shape[4] = {1, 1, 28, 28};
  expect(spore_context_set_input(ctx, 0, x, 28 * 28 * 8, SPORE_DTYPE_FLOAT64, shape, 4),
         SPORE_ERROR_DTYPE, "must be float32, got float64", "wrong dtype");
  expect(spore_context_set_input(ctx, 0, x, 100, SPORE_DTYPE_FLOAT32, shape, 4),
         SPORE_ERROR_INVALID_ARGUMENT, "100 bytes given", "wrong byte count");
  expect(spore_context_set_input(ctx, 5, x, sizeof x, SPORE_DTYPE_FLOAT32, shape, 4),
         SPORE_ERROR_INVALID_ARGUMENT, "input index 5 is out of range", "bad index");
  expect(spore_context_set_input(NULL, 0, x, sizeof x, SPORE_DTYPE_FLOAT32, shape, 4),
         SPORE_ERROR_INVALID_ARGUMENT, "the context is null", "null context");
  expect(spore_context_set_input(ctx, 0, x, 28 * 28 * 4, SPORE_DTYPE_FLOAT32, shape, 4), SPORE_OK,
         NULL, "bind");
  float small[3];
  expect(spore_context_set_output(ctx, 0, small, sizeof small), SPORE_OK, NULL, "bind output");
  expect(spore_context_run(ctx), SPORE_ERROR_INVALID_ARGUMENT, "the bound buffer has 12",
         "output buffer too small");
  expect(spore_context_destroy(ctx), SPORE_OK, NULL, "destroy context");

  /* Two threads, one model, a context each: equal outputs. */
  for (int i = 0; i < 2 * 28 * 28; ++i) input[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
  pthread_t th[2];
  int ids[2] = {0, 1};
  for (int t = 0; t < 2; ++t) pthread_create(&th[t], NULL, run_thread, &ids[t]);
  for (int t = 0; t < 2; ++t) pthread_join(th[t], NULL);
  if (memcmp(outputs[0], outputs[1], sizeof outputs[0]) != 0) {
    printf("FAIL threads: the two contexts' outputs differ\n");
    ++failures;
  } else {
    printf("ok   threads: equal outputs (%g %g ...)\n", (double)outputs[0][0],
           (double)outputs[0][1]);
  }
  expect(spore_model_destroy(model), SPORE_OK, NULL, "destroy model");
  expect(spore_runtime_destroy(rt), SPORE_OK, NULL, "destroy runtime");
  printf("%d failure(s)\n", failures);
  return failures ? 1 : 0;
}
