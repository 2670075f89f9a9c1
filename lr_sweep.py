"""A setting's learning-rate sweep (depth-perception appendix §4 "Learning rates"), as
`python train.py --setting python --lr_sweep=1` runs it: every swept configuration at every rate,
each a train.py run of its own, and the rate picked.
"""
import json
import math
import os

import numpy as np

from data import write_json
from paper_settings import SETTINGS


def pick_lr(losses):
    """The sweep's rate: the lowest mean final validation loss over the swept configurations (our
    reading of "All four were best at 0.0012"; with one configuration, its best).
    losses: {(config, lr): loss}."""
    rates = sorted({r for _, r in losses})
    mean = {r: np.mean([v for (_, q), v in losses.items() if q == r]) for r in rates}
    return min(rates, key=lambda r: mean[r])


def lr_sweep(cfg, argv, main):
    """Appendix §4 "Learning rates": the setting's swept configurations at each of its rates, each a
    run of the sweep's steps (--steps overrides) with its own schedule, one after another under
    <out>/lr_sweep; a finished run is read back, a diverged one (non-finite loss) counts as infinite.
    Prints the final validation losses and the rate picked; writes lr_sweep.json; returns the rate.
    `main` is train.py's: each run is one of it."""
    sweep = SETTINGS[cfg["setting"]]["sweep"]
    steps = cfg["steps"] if "steps" in cfg["given"] else sweep["steps"]
    out = os.path.join(cfg["out"], "lr_sweep")
    losses = {}
    for config in sweep["configs"]:
        for lr in sweep["rates"]:
            run = [f"--config={config}", f"--lr={lr}", f"--steps={steps}", f"--name={config}_lr{lr:g}",
                   f"--out={out}"]
            final = os.path.join(out, cfg["corpus"], f"{config}_lr{lr:g}", f"seed{cfg['seed']}", "final.json")
            if not os.path.exists(final):
                try:
                    main([*argv, "--lr_sweep=0", *run])
                except SystemExit as e:
                    if e.code != 2:                 # 2: stopped on a non-finite loss
                        raise
            losses[config, lr] = math.inf
            if os.path.exists(final):
                with open(final) as f:
                    losses[config, lr] = json.load(f)["val_loss"]
    best = pick_lr(losses)
    print(f"\nlr sweep, setting {cfg['setting']}: {len(sweep['rates'])} rates x {steps} steps, "
          f"seed {cfg['seed']}; final validation loss (inf: diverged)\n| config | "
          + " | ".join(f"{r:g}" for r in sweep["rates"]) + " |")
    for config in sweep["configs"]:
        print(f"| {config} | " + " | ".join(f"{losses[config, r]:.4f}" for r in sweep["rates"]) + " |")
    print(f"picked lr {best:g}: the lowest mean final validation loss over {len(sweep['configs'])} "
          "configuration(s) "
          f"(the setting's lr: {SETTINGS[cfg['setting']]['lr']:g})")
    write_json({"setting": cfg["setting"], "steps": steps, "seed": cfg["seed"], "picked": best,
                "losses": [{"config": c, "lr": r, "val_loss": v} for (c, r), v in losses.items()]},
               os.path.join(out, cfg["corpus"], "lr_sweep.json"))
    return best
