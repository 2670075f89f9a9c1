"""A run's life beyond one pass of train.py: its checkpoint (written atomically with a checksum,
verified when read), a run continued from it (train.py's resume, study.py's check of a finished run:
only the settings that do not change what is computed may differ) and a setting's learning-rate
sweep (depth-perception appendix §4 "Learning rates"), as `python train.py --setting python
--lr_sweep=1` runs it: every swept configuration at every rate, each a train.py run of its own.
"""
import hashlib
import json
import math
import os
import pickle
import sys
import zipfile
from dataclasses import fields

import numpy as np
import torch

from model import GPTConfig
from treerope.files import read_json, replacing, write_json
from treerope.prepared import identity_differs
from treerope.settings import FLAGS, SETTINGS, Values


# --------------------------------------------------------------------------- checkpoints ----
def _digest(obj, h):
    """Feed every tensor's bytes and every other value's repr, in order, to the hash h."""
    if torch.is_tensor(obj):
        h.update(f"{obj.dtype}{tuple(obj.shape)}".encode())
        h.update(obj.detach().reshape(-1).contiguous().view(torch.uint8).cpu().numpy().tobytes())
    elif isinstance(obj, dict):
        for k, v in obj.items():
            h.update(repr(k).encode())
            _digest(v, h)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _digest(v, h)
    else:
        h.update(repr(obj).encode())


def checksum(state):
    """SHA-256 of a checkpoint's contents (weights, optimizer, step, log, settings)."""
    h = hashlib.sha256()
    _digest({k: v for k, v in state.items() if k != "checksum"}, h)
    return h.hexdigest()


def save_checkpoint(state, path):
    """ckpt.pt, replaced atomically, carrying the checksum load_checkpoint verifies."""
    with replacing(path) as tmp:
        try:
            torch.save({**state, "checksum": checksum(state)}, tmp)
        except RuntimeError:                     # torch reports a failed write (a full disk) as this
            raise OSError("the write failed: is the disk full, or a file size limit set?") from None


def no_checkpoint(run_dir):
    """Why the run folder `run_dir` holds no ckpt.pt, said so that the advice fits: a finished run trained
    with --checkpoint=0 (a benchmark's) kept no weights, and its train.py command answers "done"."""
    if all(os.path.exists(os.path.join(run_dir, f)) for f in ("final.json", "config.json")) and \
            read_config(run_dir, "train it again with --resume=0")["run"].get("checkpoint") is False:
        return (f"{run_dir} was trained with --checkpoint=0 and kept no weights: train it again with "
                "--resume=0 (and without --checkpoint=0)")
    return f"no checkpoint at {os.path.join(run_dir, 'ckpt.pt')}; train it first (python train.py ...)"


def load_checkpoint(path, device):
    """A checkpoint, verified against its checksum: a damaged file is one line, never weights."""
    fix = "it is damaged: train the run again (train.py ... --resume=0), or restore the file"
    if not os.path.exists(path):
        sys.exit(f"error: {no_checkpoint(os.path.dirname(path))}")
    try:
        ck = torch.load(path, map_location=device, weights_only=False)
    except (RuntimeError, EOFError, OSError, ValueError, KeyError, pickle.UnpicklingError,
            zipfile.BadZipFile) as e:
        sys.exit(f"error: cannot load {path} ({type(e).__name__}); {fix}")
    if not isinstance(ck, dict) or not {"model", "run", "config"} <= set(ck):
        sys.exit(f"error: {path} is not a train.py checkpoint; {fix}")
    if "checksum" in ck and checksum(ck) != ck["checksum"]:   # none: written before checksums were kept
        sys.exit(f"error: {path} does not match its checksum; {fix}")
    return ck


# ------------------------------------------------------------------------ resuming ----
# Every value a run has, with its default: settings.Values' flags, then the model's (model.GPTConfig's
# fields, a fork's new ones too) but for those the data and --config give
MODEL = {f.name: f.default for f in fields(GPTConfig) if f.name not in ("vocab_size", "configuration",
                                                                       "corpus")}
DEFAULTS = {**{k: f.default for k, f in FLAGS.items()}, **MODEL}
# Values a run may change when it resumes: they do not change what is computed. Precision (and the
# fused rotation, held to the readable one) is a property of the machine, so a run resumed elsewhere takes
# that machine's (each milestone records it). A setting is the values it lists, compared one by one, not
# its name (a reading of the one home). What the command does (--check, --budget) is no run's value.
RESUMABLE = ("resume", "device", "compile", "bf16", "kernel", "precision", "data", "out", "mb_tokens",
             "checkpoint", "setting", "check", "budget")


def trained_otherwise(run, model, cfg, mcfg, there="there", now="now"):
    """What a run recorded (its `run` values and `model` config) differs in from cfg and mcfg (a
    GPTConfig or its dict), beyond what a resume may change (RESUMABLE): one 'name: there, now' string
    each. The one comparison of a run's identity: a resume, a study's finished run, and evaluate.py
    and sample.py (a checkpoint against its folder's config.json) all use it."""
    # a key the record lacks is newer than it, and its default keeps the old behaviour: compare
    # with that default (an hrope run from before --pack must not go on packed); the model's, below
    cfg = cfg.as_dict() if isinstance(cfg, Values) else cfg
    differ = [f"{k}: {run.get(k, DEFAULTS[k])} {there}, {cfg.get(k, DEFAULTS[k])} {now}" for k in DEFAULTS
              if k not in (*RESUMABLE, *MODEL) and run.get(k, DEFAULTS[k]) != cfg.get(k, DEFAULTS[k])]
    differ += [f"model.{k}: {model.get(k, v)} {there}, {v} {now}"
               for k, v in (mcfg if isinstance(mcfg, dict) else vars(mcfg)).items() if model.get(k, v) != v]
    if run.get("tokenizer", cfg.get("tokenizer")) != cfg.get("tokenizer"):
        differ.append("the tokeniser (data prepared again)")
    return differ + [f"data {d}" for d in identity_differs(run.get("data_identity"), cfg.get("data_identity"))
                     if not d.startswith("tokenizer")]


def checked_checkpoint(run_dir, device):
    """A run's checkpoint and config.json (read_config), refused in one line where the folder or the
    checkpoint is not the run its config.json describes (`folder_is_run`; another configuration, seed,
    model shape, values or data)."""
    ck = load_checkpoint(os.path.join(run_dir, "ckpt.pt"), device)
    c = read_config(run_dir, "train the run again (train.py ... --resume=0)", whole=True)
    folder_is_run(run_dir, c["run"])
    differ = trained_otherwise(ck["run"], ck["config"], c["run"], c["model"], "in ckpt.pt", "in config.json")
    if differ:   # a copied checkpoint would be scored (and tabulated) as this run
        sys.exit(f"error: {run_dir}/ckpt.pt is not the run its config.json describes ({', '.join(differ)}); "
                 "train the run again (train.py ... --resume=0), or restore its own checkpoint")
    return ck, c


def folder_is_run(run_dir, run):
    """Exit in one line where a run's folder, <name or config>/seed<k>, is not the run its config.json
    records (a run folder copied or renamed would be scored, sampled or tabled under the folder's name)."""
    says = os.path.join(*os.path.normpath(os.path.abspath(run_dir)).split(os.sep)[-2:])
    is_ = os.path.join(run.get("name") or run["config"], f"seed{run['seed']}")
    if says != is_:
        sys.exit(f"error: the folder {run_dir} says {says}, the run is {is_} ({run['config']} seed "
                 f"{run['seed']}, its config.json): move it back to its own folder, or remove it")


# config.json's types: train.py's (an int flag holds an int; a float one an int or a float), the model's
TYPES = {**{f.name: f.type for f in fields(Values) if f.name != "model"},
         **{k: type(v) for k, v in MODEL.items()}}
# what every reader of a run takes from it (analyze.py's setting); a reader that builds the model, all of it
NEEDED = {"run": ("corpus", "config", "seed", "steps"), "model": ("n_layer", "n_embd", "n_head", "max_len")}
WHOLE = ("data", "data_identity")   # and every model field: a reader that builds the model, checks its data


def read_config(run_dir, fix, whole=False):
    """A run's config.json, checked: a missing key or a value of the wrong type is one line naming
    the key (a hand-edited file), never a KeyError or TypeError later. `whole`: every model field
    and the data folder present too (a reader that builds the model)."""
    path = os.path.join(run_dir, "config.json")
    c = read_json(path, fix)
    for part in ("run", "model"):
        if not isinstance(c, dict) or not isinstance(c.get(part), dict):
            sys.exit(f"error: {path} is damaged (it holds no '{part}' object); {fix}")
    if "rotary" in c["model"]:   # written before GPTConfig.rotary was named configuration
        c["model"]["configuration"] = c["model"].pop("rotary")
    fields = {k: f.type for k, f in GPTConfig.__dataclass_fields__.items()}
    for where, types in (("run", TYPES), ("model", fields)):
        needed = (*NEEDED[where], *({"run": WHOLE, "model": fields}[where] if whole else ()))
        typed(path, c[where], types, needed, fix, f"{where}.")
    return c


def typed(path, obj, types, needed, fix, where=""):
    """Exit in one line naming the key (`where` its place in the file) where obj lacks a `needed` key,
    or holds a value not of its type in `types` (an int for a float is one; None is an unset value,
    but not for a needed key)."""
    for k in needed:
        if k not in obj:
            sys.exit(f"error: {path} is damaged ({where}{k} is missing); {fix}")
    for k, v in obj.items():
        want = types.get(k)
        if want is None or v is None and k not in needed:   # a key we do not read; an unset value
            continue
        number = want is float and type(v) is int       # 1 for 1.0
        if not (number or isinstance(v, want) and (want is bool or not isinstance(v, bool))):
            sys.exit(f"error: {path} is damaged ({where}{k} is {v!r}, not {want.__name__}); {fix}")


# final.json's types (training.finish), a milestone's (a line of log.jsonl: training.milestone), and an
# evaluation's (evaluate.py's eval_<split>.json)
MILESTONE = {"step": int, "val_loss": float, "train_loss": float, "bf16": bool, "compile": bool}
FINAL = {"step": int, "val_loss": float, "test_loss": float, "val_records": int, "test_records": int,
         "elapsed": float, "report": str, "reported": dict, "diverged_at": int, "stopped_early": bool}
EVAL = {"split": str, "records": int, "checkpoint_step": int, "unfinished": bool, "record_ids": str,
        "kinds": dict, "interventions": dict, "probe": dict, "demo": dict}
SCORE = {"nll": float, "tokens": int}   # one of its scores (evaluate.by_kind)


def read_final(run_dir, fix):
    """A run's final.json, checked as read_config checks config.json: a loss missing or not a number is
    one line naming the key; a non-finite one is kept, with a note: the tables leave it out."""
    path = os.path.join(run_dir, "final.json")
    f = read_json(path, fix)
    if not isinstance(f, dict):
        sys.exit(f"error: {path} is damaged (not an object); {fix}")
    typed(path, f, FINAL, ("step", "val_loss", "test_loss"), fix)
    for k in ("val_loss", "test_loss"):
        if not math.isfinite(f[k]):
            print(f"note: {path}: {k} is {f[k]}, not a finite loss: left out of the tables")
    return f


def read_log(run_dir, fix):
    """A run's log.jsonl, checked line by line as final.json is: a line not JSON, or one without its step
    and validation loss or with a value of another type (MILESTONE), is one line naming the file, line
    and key."""
    path = os.path.join(run_dir, "log.jsonl")
    try:
        with open(path) as f:
            lines = f.readlines()
    except (OSError, ValueError) as e:           # missing, unreadable, not UTF-8
        sys.exit(f"error: cannot read {path} ({getattr(e, 'strerror', None) or e}); {fix}")
    log = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            log.append(json.loads(line))
        except ValueError:
            sys.exit(f"error: {path} line {i} is not JSON (a damaged log); {fix}")
        typed(path, log[-1] if isinstance(log[-1], dict) else {}, MILESTONE, ("step", "val_loss"), fix,
              f"line {i}: ")
    return log


def read_eval(path, fix):
    """An evaluate.py result (eval_<split>.json), checked as final.json is: every score (evaluate.by_kind's:
    `all` and each kind, as it is and under each intervention, a kind the scores as it is hold) an object
    with its nll and tokens; a missing key or a value of another type is one line naming it."""
    e = read_json(path, fix)
    if not isinstance(e, dict):
        sys.exit(f"error: {path} is damaged (not an object); {fix}")
    typed(path, e, EVAL, ("kinds", "interventions"), fix)
    for where, kinds in scores(e).items():
        if not isinstance(kinds, dict):
            sys.exit(f"error: {path} is damaged ({where} is {kinds!r}, not dict); {fix}")
        kinds = {"all": None, **kinds}   # a key the tables read of every score
        for k, v in kinds.items():
            if where != "kinds" and k not in e["kinds"]:
                sys.exit(f"error: {path} is damaged ({where}.{k} has no kinds.{k} to compare with); {fix}")
            typed(path, v if isinstance(v, dict) else {}, SCORE, SCORE, fix, f"{where}.{k}.")
    return e


def scores(evaluation):
    """{where: {kind: score}}: an evaluation's scores as it is ("kinds") and under each intervention."""
    return {"kinds": evaluation["kinds"], **{f"interventions.{t}": v
                                             for t, v in evaluation["interventions"].items()}}


def non_finite(evaluation):
    """The first score of an evaluation whose nll is not finite ("interventions.shuffle.all"), or None."""
    return next((f"{where}.{k}" for where, kinds in scores(evaluation).items() for k, v in kinds.items()
                 if not math.isfinite(v["nll"])), None)


def read_attention(path, fix):
    """An evaluate.py attention_<split>.json, checked: each share an object with its mean over heads (a
    number; a list with its column offsets, Fig. 6's histograms); its (layer, head) shares, where it has
    them, a list."""
    a = read_json(path, fix)
    if not isinstance(a, dict):
        sys.exit(f"error: {path} is damaged (not an object); {fix}")
    for k, v in a.items():
        offsets = isinstance(v, dict) and "offsets" in v
        types = {"offsets": list, "mean_over_heads": list} if offsets else \
            {"mean_over_heads": float, "per_layer_head": list}
        typed(path, v if isinstance(v, dict) else {}, types, tuple(types)[:1 + offsets], fix, f"{k}.")
    return a


def resume(cfg, mcfg, model, opt, out_dir):
    """The step and log to continue from: the run's checkpoint loaded into model and opt, refused
    when it was trained with other values (RESUMABLE lists those a resume may change), or its log.jsonl
    (written before every checkpoint) is gone or damaged: its final.json would be written without one."""
    ck = load_checkpoint(os.path.join(out_dir, "ckpt.pt"), cfg.device)
    read_log(out_dir, "pass --resume=0 to start it over, or restore the file")
    differ = trained_otherwise(ck["run"], ck["config"], cfg, mcfg)
    if differ:   # a mixed schedule or another model would be filed under this run's name
        sys.exit(f"error: {out_dir} was trained with other values ({', '.join(differ)}); "
                 "pass --resume=0 to start it over, or choose another --out")
    if drew(cfg) and ck["run"].get("draws") != cfg.draws:
        sys.exit(f"error: {out_dir} was begun with its random draws (dropout, depth dropout, rand_p1's "
                 "labels) made as before they were each row's own: the rest would be drawn otherwise; pass "
                 "--resume=0 to train it again")
    model.load_state_dict(ck["model"])
    opt.load_state_dict(ck["opt"])
    return ck["step"], ck["log"]


def drew(cfg):
    """Whether a run draws at random as it trains: dropout, depth dropout, or rand_p1's labels."""
    return cfg.model.dropout > 0 or cfg.depth_dropout > 0 or cfg.config == "rand_axial"


# ---------------------------------------------------------------------- lr sweeps ----
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
    <out>/lr_sweep; a finished run is read back where train.py leaves it as it is (trained as asked now:
    training.finished_alike; refused otherwise), a diverged one (non-finite loss) counts as infinite.
    Prints the final validation losses and the rate picked; writes lr_sweep.json; returns the rate.
    `main` is train.py's: each run is one of it."""
    sweep = SETTINGS[cfg.setting]["sweep"]
    steps = cfg.steps if "steps" in cfg.given else sweep["steps"]
    out = os.path.join(cfg.out, "lr_sweep")
    losses = {}
    for config in sweep["configs"]:
        for lr in sweep["rates"]:
            run = [f"--config={config}", f"--lr={lr}", f"--steps={steps}", f"--name={config}_lr{lr:g}",
                   f"--out={out}"]
            run_dir = os.path.join(out, cfg.corpus, f"{config}_lr{lr:g}", f"seed{cfg.seed}")
            try:   # a finished run: train.py's check that it was trained as asked now, or its refusal
                main([*argv, "--lr_sweep=0", *run])
            except SystemExit as e:
                if e.code != 2:                 # 2: stopped on a non-finite loss
                    raise
            losses[config, lr] = math.inf
            if os.path.exists(os.path.join(run_dir, "final.json")):
                losses[config, lr] = read_final(run_dir, "pass --resume=0 to train it again")["val_loss"]
    best = pick_lr(losses)
    print(f"\nlr sweep, setting {cfg.setting}: {len(sweep['rates'])} rates x {steps} steps, "
          f"seed {cfg.seed}; final validation loss (inf: diverged)\n| config | "
          + " | ".join(f"{r:g}" for r in sweep["rates"]) + " |")
    for config in sweep["configs"]:
        print(f"| {config} | " + " | ".join(f"{losses[config, r]:.4f}" for r in sweep["rates"]) + " |")
    print(f"picked lr {best:g}: the lowest mean final validation loss over {len(sweep['configs'])} "
          "configuration(s) "
          f"(the setting's lr: {SETTINGS[cfg.setting]['lr']:g})")
    write_json({"setting": cfg.setting, "steps": steps, "seed": cfg.seed, "picked": best,
                "losses": [{"config": c, "lr": r, "val_loss": v} for (c, r), v in losses.items()]},
               os.path.join(out, cfg.corpus, "lr_sweep.json"))
    return best
