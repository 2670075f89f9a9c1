"""A study's machinery beneath study.py: its runs planned and checked (`plan_runs`), the memory a step
of all of them needs (`fits`), their batched step and evaluation (`Study`: batched.runs_of's model.GPT
over M runs, fed every run's own records), the update of every run at once (`optimised`), and
--budget's probe of the study's own first steps (`probed`).

Batching (RESULTS "Speed" measures it): compiled (a GPU), each run's records are laid into rows of
the context, a record attending only inside itself, in micro-batches of a fixed number of rows, so
every micro-batch has one shape; eager (a CPU), a record a row, grouped by length as train.py groups
them, the runs dealt into one lane per core, each lane batched on a thread of its own, and the head
fused with its loss (batched.TiedHead). The rows are gathered on the device from the split moved once.
"""
import concurrent.futures
import os
import sys
import time

import numpy as np
import torch

from treerope import machine
from treerope.batched import Draws, adamw_runs, clip_runs, forward, handed, run_table, runs_of, stacked
from treerope.batches import DEPTH_READERS, coords_for, fill_blocks, pack
from treerope.training import finished_alike, lr_at, parse, plan, step_records

# -------------------------------------------------------------------------------- the runs ----
AGREE = ("device", "bf16", "compile", "docs_per_step", "mb_tokens", "val_docs", "test_docs", "pack", "data")


def plan_runs(corpus, configs, seeds, options, quiet=False):
    """train.py's plan for each (configuration, seed) without a final.json yet, seeds outer as in
    sweep.sh; refused in one line when the runs differ in model size or batch. No model is built
    (study.py's `built`): the memory a study needs is said, and refused, first (`fits`). The plan's
    lines are said once, by the first run (`quiet`: not at all)."""
    runs = []
    for i, (s, c) in enumerate((s, c) for s in seeds for c in configs):
        cfg, origin = parse([*options, "--corpus", corpus, "--config", c, "--seed", s])
        if cfg["lr_sweep"]:
            sys.exit("error: --lr_sweep trains runs one after another: use train.py")
        run = plan(cfg, origin, True, quiet=quiet or i > 0)
        if cfg["resume"] and os.path.exists(os.path.join(run.out_dir, "final.json")):
            finished_alike(run)
            if not quiet:
                print(f"done: {run.out_dir}")
            continue
        runs.append(run)
    dirs = [r.out_dir for r in runs]
    if len(set(dirs)) < len(dirs):
        twice = next(d for d in dirs if dirs.count(d) > 1)
        sys.exit(f"error: two runs would share {twice} (a seed given twice, or --name with several "
                 "configurations: a named variant is one configuration)")
    for run in runs[1:]:
        size = {k: v for k, v in vars(run.mcfg).items() if k not in ("configuration", "corpus")}
        first = {k: v for k, v in vars(runs[0].mcfg).items() if k not in ("configuration", "corpus")}
        differ = [f"{k} {first[k]} vs {size[k]}" for k in size if size[k] != first[k]]
        differ += [f"{k} {runs[0].cfg[k]} vs {run.cfg[k]}" for k in AGREE if run.cfg[k] != runs[0].cfg[k]]
        if differ:
            sys.exit(f"error: one study trains runs of one model size and batch; {run.cfg['config']} "
                     f"differs from {runs[0].cfg['config']}: {', '.join(differ)}")
    return runs


# ---------------------------------------------------------------------------------- memory ----
def memory(runs):
    """(bytes a step of `runs` as one study needs (machine.study_bytes), bytes the device has or None,
    the pieces the loss is computed in: a GiB of logits at most): machine.step_memory, train.py's too."""
    return machine.step_memory(runs[0].mcfg, runs[0].cfg, len(runs))


def fits(runs):
    """The loss's pieces, after the study's memory estimate is said; refused in one line, before anything
    is written, where it exceeds the device's memory (a context of 100,000 tokens, too many runs)."""
    (need, have, chunks), dev = memory(runs), runs[0].cfg["device"]
    print(f"memory: about {need / 2 ** 30:,.1f} GiB a step of the {(have or 0) / 2 ** 30:,.1f} GiB on {dev} "
          f"(machine.study_bytes); the loss in {chunks} piece{'s' * (chunks > 1)}")
    machine.refuse_over(need, have, runs[0].mcfg, runs[0].cfg, len(runs),
                        "train fewer seeds or configurations a study, or lower --max_len or --mb_tokens")
    return chunks


def held(runs):
    """--budget: the runs of the most seeds (from the first) whose study the device's memory holds (at
    least the first seed's, which `fits` then refuses where even they do not fit)."""
    seeds = sorted({r.cfg["seed"] for r in runs})
    for n in range(len(seeds), 0, -1):
        kept = [r for r in runs if r.cfg["seed"] in seeds[:n]]
        need, have, _ = memory(kept)
        if n == 1 or not have or need <= 0.9 * have:
            break
    if len(kept) < len(runs):
        print(f"budget: the device's memory holds {len(kept)} of the {len(runs)} runs: seeds "
              f"{seeds[0]}-{kept[-1].cfg['seed']} of {len(seeds)} (machine.study_bytes)")
    return kept


# --------------------------------------------------------- the batched step and evaluation ----
def to_device(a, device):
    """A host array on the device without waiting for the device (pinned, copied asynchronously on
    CUDA): a plain copy there would hold the host until every queued kernel had run."""
    t = torch.as_tensor(a)
    return t.pin_memory().to(device, non_blocking=True) if device.startswith("cuda") else t


def prepare_run(run, names, n_head, n_layer):
    """A run's fixed parts in the study's shared coordinates `names`: its coordinates' columns there
    and its layouts' columns and markers (`columns`), made once, on the device."""
    run.columns = columns(run.model.rotary, names, n_head, n_layer)
    run.coord_cols = torch.tensor([names.index(n) for n in run.model.rotary.names], dtype=torch.long,
                                  device=run.model.rotary.rates.device)


def columns(rot, names, n_head, n_layer):
    """One run's layouts as {layout: (col, rate, offset, overlay, marker)} in the shared coordinates
    `names`, mapped once (columns and markers do not train; the marker a device tensor: no host copy
    per step)."""
    out = {}
    for layer in range(n_layer):
        *table, marker = run_table(rot, layer, n_head, names)
        out[rot.layer_layout[layer]] = (*table, torch.tensor([marker], device=table[0].device))
    return out


def tables(runs, names, n_head, n_layer):
    """Per layer, the runs' plane tables stacked (batched.angles_runs' arguments), each run's rates,
    offsets and overlays read once per layout (its layers share it) from `run.columns`."""
    per = {}
    for m, r in enumerate(runs):
        for i, (col, *_, marker) in r.columns.items():   # rates, offsets, overlays: this step's values
            per[m, i] = (col, *(t.repeat_interleave(n_head // t.shape[0], 0)
                                for t in r.model.rotary.table(i)[1:]), marker)
    out = []
    for layer in range(n_layer):
        at = [per[m, r.model.rotary.layer_layout[layer]] for m, r in enumerate(runs)]
        out.append([torch.stack([p[j] for p in at]) for j in range(4)] + [torch.cat([p[4] for p in at])])
    return out


def coordinates(runs, b, names, corpus, gens, depth_dropout):
    """The study's shared coordinates (M, B, T, K): each run's own (batches.coords_for, its generator)
    in the columns of `names`. Depth dropout hides depth per record (row and index in the row)."""
    M, B, T = b["tokens"].shape
    C = torch.full((M, B, T, max(len(names), 1)), -1, dtype=torch.int32, device=b["tokens"].device)
    for m, r in enumerate(runs):
        own = {k: v[m] for k, v in b.items()}
        if depth_dropout > 0 and "depth" in own and DEPTH_READERS & set(r.model.rotary.names):
            hidden = torch.rand(B, T, generator=gens[m], device=C.device) < depth_dropout
            own["depth"] = torch.where(hidden.gather(1, own["seg"].clamp(min=0)), -1, own["depth"])
        C[m].index_copy_(-1, r.coord_cols, coords_for(r.model, own, corpus, gens[m]))
    return C


def fixed_rows(cfg):
    """Whether a study lays rows of the context (a compiled step's one shape; --pack's blocks) rather
    than a record a row, grouped by length (eager: no padding to the context, no attention mask)."""
    return bool(cfg["compile"] or cfg["pack"])


def lanes(cfg, M):
    """Lanes the runs are dealt into: on CPU, eager, one a core, each lane batched on a thread (two 1-thread
    processes beat one 2-thread process: RESULTS "Speed"); compiled or on a GPU one (one graph)."""
    return max(1, min(M, torch.get_num_threads())) if cfg["device"] == "cpu" and not cfg["compile"] else 1


class Study:
    """The runs, their splits, and the batched step and evaluation. Compiled (one shape: the
    compiler's, and CUDA graphs'), or with --pack, a run's rows are its records laid into rows of the
    context, first fit (batches.fill_blocks; --pack's blocks as they are), a record never split and
    attending only inside itself, and a micro-batch is `rows` rows of every run. Eager, a row is one
    record, grouped by length as train.py groups them (`micro_batches`): no row is padded to the
    context, and attention takes the causal kernel without a mask."""

    def __init__(self, runs, chunks=1):
        self.runs, first = runs, runs[0]
        self.cfg, self.mcfg, self.corpus = first.cfg, first.mcfg, first.corpus
        self.train, self.val, self.test = first.train, first.val, first.test
        self.names = sorted({n for r in runs for n in r.model.rotary.names})
        for r in runs:
            prepare_run(r, self.names, self.mcfg.n_head, self.mcfg.n_layer)
        self.T = self.mcfg.max_len
        self.fixed = fixed_rows(self.cfg)
        self.rows = max(1, self.cfg["mb_tokens"] // self.T)      # rows of one run in a fixed micro-batch
        self.fwd = torch.compile(forward) if self.cfg["compile"] else forward
        self.chunks = chunks                                     # the loss's pieces (fits)
        self.laid = {}                                           # evaluation's micro-batches, per split
        self.lanes = lanes(self.cfg, len(runs))
        self.gpts = [runs_of(first.model) for _ in range(self.lanes)]   # model.GPT over a lane's runs, each
        for split in (self.train, self.val, self.test):          # moved before lanes share them
            split.on(torch.empty(0, device=self.cfg["device"]).device)

    def rows_of(self, records, lengths):
        """Records as a run's rows: laid into rows of the context (fixed shapes), or one a row."""
        return fill_blocks(records, lengths, self.T, len(records)) if self.fixed else list(records)

    def micro_batches(self, rows, split):
        """(at, seg, packed) per micro-batch for every run's list of rows. Fixed: `self.rows` rows of
        the context, padded with empty rows. Eager: each run's records sorted by length, rank by rank
        the longest of the runs' grouped as train.py groups records (batches.pack, mb_tokens padded
        tokens), each group padded to its longest."""
        if self.fixed:
            n = -(-max(map(len, rows)) // self.rows) * self.rows
            for j in range(0, n, self.rows):
                laid = [split.positions((x + [[]] * n)[j:j + self.rows], self.T) for x in rows]
                yield (np.stack([a for a, _ in laid]), np.stack([s for _, s in laid]),
                       any(len(np.atleast_1d(r)) > 1 for x in rows for r in x[j:j + self.rows]))
            return
        ranked = [np.asarray(x, np.int64)[np.argsort(split.len[x], kind="stable")] for x in rows]
        longest = np.zeros(max(map(len, ranked)), np.int64)
        for x in ranked:
            longest[:len(x)] = np.maximum(longest[:len(x)], split.len[x])
        for group in pack(longest, self.cfg["mb_tokens"]):
            laid = [split.positions([[x[i]] if i < len(x) else [] for i in group], int(longest[group].max()))
                    for x in ranked]
            yield np.stack([a for a, _ in laid]), np.stack([s for _, s in laid]), False

    def batched(self, gpt, runs, W, at, seg, packed, gens, split, drop_gens=(), depth_dropout=0.0):
        """Per-token NLL (M, R, T) of `runs` through `gpt` (runs_of), their weights stacked in W, on rows
        at positions `at` (M, R, T) of `split`; dropout masks from `drop_gens`, each run's own."""
        dev = self.cfg["device"]
        b = split.gather(to_device(at, dev), to_device(seg, dev))
        C = coordinates(runs, b, self.names, self.corpus, gens, depth_dropout)
        M, R, T = b["tokens"].shape
        gpt.draws.draw(self.mcfg.dropout, drop_gens,
                       Draws.sites(R, T, self.mcfg.n_embd, self.mcfg.n_head, self.mcfg.n_layer), dev)
        blocked = None   # compiled: always a mask (one kind: one graph); eager, a record a row: SDPA's causal
        if packed or self.cfg["compile"]:
            s = b["seg"].flatten(0, 1)
            blocked = s[:, :, None] != s[:, None, :]     # a row's records attend only inside themselves
        # eager, a record a row: its tokens but the last carry a target (the head runs there alone)
        kept = None if self.fixed else max(1, int(((at >= 0).sum(-1) - (at[..., 0] >= 0)).sum(-1).max()))
        with runs[0].autocast:
            return self.fwd(gpt, W, tables(runs, self.names, self.mcfg.n_head, self.mcfg.n_layer),
                            b["tokens"], C, b["targets"], blocked, self.chunks, kept)

    def step(self, runs):
        """One training step of every run in `runs` (each at its own step): their losses (M,), on the
        device, each run's predicted tokens and FLOPs (model.flops; as executed). A
        stopped run stays in the batch (one shape: one graph), fed empty rows, its loss 0."""
        cfg, dev = self.cfg, self.cfg["device"]
        rows, lens = [], []
        for r in runs:
            own = []
            if not r.done:
                lr = lr_at(r.step, r.steps, r.cfg["lr"], r.cfg["min_lr"])
                for g in r.opt.param_groups:
                    g["lr"] = lr
                own = r.blocks(r.step) if cfg["pack"] else self.rows_of(step_records(
                    len(r.train), cfg["docs_per_step"], r.step, r.cfg["seed"]), r.train.len)
            lens.append(np.concatenate([np.atleast_1d(r.train.len[x]) - 1 for x in own] or [[]]))
            rows.append(own)
        n_tok = [int(n.sum()) for n in lens]
        seeds = [r.cfg["seed"] * 1_000_003 + r.step for r in runs]
        n_tok_t = to_device(np.maximum(n_tok, 1).astype(np.float32), dev)

        def lane(i, ms):
            gens = [torch.Generator(device=dev).manual_seed(seeds[m]) for m in ms]
            drop = [torch.Generator(device=dev).manual_seed(seeds[m] ^ 0x5EED) for m in ms if cfg["dropout"]]
            own = [runs[m] for m in ms]
            total, laid, W = torch.zeros(len(ms), device=dev), [], stacked([r.model for r in own])
            for at, seg, packed in self.micro_batches([rows[m] for m in ms], self.train):
                laid.append(np.full(at.shape[1], at.shape[2]))     # each run's rows as laid, padding in
                nll = self.batched(self.gpts[i], own, W, at, seg, packed, gens, self.train, drop,
                                   cfg["depth_dropout"])
                loss = nll.sum((1, 2)) / n_tok_t[ms[0]:ms[-1] + 1]   # each run's token mean over its step
                loss.sum().backward()                              # runs' gradients stay apart
                total += loss.detach()
            handed(W, [r.model for r in own])
            return total, [np.concatenate(laid)] * len(ms)
        total, laid = self.in_lanes(lane, len(runs))
        return total, n_tok, [(r.model.flops(n), r.model.flops(x)) for r, n, x in zip(runs, lens, laid)]

    def in_lanes(self, fn, M):
        """fn(lane, run indices) over the runs dealt into lanes of consecutive runs, each lane on a thread
        of one core (CPU, eager: `lanes`), else one lane; the lanes' (losses, per-run list) joined."""
        parts = [[int(m) for m in p] for p in np.array_split(np.arange(M), self.lanes)]   # lanes ≤ M
        if len(parts) == 1:
            out = [fn(0, parts[0])]
        else:
            threads = torch.get_num_threads()
            torch.set_num_threads(1)                  # a lane a core (RESULTS "Speed")
            try:
                with concurrent.futures.ThreadPoolExecutor(len(parts)) as pool:
                    out = list(pool.map(fn, range(len(parts)), parts))
            finally:
                torch.set_num_threads(threads)
        return torch.cat([t for t, _ in out]), [x for _, xs in out for x in xs]

    def evaluate(self, runs, split, ids):
        """Each run's mean NLL per token over records `ids`, laid into rows as training lays them
        (each run's generators, as training.evaluate: a fresh one per micro-batch, seeded with its seed)."""
        dev = self.cfg["device"]
        key = (id(split), len(ids))   # the same records every milestone: laid out once
        if key not in self.laid:
            self.laid[key] = list(self.micro_batches([self.rows_of(ids, split.len)], split))

        @torch.no_grad()              # in the lane's own thread: grad mode is per thread
        def lane(i, ms):
            own = [runs[m] for m in ms]
            total, W, gpt = torch.zeros(len(ms), device=dev), stacked([r.model for r in own]), self.gpts[i]
            gpt.eval()                # no dropout: model.GPT's evaluation mode
            for at, seg, packed in self.laid[key]:
                gens = [torch.Generator(device=dev).manual_seed(r.cfg["seed"]) for r in own]
                nll = self.batched(gpt, own, W, at.repeat(len(ms), 0), seg.repeat(len(ms), 0), packed, gens,
                                   split)
                total += nll.float().sum((1, 2))
            gpt.train()
            return total, [None] * len(ms)
        total, _ = self.in_lanes(lane, len(runs))
        return (total / max(int((split.len[ids] - 1).sum()), 1)).tolist()


def optimised(runs, stepped):
    """The `stepped` runs' updates from their step's gradients, all at once: each one's clip at 1.0, then
    its AdamW (batched.clip_runs, batched.adamw_runs); then every run's gradients dropped (a stopped run
    keeps its weights, moments and step)."""
    if stepped:
        clip_runs([r.model for r in stepped])
        adamw_runs([r.opt for r in stepped])
    for r in runs:
        r.opt.zero_grad(set_to_none=True)


# -------------------------------------------------------------------------------- --budget ----
PROBE = 3   # --budget: steps timed after the first (compile, warm-up)


def probed(runs, configs, chunks, budget, started):
    """--budget: the study's own first steps, every seed asked for at once, in this process (the first
    compiles; PROBE more are timed), then the seeds that fit `budget` seconds from `started` (`fitting`),
    said with why (shortened: the first seed whose `configs` runs are all unbegun). Returns those seeds
    and the options that shorten them; study.py plans their runs afresh at their initial weights (the
    timed steps are dropped: each run stays the one train.py trains)."""
    for r in runs:
        r.step, r.done = 0, False
    study = Study(runs, chunks)

    def stepped():
        total = study.step(runs)[0]
        optimised(runs, runs)
        for r in runs:
            r.step += 1
        total.tolist()                                         # the device has finished the step
    first = time.time()
    stepped()
    t0 = time.time()
    for _ in range(PROBE):
        stepped()
    seeds, cfg, steps = sorted({r.cfg["seed"] for r in runs}), runs[0].cfg, max(r.steps for r in runs)
    step_s = (time.time() - t0) / PROBE / len(seeds)          # one seed's runs, one step
    records = len(runs[0].milestones) * cfg["val_docs"] + (cfg["test_docs"] or len(runs[0].test_ids))
    scoring, compile_s = step_s / 3 * records / cfg["docs_per_step"], (t0 - first) * bool(cfg["compile"])
    left = budget - (time.time() - started) - compile_s       # compiled: the evaluation graph still to come
    n, length = fitting(step_s, scoring, steps, len(seeds), left)
    if compile_s and (n, length) != (len(seeds), steps):       # fewer runs: the training graph compiled again
        left -= compile_s
        n, length = fitting(step_s, scoring, steps, len(seeds), left)
    said = (f"budget: {PROBE} steps of {len(runs)} runs timed after {t0 - started:.0f} s of start-up and one "
            f"step (compile, warm-up): {step_s:.3f} s a step a seed; {left:,.0f} of {budget:,.0f} s left"
            + (f", {compile_s:.0f} s kept for each graph still to compile" if compile_s else ""))
    if not n:
        sys.exit(f"error: {said}: not one step of one seed fits; raise --budget")
    if length < steps:   # a shortened run pairs with none of the full length: a seed with no run begun
        begun = {r.cfg["seed"] for r in runs if os.path.exists(os.path.join(r.out_dir, "ckpt.pt"))}
        seeds = [s for s in seeds if s not in begun and sum(r.cfg["seed"] == s for r in runs) == configs]
        if not seeds:
            sys.exit(f"error: {said}: {length:,} of a seed's {steps:,} steps fit, and every seed left has "
                     f"runs begun or finished at {steps:,} steps (a shortened one would not pair with them); "
                     "raise --budget")
    print(f"{said}: training seed{'s' * (n > 1)} {', '.join(map(str, seeds[:n]))}"
          + (f" at {length:,} steps, fewer than {steps:,} (a reading: a shortened run)" if length < steps
             else f" of {len(seeds)} at {steps:,} steps"))
    return [str(s) for s in seeds[:n]], (["--steps", str(length)] if length < steps else [])


def fitting(step_s, scoring_s, steps, seeds, left):
    """(seeds, steps) that fit `left` seconds: a seed costs its steps (`step_s` each) and the scoring of
    its milestones and test split (`scoring_s`: a record scored as a third of a step's record); seeds add
    linearly (a reading: a device the study keeps busy). The most seeds at full length, else one seed
    at the steps that fit; (0, 0) where not one step does."""
    n = max(0, min(seeds, int(left // (steps * step_s + scoring_s))))   # none where left < 0
    if n:
        return n, steps
    length = int((left - scoring_s) // step_s)
    return (1, length) if length > 0 else (0, 0)
