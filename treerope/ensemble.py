"""M runs as one model: model.GPT's own forward, its loss included, over the runs' stacked weights under
torch.func.vmap (PyTorch's model-ensembling recipe: stacked state + vmap(functional_call)). What differs
between runs is data: each run's rotary tables in one frame (Rotary.angles over a run dimension), its
dropout masks (drawn outside, batches.drawn). M = 1 is a run's own model called as it is (compiled, under
DDP). Here too: a micro-batch of every run, the one evaluation, and each run's clip and AdamW at once.
Nothing here computes a logit or a loss: a fork of model.py (a loss term, a head with a bias, a parameter,
a dropout site) trains here as it does alone."""
import copy
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, vmap
from torch.optim.adamw import adamw

from model import Dropout
from treerope import machine
from treerope.batches import coordinates, drawn, fill_blocks

# CPU's SDPA has no vmap batching rule: PyTorch runs it run by run and warns; its batched math path measured
# no faster (REFERENCE "Processes, rows, memory"). Any other op a fork adds without one still warns.
warnings.filterwarnings("ignore", "There is a performance drop .* for aten::_scaled_dot_product_flash_")


class Ensemble:
    """M runs' models (one model.GPT class and size; configurations may differ) called as one: `__call__`
    gives (M, B, T) per-token NLL, each run's from its own weights (`weights`, whose gradients `hand`
    gives back), tables, coordinates and masks. `names`: the coordinate columns of the frame."""

    def __init__(self, models, compile=False, wrap=None):
        self.models = models
        self.names = sorted({n for m in models for n in m.rotary.names})
        self.sites = dropout_sites(models[0])
        if len(models) == 1:      # the run's own model: DDP's hooks and torch.compile see it as it is
            fwd = torch.compile(models[0]) if compile else models[0]
            self.one = wrap(fwd) if wrap else fwd
            return
        self.base = framed(models[0], self.names)
        self.frames = [frame(m.rotary, self.names, m.cfg.n_head) for m in models]
        self.tables = {k: torch.stack([f[k] for f in self.frames]) for k in self.frames[0]}
        self.padded = {"rotary.rates": max(m.rotary.rates.numel() for m in models),
                       "rotary.offsets": max(m.rotary.offsets.numel() for m in models)}
        self.fwd = torch.compile(self.vmapped) if compile else self.vmapped

    def weights(self):
        """The runs' parameters stacked along a leading run dimension, leaves of their own for this step
        (each run's rotary rates and offsets padded to the longest); none for one run."""
        if len(self.models) == 1:
            return {}
        named = [dict(m.named_parameters()) for m in self.models]
        return {k: torch.stack([pad(n[k].detach(), self.padded.get(k)) for n in named])
                .requires_grad_(torch.is_grad_enabled()) for k in named[0]}

    def hand(self, W):
        """The stacked weights' gradients, summed over a step's micro-batches, as each run's own."""
        for m, model in enumerate(self.models):
            for k, p in model.named_parameters():
                if k in W and W[k].grad is not None:
                    p.grad = W[k].grad[m][:p.shape[0]] if k in self.padded else W[k].grad[m]

    def __call__(self, W, masks, idx, C, targets, blocked=None):
        """Per-token NLL (M, B, T) of M runs: idx, targets (M, B, T), C (M, B, T, K) in `names`' columns,
        blocked (M, B, T, T) or None, masks {dropout site: (M, B, ...)} (none without dropout)."""
        if len(self.models) == 1:
            sites = [(self.models[0].get_submodule(k), v[0]) for k, v in masks.items()]
            for site, keep in sites:
                site.keep = keep
            try:
                _, nll, _ = self.one(idx[0], C[0], targets[0],
                                     blocked=None if blocked is None else blocked[0])
            finally:
                for site, _ in sites:
                    site.keep = None
            return nll[None]
        state = {**W, **self.tables, **{f"{k}.keep": v for k, v in masks.items()}}
        return self.fwd(state, idx, C, targets, blocked)

    def vmapped(self, state, idx, C, targets, blocked):
        """model.GPT's forward, loss included, once per run under vmap."""
        def one(state, idx, C, targets, blocked=None):
            return functional_call(self.base, state, (idx, C, targets), {"blocked": blocked})[1]
        if blocked is None:
            return vmap(one)(state, idx, C, targets)
        return vmap(one)(state, idx, C, targets, blocked)

    def train(self, mode=True):
        for m in [*self.models, *([self.base] if len(self.models) > 1 else [])]:
            m.train(mode)


def pad(t, n):
    return t if n is None else F.pad(t, (0, n - t.shape[0]))


def framed(model, names):
    """A copy of `model` whose rotary has one table per layer and reads the frame's coordinate columns
    `names`: the structure every run's state goes through (functional_call replaces its tensors)."""
    base = copy.deepcopy(model)
    rot = base.rotary
    rot.tables = nn.ModuleList(copy.deepcopy(rot.tables[i]) for i in rot.layer_layout)
    rot.layer_layout, rot.names = list(range(len(rot.layer_layout))), names
    return base


def frame(rot, names, n_head):
    """One run's rotary tables in the frame: a table per layer, each plane's column and the marker's
    mapped into `names`, every (HT, P) buffer given a row per head (heads sharing a table, copies)."""
    remap = torch.tensor([names.index(n) for n in rot.names] + [-1], device=rot.rates.device)
    out = {}
    for layer, i in enumerate(rot.layer_layout):
        for k, t in rot.tables[i].named_buffers():
            if k in ("col", "mark"):
                t = remap[t.long()].to(t.dtype)
            if t.dim() == 2:
                t = t.repeat_interleave(n_head // t.shape[0], 0)
            out[f"rotary.tables.{layer}.{k}"] = t
    return out


def dropout_sites(model):
    """{site: (its p, the shape of its input for one row of the context)} for each model.Dropout that drops,
    from one training forward of the model on the meta device: a site a fork adds is found, none is listed."""
    dropping = {k: m for k, m in model.named_modules() if isinstance(m, Dropout) and m.p > 0}
    if not dropping:
        return {}
    shapes = {}

    def seen(k):
        return lambda module, args: shapes.setdefault(k, tuple(args[0].shape[1:])) and None
    hooks = [m.register_forward_pre_hook(seen(k)) for k, m in dropping.items()]
    state = {k: torch.empty_like(v, device="meta") for k, v in [*model.named_parameters(),
                                                                 *model.named_buffers()]}
    T, K, mode = model.cfg.max_len, len(model.rotary.names), model.training
    row = torch.zeros(1, T, dtype=torch.long, device="meta")
    try:
        model.train()
        functional_call(model, state, (row, torch.zeros(1, T, K, dtype=torch.int32, device="meta"), row))
    finally:
        model.train(mode)
        for h in hooks:
            h.remove()
    return {k: (m.p, shapes[k]) for k, m in dropping.items() if k in shapes}


# ------------------------------------------------------------------ the runs' micro-batches ----
def stacked(runs, world=1):
    """The runs as one model (an Ensemble: compiled or eager, on any device; under torchrun the run's model
    under DDP), their splits moved to its device once, before the steps read them."""
    cfg = runs[0].cfg
    for split in (runs[0].train, runs[0].val, runs[0].test):
        split.on(torch.empty(0, device=cfg.device).device)
    wrap = (lambda f: machine.wrapped(f, cfg.device)) if world > 1 else None
    return Ensemble([r.model for r in runs], cfg.compile, wrap)


def micro_batch(ens, runs, split, laid, T_fixed, train=True):
    """One micro-batch of every run in `ens` (an Ensemble of `runs`): tokens and targets (M, B, T), the
    coordinates in the ensemble's columns (M, B, T, K), each run's dropout masks, and the blocked pairs
    of rows holding several records (or every row of the context: one graph). `laid` is (at, seg, which)
    from Split.micro_batches; its draws each run's at its step (evaluation: rand_p1's alone, step -1)."""
    at, seg, which = laid
    dev = runs[0].cfg.device
    b = split.gather(torch.as_tensor(at, device=dev), torch.as_tensor(seg, device=dev))
    C, masks = [], []
    for m, r in enumerate(runs):
        own = {k: v[m] for k, v in b.items()}
        masks.append(drawn(own, which[m], r.cfg.seed, r.step if train else -1, ens.sites if train else {},
                           r.cfg.depth_dropout if train else 0.0, r.model.rotary.names, r.mcfg.max_len))
        C.append(coordinates(own, ens.names, r.corpus))
    masks = {k: torch.stack([mk[k] for mk in masks]) for k in masks[0]}
    blocked = None
    if T_fixed and (runs[0].cfg.compile or (seg > 0).any()):
        s = b["seg"]
        blocked = s[..., :, None] != s[..., None, :]      # a row's records attend only inside themselves
    return b["tokens"], torch.stack(C), b["targets"], masks, blocked


# ------------------------------------------------------------------------ the evaluation ----
@torch.no_grad()
def evaluate(runs, ens, split, ids, T=None):
    """Each run's mean NLL per token over records `ids` (the same for every run), laid into rows as its
    training lays them (with T, rows of T tokens): a list in the runs' order, all at once through `ens`."""
    n = max(int((split.len[ids] - 1).sum()), 1)
    rows = fill_blocks(ids, split.len, T, len(ids)) if T else list(ids)
    total = torch.zeros(len(runs), dtype=torch.float64, device=runs[0].cfg.device)
    ens.train(False)
    for laid in split.micro_batches([rows] * len(runs), runs[0].cfg.mb_tokens, T):
        idx, C, targets, masks, blocked = micro_batch(ens, runs, split, laid, T, train=False)
        with runs[0].autocast:
            total += ens(ens.weights(), masks, idx, C, targets, blocked).float().sum((1, 2)).double()
    ens.train(True)
    return (total / n).tolist()


# ------------------------------------------------------------------ every run's update ----
@torch.no_grad()
def clip(models, max_norm=1.0):
    """Each run's clip_grad_norm_(max_norm) at once, torch's arithmetic: every gradient's norm in one
    call, each run's norm of its norms (torch's total) and its scale on the device, with no wait for it."""
    grads = [[p.grad for p in m.parameters() if p.grad is not None] for m in models]
    width, pad0 = max(map(len, grads)), grads[0][0].new_zeros(1)    # pad: a norm of 0 (runs differ in count)
    norms = torch._foreach_norm([g for gs in grads for g in gs + [pad0] * (width - len(gs))])
    total = torch.linalg.vector_norm(torch.stack(norms).view(len(grads), width), dim=1)
    for gs, scale in zip(grads, (max_norm / (total + 1e-6)).clamp(max=1.0)):
        torch._foreach_mul_(gs, scale)


ADAMW = ("lr", "betas", "eps", "weight_decay", "maximize", "foreach", "capturable", "differentiable", "fused")


@torch.no_grad()
def adamw_step(optimizers):
    """Each run's AdamW step (training.setup's: no amsgrad) at once: torch's own update (its functional
    form), one call per set of hyperparameters the runs share (lr: one schedule at one step), the moments
    and step kept in each run's optimizer as its own step() keeps them (checkpoints as one run's)."""
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
