"""Train one configuration at one seed.

    python train.py --config seq_depth                     # the defaults: web corpus, the CPU scale
    python train.py --corpus python --config seq_tree --seed 3 --steps=400
    python train.py --config seq_depth --depth_dropout=0.3 --name seq_depth_dropout   # its own folder
    python train.py --setting web_pages --config seq_depth  # a paper's run by name (treerope/settings.py)
    python train.py --setting python --lr_sweep=1          # its lr sweep, and the rate it picks
    torchrun --nproc_per_node=2 train.py --setting python  # data parallel

A run's values are the defaults (treerope/settings.py `Values`, and model.GPTConfig's for the model),
then one of the papers' settings if named, then the flags given; `--help` lists every flag with its
default and meaning. The defaults, on any device (on a GPU name a setting), are the CPU scale of the
appendix §4 recipe: a 4-layer model (d=128,
one 128-wide head, context 256), AdamW (0.9, 0.95), lr 1.2e-3, weight decay 0.1 on weight matrices only
(rotary rates/offsets, LayerNorm excluded), clip 1.0, linear warm-up over 2% of the steps then cosine
to 10% of the peak, no dropout, no early stop, 300 steps of 16 records. Paper 004's recipe (Table 11:
lr 3e-4, weight decay 0.01, cosine to 1%, dropout 0.1, early stop after 10 validations without a better
loss, 16 packed blocks of 1,024 tokens a step) is its settings' (`--setting hrope_prose`; at the CPU
scale `cpu_prose`). Every step trains whole records (a fixed number, or with --pack a fixed number of
blocks), its rows grouped by length into micro-batches of at most `mb_tokens` padded tokens; a record
attends only inside itself, packed or not; validation on a fixed set of records at evenly spaced
milestones; the test split once at the end; no checkpoint is chosen by its score. Same seed => identical
initial weights and identical batches in every configuration. Writes out/<corpus>/<name or
config>/seed<k>/: config.json, log.jsonl, ckpt.pt (not with --checkpoint=0: a benchmark's runs),
final.json (last; `reported`: the validation loss under the run's reporting rule).
"""
import contextlib
import math
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
from tqdm import tqdm

from treerope.batches import coords_for, fill_blocks, fixed_groups, pack
from treerope.files import owned, writable
from treerope.machine import keep_freed_memory, start, summed, wrapped
from treerope.runs import lr_sweep
from treerope.training import (
    diverged,
    evaluate,
    finish,
    lr_at,
    milestone,
    parse,
    plan,
    record_run,
    restore,
    setup,
    step_records,
)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    # ------------------------------------------------------------------------------ values ----
    # the defaults (settings.Values, model.GPTConfig) <- a paper's setting <- the flags given
    cfg, origin = parse(argv, __doc__)
    if cfg["lr_sweep"]:
        return lr_sweep(cfg, argv, main)
    keep_freed_memory()
    # under torchrun (WORLD_SIZE > 1) one process per device, gloo on CPU and nccl on CUDA, as nanoGPT
    rank, world = start(cfg) if int(os.environ.get("WORLD_SIZE", "1")) > 1 else (0, 1)

    # -------------------------------------------------------------------------------- data ----
    run = plan(cfg, origin, rank == 0)   # the splits, the model's config, the steps

    # ---------------------------------------------------------------- model and optimiser ----
    model, opt = setup(run).model, run.opt   # refused (its planes, its data) before any folder is made
    if run.master:   # before any work: a read-only or full --out is one line, not a traceback at step 1
        writable(run.out_dir, "choose another --out")
    with owned(run.out_dir, "the run") if run.master else contextlib.nullcontext():
        restore(run, world)                          # a checkpoint to go on from, or none
        if run.finished:                             # its config.json and final.json are left as they are
            if world > 1:
                dist.destroy_process_group()
            return run.out_dir
        fwd = torch.compile(model) if cfg["compile"] else model
        if world > 1:
            fwd = wrapped(fwd, cfg)
        if run.master:
            record_run(run)

        # ---------------------------------------------------------------------- the loop ----
        t0, paused = time.time(), 0.0   # paused: validation and checkpoints, not training time
        T = run.mcfg.max_len if cfg["compile"] else None   # compiled: rows of the context, one shape
        last = run.step if run.done else run.steps     # done: stopped early before its final.json
        bar = tqdm(range(run.step, last), initial=run.step, total=run.steps, disable=not run.master,
                   desc=cfg["config"])
        for step in bar:
            lr = lr_at(step, run.steps, cfg["lr"], cfg["min_lr"])
            for g in opt.param_groups:
                g["lr"] = lr
            # the step's records (seeded, the same in every configuration), or with --pack its blocks
            rows = run.blocks(step) if cfg["pack"] else step_records(len(run.train), cfg["docs_per_step"],
                                                                    step, cfg["seed"])
            if T is not None and not cfg["pack"]:   # compiled: the records laid into rows of the context
                rows = fill_blocks(rows, run.train.len, T, len(rows))
            # micro-batches of at most mb_tokens padded tokens, dealt round-robin to the processes
            groups = pack([run.train.len[r].sum() for r in rows], cfg["mb_tokens"]) if T is None else \
                fixed_groups(len(rows), max(1, cfg["mb_tokens"] // T))
            n = np.concatenate([np.atleast_1d(run.train.len[r]) for r in rows]) - 1   # predicted tokens
            n_tok, mine = int(n.sum()), groups[rank::world]
            gen = torch.Generator(device=cfg["device"]).manual_seed(cfg["seed"] * 1_000_003 + step)
            step_loss, executed = 0.0, 0.0
            for i, group in enumerate(mine or groups[:1]):   # a process dealt none joins the sync at weight 0
                b = run.train.batch([rows[j] if j >= 0 else [] for j in group], cfg["device"], T)
                executed += model.flops(np.full(*b["tokens"].shape)) if mine else 0.0
                C = coords_for(model, b, run.corpus, gen, cfg["depth_dropout"])
                # a packed block: attention stays inside each record (document-confined, Table 11 reading)
                blocked = b["segment"][:, :, None] != b["segment"][:, None, :] if "segment" in b else None
                # DDP syncs (and averages) on each process's last backward only: losses scaled by world
                sync = world == 1 or i == len(mine) - 1 or not mine
                with contextlib.nullcontext() if sync else fwd.no_sync():
                    with run.autocast:
                        _, nll, _ = fwd(b["tokens"], C, b["targets"], blocked=blocked)
                    loss = nll.sum() / n_tok                               # token mean over the step
                    (loss * (world if mine else 0)).backward()
                step_loss += loss.item() if mine else 0.0
            if world > 1:   # every process sees the whole loss (the NaN stop must agree) and FLOPs executed
                step_loss, executed = summed([step_loss, executed], cfg["device"])
            if not math.isfinite(step_loss):
                diverged(run, step, f"loss is {step_loss}")
                break
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            run.step, run.loss, run.tokens_seen = step + 1, step_loss, run.tokens_seen + n_tok
            run.flops = [run.flops[0] + model.flops(n), run.flops[1] + executed]
            t1 = time.time()
            run.elapsed = t1 - t0 - paused   # training time alone
            bar.set_postfix(loss=f"{step_loss:.3f}", tok_s=f"{run.tokens_seen / max(run.elapsed, 1e-9):.0f}")
            if run.step in run.milestones:   # the fixed validation records, the log, the checkpoint
                val = evaluate(model, run.val, run.val_ids, cfg, run.corpus, run.autocast)
                run.val_s += time.time() - t1
                if not math.isfinite(val):   # the weights went non-finite on a finite step: not checkpointed
                    diverged(run, run.step, f"validation loss is {val}")
                    break
                if milestone(run, val, lr):   # its steps done, or an early stop
                    break
                paused += time.time() - t1
        if run.failed:
            sys.exit(2)

        # ------------------------------------------------------------------------ finish ----
        if run.master:
            val_loss = run.log[-1]["val_loss"] if run.log else evaluate(model, run.val, run.val_ids, cfg,
                                                                         run.corpus, run.autocast)
            finish(run, val_loss, evaluate(model, run.test, run.test_ids, cfg, run.corpus, run.autocast))
    if world > 1:
        dist.destroy_process_group()
    return run.out_dir


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit("\ninterrupted: the same command resumes from the last milestone's checkpoint")
