"""Train a study — every (configuration, seed) of a corpus — as one batched model on one device.

    python study.py CORPUS "CONFIGS" "SEEDS" [JOBS] [train.py options...]   # `python train.py --help`
    python study.py web "seq_only seq_depth" "0 1 2 3" --steps 300
    python study.py programs "seq_only tree_only seq_depth" "$(seq 0 9)" --setting python

Both papers work with dozens of small runs (the appendix: 4.7M parameters, 5-20 seeds a
configuration), and one small run leaves a GPU idle. A study trains them together: model.GPT's own
modules run once for all M runs, their weights stacked along a leading run dimension
(treerope/batched.py), so a fork of model.py trains here as in train.py. `main` reads as train.py's:
the runs' values and data, their models and optimisers, then train.py's loop over M runs (`trained`),
then the finish; how one step batches every run's records is treerope/studies.py's.

Each run stays the run train.py would train (its losses to float rounding, tests/test_study.py): its
seed's initial weights, its own batches in train.py's order, its own rotary table, clipping at 1.0 and
AdamW (made for all runs at once), lr, early stop and non-finite stop, its own milestones on the same
validation records, and random draws from generators of its own (with dropout or depth dropout not
train.py's draws: REFERENCE.md "A study"). The early-stop rule is train.py's, but its outcome is not
covered by "to float rounding": where two validation losses tie within rounding, a study's run can
stop at another milestone than train.py's (and from there differ by more; tests/test_study.py). Every
run's folder ends as train.py writes it (config.json, log.jsonl, ckpt.pt, final.json; log.jsonl's
`elapsed` the study's training seconds alone, `val_elapsed` its validation's), so evaluate.py,
analyze.py and sweep.sh read them unchanged.

The arguments are scripts/sweep.sh's (JOBS is accepted and ignored), so `bash scripts/sweep.sh`
becomes `python study.py`; --seed, --config and --corpus are refused (SEEDS, CONFIGS and CORPUS give
them); --check plans the study and checks its finished runs, training nothing (sweep.sh's check);
--budget SECONDS times the study's own first steps and trains the seeds that fit
(scripts/reproduce_gpu.sh's table stages). A rerun skips a finished run only where it was trained as
asked now and analyze.py will pair it (its precision too), and resumes the others from their last
milestone; every run is checked (values, model, memory, checkpoint) before anything is written. The
study exits non-zero naming any run that diverged.
"""
import contextlib
import math
import os
import sys
import time

import torch

from treerope.files import owned
from treerope.machine import keep_freed_memory
from treerope.runs import DEFAULTS
from treerope.studies import Study, fits, held, optimised, plan_runs, probed
from treerope.training import diverged, finish, milestone, record_run, restore, setup

REFUSED = ("seed", "config", "corpus")   # given by CORPUS, CONFIGS and SEEDS


def arguments(argv):
    """(corpus, configurations, seeds, train.py options, --check, --budget's seconds or 0) from the command
    line; an option the arguments give (REFUSED) is refused in one line."""
    if len(argv) < 3:
        sys.exit('usage: python study.py CORPUS "CONFIGS" "SEEDS" [JOBS] [train.py options...]')
    corpus, configs, seeds = argv[0], argv[1].split(), argv[2].split()
    options = argv[4:] if len(argv) > 3 and argv[3].isdigit() else argv[3:]   # JOBS: sweep.sh's, ignored
    if not configs or not seeds or not all(s.isdigit() for s in seeds):
        sys.exit("error: CONFIGS and SEEDS are space-separated lists, SEEDS of whole numbers ≥ 0")
    for o in options:   # argparse would let CORPUS, CONFIGS and SEEDS override these (or an abbreviation)
        k = o[2:].split("=")[0] if o.startswith("--") else ""
        flag = [d for d in DEFAULTS if d.startswith(k)] if k and k not in DEFAULTS else [k]
        if len(flag) == 1 and flag[0] in REFUSED:
            sys.exit(f"error: study.py takes --{flag[0]} from its arguments (CORPUS, CONFIGS, SEEDS); "
                     f"drop {o}")
    budget, rest, given = 0.0, [], iter(options)
    for o in given:   # --budget SECONDS: study.py's own option, not train.py's
        if o == "--budget" or o.startswith("--budget="):
            value = o[9:] if o != "--budget" else next(given, "")
            if not value.replace(".", "", 1).isdecimal() or not 0 < float(value) < math.inf:
                sys.exit(f"error: --budget takes the seconds the study may take, a number > 0, not {value!r}")
            budget = float(value)
        elif o != "--check":
            rest.append(o)
    return corpus, configs, seeds, rest, "--check" in options, budget


def built(runs):
    """Every run's model built (and refused) before any folder is written: training.setup's (its note
    said once, as the plan's lines)."""
    for i, run in enumerate(runs):
        setup(run, quiet=i > 0)
    return runs


# -------------------------------------------------------------------- the loop over M runs ----
def trained(study):
    """train.py's loop over M runs: every unfinished run stepped, all at once, until each ends (its steps,
    an early stop, or a non-finite loss). No step waits for the device: its losses are read a step later,
    or at a milestone."""
    t0, paused, ahead = time.time(), 0.0, None   # paused: validation and checkpoints, not training time
    while not all(r.done for r in study.runs):
        total, n_tok, flops = study.step(study.runs)
        now = time.time() - t0 - paused
        sent = (sent_to_host(total), [None if r.done else r.step for r in study.runs])
        at_milestone = []
        optimised(study.runs, [r for r in study.runs if not r.done])   # each run's clip and AdamW, at once
        for r, n, f in zip(study.runs, n_tok, flops):
            if r.done:   # stopped: weights, optimizer moments and step left as they are
                continue
            r.tokens_seen += n
            r.flops = [a + b for a, b in zip(r.flops, f)]
            r.step, r.elapsed = r.step + 1, now          # the study's training time, as train.py's
            if r.step in r.milestones:
                at_milestone.append(r)
            elif r.step >= r.steps:
                r.done = True
        for losses in [ahead] * (ahead is not None) + [sent] * bool(at_milestone):
            checked(study.runs, losses)
        ahead = None if at_milestone else sent
        at_milestone = [r for r in at_milestone if not r.done]
        if at_milestone:
            t1 = time.time()
            every = study.evaluate(study.runs, study.val, study.runs[0].val_ids)   # every run: one graph
            vals = [v for r, v in zip(study.runs, every) if r in at_milestone]
            for r in at_milestone:
                r.val_s += time.time() - t1
            for r, val in zip(at_milestone, vals):
                if not math.isfinite(val):
                    diverged(r, r.step, f"validation loss is {val}")
                    continue
                lr = r.opt.param_groups[0]["lr"]
                milestone(r, val, lr)
            paused += time.time() - t1


def checked(runs, sent):
    """A step's losses read on the host, a step after they were sent (or at a milestone, before any
    checkpoint): a run whose loss is not finite stops, reported at that step, as train.py reports it."""
    read, steps = sent
    for r, loss, s in zip(runs, read(), steps):
        if s is None or r.done:            # not stepped then, or stopped since
            continue
        if not math.isfinite(loss):
            diverged(r, s, f"loss is {loss}")
        elif s == r.step - 1:
            r.loss = loss                  # the latest step's loss: its milestone logs it


def sent_to_host(t):
    """A reader of t's values, copied towards the host without waiting for the device (on CUDA pinned,
    non-blocking, an event marking the copy): read a step later, it waits on nothing still to run."""
    if not t.is_cuda:
        return t.tolist
    host = torch.empty(t.shape, dtype=t.dtype, pin_memory=True).copy_(t, non_blocking=True)
    copied = torch.cuda.Event()
    copied.record()
    return lambda: (copied.synchronize(), host.tolist())[1]


def finished(study):
    """final.json for every run that did not fail, the test split scored for all of them at once."""
    if all(r.failed for r in study.runs):
        return
    runs = study.runs                      # every run scored (one evaluation graph), the failed ones unused
    tests, vals = study.evaluate(runs, study.test, runs[0].test_ids), None
    for r, test in zip(runs, tests):
        if r.failed:
            continue
        if not r.log:
            vals = vals or study.evaluate(runs, study.val, runs[0].val_ids)
        val = r.log[-1]["val_loss"] if r.log else vals[runs.index(r)]
        finish(r, val, test)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if "-h" in argv or "--help" in argv:
        print(__doc__)
        return []
    started = time.time()
    # ------------------------------------------------------------------------------ values ----
    # train.py's values for each run (its flags), CORPUS, CONFIGS and SEEDS naming the runs
    corpus, configs, seeds, options, check_only, budget = arguments(argv)
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        sys.exit("error: a study runs on one device; use train.py under torchrun for data parallel")
    keep_freed_memory()

    # -------------------------------------------------------------------------------- data ----
    runs = plan_runs(corpus, configs, seeds, options)   # train.py's plan of each run not finished yet
    if check_only:   # sweep.sh's check: the finished runs and the models, nothing trained or written
        built(runs)
        return []
    if not runs:
        print("every run is finished")
        return []
    if budget:   # the seeds memory holds, their study's own first steps timed, those that fit planned afresh
        runs = held(runs)
        chunks = fits(runs)
        seeds, more = probed(built(runs), len(configs), chunks, budget, started)
        runs = plan_runs(corpus, configs, seeds, [*options, *more], quiet=not more)   # said, if shortened

    # --------------------------------------------------------------- models and optimisers ----
    chunks = fits(runs)   # the memory a step needs, said and checked: a study that cannot fit builds nothing
    built(runs)
    if runs[0].cfg["resume"]:   # every checkpoint checked before anything is written
        for r in runs:
            restore(r)
    with contextlib.ExitStack() as locks:
        for r in runs:
            locks.enter_context(owned(r.out_dir, "the run"))
        for i, r in enumerate(runs):
            if not r.cfg["resume"]:   # --resume=0: its folder removed, under its lock
                restore(r)
            record_run(r, quiet=i > 0)   # config.json each; the first's line says the study's data and model
        named = ", ".join(f"{r.cfg['config']}/{r.cfg['seed']}" for r in runs)
        print(f"study: {len(runs)} run{'s' * (len(runs) > 1)} ({named}) as one batched model")
        study = Study(runs, chunks)

        # ------------------------------------------------------------------------ the loop ----
        trained(study)

        # -------------------------------------------------------------------------- finish ----
        finished(study)
    counts = torch._dynamo.utils.counters   # bench.py reads this line
    print(f"compiled: {counts['stats']['unique_graphs']} graphs, "
          f"{sum(counts['graph_break'].values())} graph breaks")
    failed = [r for r in runs if r.failed]
    if failed:   # what a rerun does with each: from its last checkpoint, or from the start
        kept = [r.out_dir for r in failed if r.log]
        lost = [r.out_dir for r in failed if not r.log]
        said = ([f"a rerun retries from the last checkpoint: {', '.join(kept)}"] if kept else []) + \
            ([f"no checkpoint kept, a rerun starts over (a lower --lr?): {', '.join(lost)}"] if lost else [])
        sys.exit("error: diverged (no final.json): " + "; ".join(said))
    return [r.out_dir for r in runs]


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit("\ninterrupted: the same command resumes every run from its last milestone's checkpoint")
