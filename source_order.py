"""Splits in source order, `prepare.py --split contiguous` (the python setting): appendix §2 on
Python, "The splits are contiguous record ranges over an unshuffled corpus". prepare.py imports it
only for that flag; by default a document's split is a hash of its name (prepare.split_of).
"""
import collections

from data import SPLITS


def package(name):
    """The package a document comes from: its first folder (below the source's index, for programs)."""
    parts = name.split("::")[0].split("/")
    return "/".join(parts[:2 if parts[0].isdigit() else 1]) if len(parts) > 1 else name


def contiguous_split(names):
    """Appendix §2 on Python: "The splits are contiguous record ranges over an unshuffled corpus":
    the first 90% train, then 5% val, 5% test (the proportions are ours). Our reading of the order:
    round-robin over packages, each in its sources' order, so no split is one package."""
    by = collections.defaultdict(list)
    for name in names:
        by[package(name)].append(name)
    queues = list(by.values())
    order = [q[i] for i in range(max(map(len, queues), default=0)) for q in queues if i < len(q)]
    n = len(order)
    return {name: "train" if i < 0.9 * n else "val" if i < 0.95 * n else "test"
            for i, name in enumerate(order)}


def split_packages(split):
    """meta.json's split_packages: how many packages each split holds."""
    return {s: len({package(n) for n, v in split.items() if v == s}) for s in SPLITS}
