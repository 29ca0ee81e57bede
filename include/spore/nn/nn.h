// The nn layer in one include: cells, containers, layers, initializers and losses.
#pragma once
#include "spore/nn/activation.h"
#include "spore/nn/cell.h"
#include "spore/nn/container.h"
#include "spore/nn/init.h"
#include "spore/nn/layers.h"
#include "spore/nn/loss.h"
#include "spore/nn/norm.h"
#include "spore/nn/pool.h"
