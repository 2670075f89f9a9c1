"""Train one configuration at one seed, or several (configurations x seeds) at once as one model.

    python train.py --config seq_depth                     # the defaults: web corpus, the CPU scale
    python train.py --corpus python --config seq_tree --seed 3 --steps=400
    python train.py --config seq_depth --depth_dropout=0.3 --name seq_depth_dropout   # its own folder
    python train.py --setting web_pages --config seq_depth  # a paper's run by name (treerope/settings.py)
    python train.py --setting python --config seq_only seq_depth --seed 0 1 2   # six runs, trained at once
    python train.py --setting python --lr_sweep=1          # its lr sweep, and the rate it picks
    torchrun --nproc_per_node=2 train.py --setting python  # data parallel

A run's values are the defaults (treerope/settings.py `Values`, and model.GPTConfig's for the model),
then one of the papers' settings if named, then the flags given; `--help` lists every flag with its
default and meaning. The defaults, on any device (on a GPU name a setting), are the CPU scale of the
appendix §4 recipe: a 4-layer model (d=128, one 128-wide head, context 256), AdamW (0.9, 0.95), lr 1.2e-3,
weight decay 0.1 on weight matrices only (rotary rates/offsets, LayerNorm excluded), clip 1.0, linear
warm-up over 2% of the steps then cosine to 10% of the peak, no dropout, no early stop, 300 steps of 16
records. Paper 004's recipe (Table 11: lr 3e-4, weight decay 0.01, cosine to 1%, dropout 0.1, early stop
after 10 validations without a better loss, 16 packed blocks of 1,024 tokens a step) is its settings'
(`--setting hrope_prose`; at the CPU scale `cpu_prose`). Every step trains whole records (a fixed number,
or with --pack a fixed number of blocks), its rows grouped by length into micro-batches of at most
`mb_tokens` padded tokens; a record attends only inside itself, packed or not; validation on a fixed set
of records at evenly spaced milestones; the test split once at the end; no checkpoint is chosen by its
score. Same seed => identical initial weights and identical batches in every configuration.

Several configurations or seeds (a study: both papers work with dozens of small runs, and one small run
leaves a GPU idle) train as one model: model.GPT's own forward and loss over the runs' stacked weights
(treerope/ensemble.py), each run still the one it trains alone (its weights, batches, draws, lr, clip,
AdamW, milestones: tests/test_study.py), to float rounding: where two validation losses tie within
rounding, a run can stop at another milestone than train.py's alone (and from there differ by more).
--budget SECONDS times their first steps and trains the seeds
that fit; --check plans them and checks the finished ones, training nothing. Each run writes
out/<corpus>/<name or config>/seed<k>/: config.json, log.jsonl, ckpt.pt (not with --checkpoint=0: a
benchmark's runs), final.json (last; `reported`: the validation loss under the run's reporting rule).
"""
import contextlib
import math
import os
import sys
import time

import numpy as np
import torch
from tqdm import tqdm

from treerope.batches import fixed_rows, step_rows
from treerope.budget import budgeted
from treerope.ensemble import adamw_step, clip, evaluate, micro_batch, stacked
from treerope.machine import keep_freed_memory, per_core, start, summed
from treerope.runs import lr_sweep
from treerope.training import closed, diverged, lr_at, milestone, opened, parse


def main(argv=None, values=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    # ------------------------------------------------------------------------------ values ----
    # each run's: the defaults (settings.Values, model.GPTConfig) <- a paper's setting <- the flags given
    values = values or parse(argv, __doc__)        # [(values, where each came from)], a run each
    cfg = values[0][0]
    if cfg.lr_sweep:
        return lr_sweep(cfg, argv, main)
    if cfg.budget:   # the runs' own first steps timed (a short run of this script), then the seeds that fit
        values = budgeted(values, main)
    keep_freed_memory()
    # under torchrun (WORLD_SIZE > 1) one process per device, gloo on CPU and nccl on CUDA, as nanoGPT
    rank, world = 0, 1
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        rank, world, cfg.device = start(cfg.device)

    # ------------------------------------------------ data, models, optimisers, folders ----
    # on a CPU the runs still to train are dealt to one process a core: `runs` is this process's share
    with opened(values, rank, world) as planned, per_core(planned, cfg, world) as runs:
        if not runs:                                # a finished run is left as it is
            return planned[0].out_dir if len(values) == 1 and planned else []
        if len(runs) > 1:
            named = ", ".join(f"{r.cfg.config}/{r.cfg.seed}" for r in runs)
            print(f"{len(runs)} runs at once ({named}), one model: model.GPT's forward and loss over their "
                  "stacked weights")
        model = stacked(runs, world)               # the runs as one model (M = 1: the run's own)
        split, T = runs[0].train, fixed_rows(runs[0])   # T: compiled or --pack, rows of the context

        # ------------------------------------------------------------------ the loop ----
        t0, paused, ahead = time.time(), 0.0, None   # paused: validation, checkpoints: not training time
        bar = tqdm(total=max(r.steps for r in runs), initial=min(r.step for r in runs),
                   disable=rank > 0 or bool(os.environ.get("TQDM_DISABLE")),   # tqdm's switch, honoured
                   desc=runs[0].cfg.config if len(runs) == 1 else f"{len(runs)} runs")
        while not all(r.done for r in runs):        # every run at its own step (resumed ones may differ)
            for r in runs:   # its lr, and its step's rows (seeded records, the same in every configuration)
                r.rows = [] if r.done else step_rows(r, T)
                for g in r.opt.param_groups:
                    g["lr"] = lr_at(r.step, r.steps, r.cfg.lr, r.cfg.min_lr)
            # the runs' micro-batches: forward, loss, backward
            W = model.weights()                   # the runs' weights, stacked (M > 1): this step's leaves
            losses, executed = torch.zeros(len(runs), dtype=torch.float64, device=cfg.device), 0.0
            n_tok = torch.tensor([max(r.predicted().sum(), 1) for r in runs], dtype=torch.float32,
                                 device=cfg.device)             # the tokens with a target, each run's
            laid = list(split.micro_batches([r.rows for r in runs], cfg.mb_tokens, T))
            mine = laid[rank::world]                    # under torchrun, dealt round-robin
            for i, mb in enumerate(mine or laid[:1]):   # a process dealt none joins the sync at weight 0
                idx, C, targets, masks, blocked = micro_batch(model, runs, split, mb, T)
                # DDP syncs (and averages) on each process's last backward only: losses scaled by world
                sync = world == 1 or i == len(mine) - 1 or not mine
                with contextlib.nullcontext() if sync else model.one.no_sync(), runs[0].autocast:
                    nll = model(W, masks, idx, C, targets, blocked)   # (M, B, T): model.GPT's loss
                loss = nll.sum((1, 2)) / n_tok                        # each run's token mean, its step
                (loss.sum() * (world if mine else 0)).backward()
                losses += loss.detach().double() * bool(mine)
                executed += runs[0].model.flops(np.full(*idx.shape[1:])) * bool(mine)   # padding in
            model.hand(W)
            executed = [executed] * len(runs)
            if world > 1:   # every process sees the whole loss (the NaN stop must agree), FLOPs executed
                losses, executed = summed(losses, cfg.device), summed(executed, cfg.device)
            sent = (sent_to_host(losses), [None if r.done else r.step for r in runs])
            live = [r for r in runs if not r.done]
            clip([r.model for r in live], 1.0)          # each run's clip at 1.0, then its AdamW, at once
            adamw_step([r.opt for r in live])
            for r in runs:
                r.opt.zero_grad(set_to_none=True)
            now, reached = time.time() - t0 - paused, []
            for r, flops in zip(runs, executed):
                if r.done:   # stopped: weights, optimizer moments and step left as they are
                    continue
                r.tokens_seen += int(r.predicted().sum())
                r.flops = [r.flops[0] + r.model.flops(r.predicted()), r.flops[1] + flops]
                r.step, r.elapsed = r.step + 1, now   # training time alone
                if r.step in r.milestones:
                    reached.append(r)
                elif r.step >= r.steps:
                    r.done = True
            for read in [ahead] * (ahead is not None) + [sent] * bool(reached):
                checked(runs, read)   # the non-finite stop: a step late (no wait for the device), or now
            ahead = None if reached else sent
            bar.update(min(r.step for r in runs) - bar.n)
            bar.set_postfix(loss="read next step" if math.isnan(runs[0].loss) else f"{runs[0].loss:.3f}",
                            tok_s=f"{sum(r.tokens_seen for r in runs) / now:.0f}")   # read a step late
            reached = [r for r in reached if not r.done]
            if reached:   # the fixed validation records, the log, the checkpoint, the early stop
                t1 = time.time()
                every = evaluate(runs, model, runs[0].val, runs[0].val_ids, T)   # every run at once
                for r, val in zip(runs, every):
                    if r not in reached:
                        continue
                    r.val_s += time.time() - t1
                    if not math.isfinite(val):   # the weights went non-finite on a finite step: not saved
                        diverged(r, r.step, f"validation loss is {val}")
                    else:
                        milestone(r, val, r.opt.param_groups[0]["lr"])
                paused += time.time() - t1
        bar.close()   # ended at the last step, before the test split is scored

        # -------------------------------------------------------------------- finish ----
        if closed(runs, model):   # a run diverged with nothing to report
            sys.exit(2)
    counts = torch._dynamo.utils.counters   # bench.py reads this line
    if cfg.compile:
        print(f"compiled: {counts['stats']['unique_graphs']} graphs, "
              f"{sum(counts['graph_break'].values())} graph breaks")
    if world > 1:
        torch.distributed.destroy_process_group()
    dirs = [r.out_dir for r in planned if not r.finished]
    return dirs[0] if len(values) == 1 else dirs   # one run asked for: its folder


def checked(runs, sent):
    """A step's losses read on the host (a step after they were sent, or at a milestone, before any
    checkpoint): a run whose loss is not finite stops, reported at that step."""
    read, steps = sent
    for r, loss, s in zip(runs, read(), steps):
        if s is None or r.done:            # not stepped then, or stopped since
            continue
        if not math.isfinite(loss):
            diverged(r, s, f"loss is {loss}")
        else:
            r.loss = loss                  # read in order: the latest step's is last, and a milestone logs it


def sent_to_host(t):
    """A reader of t's values, copied towards the host without waiting for the device (on CUDA pinned,
    non-blocking, an event marking the copy): read a step later, it waits on nothing still to run."""
    if not t.is_cuda:
        return t.tolist
    host = torch.empty(t.shape, dtype=t.dtype, pin_memory=True).copy_(t, non_blocking=True)
    copied = torch.cuda.Event()
    copied.record()
    return lambda: (copied.synchronize(), host.tolist())[1]


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit("\ninterrupted: the same command resumes from the last milestone's checkpoint")
