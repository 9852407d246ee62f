"""Data sets, partitioners and label statistics."""

from fedimb.core.data.datasets import DATASETS, ArrayDataset, dataset_info, load_dataset
from fedimb.core.data.partition import PARTITIONERS, Partition, make_partition
from fedimb.core.data.stats import kl_to_uniform, label_counts, partition_summary

__all__ = [
    "DATASETS",
    "PARTITIONERS",
    "ArrayDataset",
    "Partition",
    "dataset_info",
    "kl_to_uniform",
    "label_counts",
    "load_dataset",
    "make_partition",
    "partition_summary",
]
