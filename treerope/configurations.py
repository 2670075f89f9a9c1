"""The rarer position configurations, with the coordinates they read, registered into rotary.py's
tables by importing this module (train.py, evaluate.py, sample.py and study.py import it; rotary.py
never does). The depth-perception appendix's: reference rotation and the directed offset (§5), two
corpora in one model (§2, the precursor) and the label written on the depth planes. Paper 004's:
hRoPE's fixed spectra (§3.1) and the p1 controls (§3.3, §4.3), calibrated on the corpus statistics
meta.json holds (App. C). Every configuration, rotary.py's own included:

    python -m treerope.configurations
"""
import math

import torch

import rotary
from rotary import CONFIGS, COORDINATES, EXTRA, LEVELS, Group, field, pair, seq, tree, unrotated


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


# ------------------------------------------------------------------------------ paper 004 ----
def spectrum(coord, n, top):
    """A fixed spectrum over n planes whose slowest plane turns half a circle over `top`, the largest
    value the coordinate takes: base_g = (S*M_g/2pi)^(D_g/(D_g-1)) (App. C), rates base^(-i/D_g).
    Our reading: S = 2 and D_g = the group's plane count (App. C names neither value)."""
    if n == 1:
        return Group((coord,), (math.pi / max(top, 1),), False, False, f"{coord} 1")
    base = max(2 * top / (2 * math.pi), 1.0 + 1e-6) ** (n / (n - 1))
    return Group((coord,) * n, tuple(base ** (-i / n) for i in range(n)), False, False, f"{coord} {n}")


def _hrope(which):
    """hRoPE (§3.1): P/4 planes for p1 (paragraph), P/4 for p2 (sentence, or line in code), P/2 for
    p3 (token inside its sentence), each a fixed spectrum calibrated from the corpus maxima M_g.
    Our reading: the P/4, P/4, P/2 allocation (the paper gives no plane counts). sent_axial leaves
    the p1 planes unrotated; rand/period replace p1 by a density-matched random label / floor(t/L)."""
    def make(P, corpus):
        top = (corpus or {}).get("p_max", [64, 64, 1024])
        n1, n2 = P // 4, P // 4
        n3 = P - n1 - n2
        p1 = (unrotated(n1) if which == "sent"
              else spectrum(which + "_p1" if which in ("rand", "period") else "p1", n1, top[0]))
        return [p1, spectrum("p2", n2, top[1]), spectrum("p3", n3, top[2])]
    return make


def _period_p1(b, g):
    """Mechanical grid floor(t/L), L = mean paragraph length."""
    return torch.div(b["pos"], b["p1_period"], rounding_mode="floor")


def _rand_p1(b, g):
    """Density-matched random paragraph label, fresh each call."""
    pos = b["pos"]
    starts = torch.rand(pos.shape, generator=g, device=pos.device) < b["p1_density"]
    starts = starts & (pos > 0)
    return torch.cumsum(starts.long(), -1) * (pos >= 0)


def _p1(read):
    """A p1 channel: a substituted p1 (evaluate.py, b['p1_sub']) replaces whatever it reads."""
    return lambda b, g: b["p1_sub"] if "p1_sub" in b else read(b, g)


COORDINATES.update({"p1": _p1(field("p", 1)), "p2": field("p", 2), "p3": field("p", 3),
                    "period_p1": _p1(_period_p1), "rand_p1": _p1(_rand_p1)})
CONFIGS.update({   # fixed spectra, no learned parameters
    "flat": lambda P, c: [seq(P)],
    "sent_axial": _hrope("sent"),
    "hrope_axial": _hrope("real"),
    "rand_axial": _hrope("rand"),
    "period_axial": _hrope("period"),
})


if __name__ == "__main__":
    rotary.main()
