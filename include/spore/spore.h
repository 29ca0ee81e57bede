// The umbrella header: #include <spore/spore.h> and `using namespace spore;`.
#pragma once
#include "spore/autograd.h"
#include "spore/context.h"
#include "spore/dtype.h"
#include "spore/error.h"
#include "spore/jit.h"
#include "spore/ops.h"
#include "spore/tensor.h"
// The framework layer: cells and layers, optimizers, training, data, checkpoints.
#include "spore/data/dataset.h"
#include "spore/io/checkpoint.h"
#include "spore/nn/nn.h"
#include "spore/optim/lr.h"
#include "spore/optim/optimizers.h"
#include "spore/train/callbacks.h"
#include "spore/train/metrics.h"
#include "spore/train/model.h"
#include "spore/train/wrappers.h"
