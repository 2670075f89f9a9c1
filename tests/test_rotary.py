import math
import os
import subprocess
import sys

import pytest
import torch
from conftest import needs_triton

import rotary
from rotary import FAST, Rotary
from treerope import batches, ensemble

# the fused kernel, rotary.py's Triton section; conftest.py runs it in triton's interpreter on CPU
NO_TRITON = rotary.tl.constexpr is None


def batch(B=2, T=7, seed=0):
    g = torch.Generator().manual_seed(seed)
    path = torch.randint(0, 9, (B, T, 22), generator=g)
    depth = torch.randint(1, 22, (B, T), generator=g)
    path[torch.arange(22).expand(B, T, 22) >= depth[..., None]] = -1   # levels below depth absent
    return {"pos": torch.arange(T).expand(B, T), "path": path, "depth": depth,
            "within": torch.randint(-1, 30, (B, T), generator=g),
            "ref_path": torch.where(torch.rand(B, T, 1, generator=g) < 0.3, path, -1),
            "symbol": torch.randint(-1, 5, (B, T), generator=g),
            "p": torch.randint(0, 9, (B, T, 3), generator=g),
            "label": torch.randint(-1, 6, (B, T), generator=g),
            "grid": torch.randint(-1, 9, (B, T, 2), generator=g),
            "source": torch.randint(0, 2, (B, T), generator=g),
            "chat": torch.randint(0, 9, (B, T, 3), generator=g)}


def test_initial_rates_from_the_paper():
    assert FAST == pytest.approx(0.316, abs=1e-3)
    assert math.cos(FAST) == pytest.approx(0.95, abs=1e-3)     # adjacent siblings: cosine 0.95
    assert 2 * math.pi / FAST == pytest.approx(19.87, abs=0.01)   # fast plane wraps after ~20
    assert 2 * math.pi / (FAST / 16) == pytest.approx(318, abs=1)
    rot = Rotary("all_signals", 128, 1)
    col, rate, offset, _ = rot.table(0)
    within = [rate[0, i].item() for i in range(60, 64)]
    assert [2 * math.pi / r for r in within] == pytest.approx([19.87, 79.48, 317.9, 1271.7], rel=1e-3)
    assert offset.abs().sum() == 0 and rot.offsets.abs().sum() == 0   # every offset starts at 0
    assert rate[0, :16].tolist() == pytest.approx([10000 ** (-i / 16) for i in range(16)])
    assert rate[0, 16:18].tolist() == pytest.approx([FAST, FAST / 16])
    d = Rotary("seq_depth", 128, 1).table(0)[1]
    assert d[0, 16:18].tolist() == pytest.approx([FAST, FAST / 16])


def test_hrope_spectra_by_hand():
    """App. C: base_g = (S M_g / 2 pi)^(D_g / (D_g - 1)), S = 2, rates base^(-i / D_g). A 64-wide
    head has 32 planes: 8 for p1, 8 for p2, 16 for p3. By hand for M = (10, 40, 200): bases
    3.755656, 18.312786, 83.972832; the slowest plane of each group turns exactly pi over M."""
    groups = rotary.CONFIGS["hrope_axial"](32, {"p_max": [10, 40, 200]})
    assert [g.coord[0] for g in groups] == ["p1", "p2", "p3"] and [len(g.rates) for g in groups] == [8, 8, 16]
    for g, base, M in zip(groups, (3.755656, 18.312786, 83.972832), (10, 40, 200)):
        D = len(g.rates)
        assert g.rates[0] == 1.0 and g.rates[1] == pytest.approx(base ** (-1 / D), rel=1e-6)
        assert g.rates[-1] * M == pytest.approx(math.pi, rel=1e-9)
    sent = rotary.CONFIGS["sent_axial"](32, {"p_max": [10, 40, 200]})
    assert [len(g.rates) for g in sent] == [8, 8, 16] and all(r == 0 for r in sent[0].rates)


@pytest.mark.parametrize("name,planes,learned", [
    ("seq_only", 16, 0), ("seq_depth", 18, 2), ("top_level", 18, 2), ("seq_tree", 60, 88),
    ("all_signals", 64, 96), ("seq_tree_depth", 62, 90), ("no_position", 0, 0), ("full_rope", 64, 0),
    ("tree_only", 44, 88), ("tree_within", 48, 96), ("seq_grid", 22, 12), ("seq_depth_rank", 20, 4),
    ("seq_tree_symbol", 62, 90), ("hrope_axial", 64, 0), ("sent_axial", 48, 0), ("flat", 64, 0),
    ("ref_directed", 60, 94), ("ref_directed_one", 60, 89), ("ref_own_group", 64, 96),
    ("seq_grid_depth", 24, 14), ("seq_stmt_grid_depth", 22, 6), ("seq_chat_grid", 22, 6),
    ("seq_label_on_depth", 18, 2), ("seq_label", 18, 2)])
def test_plane_counts(name, planes, learned):
    counts, n = Rotary(name, 128, 6).count()
    assert max(max(h) for h in counts) == planes and n == learned


@pytest.mark.parametrize("name", ["ref_directed", "ssttnn", "head_split"])
def test_a_checkpoint_holds_the_learned_parameters_alone_and_every_table_reads_them(name):
    """Checkpoints hold a Rotary's `rates` and `offsets` alone (the plane tables are rebuilt from the
    configuration): a state dict of just those keys, as every checkpoint has written them, loads
    strictly, and each layout's table then reads the loaded values, planted here (rate j = j + 1,
    offset j = j + 0.5), or its fixed initial rate. A table saved with the checkpoint would refuse
    the older checkpoints; a table holding copies of the initial values would ignore the loaded ones."""
    rot = Rotary(name, 128, 6)
    assert set(rot.state_dict()) == {"rates", "offsets"}
    rot.load_state_dict({"rates": torch.arange(rot.rates.numel()) + 1.0,
                         "offsets": torch.arange(rot.offsets.numel()) + 0.5})
    for i, L in enumerate(rot.layouts):
        _, rate, offset, overlay = rot.table(i)
        overlays = L.overlay or [[-1] * len(h) for h in L.coord]
        assert torch.equal(rate, torch.tensor([[j + 1.0 if j >= 0 else r for j, r in zip(*h)]
                                               for h in zip(L.rate_param, L.rate_init)]))
        assert offset.tolist() == [[j + 0.5 if j >= 0 else 0.0 for j in h] for h in L.offset_param]
        assert overlay.tolist() == [[j + 0.5 if j >= 0 else 0.0 for j in h] for h in overlays]
    if name == "ref_directed":                        # the overlay is read: its six planes
        assert (rot.table(0)[3] > 0).sum() == 6


def test_layer_and_head_splits():
    rot = Rotary("ssttnn", 128, 6)
    assert rot.layer_layout == [0, 0, 1, 1, 2, 2]
    assert rot.count()[0] == [[64], [48], [0]]
    assert Rotary("head_split", 128, 6).count()[0] == [[64, 48]]
    with pytest.raises(ValueError):
        Rotary("ststst", 128, 4)
    with pytest.raises(ValueError):                     # 60 planes do not fit a 64-wide head
        Rotary("seq_tree", 64, 1)


def score(rot, b, layer=0):
    torch.manual_seed(1)
    q, k = torch.randn(2, b["pos"].shape[1], 1, 128), torch.randn(2, b["pos"].shape[1], 1, 128)
    qr, kr = rot(q, k, rot.coords(b), layer)
    return qr[:, :, 0] @ kr[:, :, 0].transpose(1, 2)


@pytest.mark.parametrize("name", ["seq_only", "seq_tree", "seq_depth", "all_signals"])
def test_relative_position_property(name):
    """With offsets at 0 a score depends only on coordinate differences: shifting every
    coordinate leaves every q.k score unchanged."""
    rot = Rotary(name, 128, 1)
    b = batch()
    b["path"], b["within"] = b["path"].abs(), b["within"].abs()   # all present: absent turns by 0
    shifted = {k: (v + 5 if k in ("pos", "depth", "within") else torch.where(v >= 0, v + 3, v))
               if k != "ref_path" else v for k, v in b.items()}
    assert torch.allclose(score(rot, b), score(rot, shifted), atol=1e-3)


def test_parent_and_child_differ_by_one_step_on_depth_planes():
    rot = Rotary("seq_tree_depth", 128, 1)
    b = batch(1, 2)
    b["depth"] = torch.tensor([[3, 4]])
    ang = rot.angles(rot.coords(b), 0)[0, :, 0]
    step = (ang[1] - ang[0])[60:62]
    assert step.tolist() == pytest.approx([FAST, FAST / 16])
    b["depth"] = torch.tensor([[7, 8]])
    assert (rot.angles(rot.coords(b), 0)[0, 1, 0] - rot.angles(rot.coords(b), 0)[0, 0, 0])[60:62].tolist() \
        == pytest.approx(step.tolist(), abs=1e-5)


def test_absent_levels_contribute_no_angle():
    rot = Rotary("seq_tree", 128, 1)
    with torch.no_grad():
        rot.offsets.fill_(0.7)
    b = batch(1, 3)
    b["path"][:] = -1
    b["path"][0, 0, 0] = 2
    ang = rot.angles(rot.coords(b), 0)[0, :, 0]
    assert ang[0, 16:18].tolist() == pytest.approx([0.7 + 2 * FAST, 0.7 + 2 * FAST / 16])
    assert ang[0, 18:60].abs().sum() == 0 and ang[1:, 16:60].abs().sum() == 0


def test_reference_rotation_takes_target_levels():
    b = batch(1, 1)
    b["path"][:] = -1
    b["path"][0, 0, :4] = torch.tensor([1, 2, 3, 4])
    b["ref_path"][:] = -1
    b["ref_path"][0, 0, :2] = torch.tensor([7, 8])
    part = rotary.coordinate(b, "refpath1"), rotary.coordinate(b, "refpath3")
    assert part[0].item() == 7 and part[1].item() == 3                # own path below the target's
    assert rotary.coordinate(b, "refwhole3").item() == -1            # whole-path: target's only


def test_reference_rotation_keeps_the_use_s_own_path_length():
    """A use deeper than its definition keeps its lower levels; a use shallower than its
    definition does not grow: the definition's extra levels are not written (appendix §5)."""
    b = batch(1, 2)
    b["path"][:] = -1
    b["ref_path"][:] = -1
    b["path"][0, 0, :3] = torch.tensor([0, 1, 2])                    # deeper use, definition [0, 4]
    b["ref_path"][0, 0, :2] = torch.tensor([0, 4])
    b["path"][0, 1, :2] = torch.tensor([0, 1])                       # shallower use, definition [0, 4, 5, 6]
    b["ref_path"][0, 1, :4] = torch.tensor([0, 4, 5, 6])
    got = torch.stack([rotary.coordinate(b, f"refpath{k}") for k in range(1, 6)], -1)[0]
    assert got.tolist() == [[0, 4, 2, -1, -1], [0, 4, -1, -1, -1]]
    whole = torch.stack([rotary.coordinate(b, f"refwhole{k}") for k in range(1, 6)], -1)[0]
    assert whole.tolist() == [[0, 4, -1, -1, -1], [0, 4, 5, 6, -1]]  # the variant that does change length


def one_token(**fields):
    """A batch of one token: its path (a list), ref_path, depth, label, grid and chat as given."""
    b = batch(1, 1)
    for f in ("path", "ref_path"):
        b[f][:] = -1
        b[f][0, 0, :len(fields.get(f, []))] = torch.tensor(fields.get(f, []), dtype=torch.long)
    for f in ("depth", "label"):
        b[f][:] = fields.get(f, -1)
    for f in ("grid", "chat"):
        b[f][0, 0] = torch.tensor(fields.get(f, [-1] * b[f].shape[-1]))
    return b


GRIDS = {   # configuration: (its planes after the 16 sequence planes, a token, what each plane reads)
    "seq_grid_depth": (["path1"] * 2 + ["path2"] * 2 + ["path3"] * 2 + ["depth"] * 2,
                       dict(path=[1, 3, 6, 0, 2], depth=5), [1, 1, 3, 3, 6, 6, 5, 5]),
    "seq_stmt_grid_depth": (["grid_row"] * 2 + ["grid_col"] * 2 + ["depth"] * 2,
                            dict(grid=[7, 4], depth=3), [7, 7, 4, 4, 3, 3]),
    "seq_chat_grid": (["exchange"] * 2 + ["speaker"] * 2 + ["turn_pos"] * 2,
                      dict(chat=[2, 1, 9]), [2, 2, 1, 1, 9, 9]),
    "seq_label_on_depth": (["depth_label"] * 2, dict(depth=4, label=2), [4 + 23 * 2] * 2),   # d + 23 x label
    "seq_label": (["label"] * 2, dict(depth=4, label=2), [2, 2]),
}


@pytest.mark.parametrize("name", sorted(GRIDS))
def test_which_planes_each_coordinate_rotates(name):
    """Grid + depth (Figure 4, "with depth where marked"), the chat grid and the label-on-depth
    variants: the coordinate each plane reads, and on a planted token its angle = coordinate x
    initial rate (fast 0.316, slow 0.316/16; these pairs have no offset); the rest unrotated."""
    planes, token, value = GRIDS[name]
    rot = Rotary(name, 128, 1)
    n = 16 + len(planes)
    assert rot.layouts[0].coord[0] == ["t"] * 16 + planes + [None] * (64 - n)
    ang = rot.angles(rot.coords(one_token(**token)), 0)[0, 0, 0]
    rates = torch.tensor([FAST, FAST / 16] * (len(planes) // 2))
    assert ang[16:n].tolist() == pytest.approx((torch.tensor(value) * rates).tolist())
    assert ang[n:].abs().sum() == 0


def test_label_on_depth_is_withheld_with_depth():
    """depth_label is read from depth, so depth dropout (depth -1) withholds it too; a token
    outside every node (depth 0, no label) reads depth alone."""
    assert rotary.coordinate(one_token(depth=4, label=2), "depth_label").item() == 50
    assert rotary.coordinate(one_token(depth=-1, label=2), "depth_label").item() == -1
    assert rotary.coordinate(one_token(depth=0), "depth_label").item() == 0
    assert "depth_label" in batches.DEPTH_READERS


def test_directed_offset_constants_and_levels():
    """ref_directed: 6 learned constants (init 0), one per plane of the three levels a spreadsheet
    reference takes from its target (sheet, row, column), added only on reference tokens; the
    reference's own deeper levels and every non-reference token take none. ref_directed_one: one
    constant on the same six planes."""
    ref = one_token(path=[0, 3, 6, 0, 1], ref_path=[1, 2, 4], depth=5)     # =Other!E3 in G4 of sheet 0
    cell = one_token(path=[0, 3, 6, 0, 0], depth=5)                        # a non-reference token of G4
    for name, constants in (("ref_directed", [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]),
                            ("ref_directed_one", [0.3] * 6)):
        rot = Rotary(name, 128, 1)
        assert rot.offsets.numel() == 44 + len(set(constants))  # the tree's 44 offsets, then the constants
        assert rot.offsets.abs().sum() == 0                     # the variant starts as reference rotation
        before = [rot.angles(rot.coords(b), 0)[0, 0, 0] for b in (ref, cell)]
        with torch.no_grad():
            rot.offsets[44:] = torch.tensor(sorted(set(constants)))
        after = [rot.angles(rot.coords(b), 0)[0, 0, 0] for b in (ref, cell)]
        assert (after[0] - before[0])[16:22].tolist() == pytest.approx(constants)
        assert (after[0] - before[0])[22:].abs().sum() == 0 and (after[1] - before[1]).abs().sum() == 0
        # the reference sits on its target's sheet, row and column: 1, 2, 4 (then the constants)
        assert before[0][16:22].tolist() == pytest.approx([1 * FAST, FAST / 16, 2 * FAST, 2 * FAST / 16,
                                                           4 * FAST, 4 * FAST / 16])


def test_own_group_carries_the_referenced_cell_with_its_sheet():
    """ref_own_group: the tree (levels 1-21) keeps every token's own path; the group of six planes
    carries the sheet, row and column a reference names, and a token's own cell elsewhere. A
    cross-sheet reference lines up there with its target and differs from a same-sheet
    reference to the same row and column on the sheet planes."""
    rot = Rotary("ref_own_group", 128, 1)
    assert rot.layouts[0].coord[0] == ["t"] * 16 + [f"path{k}" for k in range(1, 22) for _ in "fs"] + \
        [f"refpath{k}" for k in range(1, 4) for _ in "fs"]
    # in G4 of sheet 0, naming E3 of sheet 1
    cross = one_token(path=[0, 3, 6, 0, 1], ref_path=[1, 2, 4], depth=5)
    same = one_token(path=[0, 3, 6, 0, 2], ref_path=[0, 2, 4], depth=5)    # naming E3 of sheet 0
    target = one_token(path=[1, 2, 4, 0], depth=4)                          # a token of E3 on sheet 1
    a = {k: rot.angles(rot.coords(b), 0)[0, 0, 0]
         for k, b in (("cross", cross), ("same", same), ("target", target))}
    assert torch.equal(a["cross"][58:], a["target"][58:])  # the reference lines up with its target
    assert not torch.equal(a["cross"][58:60], a["same"][58:60]) and \
        torch.equal(a["cross"][60:], a["same"][60:])
    assert a["cross"][16:18].tolist() == [0, 0] and \
        a["cross"][18:20].tolist() == pytest.approx([3 * FAST, 3 * FAST / 16])


# Under TRITON_INTERPRET=1 (CPU, CI) the kernel runs in the interpreter; on a GPU machine run
# `TRITON_INTERPRET=0 pytest tests/test_rotary.py` to test the compiled kernel on CUDA.
DEV = "cuda" if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") == "0" else "cpu"


def _reference_and_triton(name, dtype, head_dim=128, H=2, T=5, layer=0, n_layer=1):
    """Outputs and the gradients of q, k, rates, offsets and overlay offsets, from the readable
    reference and from the kernel, for one layout, with parameters moved off their init."""
    rot = Rotary(name, head_dim, n_layer).to(DEV)
    b = {k: v.to(DEV) for k, v in batch(2, T).items()}
    C = rot.coords(b)
    i = rot.layer_layout[layer]
    col, rate, offset, overlay = (t.detach() for t in rot.table(i))
    rate, offset, overlay = ((rate * 1.3).requires_grad_(), (offset + 0.2).requires_grad_(),
                             (overlay + 0.1).requires_grad_())
    isref = int(rot.tables[i].mark)                               # the overlay's marker column, -1 none
    torch.manual_seed(0)
    q = torch.randn(2, T, H, head_dim, dtype=dtype, device=DEV, requires_grad=True)
    k = torch.randn(2, T, H, head_dim, dtype=dtype, device=DEV, requires_grad=True)
    w = torch.randn(2, T, H, head_dim, device=DEV)
    res = []
    for fn in ("ref", "triton"):
        params = (q, k, rate, offset, overlay)
        for t in params:
            t.grad = None
        if fn == "ref":
            c = C[..., col.clamp(min=0).long()].float()
            present = (c >= 0) & (col >= 0)
            ang = torch.where(present, c * rate + offset, 0.0)
            if isref >= 0:
                ang = ang + torch.where(present & (C[..., isref] >= 0)[..., None, None], overlay, 0.0)
            a, bb = rotary.rotate(q, k, ang.repeat_interleave(H // ang.shape[2], 2))
        else:
            a, bb = rotary.rotate_triton(q, k, C, col, rate, offset, overlay, isref)
        ((a.float() * w).sum() + (bb.float() * w).pow(2).sum()).backward()
        res.append([a.detach().float(), bb.detach().float()] +
                   [t.grad.float().clone() if t.grad is not None else torch.zeros_like(t, dtype=torch.float32)
                    for t in params])
    return res


# one case per family: sequence + tree, every signal, head tables (4 heads share 2), odd head count, hRoPE at
# T = 64, references (target substitution, directed overlay), unrotated groups, spreadsheet grid, layer split
FAMILIES = [("seq_tree_depth", 128, 2, 5, 0, 1), ("all_signals", 128, 1, 3, 0, 1),
            ("head_split", 128, 4, 4, 0, 1), ("seq_depth", 128, 3, 2, 0, 1), ("hrope_axial", 64, 2, 64, 0, 1),
            ("ref_rotation", 128, 1, 6, 0, 1), ("ref_directed", 128, 2, 6, 0, 1),
            ("sent_axial", 64, 1, 4, 0, 1), ("seq_grid", 128, 1, 4, 0, 1), ("ststst", 128, 1, 4, 1, 6)]


@needs_triton
@pytest.mark.parametrize("name,head_dim,H,T,layer,n_layer", FAMILIES
                         + ([("seq_tree_depth", 128, 2, 1024, 0, 1), ("hrope_axial", 64, 8, 1024, 0, 1)]
                            if DEV == "cuda" else []))
def test_triton_matches_reference_fp32(name, head_dim, H, T, layer, n_layer):
    ref, tri = _reference_and_triton(name, torch.float32, head_dim, H, T, layer, n_layer)
    # angles reach ~T radians: an fp32 ulp there is ~T * 6e-8 and CUDA's sin/cos differ by a few ulp, so the
    # tolerance grows with T; rate gradients sum coordinate x d angle over tokens, so scale with their size
    tol = 1e-4 * max(1, T / 128)
    for what, r, t in zip(("q out", "k out", "dq", "dk", "d rate", "d offset", "d overlay"), ref, tri):
        scale = max(1.0, r.abs().max().item())
        assert torch.allclose(r, t, atol=tol * scale, rtol=tol), (what, (r - t).abs().max())
    if name == "ref_directed":
        assert ref[6].abs().sum() > 0                    # the overlay really is exercised


@needs_triton
def test_triton_matches_reference_bf16():
    """bf16 tolerance from rounding noise: the kernel must be no further from the fp32
    reference than the bf16 reference itself is (flash-attention's test convention)."""
    exact = _reference_and_triton("seq_tree", torch.float32, H=1, T=3)[0]
    ref, tri = _reference_and_triton("seq_tree", torch.bfloat16, H=1, T=3)
    # outputs, dq, dk, and the rate and offset gradients (sums over tokens: scale the floor)
    for e, r, t in zip(exact, ref, tri):
        assert (t - e).abs().max() <= 2 * (r - e).abs().max() + 1e-3 * max(1.0, e.abs().max())


def run_table(rot, H, shared):
    """One run's table of layout 0 in the study's frame (ensemble.frame: its columns and marker in the
    shared coordinates, a row per head), with its learned values picked: (col, rate, offset, overlay,
    marker)."""
    framed = ensemble.frame(rot, shared, H)
    per = H // rot.tables[0].col.shape[0]
    return (framed["rotary.tables.0.col"], *(t.repeat_interleave(per, 0) for t in rot.table(0)[1:]),
            int(framed["rotary.tables.0.mark"]))


def angles_runs(C, col, rate, offset, overlay, marker):
    """The reference angles (M, B, T, H, P) of M runs, each its own table (the law of Rotary.angles,
    written out over a run dimension): C (M, B, T, K); col, rate, offset, overlay (M, H, P); marker (M,)."""
    M, B, T, K = C.shape
    H, P = col.shape[1:]
    at = col.clamp(min=0).long().view(M, 1, 1, H * P).expand(M, B, T, H * P)
    c = C.gather(-1, at).view(M, B, T, H, P).float()
    present = (c >= 0) & (col >= 0)[:, None, None]
    ang = torch.where(present, c * rate[:, None, None] + offset[:, None, None], 0.0)
    m = torch.as_tensor(marker, device=C.device)
    marked = (C.gather(-1, m.clamp(min=0).long().view(M, 1, 1, 1).expand(M, B, T, 1)) >= 0) \
        & (m >= 0).view(M, 1, 1, 1)
    return ang + torch.where(present & marked[..., None], overlay[:, None, None], 0.0)


def _study(names, H, T, B=2):
    """A study's rotation inputs for one layer: runs of the configurations `names`, each reading its own
    columns of one shared coordinate tensor C (M, B, T, K) built from its own batch, and their tables
    (`run_table`) stacked to (M, H, P), with the parameters moved off their init."""
    rots = [Rotary(n, 128, 1).to(DEV) for n in names]
    shared = sorted({c for r in rots for c in r.names})
    C = torch.stack([torch.stack([rotary.coordinate(batch(B, T, seed=m), n) for n in shared], -1)
                     for m in range(len(names))]).int().to(DEV)
    runs = [run_table(r, H, shared) for r in rots]
    col = torch.stack([t[0] for t in runs])
    rate, offset, overlay = (torch.stack([t[i] for t in runs]).detach() for i in (1, 2, 3))
    tables = (col, (rate * 1.3).requires_grad_(), (offset + 0.2).requires_grad_(),
              (overlay + 0.1).requires_grad_(), torch.tensor([t[4] for t in runs], device=DEV))
    return rots, shared, C, tables


def _runs_reference_and_triton(dtype, names=("seq_depth", "ref_directed"), H=2, T=5, D=128):
    """Outputs and the gradients of q, k, rate, offset and overlay of two runs rotated in one launch,
    from the readable reference (angles_runs + rotate) and from the kernel. q and k are slices of one
    projection and their output gradients arrive transposed, as the model hands them over."""
    _, _, C, (col, rate, offset, overlay, marker) = _study(names, H, T)
    M = len(names)
    torch.manual_seed(0)
    qkv = torch.randn(M, 2, T, 3 * H * D, dtype=dtype, device=DEV)
    q, k = (qkv[..., i * H * D:(i + 1) * H * D].view(M, 2, T, H, D).requires_grad_() for i in (0, 1))
    w = torch.randn(M, 2, H, T, D, device=DEV)
    res = []
    for fn in ("ref", "triton"):
        params = (q, k, rate, offset, overlay)
        for t in params:
            t.grad = None
        if fn == "ref":
            a, b = rotary.rotate(q, k, angles_runs(C, col, rate, offset, overlay, marker))
        else:
            a, b = rotary.rotate_runs_triton(q, k, C, col, rate, offset, overlay, marker)
        ((a.transpose(2, 3).float() * w).sum() + (b.transpose(2, 3).float() * w).pow(2).sum()).backward()
        res.append([a.detach().float(), b.detach().float()] + [t.grad.float().clone() for t in params])
    return res


@needs_triton
def test_triton_runs_match_reference_fp32():
    """Two runs in one launch, seq_depth (reads t, depth) and ref_directed (t, the tree,
    the reference's path and its overlay marker), each from its own batch: outputs and q, k, rate,
    offset and overlay gradients as the reference's. The overlay is planted on both runs; only the
    run with a marker may use it."""
    ref, tri = _runs_reference_and_triton(torch.float32)
    # fp32: a few ulp of sin/cos at angles of a few radians; measured here ~1e-7 of each quantity's size
    for what, r, t in zip(("q out", "k out", "dq", "dk", "d rate", "d offset", "d overlay"), ref, tri):
        assert torch.allclose(r, t, atol=1e-5 * max(1.0, r.abs().max().item()), rtol=1e-5), \
            (what, (r - t).abs().max())
    d_overlay = ref[6]
    assert d_overlay[0].abs().sum() == 0 and d_overlay[1].abs().sum() > 0   # exercised, and per run
    assert ref[4][0, :, 16:18].abs().min() > 0       # run 0's depth planes learn: its own columns are read


@needs_triton
def test_triton_runs_match_reference_bf16():
    """bf16 tolerance from rounding noise: the kernel is no further from the fp32 reference than the
    bf16 reference itself is, for outputs and every gradient (flash-attention's test convention)."""
    exact = _runs_reference_and_triton(torch.float32)[0]
    ref, tri = _runs_reference_and_triton(torch.bfloat16)
    for e, r, t in zip(exact, ref, tri):
        assert (t - e).abs().max() <= 2 * (r - e).abs().max() + 1e-3 * max(1.0, e.abs().max())


@pytest.mark.skipif(NO_TRITON, reason="triton not installed")
def test_triton_runs_refuse_tables_that_do_not_fit():
    _, _, C, tables = _study(("seq_depth", "seq_only"), 2, 3)
    q = torch.randn(2, 2, 3, 2, 64, device=DEV)                  # 32 planes; the tables have 64
    with pytest.raises(ValueError, match="do not fit"):
        rotary.rotate_runs_triton(q, q, C, *tables)


@needs_triton
def test_triton_compiled_study_step_has_no_graph_break():
    """torch.compile(fullgraph=True) of a step that builds two runs' tables from their parameters
    (run_table) and rotates with the kernel: one graph, forward and backward (the custom ops' fake
    implementations let dynamo and AOT autograd trace them), with the eager step's results."""
    rots, shared, C, _ = _study(("seq_depth", "ref_directed"), 2, 3)
    torch.manual_seed(0)
    q, k = (torch.randn(2, 2, 3, 2, 128, device=DEV, requires_grad=True) for _ in range(2))

    def step(q, k):
        runs = [run_table(r, 2, shared) for r in rots]
        tables = [torch.stack([t[i] for t in runs]) for i in range(4)]
        marker = torch.tensor([t[4] for t in runs], device=DEV)
        a, b = rotary.rotate_runs_triton(q, k, C, *tables, marker)
        return (a * b).sum()
    grads = []
    for fn in (step, torch.compile(step, fullgraph=True, backend="aot_eager")):
        for t in (q, k, *[r.rates for r in rots], *[r.offsets for r in rots]):
            t.grad = None
        fn(q, k).backward()
        grads.append([q.grad.clone(), rots[0].rates.grad.clone(), rots[1].offsets.grad.clone()])
    for e, c in zip(*grads):
        assert torch.allclose(e, c, atol=1e-5, rtol=1e-5)


@pytest.mark.skipif(DEV != "cuda", reason="the model takes the kernel on CUDA only")
def test_triton_compiled_model_has_no_graph_break():
    """A GPT whose rotation takes the kernel (ref_directed: its overlay marker too) compiles forward and
    backward in one graph, and its rotary parameters get gradients through the custom ops."""
    from model import GPT, GPTConfig
    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=64, max_len=7, configuration="ref_directed", n_layer=2, n_embd=256, n_head=2)
    m = GPT(cfg).to(DEV)
    m.rotary.kernel = True                                        # train.py's --kernel
    C = m.rotary.coords({k: v.to(DEV) for k, v in batch().items()})
    tokens = torch.randint(0, 64, (2, 7), device=DEV)
    step = torch.compile(lambda t, C: m(t, C, t)[1].mean(), fullgraph=True, backend="aot_eager")
    step(tokens, C).backward()
    assert m.rotary.rates.grad.abs().sum() > 0 and m.rotary.offsets.grad[44:].abs().sum() > 0


@pytest.mark.slow   # compiles with inductor on CPU: ~25 s cold, 7 s with a warm compile cache
@needs_triton
def test_triton_bench_smoke_on_cpu():
    """`bench.py rotation` on CPU: every variant of a study's rotation (2 runs, 64 tokens, as training
    runs it: Rotary.forward under vmap) runs forward and backward, and the kernel's outputs are the
    readable ones."""
    import bench
    row = bench.rotation(sizes=(64,), M=2, T=16, reps=1)[64]
    assert row["triton_max_abs_err"] < 1e-5
    assert all(row[v] > 0 for v in ("eager", "compile", "triton"))
    assert row["bytes"] == 10 * 64 * 2 * 128 * 4 + 2 * 64 * 4 * len({n for c in bench.STUDY[:2]
                                                                      for n in Rotary(c, 128, 1).names})


def test_two_corpus_coordinates_by_hand():
    """web_sheets: a web token (depth 3) and a workbook token (sheet 0, row 4, column 6). Shared:
    one plane group holds the page's depth and the cell's grid; own: each has its own group."""
    b = batch(1, 2)
    b["source"] = torch.tensor([[0, 1]])
    b["depth"] = torch.tensor([[3, 5]])
    b["path"][:] = -1
    b["path"][0, 0, :3] = torch.tensor([0, 1, 2])
    b["path"][0, 1, :5] = torch.tensor([0, 4, 6, 0, 1])
    got = {n: rotary.coordinate(b, n)[0].tolist() for n in
           ("shared1", "shared2", "shared3", "owndepth", "ownsheet1", "ownsheet2", "ownsheet3")}
    assert got == {"shared1": [3, 0], "shared2": [-1, 4], "shared3": [-1, 6], "owndepth": [3, -1],
                   "ownsheet1": [-1, 0], "ownsheet2": [-1, 4], "ownsheet3": [-1, 6]}
    assert Rotary("two_corpus_shared", 128, 1).count() == ([[22]], 10)     # 6 planes, two meanings
    level1 = [g for g in rotary.CONFIGS["two_corpus_shared"](64, None) if "shared1" in g.coord]
    assert [g.offset for g in level1] == [False]      # web depth has no offset, as every depth plane
    assert Rotary("two_corpus_own", 128, 1).count() == ([[24]], 14)        # 2 + 6 planes


def test_layer_split_of_any_length_by_name():
    """The larger web run's ten-layer alternating split is named by its letters; it builds with
    one table per kind of layer and trains a step; a wrong length or letter is refused."""
    rot = Rotary("ststststst", 128, 10)
    assert rot.layer_layout == [0, 1] * 5 and rot.count()[0] == [[64], [48]]
    assert rotary.known("ststststst") and not rotary.known("stx") and not rotary.known("s")
    with pytest.raises(ValueError):
        Rotary("ststststst", 128, 6)
    m, nll = train_step("ststststst", n_layer=10, n_embd=512, n_head=4)
    assert torch.isfinite(nll).all() and m.rotary.rates.grad.abs().sum() > 0


def test_head_split_with_four_heads_is_two_sequence_then_two_tree_heads():
    """PyTorch path: head h of 4 uses head table h // 2, exactly as rotating it alone."""
    rot = Rotary("head_split", 128, 1)
    C = rot.coords(batch(2, 6))
    torch.manual_seed(0)
    q, k = torch.randn(2, 6, 4, 128), torch.randn(2, 6, 4, 128)
    qo, ko = rot(q, k, C, 0)
    ang = rot.angles(C, 0)                                        # (B, T, 2 tables, P)
    for h in range(4):
        eq, ek = rotary.rotate(q[:, :, h:h + 1], k[:, :, h:h + 1], ang[:, :, h // 2:h // 2 + 1])
        assert torch.equal(qo[:, :, h:h + 1], eq) and torch.equal(ko[:, :, h:h + 1], ek)
    assert not torch.allclose(qo[:, :, 1],
                              rotary.rotate(q[:, :, 1:2], k[:, :, 1:2], ang[:, :, 1:2])[0][:, :, 0])
    with pytest.raises(ValueError, match="3 heads cannot share"):
        rot.check_heads(3)


def train_step(name, **size):
    """One forward and backward of a small GPT under configuration `name`: (model, per-token NLL)."""
    from model import GPT, GPTConfig
    torch.manual_seed(0)
    m = GPT(GPTConfig(vocab_size=64, max_len=7, configuration=name,
                      corpus={"p_max": [8, 8, 8], "p1_density": 0.2, "p1_period": 3}, **size))
    b = batch()
    b.update(p1_density=0.2, p1_period=3)
    tokens = torch.randint(0, 64, (2, 7))
    _, nll, _ = m(tokens, m.rotary.coords(b, torch.Generator().manual_seed(0)), tokens)
    nll.mean().backward()
    return m, nll


@pytest.mark.parametrize("name", sorted(rotary.CONFIGS))
def test_every_configuration_trains_a_step(name):
    """Each registered configuration runs forward and backward through the GPT (no_position,
    with nothing to rotate, included) and gives a finite loss."""
    _, nll = train_step(name, n_layer=6, n_embd=256, n_head=2)
    assert torch.isfinite(nll).all()


def test_adding_a_configuration_is_one_line(monkeypatch):
    """README "Add a configuration": one registry line, and the model trains it."""
    monkeypatch.setitem(rotary.CONFIGS, "seq_within", lambda P, c: [rotary.seq(16), rotary.within()])
    # 16 + 4 within planes; each learns a rate and an offset
    assert Rotary("seq_within", 128, 1).count() == ([[20]], 8)
    m, nll = train_step("seq_within", n_layer=1, n_embd=128, n_head=1)
    assert torch.isfinite(nll).all() and m.rotary.rates.grad.abs().sum() > 0


def test_n_planes_of_one_coordinate(monkeypatch):
    """README "Add a configuration": `planes(coord, n)` spreads n learned rates geometrically from
    0.316 to 0.316/16 (ratio 16^(1/3) = 2.52 apart for n = 4); n = 2 is the appendix's pair."""
    assert rotary.planes("depth", 4).rates == pytest.approx([FAST, FAST / 2.5198, FAST / 6.3496, FAST / 16],
                                                             rel=1e-4)
    assert rotary.planes("depth", 2, "depth 2") == rotary.pair("depth", "depth 2")
    monkeypatch.setitem(rotary.CONFIGS, "seq_depth4",
                        lambda P, c: [rotary.seq(16), rotary.planes("depth", 4)])
    assert Rotary("seq_depth4", 128, 1).count() == ([[20]], 4)       # 4 learned rates, no offsets
    m, nll = train_step("seq_depth4", n_layer=1, n_embd=128, n_head=1)
    assert torch.isfinite(nll).all() and m.rotary.rates.grad.abs().min() > 0


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PTXAS = "" if NO_TRITON else os.path.join(os.path.dirname(rotary.triton.__file__), "backends", "nvidia",
                                          "bin", "ptxas")


@pytest.mark.slow   # two ahead-of-time compiles and ptxas: 15-20 s on 2 cores
@pytest.mark.skipif(not os.path.exists(PTXAS), reason="needs triton's CUDA backend and its ptxas")
def test_neither_kernel_spills_registers_on_an_h100():
    """At rotary.py's launch parameters ptxas -v reports no spill for either kernel on sm_90a
    (scripts/ptxas_report.py; at Triton's default 4 warps: forward 20 B, backward 176 B stored)."""
    run = subprocess.run([sys.executable, "scripts/ptxas_report.py"], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    rows = [line for line in run.stdout.splitlines() if " registers " in line]
    assert run.returncode == 0 and len(rows) == 2, run.stdout + run.stderr
    assert all(line.endswith("spills: 0 B stored, 0 B loaded") for line in rows), rows
