/* Runs a compiled Spore model (spore compile) from C through libspore_c (spore/spore_c.h).
 *
 *   run_model MODEL.spore INPUT.f32 OUTPUT.f32
 *
 * INPUT.f32 holds the model's one float32 input as raw little-endian floats (its batch is the file
 * size over one sample's size, for a dynamic-batch model); OUTPUT.f32 receives the first output
 * the same way. Prints the model's inputs and outputs and the output's shape. Build:
 *   cc run_model.c $(pkg-config --cflags --libs spore_c)    (or -Iinclude -Lbuild -lspore_c)
 */
#include <spore/spore_c.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                                             \
  do {                                                                                          \
    spore_status s_ = (call);                                                                   \
    if (s_ != SPORE_OK) {                                                                       \
      fprintf(stderr, "%s failed: %s: %s\n", #call, spore_status_name(s_), spore_last_error()); \
      return 1;                                                                                 \
    }                                                                                           \
  } while (0)

static void print_info(const char* what, const spore_tensor_info* t) {
  printf("%s %s: dtype %d, shape (", what, t->name, (int)t->dtype);
  for (size_t d = 0; d < t->rank; ++d) {
    if (t->shape[d] < 0)
      printf("%sN", d ? ", " : "");
    else
      printf("%s%lld", d ? ", " : "", (long long)t->shape[d]);
  }
  printf(")\n");
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s MODEL.spore INPUT.f32 OUTPUT.f32\n", argv[0]);
    return 2;
  }
  spore_runtime* rt = NULL;
  spore_model* model = NULL;
  spore_context* ctx = NULL;
  CHECK(spore_runtime_create(0, &rt));
  CHECK(spore_model_load_file(rt, argv[1], &model));
  size_t nin = 0, nout = 0;
  CHECK(spore_model_num_inputs(model, &nin));
  CHECK(spore_model_num_outputs(model, &nout));
  spore_tensor_info in, out;
  for (size_t i = 0; i < nin; ++i) {
    CHECK(spore_model_input_info(model, i, &in));
    print_info("input", &in);
  }
  for (size_t i = 0; i < nout; ++i) {
    CHECK(spore_model_output_info(model, i, &out));
    print_info("output", &out);
  }
  if (nin != 1) {
    fprintf(stderr, "this example feeds one input; the model has %zu\n", nin);
    return 1;
  }
  CHECK(spore_model_input_info(model, 0, &in));

  /* The input file: raw floats, batch = size / one sample's size. */
  FILE* f = fopen(argv[2], "rb");
  if (!f) {
    perror(argv[2]);
    return 1;
  }
  fseek(f, 0, SEEK_END);
  long bytes = ftell(f);
  fseek(f, 0, SEEK_SET);
  size_t sample = sizeof(float);
  for (size_t d = 1; d < in.rank; ++d) sample *= (size_t)in.shape[d];
  if (bytes <= 0 || (size_t)bytes % sample) {
    fprintf(stderr, "%s: %ld bytes is not a whole number of %zu-byte samples\n", argv[2], bytes,
            sample);
    return 1;
  }
  int64_t shape[16];
  shape[0] = (int64_t)((size_t)bytes / sample);
  for (size_t d = 1; d < in.rank && d < 16; ++d) shape[d] = in.shape[d];
  float* x = malloc((size_t)bytes);
  if (!x || fread(x, 1, (size_t)bytes, f) != (size_t)bytes) {
    fprintf(stderr, "%s: read failed\n", argv[2]);
    return 1;
  }
  fclose(f);

  CHECK(spore_context_create(model, &ctx));
  CHECK(spore_context_set_input(ctx, 0, x, (size_t)bytes, SPORE_DTYPE_FLOAT32, shape, in.rank));
  CHECK(spore_context_run(ctx));
  const int64_t* oshape = NULL;
  size_t orank = 0;
  CHECK(spore_context_output_shape(ctx, 0, &oshape, &orank));
  size_t n = 1;
  printf("output 0 shape (");
  for (size_t d = 0; d < orank; ++d) {
    printf("%s%lld", d ? ", " : "", (long long)oshape[d]);
    n *= (size_t)oshape[d];
  }
  printf(")\n");
  float* y = malloc(n * sizeof(float));
  CHECK(spore_context_get_output(ctx, 0, y, n * sizeof(float)));
  FILE* o = fopen(argv[3], "wb");
  if (!o || fwrite(y, sizeof(float), n, o) != n) {
    perror(argv[3]);
    return 1;
  }
  fclose(o);
  printf("first values: %g %g\n", (double)y[0], n > 1 ? (double)y[1] : 0.0);
  free(x);
  free(y);
  CHECK(spore_context_destroy(ctx));
  CHECK(spore_model_destroy(model));
  CHECK(spore_runtime_destroy(rt));
  return 0;
}
