"""Every run's values by name: the defaults, the device scales, the recipes, the model sizes and the
flags that shape prepared data; the papers' named settings (a corpus at one model size, context and
length: the appendix's glossary; paper 004 Table 11), read with --setting; and the `--key=value`
overrides of the model on train.py's command line:

    python prepare.py --setting web_pages               # prepares data/web; meta.json records the name
    python train.py --setting web_pages --config seq_depth --seed 3
    python train.py --setting python --lr_sweep=1       # the paper's lr sweep for the setting

Without --setting a run takes its device's scale (SCALES: the CPU scale on a CPU or a laptop's
GPU, the GPU scale on CUDA) and its corpus's recipe and model; train.py prints where each value
came from. train.py refuses data prepared for another setting. Where a paper leaves a value open
the entry says so and keeps this repository's default.
"""
import ast
import sys
from dataclasses import dataclass, field, fields

# The corpora by name, each with its module in treerope/corpora/ (prepare.py reads only that one)
CORPORA = {"python": ".python", "programs": ".programs", "web": ".web", "sheets": ".sheets",
           "web_sheets": ".sheets", "prose": ".paragraphs", "code": ".paragraphs", "webtext": ".paragraphs",
           "chat": ".chat", "json": ".formats", "xml": ".formats", "markdown": ".formats"}

def value(default, meaning):
    return field(default=default, metadata={"help": meaning})


@dataclass(frozen=True)
class Values:
    """Every value a train.py run has: its default and its meaning (`python train.py --help` prints both).
    A default of None is filled from the tables below: the corpus's model size (its corpora/ entry), the
    device's scale (SCALES), the recipe (RECIPES), the setting named (SETTINGS); a flag given wins."""
    corpus: str = value("web", "the prepared corpus: data/<corpus>/ (treerope/corpora/)")
    config: str = value("seq_only", "the rotary configuration (`python rotary.py` lists them)")
    name: str = value(None, "the run's folder instead of the configuration's (a variant)")
    seed: int = value(0, "initial weights and batch order: the same in every configuration")
    preset: str = value(None, "the model size (MODELS)")
    recipe: str = value(None, "optimiser and schedule: tree (appendix §4) or hrope (paper 004 Table 11)")
    data: str = value("data", "the folder holding the prepared corpora")
    out: str = value("out", "runs are written to <out>/<corpus>/<name or config>/seed<k>")
    steps: int = value(None, "optimiser steps (or give --passes)")
    docs_per_step: int = value(None, "records a step (with --pack: blocks of the context)")
    lr: float = value(None, "peak learning rate")
    weight_decay: float = value(None, "AdamW's, on weight matrices only")
    min_lr: float = value(None, "the cosine's floor, a fraction of the peak")
    dropout: float = value(None, "on embeddings, attention and residual branches")
    patience: int = value(None, "milestones without a better validation loss before an early stop (0: never)")
    mb_tokens: int = value(8192, "padded tokens a micro-batch at most")
    val_docs: int = value(1024, "the fixed validation records of every milestone")
    test_docs: int = value(None, "test records scored at the end (none: the whole split)")
    milestones: int = value(20, "validations, evenly spaced, the last at the final step")
    depth_dropout: float = value(0.0, "the share of records whose depth coordinate is hidden in training")
    compile: bool = value(None, "torch.compile the model (none: the machine's measured choice)")
    bf16: bool = value(None, "bf16 autocast (none: the machine's measured choice)")
    device: str = value(None, "cpu, cuda or mps (none: cuda where there is one)")
    resume: bool = value(True, "go on from the run's checkpoint (0: start it over)")
    setting: str = value(None, "one of the papers' settings by name (SETTINGS)")
    passes: float = value(None, "the length in passes over the train split, instead of --steps")
    report: str = value("final", "the reported validation loss: final, or best_milestone")
    lr_sweep: bool = value(False, "run the setting's learning-rate sweep instead")
    pack: bool = value(False, "records packed into blocks of the context (paper 004's batches)")
    checkpoint: bool = value(True, "write ckpt.pt at milestones (0: a benchmark's runs, no 157 MB writes)")


DEFAULTS = {f.name: f.default for f in fields(Values)}

# The models, head width 128 (64 planes) for every depth-perception size.
MODELS = {
    # the 4.7M model at each setting's context (appendix §4): Python 1,024, web pages 2,048
    # (whole pages; prepare.py web --max_len 2048 --long drop), spreadsheets 4,096
    "paper": dict(n_layer=6, n_embd=256, n_head=2, max_len=1024),
    "paper_web": dict(n_layer=6, n_embd=256, n_head=2, max_len=2048),
    "paper_sheets": dict(n_layer=6, n_embd=256, n_head=2, max_len=4096),
    "paper_web_large": dict(n_layer=10, n_embd=512, n_head=4, max_len=4096),  # larger web run: 31.5M, cropped
    "paper_hrope": dict(n_layer=8, n_embd=512, n_head=8, max_len=1024),    # hRoPE, 64-wide heads
    "cpu": dict(n_layer=4, n_embd=128, n_head=1, max_len=256),             # minutes on 2 cores
    "cpu_hrope": dict(n_layer=4, n_embd=128, n_head=2, max_len=256),
    "cpu_hrope_1024": dict(n_layer=4, n_embd=128, n_head=2, max_len=1024),   # paper 004's context on CPU
}

# The two papers' recipes: warm-up over 2% of the steps (hRoPE: 100 of 5,000), cosine decay to min_lr x lr;
# patience: evaluations with no better val loss before a stop (0: never; depth perception uses the last)
RECIPES = {
    "tree": dict(lr=1.2e-3, weight_decay=0.1, min_lr=0.1, dropout=0.0, patience=0),       # appendix §4
    "hrope": dict(lr=3e-4, weight_decay=0.01, min_lr=0.01, dropout=0.1, patience=10),     # Table 11
    # the CPU scale's Table 11, with the tree recipe's peak lr: at 3e-4 a 300-step run is too short
    # for the p1 channel to matter (REFERENCE.md "Recipes")
    "hrope_cpu": dict(lr=1.2e-3, weight_decay=0.01, min_lr=0.01, dropout=0.1, patience=10),
}

# What a device runs when no setting is named: the CPU scale finishes in minutes on 2 cores; the
# GPU scale takes the corpus's paper model; paper 004 on CUDA packs 16 blocks of 1,024 (Table 11).
SCALES = {
    # 5 milestones: validation stays under 5% of a CPU run's wall (the papers' settings keep 20);
    # micro-batches of 1,024 tokens run fastest on 2 cores (RESULTS "Speed")
    "cpu": dict(preset="cpu", steps=300, docs_per_step=16, val_docs=128, test_docs=256, mb_tokens=1024,
                milestones=5),
    "gpu": dict(steps=5000, docs_per_step=64),
    "gpu_hrope": dict(steps=5000, docs_per_step=16, pack=True),
}
CPU_RECIPES = {"hrope": "hrope_cpu"}   # a corpus's recipe, as the CPU scale runs it

# prepare.py's flags that shape the data, at their defaults; a setting names those it changes.
# max_len is the CPU scale's context, so no record is cropped (appendix: "No document is split across steps")
PREPARE = dict(vocab=4096, max_len=256, long="split", split="hash", units="module", render="values",
               blocks="space", stream="compact", max_programs=30_000)
# What data prepared before a flag existed was made with, where that is not the flag's default.
BEFORE = {("programs", "stream"): "old", ("programs", "max_programs"): 30_000}

# ------------------------------------------------------------------------ the papers' settings ----
# The papers' settings by name (depth-perception appendix glossary: "One corpus trained at one model
# size, context length and training length"; paper 004 Table 11), and the CPU scale-downs
# scripts/reproduce_cpu.sh trains: each entry its data (prepare.py's flags), its model (MODELS), its
# recipe and peak lr, its length and batch, and its reporting rule. prepare.py and train.py read an
# entry with --setting; `--key=value` overrides it in both.
# Appendix §4: micro-batches of at most 8,192 padded tokens, validation every 5% of the planned steps (a
# milestone) on the same 1,024 documents, results at the final step; the batch (64 records) is not given: ours
PAPER = dict(recipe="tree", docs_per_step=64, val_docs=1024, test_docs=None, mb_tokens=8192, milestones=20,
             steps=None, passes=None, report="final", per_config={}, sweep=None)
# The CPU scale of reproduce_cpu.sh (RESULTS.md): 4 layers, d=128, context 256, 200 steps of 16
# records, 10 milestones on 128 validation records, 256 test records.
CPU = dict(PAPER, preset="cpu", lr=1.2e-3, steps=200, docs_per_step=16, val_docs=128, test_docs=256,
           mb_tokens=1024, milestones=10)

SETTINGS = {
    # --- depth-perception appendix: its four settings (glossary; §4 "The four settings") ---
    "python": dict(
        PAPER, corpus="programs", preset="paper", lr=1.2e-3, passes=8, test_docs=8192,
        # "A byte-pair tokenizer with 32,768 entries"; "The splits are contiguous record ranges over an
        # unshuffled corpus" (§2): the paper's own splits, idiosyncratic as §2 says, kept to reproduce it
        prepare=dict(vocab=32768, max_len=1024, long="split", split="contiguous", max_programs=0),
        # "a sweep of five rates (0.0003 to 0.0048, 560 steps each) on four configurations — sequence
        # only, tree only, tree + within-node index and sequence + tree. All four were best at 0.0012."
        sweep=dict(rates=(3e-4, 6e-4, 1.2e-3, 2.4e-3, 4.8e-3), steps=560,
                   configs=("seq_only", "tree_only", "tree_within", "seq_tree")),
        source="appendix, Python: 423,111 programs; 4.7M-parameter model, 1,024-token context, "
               "about eight passes"),
    "sheets": dict(
        PAPER, corpus="sheets", preset="paper_sheets", lr=1.2e-3, passes=8,
        prepare=dict(vocab=4096, max_len=4096, long="split", render="values"),   # BPE size not given
        # no sweep: "0.0012, carried over from a sweep on an earlier build of the spreadsheet corpus"
        source="appendix, Spreadsheets: 41,245 workbooks; 4.7M-parameter model, 4,096-token context, "
               "about eight passes"),
    "web_pages": dict(
        PAPER, corpus="web", preset="paper_web", lr=1.2e-3, passes=1 / 3,
        # "whole pages of at most 2,048 tokens"; "Web pages drops them, so every web pages page is seen whole"
        prepare=dict(vocab=4096, max_len=2048, long="drop"),
        # "a sweep of three rates (600 steps) on sequence + tree; 0.0012 was best": the three rates are
        # not given; our reading takes the Python grid's three around 0.0012
        sweep=dict(rates=(6e-4, 1.2e-3, 2.4e-3), steps=600, configs=("seq_tree",)),
        source="appendix, web pages: whole pages of at most 2,048 tokens; 4.7M-parameter model, "
               "a third of a pass"),
    "web_large": dict(
        PAPER, corpus="web", preset="paper_web_large", lr=6e-4, passes=1, test_docs=2048,
        # "The larger web run crops them, keeping the first 4,096 tokens"
        prepare=dict(vocab=4096, max_len=4096, long="crop"),
        # "0.0006 ... The exception is no position, which diverged at 0.0006 and 0.0003 in preliminary runs
        # and was run at 0.00015"; its tree-only run "diverged and is reported at its best milestone"
        per_config={"no_position": dict(lr=1.5e-4), "tree_only": dict(report="best_milestone")},
        source="appendix, the larger web run: a 4,096-token context; 31.5M-parameter model, one full pass "
               "over 25.4 billion tokens"),
    # --- paper 004 Table 11: "held fixed across all model variants ... and corpora" ---
    **{f"hrope_{c}": dict(
        PAPER, corpus=c, preset="paper_hrope", recipe="hrope", lr=3e-4, steps=5000, docs_per_step=16,
        pack=True,   # 16 blocks of 1,024 tokens per step, records packed into them (batches.step_blocks)
        prepare=dict(vocab=4096, max_len=1024, long="split"),   # "Block size (context length) 1024"
        source=f"paper 004 Table 11, {name}: 8 layers, 8 heads, d_model 512, batch 16, 5000 steps, lr 3e-4")
       for c, name in (("prose", "WikiText-2"), ("code", "Code"), ("webtext", "OpenWebText"))},
    # --- the CPU scale-downs, as reproduce_cpu.sh trains them ---
    "cpu_python": dict(CPU, corpus="python", prepare={},
                       source="reproduce_cpu.sh ten: python prepare.py python"),
    "cpu_web": dict(CPU, corpus="web", prepare={}, source="reproduce_cpu.sh ten: python prepare.py web"),
    "cpu_programs": dict(CPU, corpus="programs", prepare=dict(max_len=256), source="reproduce_cpu.sh beyond"),
    "cpu_sheets": dict(CPU, corpus="sheets", steps=120, prepare=dict(max_len=256),
                       source="reproduce_cpu.sh sheets: 120 steps, SYNTHETIC workbooks"),
    **{f"cpu_{c}": dict(CPU, corpus=c, preset="cpu_hrope", recipe="hrope_cpu", prepare=dict(max_len=256),
                        source="reproduce_cpu.sh ten_hrope: Table 11 at the CPU scale, lr 1.2e-3")
       for c in ("prose", "code")},
    # Layer II at paper 004's context: records of 1,024 tokens packed as Table 11's batches, 4 blocks a
    # step (the 256-token setting's tokens per step); a packed 256-token record would add no context
    **{f"cpu_{c}_1024": dict(CPU, corpus=c, preset="cpu_hrope_1024", recipe="hrope_cpu", docs_per_step=4,
                             pack=True, prepare=dict(max_len=1024),
                             source="reproduce_cpu.sh layer2_1024: Table 11 at the CPU scale, context 1,024")
       for c in ("prose", "code")},
}


def preparation(name):
    """The prepare.py flags a setting's data is made with (its own, the defaults elsewhere)."""
    return {**PREPARE, **SETTINGS[name]["prepare"]}


def refusal(name, prepared):
    """Why data whose meta.json["settings"] is `prepared` cannot train setting `name`, or None.
    Data prepared without --setting (meta.json names none) serves when its flags are the setting's."""
    if prepared.get("setting", name) != name:
        return f"it was prepared for setting {prepared['setting']}"
    def was(k):
        return prepared.get(k, BEFORE.get((prepared.get("corpus"), k), PREPARE[k]))
    differ = [f"--{k} {was(k)} where the setting has {v}"
              for k, v in preparation(name).items() if was(k) != v]
    return f"it was prepared with {', '.join(differ)}" if differ else None


def setting_line(cfg, mcfg, model_over, per_step):
    """The line naming the setting a run trains, with the values it runs and the flags that changed them."""
    s = SETTINGS[cfg["setting"]]
    known = {*RECIPES[s["recipe"]], *(k for k in s if k in DEFAULTS)}
    over = [f"--{k}" for k in cfg["given"] if k in known] + [f"--{k}" for k in model_over]
    length = f"{cfg['passes']:.3g} passes = " if cfg["passes"] is not None else ""
    return (f"setting {cfg['setting']}: {cfg['corpus']}, preset {cfg['preset']} ({mcfg.n_layer} layers, "
            f"d={mcfg.n_embd}, {mcfg.n_head} head{'s' * (mcfg.n_head > 1)}, context {mcfg.max_len:,}), "
            f"recipe {cfg['recipe']}, lr {cfg['lr']:g}, {length}{cfg['steps']:,} steps x "
            f"{per_step}, reported at its "
            f"{'best milestone' if cfg['report'] == 'best_milestone' else 'final step'} ({s['source']})"
            + (f"; given: {' '.join(over)}" if over else ""))

# --------------------------------------------------------------------------------- overrides ----
# Model overrides on train.py's command line, nanoGPT's configurator: `--n_layer=2`, `--n_embd=64`,
# ... each a Python literal of the model field's type, refused in one line otherwise.
def typed(key, text, default):
    """nanoGPT's configurator: a --key=value override is a Python literal of the default's type."""
    try:
        v = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        v = text                                  # a bare word is a string
    if isinstance(default, float) and type(v) is int:
        v = float(v)
    if type(v) is not type(default):
        sys.exit(f"error: --{key}={text} must be {type(default).__name__} (default {default!r})")
    return v


def model_overrides(extra, fields):
    """--key=value overrides of model fields (n_layer, n_embd, n_head, max_len: the dataclass fields
    of model.GPTConfig, given), typed."""
    over = {}
    for e in extra:
        if not e.startswith("--") or "=" not in e:
            sys.exit(f"error: unrecognised argument {e!r}; use --key=value")
        k, v = e[2:].split("=", 1)
        if k in ("configuration", "rotary", "corpus", "vocab_size"):   # --config, the prepared data
            sys.exit(f"error: --{k} cannot be overridden; it comes from "
                     f"{'--config' if k in ('configuration', 'rotary') else 'the prepared data'}")
        if k not in fields:
            sys.exit(f"error: unknown option --{k}")
        over[k] = typed(k, v, fields[k].default)
    return over
