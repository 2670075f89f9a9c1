"""The depth-perception appendix's rarer position configurations, with the coordinates they read:
reference rotation and the directed offset (§5), two corpora in one model (§2, the precursor),
and the label written on the depth planes; and the reference statistics (analyze.py --references).
Importing this module registers them into rotary's tables (rotary.py imports it the first time one
of these names is asked for).
"""
import os
from collections import defaultdict

import numpy as np
import torch

from data import SPLITS, load_split
from rotary import CONFIGS, COORDINATES, EXTRA, LEVELS, pair, seq, tree


# ------------------------------------------------------------------------------ references ----
def _refpath(level):
    """Reference rotation: the target's level where both have it; the use keeps its own path
    length (appendix §5)."""
    def read(b, g):
        tgt, own = b["ref_path"][..., level - 1], b["path"][..., level - 1]
        return torch.where((tgt >= 0) & (own >= 0), tgt, own)
    return read


def _refwhole(level):
    """Whole-path overwrite: a reference takes the target's path."""
    def read(b, g):
        isref = b["ref_path"][..., 0] >= 0
        return torch.where(isref, b["ref_path"][..., level - 1], b["path"][..., level - 1])
    return read


def _isref(b, g):
    return torch.where(b["ref_path"][..., 0] >= 0, 0, -1)


def directed(name, levels, shared=False):
    """Directed offset (appendix §5): on the reference-rotation planes of `levels`, a reference
    token's angle gains a learned constant (init 0), one per plane or one that all of them share.
    It adds no plane: an extra angle on planes the tree group already fills."""
    EXTRA[name] = ("isref", tuple(f"refpath{k}" for k in levels), shared)


# ------------------------------------------------------------------------ two corpora, label ----
def _two_corpora(role, level=1):
    """web_sheets, two corpora in one model: a web page's depth ('depth'), a workbook's sheet,
    row or column ('sheet', level 1-3), or one group with both meanings ('shared')."""
    def read(b, g):
        web = b["source"] == 0
        depth = torch.where(web, b["depth"], -1) if level == 1 else torch.full_like(b["depth"], -1)
        sheet = torch.where(web, -1, b["path"][..., level - 1])
        return {"depth": depth, "sheet": sheet, "shared": torch.where(web, depth, sheet)}[role]
    return read


def _depth_label(b, g):
    """Label on depth (our reading): d + 23 * label, depth capped at the 22 encoded levels, so every
    (depth, label) pair has its own integer and, within one label, a parent and its child stay one
    step apart. No label (a token outside every node): depth alone."""
    d, label = b["depth"], b["label"]
    return torch.where((d >= 0) & (label >= 0), d.clamp(max=LEVELS) + (LEVELS + 1) * label, d)


COORDINATES.update({
    "isref": _isref, "depth_label": _depth_label,
    **{f"refpath{k}": _refpath(k) for k in range(1, LEVELS + 1)},
    **{f"refwhole{k}": _refwhole(k) for k in range(1, LEVELS + 1)},
    "owndepth": _two_corpora("depth"),
    **{f"ownsheet{k}": _two_corpora("sheet", k) for k in (1, 2, 3)},
    **{f"shared{k}": _two_corpora("shared", k) for k in (1, 2, 3)},
})
_on_target = tree(source="refpath", label="tree 44 (references on target)")
CONFIGS.update({
    # reference rotation: a use takes its target's path on the levels the target occupies
    "ref_rotation": lambda P, c: [seq(16), _on_target],
    "ref_whole_path": lambda P, c: [seq(16),
                                    tree(source="refwhole", label="tree 44 (references: whole target path)")],
    # Directed offset (§5): "the reference sits a learned constant angle away from its target rather
    # than exactly on it", on the levels it takes from the target (sheets: "its sheet, row and column levels")
    "ref_directed": lambda P, c: [seq(16), _on_target],
    "ref_directed_one": lambda P, c: [seq(16), _on_target],
    # Own plane group (§5): "references rotate a separate group of planes rather than the tree planes":
    # the target's sheet, row and column there; tree level 22, which no sheet token reaches, gives way
    "ref_own_group": lambda P, c: [seq(16), tree(range(1, 22), label="tree 42 (levels 1-21)"),
                                   tree(range(1, 4), source="refpath", label="reference sheet+row+col 6")],
    # two corpora in one model (web_sheets): web pages write depth and workbooks their grid into one
    # group, level 1 without an offset as every depth plane (our reading), or each corpus its own
    "two_corpus_shared": lambda P, c: [seq(16), pair("shared1", "shared: depth | sheet 2"),
                                       tree(range(2, 4), source="shared", label="shared: row, column 4")],
    "two_corpus_own": lambda P, c: [seq(16), pair("owndepth", "web depth 2"),
                                    tree(range(1, 4), source="ownsheet", label="sheet grid 6")],
    # Figure 4's "label-on-depth variant" (our reading): the label on the depth planes, no extra plane
    "seq_label_on_depth": lambda P, c: [seq(16), pair("depth_label", "depth + 23 x label 2")],
})
directed("ref_directed", range(1, 4))                 # one constant per plane (6)
directed("ref_directed_one", range(1, 4), shared=True)   # the literal one angle on all six


# ----------------------------------------------------------------- reference statistics ----
def reference_counts(path, ref_path, starts):
    """Reference counts over per-token fields (appendix §5): path and ref_path (tokens, 22), -1 absent,
    and the indices where records start. A reference is a run of tokens of one node (one path, one
    target) inside a record; a token is affected where reference rotation changes a level (one both
    have that differs: configs._refpath); whole-path overwrite gives a use its target's path length."""
    path, ref = np.asarray(path), np.asarray(ref_path)
    is_ref = (ref >= 0).any(1)
    new = np.ones(len(path), bool)
    new[1:] = (path[1:] != path[:-1]).any(1) | (ref[1:] != ref[:-1]).any(1)
    new[starts] = True
    first = np.flatnonzero(new & is_ref)
    P, R = path[first], ref[first]
    lost = (P >= 0).sum(1) - (R >= 0).sum(1)
    return {"tokens": len(path), "reference_tokens": int(is_ref.sum()),
            "affected": int(((ref >= 0) & (path >= 0) & (ref != path)).any(1).sum()),
            "references": len(first), "other_level1": int(((R[:, 0] >= 0) & (R[:, 0] != P[:, 0])).sum()),
            "shorter": int((lost > 0).sum()), "lost_shorter": int(lost[lost > 0].sum()),
            "lost": int(lost.sum())}


def reference_stats(data_dir, chunk=4096):
    """reference_counts summed over a prepared corpus's splits, `chunk` records at a time."""
    total = defaultdict(int)
    for split in SPLITS:
        if not os.path.exists(os.path.join(data_dir, f"{split}_ref_path.npy")):
            continue
        a = load_split(data_dir, split)
        starts, n = a["doc_start"], len(a["doc_start"]) - 1      # record k: starts[k]:starts[k + 1]
        for lo in range(0, n, chunk):
            hi = min(lo + chunk, n)
            s, e = starts[lo], starts[hi]
            for k, v in reference_counts(a["path"][s:e], a["ref_path"][s:e], starts[lo:hi] - s).items():
                total[k] += v
    if not total:
        raise SystemExit(f"error: {data_dir} holds no reference targets (prepare.py python or sheets)")
    return total
