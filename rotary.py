"""Coordinates become angles: the tree rotary, every position configuration of both papers, and the
rotation. Needs torch alone: copy this file into your own GPT (README "Use the tree rotary in your own GPT").

A head of width D has P = D/2 planes; plane i rotates dimensions i and i + P (half-split).
Each plane reads one integer coordinate c of its token and turns by

    angle = c * rate + present * offset        (appendix §5 "The angles")

where present = 1 when the token has that coordinate and 0 where it is absent (-1, the one
absent value here), in which case the angle is 0. 0 is a value, not absence: the prepared data's depth 0
(a token in no node) is present and turns its depth planes by 0 x rate, i.e. not at all (a `pair`
has no offset); depth dropout writes -1. A configuration is a list of plane groups filling the
planes in order; planes left over are unrotated (content channels). Learned rates and offsets
are one set for the whole model (appendix §5: seq_depth and its control have "the same two learned
rates"), initialised to fixed values so that two configurations at one seed differ only in
the rotation. Paper 004's hRoPE configurations are fixed spectra calibrated on the corpus (App. C).

In reading order: plane groups, the coordinates they read, CONFIGS (every configuration), their
layout on a head's planes, the model's `Rotary`, the readable `rotate`, then the fused Triton kernel.
Run `python rotary.py` for every configuration's plane allocation.
"""
import math
import re
from dataclasses import dataclass
from types import SimpleNamespace

import torch
import torch.nn as nn

try:   # the fused rotation's compiler: optional (this file copied alone runs without it, on PyTorch)
    import triton
    import triton.language as tl
except ImportError:   # the kernels of the last section are then defined but never launched
    triton = tl = SimpleNamespace(jit=lambda fn: fn, constexpr=None)

LEVELS = 22                        # path levels encoded (appendix §5: 22 levels x {fast, slow} planes)
FAST = math.sqrt(2 * (1 - 0.95))   # 0.316 rad per sibling: adjacent siblings have cosine 0.95


# ---------------------------------------------------------------------------- plane groups ----
@dataclass(frozen=True)
class Group:
    """`n` planes reading coordinate `coord` at the given initial rates.
    learned: rates are parameters; offset: also a learned offset (init 0) per plane."""
    coord: tuple          # coordinate name per plane ('t', 'path3', 'depth', ...), None = unrotated
    rates: tuple
    learned: bool
    offset: bool
    label: str


def seq(n, planes=None, base=10000.0):
    """Standard rotary spectrum: plane i turns by t * base^(-i/planes)."""
    planes = planes or n
    return Group(("t",) * n, tuple(base ** (-i / planes) for i in range(n)), False, False, f"sequence {n}")


def unrotated(n):
    return Group((None,) * n, (0.0,) * n, False, False, f"unrotated {n}")


def tree(levels=range(1, LEVELS + 1), source="path", label=None):
    """Per level k a fast (0.316) and a slow (0.316/16) plane: present_k*theta + r_k*s."""
    coords, rates = [], []
    for k in levels:
        coords += [f"{source}{k}"] * 2
        rates += [FAST, FAST / 16]
    return Group(tuple(coords), tuple(rates), True, True, label or f"tree {len(coords)}")


def within():
    """Within-node index on 4 planes at 0.316/4^p: wraps after ~20, 80, 318, 1270 tokens."""
    return Group(("within",) * 4, tuple(FAST / 4 ** p for p in range(4)), True, True, "within 4")


def pair(coord, label):
    """Two learned planes at 0.316 and 0.316/16 with no offset (depth, rank, symbol...)."""
    return planes(coord, 2, label)


def planes(coord, n, label=None):
    """n learned planes of one coordinate, no offset, rates geometric from 0.316 down to 0.316/16
    (n = 2 is `pair`; our reading for n > 2: the appendix uses pairs only)."""
    return Group((coord,) * n, tuple(FAST / 16 ** (i / max(n - 1, 1)) for i in range(n)), True, False,
                 label or f"{coord} {n}")


def spectrum(coord, n, top):
    """Paper 004: a fixed spectrum over n planes whose slowest plane turns half a circle over `top`, the
    largest value the coordinate takes: base_g = (S*M_g/2pi)^(D_g/(D_g-1)) (App. C), rates base^(-i/D_g).
    Our reading: S = 2 and D_g = the group's plane count (App. C names neither value)."""
    if n == 1:
        return Group((coord,), (math.pi / max(top, 1),), False, False, f"{coord} 1")
    base = max(2 * top / (2 * math.pi), 1.0 + 1e-6) ** (n / (n - 1))
    return Group((coord,) * n, tuple(base ** (-i / n) for i in range(n)), False, False, f"{coord} {n}")


# ----------------------------------------------------------------------------- coordinates ----
# A configuration names the coordinates its planes read; each name has one reader here: (batch of
# on-disk fields as tensors, generator) -> (B, T) int64, -1 where absent.
def field(name, level=None):
    """An on-disk field as it is, or its `level`-th column (1-based)."""
    return (lambda b, g: b[name]) if level is None else (lambda b, g: b[name][..., level - 1])


def _rank(b, g):
    """The node's rank among its parent's children = path at its own level."""
    d = b["depth"].clamp(1, LEVELS) - 1
    r = b["path"].gather(-1, d.unsqueeze(-1)).squeeze(-1)
    return torch.where(b["depth"] > 0, r, torch.full_like(r, -1))


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


def _period_p1(b, g):
    """Paper 004's control (§3.3): the mechanical grid floor(t/L), L = mean paragraph length."""
    return torch.div(b["pos"], b["p1_period"], rounding_mode="floor")


def _rand_p1(b, g):
    """Paper 004's control (§3.3): a density-matched random paragraph label, fresh each call (from
    b["uniform"] where the batch brings its draws, else from the generator)."""
    pos = b["pos"]
    u = b["uniform"] if "uniform" in b else torch.rand(pos.shape, generator=g, device=pos.device)
    starts = u < b["p1_density"]
    starts = starts & (pos > 0)
    return torch.cumsum(starts.long(), -1) * (pos >= 0)


def _p1(read):
    """A p1 channel: a substituted p1 (evaluate.py, b['p1_sub']) replaces whatever it reads."""
    return lambda b, g: b["p1_sub"] if "p1_sub" in b else read(b, g)


COORDINATES = {
    "t": field("pos"), "depth": field("depth"), "within": field("within"), "symbol": field("symbol"),
    "label": field("label"), "rank": _rank,
    "grid_row": field("grid", 1), "grid_col": field("grid", 2),          # the statement grid on code
    "exchange": field("chat", 1), "speaker": field("chat", 2), "turn_pos": field("chat", 3),
    **{f"path{k}": field("path", k) for k in range(1, LEVELS + 1)},
    # references: the target's path (two readings) and whether the token is a reference
    "isref": _isref, **{f"refpath{k}": _refpath(k) for k in range(1, LEVELS + 1)},
    **{f"refwhole{k}": _refwhole(k) for k in range(1, LEVELS + 1)},
    # two corpora in one model; the label on the depth planes
    "owndepth": _two_corpora("depth"),
    **{f"ownsheet{k}": _two_corpora("sheet", k) for k in (1, 2, 3)},
    **{f"shared{k}": _two_corpora("shared", k) for k in (1, 2, 3)},
    "depth_label": _depth_label,
    # paper 004: paragraph, sentence (line in code), token in its sentence; p1's controls
    "p1": _p1(field("p", 1)), "p2": field("p", 2), "p3": field("p", 3),
    "period_p1": _p1(_period_p1), "rand_p1": _p1(_rand_p1),
}


def coordinate(batch, name, generator=None):
    """One named coordinate, (B, T) int64, -1 where absent. `batch` holds the on-disk fields as
    tensors (and, for paper 004's controls, the corpus's p1_density and p1_period)."""
    if name not in COORDINATES:
        raise KeyError(f"unknown coordinate {name!r}")
    return COORDINATES[name](batch, generator)


# -------------------------------------------------------------------------- configurations ----
# Each entry: (planes P, corpus statistics) -> layout. A layout is a list of Groups (every layer,
# every head) or {'layers': [...per layer...]} / {'heads': [...per head...]} of such lists.
def _seq_layer(P):
    return [seq(P)]                                   # a sequence layer: all planes, 10000^(-i/P)


def _tree_layer(P):
    return [tree(), within()]                         # a tree layer: 44 tree + 4 within planes


def _layer_split(pattern):
    kinds = {"s": _seq_layer, "t": _tree_layer, "n": lambda P: []}
    return lambda P, corpus: {"layers": [kinds[c](P) for c in pattern]}


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


_on_target = tree(source="refpath", label="tree 44 (references on target)")
CONFIGS = {   # the depth-perception appendix's configurations (planes of a 128-wide head; glossary names)
    "seq_only": lambda P, c: [seq(16)],
    "tree_only": lambda P, c: [unrotated(16), tree()],
    "tree_within": lambda P, c: [unrotated(16), tree(), within()],
    "seq_tree": lambda P, c: [seq(16), tree()],
    "all_signals": lambda P, c: [seq(16), tree(), within()],
    "seq_depth": lambda P, c: [seq(16), pair("depth", "depth 2")],
    "top_level": lambda P, c: [seq(16), pair("path1", "level-1 rank 2")],
    "no_position": lambda P, c: [],
    "seq_grid": lambda P, c: [seq(16), tree(range(1, 4), label="grid 6")],
    "seq_depth_rank": lambda P, c: [seq(16), pair("depth", "depth 2"), pair("rank", "rank 2")],
    "full_rope": lambda P, c: [seq(P)],
    "seq_tree_depth": lambda P, c: [seq(16), tree(), pair("depth", "depth 2")],
    "ststst": _layer_split("ststst"),
    "sssttt": _layer_split("sssttt"),
    "tttsss": _layer_split("tttsss"),
    "ssttnn": _layer_split("ssttnn"),
    "head_split": lambda P, c: {"heads": [_seq_layer(P), _tree_layer(P)]},
    "seq_tree_symbol": lambda P, c: [seq(16), tree(), pair("symbol", "symbol 2")],
    # named in the paper, defined here (REFERENCE.md "Position configurations": our reading)
    "seq_depth_label": lambda P, c: [seq(16), pair("depth", "depth 2"), pair("label", "label 2")],
    "seq_label": lambda P, c: [seq(16), pair("label", "label 2")],
    "seq_stmt_grid": lambda P, c: [seq(16), pair("grid_row", "statement row 2"),
                                   pair("grid_col", "statement column 2")],
    # Figure 4: "a grid (the statement grid on code; row and column on spreadsheets; exchange,
    # speaker and position on chat), with depth where marked" (chat has no grid + depth: our reading)
    "seq_grid_depth": lambda P, c: [seq(16), tree(range(1, 4), label="grid 6"), pair("depth", "depth 2")],
    "seq_stmt_grid_depth": lambda P, c: [seq(16), pair("grid_row", "statement row 2"),
                                         pair("grid_col", "statement column 2"), pair("depth", "depth 2")],
    "seq_chat_grid": lambda P, c: [seq(16), pair("exchange", "exchange 2"), pair("speaker", "speaker 2"),
                                   pair("turn_pos", "position in turn 2")],
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
    # two corpora in one model (web_sheets, §2, the precursor): web pages write depth and workbooks
    # their grid into one group, level 1 without an offset as every depth plane (our reading), or each
    # corpus its own
    "two_corpus_shared": lambda P, c: [seq(16), pair("shared1", "shared: depth | sheet 2"),
                                       tree(range(2, 4), source="shared", label="shared: row, column 4")],
    "two_corpus_own": lambda P, c: [seq(16), pair("owndepth", "web depth 2"),
                                    tree(range(1, 4), source="ownsheet", label="sheet grid 6")],
    # Figure 4's "label-on-depth variant" (our reading): the label on the depth planes, no extra plane
    "seq_label_on_depth": lambda P, c: [seq(16), pair("depth_label", "depth + 23 x label 2")],
    # paper 004: hRoPE's fixed spectra (§3.1) and the p1 controls (§3.3, §4.3), no learned parameters,
    # calibrated on the corpus statistics meta.json holds (App. C)
    "flat": lambda P, c: [seq(P)],
    "sent_axial": _hrope("sent"),
    "hrope_axial": _hrope("real"),
    "rand_axial": _hrope("rand"),
    "period_axial": _hrope("period"),
}


def directed(levels, shared=False):
    """Directed offset (appendix §5): on the reference-rotation planes of `levels`, a reference
    token's angle gains a learned constant (init 0), one per plane or one that all of them share.
    It adds no plane: an extra angle on planes the tree group already fills."""
    return "isref", tuple(f"refpath{k}" for k in levels), shared


# configuration -> an extra learned angle on the planes reading `coords`, added where the `marker`
# coordinate is present: (marker, coords, one constant shared by all of them); the directed offset
EXTRA = {"ref_directed": directed(range(1, 4)),                    # one constant per plane (6)
         "ref_directed_one": directed(range(1, 4), shared=True)}   # the literal one angle on all six


def known(name):
    """A registry entry, or a layer split named by its letters, one per layer (s sequence, t tree,
    n no rotation): the paper's six-layer patterns are listed above, and any other length works
    (the larger web run's ten-layer alternating split is `ststststst`)."""
    return name in CONFIGS or re.fullmatch(r"[stn]{2,}", name) is not None


# --------------------------------------------------------------------------------- layouts ----
@dataclass
class Layout:
    """One plane table: per head (H or 1) x plane, the coordinate read and the rate/offset."""
    coord: list           # [head][plane] -> coordinate name or None
    rate_init: list       # [head][plane]
    rate_param: list      # [head][plane] -> index into learned rates, -1 = fixed
    offset_param: list    # [head][plane] -> index into learned offsets, -1 = none
    overlay: list = None  # [head][plane] -> index into learned offsets added where the marker is present


def _fill(groups, P, rates, offsets):
    """Lay groups on planes 0..P-1; register learned rates/offsets (appending to the lists)."""
    coord, rate, rp, op = [], [], [], []
    for g in groups:
        for c, r in zip(g.coord, g.rates):
            coord.append(c)
            rate.append(r)
            rp.append(len(rates) if g.learned else -1)
            if g.learned:
                rates.append(r)
            op.append(len(offsets) if g.offset else -1)
            if g.offset:
                offsets.append(0.0)
    if len(coord) > P:
        raise ValueError(f"configuration needs {len(coord)} planes but the head has {P} "
                         f"(head width {2 * P}); use 128-wide heads for the tree configurations")
    n = len(coord)
    return coord + [None] * (P - n), rate + [0.0] * (P - n), rp + [-1] * (P - n), op + [-1] * (P - n)


def _extra(name, coord, offsets):
    """The extra angle's table (EXTRA) for one head table: a learned constant (init 0) per plane it
    names, or one that all of them share, appended to `offsets`."""
    _, coords, shared = EXTRA[name]
    planes = [i for i, c in enumerate(coord) if c in coords]
    ov = [-1] * len(coord)
    for j, i in enumerate(planes):
        ov[i] = len(offsets) + (0 if shared else j)
    offsets.extend([0.0] * (1 if shared else len(planes)))
    return ov


def lay_out(name, head_dim, n_layer, corpus=None):
    """Resolve a configuration: (list of Layouts, layer -> layout index, rates, offsets)."""
    if not known(name):
        raise KeyError(f"unknown configuration {name!r}; known: {', '.join(CONFIGS)}, "
                       "or any s/t/n layer pattern")
    P = head_dim // 2
    spec = CONFIGS.get(name, _layer_split(name))(P, corpus)
    rates, offsets = [], []
    if isinstance(spec, dict) and "layers" in spec:
        if len(spec["layers"]) != n_layer:
            raise ValueError(f"{name} is a {len(spec['layers'])}-layer pattern; "
                             f"the model has {n_layer} layers")
        # layers of one kind share one table (and its learned parameters)
        layouts, index, seen = [], [], {}
        for groups in spec["layers"]:
            key = tuple(g.label for g in groups)
            if key not in seen:
                seen[key] = len(layouts)
                layouts.append(Layout(*[[t] for t in _fill(groups, P, rates, offsets)]))
            index.append(seen[key])
        return layouts, index, rates, offsets
    cols = []
    for groups in spec["heads"] if isinstance(spec, dict) else [spec]:
        cols.append(_fill(groups, P, rates, offsets))
        if name in EXTRA:
            cols[-1] += (_extra(name, cols[-1][0], offsets),)
    layout = Layout(*[[c[i] for c in cols] for i in range(4)],
                    overlay=[c[4] for c in cols] if name in EXTRA else None)
    return [layout], [0] * n_layer, rates, offsets


# ---------------------------------------------------------------------- the model's rotary ----
class Table(nn.Module):
    """One Layout as tensors (H or 1 head tables x P planes), moved with the model: the column of the
    coordinate matrix C each plane reads (-1 unrotated), its fixed rate, where its learned rate, offset
    and overlay sit in the model's `rates` and `offsets` (-1: fixed, none, none), and `mark`, C's
    column where the overlay adds (-1 none). Buffers, not parameters: no checkpoint holds them."""

    def __init__(self, layout, names, marker):
        super().__init__()
        self.register_buffer("fixed", torch.tensor(layout.rate_init, dtype=torch.float32), persistent=False)
        self.register_buffer("rate_at", torch.tensor(layout.rate_param), persistent=False)
        self.register_buffer("offset_at", torch.tensor(layout.offset_param), persistent=False)
        col = [[names.index(c) if c else -1 for c in h] for h in layout.coord]
        self.register_buffer("col", torch.tensor(col, dtype=torch.int32), persistent=False)
        overlay = layout.overlay or [[-1] * len(h) for h in layout.coord]
        self.register_buffer("overlay_at", torch.tensor(overlay), persistent=False)
        mark = names.index(marker) if layout.overlay else -1
        self.register_buffer("mark", torch.tensor([mark]), persistent=False)

    def forward(self, rates, offsets):
        """(col, rate, offset, overlay offset) tensors (H or 1, P) at the learned values given."""
        def pick(at, learned, otherwise):     # learned[at] where at >= 0 (index -1 reads a pad)
            return torch.where(at >= 0, torch.cat([learned, learned.new_zeros(1)])[at], otherwise)
        return (self.col, pick(self.rate_at, rates, self.fixed), pick(self.offset_at, offsets, 0.0),
                pick(self.overlay_at, offsets, 0.0))


class Rotary(nn.Module):
    """The learned rotary parameters of one model plus its plane tables."""

    def __init__(self, config, head_dim, n_layer, corpus=None):
        super().__init__()
        self.config = config
        self.layouts, self.layer_layout, rates, offsets = lay_out(config, head_dim, n_layer, corpus)
        # rotary parameters: fixed initial values (never random), excluded from weight decay
        self.rates = nn.Parameter(torch.tensor(rates, dtype=torch.float32))
        self.offsets = nn.Parameter(torch.tensor(offsets, dtype=torch.float32))
        self.marker = EXTRA[config][0] if config in EXTRA else None
        names = {c for L in self.layouts for h in L.coord for c in h if c} | ({self.marker} - {None})
        self.names = sorted(names)
        self.tables = nn.ModuleList(Table(L, self.names, self.marker) for L in self.layouts)
        self.kernel = False    # the fused Triton rotation instead of the readable one (a run's --kernel)

    def coords(self, batch, generator=None):
        """(B, T, K) int32 matrix of the coordinates this configuration reads (-1 absent), column j
        being `self.names[j]` (sorted by name), from `batch`'s on-disk fields (the prepared data's FIELDS)."""
        if not self.names:
            return batch["pos"].new_zeros(*batch["pos"].shape, 0).int()
        return torch.stack([coordinate(batch, n, generator) for n in self.names], -1).int()

    def by_name(self, coords):
        """The (B, T, K) matrix from a dict {coordinate name: (B, T) integers, -1 absent}, e.g.
        {"t": positions, "depth": depths}; names this configuration does not read are ignored."""
        missing = [n for n in self.names if n not in coords]
        if missing:
            raise ValueError(f"configuration {self.config} reads {self.names}; missing {missing}")
        return torch.stack([coords[n] for n in self.names], -1).int()

    def table(self, i):
        """Layout i as (col, rate, offset, overlay_offset) tensors of shape (H or 1, P)."""
        return self.tables[i](self.rates, self.offsets)

    def angles(self, C, i):
        """Angles (B, T, H or 1, P) of layout i from the coordinate matrix C: c * rate + offset where a
        plane's coordinate is present, 0 where absent, plus the extra angle where the marker is present
        (EXTRA; no marker: mark is -1). One law for every configuration, as data: a study stacks its runs'
        tables and runs it under vmap, and the fused kernel is held to it (`kernel_differs`)."""
        col, rate, offset, overlay = self.table(i)
        mark = self.tables[i].mark
        c = C[..., col.clamp(min=0).long()].float()             # (B, T, Hl, P)
        present = (c >= 0) & (col >= 0)
        marked = (C[..., mark.clamp(min=0).long()] >= 0) & (mark >= 0)   # (B, T, 1)
        return torch.where(present, c * rate + offset, 0.0) + \
            torch.where(present & marked[..., None], overlay, 0.0)

    def forward(self, q, k, C, layer):
        """Rotate q, k of shape (B, T, H, D) for `layer` (the layer-split configurations give layers
        different tables). C: the coordinates, a dict by name (`by_name`) or the (B, T, K) matrix of
        `coords`, whose width is checked (shapes only: free inside a compiled step); a matrix of the
        right width in another column order cannot be told apart, so hand-built ones go by name.
        The readable rotation, or with `kernel` set the fused Triton one (`kernel_differs` checks it
        first). A layout with HT head tables gives each a contiguous block of H / HT heads (head_split
        with 4 heads: two sequence heads, then two tree heads)."""
        if isinstance(C, dict):
            C = self.by_name(C)
        if C.shape[-1] != len(self.names) or C.shape[:2] != q.shape[:2]:
            raise ValueError(f"C has shape {tuple(C.shape)}; configuration {self.config} on q "
                             f"{tuple(q.shape)} needs ({q.shape[0]}, {q.shape[1]}, {len(self.names)}): "
                             f"columns {self.names} (Rotary.coords), or pass a dict by name")
        i = self.layer_layout[layer]
        if not self.names:                     # no_position: nothing rotates
            return q, k
        if self.kernel:
            return rotate_triton(q, k, C, *self.table(i), self.tables[i].mark)
        ang = self.angles(C, i)
        return rotate(q, k, ang.repeat_interleave(q.shape[2] // ang.shape[2], 2))

    def check_heads(self, n_head):
        for L in self.layouts:
            if n_head % len(L.coord):
                raise ValueError(f"{self.config} has {len(L.coord)} head tables; "
                                 f"{n_head} heads cannot share them")

    def count(self):
        """(rotating planes per layout and head, learned parameters)."""
        return [[sum(c is not None for c in h) for h in L.coord] for L in self.layouts], \
            self.rates.numel() + self.offsets.numel()


# ------------------------------------------------------------------- the readable rotation ----
def rotate(q, k, angles):
    """Readable reference: half-split rotation of q, k (B, T, H, D) by angles (B, T, H|1, P)."""
    cos, sin = angles.cos(), angles.sin()

    def rot(x):
        x1, x2 = x.float().chunk(2, -1)                           # plane i = dims (i, i + P)
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).to(x.dtype)
    return rot(q), rot(k)


# --------------------------------------------------------------------- every configuration ----
def describe(head_dim=128, n_layer=6):
    """(name, rotating planes per head/layer kind, learned parameters, plane groups)."""
    rows = []
    for name, make in CONFIGS.items():
        planes, n_params = Rotary(name, head_dim, n_layer).count()
        spec = make(head_dim // 2, None)
        parts = spec.get("layers", spec.get("heads")) if isinstance(spec, dict) else [spec]
        groups = " | ".join(" + ".join(g.label for g in gs) or "none" for gs in parts)
        rows.append((name, "/".join(str(p) for L in planes for p in L), n_params, groups))
    return rows


def main():
    """Print every configuration's plane allocation."""
    print(f"{'configuration':20} {'rotating planes':>15} {'learned':>8}  groups (128-wide head, 6 layers)")
    for name, planes, n, groups in describe():
        print(f"{name:20} {planes:>15} {n:>8}  {groups}")
    print("and any layer split by its letters, one per layer (s sequence, t tree, n none): e.g. ststststst")


# ------------------------------------------------------------------------- the fused kernel ----
# Rotary.angles then rotate, as one Triton kernel forward and one backward, for M runs at once, each
# with its own plane table, angles computed from the integer coordinates inside the kernel, with gradients
# for q, k, rates, offsets and overlays. A fast path, off unless a run asks for it (--kernel): not yet
# measured faster than the readable rotation compiled (RESULTS "Not yet run on a GPU"), and held to it by
# `kernel_differs`. On CPU the tests run it in triton's interpreter.


@triton.jit
def _block(i, L, pm, BLOCK_T: tl.constexpr):
    """Token block i of a run of L = B x T tokens: its token indices (int64) and masks."""
    r = i.to(tl.int64) * BLOCK_T + tl.arange(0, BLOCK_T)
    return r, r < L, (r < L)[:, None] & pm[None, :]


@triton.jit
def _row(m, r, T, s_m, s_b, s_t):
    """Offset of token r = b x T + t of run m in a tensor with strides s_m, s_b, s_t."""
    return m * s_m + (r // T) * s_b + (r % T) * s_t


@triton.jit
def _angles(C, COL, RATE, OFF, OVL, tab, crow, rmask, mark, p, pm, P: tl.constexpr):
    """Angles (BLOCK_T, BLOCK_P) of table row `tab` for a block of tokens whose coordinates start at
    C + crow; also the coordinate, where it is present, and where the overlay adds."""
    col = tl.load(COL + tab * P + p, mask=pm, other=-1)
    rate = tl.load(RATE + tab * P + p, mask=pm, other=0.0).to(tl.float32)
    off = tl.load(OFF + tab * P + p, mask=pm, other=0.0).to(tl.float32)
    ovl = tl.load(OVL + tab * P + p, mask=pm, other=0.0).to(tl.float32)
    m = rmask[:, None] & pm[None, :] & (col >= 0)[None, :]
    c = tl.load(C + crow[:, None] + tl.maximum(col, 0)[None, :], mask=m, other=-1).to(tl.float32)
    present = c >= 0
    # the run's overlay, where its marker coordinate is present (the directed offset)
    has = rmask & (tl.zeros_like(crow) + mark >= 0)      # broadcast by hand for triton's interpreter
    marked = tl.load(C + crow + tl.maximum(mark, 0), mask=has, other=-1) >= 0
    over = present & marked[:, None]
    ang = tl.where(present, c * rate[None, :] + off[None, :], 0.0) + tl.where(over, ovl[None, :], 0.0)
    return c, present, over, ang


@triton.jit
def _rotate(X, Y, at, out, m, cos, sin, P: tl.constexpr):
    """y = R(angle) x for one head of a block (plane i = dims i, i + P)."""
    x1 = tl.load(X + at, mask=m, other=0.0).to(tl.float32)
    x2 = tl.load(X + at + P, mask=m, other=0.0).to(tl.float32)
    tl.store(Y + out, (x1 * cos - x2 * sin).to(Y.dtype.element_ty), mask=m)
    tl.store(Y + out + P, (x1 * sin + x2 * cos).to(Y.dtype.element_ty), mask=m)


@triton.jit
def _unrotate(X, DY, DX, at, dat, out, m, cos, sin, P: tl.constexpr):
    """dx = R(-angle) dy; returns d angle = y1 dy2 - y2 dy1, y = R(angle) x recomputed."""
    x1 = tl.load(X + at, mask=m, other=0.0).to(tl.float32)
    x2 = tl.load(X + at + P, mask=m, other=0.0).to(tl.float32)
    d1 = tl.load(DY + dat, mask=m, other=0.0).to(tl.float32)
    d2 = tl.load(DY + dat + P, mask=m, other=0.0).to(tl.float32)
    tl.store(DX + out, (d1 * cos + d2 * sin).to(DX.dtype.element_ty), mask=m)
    tl.store(DX + out + P, (d2 * cos - d1 * sin).to(DX.dtype.element_ty), mask=m)
    return (x1 * cos - x2 * sin) * d2 - (x1 * sin + x2 * cos) * d1


@triton.jit
def _rotary_fwd(Q, K, C, COL, RATE, OFF, OVL, MARK, QO, KO, T, L, H, HT, xs_m, xs_b, xs_t, xs_h,
                cs_m, cs_b, cs_t, P: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_P: tl.constexpr):
    """One program per block of BLOCK_T tokens of run m (the grid's second axis), every head, q and k
    together; q, k read through their strides, outputs contiguous (M, B, T, H, D)."""
    m, p = tl.program_id(1).to(tl.int64), tl.arange(0, BLOCK_P)
    r, rmask, mask = _block(tl.program_id(0), L, p < P, BLOCK_T)
    crow, xrow, mark = _row(m, r, T, cs_m, cs_b, cs_t), _row(m, r, T, xs_m, xs_b, xs_t), tl.load(MARK + m)
    for h in range(H):
        _, _, _, ang = _angles(C, COL, RATE, OFF, OVL, m * HT + h * HT // H, crow, rmask, mark, p, p < P,
                               P)
        cos, sin = tl.cos(ang), tl.sin(ang)
        at = (xrow + h * xs_h)[:, None] + p[None, :]
        out = ((m * L + r) * H + h)[:, None] * 2 * P + p[None, :]
        _rotate(Q, QO, at, out, mask, cos, sin, P)
        _rotate(K, KO, at, out, mask, cos, sin, P)


@triton.jit
def _rotary_bwd(Q, K, DQO, DKO, C, COL, RATE, OFF, OVL, MARK, DQ, DK, PART, T, L, H, HT, n_iter,
                xs_m, xs_b, xs_t, xs_h, gs_m, gs_b, gs_t, gs_h, cs_m, cs_b, cs_t,
                P: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_P: tl.constexpr):
    """dx = R(-angle) dy for q and k over n_iter token blocks of run m per program; d angle, summed over
    q and k and over each block's tokens, accumulates in registers into this program's partial sums per
    head of d rate (d angle x coordinate), d offset and d overlay: no atomics."""
    m, p = tl.program_id(1).to(tl.int64), tl.arange(0, BLOCK_P)
    pm, mark, i = p < P, tl.load(MARK + m), tl.program_id(0)
    for h in range(H):
        d_rate = tl.zeros((BLOCK_P,), dtype=tl.float32)   # plane vectors: few registers, many programs
        d_off = tl.zeros((BLOCK_P,), dtype=tl.float32)
        d_ovl = tl.zeros((BLOCK_P,), dtype=tl.float32)
        for j in range(n_iter):
            r, rmask, mask = _block(i * n_iter + j, L, pm, BLOCK_T)
            c, present, over, ang = _angles(C, COL, RATE, OFF, OVL, m * HT + h * HT // H,
                                            _row(m, r, T, cs_m, cs_b, cs_t), rmask, mark, p, pm, P)
            cos, sin = tl.cos(ang), tl.sin(ang)
            at = (_row(m, r, T, xs_m, xs_b, xs_t) + h * xs_h)[:, None] + p[None, :]
            dat = (_row(m, r, T, gs_m, gs_b, gs_t) + h * gs_h)[:, None] + p[None, :]
            out = ((m * L + r) * H + h)[:, None] * 2 * P + p[None, :]
            dang = _unrotate(Q, DQO, DQ, at, dat, out, mask, cos, sin, P) + \
                _unrotate(K, DKO, DK, at, dat, out, mask, cos, sin, P)
            dang = tl.where(present, dang, 0.0)                # absent planes do not turn
            d_rate += tl.sum(dang * c, 0)
            d_off += tl.sum(dang, 0)
            d_ovl += tl.sum(tl.where(over, dang, 0.0), 0)
        part = PART + ((m * tl.num_programs(0) + i) * H + h) * P + p     # PART (3, M, programs, H, P)
        n = tl.num_programs(1) * tl.num_programs(0) * H * P
        tl.store(part, d_rate, mask=pm)
        tl.store(part + n, d_off, mask=pm)
        tl.store(part + 2 * n, d_ovl, mask=pm)


BLOCK_T = 32      # tokens per program and step: 32 x 64 planes x 2 halves x q, k per head
NUM_WARPS = 8     # threads / 32: at Triton's default 4 both kernels spill on sm_90 (255 registers;
# scripts/ptxas_report.py), at 8 neither does (forward 128, backward 223; REFERENCE.md "The fused kernel")
PROGRAMS = 2048   # backward programs aimed at: enough to fill a GPU, few partial sums left to add


def _alike(*xs):
    """xs as they are where they share strides and a contiguous last dimension (q, k sliced from one
    projection), else contiguous copies: the kernel reads them through one set of strides."""
    same = all(x.stride() == xs[0].stride() and x.stride(-1) == 1 for x in xs)
    return xs if same else tuple(x.contiguous() for x in xs)


def _runs_fwd(q, k, C, col, rate, offset, overlay, marker):
    """The forward launch: every run's every block of BLOCK_T tokens."""
    M, B, T, H, D = q.shape
    (q, k), (C,) = _alike(q, k), _alike(C)
    qo, ko = q.new_empty(q.shape), k.new_empty(k.shape)
    tables = [t.contiguous() for t in (col, rate, offset, overlay, marker)]
    _rotary_fwd[(triton.cdiv(B * T, BLOCK_T), M)](
        q, k, C, *tables, qo, ko, T, B * T, H, col.shape[1], *q.stride()[:4], *C.stride()[:3], D // 2,
        BLOCK_T, triton.next_power_of_2(D // 2), num_warps=NUM_WARPS)
    return qo, ko


def _runs_bwd(q, k, dqo, dko, C, col, rate, offset, overlay, marker):
    """The backward launch, each program n_iter blocks of one run: dq, dk and (3, M, HT, P) the
    gradients of rate, offset and overlay."""
    M, B, T, H, D = q.shape
    (q, k), (dqo, dko), (C,) = _alike(q, k), _alike(dqo, dko), _alike(C)
    blocks = triton.cdiv(B * T, BLOCK_T)
    n_iter = max(1, min(16, M * blocks // PROGRAMS))
    grid = (triton.cdiv(blocks, n_iter), M)
    dq, dk = q.new_empty(q.shape), k.new_empty(k.shape)
    part = torch.empty(3, M, grid[0], H, D // 2, device=q.device, dtype=torch.float32)
    _rotary_bwd[grid](q, k, dqo, dko, C, *[t.contiguous() for t in (col, rate, offset, overlay, marker)],
                      dq, dk, part, T, B * T, H, col.shape[1], n_iter, *q.stride()[:4], *dqo.stride()[:4],
                      *C.stride()[:3], D // 2, BLOCK_T, triton.next_power_of_2(D // 2), num_warps=NUM_WARPS)
    HT = col.shape[1]      # second stage: the partials, and heads sharing a table, added
    return dq, dk, part.view(3, M, grid[0], HT, H // HT, D // 2).sum((2, 4))


if not hasattr(torch.ops.treerope, "rotate_runs"):   # once per process: custom ops with fake
    # implementations, so torch.compile keeps them in its graph
    _op = torch.library.custom_op(
        "treerope::rotate_runs", _runs_fwd, mutates_args=(),
        schema="(Tensor q, Tensor k, Tensor C, Tensor col, Tensor rate, Tensor offset, Tensor overlay, "
               "Tensor marker) -> (Tensor, Tensor)")
    _op.register_fake(lambda q, k, *rest: (q.new_empty(q.shape), k.new_empty(k.shape)))
    _bwd = torch.library.custom_op(
        "treerope::rotate_runs_bwd", _runs_bwd, mutates_args=(),
        schema="(Tensor q, Tensor k, Tensor dqo, Tensor dko, Tensor C, Tensor col, Tensor rate, "
               "Tensor offset, Tensor overlay, Tensor marker) -> (Tensor, Tensor, Tensor)")
    _bwd.register_fake(lambda q, k, dqo, dko, C, col, *rest: (
        q.new_empty(q.shape), k.new_empty(k.shape), q.new_empty(3, *col.shape, dtype=torch.float32)))

    def _backward(ctx, dqo, dko):
        q, k, C, col, rate, offset, overlay, marker = ctx.saved_tensors
        dq, dk, d = torch.ops.treerope.rotate_runs_bwd(q, k, dqo, dko, C, col, rate, offset, overlay, marker)
        return dq, dk, None, None, *(g.to(t.dtype) for g, t in zip(d, (rate, offset, overlay))), None
    _op.register_autograd(_backward, setup_context=lambda ctx, inputs, output: ctx.save_for_backward(*inputs))

    def _vmapped(info, in_dims, *args):
        """Under vmap (a study's runs, each calling Rotary.forward): the vmapped runs join the kernel's own
        run dimension, one launch for all of them."""
        n = info.batch_size
        flat = [(a.movedim(d, 0) if d is not None else a.expand(n, *a.shape)).flatten(0, 1)
                for a, d in zip(args, in_dims)]
        qo, ko = torch.ops.treerope.rotate_runs(*flat)
        return (qo.unflatten(0, (n, -1)), ko.unflatten(0, (n, -1))), (0, 0)
    torch.library.register_vmap("treerope::rotate_runs", _vmapped)


def rotate_runs_triton(q, k, C, col, rate, offset, overlay, marker):
    """Fused kernel for M runs at once, each with its own table: rotate(q, k, angles_runs(C, col, rate,
    offset, overlay, marker)) with q, k (M, B, T, H, D), in one launch forward and one backward, with
    gradients for q, k, rate, offset and overlay. Tables may be (M, HT, P) with HT dividing H (heads
    share a table in blocks, as Rotary.forward). Pass marker as a device tensor: no host work per call."""
    M, B, T, H, D = q.shape
    if k.shape != q.shape or C.shape[:3] != (M, B, T) or col.shape[0::2] != (M, D // 2) or \
            H % col.shape[1] or {t.shape for t in (rate, offset, overlay)} != {col.shape}:
        raise ValueError(f"rotate_runs_triton: q, k {tuple(q.shape)} (M, B, T, H, D), C {tuple(C.shape)} "
                         f"(M, B, T, K) and tables {tuple(col.shape)} (M, H or a divisor, D/2) do not fit")
    marker = torch.as_tensor(marker, device=C.device).view(M)
    return torch.ops.treerope.rotate_runs(q, k, C, col, rate, offset, overlay, marker)


def rotate_triton(q, k, C, col, rate, offset, overlay=None, marker=-1):
    """One model's rotation, the single-run case of rotate_runs_triton: q, k (B, T, H, D), tables (H or
    HT, P), marker the column of C where the overlay adds (an int, or a device tensor), -1 none."""
    overlay = torch.zeros_like(offset) if overlay is None else overlay
    qo, ko = rotate_runs_triton(*(t.unsqueeze(0) for t in (q, k, C, col, rate, offset, overlay)), marker)
    return qo[0], ko[0]


def kernel_differs(rot, C, n_head, tol=1e-3):
    """Where the fused kernel and the readable rotation (Rotary.angles, then `rotate`) disagree on
    coordinates C (B, T, K), a run's own: random q and k through every layout, the outputs and the
    gradients of the rates and offsets compared (relative to the largest); a line naming the worst
    difference, or None. A run with --kernel is refused where they differ, so a forked angle law is
    never bypassed by the kernel unnoticed."""
    g = torch.Generator(device=C.device).manual_seed(0)
    D = 2 * rot.tables[0].col.shape[-1]
    q, k = (torch.randn(*C.shape[:2], n_head, D, generator=g, device=C.device) for _ in range(2))
    kernel, worst = rot.kernel, (0.0, None)
    try:
        for i in sorted(set(rot.layer_layout)):
            layer = rot.layer_layout.index(i)
            got = []
            for rot.kernel in (False, True):
                out = rot(q, k, C, layer)
                grads = torch.autograd.grad(sum((o * w).sum() for o, w in zip(out, (q, k))),
                                            [rot.rates, rot.offsets], allow_unused=True)
                got.append([*out, *(torch.zeros(0) if x is None else x for x in grads)])
            for name, a, b in zip(("q", "k", "rate gradients", "offset gradients"), *got):
                scale = a.abs().max().item() if a.numel() else 0.0
                err = (a - b).abs().max().item() / max(scale, 1e-12) if a.numel() else 0.0
                if err > worst[0]:
                    worst = (err, f"{name} of layout {i}")
    finally:
        rot.kernel = kernel
    return f"{worst[1]} differ by {worst[0]:.2g} (relative)" if worst[0] > tol else None


if __name__ == "__main__":   # every configuration of both papers
    main()
