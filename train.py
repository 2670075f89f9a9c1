"""Train one configuration at one seed.

    python train.py --config seq_depth                     # web corpus, CPU preset on CPU
    python train.py --corpus python --config seq_tree --seed 3 --steps=400
    python train.py --config seq_depth --depth_dropout=0.3 --name seq_depth_dropout   # its own folder
    python train.py --setting web_pages --config seq_depth  # a paper's setting by name (treerope/settings.py)
    python train.py --setting python --lr_sweep=1          # its lr sweep, and the rate it picks
    torchrun --nproc_per_node=2 train.py --corpus python   # data parallel

Recipe (depth-perception appendix §4; `--recipe tree`, the default for python/web/sheets; each
corpus's default and its CUDA model come from its entry in treerope/corpora/, through meta.json):
AdamW (0.9, 0.95), lr 1.2e-3, weight decay 0.1 on weight matrices only (rotary rates/offsets,
LayerNorm excluded), clip 1.0, linear warmup over 2% of steps then cosine to 10% of peak, no
dropout, no early stopping. `--recipe hrope` (paper 004 Table 11, the default for code/prose/webtext):
lr 3e-4, weight decay 0.01, cosine to 1%, dropout 0.1, early stopping after 10 evaluations
without a better validation loss, and on CUDA 16 blocks of 1,024 tokens per step, records packed
into them (`--pack`); on CPU `hrope_cpu`, the same with lr 1.2e-3 (RECIPES says why) and a record
per row. In both: every step trains whole records (a fixed number, or with --pack a fixed number
of blocks), its rows grouped by length into micro-batches of at most `mb_tokens` padded tokens; a
record attends only inside itself, packed or not; validation on a fixed set of records
every 5% of steps (a milestone); the test split once at the end; no checkpoint is chosen by
its score. Same seed => identical initial weights and identical batches in every configuration.
`--setting NAME` (treerope/settings.py) trains one of the papers' runs on any device: its preset, recipe and
lr, its length (in passes over the prepared train split, or steps) and its reporting rule; flags
given override it. Writes out/<corpus>/<name or config>/seed<k>/: config.json, log.jsonl, ckpt.pt (not
with --checkpoint=0: a benchmark's runs), final.json (last; `reported`: the validation loss under the
run's reporting rule).
"""
import argparse
import contextlib
import functools
import json
import math
import os
import shutil
import sys
import time
from types import SimpleNamespace

import numpy as np
import torch
import torch.distributed as dist
from tqdm import tqdm

import rotary
import trees
from model import GPT, GPTConfig
from treerope.batches import Split, context_note, coords_for, fill_blocks, pack, step_blocks
from treerope.files import owned, replacing, writable, write_json
from treerope.machine import PEAK_FLOPS, keep_freed_memory, precision, provenance, start, summed, wrapped
from treerope.prepared import SPLITS, corpus_stats, identity
from treerope.runs import lr_sweep, resume, save_checkpoint
from treerope.settings import (
    CORPORA,
    CPU_RECIPES,
    DEFAULTS,
    MODELS,
    RECIPES,
    SCALES,
    SETTINGS,
    model_overrides,
    refusal,
    setting_line,
)

AUTO = ("compile", "bf16")   # None: chosen from the device by machine.precision(); --bf16=0/1 overrides


def parse(argv):
    """(run values, model overrides, where each value came from) for a command line."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for k, v in DEFAULTS.items():
        v = {**RECIPES["tree"], **SCALES["cpu"], "passes": 1.0}.get(k, v)
        typ = (lambda s: s.lower() in ("1", "true", "yes")) if isinstance(v, bool) or k in AUTO else \
            type(v) if v is not None else str
        ap.add_argument(f"--{k}", default=None, type=typ)
    args, extra = ap.parse_known_args(argv)
    model_over = {}
    if extra:   # --key=value overrides of the model's fields (settings.model_overrides)
        model_over = model_overrides(extra, GPTConfig.__dataclass_fields__)
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
    corpus = setting.get("corpus") or args.corpus or DEFAULTS["corpus"]
    if corpus not in CORPORA:   # before the data folder: `prepare.py nope` would be no advice
        sys.exit(f"error: unknown --corpus {corpus!r}; known: {', '.join(CORPORA)}")
    data_dir = os.path.join(args.data or DEFAULTS["data"], corpus)
    meta, _ = corpus_stats(data_dir)   # the corpus's recipe and model, as its corpora/ entry wrote them
    why = setting and refusal(args.setting, meta["settings"])
    if why:
        sys.exit(f"error: {data_dir} cannot train setting {args.setting}: {why}; "
                 f"run `python prepare.py --setting {args.setting}`, or pass --data to data prepared for it")
    cfg, origin = resolve(args, device, corpus, meta["settings"]["defaults"], setting)
    check(cfg, model_over, setting)
    return cfg, model_over, origin


def resolve(args, device, corpus, corpus_defaults, setting):
    """The run's values, layer over layer (later wins), and the layer each came from: the defaults,
    the corpus's model, the device's scale, the recipe, the setting (and its configuration's
    exceptions), the flags given."""
    cuda = device.startswith("cuda")
    recipe = args.recipe or setting.get("recipe") or corpus_defaults["recipe"]
    if not cuda and args.recipe is None and not setting:
        recipe = CPU_RECIPES.get(recipe, recipe)
    if recipe not in RECIPES:
        sys.exit(f"error: unknown --recipe {recipe!r}; known: {', '.join(RECIPES)}")
    scale = "cpu" if not cuda else "gpu_hrope" if recipe == "hrope" else "gpu"   # mps runs the CPU scale
    explicit = {k: v for k, v in vars(args).items() if v is not None}
    config = args.config or DEFAULTS["config"]
    layers = [("defaults", DEFAULTS), (f"corpus {corpus}", {"preset": corpus_defaults["preset"]}),
              (f"{scale} scale", SCALES[scale]), (f"recipe {recipe}", {**RECIPES[recipe], "recipe": recipe}),
              (f"setting {args.setting}", {k: v for k, v in setting.items() if k in DEFAULTS}),
              (f"setting {args.setting}, {config}", setting.get("per_config", {}).get(config, {})),
              ("given", explicit)]
    cfg, origin = {}, {}
    for name, values in layers:
        cfg.update(values)
        origin.update(dict.fromkeys(values, name))
    if "steps" in explicit or "passes" in explicit:   # one length: the one given
        cfg["passes" if "steps" in explicit else "steps"] = None
    cfg["given"], cfg["device"] = sorted(explicit), device      # config.json keeps which values were given
    bf16, compile_, why = precision(device)
    given = [f"--{k}={int(cfg[k])}" for k in AUTO if cfg[k] is not None]
    cfg["precision"] = why + (f"; {' '.join(given)} given" if given else "")
    cfg["bf16"] = bf16 if cfg["bf16"] is None else cfg["bf16"]
    cfg["compile"] = compile_ if cfg["compile"] is None else cfg["compile"]
    return cfg, origin


def check(cfg, model_over, setting):
    """Exit with one line on a value no run can take."""
    if not rotary.known(cfg["config"]):
        sys.exit(f"error: unknown --config {cfg['config']!r}; `python rotary.py` lists "
                 "the configurations")
    if cfg["preset"] not in MODELS:
        sys.exit(f"error: unknown --preset {cfg['preset']!r}; known: {', '.join(MODELS)}")
    counts = {k: cfg[k] for k in ("steps", "docs_per_step", "mb_tokens", "val_docs", "test_docs",
                                  "milestones")}
    for k, v in {**counts, **model_over}.items():
        if v is not None and v < 1:
            sys.exit(f"error: --{k} must be at least 1")
    if (not (0 <= cfg["depth_dropout"] <= 1 and 0 <= cfg["dropout"] < 1 and 0 <= cfg["min_lr"] <= 1)
            or not 0 < cfg["lr"] < math.inf or cfg["seed"] < 0):   # `not` so that nan fails too
        sys.exit("error: --depth_dropout and --min_lr must lie in [0, 1], --dropout in [0, 1), "
                 "--lr be positive and finite, --seed at least 0")
    name = cfg["name"]
    if name is not None and (not name.strip() or "/" in name or os.sep in name or ".." in name
                             or name != cfg["config"] and rotary.known(name)):   # tables would read it as one
        sys.exit(f"error: --name {name!r} must be a plain folder name (no '/', no '..'), and not another "
                 "configuration's: the run is written to <out>/<corpus>/<name>/seed<k>")
    if cfg["passes"] is not None and cfg["passes"] <= 0:
        sys.exit("error: --passes must be positive")
    if cfg["report"] not in ("final", "best_milestone"):
        sys.exit(f"error: unknown --report {cfg['report']!r}; known: final, best_milestone")
    if cfg["lr_sweep"] and not setting.get("sweep"):
        sys.exit(f"error: --lr_sweep needs a --setting whose paper swept its lr; swept: "
                 f"{', '.join(k for k, v in SETTINGS.items() if v['sweep'])}")


def origins(cfg, origin):
    """One line: the values that are not the defaults, grouped by where they came from."""
    by = {}
    for k, src in origin.items():
        if src != "defaults" and k in cfg:
            by.setdefault(src, []).append(f"{k}={cfg[k]}")
    return "values: " + "; ".join(f"{src}: {' '.join(v)}" for src, v in by.items())


# ---------------------------------------------------------------------------- schedule ----
def step_records(n_records, docs_per_step, step, seed):
    """The records of one step: a seeded permutation per pass, identical for every configuration."""
    per_pass = max(n_records // docs_per_step, 1)
    epoch, j = divmod(step, per_pass)
    return pass_order(n_records, seed, epoch)[j * docs_per_step:(j + 1) * docs_per_step]


@functools.lru_cache(maxsize=128)   # a study's runs each hold one pass at a time
def pass_order(n_records, seed, epoch):
    """A pass's permutation, drawn once per pass, not every step (71 k records: ~2 ms a draw)."""
    perm = np.random.default_rng([seed, epoch]).permutation(n_records)
    perm.flags.writeable = False
    return perm


def lr_at(step, steps, peak, floor=0.1):
    """Linear warmup over 2% of steps, then cosine to floor x peak at the final step."""
    warm = max(1, int(0.02 * steps))
    if step < warm:
        return peak * (step + 1) / warm
    frac = (step - warm) / max(1, steps - 1 - warm)
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0))))


def stalled(val_losses, patience):
    """Early stopping: the last `patience` evaluations all failed to beat the best before them."""
    return 0 < patience < len(val_losses) and min(val_losses[-patience:]) >= min(val_losses[:-patience])


def param_groups(model, weight_decay):
    """Decay weight matrices only; rotary rates/offsets and LayerNorm weights are not decayed."""
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (decay if p.dim() >= 2 and not n.startswith("rotary") else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


@torch.no_grad()
def evaluate(model, split, ids, cfg, corpus, autocast, per_token=False):
    """Mean NLL per token over records `ids` (and optionally each record's per-token NLL)."""
    model.eval()
    total, count, per = 0.0, 0, {}
    for group in pack(split.len[ids], cfg["mb_tokens"]):
        rec = ids[group]
        b = split.batch(rec, cfg["device"], model.cfg.max_len if cfg["compile"] else None)
        g = torch.Generator(device=cfg["device"]).manual_seed(cfg["seed"])
        with autocast:
            _, nll, _ = model(b["tokens"], coords_for(model, b, corpus, g), b["targets"])
        total += nll.sum().item()
        count += (b["targets"] >= 0).sum().item()
        if per_token:
            for j, r in enumerate(rec):
                per[int(r)] = nll[j, :int(split.len[r]) - 1].float().cpu().numpy()
    model.train()
    return (total / max(count, 1), per) if per_token else total / max(count, 1)


# ------------------------------------------------------------------------------ the run ----
def start_processes(cfg):
    """(rank, world): under torchrun (WORLD_SIZE > 1) one process per device, gloo on CPU and nccl
    on CUDA, as nanoGPT runs; otherwise the one process."""
    if int(os.environ.get("WORLD_SIZE", "1")) == 1:
        return 0, 1
    return start(cfg)


def load_splits(data_dir, mcfg):
    splits = [Split(data_dir, s, mcfg.max_len, mcfg.vocab_size) for s in SPLITS]
    for name, split in zip(SPLITS, splits):
        if not len(split):   # an empty split would score 0.0: a result that looks valid but is not
            sys.exit(f"error: {data_dir} has no {name} records of 2+ tokens; prepare more documents "
                     "(documents are split 90/5/5 by name)")
    return splits


def build_model(cfg, mcfg, batch, corpus, data_dir):
    """The GPT at its seed's initial weights (identical in every configuration), checked against
    the data: `batch` must hold every coordinate the configuration reads."""
    torch.manual_seed(cfg["seed"])
    try:
        model = GPT(mcfg).to(cfg["device"])
    except (ValueError, KeyError) as e:                             # e.g. more planes than the head has
        sys.exit(f"error: --config {cfg['config']}: {e.args[0]}")
    try:
        coords_for(model, batch, corpus, torch.Generator().manual_seed(0))
    except KeyError as e:
        sys.exit(f"error: --config {cfg['config']} reads {e.args[0]!r}, which {data_dir} does not hold "
                 f"(another corpus, or a folder from an older prepare.py: rerun prepare.py {cfg['corpus']})")
    return model


def train_step(fwd, model, train, rows, cfg, corpus, gen, autocast, rank, world):
    """Gradients of one step: its rows (records, or with --pack blocks of records) grouped into
    micro-batches, dealt round-robin to the processes. DDP syncs gradients on each process's last
    backward only (no_sync before it) and averages them, so each loss is scaled by `world`: the sum
    over micro-batches, as on one process. A process dealt no micro-batch still joins that sync, at
    weight 0. Returns the step's training loss (token mean over all its records), its number of
    predicted tokens and its FLOPs: (model.flops at each record's length, as this process executed
    them: its rows as laid, padding and masked pairs included)."""
    T = model.cfg.max_len if cfg["compile"] else None
    if T is not None and not cfg["pack"]:   # compiled: the records laid into rows of the context, first fit
        rows = fill_blocks(rows, train.len, T, len(rows))
    groups = pack([train.len[r].sum() for r in rows], cfg["mb_tokens"]) if T is None else \
        fixed_groups(len(rows), max(1, cfg["mb_tokens"] // T))
    n = np.concatenate([np.atleast_1d(train.len[r]) for r in rows]) - 1   # each record's predicted tokens
    n_tok = int(n.sum())
    mine = groups[rank::world]
    step_loss, executed = 0.0, 0.0
    for i, group in enumerate(mine or groups[:1]):
        b = train.batch([rows[i] if i >= 0 else [] for i in group], cfg["device"], T)
        executed += model.flops(np.full(*b["tokens"].shape)) if mine else 0.0
        C = coords_for(model, b, corpus, gen, cfg["depth_dropout"])
        # a packed block: attention stays inside each record (document-confined, Table 11 reading)
        blocked = b["segment"][:, :, None] != b["segment"][:, None, :] if "segment" in b else None
        sync = world == 1 or i == len(mine) - 1 or not mine
        with contextlib.nullcontext() if sync else fwd.no_sync():
            with autocast:
                _, nll, _ = fwd(b["tokens"], C, b["targets"], blocked=blocked)
            loss = nll.sum() / n_tok                               # token mean over the step
            (loss * (world if mine else 0)).backward()
        step_loss += loss.item() if mine else 0.0
    if world > 1:   # every process sees the step's whole loss (the NaN stop must agree) and FLOPs executed
        step_loss, executed = summed([step_loss, executed], cfg["device"])
    return step_loss, n_tok, (model.flops(n), executed)


def fixed_groups(n, per):
    """Compiled: one shape for every micro-batch, `per` rows of the context (-1: an empty row), as
    study.py lays them."""
    return [[i if i < n else -1 for i in range(j, j + per)] for j in range(0, n, per)]


def record_run(cfg, mcfg, model, meta, out_dir):
    """config.json: the settings, the model, and what made the run (provenance); then its first line."""
    os.makedirs(out_dir, exist_ok=True)
    write_json({"run": cfg, "model": vars(mcfg), "data_meta_synthetic": meta.get("synthetic", False),
                "non_embedding_params": model.non_embedding_params(),
                "provenance": provenance(cfg["device"])},
               os.path.join(out_dir, "config.json"))
    where = cfg["device"].split(":")[0].upper() + (f", setting {cfg['setting']}" if cfg["setting"] else "")
    print(f"{cfg['corpus']} / {cfg['config']} / seed {cfg['seed']} on {where}; preset {cfg['preset']}, "
          f"{model.non_embedding_params() / 1e6:.2f}M non-embedding params, {cfg['steps']} steps x "
          f"{per_step(cfg, mcfg)}{' (SYNTHETIC data)' if meta.get('synthetic') else ''}")


def per_step(cfg, mcfg):
    return (f"{cfg['docs_per_step']} blocks of {mcfg.max_len:,} tokens (records packed)" if cfg["pack"]
            else f"{cfg['docs_per_step']} records")


def reported(log, rule):
    """(validation loss, step) a run reports. Appendix §4 "Evaluation": "Results use the final step:
    no checkpoint is selected by its score. The single exception is the larger web run tree-only
    run, which diverged and is reported at its best milestone, labelled as such" (rule best_milestone)."""
    if not log:
        return None, None
    e = min(log, key=lambda e: e["val_loss"] if math.isfinite(e["val_loss"]) else math.inf) \
        if rule == "best_milestone" else log[-1]
    return e["val_loss"], e["step"]


def finish(out_dir, log, steps, val_loss, test_loss, val_records, test_records, elapsed, report,
           diverged=None):
    """final.json, written last: the run is done (a run without it is resumed by sweep.sh). `reported`
    is the validation loss under the run's reporting rule; diverged_at: the step whose loss was not finite;
    elapsed: training seconds alone (log.jsonl's)."""
    value, step = reported(log, report)
    final = {"step": log[-1]["step"] if log else steps,
             "stopped_early": bool(log) and log[-1]["step"] < steps,
             "val_loss": val_loss, "test_loss": test_loss, "val_records": val_records,
             "test_records": test_records, "elapsed": elapsed,
             "report": report, "reported": {"val_loss": value, "step": step}, "diverged_at": diverged}
    write_json(final, os.path.join(out_dir, "final.json"))
    print(f"final: val {val_loss:.4f} nats/token, test {test_loss:.4f} ({out_dir})")
    if report == "best_milestone" and step is not None:
        print(f"reported at its best milestone: val {value:.4f} at step {step}"
              + (f" (diverged at step {diverged})" if diverged is not None else ""))


def save(out_dir, log, state):
    """log.jsonl (the milestones), then the checkpoint (state None: none, --checkpoint=0); each replaced
    atomically."""
    with replacing(os.path.join(out_dir, "log.jsonl")) as tmp, open(tmp, "w") as f:
        f.writelines(json.dumps(e) + "\n" for e in log)
    if state is not None:
        save_checkpoint(state, os.path.join(out_dir, "ckpt.pt"))


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    cfg, model_over, origin = parse(argv)
    if cfg["lr_sweep"]:
        return lr_sweep(cfg, argv, main)
    keep_freed_memory()
    rank, world = start_processes(cfg)
    run = plan(cfg, model_over, origin, rank == 0)
    built = setup(run)   # a model refused (its planes, its data) is refused before any folder is made
    if run.master:   # before any work: a read-only or full --out is one line, not a traceback at step 1
        writable(run.out_dir, "choose another --out")
    with owned(run.out_dir, "the run") if run.master else contextlib.nullcontext():
        trained(run, rank, world, built)
    if world > 1:
        dist.destroy_process_group()
    return run.out_dir


def trained(run, rank, world, built):
    """Restore the model built (`setup`), train it, and write the final scores."""
    cfg = run.cfg
    model, opt, autocast = built
    start, log = restore(run, model, opt, world)
    fwd = torch.compile(model) if cfg["compile"] else model
    if world > 1:
        fwd = wrapped(fwd, cfg)
    if run.master:
        record_run(cfg, run.mcfg, model, run.meta, run.out_dir)
    log, diverged = train_loop(run, model, fwd, opt, autocast, start, log, rank, world)
    if run.master:
        evaluate_ = functools.partial(evaluate, model, cfg=cfg, corpus=run.corpus, autocast=autocast)
        val_loss = log[-1]["val_loss"] if log else evaluate_(run.val, run.val_ids)
        finish(run.out_dir, log, run.steps, val_loss, evaluate_(run.test, run.test_ids), len(run.val_ids),
               len(run.test_ids), round(run.elapsed_before + run.elapsed, 2), cfg["report"], diverged)


def plan(cfg, model_over, origin, master):
    """What a run trains on, and how long: the data, the model's config, the fixed evaluation records
    and the steps (a length in passes becomes steps here)."""
    available = {"cpu": True, "cuda": torch.cuda.is_available(), "mps": torch.backends.mps.is_available()}
    if not available[cfg["device"].split(":")[0]]:
        sys.exit(f"error: --device {cfg['device']} is not available on this machine")
    if master:   # first line: what precision this machine gets, and why; then where the values came from
        print(f"precision: {'bf16 autocast' if cfg['bf16'] else 'fp32'}, "
              f"{'compiled' if cfg['compile'] else 'eager'} ({cfg['precision']})")
        print(origins(cfg, origin))
    run = SimpleNamespace(cfg=cfg, master=master, data_dir=os.path.join(cfg["data"], cfg["corpus"]))
    run.meta, run.corpus = corpus_stats(run.data_dir)
    if run.meta["settings"].get("format") != trees.FORMAT:   # an older stream or record rule
        sys.exit(f"error: {run.data_dir} is from an older prepare.py; rerun prepare.py {cfg['corpus']}")
    cfg["data_identity"] = identity(run.data_dir, run.meta)    # evaluate.py, sample.py, a resume check it
    cfg["tokenizer"] = cfg["data_identity"]["tokenizer"]
    run.mcfg = GPTConfig(**{**MODELS[cfg["preset"]], "vocab_size": run.meta["tokenizer"]["vocab"],
                            "configuration": cfg["config"], "corpus": run.corpus, "dropout": cfg["dropout"],
                            **model_over})
    run.out_dir = os.path.join(cfg["out"], cfg["corpus"], cfg["name"] or cfg["config"], f"seed{cfg['seed']}")
    prepared = run.meta["settings"]["max_len"]
    if run.mcfg.n_embd % run.mcfg.n_head == 0 and run.mcfg.n_embd // run.mcfg.n_head % 2:   # turned in pairs
        sys.exit(f"error: n_embd {run.mcfg.n_embd} over n_head {run.mcfg.n_head} makes heads of odd width")
    if prepared < run.mcfg.max_len and master:   # the model could read longer records
        print(f"note: {run.data_dir} holds records of at most {prepared:,} tokens; the {cfg['preset']} "
              f"context is {run.mcfg.max_len:,} (prepare.py {cfg['corpus']} --max_len {run.mcfg.max_len})")
    run.train, run.val, run.test = load_splits(run.data_dir, run.mcfg)
    n = len(run.train)
    if not cfg["pack"] and cfg["docs_per_step"] > n:   # a step would train the split, not the batch asked
        sys.exit(f"error: --docs_per_step {cfg['docs_per_step']:,} is more than the {n:,} records of "
                 f"{run.data_dir}'s train split; give at most {n:,}")
    note = context_note(np.diff(run.train.a["doc_start"]), run.mcfg.max_len, "training", "train",
                        cfg["corpus"])
    if note and master:
        print(note)
    run.val_ids = np.arange(min(cfg["val_docs"], len(run.val)))             # the same fixed records
    run.test_ids = np.arange(len(run.test) if cfg["test_docs"] is None
                             else min(cfg["test_docs"], len(run.test)))
    per_pass = max(len(run.train) // cfg["docs_per_step"], 1)
    if cfg["pack"]:
        run.blocks, per_pass = step_blocks(run.train.len, run.mcfg.max_len, cfg["docs_per_step"], cfg["seed"])
    if cfg["passes"] is not None:   # a pass: "the number of steps it takes to show the model every training
        cfg["steps"] = max(1, round(cfg["passes"] * per_pass))   # record once"
    if cfg["setting"] and master:
        print(setting_line(cfg, run.mcfg, model_over, per_step(cfg, run.mcfg)))
    run.steps = cfg["steps"]
    run.milestones = milestone_steps(run.steps, cfg["milestones"])
    return run


def milestone_steps(steps, n):
    """Appendix §4: validation "every 5% of a run's planned steps": n evenly spaced steps, the last
    the final one (fewer when the run has fewer steps)."""
    return {math.ceil(k * steps / n) for k in range(1, n + 1)}


def setup(run):
    """The model at its seed's initial weights, its optimizer and the autocast context."""
    cfg = run.cfg
    model = build_model(cfg, run.mcfg, run.val.batch(run.val_ids[:1], "cpu"), run.corpus, run.data_dir)
    cuda = cfg["device"].startswith("cuda")
    opt = torch.optim.AdamW(param_groups(model, cfg["weight_decay"]), lr=cfg["lr"], betas=(0.9, 0.95),
                            fused=True)                             # one kernel for all parameters
    autocast = torch.autocast("cuda" if cuda else "cpu", dtype=torch.bfloat16, enabled=cfg["bf16"])
    if cfg["compile"] and not cuda and not shutil.which(os.environ.get("CXX", "c++")):
        cfg["compile"] = False   # inductor writes C++ for the CPU: without a compiler, run eager
        if run.master:
            print("note: no C++ compiler found, so --compile is off")
    return model, opt, autocast


def restore(run, model, opt, world):
    """(first step, milestone log): a fresh run, or its checkpoint (--resume=0 starts it over)."""
    cfg, out_dir = run.cfg, run.out_dir
    start, log = 0, []
    if not cfg["resume"] and run.master and os.path.exists(out_dir):   # explicit: start this run over
        shutil.rmtree(out_dir)
        print(f"--resume=0: removed {out_dir}")
    if world > 1:
        dist.barrier()
    if cfg["resume"] and os.path.exists(os.path.join(out_dir, "ckpt.pt")):
        start, log = resume(cfg, run.mcfg, model, opt, out_dir)
        if run.master:
            print(f"resuming {out_dir} from step {start}")
    last = log[-1] if log else {}   # tokens, training and validation time count the whole run, not this part
    run.tokens_before, run.elapsed_before = last.get("tokens", 0), last.get("elapsed", 0.0)
    run.resumed_at, run.elapsed = last, 0.0
    return start, log


def train_loop(run, model, fwd, opt, autocast, start, log, rank, world):
    """Steps from `start` to the end (or an early stop, or a non-finite loss): (log, diverged step)."""
    cfg, t0, tokens_seen = run.cfg, time.time(), 0
    paused, run.val_s, run.flops = 0.0, 0.0, [0.0, 0.0]   # validation and checkpoints: not training time
    bar = tqdm(range(start, run.steps), initial=start, total=run.steps, disable=not run.master,
               desc=cfg["config"])
    for step in bar:
        lr = lr_at(step, run.steps, cfg["lr"], cfg["min_lr"])
        for g in opt.param_groups:
            g["lr"] = lr
        rows = run.blocks(step) if cfg["pack"] else step_records(len(run.train), cfg["docs_per_step"], step,
                                                                cfg["seed"])
        gen = torch.Generator(device=cfg["device"]).manual_seed(cfg["seed"] * 1_000_003 + step)
        step_loss, n_tok, flops = train_step(fwd, model, run.train, rows, cfg, run.corpus, gen, autocast,
                                             rank, world)
        if not math.isfinite(step_loss):
            return log, diverged(run, step, f"loss is {step_loss}", log)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        tokens_seen += n_tok
        run.flops = [a + b for a, b in zip(run.flops, flops)]
        t1 = time.time()
        dt = run.elapsed = t1 - t0 - paused   # training time alone
        bar.set_postfix(loss=f"{step_loss:.3f}", tok_s=f"{tokens_seen / max(dt, 1e-9):.0f}")
        if step + 1 in run.milestones:
            val = evaluate(model, run.val, run.val_ids, cfg, run.corpus, autocast)
            run.val_s += time.time() - t1
            if not math.isfinite(val):
                # the weights went non-finite on a finite step: not checkpointed
                return log, diverged(run, step + 1, f"validation loss is {val}", log)
            if milestone(run, model, opt, log, step, step_loss, val, lr, tokens_seen, dt):
                break
            paused += time.time() - t1
    return log, None


def diverged(run, step, what, log):
    """A non-finite loss: stop, keeping the last good checkpoint; exit, unless the run is reported
    at its best milestone and has one, which ends here (the step, for final.json's diverged_at)."""
    reported = run.cfg["report"] == "best_milestone" and bool(log)
    if run.master:
        kept = f"the last good checkpoint ({run.out_dir}/ckpt.pt) is kept" if log else \
            "no milestone reached: no checkpoint kept, nothing reported (no final.json)"
        print(f"{what} at step {step}: stopping; {kept}", file=sys.stderr)
    return step if reported else sys.exit(2)


def milestone(run, model, opt, log, step, step_loss, val_loss, lr, tokens_seen, dt):
    """Log the fixed validation records' loss and checkpoint; True when the run stops early."""
    cfg = run.cfg
    before = run.resumed_at   # resumed: the counts go on from the checkpoint's
    flops, executed = (before.get(k, 0.0) + f for k, f in zip(("flops", "flops_executed"), run.flops))
    # elapsed: training time alone (dt: validation and checkpoint writes left out); val_elapsed beside it
    entry = {"step": step + 1, "tokens": run.tokens_before + tokens_seen, "train_loss": step_loss,
             "val_loss": val_loss, "lr": lr, "elapsed": round(run.elapsed_before + dt, 2),
             "val_elapsed": round(before.get("val_elapsed", 0.0) + run.val_s, 2),
             "flops": flops, "flops_executed": executed, "time": round(time.time(), 2),   # the wall clock
             "bf16": cfg["bf16"], "compile": cfg["compile"]}
    if cfg["device"].startswith("cuda"):   # model FLOPs utilisation (nanoGPT's count) of every device in use
        world = int(os.environ.get("WORLD_SIZE", "1"))
        entry["mfu"], entry["hfu"] = (f / dt / (PEAK_FLOPS * world) for f in run.flops)
    log.append(entry)
    if run.master:
        state = {"model": model.state_dict(), "opt": opt.state_dict(), "step": step + 1, "log": log,
                 "config": vars(run.mcfg), "run": cfg}
        save(run.out_dir, log, state if cfg["checkpoint"] else None)
    if stalled([e["val_loss"] for e in log], cfg["patience"]):   # every rank sees the same losses
        if run.master:
            print(f"early stop at step {step + 1}: no better validation loss in {cfg['patience']} milestones")
        return True
    return False


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit("\ninterrupted: the same command resumes from the last milestone's checkpoint")
