"""A run continued from its checkpoint: train.py's resume, and study.py's check of a finished run.
What a run recorded is compared with what it is asked now; only the settings that do not change
what is computed may differ. train.py imports it only where a run's checkpoint exists.
"""
import os
import sys

from data import identity_differs, load_checkpoint, read_json
from model import GPTConfig
from settings import DEFAULTS, RECIPES, SCALES

# Settings a run may change when it resumes: they do not change what is computed. Precision is a
# property of the machine, so a run resumed elsewhere takes that machine's (each milestone records it).
RESUMABLE = ("resume", "device", "compile", "bf16", "precision", "data", "out", "mb_tokens")


def trained_otherwise(run, model, cfg, mcfg, there="there", now="now"):
    """What a run recorded (its `run` values and `model` config) differs in from cfg and mcfg (a
    GPTConfig or its dict), beyond what a resume may change (RESUMABLE): one 'name: there, now' string
    each. The one comparison of a run's identity: a resume, a study's finished run, and evaluate.py
    and sample.py (a checkpoint against its folder's config.json) all use it."""
    # a key the record lacks is newer than it, and its default keeps the old behaviour: compare
    # with that default (an hrope run from before --pack must not go on packed)
    differ = [f"{k}: {run.get(k, DEFAULTS[k])} {there}, {cfg.get(k, DEFAULTS[k])} {now}" for k in DEFAULTS
              if k not in RESUMABLE and run.get(k, DEFAULTS[k]) != cfg.get(k, DEFAULTS[k])]
    differ += [f"model.{k}: {model.get(k, v)} {there}, {v} {now}"
               for k, v in (mcfg if isinstance(mcfg, dict) else vars(mcfg)).items() if model.get(k, v) != v]
    if run.get("tokenizer", cfg.get("tokenizer")) != cfg.get("tokenizer"):
        differ.append("the tokeniser (data prepared again)")
    return differ + [f"data {d}" for d in identity_differs(run.get("data_identity"), cfg.get("data_identity"))
                     if not d.startswith("tokenizer")]


def checked_checkpoint(run_dir, device):
    """A run's checkpoint and config.json (read_config), refused in one line where the checkpoint is
    not the run the folder describes (another configuration, seed, model shape, values or data)."""
    ck = load_checkpoint(os.path.join(run_dir, "ckpt.pt"), device)
    c = read_config(run_dir, "train the run again (train.py ... --resume=0)", whole=True)
    differ = trained_otherwise(ck["run"], ck["config"], c["run"], c["model"], "in ckpt.pt", "in config.json")
    if differ:   # a copied checkpoint would be scored (and tabulated) as this run
        sys.exit(f"error: {run_dir}/ckpt.pt is not the run its config.json describes ({', '.join(differ)}); "
                 "train the run again (train.py ... --resume=0), or restore its own checkpoint")
    return ck, c


# config.json's types: train.py's (an int flag holds an int; a float one an int or a float), the model's
TYPES = {k: type(v) for k, v in {**DEFAULTS, **RECIPES["tree"], **SCALES["cpu"], "passes": 1.0,
                                 "config": "", "corpus": "", "name": "", "preset": "", "recipe": "",
                                 "data": "", "device": "", "setting": "", "test_docs": 1,
                                 "compile": True, "bf16": True}.items()}
# what every reader of a run takes from it (analyze.py's setting); a reader that builds the model, all of it
NEEDED = {"run": ("corpus", "config", "seed", "steps"), "model": ("n_layer", "n_embd", "n_head", "max_len")}


def read_config(run_dir, fix, whole=False):
    """A run's config.json, checked: a missing key or a value of the wrong type is one line naming
    the key (a hand-edited file), never a KeyError or TypeError later. `whole`: every model field
    and the data folder present too (a reader that builds the model)."""
    path = os.path.join(run_dir, "config.json")
    c = read_json(path, fix)
    def bad(what):
        sys.exit(f"error: {path} is damaged ({what}); {fix}")
    for part in ("run", "model"):
        if not isinstance(c, dict) or not isinstance(c.get(part), dict):
            bad(f"it holds no '{part}' object")
    fields = {k: f.type for k, f in GPTConfig.__dataclass_fields__.items()}
    for where, types in (("run", TYPES), ("model", fields)):
        needed = (*NEEDED[where], *({"run": ("data",), "model": fields}[where] if whole else ()))
        for k in needed:
            if k not in c[where]:
                bad(f"{where}.{k} is missing")
        for k, v in c[where].items():
            want = types.get(k)
            if want is None or v is None and k not in needed:   # a key we do not read; an unset value
                continue
            number = want is float and type(v) is int       # 1 for 1.0
            if not (number or isinstance(v, want) and (want is bool or not isinstance(v, bool))):
                bad(f"{where}.{k} is {v!r}, not {want.__name__}")
    return c


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
