"""mindspore.dataset: sources, pipeline operations, iterators, transforms (vision, transforms),
samplers and config, over Spore's C++ data engine."""
from . import config, transforms, vision
from .engine import (Cifar100Dataset, Cifar10Dataset, CocoDataset, Dataset, GeneratorDataset, ImageFolderDataset,
                     MnistDataset, NumpySlicesDataset)
from .samplers import (DistributedSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler,
                       SubsetSampler, WeightedRandomSampler)
from .vision import Border, Inter
