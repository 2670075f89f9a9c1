"""A study's M runs as one model: model.GPT's own modules run once for all of them (`runs_of`), their
weights stacked along a leading run dimension; each run's clipping and AdamW at once (study.py trains
with them). Each run's tokens see only its own weights, rotary tables, coordinates and dropout masks:
per run, the loss is model.GPT's (tests/test_study.py)."""
import copy
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.adamw import adamw
from torch.utils.checkpoint import checkpoint

import rotary


def stacked(models):
    """{name: (M, ...) tensor} of the runs' weights outside the rotary (every configuration has the
    same shapes there): a leaf of its own, stacked once a step, whose gradient `handed` gives back."""
    named = [dict(m.named_parameters()) for m in models]
    return {k: torch.stack([n[k].detach() for n in named]).requires_grad_(torch.is_grad_enabled())
            for k in named[0] if not k.startswith("rotary")}


def handed(W, models):
    """The stacked weights' gradients, summed over a step's micro-batches, as each run's own."""
    for m, model in enumerate(models):
        for k, p in model.named_parameters():
            if k in W:
                p.grad = W[k].grad[m]


@torch.no_grad()
def clip_runs(models, max_norm=1.0):
    """Each run's clip_grad_norm_(max_norm) at once: every gradient's norm in one call, each run's norm
    of its norms (torch's total) and its scale on the device, with no wait for it."""
    grads = [[p.grad for p in m.parameters() if p.grad is not None] for m in models]
    width, pad = max(map(len, grads)), grads[0][0].new_zeros(1)    # pad: a norm of 0 (runs differ in count)
    norms = torch._foreach_norm([g for gs in grads for g in gs + [pad] * (width - len(gs))])
    total = torch.linalg.vector_norm(torch.stack(norms).view(len(grads), width), dim=1)
    for gs, scale in zip(grads, (max_norm / (total + 1e-6)).clamp(max=1.0)):
        torch._foreach_mul_(gs, scale)


ADAMW = ("lr", "betas", "eps", "weight_decay", "maximize", "foreach", "capturable", "differentiable", "fused")


@torch.no_grad()
def adamw_runs(optimizers):
    """Each run's AdamW step (training.setup's: no amsgrad) at once: torch's own update (its functional
    form), one call per set of hyperparameters the runs share (lr: one schedule at one step), the moments
    and step kept in each run's optimizer as its own step() keeps them (checkpoints as train.py's)."""
    shared = {}
    for opt in optimizers:
        for g in opt.param_groups:
            for p in (p for p in g["params"] if p.grad is not None):
                state = opt.state[p]
                if not state:      # torch's lazy start: fused or capturable, the step on the device
                    on = p.device if g["fused"] or g["capturable"] else "cpu"
                    state.update(step=torch.zeros((), dtype=torch.float32, device=on),
                                 exp_avg=torch.zeros_like(p), exp_avg_sq=torch.zeros_like(p))
                lists = shared.setdefault(tuple(g[k] for k in ADAMW), ([], [], [], [], []))
                for at, t in zip(lists, (p, p.grad, state["exp_avg"], state["exp_avg_sq"], state["step"])):
                    at.append(t)
    for key, (params, grads, exp_avgs, exp_avg_sqs, steps) in shared.items():
        h = dict(zip(ADAMW, key))
        adamw(params, grads, exp_avgs, exp_avg_sqs, [], steps, foreach=h["foreach"],
              capturable=h["capturable"], differentiable=h["differentiable"], fused=h["fused"],
              amsgrad=False, beta1=h["betas"][0], beta2=h["betas"][1], lr=h["lr"],
              weight_decay=h["weight_decay"], eps=h["eps"], maximize=h["maximize"])


# ------------------------------------------------------------ model.GPT over M runs ----
# A study runs model.GPT's own forward once for all its runs: the runs ride in the batch (M x B rows,
# run-major), so attention, which has no weights, sees them as more rows; each module with weights is
# applied run by run to its run's rows (torch.func.vmap over the module itself), each run's rotary
# table and dropout masks are its own. A fork of model.py (a norm, an attention variant) reaches it.
class Runs(nn.Module):
    """One of model.GPT's modules with weights (a Linear, a LayerNorm, the Embedding, whatever a fork
    adds) over M runs: its parameters, named as in model.GPT, arrive stacked along a leading run
    dimension (functional_call in `forward`), and the module itself maps run m's rows with run m's."""

    def __init__(self, module):
        super().__init__()
        self.module = [module]                  # a list: not a submodule, its parameters are this one's
        self.names = [k for k, _ in module.named_parameters(recurse=False)]
        for k, p in module.named_parameters(recurse=False):
            self.register_parameter(k, p)

    def forward(self, x):
        w = {k: getattr(self, k) for k in self.names}
        M = w[self.names[0]].shape[0]
        y = torch.func.vmap(lambda w, x: torch.func.functional_call(self.module[0], w, (x,)))(
            w, x.unflatten(0, (M, -1)))
        return y.flatten(0, 1)


class Head(nn.Module):
    """model.GPT's tied output head, left to the study's loss (`head_nll`, its logits in pieces): the
    hidden states and the runs' head weights, as they are."""

    def __init__(self, head):
        super().__init__()
        self.weight = head.weight               # wte's: tied, as in model.GPT

    def forward(self, x):
        return x, self.weight


class RunsRotary(nn.Module):
    """model.GPT's rotary over M runs, each with its own plane table: C is (the study's shared
    coordinates (M, B, T, K), per layer the runs' stacked tables: `run_table`)."""

    def forward(self, q, k, C, layer):
        coords, tables = C
        q, k = rotate_runs(*(t.unflatten(0, (coords.shape[0], -1)) for t in (q, k)), coords, tables[layer])
        return q.flatten(0, 1), k.flatten(0, 1)


class Draws:
    """A step's dropout masks, each run's from its own generator (a run's draws do not depend on the
    runs that share its study), drawn by `draw` before the compiled step (a generator inside it breaks
    the graph): per dropout site of model.GPT, in its modules' order, a keep mask (M, *shape)."""

    def __init__(self):
        self.p, self.keep, self.on = 0.0, [], False

    def draw(self, p, gens, shapes, device):
        self.p, self.on = p, bool(p and gens)   # a plain bool: torch 2.11 compiles no bool(list)
        self.keep = [torch.stack([torch.rand(s, generator=g, device=device) >= p for g in gens])
                     for s in shapes] if self.on else []

    @staticmethod
    def sites(B, T, E, H, n_layer):
        """model.GPT's dropout sites' shapes, in its modules' order: the embeddings, then per layer the
        attention probabilities and the two residual branches."""
        return [(B, T, E)] + [(B, H, T, T), (B, T, E), (B, T, E)] * n_layer


class Dropped(nn.Module):
    """One of model.GPT's dropout sites over M runs: the mask `draws` drew for it, run by run."""

    def __init__(self, draws, site):
        super().__init__()
        self.draws, self.site = draws, site

    def forward(self, x):
        if not self.draws.on:
            return x
        return x * self.draws.keep[self.site].view(x.shape) / (1 - self.draws.p)


def runs_of(model):
    """model.GPT `model`'s own modules, copied, as one model of M runs: each module with weights a
    `Runs`, the rotary a `RunsRotary`, the tied head a `Head`, each dropout a `Dropped` reading the
    masks of `gpt.draws`. Its parameters' names are model.GPT's: a study's stacked weights (`stacked`)
    go in by functional_call."""
    gpt = copy.deepcopy(model)
    gpt.draws, site = Draws(), 0
    for name, module in list(gpt.named_modules()):
        if not name or name.startswith("rotary."):
            continue
        parent, _, child = name.rpartition(".")
        if module is gpt.rotary:
            new = RunsRotary()
        elif module is gpt.lm_head:
            new = Head(module)
        elif isinstance(module, nn.Dropout):
            new, site = Dropped(gpt.draws, site), site + 1
        elif any(True for _ in module.parameters(recurse=False)):
            new = Runs(module)
        else:
            continue
        setattr(gpt.get_submodule(parent), child, new)
    return gpt


def run_table(rot, layer, n_head, names):
    """One run's plane table for `layer`, per head (H, P), its columns read from a coordinate
    tensor whose columns are `names` (a study's shared coordinates): (col, rate, offset, overlay,
    marker column or -1). Heads sharing a head table get copies of it."""
    i = rot.layer_layout[layer]
    col, rate, offset, overlay = rot.table(i)
    remap = torch.tensor([names.index(n) for n in rot.names] + [-1], device=col.device)
    col = torch.where(col >= 0, remap[col.long()], -1)   # this run's column -> the shared column
    per = n_head // col.shape[0]
    marker = names.index(rot.marker) if rot.ov_used(i) else -1
    return (*(t.repeat_interleave(per, 0) for t in (col, rate, offset, overlay)), marker)


def angles_runs(C, col, rate, offset, overlay, marker):
    """Reference angles (M, B, T, H, P) of M runs at once, each with its own table: C (M, B, T, K)
    shared coordinates; col, rate, offset, overlay (M, H, P); marker (M,) column, -1 none."""
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


def rotate_runs(q, k, C, table):
    """Every run's rotation at once: the fused kernel on CUDA (rotary.rotate_runs_triton), or on CPU
    under triton's interpreter where FUSED is set (a test's way to the kernel inside a compiled step),
    the readable reference elsewhere."""
    if rotary.FUSED and (q.is_cuda or os.environ.get("TRITON_INTERPRET") == "1"):
        return rotary.rotate_runs_triton(q, k, C, *table)
    return rotary.rotate(q, k, angles_runs(C, *table))


def head_nll(x, wte, targets, chunks, kept=None):
    """Per-token NLL through the tied head, the tokens in `chunks` pieces, each piece's logits
    recomputed in backward: M runs' logits (M x 8 x 1,024 x 32,768 at the Python setting) never
    exist whole. Eager, `kept` (the most positions with a target in any run) runs the head there
    alone (TiedHead), padding and records' last tokens left out, their NLL 0."""
    M, B, T, E = x.shape
    x, targets = x.reshape(M, B * T, E), targets.reshape(M, B * T)
    if kept is not None:
        at = torch.argsort((targets < 0).to(torch.uint8), dim=1, stable=True)[:, :kept]   # targets first
        nll = TiedHead.apply(x.gather(1, at[..., None].expand(-1, -1, E)), wte, targets.gather(1, at),
                             piece_rows(wte.shape[1], x.device))
        return torch.zeros(M, B * T, dtype=nll.dtype, device=x.device).scatter(1, at, nll).view(M, B, T)

    def piece(x, targets):
        logits = torch.bmm(x, wte.transpose(1, 2))
        return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=-1,
                               reduction="none").view(targets.shape)
    if chunks == 1:
        return piece(x, targets).view(M, B, T)
    return torch.cat([checkpoint(piece, a, b, use_reentrant=False)
                      for a, b in zip(x.chunk(chunks, 1), targets.chunk(chunks, 1))], 1).view(M, B, T)


def piece_rows(V, device):
    """TiedHead's rows a piece: 2 MiB of fp32 logits on a CPU (a core's L2 here), 1 GiB on a GPU."""
    return max(1, (1 << 19 if device.type == "cpu" else 1 << 28) // V)


class TiedHead(torch.autograd.Function):
    """Per-token NLL (M, N) of x (M, N, E) through the tied heads wte (M, V, E), targets (M, N) (-1:
    none, NLL 0), `rows` of a run at a time: a piece's logits are made, used and dropped while in cache,
    and its gradient is taken in the forward (a fused linear cross-entropy), backward only scaling it,
    so each run's tokens must be weighted alike (its token mean or sum, as a step's loss is)."""

    @staticmethod
    def forward(ctx, x, wte, targets, rows):
        dev, (M, N, _) = x.device.type, x.shape
        dt = torch.get_autocast_dtype(dev) if torch.is_autocast_enabled(dev) else x.dtype
        grad = any(ctx.needs_input_grad[:2])
        nll = torch.zeros(M, N, device=x.device)
        gx, gw = (torch.zeros_like(x), torch.zeros_like(wte)) if grad else (None, None)
        with torch.autocast(dev, enabled=False):    # the matrix products in autocast's dtype, the rest fp32
            xd, wd = x.to(dt), wte.to(dt)
            for m in range(M):
                for a in range(0, N, rows):
                    xs, t = xd[m, a:a + rows], targets[m, a:a + rows, None]
                    has, t = (t >= 0).float(), t.clamp(min=0)
                    logits = (xs @ wd[m].T).float()
                    top, picked = logits.amax(1, keepdim=True), logits.gather(1, t)
                    p = logits.sub_(top).exp_()                     # the softmax unnormalised, in place
                    total = p.sum(1, keepdim=True)
                    nll[m, a:a + rows] = ((top + total.log() - picked) * has)[:, 0]
                    if grad:   # d NLL / d logits: the softmax less the target's one-hot, 0 without a target
                        d = p.mul_(has / total).scatter_add_(1, t, -has)
                        gx[m, a:a + rows] = (d.to(dt) @ wd[m]).to(gx.dtype)
                        gw[m].addmm_(d.T, x[m, a:a + rows].to(gw.dtype))   # accumulated in the weights' dtype
        ctx.save_for_backward(gx, gw)
        return nll

    @staticmethod
    def backward(ctx, g):
        gx, gw = ctx.saved_tensors
        w = g[:, :1]
        if not torch.equal(g, w.expand_as(g)):
            raise RuntimeError("TiedHead's gradient needs each run's tokens weighted alike (a mean or sum)")
        return gx * w[..., None], gw * w[..., None], None, None


def forward(gpt, W, tables, idx, C, targets, blocked, chunks=1, kept=None):
    """model.GPT's forward for M runs at once (`runs_of`'s model), with the runs' weights W (`stacked`):
    idx, targets (M, B, T); C (M, B, T, K) the study's shared coordinates; tables[layer] the runs'
    plane tables (run_table); blocked (M x B, T, T) or None, as model.GPT takes it. Dropout, where
    `gpt.draws` holds masks, takes model.Attention's explicit path (its probabilities' mask drawn too).
    Returns the per-token NLL (M, B, T), 0 where the target is -1 (the head in `chunks` pieces: head_nll)."""
    M, B, T = idx.shape
    (x, wte), _, _ = torch.func.functional_call(gpt, W, (idx.flatten(0, 1), (C, tables)),
                                                {"blocked": blocked, "return_attn": gpt.draws.on})
    return head_nll(x.view(M, B, T, -1), wte, targets, chunks, kept)
