// The nn layer in one include: cells, containers, layers (recurrent ones too), initializers and
// losses, plus the functional ops (spore/ops.h) that a construct() body calls.
#pragma once
#include "spore/autograd.h"
#include "spore/nn/activation.h"
#include "spore/nn/cell.h"
#include "spore/nn/container.h"
#include "spore/nn/init.h"
#include "spore/nn/layers.h"
#include "spore/nn/loss.h"
#include "spore/nn/norm.h"
#include "spore/nn/pool.h"
#include "spore/nn/rnn.h"
#include "spore/nn/transformer.h"
#include "spore/ops.h"
