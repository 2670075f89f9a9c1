import dataclasses
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch

import bench
import prepare
import study
import train
from model import GPT, GPTConfig
from treerope import batches, ensemble, machine, runs, tokenizer, training
from treerope.prepared import corpus_stats, load_split

TINY = ["--n_layer=2", "--n_embd=128", "--n_head=1", "--max_len=64", "--docs_per_step=4",
        "--val_docs=8", "--test_docs=8", "--compile=0", "--bf16=0", "--milestones=4", "--mb_tokens=128"]
# eager fp32 keeps these tests fast and exact;
# test_default_cpu_path_takes_the_machines_precision covers the default


def run(data, out, config="seq_only", steps=8, extra=()):
    return train.main(["--corpus", "python", "--config", config, "--data", data, "--out", out,
                       f"--steps={steps}", *TINY, *extra])


def test_prepared_data_on_disk(tiny_python):
    d = os.path.join(tiny_python, "python")
    meta = json.load(open(os.path.join(d, "meta.json")))
    assert meta["documents"] > 30 and not meta["synthetic"]
    a = load_split(d, "train")
    n = len(a["tokens"])
    assert a["path"].shape == (n, 22) and a["ref_path"].shape == (n, 22)
    assert a["doc_start"][-1] == n and (np.diff(a["doc_start"]) <= 256).all()
    assert (a["depth"] >= 1).all()                         # every Python token has a node
    assert a["label"].shape == (n,) and a["grid"].shape == (n, 2)
    assert (a["label"] >= 0).all() and (a["grid"] >= 0).all()  # every Python token has a type and a statement
    assert ((a["path"] >= 0).sum(1) == np.minimum(a["depth"], 22)).all()
    enc = tokenizer.load(d)
    # idempotent: a second run is a no-op
    src = meta["settings"]["sources"][0]
    assert prepare.main(["python", "--src", src, "--out", tiny_python, "--vocab", "512",
                         "--max_len", "256", "--workers", "1"]) == d
    assert enc.decode(a["tokens"][:50].tolist())


def test_missing_source_is_a_clear_error(tmp_path):
    with pytest.raises(SystemExit) as e:
        prepare.main(["python", "--src", str(tmp_path / "nope"), "--out", str(tmp_path)])
    assert "does not exist" in str(e.value)
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit) as e:
        prepare.main(["python", "--src", str(tmp_path / "empty"), "--out", str(tmp_path)])
    assert "no .py files" in str(e.value)


def test_identical_init_across_configurations():
    states = []
    for name in ("seq_only", "seq_depth", "seq_tree_depth", "no_position"):
        torch.manual_seed(3)
        m = GPT(GPTConfig(vocab_size=300, n_layer=2, n_embd=128, n_head=1, configuration=name))
        states.append({k: v for k, v in m.state_dict().items() if not k.startswith("rotary")})
    for s in states[1:]:
        assert s.keys() == states[0].keys()
        assert all(torch.equal(s[k], states[0][k]) for k in s)


def test_batches_identical_across_configurations_and_packing():
    a = batches.step_records(1000, 16, 7, seed=0)
    assert (a == batches.step_records(1000, 16, 7, seed=0)).all()
    assert not (a == batches.step_records(1000, 16, 7, seed=1)).all()
    lengths = np.array([5, 300, 40, 41, 1000, 7, 99, 100])
    groups = batches.by_length(lengths, 1024)
    assert sorted(i for g in groups for i in g) == list(range(8))      # whole step covered
    for g in groups:
        assert max(lengths[g]) * len(g) <= 1024                         # within the budget


def test_blocks_fill_by_hand():
    """fill_blocks: lengths 5 3 4 2 6 in a block of 8 with 2 open blocks: 5 opens block 0 (room 3),
    3 fills it, 4 opens block 1 (room 4), 2 goes to block 1 (block 0 is full), 6 fits neither: block 2.
    Lengths 6 5 2: with two open blocks the 2 goes back into block 0; with one (next-fit), into block 1."""
    assert batches.fill_blocks(range(5), [5, 3, 4, 2, 6], 8, 2) == [[0, 1], [2, 3], [4]]
    assert batches.fill_blocks(range(3), [6, 5, 2], 8, 2) == [[0, 2], [1]]
    assert batches.fill_blocks(range(3), [6, 5, 2], 8, 1) == [[0], [1, 2]]
    at, per_pass = batches.step_blocks(np.array([300, 700, 200, 900, 100, 1000, 24] * 30), 1024, 4, seed=3)
    seen = [r for step in range(per_pass) for b in at(step) for r in b]
    assert len(seen) == len(set(seen))                                # a record once per pass
    assert all(len(at(s)) == 4 for s in range(per_pass + 3))          # and on into the next pass
    assert at(per_pass) != at(0)                                      # a new permutation each pass


def test_run_records_its_provenance(tiny_python, tmp_path):
    import subprocess
    run = train.main(["--corpus", "python", "--config", "seq_only", "--data", tiny_python, "--out",
                      str(tmp_path), "--steps=1", *TINY])
    prov = json.load(open(os.path.join(run, "config.json")))["provenance"]
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                          cwd=os.path.dirname(os.path.abspath(train.__file__))).stdout.strip()
    assert prov["commit"] == (head or None) and prov["torch"] == torch.__version__ and prov["device"] == "cpu"
    assert isinstance(prov["dirty"], bool) or prov["commit"] is None


def test_lr_schedule():
    peak, steps = 1e-3, 1000
    assert training.lr_at(0, steps, peak) == pytest.approx(peak / 20)
    assert training.lr_at(19, steps, peak) == pytest.approx(peak)           # end of 2% warmup
    assert training.lr_at(20, steps, peak) == pytest.approx(peak)
    assert training.lr_at(999, steps, peak) == pytest.approx(0.1 * peak)    # 10% of peak at the end


def test_lr_schedule_is_a_cosine_between_warmup_and_end():
    """steps = 1021: warmup 20 steps, then 1,000 steps of cosine; by hand, at a quarter, half and
    three quarters: 0.1 + 0.45 (1 + cos(pi f)) = 0.868198, 0.55, 0.231802 of peak (a linear
    decay would give 0.775, 0.55, 0.325)."""
    for step, frac in ((270, 0.868198), (520, 0.55), (770, 0.231802)):
        assert training.lr_at(step, 1021, 1.0) == pytest.approx(frac, abs=1e-6)


def test_weight_decay_groups():
    m = GPT(GPTConfig(vocab_size=300, n_layer=1, n_embd=128, n_head=1, configuration="seq_tree"))
    decay, no_decay = training.param_groups(m, 0.1)
    def ids(g):
        return {id(p) for p in g["params"]}
    assert id(m.rotary.rates) in ids(no_decay) and id(m.rotary.offsets) in ids(no_decay)
    assert id(m.blocks[0].ln_1.weight) in ids(no_decay)
    assert id(m.blocks[0].attn.c_attn.weight) in ids(decay) and decay["weight_decay"] == 0.1


def test_resume_after_a_kill_matches_an_uninterrupted_run(tiny_python, tmp_path):
    def args(out):
        return ["--corpus", "python", "--config", "seq_tree_depth", "--data", tiny_python,
                "--out", out, "--steps=8", *TINY[:-2], "--milestones=2", "--mb_tokens=128"]
    whole = train.main(args(str(tmp_path / "whole")))          # milestones (and checkpoints) at 4, 8
    log_w = [json.loads(line) for line in open(os.path.join(whole, "log.jsonl"))]
    assert log_w[-1]["val_loss"] < log_w[0]["val_loss"]       # it learns
    # the same run killed right after its step-4 checkpoint, then restarted
    kill = ("import sys, train\nfrom treerope import training\n"
            "save = training.save_checkpoint\n"
            "def killed(obj, path):\n"
            "    save(obj, path)\n"
            "    if obj['step'] == 4: raise SystemExit(3)\n"
            "training.save_checkpoint = killed\n"
            "train.main(sys.argv[1:])\n")
    r = subprocess.run([sys.executable, "-c", kill, *args(str(tmp_path / "killed"))],
                       cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                       capture_output=True, text=True)
    assert r.returncode == 3, r.stderr[-2000:]
    killed = os.path.join(str(tmp_path / "killed"), "python", "seq_tree_depth", "seed0")
    assert os.path.exists(os.path.join(killed, "ckpt.pt"))
    assert not os.path.exists(os.path.join(killed, "final.json"))          # not done: no final.json
    # plant 1,000 s of wall time before the kill: the resumed run's wall time must include it
    ck = torch.load(os.path.join(killed, "ckpt.pt"), weights_only=False)
    ck["log"][-1]["elapsed"] = 1000.0
    runs.save_checkpoint(ck, os.path.join(killed, "ckpt.pt"))     # a planted edit, with its checksum
    resumed = train.main(args(str(tmp_path / "killed")))
    log_r = [json.loads(line) for line in open(os.path.join(resumed, "log.jsonl"))]
    assert [x["step"] for x in log_r] == [4, 8]
    final = json.load(open(os.path.join(resumed, "final.json")))
    assert 1000 < log_r[1]["elapsed"] <= final["elapsed"] < 1000 + 600
    for x, y in zip(log_w, log_r):      # bit for bit: the checkpoint restores every state the step reads
        assert (x["val_loss"], x["train_loss"]) == (y["val_loss"], y["train_loss"])


def test_a_benchmark_run_writes_no_checkpoint_and_trains_the_same(tiny_python, tmp_path):
    """--checkpoint=0 (a benchmark's runs): the same losses, every file but ckpt.pt."""
    kept = run(tiny_python, str(tmp_path / "kept"), steps=2)
    bare = run(tiny_python, str(tmp_path / "bare"), steps=2, extra=["--checkpoint=0"])
    assert sorted(os.listdir(bare)) == sorted(set(os.listdir(kept)) - {"ckpt.pt"}) and \
        "ckpt.pt" in os.listdir(kept)
    log = [[json.loads(line) for line in open(os.path.join(r, "log.jsonl"))] for r in (kept, bare)]
    assert [e["val_loss"] for e in log[0]] == [e["val_loss"] for e in log[1]]


def test_nan_loss_stops_with_message(tiny_python, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        run(tiny_python, str(tmp_path), "seq_only", steps=4, extra=["--lr=1e30"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "loss is nan at step" in err and "no milestone reached" in err      # before the first milestone
    assert not os.path.exists(os.path.join(str(tmp_path), "python", "seq_only", "seed0", "final.json"))


def test_data_parallel_two_cpu_processes(tiny_python, tmp_path):
    """torchrun with 2 gloo processes under DistributedDataParallel: three records a step, packed
    into micro-batches of at most 64 padded tokens and dealt round-robin (one process may get more),
    gradients synced once per step; the loss curve, training and validation, equals the
    single-process run to float tolerance, and so do the FLOPs, those executed summed over the ranks."""
    args = ["--corpus", "python", "--config", "seq_depth", "--data", tiny_python, "--steps=4",
            *TINY[:-2], "--milestones=2", "--mb_tokens=64", "--docs_per_step=3"]
    single = train.main(args + ["--out", str(tmp_path / "one")])
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
                        "--master_port=29517", "train.py", *args, "--out", str(tmp_path / "two")],
                       cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    one = [json.loads(line) for line in open(os.path.join(single, "log.jsonl"))]
    two = [json.loads(line) for line in
           open(os.path.join(str(tmp_path / "two"), "python", "seq_depth", "seed0", "log.jsonl"))]
    assert [a["step"] for a in one] == [b["step"] for b in two] == [2, 4]
    for a, b in zip(one, two):
        assert a["train_loss"] == pytest.approx(b["train_loss"], abs=1e-4)
        assert a["val_loss"] == pytest.approx(b["val_loss"], abs=1e-4)
        assert a["flops"] == b["flops"] and a["flops_executed"] == b["flops_executed"]   # both ranks' counted


def test_precision_is_the_measured_rule():
    """CPU: fp32 eager, measured faster than bf16 + compile at the quickstart's length even on a
    processor that multiplies bf16 natively (RESULTS "Speed"); CUDA compiles (fixed batch shapes); the
    fused rotation is nowhere the default until a GPU measures it faster than the readable one compiled."""
    on, why = machine.switches("cpu")
    assert on == {"bf16": False, "compile": False, "kernel": False} and "measured" in why
    assert machine.switches("cuda")[0]["compile"] is True and machine.switches("cuda")[0]["kernel"] is False
    assert machine.switches("mps")[0] == {"bf16": False, "compile": False, "kernel": False}


def test_default_cpu_path_is_fp32_eager(tiny_python, tmp_path, capsys):
    """The default run records its precision and why, prints it first, and trains exactly the curve
    of --compile=0 --bf16=0."""
    args = ["--corpus", "python", "--config", "seq_depth", "--data", tiny_python, "--steps=6", *TINY[:6],
            "--milestones=6", "--mb_tokens=128"]
    capsys.readouterr()
    default = train.main(args + ["--out", str(tmp_path / "default")])
    first = capsys.readouterr().out.splitlines()[0]
    exact = train.main(args + ["--out", str(tmp_path / "eager"), "--compile=0", "--bf16=0"])
    run = json.load(open(os.path.join(default, "config.json")))["run"]
    assert run["bf16"] is False and run["compile"] is False and "given" not in run["precision"]
    assert first.startswith("precision: fp32, eager") and run["precision"] in first
    a, b = ([json.loads(line) for line in open(os.path.join(d, "log.jsonl"))] for d in (default, exact))
    assert [x["step"] for x in a] == [y["step"] for y in b] == [1, 2, 3, 4, 5, 6]
    assert [(x["train_loss"], x["val_loss"]) for x in a] == [(y["train_loss"], y["val_loss"]) for y in b]


def test_a_run_resumes_under_another_precision(tiny_python, tmp_path):
    """Precision belongs to the machine: a run begun in fp32 resumes in bf16 (as on another
    processor) instead of being refused, and each milestone records which one computed it."""
    out = str(tmp_path)
    run(tiny_python, out, steps=4, extra=["--milestones=2"])
    ck = os.path.join(out, "python", "seq_only", "seed0", "ckpt.pt")
    state = torch.load(ck, weights_only=False)
    state["step"], state["log"] = 2, state["log"][:1]             # as if stopped at the first milestone
    runs.save_checkpoint(state, ck)
    os.remove(os.path.join(os.path.dirname(ck), "final.json"))
    d = run(tiny_python, out, steps=4, extra=["--milestones=2", "--bf16=1"])
    log = [json.loads(line) for line in open(os.path.join(d, "log.jsonl"))]
    assert [(e["step"], e["bf16"]) for e in log] == [(2, False), (4, True)]
    assert "--bf16=1 given" in json.load(open(os.path.join(d, "config.json")))["run"]["precision"]


def test_a_run_stopped_early_and_killed_before_its_finish_trains_no_further(tiny_python, tmp_path):
    """A run that stopped early (patience) and was killed before final.json is done when resumed: its
    finish is written at the step it stopped, as study.py finishes it, not trained on to its last step."""
    out, extra = str(tmp_path), ["--milestones=3", "--patience=1"]
    d = run(tiny_python, out, steps=6, extra=extra)
    state = torch.load(os.path.join(d, "ckpt.pt"), weights_only=False)
    first, second = state["log"][:2]
    state["step"], state["log"] = 4, [first, {**second, "val_loss": first["val_loss"] + 1}]   # stalled at 4
    runs.save_checkpoint(state, os.path.join(d, "ckpt.pt"))
    os.remove(os.path.join(d, "final.json"))
    run(tiny_python, out, steps=6, extra=extra)
    final = json.load(open(os.path.join(d, "final.json")))
    assert (final["step"], final["stopped_early"]) == (4, True)


def test_device_must_exist(tiny_python, tmp_path):
    with pytest.raises(SystemExit, match="unknown --device"):
        training.parse(["--device", "tpu"])
    if not torch.cuda.is_available():     # parse still gives CUDA's settings (the setting tests read them)
        with pytest.raises(SystemExit, match="not available on this machine"):
            run(tiny_python, str(tmp_path), extra=["--device", "cuda"])


def test_sweep_runs_what_is_pending_and_resumes(tiny_python, tmp_path):
    """sweep.sh: two runs side by side; a rerun finds nothing to do; a deleted final.json reruns
    only that run (from its checkpoint, so its log is unchanged)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "OUT": str(tmp_path)}
    cmd = ["bash", os.path.join(root, "scripts", "sweep.sh"), "python", "seq_only seq_depth", "0", "2",
           "--data", tiny_python, "--steps=2", *TINY[:10], "--milestones=1", "--mb_tokens=128"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "failed" not in r.stdout, r.stdout + r.stderr
    runs = [os.path.join(str(tmp_path), "python", k, "seed0") for k in ("seq_only", "seq_depth")]
    assert all(os.path.exists(os.path.join(d, "final.json")) for d in runs)
    logs = [open(os.path.join(d, "log.jsonl")).read() for d in runs]
    os.remove(os.path.join(runs[1], "final.json"))
    stamp = os.path.getmtime(os.path.join(runs[0], "final.json"))
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and os.path.exists(os.path.join(runs[1], "final.json"))
    assert os.path.getmtime(os.path.join(runs[0], "final.json")) == stamp           # finished: not rerun
    assert "resuming" in open(os.path.join(runs[1], "train.log")).read()
    assert open(os.path.join(runs[1], "log.jsonl")).read() == logs[1]
    named = subprocess.run(cmd[:3] + ["seq_depth", "0", "1"] + cmd[6:]
                           + ["--depth_dropout=0.3", "--name=seq_depth_dropout"],
                           env=env, capture_output=True, text=True, timeout=300)
    drop = os.path.join(str(tmp_path), "python", "seq_depth_dropout", "seed0")
    assert named.returncode == 0 and \
        json.load(open(os.path.join(drop, "config.json")))["run"]["depth_dropout"] == 0.3
    assert open(os.path.join(runs[1], "log.jsonl")).read() == logs[1]  # seq_depth itself untouched
    bad = subprocess.run(cmd[:3] + ["seq_only tree_nope", "1"] + cmd[5:], env=env, capture_output=True,
                         text=True, timeout=300)                       # one good run, one that cannot start
    assert bad.returncode != 0 and \
        "failed: " + os.path.join(str(tmp_path), "python", "tree_nope", "seed1") in bad.stdout
    assert os.path.exists(os.path.join(str(tmp_path), "python", "seq_only", "seed1", "final.json"))


def as_if_cuda(monkeypatch):
    """What parse() asks of CUDA, answered as a bf16 GPU would (the --device check refuses cuda
    where torch has none, so the CUDA defaults are read on any machine this way)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)


def test_a_bare_run_is_the_defaults_on_any_device_and_a_paper_model_its_setting(monkeypatch, tmp_path):
    """Without --setting a run is the defaults (the CPU scale) on a GPU too; the appendix §4 models are
    their settings': the 4.7M model at context 1,024 (Python), 2,048 (web pages), 4,096 (spreadsheets);
    the larger web run 10 layers, d=512, 4 heads at 4,096."""
    as_if_cuda(monkeypatch)
    bare = training.parse(["--corpus", "web", "--device", "cuda"])[0][0]
    assert (bare["n_layer"], bare["n_embd"], bare["max_len"], bare["steps"]) == (4, 128, 256, 300)
    shape = {s: tuple(training.parse(["--setting", s, "--device", "cuda"])[0][0][k]
                      for k in ("n_layer", "n_embd", "n_head", "max_len"))
             for s in ("python", "web_pages", "sheets", "web_large")}
    assert shape == {"python": (6, 256, 2, 1024), "web_pages": (6, 256, 2, 2048),
                     "sheets": (6, 256, 2, 4096), "web_large": (10, 512, 4, 4096)}
    with pytest.raises(SystemExit, match="not prepared"):
        training.plan(*training.parse(["--corpus", "prose", "--data", str(tmp_path)])[0], False)


def test_record_units_restart_level1_ranks():
    """prepare.py python --units record: a record that starts at the module's 5th top-level
    statement numbers it 0; a reference into an earlier statement loses its level-1 target."""
    n = 6
    path = np.full((n, 22), -1)
    path[:, 0] = [3, 3, 4, 4, 5, 5]                    # three top-level statements
    path[:, 1] = [-1, 0, -1, 0, -1, 0]                 # each statement node, then one child
    ref = np.full((n, 22), -1)
    ref[5, :2] = [3, 0]                                # target in statement 3
    ref[3, :2] = [4, 0]                                # target in statement 4
    c = {"pos": np.arange(n), "path": path, "ref_path": ref, "depth": np.array([1, 2] * 3),
         "node": np.arange(n)}
    boundary = np.array([1, 0, 1, 0, 1, 0], bool)
    module = prepare.records(c, 4, "split", boundary)
    record = prepare.records(c, 4, "split", boundary, restart_level1=True)
    # the window of 4 ends inside statement 5, so the cut falls at the last boundary before it
    assert [r["path"][:, 0].tolist() for r in module] == [[3, 3], [4, 4, 5, 5]]
    assert [r["path"][:, 0].tolist() for r in record] == [[0, 0], [0, 0, 1, 1]]
    assert record[1]["ref_path"][1, :2].tolist() == [0, 0] and \
        record[1]["ref_path"][3, :2].tolist() == [-1, 0]
    assert (record[1]["path"][:, 1] == path[2:, 1]).all()                       # deeper levels untouched
    assert prepare.record_rank_stats(record)["max"] == 1 and prepare.record_rank_stats(module)["max"] == 5


def test_hrope_recipe_is_table_11(monkeypatch):
    """Paper 004 Table 11 for code and prose: lr 3e-4, weight decay 0.01, cosine to 1% of lr,
    dropout 0.1, patience 10, 16 blocks per step; at the CPU scale the same with lr 1.2e-3; the tree
    recipe (the defaults) elsewhere."""
    as_if_cuda(monkeypatch)
    h = training.parse(["--setting", "hrope_prose", "--device", "cuda"])[0][0]
    assert (h["lr"], h["weight_decay"], h["min_lr"], h["dropout"], h["patience"],
            h["docs_per_step"], h["pack"]) == (3e-4, 0.01, 0.01, 0.1, 10, 16, True)
    t = training.parse(["--corpus", "python"])[0][0]
    assert (t["lr"], t["weight_decay"], t["min_lr"], t["dropout"], t["patience"]) == \
        (1.2e-3, 0.1, 0.1, 0.0, 0)
    assert training.parse(["--setting", "hrope_code", "--lr", "1e-3"])[0][0].lr == 1e-3  # a flag beats it
    c = training.parse(["--setting", "cpu_code", "--device", "cpu"])[0][0]  # CPU scale: only lr differs
    same = ("weight_decay", "min_lr", "dropout", "patience")
    assert c["lr"] == 1.2e-3 and [c[k] for k in same] == [h[k] for k in same]
    # the schedule at its boundaries, 5,000 steps: warmup ends at step 100 (the paper's 100),
    # the last step sits at 1% of the peak, half way through the cosine at 0.505 of it
    assert training.lr_at(0, 5000, 3e-4, 0.01) == pytest.approx(3e-4 / 100)
    assert training.lr_at(99, 5000, 3e-4, 0.01) == pytest.approx(3e-4)
    assert training.lr_at(4999, 5000, 3e-4, 0.01) == pytest.approx(3e-6)
    assert training.lr_at(100 + 4899 // 2, 5000, 1.0, 0.01) == pytest.approx(0.505, abs=2e-4)


def test_early_stopping_counts_evaluations_without_improvement():
    assert not training.stalled([5, 4, 3, 3.5, 3.2], 3)              # two evaluations since the best
    assert training.stalled([5, 4, 3, 3.5, 3.2, 3.1], 3)             # three, none below 3
    assert not training.stalled([5, 4, 3, 3.5, 3.2, 2.9], 3)         # the third one is better
    assert not training.stalled([5, 6, 7, 8], 0)                     # patience 0: never
    assert not training.stalled([5, 6, 7], 3)                        # nothing to compare with yet


def test_dropout_in_training_only(tiny_python):
    torch.manual_seed(0)
    m = GPT(GPTConfig(vocab_size=512, n_layer=2, n_embd=128, n_head=1, max_len=16, configuration="seq_only",
                      dropout=0.1))
    x = torch.randint(0, 512, (2, 16))
    C = m.rotary.coords({"pos": torch.arange(16).expand(2, 16)})
    for path in (False, True):                                    # without and with the probabilities
        m.train()
        a, b = m(x, C, return_attn=path)[0], m(x, C, return_attn=path)[0]
        assert not torch.allclose(a, b)                           # a fresh mask each forward
        m.eval()
        a, b = m(x, C, return_attn=path)[0], m(x, C, return_attn=path)[0]
        assert torch.equal(a, b)
    m0 = GPT(GPTConfig(vocab_size=512, n_layer=2, n_embd=128, n_head=1, max_len=16,
                       configuration="seq_only")).train()
    assert torch.equal(m0(x, C)[0], m0(x, C)[0])                  # the tree recipe has none


def test_depth_dropout_hides_depth_on_the_records_the_generator_picks():
    """At 0.3 about 30% of 2,000 records (a record a row) lose their depth: exactly those whose first
    draw from their row's own generator (seed 0, step 7, the row's place) falls under 0.3. A configuration
    that reads no depth keeps every depth, and rand_axial's labels come from the same rows' draws."""
    B, T = 2000, 6
    g = torch.Generator().manual_seed(0)
    b = {"tokens": torch.zeros(B, T, dtype=torch.long), "pos": torch.arange(T).expand(B, T),
         "depth": torch.randint(1, 22, (B, T), generator=g), "seg": torch.zeros(B, T, dtype=torch.long),
         "path": torch.randint(0, 8, (B, T, 22), generator=g),
         "p": torch.randint(0, 5, (B, T, 3), generator=g)}
    picked = torch.tensor([torch.rand(T, generator=batches.row_generator(0, 7, r, "cpu"))[0] < 0.3
                           for r in range(B)])
    assert 0.27 < picked.float().mean() < 0.33
    for name in ("seq_depth", "seq_depth_rank", "seq_only", "seq_tree", "rand_axial"):
        m = GPT(GPTConfig(vocab_size=300, n_layer=1, n_embd=128, n_head=1, max_len=T, configuration=name))
        own = dict(b)
        assert batches.drawn(own, np.arange(B), 0, 7, {}, 0.3, m.rotary.names, T) == {}
        reads_depth = "depth" in name
        lost = (own["depth"] == -1).all(1)
        assert torch.equal(lost, picked if reads_depth else torch.zeros_like(picked)), name
        assert ("uniform" in own) == (name == "rand_axial")


def test_depth_dropout_in_training_not_in_evaluation(tiny_python, tmp_path, monkeypatch):
    """A seq_depth run with --depth_dropout=0.3: every training micro-batch loses depth on the records
    its rows' generators pick (about 30% over the run), no evaluation batch on any."""
    lost = {True: [], False: []}                                  # training -> per record
    drawn = batches.drawn

    def spy(b, which, seed, step, sites, depth_dropout, names, T):
        had = ((b["depth"] >= 1) & (b["seg"] >= 0)).any(1)
        masks = drawn(b, which, seed, step, sites, depth_dropout, names, T)
        lost[step >= 0].append((had & ((b["depth"] == -1) | (b["seg"] < 0)).all(1))[had])
        return masks

    monkeypatch.setattr(ensemble, "drawn", spy)
    run(tiny_python, str(tmp_path), "seq_depth", steps=2,
        extra=["--depth_dropout=0.3", "--docs_per_step=24", "--n_layer=1"])
    train_lost, eval_lost = torch.cat(lost[True]), torch.cat(lost[False])
    assert len(train_lost) == 48 and 0.2 < train_lost.float().mean() < 0.4    # 2 steps of 24 records
    assert len(eval_lost) and not eval_lost.any()


def test_early_stop_ends_a_run_and_says_so(tiny_python, tmp_path):
    """lr 0: the validation loss never improves, so patience 2 stops after 3 of 8 evaluations."""
    run = train.main(["--corpus", "python", "--config", "seq_only", "--data", tiny_python, "--out",
                      str(tmp_path), "--steps=8", *TINY[:-2], "--milestones=8", "--mb_tokens=128",
                      "--lr=1e-12", "--patience=2"])
    final = json.load(open(os.path.join(run, "final.json")))
    assert final["stopped_early"] and final["step"] == 3


def test_twenty_milestones_every_five_percent_the_last_at_the_final_step():
    """Appendix §4: every 5% of the planned steps, so 20 whatever the length (steps // 20 gave 39
    for 39 steps and 22 for 319); the CPU scale's 200 steps / 10 keep their every-20 rule."""
    for steps in (39, 319, 5000):
        m = training.milestone_steps(steps, 20)
        assert len(m) == 20 and max(m) == steps and min(m) >= steps / 20
    assert training.milestone_steps(200, 10) == set(range(20, 201, 20))
    assert training.milestone_steps(7, 20) == set(range(1, 8))


@pytest.mark.skipif(not shutil.which(os.environ.get("CXX", "c++")), reason="inductor needs a C++ compiler")
def test_a_compiled_run_has_no_graph_break(tiny_python, tmp_path):
    """Three compiled training steps: the loss has no data-dependent shape (model.py once assigned
    through a boolean mask, and the compiler split the step at aten.nonzero), so dynamo counts
    zero graph breaks — counted, not silenced; and the compiled path (short records sharing rows of
    the context, fixed micro-batches) trains the eager curve."""
    from torch._dynamo.utils import counters
    counters.clear()
    wide = ["--max_len=256", "--mb_tokens=512", "--milestones=3"]
    compiled = run(tiny_python, str(tmp_path / "c"), "seq_depth", steps=3, extra=[*wide, "--compile=1"])
    assert sum(counters["graph_break"].values()) == 0, dict(counters["graph_break"])
    assert counters["stats"]["unique_graphs"] >= 1                      # it did compile
    eager = run(tiny_python, str(tmp_path / "e"), "seq_depth", steps=3, extra=wide)
    a, b = ([json.loads(line) for line in open(os.path.join(d, "log.jsonl"))] for d in (compiled, eager))
    for x, y in zip(a, b):
        assert x["train_loss"] == pytest.approx(y["train_loss"], rel=1e-4)
        assert x["val_loss"] == pytest.approx(y["val_loss"], rel=1e-4)


def test_the_log_counts_model_flops_at_each_records_length(tiny_python, tmp_path):
    """log.jsonl's `flops`: nanoGPT's 6N + 12 L H Q T summed over the steps' records, T each record's
    own predicted tokens (by hand from step_records); `flops_executed`: the rows as laid, padded to
    each micro-batch's longest record, at least as many; `elapsed` and `val_elapsed` apart."""
    d = run(tiny_python, str(tmp_path), steps=4, extra=["--milestones=2"])
    log = [json.loads(line) for line in open(os.path.join(d, "log.jsonl"))]
    split = batches.Split(os.path.join(tiny_python, "python"), "train", 64)
    n = np.concatenate([split.len[batches.step_records(len(split), 4, s, 0)] - 1 for s in range(4)])
    V = corpus_stats(os.path.join(tiny_python, "python"))[0]["tokenizer"]["vocab"]
    N = V * 128 + 2 * (2 * 128 + 128 * 384 + 128 * 128 + 2 * 128 * 512) + 128   # wte counted: the tied head
    want = float((n * (6 * N + 12 * 2 * 128 * n)).sum())
    assert log[-1]["flops"] == pytest.approx(want, rel=1e-12)
    assert log[-1]["flops_executed"] >= log[-1]["flops"] > log[0]["flops"] > 0
    assert log[-1]["val_elapsed"] > 0 and log[-1]["elapsed"] > 0


def test_a_run_too_large_for_the_device_is_refused_before_its_model_is_built(tiny_python, tmp_path,
                                                                            monkeypatch):
    """Issue 71 R1: `train.py --n_layer 100000` built its model for over 100 s and ~10 GB, where study.py
    refused such a study first. train.py refuses too, before the model is built and before anything is
    written, with study.py's estimate for one run (machine.step_memory: the same GiB in both lines)."""
    monkeypatch.setattr(machine, "device_bytes", lambda device: 2 ** 30)     # a 1 GiB device
    monkeypatch.setattr(training, "build_model", lambda *a: pytest.fail("the model was built"))
    big = ["--data", tiny_python, "--out", str(tmp_path), "--steps=1", *TINY[3:], "--n_layer=40",
           "--n_embd=512", "--n_head=4"]
    with pytest.raises(SystemExit) as e:
        train.main(["--corpus", "python", *big])
    with pytest.raises(SystemExit) as s:
        train.main(study.arguments(["python", "seq_only", "0", *big]))
    one, many = str(e.value), str(s.value)
    assert one.startswith("error: 1 run of 40L d512, 2 x 64 tokens a micro-batch, would need about ") \
        and "\n" not in one and one.endswith("over 0.9 of the 1.0 GiB on cpu; lower --n_layer, --n_embd, "
                                             "--max_len or --mb_tokens")
    assert one.split("; ")[0] == many.split("; ")[0]           # study.py's estimate, word for word
    assert not os.listdir(tmp_path)


@pytest.mark.parametrize("config,n_head,n_layer", [("seq_depth", 1, 12), ("seq_tree", 1, 9),
                                                   ("head_split", 2, 30), ("ststst", 1, 6)])
def test_a_deep_models_parameters_are_counted_without_building_it(config, n_head, n_layer, monkeypatch):
    """The estimate counts a model deeper than 8 layers from its 1- and 2-layer forms (every block
    holds the same parameters): the count of the model built, without building 100,000 blocks (minutes
    on the meta device). A layer pattern is counted whole, and refused at another depth in one line."""
    c = GPTConfig(n_layer=n_layer, n_embd=128 * n_head, n_head=n_head, vocab_size=512, configuration=config)
    with torch.device("meta"):
        built = GPT(c).num_params()
    depths = []
    monkeypatch.setattr(machine, "GPT", lambda cfg: depths.append(cfg.n_layer) or GPT(cfg))
    assert machine.parameters(c) == built and max(depths) == (2 if n_layer > 8 else n_layer)
    if config != "ststst":
        machine.parameters(dataclasses.replace(c, n_layer=100_000))
        assert max(depths) <= n_layer
    else:
        with pytest.raises(SystemExit, match="error: --config ststst: ststst is a 6-layer pattern; the model "
                                             "has 12 layers"):
            machine.step_memory(dataclasses.replace(c, n_layer=12), {"mb_tokens": 256, "bf16": False,
                                                                     "device": "cpu"})


def test_the_speed_benchmarks_bare_loop_does_train_pys_work(tiny_python):
    """`bench.py train` compares like with like: its bare loop (written apart: the baseline) trains and
    validates what train.py does at the defaults (the same records, schedule, clip and AdamW, the same
    fixed validation records at the same steps), so the tokens agree and every milestone's validation
    loss agrees to float rounding (foreach against fused AdamW). Catches a baseline that skips the
    validations, validates other records or steps, or trains another schedule."""
    data = os.path.join(tiny_python, "python")
    tokens, _, validating, vals = bench.bare_loop(data, 4)
    tokens_py, _, validating_py, vals_py = bench.train_py(data, 4)
    assert tokens == tokens_py and validating > 0 and validating_py > 0
    assert len(vals) == len(vals_py) == 4                  # milestones at steps 1, 2, 3, 4 (5 asked)
    assert np.allclose(vals, vals_py, rtol=1e-4, atol=0), (vals, vals_py)
