"""--budget SECONDS (scripts/reproduce_gpu.sh's table stages, a GPU lent for minutes): the runs' own first
steps timed, as train.py trains them (a short run of train.py itself into a scratch folder, the seeds the
device's memory holds), then the seeds that fit the budget planned afresh at their initial weights."""
import contextlib
import dataclasses
import io
import json
import os
import sys
import tempfile
import time

from treerope.training import memory, plan

PROBE = 3   # steps timed after the first (compile, warm-up)


def budgeted(values, main):
    """The runs of the seeds that fit: of the runs not yet finished (a rerun goes on with the seeds left),
    those memory holds (`held`), timed by `main` (train.py's) over PROBE + 1 steps, then as many seeds as
    fit the budget from now at full length, else one seed shortened (a reading, said: the first seed none
    of whose runs began), or refused in one line."""
    started, cfg, asked = time.time(), values[0][0], values
    planned = [plan(c, o, True, quiet=True) for c, o in asked]
    finished = [os.path.exists(os.path.join(r.out_dir, "final.json")) for r in planned]
    if all(finished):   # train.py says each is done
        return asked
    left = [i for i, done in enumerate(finished) if not done]   # a rerun: the seeds left
    values, runs = held([asked[i] for i in left], [planned[i] for i in left])
    seeds = sorted({c.seed for c, _ in values})
    configs = len({c.config for c, _ in asked})
    with tempfile.TemporaryDirectory() as scratch:
        probe = [(dataclasses.replace(c, budget=None, out=scratch, steps=PROBE + 1, passes=None,
                                      milestones=PROBE + 1, checkpoint=False, val_docs=1, test_docs=1), None)
                 for c, _ in values]
        said = io.StringIO()
        try:
            with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
                main(values=probe)
        except SystemExit as e:
            why = e.code if isinstance(e.code, str) else said.getvalue()[-300:]
            sys.exit(f"error: --budget's probe failed: {why}")
        logs = [[json.loads(x) for x in open(os.path.join(scratch, os.path.relpath(r.out_dir, r.cfg.out),
                                                          "log.jsonl"))] for r in runs]
    first = max(log[0]["elapsed"] for log in logs)                            # one step: compile, warm-up
    step_s = max(log[-1]["elapsed"] - log[0]["elapsed"] for log in logs) / PROBE / len(seeds)   # a seed's
    steps = max(r.steps for r in runs)
    records = len(runs[0].milestones) * cfg.val_docs + len(runs[0].test_ids)
    scoring, compile_s = step_s / 3 * records / cfg.docs_per_step, first * bool(cfg.compile)
    left = cfg.budget - (time.time() - started) - compile_s   # compiled: the evaluation graph still to come
    n, length = fitting(step_s, scoring, steps, len(seeds), left)
    if compile_s and (n, length) != (len(seeds), steps):     # fewer runs: the training graph compiled again
        left -= compile_s
        n, length = fitting(step_s, scoring, steps, len(seeds), left)
    said = (f"budget: {PROBE} steps of {len(values)} runs timed after one step (compile, warm-up: "
            f"{first:.0f} s): {step_s:.3f} s a step a seed; {left:,.0f} of {cfg.budget:,.0f} s left"
            + (f", {compile_s:.0f} s kept for each graph still to compile" if compile_s else ""))
    if not n:
        sys.exit(f"error: {said}: not one step of one seed fits; raise --budget")
    if length < steps:   # a shortened run pairs with none of the full length: a seed with no run begun
        begun = {r.cfg.seed for r in runs if os.path.exists(os.path.join(r.out_dir, "ckpt.pt"))}
        seeds = [s for s in seeds if s not in begun and sum(c.seed == s for c, _ in values) == configs]
        if not seeds:
            sys.exit(f"error: {said}: {length:,} of a seed's {steps:,} steps fit, and every seed left has "
                     f"runs begun or finished at {steps:,} steps (a shortened one would not pair with them); "
                     "raise --budget")
    print(f"{said}: training seed{'s' * (n > 1)} {', '.join(map(str, seeds[:n]))}"
          + (f" at {length:,} steps, fewer than {steps:,} (a reading: a shortened run)" if length < steps
             else f" of {len(seeds)} at {steps:,} steps"))
    kept = [(c, origin) for c, origin in values if c.seed in seeds[:n]]
    for c, origin in kept if length < steps else ():
        c.steps, c.passes, c.given = length, None, sorted({*c.given, "steps"})
        origin["steps"], origin["passes"] = "--budget", "--budget"
    return kept + [v for v, done in zip(asked, finished) if done]   # said done by train.py


def held(values, runs):
    """The values and planned runs (`runs`, values' own) of the most seeds (from the first) whose step the
    device's memory holds (at least the first seed's, which train.py then refuses where even they do not
    fit), said where fewer."""
    seeds = sorted({r.cfg.seed for r in runs})
    for n in range(len(seeds), 0, -1):
        kept = [r for r in runs if r.cfg.seed in seeds[:n]]
        need, have = memory(kept)
        if n == 1 or not have or need <= 0.9 * have:
            break
    if len(kept) < len(runs):
        print(f"budget: the device's memory holds {len(kept)} of the {len(runs)} runs: seeds "
              f"{seeds[0]}-{kept[-1].cfg.seed} of {len(seeds)} (machine.step_bytes)")
    return [(c, origin) for c, origin in values if c.seed in seeds[:n]], kept


def fitting(step_s, scoring_s, steps, seeds, left):
    """(seeds, steps) that fit `left` seconds: a seed costs its steps (`step_s` each) and the scoring of
    its milestones and test split (`scoring_s`: a record scored as a third of a step's record); seeds add
    linearly (a reading: a device the runs keep busy). The most seeds at full length, else one seed
    at the steps that fit; (0, 0) where not one step does."""
    n = max(0, min(seeds, int(left // (steps * step_s + scoring_s))))   # none where left < 0
    if n:
        return n, steps
    length = int((left - scoring_s) // step_s)
    return (1, length) if length > 0 else (0, 0)
