// The umbrella header: #include <spore/spore.h> and `using namespace spore;`.
#pragma once
#include "spore/autograd.h"
#include "spore/context.h"
#include "spore/dtype.h"
#include "spore/error.h"
#include "spore/ops.h"
#include "spore/tensor.h"
