"""The papers' settings by name (settings.py): every setting against the values its paper gives,
copied here by hand with the sentence they come from; prepare.py --setting recording the name;
train.py --setting printing it and refusing data prepared otherwise; best-milestone reporting;
the lr sweep's pick.  Run: OMP_NUM_THREADS=1 python -m pytest -q tests/test_settings.py"""
import ast
import glob
import json
import os
import shutil

import pytest
import torch
from conftest import TINY_PYTHON, one_line

import prepare
import study
import train
from model import GPT, GPTConfig
from treerope import runs, settings, statistics, training
from treerope.runs import DEFAULTS
from treerope.settings import PREPARE, SETTINGS, Values, preparation, refusal

# name: (context, (layers, width, heads), non-embedding parameters in millions (None: not given),
#        peak lr, length, reporting rule), from the depth-perception appendix unless marked.
PAPER = {
    # "Python ... 4.7M-parameter model, 1,024-token context, about eight passes"; "Python's six layers",
    # "one head each in Python's two-head model", "A head of width 128"; "All four were best at 0.0012"
    "python": (1024, (6, 256, 2), 4.7, 1.2e-3, ("passes", 8), "final"),
    # "Spreadsheets ... 4.7M-parameter model, 4,096-token context, about eight passes"; "Spreadsheets:
    # 0.0012, carried over"; Figure 6 "all 12 heads" (6 layers x 2)
    "sheets": (4096, (6, 256, 2), 4.7, 1.2e-3, ("passes", 8), "final"),
    # "web pages ... whole pages of at most 2,048 tokens; 4.7M-parameter model, a third of a pass";
    # "a sweep of three rates (600 steps) on sequence + tree; 0.0012 was best"
    "web_pages": (2048, (6, 256, 2), 4.7, 1.2e-3, ("passes", 1 / 3), "final"),
    # "the larger web run ... at a 4,096-token context; 31.5M-parameter model, one full pass";
    # "(ten layers)", "the larger web run's four-head model"; "the larger web run: 0.0006"
    "web_large": (4096, (10, 512, 4), 31.5, 6e-4, ("passes", 1), "final"),
    # paper 004 Table 11: d_model 512, 8 layers, 8 heads, block size 1024, 5000 steps, lr 3e-4;
    # Table 12 reports the runs' validation loss, "all logged runs reached 5000 steps"
    **{f"hrope_{c}": (1024, (8, 512, 8), None, 3e-4, ("steps", 5000), "final")
       for c in ("prose", "code", "webtext")},
}
# reproduce_cpu.sh: STEPS=200 "x 16 records of <= 256 tokens"; HSTEPS=120 for the sheets; --milestones 10;
# 16 records, 128 val and 256 test records, 1,024-token micro-batches. name: (corpus, steps, (layers, width,
# heads), context, (lr, weight decay, min lr, dropout, patience)); the tree recipe or Table 11's at lr 1.2e-3
TREE, TABLE_11_CPU = (1.2e-3, 0.1, 0.1, 0.0, 0), (1.2e-3, 0.01, 0.01, 0.1, 10)
CPU = {"cpu_python": ("python", 200, (4, 128, 1), 256, TREE), "cpu_web": ("web", 200, (4, 128, 1), 256, TREE),
       "cpu_web_newline": ("web", 200, (4, 128, 1), 256, TREE),
       "cpu_programs": ("programs", 200, (4, 128, 1), 256, TREE),
       "cpu_sheets": ("sheets", 120, (4, 128, 1), 256, TREE),
       "cpu_prose": ("prose", 200, (4, 128, 2), 256, TABLE_11_CPU),
       "cpu_code": ("code", 200, (4, 128, 2), 256, TABLE_11_CPU),
       "cpu_webtext": ("webtext", 200, (4, 128, 2), 256, TABLE_11_CPU),
       "cpu_prose_1024": ("prose", 200, (4, 128, 2), 1024, TABLE_11_CPU),
       "cpu_code_1024": ("code", 200, (4, 128, 2), 1024, TABLE_11_CPU)}
# what every entry must list (its data's: those every corpus has; a corpus's own flags where it sets them)
LISTED = {*DEFAULTS, "vocab", "long", "split", "source", "per_config", "sweep"} - {
    "config", "seed", "setting", "name", "data", "out", "device", "compile", "bf16", "kernel", "resume",
    "checkpoint", "lr_sweep", "check", "budget", "depth_dropout"}


def meta_for(root, name, record=True):
    """A data root whose meta.json says what prepare.py --setting NAME records; record=False: the same
    flags given by hand, no setting named."""
    s = SETTINGS[name]
    os.makedirs(os.path.join(root, s["corpus"]), exist_ok=True)
    recorded = {**preparation(name), **({"setting": name} if record else {})}
    with open(os.path.join(root, s["corpus"], "meta.json"), "w") as f:
        json.dump({"settings": {**recorded, "corpus": s["corpus"],
                                "defaults": prepare.corpus(s["corpus"]).defaults()}}, f)
    return ["--data", str(root), "--device", "cpu"]


def parsed(*argv):
    return training.parse([*argv, "--device", "cpu"])[0][0]


def test_every_setting_is_the_papers():
    assert set(SETTINGS) == set(PAPER) | set(CPU)
    for name, (context, shape, millions, lr, (unit, length), report) in PAPER.items():
        s = SETTINGS[name]
        cfg = parsed("--setting", name)   # on CPU: still the paper's
        assert (cfg["max_len"], preparation(name)["max_len"]) == (context, context), name
        assert (cfg["n_layer"], cfg["n_embd"], cfg["n_head"]) == shape, name
        if millions:
            model = GPT(GPTConfig(n_layer=shape[0], n_embd=shape[1], n_head=shape[2], max_len=context,
                                  vocab_size=256))
            assert round(model.non_embedding_params() / 1e6, 1) == millions, name
        assert (cfg["lr"], cfg[unit], cfg["report"]) == (lr, length, report), name
        assert cfg["steps" if unit == "passes" else "passes"] is None
        # "Validation loss is scored every 5% of a run's planned steps ... on the same 1,024 validation
        # documents"; "micro-batches of at most 8,192 padded tokens" (paper 004's: a reading of these)
        assert (cfg["milestones"], cfg["val_docs"], cfg["mb_tokens"]) == (20, 1024, 8192), name
        assert s["source"]
    # appendix §4: weight decay 0.1, no dropout, no early stopping, in every depth-perception setting
    for name in ("python", "sheets", "web_pages", "web_large"):
        cfg = parsed("--setting", name)
        assert (cfg["weight_decay"], cfg["min_lr"], cfg["dropout"], cfg["patience"], cfg["pack"]) == \
            (0.1, 0.1, 0.0, 0, False), name
    # "A byte-pair tokenizer with 32,768 entries"; "The splits are contiguous record ranges over an
    # unshuffled corpus"
    assert SETTINGS["python"]["corpus"] == "programs"
    assert {k: preparation("python")[k] for k in ("vocab", "split")} == \
        {"vocab": 32768, "split": "contiguous"}
    # "The larger web run crops them, keeping the first 4,096 tokens; Web pages drops them"
    assert (preparation("web_large")["long"], preparation("web_pages")["long"]) == \
        ("crop", "drop")
    # "8,192 test documents for Python ..., 2,048 for the larger web run"
    assert [SETTINGS[n]["test_docs"] for n in ("python", "web_large", "sheets")] == \
        [8192, 2048, None]
    # "no position ... was run at 0.00015"; "the larger web run tree-only run, which diverged and is
    # reported at its best milestone"; every other configuration there at 0.0006, reported at the final step
    assert parsed("--setting", "web_large", "--config", "no_position")["lr"] == 1.5e-4
    t = parsed("--setting", "web_large", "--config", "tree_only")
    assert (t["lr"], t["report"]) == (6e-4, "best_milestone")
    assert parsed("--setting", "web_large", "--config", "seq_depth")["lr"] == 6e-4
    # the sweeps: "five rates (0.0003 to 0.0048, 560 steps each) on four configurations"; web pages "three
    # rates (600 steps) on sequence + tree"; none for spreadsheets ("not re-swept") or the larger web run
    assert SETTINGS["python"]["sweep"] == dict(
        rates=(3e-4, 6e-4, 1.2e-3, 2.4e-3, 4.8e-3), steps=560,
        configs=("seq_only", "tree_only", "tree_within", "seq_tree"))
    web_sweep = SETTINGS["web_pages"]["sweep"]
    assert (len(web_sweep["rates"]), web_sweep["steps"], web_sweep["configs"]) == (3, 600, ("seq_tree",))
    assert SETTINGS["sheets"]["sweep"] is None and SETTINGS["web_large"]["sweep"] is None
    # Table 11: batch 16, weight decay 0.01, min lr 0.01 x base, dropout 0.1, patience 10, 16 blocks of
    # 1,024 tokens a step (records packed)
    for c in ("prose", "code", "webtext"):
        h = parsed("--setting", f"hrope_{c}")
        assert (h["corpus"], h["docs_per_step"], h["pack"], h["weight_decay"], h["min_lr"], h["dropout"],
                h["patience"]) == (c, 16, True, 0.01, 0.01, 0.1, 10)


def test_cpu_settings_are_reproduce_cpu_sh():
    for name, (corpus, steps, shape, max_len, recipe) in CPU.items():
        cfg = parsed("--setting", name)
        assert (cfg["corpus"], cfg["steps"], (cfg["n_layer"], cfg["n_embd"], cfg["n_head"]), cfg["max_len"]) \
            == (corpus, steps, shape, max_len), name
        assert tuple(cfg[k] for k in ("lr", "weight_decay", "min_lr", "dropout", "patience")) == recipe, name
        assert (cfg["val_docs"], cfg["test_docs"], cfg["mb_tokens"], cfg["milestones"]) == \
            (128, 256, 1024, 10), name
        # context 1,024: 4 packed blocks a step, the 16 x 256 tokens of the other CPU settings
        assert (cfg["docs_per_step"], cfg["pack"]) == ((16, False) if max_len == 256 else (4, True)), name
        # the data: prepare.py's defaults at the setting's context (web_streams' other stream: a newline)
        blocks = "newline" if name == "cpu_web_newline" else PREPARE["blocks"]
        assert preparation(name) == {**PREPARE, "max_len": max_len, "blocks": blocks}, name


def test_a_run_is_the_defaults_then_one_flat_setting_then_the_flags(capsys):
    """settings.py: every entry lists every value it sets (no base it inherits from), and nothing else;
    a run takes the defaults, the setting over them, the flags given over both."""
    data_only = set(PREPARE) - {"max_len"}   # max_len: the model's context and the longest record both
    for name, s in SETTINGS.items():
        assert LISTED <= set(s), (name, LISTED - set(s))
        assert set(s) <= LISTED | data_only, (name, set(s) - LISTED - data_only)
    # flat: no entry is built from another (`dict(BASE, ...)`, `**BASE`), and no value depends on the device
    tree = ast.parse(open(settings.__file__).read())
    table = next(n.value for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "SETTINGS")
    calls = [n for n in ast.walk(table) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "dict"]
    assert calls and all(not c.args and all(k.arg for k in c.keywords) for c in calls)
    spread = [v for n in ast.walk(table) if isinstance(n, ast.Dict)
              for k, v in zip(n.keys, n.values) if k is None]
    assert all(isinstance(v, ast.DictComp) for v in spread)   # `**{f"cpu_{c}": dict(...) for c in ...}` only
    machine = ("device", "bf16", "compile", "kernel", "precision")
    for name in (None, "python", "hrope_code"):
        given = ["--setting", name] if name else []
        on = [{k: v for k, v in training.parse([*given, "--device", d])[0][0].as_dict().items()
               if k not in machine}
              for d in ("cpu", "cuda")]
        assert on[0] == on[1], name
    # the defaults: Values', the model's (model.GPTConfig's); no setting
    bare = parsed()
    assert {k: bare[k] for k in ("lr", "steps", "docs_per_step", "milestones", "n_layer", "n_head",
                                 "max_len", "setting")} == dict(lr=1.2e-3, steps=300, docs_per_step=16,
                                                                milestones=5, n_layer=4, n_head=1,
                                                                max_len=256, setting=None)
    assert (Values.lr, GPTConfig.n_layer) == (1.2e-3, 4)
    # a planted setting: what it lists replaces the default, a flag replaces both, the rest stays default
    planted = {**SETTINGS["cpu_web"], "lr": 7e-4, "n_head": 2, "milestones": 3}
    try:
        SETTINGS["planted"] = planted
        cfg = parsed("--setting", "planted", "--milestones", "4")
    finally:
        del SETTINGS["planted"]
    assert (cfg["lr"], cfg["n_head"], cfg["milestones"], cfg["depth_dropout"]) == (7e-4, 2, 4, 0.0)
    # one length: the one given
    web = parsed("--setting", "web_pages", "--steps", "7")
    assert (web["steps"], web["passes"]) == (7, None)
    assert parsed("--setting", "hrope_code", "--passes", "2")["steps"] is None
    with pytest.raises(SystemExit, match="--passes must be positive and finite, not nan"):
        parsed("--passes", "nan")   # round(nan * passes) would be a traceback at the plan
    # --help: every flag with its default and meaning, the model's fields among them
    with pytest.raises(SystemExit):
        training.parse(["--help"])
    shown = " ".join(capsys.readouterr().out.split())
    for line in ("--lr FLOAT peak learning rate (default: 0.0012)", "--steps INT optimiser steps",
                 "--passes FLOAT the length in passes", "(default: none)",
                 "--n_layer INT transformer blocks (default: 4)",
                 "--dropout FLOAT on embeddings, attention and residual branches (default: 0.0)",
                 "hrope_prose"):
        assert line in shown, line


def test_a_length_the_flags_cleared_is_said_to_come_from_the_flags():
    """Issue 71 M4: with --steps given, the values line said `setting python: ... passes=None`, as if the
    setting had no length in passes; the flag cleared it: its origin is the flags."""
    for flag, cleared in (("--steps", "passes"), ("--passes", "steps")):
        [(cfg, origin)] = training.parse(["--setting", "python", flag, "2"])
        assert cfg[cleared] is None and origin[cleared] == "given"
        line = training.origins([(cfg, origin)])
        setting, given = line.split("; given: ")
        assert f"{cleared}=" not in setting and f"{cleared}=None" in given, line


def test_the_values_line_of_several_runs_names_every_configuration_and_seed():
    """`--config seq_only seq_depth --seed 0 1` said `given: config=seq_only seed=0`, the first run's alone;
    each value given once is said once."""
    line = training.origins(training.parse(["--config", "seq_only", "seq_depth", "--seed", "0", "1", "--lr",
                                            "0.002"]))
    assert line == "values: given: config=seq_only,seq_depth seed=0,1 lr=0.002", line


def test_a_setting_is_its_values_not_its_name():
    """reproduce_cpu.sh trained code at the CPU scale with flags before cpu_code existed; the same values
    named by the setting resume it and pair with it; a value that differs is named."""
    flags = parsed("--corpus", "code", "--n_head", "2", "--dropout", "0.1", "--weight_decay", "0.01",
                   "--min_lr", "0.01", "--patience", "10", "--steps", "200", "--milestones", "10")
    named = parsed("--setting", "cpu_code")
    model = {k: named[k] for k in runs.MODEL}
    recorded = flags.as_dict()                                    # as config.json holds it
    assert runs.trained_otherwise(recorded, model, named, model) == []
    hotter = parsed("--setting", "cpu_code", "--lr", "3e-4")
    assert runs.trained_otherwise(recorded, model, hotter, model) == ["lr: 0.0012 there, 0.0003 now"]
    assert statistics.training({"run": recorded, "model": model}, []) == \
        statistics.training({"run": named.as_dict(), "model": model}, [])


@pytest.fixture(scope="module")
def cpu_python(tmp_path_factory):
    """The 40 committed standard-library files prepared by `prepare.py --setting cpu_python`."""
    src = tmp_path_factory.mktemp("src")
    for p in TINY_PYTHON:
        shutil.copy(p, src / os.path.basename(p))
    out = tmp_path_factory.mktemp("data")
    prepare.main(["--setting", "cpu_python", "--src", str(src), "--out", str(out), "--workers", "1"])
    return str(src), str(out)


SMALL = ["--steps=4", "--val_docs=8", "--test_docs=8", "--milestones=2", "--compile=0", "--bf16=0",
         "--n_layer=2"]


def test_prepare_records_the_setting(cpu_python, tmp_path, capsys):
    src, data = cpu_python
    recorded = json.load(open(os.path.join(data, "python", "meta.json")))["settings"]
    assert recorded["setting"] == "cpu_python" and (recorded["vocab"], recorded["max_len"]) == (4096, 256)
    # a flag that departs from the setting is applied, and the data is then no setting's
    prepare.main(["--setting", "cpu_python", "--src", src, "--out", str(tmp_path), "--workers", "1",
                  "--vocab", "512"])
    assert "--vocab 512 given, so meta.json records no setting" in capsys.readouterr().out
    other = json.load(open(os.path.join(tmp_path, "python", "meta.json")))["settings"]
    assert "setting" not in other and other["vocab"] == 512
    with pytest.raises(SystemExit, match="prepared with --vocab 512 where the setting has 4096"):
        train.main(["--setting", "cpu_python", "--data", str(tmp_path), "--out", str(tmp_path / "out"),
                    *SMALL])
    with pytest.raises(SystemExit):                             # the setting names its corpus
        prepare.main(["web", "--setting", "cpu_python", "--out", str(tmp_path)])


def test_train_prints_its_setting_and_reports_by_rule(cpu_python, tmp_path, capsys):
    _, data = cpu_python
    out = train.main(["--setting", "cpu_python", "--data", data, "--out", str(tmp_path), "--report",
                      "best_milestone", *SMALL])
    line = [text for text in capsys.readouterr().out.splitlines() if text.startswith("setting ")]
    assert line == [line[0]] and line[0].startswith("setting cpu_python: python, 2 layers, d=128, 1 head, "
                                                    "context 256, lr 0.0012, 4 steps x 16 records, "
                                                    "reported at its best milestone")
    assert "given: " in line[0] and "--steps" in line[0] and "--n_layer" in line[0]
    final = json.load(open(os.path.join(out, "final.json")))
    log = [json.loads(text) for text in open(os.path.join(out, "log.jsonl"))]
    best = min(log, key=lambda e: e["val_loss"])
    assert final["report"] == "best_milestone"
    assert final["reported"] == {"val_loss": best["val_loss"], "step": best["step"]}
    # without flags the line is the setting's own: 200 steps of 16 records, nothing given
    cfg = training.parse(["--setting", "cpu_python", "--data", data])[0][0]
    mcfg = GPTConfig()
    plain = training.setting_line(cfg, mcfg, training.per_step(cfg, mcfg))
    assert "200 steps x 16 records, reported at its final step" in plain and "given" not in plain


def test_train_refuses_data_prepared_for_another_setting(tmp_path):
    web = meta_for(tmp_path, "web_pages")
    for name in ("cpu_web", "web_large"):
        with pytest.raises(SystemExit) as e:
            training.plan(*training.parse(["--setting", name, *web])[0], False)
        assert "prepared for setting web_pages" in e.value.code and "\n" not in e.value.code
    # data prepared by hand (no setting named) serves a setting whose flags it has (and then stops at
    # its missing arrays), and no other
    hand = meta_for(tmp_path / "hand", "cpu_web", record=False)
    with pytest.raises(SystemExit, match="from an older prepare.py"):
        training.plan(*training.parse(["--setting", "cpu_web", *hand])[0], False)
    with pytest.raises(SystemExit, match="--max_len 256 where the setting has 2048"):
        training.plan(*training.parse(["--setting", "web_pages", *hand])[0], False)
    with pytest.raises(SystemExit, match="trains the web corpus, not python"):
        training.parse(["--setting", "web_pages", "--corpus", "python", *web])
    # flags win
    assert training.parse(["--setting", "web_pages", "--lr", "3e-3", "--steps", "7", *web])[0][0].lr == 3e-3
    assert training.parse(["--setting", "web_pages", "--steps", "7", *web])[0][0].passes is None


def test_the_two_web_streams_differ_in_the_join_alone(tmp_path):
    """reproduce_cpu.sh web_streams compares the space- and newline-joined streams: cpu_web_newline is
    cpu_web's values but --blocks newline, so each stream's data serves its setting and not the other's,
    and the two settings' runs (on one data) have one training key: they would pair."""
    assert {k: v for k, v in SETTINGS["cpu_web_newline"].items() if k not in ("blocks", "source")} == \
        {k: v for k, v in SETTINGS["cpu_web"].items() if k != "source"}
    assert [preparation(n)["blocks"] for n in ("cpu_web", "cpu_web_newline")] == ["space", "newline"]
    newline = meta_for(tmp_path / "newline", "cpu_web_newline", record=False)
    with pytest.raises(SystemExit, match="--blocks newline where the setting has space"):
        training.plan(*training.parse(["--setting", "cpu_web", *newline])[0], False)
    with pytest.raises(SystemExit, match="from an older prepare.py"):   # past the refusal: its arrays
        training.plan(*training.parse(["--setting", "cpu_web_newline", *newline])[0], False)
    cfgs = [parsed("--setting", n, "--compile=0", "--bf16=0") for n in ("cpu_web", "cpu_web_newline")]
    model = {k: cfgs[0][k] for k in runs.MODEL}
    assert runs.trained_otherwise(cfgs[0].as_dict(), model, cfgs[1], model) == []
    assert statistics.training({"run": cfgs[0].as_dict(), "model": model}, []) == \
        statistics.training({"run": cfgs[1].as_dict(), "model": model}, [])


def test_contiguous_split_is_three_ranges(cpu_python, tmp_path):
    names = [f"m{i:03d}" for i in range(100)]
    split = prepare.contiguous_split(names)
    assert [split[n] for n in names] == ["train"] * 90 + ["val"] * 5 + ["test"] * 5
    # prepare.py --setting python: the programs in source order, train first, then val, then test
    prepare.main(["--setting", "python", "--src", cpu_python[0], "--out", str(tmp_path),
                  "--workers", "1"])
    d = os.path.join(tmp_path, "programs")
    recorded = json.load(open(os.path.join(d, "meta.json")))["settings"]
    assert (recorded["setting"], recorded["split"], recorded["vocab"], recorded["max_len"]) == \
        ("python", "contiguous", 32768, 1024)
    packages = json.load(open(os.path.join(d, "meta.json")))["split_packages"]
    assert packages["train"] > packages["val"] >= 1 and packages["test"] >= 1
    # three packages of 40 modules, in path order: ranges of an order that takes each package in turn,
    # so validation and test hold all three (in path order both would be package c alone)
    names = [f"0/{p}/m{i:03d}.py::f" for p in "abc" for i in range(40)]
    split = prepare.contiguous_split(names)
    for s in ("val", "test"):
        assert {n.split("/")[1] for n in names if split[n] == s} == {"a", "b", "c"}
    assert sum(split[n] == "train" for n in names) == 108 and split["0/a/m000.py::f"] == "train"


def test_reported_loss_follows_the_rule():
    log = [{"step": 5, "val_loss": 3.0}, {"step": 10, "val_loss": 2.5},
           {"step": 15, "val_loss": float("nan")}, {"step": 20, "val_loss": 2.9}]
    assert training.reported(log, "final") == (2.9, 20)
    assert training.reported(log, "best_milestone") == (2.5, 10)


def test_a_diverged_best_milestone_run_is_reported(cpu_python, tmp_path, monkeypatch):
    """Under best_milestone a non-finite loss after a milestone ends the run with final.json
    (diverged_at, reported at that milestone); with no milestone yet there is nothing to report: exit 2
    and no final.json, as under the final-step rule."""
    _, data = cpu_python
    args = ["--setting", "cpu_python", "--data", data, "--report", "best_milestone", *SMALL]
    with pytest.raises(SystemExit) as e:
        train.main([*args, "--out", str(tmp_path / "at_once"), "--lr=1e30"])
    assert e.value.code == 2
    assert not glob.glob(str(tmp_path / "at_once" / "**" / "final.json"), recursive=True)
    milestone = training.milestone
    def poisoned(run, *a):
        stop = milestone(run, *a)
        with torch.no_grad():
            run.model.wte.weight[0, 0] = float("nan")      # the next step's loss is not finite
        return stop
    monkeypatch.setattr(train, "milestone", poisoned)
    out = train.main([*args, "--out", str(tmp_path / "later")])
    final = json.load(open(os.path.join(out, "final.json")))
    assert final["diverged_at"] is not None and final["report"] == "best_milestone"
    assert final["reported"]["step"] is not None and final["reported"]["step"] < final["diverged_at"] + 1


def test_pick_lr_takes_the_lowest_mean_over_configurations():
    # a prefers 1e-3, b 2e-3
    losses = {("a", 1e-3): 1.0, ("a", 2e-3): 2.0, ("b", 1e-3): 3.0, ("b", 2e-3): 1.5}
    assert runs.pick_lr(losses) == 2e-3


def test_lr_sweep_runs_every_rate_and_picks(cpu_python, tmp_path, monkeypatch, capsys):
    _, data = cpu_python
    with pytest.raises(SystemExit, match="swept: python, web_pages"):
        train.main(["--setting", "cpu_python", "--lr_sweep=1", "--data", data])
    sweep = dict(rates=(1e-6, 3e-3, 1e30), steps=3, configs=("seq_only",))   # 1e30 diverges
    monkeypatch.setitem(SETTINGS, "cpu_python", {**SETTINGS["cpu_python"], "sweep": sweep})
    argv = ["--setting", "cpu_python", "--lr_sweep=1", "--data", data, "--out", str(tmp_path), *SMALL[1:]]
    assert train.main(argv) == 3e-3
    record = json.load(open(os.path.join(tmp_path, "lr_sweep", "python", "lr_sweep.json")))
    assert record["steps"] == 3 and record["picked"] == 3e-3
    losses = {r["lr"]: r["val_loss"] for r in record["losses"]}
    assert losses[1e30] == float("inf") and losses[3e-3] < losses[1e-6]
    assert "picked lr 0.003" in capsys.readouterr().out
    assert os.path.exists(os.path.join(tmp_path, "lr_sweep", "python", "seq_only_lr0.003", "seed0",
                                       "final.json"))


def test_a_sweep_reuses_a_run_only_where_train_py_would(cpu_python, tmp_path, monkeypatch, capsys):
    """Issue 71 W1: a sweep at --steps 1, then at --steps 2, read back the 1-step runs' final.json
    unchecked, and tabled and recorded their losses as 2-step ones. A finished run is reused only where
    train.py would leave it as it is (training.finished_alike): refused here, trained again with
    --resume=0, the table and lr_sweep.json then the 2-step run's."""
    _, data = cpu_python
    sweep = dict(rates=(3e-3,), steps=3, configs=("seq_only",))
    monkeypatch.setitem(SETTINGS, "cpu_python", {**SETTINGS["cpu_python"], "sweep": sweep})
    argv = ["--setting", "cpu_python", "--lr_sweep=1", "--data", data, "--out", str(tmp_path), *SMALL[1:],
            "--docs_per_step=2", "--val_docs=2", "--test_docs=2", "--milestones=1"]
    train.main([*argv, "--steps=1"])
    run = os.path.join(tmp_path, "lr_sweep", "python", "seq_only_lr0.003", "seed0")
    one_step = json.load(open(os.path.join(run, "final.json")))["val_loss"]
    one_line(lambda: train.main([*argv, "--steps=2"]), run, "steps: 1 there, 2 now", "--resume=0")
    train.main([*argv, "--steps=2", "--resume=0"])
    record = json.load(open(os.path.join(tmp_path, "lr_sweep", "python", "lr_sweep.json")))
    two_steps = json.load(open(os.path.join(run, "final.json")))
    assert two_steps["step"] == 2 and two_steps["val_loss"] != one_step
    assert record["steps"] == 2 and record["losses"][0]["val_loss"] == two_steps["val_loss"]


def test_older_programs_data_reads_as_the_old_stream():
    """Programs data written before --stream existed was the old stream: the python setting (compact)
    refuses it by name; other corpora never had the flag and are not refused for it."""
    older = {"corpus": "programs", **preparation("python")}
    del older["stream"]
    assert refusal("python", older) == \
        "it was prepared with --stream old where the setting has compact"
    assert refusal("python", {**older, "stream": "compact"}) is None
    web = {k: v for k, v in preparation("web_pages").items() if k != "stream"}
    assert refusal("web_pages", {"corpus": "web", **web}) is None


def test_a_study_says_its_plan_once(cpu_python, tmp_path, capsys):
    """A study of 2 configurations x 2 seeds trains four runs of one data set and one model size: the
    precision, values, setting and run lines train.py says are said once, by the first run, not four
    times."""
    _, data = cpu_python
    train.main(study.arguments(["python", "seq_only seq_depth", "0 1", "--setting", "cpu_python", "--data",
                                data, "--out", str(tmp_path), *SMALL, "--steps=1", "--milestones=1"]))
    said = capsys.readouterr().out.splitlines()
    for start in ("precision:", "values:", "setting cpu_python:", "python / "):
        assert sum(line.startswith(start) for line in said) == 1, (start, said)
    first = next(line for line in said if line.startswith("python / "))
    assert first.startswith("python / seq_only / seed 0 ") and "4 runs at once" in "\n".join(said)
