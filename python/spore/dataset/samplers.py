"""Samplers (mindspore.dataset.*Sampler): which rows of a random-access source an epoch visits."""
from .. import _C
from .._args import refuse


class Sampler:
    def __init__(self, sampler):
        self._sampler = sampler


class SequentialSampler(Sampler):
    def __init__(self, start_index=None, num_samples=None):
        super().__init__(_C.SequentialSampler(start_index or 0, -1 if num_samples is None else num_samples))


class RandomSampler(Sampler):
    def __init__(self, replacement=False, num_samples=None):
        super().__init__(_C.RandomSampler(replacement, -1 if num_samples is None else num_samples))


class DistributedSampler(Sampler):
    def __init__(self, num_shards, shard_id, shuffle=True, num_samples=None, offset=-1):
        refuse("DistributedSampler", "the shards start at sample 0", offset=(offset, -1))
        super().__init__(_C.DistributedSampler(num_shards, shard_id, shuffle, -1 if num_samples is None else num_samples))


class SubsetRandomSampler(Sampler):
    def __init__(self, indices, num_samples=None):
        super().__init__(_C.SubsetRandomSampler(list(indices), -1 if num_samples is None else num_samples))


class SubsetSampler(Sampler):
    def __init__(self, indices, num_samples=None):
        super().__init__(_C.SubsetSampler(list(indices), -1 if num_samples is None else num_samples))


class WeightedRandomSampler(Sampler):
    def __init__(self, weights, num_samples=None, replacement=True):
        super().__init__(_C.WeightedRandomSampler(list(weights), len(weights) if num_samples is None else num_samples,
                                                  replacement))
