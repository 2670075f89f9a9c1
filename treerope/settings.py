"""A run's values, in one place: the defaults with their meaning (`Values`, and the model's in
model.GPTConfig), the papers' settings by name (`SETTINGS`: each one flat entry listing every value it
sets, its data's included), and nothing else. A run is the defaults <- one setting <- the flags given:

    python train.py --config seq_depth                   # the defaults: the CPU scale, minutes on 2 cores
    python prepare.py --setting web_pages                # a setting's data; meta.json records its name
    python train.py --setting web_pages --config seq_depth --seed 3 --steps 100
    python train.py --setting python --lr_sweep=1        # the paper's lr sweep for the setting

Three words, three things: a configuration (--config) is the rotary's planes (rotary.py); a setting
(--setting) is one of the papers' runs; the recipe is the optimiser and schedule a setting lists (the
appendix §4's or paper 004 Table 11's). train.py refuses data prepared for another setting. Where a
paper leaves a value open the entry says so and keeps this repository's default.
"""
import argparse
import dataclasses
from dataclasses import dataclass, field

# The corpora by name, each with its module in treerope/corpora/ (prepare.py reads only that one)
CORPORA = {"python": ".python", "programs": ".programs", "web": ".web", "sheets": ".sheets",
           "web_sheets": ".sheets", "prose": ".paragraphs", "code": ".paragraphs", "webtext": ".paragraphs",
           "chat": ".chat", "json": ".formats", "xml": ".formats", "markdown": ".formats"}


class Parser(argparse.ArgumentParser):
    """The scripts' command lines: a refusal is one line (exit 2, argparse's), not its usage block."""
    def error(self, message):
        self.exit(2, f"error: {message}\n")


def at_least_one(text):
    """A flag's whole number of at least 1 (bootstrap draws, the pairs a cell needs): 0 draws is no
    interval, a gate of 0 passes a cell without a pair."""
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {n}")
    return n


def value(default, meaning):
    return field(default=default, metadata={"help": meaning})


def kept(default=None):
    """A value train.py sets as it plans the run (not a flag): config.json keeps it."""
    return field(default=default, metadata={"flag": False})


# A seed (train.py, study.py, sample.py) and a run's steps are below it: a row's generator is seeded from
# (seed, step, row) (batches.row_generator), and torch.manual_seed takes < 2**64 (numpy's default_rng, any)
SEED_LIMIT = 2 ** 32


@dataclass
class Values:
    """A run's values, each with its default and meaning (`python train.py --help` prints both); the
    model's are model.GPTConfig's fields, in `model` (a field a fork adds there is a value, and a flag,
    too). The defaults are the CPU scale: the appendix §4 recipe on a 4-layer model, 300 steps of 16
    records, minutes on 2 cores. `parse` (treerope/training.py) makes one: the defaults <- a setting <-
    the flags given."""
    # what is trained, and where it is written
    corpus: str = value("web", "the prepared corpus: data/<corpus>/ (treerope/corpora/)")
    config: str = value("seq_only", "the rotary configuration (`python rotary.py` lists them)")
    seed: int = value(0, "initial weights and batch order: the same in every configuration")
    setting: str = value(None, "one of the papers' runs by name (SETTINGS): its values replace the defaults")
    name: str = value(None, "the run's folder instead of the configuration's (a variant)")
    data: str = value("data", "the folder holding the prepared corpora")
    out: str = value("out", "runs are written to <out>/<corpus>/<name or config>/seed<k>")
    # the recipe (appendix §4): AdamW (0.9, 0.95), warm-up over 2% of the steps, cosine to min_lr x lr
    lr: float = value(1.2e-3, "peak learning rate")
    weight_decay: float = value(0.1, "AdamW's, on weight matrices only")
    min_lr: float = value(0.1, "the cosine's floor, a fraction of the peak")
    patience: int = value(0, "milestones without a better validation loss before an early stop (0: never)")
    depth_dropout: float = value(0.0, "the share of records whose depth coordinate is hidden in training")
    # the length and the batch
    steps: int = value(300, "optimiser steps (or give --passes)")
    passes: float = value(None, "the length in passes over the train split, instead of --steps")
    docs_per_step: int = value(16, "records a step (with --pack: blocks of the context)")
    pack: bool = value(False, "records packed into blocks of the context (a reading of paper 004's batches)")
    mb_tokens: int = value(1024, "padded tokens a micro-batch at most (1,024: fastest on 2 cores)")
    # evaluation
    milestones: int = value(5, "validations, evenly spaced, the last at the final step")
    val_docs: int = value(128, "the fixed validation records of every milestone")
    test_docs: int = value(256, "test records scored at the end (a setting's none: the whole split)")
    report: str = value("final", "the reported validation loss: final, or best_milestone")
    # the machine, and its fast paths (machine.switches: each one's measured default and why)
    device: str = value(None, "cpu, cuda or mps (none: cuda where there is one)")
    compile: bool = value(None, "torch.compile the model (none: the machine's measured choice)")
    bf16: bool = value(None, "bf16 autocast (none: the machine's measured choice)")
    kernel: bool = value(None, "the fused Triton rotation, checked against the readable one (none: the "
                               "machine's measured choice, off)")
    resume: bool = value(True, "go on from the run's checkpoint (0: start it over)")
    checkpoint: bool = value(True, "write ckpt.pt at milestones (0: a benchmark's runs, no 157 MB writes)")
    # what the command does with its runs
    lr_sweep: bool = value(False, "run the setting's learning-rate sweep instead")
    check: bool = value(False, "plan every run and check the finished ones; train nothing")
    budget: float = value(None, "seconds: time the runs' first steps, then train the seeds that fit")
    # set as the run is planned
    model: object = kept()          # its model.GPTConfig (parse makes it; plan adds the data's vocabulary)
    given: list = kept(())          # the flags given (config.json: which values were)
    precision: str = kept()         # the machine's fast paths, and why (machine.switches)
    data_identity: dict = kept()    # the prepared data's (prepared.identity)
    tokenizer: str = kept()         # its tokenizer.json's hash
    draws: str = kept("rows")       # a row's random draws, from its own generator (batches.drawn)

    def __getitem__(self, k):       # the values by name, the model's among them (config.json's "run")
        return getattr(self, k) if k in VALUES else getattr(self.model, k)

    def as_dict(self):
        """config.json's "run": every value by name, the model's among them (but those the data and
        --config give it)."""
        model = {f.name: getattr(self.model, f.name) for f in dataclasses.fields(self.model)
                 if f.name not in ("vocab_size", "configuration", "corpus")}
        return {**{k: getattr(self, k) for k in VALUES if k != "model"}, **model}


VALUES = {f.name: f for f in dataclasses.fields(Values)}
FLAGS = {k: f for k, f in VALUES.items() if f.metadata.get("flag", True)}


# The model's values are model.GPTConfig's fields, each a flag of train.py and study.py (a field a fork
# adds too, shown with its default alone); what each means:
MODEL_HELP = dict(n_layer="transformer blocks", n_embd="the residual stream's width",
                  n_head="attention heads, each n_embd / n_head wide (turned in pairs)",
                  max_len="the context in tokens (and prepare.py's longest record)",
                  dropout="on embeddings, attention and residual branches")

# prepare.py's values that shape the data, at their defaults (the CPU scale: max_len is the model's
# context, so no record is cropped in training). A departure: long="split" cuts a longer document into
# records that may train in different steps (§4: "No document is split across steps"; documents_split)
PREPARE = dict(vocab=4096, max_len=256, long="split", split="hash", units="module", render="values",
               blocks="space", stream="compact", max_programs=30_000)
# What data prepared before a flag existed was made with, where that is not the flag's default.
BEFORE = {("programs", "stream"): "old", ("programs", "max_programs"): 30_000}

# ------------------------------------------------------------------------ the papers' settings ----
# The papers' runs by name (the appendix's glossary: "One corpus trained at one model size, context
# length and training length"; paper 004 Table 11), and the CPU scale-downs scripts/reproduce_cpu.sh
# trains. Each entry lists every value it sets: its data (prepare.py's), its model (max_len is both the
# context and the longest record), its recipe, its length and batch, its evaluation and reporting rule.
# Appendix §4, every depth-perception setting: AdamW, weight decay 0.1, no dropout, no early stop,
# micro-batches of at most 8,192 padded tokens, validation every 5% of the planned steps (20
# milestones) on the same 1,024 documents, results at the final step. The batch (64 records) is not
# given: ours. A reading: compile and bf16 are the machine's (machine.precision: on CUDA both, as §4),
# not an entry's, and web_pages compiles too: its rows are laid to one shape (§4 left it eager for its
# "documents of many different lengths").
SETTINGS = {
    "python": dict(
        corpus="programs", source="appendix, Python: 423,111 programs; 4.7M-parameter model, 1,024-token "
                                  "context, about eight passes",
        # "A byte-pair tokenizer with 32,768 entries"; "The splits are contiguous record ranges over an
        # unshuffled corpus" (§2): the paper's own splits, idiosyncratic as §2 says, kept to reproduce it
        # a departure (PREPARE): a program past 1,024 tokens is split into records, not kept whole (§4)
        vocab=32768, max_len=1024, long="split", split="contiguous", max_programs=0,
        n_layer=6, n_embd=256, n_head=2, dropout=0.0,
        lr=1.2e-3, weight_decay=0.1, min_lr=0.1, patience=0,
        steps=None, passes=8, docs_per_step=64, pack=False, mb_tokens=8192,
        milestones=20, val_docs=1024, test_docs=8192, report="final", per_config={},
        # "a sweep of five rates (0.0003 to 0.0048, 560 steps each) on four configurations — sequence
        # only, tree only, tree + within-node index and sequence + tree. All four were best at 0.0012."
        sweep=dict(rates=(3e-4, 6e-4, 1.2e-3, 2.4e-3, 4.8e-3), steps=560,
                   configs=("seq_only", "tree_only", "tree_within", "seq_tree"))),
    "sheets": dict(
        corpus="sheets", source="appendix, Spreadsheets: 41,245 workbooks; 4.7M-parameter model, 4,096-token "
                                "context, about eight passes",
        # a reading: the BPE's size is not given; a departure (PREPARE): a workbook past 4,096 tokens is split
        vocab=4096, max_len=4096, long="split", split="hash", render="values",
        n_layer=6, n_embd=256, n_head=2, dropout=0.0,
        lr=1.2e-3, weight_decay=0.1, min_lr=0.1, patience=0,
        steps=None, passes=8, docs_per_step=64, pack=False, mb_tokens=8192,
        # a reading: §4 sizes Python's and the larger web run's test sets only: the whole test split
        milestones=20, val_docs=1024, test_docs=None, report="final", per_config={},
        sweep=None),   # "0.0012, carried over from a sweep on an earlier build of the spreadsheet corpus"
    "web_pages": dict(
        corpus="web", source="appendix, web pages: whole pages of at most 2,048 tokens; 4.7M-parameter "
                             "model, a third of a pass",
        # "whole pages of at most 2,048 tokens"; "Web pages drops them, so every web pages page is seen whole"
        vocab=4096, max_len=2048, long="drop", split="hash",   # a reading: the BPE's size is not given
        n_layer=6, n_embd=256, n_head=2, dropout=0.0,
        lr=1.2e-3, weight_decay=0.1, min_lr=0.1, patience=0,
        steps=None, passes=1 / 3, docs_per_step=64, pack=False, mb_tokens=8192,
        # a reading: §4 sizes Python's and the larger web run's test sets only: the whole test split
        milestones=20, val_docs=1024, test_docs=None, report="final", per_config={},
        # "a sweep of three rates (600 steps) on sequence + tree; 0.0012 was best": the three rates are
        # not given; our reading takes the Python grid's three around 0.0012
        sweep=dict(rates=(6e-4, 1.2e-3, 2.4e-3), steps=600, configs=("seq_tree",))),
    "web_large": dict(
        corpus="web", source="appendix, the larger web run: a 4,096-token context; 31.5M-parameter model, "
                             "one full pass over 25.4 billion tokens",
        # "crops them, keeping the first 4,096 tokens"; a reading: the BPE's size is not given
        vocab=4096, max_len=4096, long="crop", split="hash",
        n_layer=10, n_embd=512, n_head=4, dropout=0.0,
        lr=6e-4, weight_decay=0.1, min_lr=0.1, patience=0,
        steps=None, passes=1, docs_per_step=64, pack=False, mb_tokens=8192,
        milestones=20, val_docs=1024, test_docs=2048, report="final",
        # "The exception is no position, which diverged at 0.0006 and 0.0003 in preliminary runs and was
        # run at 0.00015"; its tree-only run "diverged and is reported at its best milestone"
        per_config={"no_position": dict(lr=1.5e-4), "tree_only": dict(report="best_milestone")},
        sweep=None),
    # paper 004 Table 11: "held fixed across all model variants ... and corpora": 8 layers, 8 heads,
    # d_model 512, block size 1024, batch 16, 5000 steps, lr 3e-4, weight decay 0.01, min lr 0.01 x base,
    # dropout 0.1, early stopping after 10 evaluations; a step of 16 blocks of 1,024 tokens, records
    # packed into them: our reading (Table 11 gives "Block size 1024" and "Batch size 16" alone)
    **{f"hrope_{c}": dict(
        corpus=c, source=f"paper 004 Table 11, {name}: 8 layers, 8 heads, d_model 512, batch 16, 5000 "
                         "steps, lr 3e-4",
        # a reading: the BPE's size is not given (webtext: C.2's ≈9B / ≈4.4M tokens are nanoGPT's GPT-2
        # files, so GPT-2's 50,257-entry BPE is the sound inference; not fetchable offline: REFERENCE)
        vocab=4096, max_len=1024, long="split", split="hash",
        n_layer=8, n_embd=512, n_head=8, dropout=0.1,
        # a reading: Table 11 gives "AdamW (weight decay 0.01)" alone: the betas (0.9, 0.95) and decay on
        # weight matrices only are the appendix's (§4, training.setup and param_groups)
        lr=3e-4, weight_decay=0.01, min_lr=0.01, patience=10,
        steps=5000, passes=None, docs_per_step=16, pack=True, mb_tokens=8192,
        # a reading: Table 11 gives no evaluation interval, validation set, micro-batch or test set:
        # appendix §4's, and the whole test split (Table 12 reports validation loss)
        milestones=20, val_docs=1024, test_docs=None, report="final", per_config={}, sweep=None)
       for c, name in (("prose", "WikiText-2"), ("code", "Code"), ("webtext", "OpenWebText"))},
    # the CPU scale-downs, as reproduce_cpu.sh trains them: 4 layers, d=128, context 256, 200 steps of 16
    # records, 10 milestones on 128 validation records, 256 test records (RESULTS.md)
    **{f"cpu_{c}": dict(
        corpus=c, source=f"reproduce_cpu.sh: python prepare.py {c}",
        vocab=4096, max_len=256, long="split", split="hash",
        n_layer=4, n_embd=128, n_head=1, dropout=0.0,
        lr=1.2e-3, weight_decay=0.1, min_lr=0.1, patience=0,
        steps=120 if c == "sheets" else 200, passes=None, docs_per_step=16, pack=False, mb_tokens=1024,
        milestones=10, val_docs=128, test_docs=256, report="final", per_config={}, sweep=None)
       for c in ("python", "web", "programs", "sheets")},   # sheets: 120 steps of SYNTHETIC workbooks
    # cpu_web on the other stream, its blocks joined by a newline: the controlled stream comparison
    # (reproduce_cpu.sh web_streams) trains the two streams alike but for the join
    "cpu_web_newline": dict(
        corpus="web", source="reproduce_cpu.sh web_streams: python prepare.py web --blocks newline "
                             "(cpu_web's values, blocks joined by a newline instead of a space)",
        vocab=4096, max_len=256, long="split", split="hash", blocks="newline",
        n_layer=4, n_embd=128, n_head=1, dropout=0.0,
        lr=1.2e-3, weight_decay=0.1, min_lr=0.1, patience=0,
        steps=200, passes=None, docs_per_step=16, pack=False, mb_tokens=1024,
        milestones=10, val_docs=128, test_docs=256, report="final", per_config={}, sweep=None),
    # Table 11 at the CPU scale: two 64-wide heads, its recipe with the appendix's peak lr (at 3e-4 a
    # CPU-scale run is too short for the p1 channel to matter: REFERENCE.md "Recipes"), a record a row
    **{f"cpu_{c}": dict(
        corpus=c, source="reproduce_cpu.sh ten_hrope: Table 11 at the CPU scale, lr 1.2e-3",
        vocab=4096, max_len=256, long="split", split="hash",
        n_layer=4, n_embd=128, n_head=2, dropout=0.1,
        lr=1.2e-3, weight_decay=0.01, min_lr=0.01, patience=10,
        steps=200, passes=None, docs_per_step=16, pack=False, mb_tokens=1024,
        milestones=10, val_docs=128, test_docs=256, report="final", per_config={}, sweep=None)
       for c in ("prose", "code", "webtext")},
    # Layer II at paper 004's context: records of 1,024 tokens packed as Table 11's batches, 4 blocks a
    # step (the 256-token setting's tokens per step); a packed 256-token record would add no context
    **{f"cpu_{c}_1024": dict(
        corpus=c, source="reproduce_cpu.sh layer2_1024: Table 11 at the CPU scale, context 1,024",
        vocab=4096, max_len=1024, long="split", split="hash",
        n_layer=4, n_embd=128, n_head=2, dropout=0.1,
        lr=1.2e-3, weight_decay=0.01, min_lr=0.01, patience=10,
        steps=200, passes=None, docs_per_step=4, pack=True, mb_tokens=1024,
        milestones=10, val_docs=128, test_docs=256, report="final", per_config={}, sweep=None)
       for c in ("prose", "code")},
}


def preparation(name):
    """The prepare.py values a setting's data is made with (its own, the defaults elsewhere)."""
    return {k: SETTINGS[name].get(k, v) for k, v in PREPARE.items()}


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
