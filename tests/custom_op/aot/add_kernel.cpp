// A kernel compiled on its own, with MindSpore's AOT entry point and no Spore header: what
// ops.Custom(func_type="aot") loads (tests/python/test_custom_op.py compiles this file with the
// system compiler) and what load_aot_kernel finds from C++ (tests/custom_op/custom_op_test.cpp,
// built by tests/CMakeLists.txt as libspore_test_aot.so).
//   CustomAdd: out = a + b, same shape, float32 / float64 / int32. Returns 1 for another dtype,
//   2 for unequal shapes.
#include <cstdint>
#include <cstring>

namespace {
template <class T>
void add(const void* a, const void* b, void* out, int64_t n) {
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  T* z = static_cast<T*>(out);
  for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
}
}  // namespace

extern "C" int CustomAdd(int nparam, void** params, int* ndims, int64_t** shapes,
                         const char** dtypes, void* /*stream*/, void* /*extra*/) {
  if (nparam != 3) return 2;
  int64_t n = 1;
  for (int d = 0; d < ndims[2]; ++d) n *= shapes[2][d];
  for (int i = 0; i < 2; ++i) {
    if (ndims[i] != ndims[2]) return 2;
    for (int d = 0; d < ndims[i]; ++d)
      if (shapes[i][d] != shapes[2][d]) return 2;
    if (std::strcmp(dtypes[i], dtypes[2]) != 0) return 1;
  }
  if (std::strcmp(dtypes[2], "float32") == 0)
    add<float>(params[0], params[1], params[2], n);
  else if (std::strcmp(dtypes[2], "float64") == 0)
    add<double>(params[0], params[1], params[2], n);
  else if (std::strcmp(dtypes[2], "int32") == 0)
    add<int32_t>(params[0], params[1], params[2], n);
  else
    return 1;
  return 0;
}
