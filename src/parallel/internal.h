// Helpers shared by the parallel/ implementations (not public).
#pragma once
#include "spore/parallel/comm.h"

namespace spore::parallel::detail {
void check_tensor(const Tensor& t, const char* op);              // defined, contiguous
void check_mean_dtype(DType dt, ReduceOp op, const char* what);  // Mean: floating; bool: max/min
void scale_in_place(const Tensor& t, double s);                  // t *= s (floating dtypes)
void finalize_mpi();       // MPI_Finalize unless a peer was lost (no-op without MPI)
void abort_mpi(int code);  // MPI_Abort on the world
// `host_group` (one that moves host memory: MPI, local) taking device tensors too, staged through
// the host (host_staging.cpp).
GroupPtr stage_device_tensors(GroupPtr host_group);
}  // namespace spore::parallel::detail
