"""README "Use the tree rotary in your own GPT": rotary.py plugged into a nanoGPT-shaped attention
block written here, the coordinates passed by name."""
import ast
import math
import pathlib
import shutil
import subprocess
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import rotary


class CausalSelfAttention(nn.Module):
    """nanoGPT's attention with the two rotary lines: q, k as (B, T, H, D), then `rot`."""

    def __init__(self, n_embd, n_head, rot, layer):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=False)
        self.c_proj = nn.Linear(n_embd, n_embd, bias=False)
        self.n_head, self.rot, self.layer = n_head, rot, layer

    def forward(self, x, coords):
        B, T, E = x.size()
        q, k, v = self.c_attn(x).split(E, dim=2)
        q, k, v = (t.view(B, T, self.n_head, E // self.n_head) for t in (q, k, v))
        q, k = self.rot(q, k, coords, self.layer)
        y = F.scaled_dot_product_attention(*(t.transpose(1, 2) for t in (q, k, v)), is_causal=True)
        return self.c_proj(y.transpose(1, 2).reshape(B, T, E))


def by_hand(x, t, depth):
    """seq_depth at its initial rates, written from the appendix: planes 0-15 turn by
    t * 10000^(-i/16), planes 16 and 17 by depth * 0.316 and depth * 0.316/16 (cos 0.316 = 0.95),
    the rest not at all; plane i is dims (i, i + P)."""
    P = x.shape[-1] // 2
    ang = torch.zeros(*t.shape, P)
    ang[..., :16] = t[..., None] * 10000.0 ** (-torch.arange(16) / 16)
    fast = math.sqrt(2 * (1 - 0.95))
    ang[..., 16], ang[..., 17] = depth * fast, depth * fast / 16
    cos, sin = ang.cos()[:, :, None], ang.sin()[:, :, None]
    x1, x2 = x[..., :P], x[..., P:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)


def setup(B=2, T=5):
    torch.manual_seed(0)
    block = CausalSelfAttention(128, 2, rotary.Rotary("seq_depth", 64, 1), 0)
    t = torch.arange(T).expand(B, T)
    depth = torch.randint(0, 6, (B, T))
    return block, torch.randn(B, T, 128), t, depth


def test_rotary_alone_in_a_nanogpt_block():
    """The coordinates by name give exactly the hand rotation (a by_name that stacked the dict in
    its own order, t before depth, would swap them), and the learned rates train."""
    block, x, t, depth = setup()
    y = block(x, {"t": t, "depth": depth})
    ref = CausalSelfAttention(128, 2, lambda q, k, C, layer: (by_hand(q, *C), by_hand(k, *C)), 0)
    ref.load_state_dict({n: p for n, p in block.state_dict().items() if not n.startswith("rot.")})
    assert torch.allclose(y, ref(x, (t, depth)), atol=1e-5)
    y.square().sum().backward()
    assert block.rot.rates.grad.abs().min() > 0                  # both depth planes learn their rate


def test_the_lift_refuses_coordinates_that_are_not_the_configurations():
    block, x, t, depth = setup()
    with pytest.raises(ValueError, match=r"missing \['depth'\]"):
        block(x, {"t": t})
    with pytest.raises(ValueError, match=r"needs \(2, 5, 2\)"):   # a hand-stacked [t, depth, within]
        block(x, torch.stack([t, depth, t], -1))
    with pytest.raises(ValueError, match=r"needs \(2, 5, 2\)"):   # coordinates of a shorter window
        block(x, torch.stack([depth, t], -1)[:, :4])


def test_the_check_costs_no_graph_break():
    """The check reads shapes only: the compiled block traces whole (fullgraph) and agrees."""
    block, x, t, depth = setup()
    C = block.rot.by_name({"t": t, "depth": depth})
    compiled = torch.compile(block, backend="eager", fullgraph=True, dynamic=True)   # as train.py: any T
    assert torch.allclose(compiled(x, C), block(x, C))
    assert torch.allclose(compiled(x[:, :3], C[:, :3]), block(x[:, :3], C[:, :3]))   # another window


def test_rotary_py_imports_torch_alone():
    """Copy rotary.py alone: besides the standard library it imports torch, and triton for its fused
    kernel where triton is installed (guarded: without it the readable rotation runs)."""
    tree = ast.parse(pathlib.Path(rotary.__file__).read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported - {"math", "re", "dataclasses", "types"} == {"torch", "triton"}


def test_rotary_py_alone_runs_without_triton(tmp_path):
    """The guard on `import triton`: rotary.py copied alone into a folder where triton cannot be
    imported still imports, builds seq_depth and rotates on CPU (the kernels defined, never launched)."""
    shutil.copy(rotary.__file__, tmp_path / "rotary.py")
    code = ("import sys; sys.path.insert(0, '.'); sys.modules['triton'] = None; import torch, rotary; "
            "assert not rotary.Rotary('seq_depth', 64, 1).kernel; "
            "r = rotary.Rotary('seq_depth', 64, 1); q = torch.randn(1, 4, 1, 64); "
            "C = {'t': torch.arange(4)[None], 'depth': torch.ones(1, 4, dtype=torch.long)}; "
            "a, b = r(q, q, C, 0); print(a.shape == q.shape, sys.modules['triton'])")
    out = subprocess.run([sys.executable, "-I", "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "None"]


EVERY = """
import sys, torch
sys.path.insert(0, "."); sys.modules["triton"] = None      # rotary.py alone, torch only
import rotary
g = torch.Generator().manual_seed(0)
B, T = 2, 6
path = torch.randint(0, 5, (B, T, rotary.LEVELS), generator=g)
depth = torch.randint(0, 8, (B, T), generator=g)
path[torch.arange(rotary.LEVELS).expand(B, T, -1) >= depth[..., None]] = -1
fields = {"pos": torch.arange(T).expand(B, T), "path": path, "depth": depth,
          "ref_path": torch.where(torch.rand(B, T, 1, generator=g) < 0.5, path.roll(1, 1), -1),
          **{f: torch.randint(-1, 9, (B, T), generator=g) for f in ("within", "symbol", "label", "source")},
          **{f: torch.randint(-1, 9, (B, T, n), generator=g) for f, n in (("p", 3), ("grid", 2),
                                                                          ("chat", 3))},
          "p1_density": 0.3, "p1_period": 2}
q, k = torch.randn(2, B, T, 2, 128, generator=g)
out = {}
for name in sys.argv[1:]:
    rot = rotary.Rotary(name, 128, 6, {"p_max": [6, 6, 6]})
    C = rot.coords(fields, torch.Generator().manual_seed(1))
    out[name] = (C, q, k, [torch.stack(rot(q, k, C, layer)) for layer in range(6)])
torch.save(out, "out.pt")
"""


def test_every_configuration_of_both_papers_runs_from_rotary_py_alone(tmp_path):
    """rotary.py copied alone: `python rotary.py` lists every configuration of both papers (the
    appendix's, its references and two-corpus variants, paper 004's hRoPE and p1 controls), and each
    one builds and rotates every layer there without triton, as the repository's rotary.py does. A
    configuration or coordinate reader defined outside rotary.py fails here (a KeyError alone)."""
    shutil.copy(rotary.__file__, tmp_path / "rotary.py")
    run = dict(cwd=tmp_path, capture_output=True, text=True)
    listing = subprocess.run([sys.executable, "-I", "rotary.py"], **run)
    assert listing.returncode == 0, listing.stderr
    listed = [line.split()[0] for line in listing.stdout.splitlines()[1:-1]]
    assert listed == list(rotary.CONFIGS) and {"ref_directed", "two_corpus_shared", "hrope_axial",
                                               "sent_axial", "rand_axial", "period_axial"} <= set(listed)
    alone = subprocess.run([sys.executable, "-I", "-c", EVERY, *listed], **run)
    assert alone.returncode == 0, alone.stderr
    for name, (C, q, k, rotated) in torch.load(tmp_path / "out.pt").items():
        rot = rotary.Rotary(name, 128, 6, {"p_max": [6, 6, 6]})
        assert C.shape[-1] == len(rot.names)
        for layer, qk in enumerate(rotated):
            assert torch.isfinite(qk).all() and torch.equal(qk, torch.stack(rot(q, k, C, layer))), name
