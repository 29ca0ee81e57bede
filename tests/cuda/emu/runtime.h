// The emulated CUDA runtime's internals that its library emulations (cublaslt.cpp, cudnn.cpp)
// share: work queued in stream order, and what a pointer is.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <string>

namespace spore::emu {

// Queues fn on the stream (or records it into the stream's capture). fn runs when the host next
// synchronises with that point; it returns an error message, empty on success.
cudaError_t enqueue(cudaStream_t stream, const char* what, std::function<std::string()> fn);

// Clears a kernel fault's sticky error (a GPU needs a new process; the emulator's tests do not).
void reset_after_fault();

// Whether [p, p + n) lies inside one device allocation.
bool is_device_range(const void* p, size_t n);

}  // namespace spore::emu
