"""What train.py's loop stands on, for one run or M at once: the runs' values (`parse`: the defaults <-
one setting <- the flags; treerope/settings.py), a run's declared shape (`Run`), their opening (`opened`:
values checked, data and steps planned, memory estimated, models built, folders owned, checkpoints
restored or refused, config.json written: one call before the loop), their schedule (a step's rows and
learning rate), a milestone
(the log entry, the checkpoint, the early stop), a divergence, and their close (`closed`: final.json).
How the runs go through model.GPT at once (a micro-batch of every run, the evaluation) is ensemble.py's.
"""
import argparse
import contextlib
import dataclasses
import json
import math
import os
import shutil
import sys
import textwrap
import time
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.distributed as dist

import rotary
import trees
from model import GPT, GPTConfig
from treerope import machine
from treerope.batches import Split, context_note, coordinates, fixed_rows, step_blocks
from treerope.ensemble import evaluate
from treerope.files import owned, replacing, writable, write_json
from treerope.prepared import SPLITS, corpus_stats, identity
from treerope.runs import (
    DEFAULTS,
    MODEL,
    folder_is_run,
    read_config,
    read_final,
    read_log,
    resume,
    save_checkpoint,
    trained_otherwise,
)
from treerope.settings import CORPORA, FLAGS, MODEL_HELP, SEED_LIMIT, SETTINGS, Parser, Values, refusal

LAYERS = textwrap.fill("A run's values: the defaults above, then --setting's entry (treerope/settings.py "
                       "SETTINGS: a paper's run each, one flat entry listing every value it sets), then the "
                       "flags given. Settings: " + ", ".join(SETTINGS) + ".", 100)
MANY = ("config", "seed")   # several given: one run each (seeds outer), trained at once as one model


# ------------------------------------------------------------------------------ values ----
def parse(argv, description=None):
    """[(run values, where each value came from)] for a command line, one per (configuration, seed): the
    defaults <- one setting <- the flags given. `--help` prints `description`, then each value's flag,
    meaning and default."""
    ap = Parser(description=description, epilog=LAYERS, formatter_class=argparse.RawDescriptionHelpFormatter)
    model = ap.add_argument_group("the model", "model.GPTConfig's fields (a field a fork adds is a flag too)")
    for k, v in DEFAULTS.items():
        typ = type(v) if k in MODEL else FLAGS[k].type
        meaning = MODEL_HELP.get(k, "") if k in MODEL else FLAGS[k].metadata["help"]
        shown = "none" if v is None else int(v) if isinstance(v, bool) else v
        many = " (several: one run each, trained at once)" if k in MANY else ""
        shape = {"nargs": "+"} if k in MANY else {"nargs": "?", "const": True} if typ is bool else {}
        (model if k in MODEL else ap).add_argument(   # a yes/no flag alone is yes: --check, --resume
            f"--{k}", default=None, type=flag if typ is bool else typ, metavar=typ.__name__.upper(), **shape,
            help=f"{meaning}{many} (default: {shown})".strip().replace("%", "%%"))
    args = ap.parse_args(argv)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device.split(":")[0] not in ("cpu", "cuda", "mps"):
        sys.exit(f"error: unknown --device {device!r}; known: cpu, cuda, mps")
    setting = {}
    if args.setting:   # a paper's setting (settings.SETTINGS)
        setting = SETTINGS.get(args.setting)
        if not setting:
            sys.exit(f"error: unknown --setting {args.setting!r}; known: {', '.join(SETTINGS)}")
        if args.corpus not in (None, setting["corpus"]):
            sys.exit(f"error: --setting {args.setting} trains the {setting['corpus']} corpus, "
                     f"not {args.corpus}")
    configs, seeds = args.config or [DEFAULTS["config"]], args.seed or [DEFAULTS["seed"]]
    if len(set(configs)) < len(configs) or len(set(seeds)) < len(seeds):
        sys.exit("error: two runs would share a folder: a configuration or seed given twice")
    if len(configs) * len(seeds) > 1:
        for k, why in (("name", "a named variant is one configuration"), ("lr_sweep", "it trains one sweep")):
            if getattr(args, k):
                sys.exit(f"error: --{k} with several configurations or seeds: {why}")
    out = []
    for seed in seeds:
        for config in configs:
            one = argparse.Namespace(**{**vars(args), "config": config if args.config else None,
                                        "seed": seed if args.seed else None})
            cfg, origin = resolve(one, device)
            check(cfg, setting)
            out.append((cfg, origin))
    return out


def flag(text):
    """A yes/no flag's value: 1, true or yes is True; 0, false or no False (any case); else refused."""
    if text.lower() not in ("1", "true", "yes", "0", "false", "no"):
        raise argparse.ArgumentTypeError(f"{text!r} is not 1 or 0 (true/false, yes/no)")
    return text.lower() in ("1", "true", "yes")


def resolve(args, device):
    """The run's values, layer over layer (later wins), and the layer each came from: the defaults,
    the setting (and its configuration's exceptions), the flags given."""
    explicit = {k: v for k, v in vars(args).items() if v is not None}
    config = args.config or DEFAULTS["config"]
    layers = [("defaults", DEFAULTS), ("given", explicit)]
    if args.setting:   # its values (the data's alone are prepare.py's), its configuration's exceptions
        s = SETTINGS[args.setting]
        layers[1:1] = [(f"setting {args.setting}", {k: v for k, v in s.items() if k in DEFAULTS}),
                       (f"setting {args.setting}, {config}", s["per_config"].get(config, {}))]
    flat, origin = {}, {}
    for name, values in layers:
        flat.update(values)
        origin.update(dict.fromkeys(values, name))
    if "steps" in explicit and "passes" in explicit:
        sys.exit("error: give the length as --steps or as --passes, not both")
    if "steps" in explicit or "passes" in explicit:   # one length: the one given (the other cleared by it)
        flat["passes" if "steps" in explicit else "steps"] = None
        origin["passes" if "steps" in explicit else "steps"] = "given"
    on, why = machine.switches(device)
    given = [f"--{k}={int(flat[k])}" for k in machine.SWITCHES if flat[k] is not None]
    cfg = Values(**{k: v for k, v in flat.items() if k in FLAGS}, model=GPTConfig(
        **{k: flat[k] for k in MODEL}), given=sorted(explicit), precision=why + (
        f"; {' '.join(given)} given" if given else ""))
    cfg.device = device
    for k in machine.SWITCHES:
        if getattr(cfg, k) is None:
            setattr(cfg, k, on[k])
    return cfg, origin


def check(cfg, setting):
    """Exit with one line on a value no run can take."""
    if cfg.corpus not in CORPORA:   # before the data folder: `prepare.py nope` would be no advice
        sys.exit(f"error: unknown --corpus {cfg.corpus!r}; known: {', '.join(CORPORA)}")
    if not rotary.known(cfg.config):
        sys.exit(f"error: unknown --config {cfg.config!r}; `python rotary.py` lists the configurations")
    for k in ("steps", "docs_per_step", "mb_tokens", "val_docs", "test_docs", "milestones", "n_layer",
              "n_embd", "n_head", "max_len"):
        if cfg[k] is not None and cfg[k] < 1:
            sys.exit(f"error: --{k} must be at least 1")
    ranges = [("lr", 0 < cfg.lr < math.inf, "positive and finite"),   # each `not ok` below: nan fails too
              ("weight_decay", 0 <= cfg.weight_decay < math.inf, "at least 0 and finite"),
              ("min_lr", 0 <= cfg.min_lr <= 1, "in [0, 1]"),
              ("dropout", 0 <= cfg.model.dropout < 1, "in [0, 1)"),
              ("depth_dropout", 0 <= cfg.depth_dropout <= 1, "in [0, 1]"),
              ("seed", 0 <= cfg.seed < SEED_LIMIT, f"in [0, {SEED_LIMIT:,})"),
              ("steps", cfg.steps is None or cfg.steps < SEED_LIMIT, f"below {SEED_LIMIT:,}"),
              ("patience", cfg.patience >= 0, "at least 0 (0: never)"),
              ("passes", cfg.passes is None or 0 < cfg.passes < math.inf, "positive and finite"),
              ("budget", cfg.budget is None or 0 < cfg.budget < math.inf, "seconds, positive and finite")]
    for k, ok, want in ranges:
        if not ok:
            sys.exit(f"error: --{k} must be {want}, not {cfg[k]}")
    name = cfg.name
    if name is not None and (name.strip() in ("", ".") or "/" in name or os.sep in name or ".." in name
                             or name != cfg.config and rotary.known(name)):   # tables would read it as one
        sys.exit(f"error: --name {name!r} must be a plain folder name (no '/', no '..'), and not another "
                 "configuration's: the run is written to <out>/<corpus>/<name>/seed<k>")
    if cfg.report not in ("final", "best_milestone"):
        sys.exit(f"error: unknown --report {cfg.report!r}; known: final, best_milestone")
    if cfg.lr_sweep and "passes" in cfg.given:
        sys.exit("error: --lr_sweep runs the sweep's steps (--steps overrides them), not --passes")
    if cfg.lr_sweep and not setting.get("sweep"):
        sys.exit(f"error: --lr_sweep needs a --setting whose paper swept its lr; swept: "
                 f"{', '.join(k for k, v in SETTINGS.items() if v['sweep'])}")
    if cfg.kernel and not (cfg.device.startswith("cuda") or os.environ.get("TRITON_INTERPRET") == "1"):
        sys.exit("error: --kernel runs the fused Triton rotation on CUDA (on a CPU only in triton's "
                 "interpreter, TRITON_INTERPRET=1)")


def origins(values):
    """One line: the values that are not the defaults, grouped by where they came from; of several runs
    (parse's list), each value's distinct ones in order (config=seq_only,seq_depth seed=0,1)."""
    by = {}
    for k, src in values[0][1].items():
        if src != "defaults" and k in DEFAULTS:
            every = dict.fromkeys(str(cfg[k]) for cfg, _ in values)
            by.setdefault(src, []).append(f"{k}={','.join(every)}")
    return "values: " + ("; ".join(f"{src}: {' '.join(v)}" for src, v in by.items()) or "the defaults")


def setting_line(cfg, mcfg, per_step):
    """The line naming the setting a run trains, with the values it runs and the flags that changed them."""
    s = SETTINGS[cfg.setting]
    over = [f"--{k}" for k in cfg.given if k in s]
    length = f"{cfg.passes:.3g} passes = " if cfg.passes is not None else ""
    return (f"setting {cfg.setting}: {cfg.corpus}, {size(mcfg)}, lr {cfg.lr:g}, {length}"
            f"{cfg.steps:,} steps x {per_step}, reported at its "
            f"{'best milestone' if cfg.report == 'best_milestone' else 'final step'} ({s['source']})"
            + (f"; given: {' '.join(over)}" if over else ""))


def size(mcfg):
    return (f"{mcfg.n_layer} layers, d={mcfg.n_embd}, {mcfg.n_head} head{'s' * (mcfg.n_head > 1)}, "
            f"context {mcfg.max_len:,}")


# ----------------------------------------------------------------------------- the run ----
@dataclass(slots=True)   # slots: a field not declared here cannot be added by the way
class Run:
    """One configuration at one seed: what it trains on and for how long (`plan`), its model and
    optimiser (`setup`), and where it stands (`restore`, then each step and milestone)."""
    cfg: Values                    # its values (`parse`): config.json's "run"
    mcfg: GPTConfig                # its model's (cfg.model, the data's vocabulary in): config.json's "model"
    master: bool                   # the process that writes (rank 0)
    data_dir: str
    out_dir: str                   # <out>/<corpus>/<name or config>/seed<k>
    meta: dict                     # the prepared data's meta.json
    corpus: dict                   # the corpus statistics the rotary calibrates from
    train: Split
    val: Split
    test: Split
    val_ids: np.ndarray            # the fixed validation records of every milestone
    test_ids: np.ndarray
    steps: int
    milestones: set                # the steps after which it is validated (and checkpointed)
    blocks: object = None          # --pack: a step's blocks of records (batches.step_blocks)
    model: GPT = None              # `setup`
    opt: torch.optim.Optimizer = None
    autocast: object = None
    step: int = 0                  # steps done (`restore`: a checkpoint's)
    log: list = field(default_factory=list)    # the milestones' entries, log.jsonl
    loss: float = math.nan         # the latest step's training loss
    tokens_seen: int = 0           # predicted tokens trained on since `restore`
    flops: list = field(default_factory=lambda: [0.0, 0.0])   # model FLOPs, hardware FLOPs executed: since
    elapsed: float = 0.0           # training seconds since `restore` (validation, checkpoints left out)
    val_s: float = 0.0             # validation seconds since `restore`
    resumed_at: dict = field(default_factory=dict)   # the checkpoint's last log entry: its counts go on
    done: bool = False             # its steps done, stopped early, or diverged
    finished: bool = False         # its final.json written: nothing left to do or to rewrite
    failed: bool = False           # diverged with nothing to report: no final.json
    diverged_at: int = None        # diverged, reported at its best milestone: the step
    rows: list = field(default_factory=list)   # this step's rows (`step_rows`): records, or rows of them

    def predicted(self):
        """The tokens with a target in each record of this step's rows: a record's first has none."""
        return np.concatenate([self.train.len[np.atleast_1d(x)] for x in self.rows] or [[]]).astype(int) - 1


# ------------------------------------------------------------------------- the opening ----
# what every run trained at once must share: one model size (below) and one batch
AGREE = ("device", "bf16", "compile", "kernel", "docs_per_step", "mb_tokens", "val_docs", "test_docs", "pack",
         "data")


@contextlib.contextmanager
def opened(values, rank=0, world=1):
    """Every run opened, and checked before anything is written: its data and steps planned (`plan`), the
    runs refused in one line where they differ in model size or batch, the memory a step of them all needs
    estimated and refused where the device lacks it (`fits`), each model built and checked (`setup`), each
    checkpoint checked; then each folder owned (a lock, for the block), started over (--resume=0) or
    resumed (`restore`), and its config.json written. Yields every run, in order: a finished one trained as
    asked now is said "done" and left alone (`finished`; one trained otherwise is refused); with --check,
    none (nothing is written)."""
    planned = []
    for i, (cfg, origin) in enumerate(values):
        run = plan(cfg, origin, rank == 0, quiet=i > 0 or origin is None, values=values)   # None: --budget's
        if cfg.resume and os.path.exists(os.path.join(run.out_dir, "final.json")):
            finished_alike(run)
            if run.master:
                print(f"done: {run.out_dir} is finished (final.json); --resume=0 trains it again")
        planned.append(run)
    runs = [r for r in planned if not r.finished]
    if len(runs) > 1:
        alike(runs)
    if world > 1 and len(values) > 1:
        sys.exit("error: under torchrun train one configuration at one seed (data parallel over its steps)")
    if runs:
        fits(runs)
    for i, run in enumerate(runs):
        setup(run, quiet=i > 0)
    if values[0][0].check:   # sweep.sh's check: the finished runs and the models, nothing written
        print("".join(f"to train: {r.out_dir}\n" for r in runs if r.master), end="")
        yield []
        return
    for run in runs:         # every checkpoint checked before anything is written
        if run.cfg.resume:
            restore(run, world)
    with contextlib.ExitStack() as locks:
        for i, run in enumerate(runs):
            if run.master:   # a read-only or full --out is one line, not a traceback at step 1
                writable(run.out_dir, "choose another --out")
                locks.enter_context(owned(run.out_dir, "the run"))
            if not run.cfg.resume:   # --resume=0: its folder removed, under its lock
                restore(run, world)
            elif run.master and run.step:   # said once the folder is owned (a refused lock says only that)
                print(f"resuming {run.out_dir} from step {run.step}")
            if run.master:
                record_run(run, quiet=i > 0 or values[0][1] is None)
        yield planned


def alike(runs):
    """Runs trained at once share a model size and a batch (AGREE), and each has a folder of its own."""
    dirs = [r.out_dir for r in runs]
    if len(set(dirs)) < len(dirs):
        twice = next(d for d in dirs if dirs.count(d) > 1)
        sys.exit(f"error: two runs would share {twice}")
    first = {k: v for k, v in vars(runs[0].mcfg).items() if k not in ("configuration", "corpus")}
    for run in runs[1:]:
        size_ = {k: v for k, v in vars(run.mcfg).items() if k not in ("configuration", "corpus")}
        differ = [f"{k} {first[k]} vs {size_[k]}" for k in size_ if size_[k] != first[k]]
        differ += [f"{k} {runs[0].cfg[k]} vs {run.cfg[k]}" for k in AGREE if run.cfg[k] != runs[0].cfg[k]]
        if differ:
            sys.exit(f"error: runs trained at once are of one model size and batch; {run.cfg.config} "
                     f"differs from {runs[0].cfg.config}: {', '.join(differ)}")


def plan(cfg, origin, master, quiet=False, values=None):
    """A run: what it trains on, and how long: the data, the model's config, the fixed evaluation records
    and the steps (a length in passes becomes steps here). Its lines are said by the master, unless
    `quiet` (runs after the first, trained with it: one data set, one model size); `values`: every run's
    (cfg, origin), for the values line."""
    said = master and not quiet
    available = {"cpu": True, "cuda": torch.cuda.is_available(), "mps": torch.backends.mps.is_available()}
    if not available[cfg.device.split(":")[0]]:
        sys.exit(f"error: --device {cfg.device} is not available on this machine")
    if said:   # first line: what precision this machine gets, and why; then where the values came from
        print(f"precision: {'bf16 autocast' if cfg.bf16 else 'fp32'}, "
              f"{'compiled' if cfg.compile else 'eager'}{', the fused rotation' if cfg.kernel else ''} "
              f"({cfg.precision})")
        print(origins(values or [(cfg, origin)]))
    data_dir = os.path.join(cfg.data, cfg.corpus)
    meta, corpus = corpus_stats(data_dir)
    why = cfg.setting and refusal(cfg.setting, meta["settings"])
    if why:
        out = f" --out {cfg.data}" if cfg.data != DEFAULTS["data"] else ""
        sys.exit(f"error: {data_dir} cannot train setting {cfg.setting}: {why}; run `python prepare.py "
                 f"--setting {cfg.setting}{out}`, or pass --data to data prepared for it")
    if meta["settings"].get("format") != trees.FORMAT:   # an older stream or record rule
        sys.exit(f"error: {data_dir} is from an older prepare.py; rerun prepare.py {cfg.corpus}")
    cfg.data_identity = identity(data_dir, meta)    # evaluate.py, sample.py, a resume check it
    cfg.tokenizer = cfg.data_identity["tokenizer"]
    mcfg = cfg.model = dataclasses.replace(cfg.model, vocab_size=meta["tokenizer"]["vocab"],
                                           configuration=cfg.config, corpus=corpus)
    out_dir = os.path.join(cfg.out, cfg.corpus, cfg.name or cfg.config, f"seed{cfg.seed}")
    prepared = meta["settings"]["max_len"]
    if mcfg.n_embd % mcfg.n_head == 0 and mcfg.n_embd // mcfg.n_head % 2:   # turned in pairs
        sys.exit(f"error: n_embd {mcfg.n_embd} over n_head {mcfg.n_head} makes heads of odd width")
    if prepared < mcfg.max_len and said:   # the model could read longer records
        print(f"note: {data_dir} holds records of at most {prepared:,} tokens; the model's context is "
              f"{mcfg.max_len:,} (prepare.py {cfg.corpus} --max_len {mcfg.max_len})")
    train, val, test = load_splits(data_dir, mcfg)
    n = len(train)
    if not cfg.pack and cfg.docs_per_step > n:   # a step would train the split, not the batch asked
        sys.exit(f"error: --docs_per_step {cfg.docs_per_step:,} is more than the {n:,} records of "
                 f"{data_dir}'s train split; give at most {n:,}")
    note = context_note(np.diff(train.a["doc_start"]), mcfg.max_len, "training", "train", cfg.corpus)
    if note and said:
        print(note)
    val_ids = np.arange(min(cfg.val_docs, len(val)))             # the same fixed records
    test_ids = np.arange(len(test) if cfg.test_docs is None else min(cfg.test_docs, len(test)))
    per_pass, blocks = max(len(train) // cfg.docs_per_step, 1), None
    if cfg.pack:
        blocks, per_pass = step_blocks(train.len, mcfg.max_len, cfg.docs_per_step, cfg.seed)
    if cfg.passes is not None:   # a pass: "the number of steps it takes to show the model every training
        steps = cfg.passes * per_pass                          # record once"
        if not steps < SEED_LIMIT:
            sys.exit(f"error: --passes {cfg.passes:g} is {steps:.3g} steps of {per_pass:,} a pass; a run has "
                     f"fewer than {SEED_LIMIT:,}: give at most {(SEED_LIMIT - 1) / per_pass:.4g} passes")
        cfg.steps = max(1, round(steps))
    if cfg.setting and said:
        print(setting_line(cfg, mcfg, per_step(cfg, mcfg)))
    return Run(cfg, mcfg, master, data_dir, out_dir, meta, corpus, train, val, test, val_ids, test_ids,
               cfg.steps, milestone_steps(cfg.steps, cfg.milestones), blocks)


def milestone_steps(steps, n):
    """Appendix §4: validation "every 5% of a run's planned steps": n evenly spaced steps, the last
    the final one (fewer when the run has fewer steps)."""
    return {math.ceil(k * steps / n) for k in range(1, n + 1)}


def load_splits(data_dir, mcfg):
    splits = [Split(data_dir, s, mcfg.max_len, mcfg.vocab_size) for s in SPLITS]
    for name, split in zip(SPLITS, splits):
        if not len(split):   # an empty split would score 0.0: a result that looks valid but is not
            sys.exit(f"error: {data_dir} has no {name} records of 2+ tokens; prepare more documents "
                     "(documents are split 90/5/5 by name)")
    return splits


def per_step(cfg, mcfg):
    return (f"{cfg.docs_per_step} blocks of {mcfg.max_len:,} tokens (records packed)" if cfg.pack
            else f"{cfg.docs_per_step} records")


def memory(runs):
    """(bytes a step of `runs` needs (machine.step_bytes), bytes the device has or None)."""
    return machine.step_memory(runs[0].mcfg, runs[0].cfg, len(runs))


def fits(runs):
    """The memory a step of `runs` needs, said (several runs) and refused in one line, before any model is
    built or anything written, where it exceeds the device's (a context of 100,000 tokens, many runs)."""
    (need, have), dev = memory(runs), runs[0].cfg.device
    if len(runs) > 1:
        print(f"memory: about {need / 2 ** 30:,.1f} GiB a step of the {(have or 0) / 2 ** 30:,.1f} GiB on "
              f"{dev} (machine.step_bytes)")
    machine.refuse_over(need, have, runs[0].mcfg, runs[0].cfg, len(runs),
                        "train fewer seeds or configurations at once, or lower --n_layer, --n_embd, "
                        "--max_len or --mb_tokens" if len(runs) > 1 else
                        "lower --n_layer, --n_embd, --max_len or --mb_tokens")


def setup(run, quiet=False):
    """The run's model at its seed's initial weights, its optimizer and the autocast context (`quiet`:
    its note unsaid, as `plan`'s lines); with --kernel, the kernel checked against the readable rotation."""
    cfg = run.cfg
    probe = run.val.batch(run.val_ids[:1], cfg.device)         # a record: the coordinates the model reads
    run.model = build_model(cfg, run.mcfg, probe, run.corpus, run.data_dir)
    cuda = cfg.device.startswith("cuda")
    run.opt = torch.optim.AdamW(param_groups(run.model, cfg.weight_decay), lr=cfg.lr, betas=(0.9, 0.95),
                                fused=True)                             # one kernel for all parameters
    run.autocast = torch.autocast("cuda" if cuda else "cpu", dtype=torch.bfloat16, enabled=cfg.bf16)
    if cfg.compile and not cuda and not shutil.which(os.environ.get("CXX", "c++")):
        cfg.compile = False   # inductor writes C++ for the CPU: without a compiler, run eager
        if run.master and not quiet:
            print("note: no C++ compiler found, so --compile is off")
    return run


def build_model(cfg, mcfg, batch, corpus, data_dir):
    """The GPT at its seed's initial weights (identical in every configuration), checked against
    the data: `batch` must hold every coordinate the configuration reads; with --kernel, the kernel
    must give the readable rotation's angles and gradients on it (rotary.kernel_differs)."""
    torch.manual_seed(cfg.seed)
    model = gpt(cfg, mcfg).to(cfg.device)
    try:
        C = coordinates(batch, model.rotary.names, corpus, torch.Generator(device=cfg.device).manual_seed(0))
    except KeyError as e:
        sys.exit(f"error: --config {cfg.config} reads {e.args[0]!r}, which {data_dir} does not hold "
                 f"(another corpus, or a folder from an older prepare.py: rerun prepare.py {cfg.corpus})")
    if cfg.kernel:
        differ = rotary.kernel_differs(model.rotary, C, mcfg.n_head)
        if differ:
            sys.exit(f"error: --kernel: the fused rotation is not Rotary.angles' here ({differ}); train "
                     "without --kernel, or bring the kernel to the angle law")
        model.rotary.kernel = True
    return model


def gpt(cfg, mcfg):
    """model.GPT(mcfg), or one line where its configuration cannot be built (more planes than a head has)."""
    try:
        return GPT(mcfg)
    except (ValueError, KeyError) as e:
        sys.exit(f"error: --config {cfg.config}: {e.args[0]}")


def param_groups(model, weight_decay):
    """Decay weight matrices only; rotary rates/offsets and LayerNorm weights are not decayed."""
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (decay if p.dim() >= 2 and not n.startswith("rotary") else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def restore(run, world=1):
    """Where the run stands: fresh, or its checkpoint's step and log (--resume=0 starts it over); done
    already where its steps are, or it had stopped early."""
    cfg, out_dir = run.cfg, run.out_dir
    if not cfg.resume and run.master and os.path.exists(out_dir):   # explicit: start this run over
        shutil.rmtree(out_dir)
        print(f"--resume=0: removed {out_dir}")
    if world > 1:
        dist.barrier()
    if cfg.resume and os.path.exists(os.path.join(out_dir, "ckpt.pt")):
        run.step, run.log = resume(cfg, run.mcfg, run.model, run.opt, out_dir)
    run.resumed_at = run.log[-1] if run.log else {}   # tokens and times count the whole run, not this part
    run.done = run.step >= run.steps or (bool(run.log) and stalled([e["val_loss"] for e in run.log],
                                                                   cfg.patience))
    return run


def finished_alike(run):
    """A finished run (its final.json written) is left as it is ("done") only where it was trained as
    asked now and analyze.py will pair it with the runs trained now: the same values (runs.trained_otherwise)
    and the same precision over its whole life (bf16 and compile, which a resume may change but a pairing
    may not); refused in one line otherwise, as is a damaged config.json, final.json or log.jsonl."""
    fix = "pass --resume=0 to train it again, or choose another --out"
    done = read_config(run.out_dir, fix, whole=True)
    folder_is_run(run.out_dir, done["run"])
    differ = trained_otherwise(done["run"], done["model"], run.cfg, run.mcfg)
    if differ:
        sys.exit(f"error: {run.out_dir} finished with other values ({', '.join(differ)}); {fix}")
    read_final(run.out_dir, fix)                 # what analyze.py will read of it, checked now
    life = {(bool(done["run"].get("bf16")), bool(done["run"].get("compile")))}
    life |= {(bool(e.get("bf16")), bool(e.get("compile"))) for e in read_log(run.out_dir, fix)}
    now = (bool(run.cfg.bf16), bool(run.cfg.compile))
    if life != {now}:   # analyze.training: runs of another precision are not paired
        was = ", ".join(f"bf16={int(b)} compile={int(c)}" for b, c in sorted(life))
        sys.exit(f"error: {run.out_dir} finished at {was}, and this run would train at bf16={int(now[0])} "
                 f"compile={int(now[1])}: analyze.py would not pair it; {fix}, or pass its --bf16, --compile")
    run.done = run.finished = True


def record_run(run, quiet=False):
    """config.json: the settings, the model, and what made the run (provenance); then its first line
    (`quiet`: unsaid, as `plan`'s lines)."""
    cfg, mcfg, model = run.cfg, run.mcfg, run.model
    os.makedirs(run.out_dir, exist_ok=True)
    write_json({"run": cfg.as_dict(), "model": vars(mcfg),
                "data_meta_synthetic": run.meta.get("synthetic", False),
                "non_embedding_params": model.non_embedding_params(),
                "provenance": machine.provenance(cfg.device)},
               os.path.join(run.out_dir, "config.json"))
    if quiet:
        return
    where = cfg.device.split(":")[0].upper() + (f", setting {cfg.setting}" if cfg.setting else "")
    print(f"{cfg.corpus} / {cfg.config} / seed {cfg.seed} on {where}; {size(mcfg)}, "
          f"{model.non_embedding_params() / 1e6:.2f}M non-embedding params, {cfg.steps} steps x "
          f"{per_step(cfg, mcfg)}{' (SYNTHETIC data)' if run.meta.get('synthetic') else ''}")


# ---------------------------------------------------------------------------- schedule ----
def lr_at(step, steps, peak, floor=0.1):
    """Linear warmup over 2% of steps, then cosine to floor x peak at the final step."""
    warm = max(1, int(0.02 * steps))
    if step < warm:
        return peak * (step + 1) / warm
    frac = (step - warm) / max(1, steps - 1 - warm)
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0))))


# ------------------------------------------------------------ milestones and the close ----
def milestone(run, val_loss, lr):
    """The fixed validation records' loss logged after step `run.step` (trained at `lr`, its loss
    `run.loss`), and the checkpoint; the run is done when it stops early (or its steps are done)."""
    cfg, before = run.cfg, run.resumed_at   # resumed: the counts go on from the checkpoint's
    flops, executed = (before.get(k, 0.0) + f for k, f in zip(("flops", "flops_executed"), run.flops))
    # elapsed: training time alone (validation and checkpoint writes left out); val_elapsed beside it
    entry = {"step": run.step, "tokens": before.get("tokens", 0) + run.tokens_seen, "train_loss": run.loss,
             "val_loss": val_loss, "lr": lr, "elapsed": round(before.get("elapsed", 0.0) + run.elapsed, 2),
             "val_elapsed": round(before.get("val_elapsed", 0.0) + run.val_s, 2),
             "flops": flops, "flops_executed": executed, "time": round(time.time(), 2),   # the wall clock
             "bf16": cfg.bf16, "compile": cfg.compile}
    if cfg.device.startswith("cuda"):   # model FLOPs utilisation (nanoGPT's count) of every device in use
        world = int(os.environ.get("WORLD_SIZE", "1"))
        entry["mfu"], entry["hfu"] = (f / run.elapsed / (machine.PEAK_FLOPS * world) for f in run.flops)
    run.log.append(entry)
    if run.master:
        state = {"model": run.model.state_dict(), "opt": run.opt.state_dict(), "step": run.step,
                 "log": run.log, "config": vars(run.mcfg), "run": cfg.as_dict()}
        save(run.out_dir, run.log, state if cfg.checkpoint else None)
    run.done = run.step >= run.steps
    if stalled([e["val_loss"] for e in run.log], cfg.patience):   # every rank sees the same losses
        if run.master:
            print(f"early stop at step {run.step}: no better validation loss in {cfg.patience} milestones")
        run.done = True
    return run.done


def stalled(val_losses, patience):
    """Early stopping: the last `patience` evaluations all failed to beat the best before them."""
    return 0 < patience < len(val_losses) and min(val_losses[-patience:]) >= min(val_losses[:-patience])


def save(out_dir, log, state):
    """log.jsonl (the milestones), then the checkpoint (state None: none, --checkpoint=0); each replaced
    atomically."""
    with replacing(os.path.join(out_dir, "log.jsonl")) as tmp, open(tmp, "w") as f:
        f.writelines(json.dumps(e) + "\n" for e in log)
    if state is not None:
        save_checkpoint(state, os.path.join(out_dir, "ckpt.pt"))


def diverged(run, step, what):
    """A non-finite loss at `step`: the run stops, keeping its last good checkpoint. One reported at its
    best milestone, with one, ends there (final.json's diverged_at); any other has failed: no final.json,
    left for a rerun (train.py exits 2)."""
    if run.master:
        kept = f"the last good checkpoint ({run.out_dir}/ckpt.pt) is kept" if run.log else \
            "no milestone reached: no checkpoint kept, nothing reported (no final.json)"
        print(f"{what} at step {step}: stopping; {kept}", file=sys.stderr)
    run.done = True
    if run.cfg.report == "best_milestone" and run.log:
        run.diverged_at = step
    else:
        run.failed = True


def closed(runs, model):
    """final.json for every run that did not fail, the test split scored for all of them at once; then
    train.py exits 2 naming any run that diverged with nothing to report, and what a rerun does."""
    if not all(r.failed for r in runs) and runs[0].master:
        first = runs[0]
        T = fixed_rows(first)
        tests, vals = evaluate(runs, model, first.test, first.test_ids, T), None
        for m, r in enumerate(runs):
            if r.failed:
                continue
            if not r.log:
                vals = vals or evaluate(runs, model, first.val, first.val_ids, T)
            finish(r, r.log[-1]["val_loss"] if r.log else vals[m], tests[m])
    failed = [r for r in runs if r.failed]
    if failed and runs[0].master:   # what a rerun does with each: from its last checkpoint, or from the start
        kept = [r.out_dir for r in failed if r.log]
        lost = [r.out_dir for r in failed if not r.log]
        said = ([f"a rerun retries from the last checkpoint: {', '.join(kept)}"] if kept else []) + \
            ([f"no checkpoint kept, a rerun starts over (a lower --lr?): {', '.join(lost)}"] if lost else [])
        print("error: diverged (no final.json): " + "; ".join(said), file=sys.stderr)
    return bool(failed)


def finish(run, val_loss, test_loss):
    """final.json, written last: the run is done (a run without it is resumed by sweep.sh). `reported`
    is the validation loss under the run's reporting rule; diverged_at: the step whose loss was not finite;
    elapsed: training seconds alone (log.jsonl's)."""
    log, report = run.log, run.cfg.report
    value, step = reported(log, report)
    final = {"step": log[-1]["step"] if log else run.steps,
             "stopped_early": bool(log) and log[-1]["step"] < run.steps,
             "val_loss": val_loss, "test_loss": test_loss, "val_records": len(run.val_ids),
             "test_records": len(run.test_ids),
             "elapsed": round(run.resumed_at.get("elapsed", 0.0) + run.elapsed, 2),
             "report": report, "reported": {"val_loss": value, "step": step}, "diverged_at": run.diverged_at}
    write_json(final, os.path.join(run.out_dir, "final.json"))
    print(f"final: val {val_loss:.4f} nats/token, test {test_loss:.4f} ({run.out_dir})")
    if report == "best_milestone" and step is not None:
        print(f"reported at its best milestone: val {value:.4f} at step {step}"
              + (f" (diverged at step {run.diverged_at})" if run.diverged_at is not None else ""))


def reported(log, rule):
    """(validation loss, step) a run reports. Appendix §4 "Evaluation": "Results use the final step:
    no checkpoint is selected by its score. The single exception is the larger web run tree-only
    run, which diverged and is reported at its best milestone, labelled as such" (rule best_milestone)."""
    if not log:
        return None, None
    e = min(log, key=lambda e: e["val_loss"] if math.isfinite(e["val_loss"]) else math.inf) \
        if rule == "best_milestone" else log[-1]
    return e["val_loss"], e["step"]
