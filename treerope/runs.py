"""A run continued from its checkpoint: train.py's resume, and study.py's check of a finished run.
What a run recorded is compared with what it is asked now; only the settings that do not change
what is computed may differ. train.py imports it only where a run's checkpoint exists.
"""
import os
import sys

from data import identity_differs, load_checkpoint
from settings import DEFAULTS

# Settings a run may change when it resumes: they do not change what is computed. Precision is a
# property of the machine, so a run resumed elsewhere takes that machine's (each milestone records it).
RESUMABLE = ("resume", "device", "compile", "bf16", "precision", "data", "out", "mb_tokens")


def trained_otherwise(run, model, cfg, mcfg):
    """What a run recorded (its `run` values and `model` config) differs in from cfg and mcfg, beyond
    what a resume may change (RESUMABLE): one 'name: there, now' string each."""
    # a key the record lacks is newer than it, and its default keeps the old behaviour: compare
    # with that default (an hrope run from before --pack must not go on packed)
    differ = [f"{k}: {run.get(k, DEFAULTS[k])} there, {cfg[k]} now" for k in DEFAULTS
              if k not in RESUMABLE and run.get(k, DEFAULTS[k]) != cfg[k]]
    differ += [f"model.{k}: {model.get(k, v)} there, {v} now" for k, v in vars(mcfg).items()
               if model.get(k, v) != v]
    if run.get("tokenizer", cfg["tokenizer"]) != cfg["tokenizer"]:
        differ.append("the tokeniser (data prepared again)")
    return differ + [f"data {d}" for d in identity_differs(run.get("data_identity"), cfg["data_identity"])
                     if not d.startswith("tokenizer")]


def resume(cfg, mcfg, model, opt, out_dir):
    """The step and log to continue from: the run's checkpoint loaded into model and opt, refused
    when it was trained with other settings (RESUMABLE lists those a resume may change)."""
    ck = load_checkpoint(os.path.join(out_dir, "ckpt.pt"), cfg["device"])
    differ = trained_otherwise(ck["run"], ck["config"], cfg, mcfg)
    if differ:   # a mixed schedule or another model would be filed under this run's name
        sys.exit(f"error: {out_dir} was trained with other settings ({', '.join(differ)}); "
                 "pass --resume=0 to start it over, or choose another --out")
    model.load_state_dict(ck["model"])
    opt.load_state_dict(ck["opt"])
    return ck["step"], ck["log"]
