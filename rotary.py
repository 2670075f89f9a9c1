"""Coordinates become angles: every position configuration of both papers, and the rotation.

A head of width D has P = D/2 planes; plane i rotates dimensions i and i + P (half-split).
Each plane reads one integer coordinate c of its token and turns by

    angle = c * rate + present * offset        (appendix §5 "The angles")

where present = 1 when the token has that coordinate (c >= 0 on disk) and 0 otherwise, in
which case the angle is 0. A configuration is a list of plane groups filling the planes in
order; planes left over are unrotated (content channels). Learned rates and offsets are one
set for the whole model (appendix §5: seq_depth and its control have "the same two learned
rates"), initialised to fixed values so that two configurations at one seed differ only in
the rotation. Run `python rotary.py` for every configuration's plane allocation.
"""
import math
import os
import re
from dataclasses import dataclass

import torch
import torch.nn as nn

from data import LEVELS, coordinate

FAST = math.sqrt(2 * (1 - 0.95))   # 0.316 rad per sibling: adjacent siblings have cosine 0.95


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
    return Group((coord, coord), (FAST, FAST / 16), True, False, label)


@dataclass(frozen=True)
class Directed:
    """Directed offset (appendix §5): on the planes reading `coords`, a reference token's angle
    gains a learned constant (init 0): one per plane, or one that all of them share. It adds no
    plane: it overlays planes a Group already fills."""
    coords: tuple
    shared: bool
    label: str


def directed(levels, shared=False):
    """The directed offset on the fast and slow reference-rotation planes of `levels`."""
    coords = tuple(f"refpath{k}" for k in levels)
    n = 1 if shared else 2 * len(coords)
    return Directed(coords, shared, f"directed offset ({n} constant{'s' * (n > 1)})")


def spectrum(coord, n, top):
    """hRoPE: fixed spectrum over n planes whose slowest plane turns half a circle over
    `top`, the largest value the coordinate takes: base = (S*M/2pi)^(D/(D-1)) with S = 2
    (hRoPE paper App. C), rates base^(-i/D)."""
    if n == 1:
        return Group((coord,), (math.pi / max(top, 1),), False, False, f"{coord} 1")
    base = max(2 * top / (2 * math.pi), 1.0 + 1e-6) ** (n / (n - 1))
    return Group((coord,) * n, tuple(base ** (-i / n) for i in range(n)), False, False, f"{coord} {n}")


# -------------------------------------------------------------------------------- registry ----
# Each entry: (planes P) -> layout description. A layout is either a list of Groups (every layer,
# every head) or {'layers': [...per layer...]} / {'heads': [...per head...]} of such lists.
def _seq_layer(P):
    return [seq(P)]                                   # a sequence layer: all planes, 10000^(-i/P)


def _tree_layer(P):
    return [tree(), within()]                         # a tree layer: 44 tree + 4 within planes


def _layer_split(pattern):
    kinds = {"s": _seq_layer, "t": _tree_layer, "n": lambda P: []}
    return lambda P, corpus: {"layers": [kinds[c](P) for c in pattern]}


def _hrope(which):
    """hRoPE (paragraph-boundaries paper §3.1): P/4 planes for p1 (paragraph), P/4 for p2
    (sentence, or line in code), P/2 for p3 (token inside its sentence); each group a fixed
    spectrum calibrated from the corpus maxima. sent_axial leaves the p1 planes unrotated;
    rand/period replace p1 by a density-matched random label / floor(t/L) (see coords())."""
    def make(P, corpus):
        top = (corpus or {}).get("p_max", [64, 64, 1024])
        n1, n2 = P // 4, P // 4
        n3 = P - n1 - n2
        p1 = unrotated(n1) if which == "sent" else spectrum(which + "_p1" if which in ("rand", "period") else "p1", n1, top[0])
        return [p1, spectrum("p2", n2, top[1]), spectrum("p3", n3, top[2])]
    return make


CONFIGS = {
    # depth-perception paper (planes of a 128-wide head; glossary names)
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
    # reference rotation: a use takes its target's path on the levels the target occupies
    "ref_rotation": lambda P, c: [seq(16), tree(source="refpath", label="tree 44 (references on target)")],
    "ref_whole_path": lambda P, c: [seq(16), tree(source="refwhole", label="tree 44 (references: whole target path)")],
    # Directed offset (§5): "the reference sits a learned constant angle away from its target rather
    # than exactly on it". A reference sits on its target only on the levels it takes from it, on
    # spreadsheets "its sheet, row and column levels"; its deeper levels are its own. So the constant
    # is added there: one per plane (6; every angle the appendix learns is per plane), or the literal
    # one angle on all six (ref_directed_one).
    "ref_directed": lambda P, c: [seq(16), tree(source="refpath", label="tree 44 (references on target)"),
                                  directed(range(1, 4))],
    "ref_directed_one": lambda P, c: [seq(16), tree(source="refpath", label="tree 44 (references on target)"),
                                      directed(range(1, 4), shared=True)],
    # Own plane group (§5): "references rotate a separate group of planes rather than the tree
    # planes": the tree keeps every token's own path and the group carries what reference rotation
    # would have written, the sheet, row and column of the cell a reference names ("17.25% of
    # references point to another sheet, which is why the sheet level is replaced too") and a
    # token's own cell elsewhere, so that a reference and its target line up there. 16 + 44 + 6
    # planes overfill the head: tree level 22 gives way, which no spreadsheet token reaches
    # (deepest: 7, synthetic; 6, real workbooks).
    "ref_own_group": lambda P, c: [seq(16), tree(range(1, 22), label="tree 42 (levels 1-21)"),
                                   tree(range(1, 4), source="refpath", label="reference sheet+row+col 6")],
    "seq_tree_symbol": lambda P, c: [seq(16), tree(), pair("symbol", "symbol 2")],
    # named in the paper, defined here (REFERENCE.md "Position configurations": this repository's reading)
    "seq_depth_label": lambda P, c: [seq(16), pair("depth", "depth 2"), pair("label", "label 2")],
    # two corpora in one model (web_sheets): web pages write depth and workbooks their grid into
    # one plane group, or each corpus has a group of its own
    "two_corpus_shared": lambda P, c: [seq(16), tree(range(1, 4), source="shared", label="shared: depth | grid 6")],
    "two_corpus_own": lambda P, c: [seq(16), pair("owndepth", "web depth 2"),
                                    tree(range(1, 4), source="ownsheet", label="sheet grid 6")],
    "seq_stmt_grid": lambda P, c: [seq(16), pair("grid_row", "statement row 2"), pair("grid_col", "statement column 2")],
    # Figure 4: "a grid (the statement grid on code; row and column on spreadsheets; exchange,
    # speaker and position on chat), with depth where marked": each grid, and each with depth.
    # Chat has no grid + depth: a message's tokens sit at depth 3 and newlines at 0 (chat.py), so
    # depth would say only what the token itself says.
    "seq_grid_depth": lambda P, c: [seq(16), tree(range(1, 4), label="grid 6"), pair("depth", "depth 2")],
    "seq_stmt_grid_depth": lambda P, c: [seq(16), pair("grid_row", "statement row 2"),
                                         pair("grid_col", "statement column 2"), pair("depth", "depth 2")],
    "seq_chat_grid": lambda P, c: [seq(16), pair("exchange", "exchange 2"), pair("speaker", "speaker 2"),
                                   pair("turn_pos", "position in turn 2")],
    # Figure 4: "depth and depth with a label ... Every label-on-depth variant is in the interactive
    # appendix" (not given to us). Beside seq_depth_label (the label on planes of its own): the
    # label written on the depth planes themselves, no extra plane (data.py "depth_label"), and
    # the label without depth, the control that says which of the two carries a gain.
    "seq_label_on_depth": lambda P, c: [seq(16), pair("depth_label", "depth + 23 x label 2")],
    "seq_label": lambda P, c: [seq(16), pair("label", "label 2")],
    # paragraph-boundaries paper (hRoPE): fixed spectra, no learned parameters
    "flat": lambda P, c: [seq(P)],
    "sent_axial": _hrope("sent"),
    "hrope_axial": _hrope("real"),
    "rand_axial": _hrope("rand"),
    "period_axial": _hrope("period"),
}


def known(name):
    """A registry entry, or a layer split named by its letters, one per layer (s sequence, t tree,
    n no rotation): the paper's six-layer patterns are listed above, and any other length works
    (the larger web run's ten-layer alternating split is `ststststst`)."""
    return name in CONFIGS or re.fullmatch(r"[stn]{2,}", name) is not None


@dataclass
class Layout:
    """One plane table: per head (H or 1) x plane, the coordinate read and the rate/offset."""
    coord: list           # [head][plane] -> coordinate name or None
    rate_init: list       # [head][plane]
    rate_param: list      # [head][plane] -> index into learned rates, -1 = fixed
    offset_param: list    # [head][plane] -> index into learned offsets, -1 = none
    overlay: list = None  # [head][plane] -> index into learned offsets added where 'isref'


def _fill(groups, P, rates, offsets):
    """Lay groups on planes 0..P-1; register learned rates/offsets (appending to the lists).
    A Directed entry overlays the planes it names: the fifth value, else None."""
    coord, rate, rp, op = [], [], [], []
    for g in groups:
        if isinstance(g, Directed):
            continue
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
    coord += [None] * (P - n)
    rate += [0.0] * (P - n)
    rp += [-1] * (P - n)
    op += [-1] * (P - n)
    ov = None
    for d in (g for g in groups if isinstance(g, Directed)):   # learned constants (init 0), added on references
        ov = ov or [-1] * P
        planes = [i for i, c in enumerate(coord) if c in d.coords]
        first = len(offsets)
        for j, i in enumerate(planes):
            ov[i] = first if d.shared else first + j
        offsets.extend([0.0] * (1 if d.shared else len(planes)))
    return coord, rate, rp, op, ov


def build(name, head_dim, n_layer, corpus=None):
    """Resolve a configuration: (list of Layouts, layer -> layout index, rates, offsets)."""
    if not known(name):
        raise KeyError(f"unknown configuration {name!r}; known: {', '.join(CONFIGS)}, or any s/t/n layer pattern")
    P = head_dim // 2
    spec = CONFIGS.get(name, _layer_split(name))(P, corpus)
    rates, offsets = [], []
    if isinstance(spec, dict) and "layers" in spec:
        if len(spec["layers"]) != n_layer:
            raise ValueError(f"{name} is a {len(spec['layers'])}-layer pattern; the model has {n_layer} layers")
        # layers of one kind share one table (and its learned parameters)
        layouts, index, seen = [], [], {}
        for groups in spec["layers"]:
            key = tuple(g.label for g in groups)
            if key not in seen:
                seen[key] = len(layouts)
                c, r, rp, op, _ = _fill(groups, P, rates, offsets)
                layouts.append(Layout([c], [r], [rp], [op]))
            index.append(seen[key])
        return layouts, index, rates, offsets
    heads = spec["heads"] if isinstance(spec, dict) else [spec]
    cols = [_fill(groups, P, rates, offsets) for groups in heads]
    overlay = [c[4] or [-1] * P for c in cols] if any(c[4] for c in cols) else None
    layout = Layout(*[[c[i] for c in cols] for i in range(4)], overlay=overlay)
    return [layout], [0] * n_layer, rates, offsets


class Rotary(nn.Module):
    """The learned rotary parameters of one model plus its plane tables."""

    def __init__(self, config, head_dim, n_layer, corpus=None):
        super().__init__()
        self.config = config
        self.layouts, self.layer_layout, rates, offsets = build(config, head_dim, n_layer, corpus)
        # rotary parameters: fixed initial values (never random), excluded from weight decay
        self.rates = nn.Parameter(torch.tensor(rates, dtype=torch.float32))
        self.offsets = nn.Parameter(torch.tensor(offsets, dtype=torch.float32))
        names = {c for L in self.layouts for h in L.coord for c in h if c}
        if any(L.overlay for L in self.layouts):
            names.add("isref")
        self.names = sorted(names)
        for i, L in enumerate(self.layouts):
            self.register_buffer(f"fixed{i}", torch.tensor(L.rate_init, dtype=torch.float32), persistent=False)
            self.register_buffer(f"rp{i}", torch.tensor(L.rate_param), persistent=False)
            self.register_buffer(f"op{i}", torch.tensor(L.offset_param), persistent=False)
            col = [[self.names.index(c) if c else -1 for c in h] for h in L.coord]
            self.register_buffer(f"col{i}", torch.tensor(col, dtype=torch.int32), persistent=False)
            ov = L.overlay or [[-1] * len(h) for h in L.coord]
            self.register_buffer(f"ov{i}", torch.tensor(ov), persistent=False)

    def coords(self, batch, generator=None):
        """(B, T, K) int32 matrix of the coordinates this configuration reads (-1 absent)."""
        if not self.names:
            return batch["pos"].new_zeros(*batch["pos"].shape, 0).int()
        return torch.stack([coordinate(batch, n, generator) for n in self.names], -1).int()

    def table(self, i):
        """Layout i as (col, rate, offset, overlay_offset) tensors of shape (H or 1, P)."""
        fixed, rp, op, ov = (getattr(self, f"{n}{i}") for n in ("fixed", "rp", "op", "ov"))
        pad = lambda p: torch.cat([p, p.new_zeros(1)])          # index -1 -> 0
        rate = torch.where(rp >= 0, pad(self.rates)[rp], fixed)
        offset = torch.where(op >= 0, pad(self.offsets)[op], 0.0)
        overlay = torch.where(ov >= 0, pad(self.offsets)[ov], 0.0)
        return getattr(self, f"col{i}"), rate, offset, overlay

    def angles(self, C, i):
        """Reference angles (B, T, H or 1, P) for layout i from the coordinate matrix C."""
        col, rate, offset, overlay = self.table(i)
        c = C[..., col.clamp(min=0).long()].float()             # (B, T, Hl, P)
        present = (c >= 0) & (col >= 0)
        ang = torch.where(present, c * rate + offset, 0.0)
        if self.ov_used(i):   # directed offset: references sit a learned constant from target
            isref = C[..., self.names.index("isref")].float().unsqueeze(-1).unsqueeze(-1) >= 0
            ang = ang + torch.where(isref & present, overlay, 0.0)
        return ang

    def ov_used(self, i):
        return self.layouts[i].overlay is not None

    def forward(self, q, k, C, layer):
        """Rotate q, k of shape (B, T, H, D) for `layer`. Triton on CUDA, PyTorch elsewhere. A
        layout with HT head tables gives each a contiguous block of H / HT heads (head_split
        with 4 heads: two sequence heads, then two tree heads)."""
        i = self.layer_layout[layer]
        if not self.names:                     # no_position: nothing rotates
            return q, k
        if q.is_cuda and triton_available() and os.environ.get("TREEROPE_TRITON", "1") == "1":
            isref = self.names.index("isref") if self.ov_used(i) else -1
            return rotate_triton(q, k, C, *self.table(i), isref)
        ang = self.angles(C, i)
        return rotate(q, k, ang.repeat_interleave(q.shape[2] // ang.shape[2], 2))

    def check_heads(self, n_head):
        for L in self.layouts:
            if n_head % len(L.coord):
                raise ValueError(f"{self.config} has {len(L.coord)} head tables; {n_head} heads cannot share them")

    def count(self):
        """(rotating planes per layout and head, learned parameters)."""
        return [[sum(c is not None for c in h) for h in L.coord] for L in self.layouts], \
            self.rates.numel() + self.offsets.numel()


def rotate(q, k, angles):
    """Readable reference: half-split rotation of q, k (B, T, H, D) by angles (B, T, H|1, P)."""
    cos, sin = angles.cos(), angles.sin()

    def rot(x):
        x1, x2 = x.float().chunk(2, -1)                           # plane i = dims (i, i + P)
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).to(x.dtype)
    return rot(q), rot(k)


# ----------------------------------------------------------------------------------- triton ----
try:   # the repository works where triton cannot be installed
    import triton
    import triton.language as tl
except ImportError:
    triton = None


def triton_available():
    return triton is not None


if triton is not None:
    @triton.jit
    def _angles(C, COL, RATE, OFF, OVL, rows, rmask, ht, p, pm, NC, ISREF, P: tl.constexpr,
                HAS_OVL: tl.constexpr):
        """Angles (BLOCK_T, BLOCK_P) of table head `ht` for a block of token rows, from the
        integer coordinates; also the coordinate, where it is present, and where the overlay adds."""
        col = tl.load(COL + ht * P + p, mask=pm, other=-1)
        rate = tl.load(RATE + ht * P + p, mask=pm, other=0.0)
        off = tl.load(OFF + ht * P + p, mask=pm, other=0.0)
        m = rmask[:, None] & pm[None, :] & (col >= 0)[None, :]
        c = tl.load(C + rows[:, None] * NC + tl.maximum(col, 0)[None, :], mask=m, other=-1).to(tl.float32)
        present = c >= 0
        ang = tl.where(present, c * rate[None, :] + off[None, :], 0.0)
        over = present & False
        if HAS_OVL:   # directed offset: a reference sits a learned constant from its target
            isref = tl.load(C + rows * NC + ISREF, mask=rmask, other=-1) >= 0
            over = present & isref[:, None]
            ang += tl.where(over, tl.load(OVL + ht * P + p, mask=pm, other=0.0)[None, :], 0.0)
        return c, present, over, ang

    @triton.jit
    def _block(N, P: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_P: tl.constexpr):
        """This program's token rows and planes, and their masks."""
        rows = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
        p = tl.arange(0, BLOCK_P)
        return rows, rows < N, p, p < P, (rows < N)[:, None] & (p < P)[None, :]

    @triton.jit
    def _head(C, COL, RATE, OFF, OVL, rows, rmask, h, H, HT, p, pm, NC, ISREF, P: tl.constexpr, HAS_OVL: tl.constexpr):
        """Head h of a block: its table head's angles (cos, sin) and the offsets of its first half-dims."""
        c, present, over, ang = _angles(C, COL, RATE, OFF, OVL, rows, rmask, h * HT // H, p, pm, NC, ISREF, P, HAS_OVL)
        return c, present, over, tl.cos(ang), tl.sin(ang), (rows[:, None] * H + h) * 2 * P + p[None, :]

    @triton.jit
    def _rotate(X, Y, at, m, cos, sin, P: tl.constexpr):
        """y = R(angle) x for one head of a block (plane i = dims i, i + P)."""
        x1 = tl.load(X + at, mask=m, other=0.0).to(tl.float32)
        x2 = tl.load(X + at + P, mask=m, other=0.0).to(tl.float32)
        tl.store(Y + at, (x1 * cos - x2 * sin).to(Y.dtype.element_ty), mask=m)
        tl.store(Y + at + P, (x1 * sin + x2 * cos).to(Y.dtype.element_ty), mask=m)

    @triton.jit
    def _unrotate(X, DY, DX, at, m, cos, sin, P: tl.constexpr):
        """dx = R(-angle) dy; returns d angle = y1 dy2 - y2 dy1, y = R(angle) x recomputed."""
        x1 = tl.load(X + at, mask=m, other=0.0).to(tl.float32)
        x2 = tl.load(X + at + P, mask=m, other=0.0).to(tl.float32)
        d1 = tl.load(DY + at, mask=m, other=0.0).to(tl.float32)
        d2 = tl.load(DY + at + P, mask=m, other=0.0).to(tl.float32)
        tl.store(DX + at, (d1 * cos + d2 * sin).to(DX.dtype.element_ty), mask=m)
        tl.store(DX + at + P, (d2 * cos - d1 * sin).to(DX.dtype.element_ty), mask=m)
        return (x1 * cos - x2 * sin) * d2 - (x1 * sin + x2 * cos) * d1

    @triton.jit
    def _rotary_fwd(Q, K, C, COL, RATE, OFF, OVL, QO, KO, N, H, HT, NC, ISREF, P: tl.constexpr,
                    BLOCK_T: tl.constexpr, BLOCK_P: tl.constexpr, HAS_OVL: tl.constexpr):
        """One program per block of BLOCK_T tokens, every head, q and k together."""
        rows, rmask, p, pm, m = _block(N, P, BLOCK_T, BLOCK_P)
        for h in range(H):
            c, present, over, cos, sin, at = _head(C, COL, RATE, OFF, OVL, rows, rmask, h, H, HT, p, pm, NC, ISREF,
                                                   P, HAS_OVL)
            _rotate(Q, QO, at, m, cos, sin, P)
            _rotate(K, KO, at, m, cos, sin, P)

    @triton.jit
    def _rotary_bwd(Q, K, DQO, DKO, C, COL, RATE, OFF, OVL, DQ, DK, PART, N, H, HT, NC, ISREF,
                    P: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_P: tl.constexpr, HAS_OVL: tl.constexpr):
        """dx = R(-angle) dy for q and k; d angle summed over q and k, then reduced in registers
        over this block's tokens into per-program partial sums of d rate (d angle x coordinate),
        d offset and d overlay: no atomics."""
        rows, rmask, p, pm, m = _block(N, P, BLOCK_T, BLOCK_P)
        for h in range(H):
            c, present, over, cos, sin, at = _head(C, COL, RATE, OFF, OVL, rows, rmask, h, H, HT, p, pm, NC, ISREF,
                                                   P, HAS_OVL)
            dang = _unrotate(Q, DQO, DQ, at, m, cos, sin, P) + _unrotate(K, DKO, DK, at, m, cos, sin, P)
            dang = tl.where(present, dang, 0.0)                # absent planes do not turn
            out = PART + (tl.program_id(0) * H + h) * P + p
            stride = tl.num_programs(0) * H * P
            tl.store(out, tl.sum(dang * tl.where(present, c, 0.0), 0), mask=pm)
            tl.store(out + stride, tl.sum(dang, 0), mask=pm)
            tl.store(out + 2 * stride, tl.sum(tl.where(over, dang, 0.0), 0), mask=pm)


BLOCK_T = 32   # tokens per program: 32 x 64 planes x 2 halves x q, k per head


class _RotaryTriton(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, C, col, rate, offset, overlay, isref):
        B, T, H, D = q.shape
        N, P, HT = B * T, D // 2, col.shape[0]
        C2 = C.reshape(N, -1).contiguous()
        tables = (col.contiguous(), rate.float().contiguous(), offset.float().contiguous(),
                  overlay.float().contiguous())
        q, k = q.contiguous(), k.contiguous()
        qo, ko = torch.empty_like(q), torch.empty_like(k)
        _rotary_fwd[(triton.cdiv(N, BLOCK_T),)](q, k, C2, *tables, qo, ko, N, H, HT, C2.shape[1], isref, P,
                                               BLOCK_T, triton.next_power_of_2(P), isref >= 0)
        ctx.save_for_backward(q, k, C2, *tables)
        ctx.isref = isref
        return qo, ko

    @staticmethod
    def backward(ctx, dqo, dko):
        q, k, C2, *tables = ctx.saved_tensors
        B, T, H, D = q.shape
        N, P, HT = B * T, D // 2, tables[0].shape[0]
        grid = triton.cdiv(N, BLOCK_T)
        dq, dk = torch.empty_like(q), torch.empty_like(k)
        part = torch.empty(3, grid, H, P, device=q.device, dtype=torch.float32)
        _rotary_bwd[(grid,)](q, k, dqo.contiguous(), dko.contiguous(), C2, *tables, dq, dk, part, N, H, HT,
                             C2.shape[1], ctx.isref, P, BLOCK_T, triton.next_power_of_2(P), ctx.isref >= 0)
        d_rate, d_off, d_ovl = part.view(3, grid, HT, H // HT, P).sum((1, 3))   # heads sharing a table
        return dq, dk, None, None, d_rate, d_off, d_ovl, None


def rotate_triton(q, k, C, col, rate, offset, overlay=None, isref=-1):
    """Fused kernel: angles computed from integer coordinates inside the kernel (plus the
    directed-offset overlay where column `isref` of C marks a reference); backward returns
    gradients for q, k, rates, offsets and overlay offsets."""
    overlay = torch.zeros_like(offset) if overlay is None else overlay
    return _RotaryTriton.apply(q, k, C, col, rate, offset, overlay, isref)


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


def bench(config="seq_tree_depth", B=8, T=1024, H=2, D=128, reps=5):
    """Forward+backward of the rotation alone: eager, torch.compile and (on CUDA) Triton, in bf16
    on CUDA (the paper's training precision) and fp32 on CPU. Returns {variant: seconds per
    call}, the kernel's error against the reference, and on CUDA the GB/s each variant moves."""
    import time
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16 if dev == "cuda" else torch.float32
    rot = Rotary(config, D, 1).to(dev)
    g = torch.Generator().manual_seed(0)
    b = {"pos": torch.arange(T).expand(B, T), "depth": torch.randint(1, 22, (B, T), generator=g),
         "path": torch.randint(0, 8, (B, T, LEVELS), generator=g), "within": torch.randint(0, 9, (B, T), generator=g)}
    C = rot.coords({k: v.to(dev) for k, v in b.items()})
    q = torch.randn(B, T, H, D, device=dev, dtype=dtype, requires_grad=True)
    k = torch.randn(B, T, H, D, device=dev, dtype=dtype, requires_grad=True)
    eager = lambda: rotate(q, k, rot.angles(C, 0))
    variants = {"eager": eager, "compile": torch.compile(eager)}
    if dev == "cuda" and triton_available():
        variants["triton"] = lambda: rotate_triton(q, k, C, *rot.table(0))
    out = {}
    if "triton" in variants:   # the kernel against the readable reference at full size
        with torch.no_grad():
            out["triton_max_abs_err"] = max((x.float() - y.float()).abs().max().item()
                                            for x, y in zip(eager(), variants["triton"]()))
    for name, fn in variants.items():
        for i in range(reps + 2):
            if i == 2:
                if dev == "cuda":
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
            a, bb = fn()
            (a.sum() + bb.sum()).backward()
        if dev == "cuda":
            torch.cuda.synchronize()
        out[name] = (time.perf_counter() - t0) / reps
        if dev == "cuda":   # least bytes moved: fwd reads q, k and writes both; bwd reads q, k,
            # their output gradients and writes dq, dk (coordinates and tables are small)
            out[name + "_GBps"] = 10 * q.numel() * q.element_size() / out[name] / 1e9
    return out


if __name__ == "__main__":
    import sys
    if "--bench" in sys.argv:   # python rotary.py --bench [B T]: default B=8, T=1,024
        sizes = [int(a) for a in sys.argv[sys.argv.index("--bench") + 1:]]
        r = bench(B=sizes[0], T=sizes[1]) if len(sizes) == 2 else bench()
        print({k: round(v, 5) for k, v in r.items()})
        print(f"compile / eager time: {r['compile'] / r['eager']:.2f}")
    else:
        print(f"{'configuration':20} {'rotating planes':>15} {'learned':>8}  groups (128-wide head, 6 layers)")
        for name, planes, n, groups in describe():
            print(f"{name:20} {planes:>15} {n:>8}  {groups}")
        print("and any layer split by its letters, one per layer (s sequence, t tree, n none): e.g. ststststst")
