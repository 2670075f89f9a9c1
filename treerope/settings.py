"""Every run's values by name: the defaults, the device scales, the recipes, the model sizes and the
flags that shape prepared data. The papers' settings (a corpus at one model size, context and
length: the appendix's glossary) are entries in paper_settings.py, read with --setting:

    python prepare.py --setting web_pages               # prepares data/web; meta.json records the name
    python train.py --setting web_pages --config seq_depth --seed 3
    python train.py --setting python --lr_sweep=1       # the paper's lr sweep for the setting

Without --setting a run takes its device's scale (SCALES: the CPU scale on a CPU or a laptop's
GPU, the GPU scale on CUDA) and its corpus's recipe and model; train.py prints where each value
came from. train.py refuses data prepared for another setting. Where a paper leaves a value open
the entry says so and keeps this repository's default.
"""

DEFAULTS = dict(   # every value a train.py run has; the scales, recipes and settings below change some
    corpus="web", config="seq_only", name=None, seed=0, preset=None, recipe=None, data="data", out="out",
    steps=None, docs_per_step=None, lr=None, weight_decay=None, min_lr=None, dropout=None, patience=None,
    mb_tokens=8192, val_docs=1024, test_docs=None, milestones=20, depth_dropout=0.0, compile=None, bf16=None,
    device=None, resume=True, setting=None, passes=None, report="final", lr_sweep=False, pack=False,
)

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
