"""A run is what its config.json says it is (issue 55): one test per item of the held-out trial, each
with the folder the trial planted (renamed runs, copied checkpoints, variants at another lr, a bf16 run
in a study, edited config.json files, a refused study). Run: python -m pytest -q tests/test_run_identity.py
"""
import errno
import io
import json
import os
import re
import shutil
import subprocess
import time

import numpy as np
import pytest
from conftest import one_line

import analyze
import evaluate
import prepare
import sample
import study
import train
from treerope import ensemble, files, machine, training
from treerope.hrope import boundaries, paragraph_depth

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = ["--steps=2", "--n_layer=1", "--max_len=64", "--docs_per_step=2", "--val_docs=2",
        "--test_docs=2", "--milestones=1", "--mb_tokens=128", "--compile=0", "--bf16=0"]


def args(data, out, *extra):
    return ["--data", data, "--out", str(out), *TINY, *extra]


def study_main(argv):
    """study.py's command line, run in this process: train.py with its runs given at once."""
    return train.main(study.arguments(argv))


def planted(root, config, seed, val, name=None, folder=None, **run):
    """A finished run in root/web/<folder, name or config>/seed<k> at validation loss `val` (step 30)."""
    d = root / "web" / (folder or name or config) / f"seed{seed}"
    os.makedirs(d)
    r = {"corpus": "web", "config": config, "name": name, "seed": seed, "steps": 30, "lr": 1.2e-3,
         "bf16": False, "compile": False, **run}
    (d / "config.json").write_text(json.dumps({"run": r, "model": {"n_layer": 2, "n_embd": 128, "n_head": 2,
                                                                    "max_len": 256, "rotary": config}}))
    (d / "log.jsonl").write_text(json.dumps({"step": 30, "val_loss": val, "bf16": False, "compile": False})
                                 + "\n")
    (d / "final.json").write_text(json.dumps({"step": 30, "val_loss": val, "test_loss": val}))
    return d


@pytest.fixture(scope="module")
def runs(tiny_python, tmp_path_factory):
    """seq_only and seq_depth at seeds 0 and 1 (one study), and a d=64 seq_depth run (--name small)."""
    out = tmp_path_factory.mktemp("identity")
    study_main(["python", "seq_only seq_depth", "0 1", *args(tiny_python, out)])
    train.main(["--corpus", "python", "--config", "seq_depth", "--name", "small", "--n_embd=64",
                *args(tiny_python, out)])
    return out / "python"


def copy_run(runs, tmp_path, folder):
    dst = tmp_path / "python" / folder
    shutil.copytree(runs / folder, dst)
    return dst


# ---------------------------------------------------------------------------- wrong results ----
def test_1_a_name_is_never_taken_for_a_configuration(tiny_python, tmp_path, capsys):
    """`--config seq_tree --name seq_depth` was accepted, and a `--name seq_depth --lr 4e-3` run paired
    with seq_depth at the default lr as its second seed. train.py refuses the first before any work;
    analyze leaves such a folder out, and a run named as its own configuration at another lr is no
    variant: it is tabled apart, never a seed of seq_depth; a copied run folder is refused."""
    one_line(lambda: train.main(["--corpus", "python", "--config", "seq_tree", "--name", "seq_depth",
                                 *args(tiny_python, tmp_path)]),
             "--name 'seq_depth'", "another configuration's")
    assert not os.path.exists(tmp_path / "python")
    for seed in (0, 1):
        planted(tmp_path, "seq_only", seed, 3.0)
    planted(tmp_path, "seq_depth", 0, 2.9)
    planted(tmp_path, "seq_depth", 1, 2.5, name="seq_depth", lr=4e-3, given=["lr", "name", "config", "seed"])
    planted(tmp_path, "seq_tree", 1, 2.0, name="seq_depth", folder="renamed")
    runs = analyze.load_runs(str(tmp_path / "web"))
    out = capsys.readouterr().out
    assert "named seq_depth, a configuration's name, but trained seq_tree: left out" in out
    rows = analyze.compare(runs, "seq_only", "val")
    assert [(r["config"], r["n"], round(r["delta"], 6)) for r in rows] == [("seq_depth", 1, -0.1)]
    shutil.copytree(tmp_path / "web" / "seq_only" / "seed0", tmp_path / "web" / "seq_only_copy" / "seed0")
    msg = one_line(lambda: analyze.load_runs(str(tmp_path / "web")), "seq_only seed 0", "seq_only_copy")
    assert "remove it" in msg


def test_2_evaluate_and_sample_refuse_a_checkpoint_of_another_run(runs, tmp_path):
    """A checkpoint of another configuration, seed or model size copied into a run's folder was scored
    as that run; evaluate.py and sample.py now refuse it in one line naming the difference, and nothing
    is written."""
    for src, differ in (("seq_only/seed0", "config: seq_only in ckpt.pt, seq_depth in config.json"),
                        ("seq_depth/seed1", "seed: 1 in ckpt.pt, 0 in config.json"),
                        ("small/seed0", "model.n_embd: 64 in ckpt.pt, 128 in config.json")):
        run = copy_run(runs, tmp_path / src.replace("/", "_"), "seq_depth")
        shutil.copy(runs / src / "ckpt.pt", run / "seed0" / "ckpt.pt")
        one_line(lambda: evaluate.main([str(run / "seed0")]), differ)
        one_line(lambda: sample.load(str(run / "seed0"), "cpu"), differ)
        assert not os.path.exists(run / "seed0" / "eval_test.json")
    evaluate.main([str(copy_run(runs, tmp_path / "own", "seq_depth") / "seed0"), "--interventions", "none"])


def test_3_a_variant_at_another_lr_says_so_in_its_row(tmp_path, capsys):
    """`--name seq_depth_hot --lr 4e-3` was a paired row with no word of the lr: it still pairs with
    seq_only, and its row (table and CSV) names the value it differs in."""
    for seed in (0, 1):
        planted(tmp_path, "seq_only", seed, 3.0)
        planted(tmp_path, "seq_depth", seed, 2.8, name="seq_depth_hot", lr=4e-3,
                given=["config", "lr", "name", "seed"])
    runs = analyze.load_runs(str(tmp_path / "web"))
    [row] = analyze.compare(runs, "seq_only", "val")
    assert (row["config"], row["n"], row["differs"]) == ("seq_depth_hot", 2, "lr 0.004")
    assert "| seq_depth_hot (lr 0.004) | -0.2000 |" in analyze.markdown([row], "t")


# ---------------------------------------------------------------------------- misleading ----
def test_4_elapsed_is_training_time_alone_in_train_and_study(tiny_python, tmp_path, monkeypatch):
    """Each validation is made to take 1,000 s (the clock moved on as it starts): `elapsed` (log.jsonl and
    final.json) leaves it out in train.py and in a study alike, and `val_elapsed` counts it, milestone
    after milestone."""
    moved, clock = [0.0], time.time
    monkeypatch.setattr(time, "time", lambda: clock() + moved[0])
    def slow(f):
        def g(*a, **k):
            moved[0] += 1000.0
            return f(*a, **k)
        return g
    monkeypatch.setattr(train, "evaluate", slow(ensemble.evaluate))
    two = args(tiny_python, tmp_path, "--milestones=2")
    runs = [train.main(["--corpus", "python", "--config", "seq_only", *two]),
            *study_main(["python", "seq_depth seq_tree", "0", *two])]
    for run in runs:
        log = [json.loads(line) for line in open(os.path.join(run, "log.jsonl"))]
        assert [e["step"] for e in log] == [1, 2]
        assert log[1]["elapsed"] < 1000 and log[1]["val_elapsed"] >= 2000 > log[0]["val_elapsed"] >= 1000, log
        assert json.load(open(os.path.join(run, "final.json")))["elapsed"] < 1000


def test_5_a_studys_early_stop_can_differ_where_losses_tie(tmp_path):
    """The patience rule is train.py's, but a rounding-level difference between a study's loss and
    train.py's flips it (5.3773 against 5.3773 +- 1e-7): study.py's docstring and REFERENCE.md say so."""
    assert training.stalled([5.3773, 5.3773 + 1e-7], 1) and not training.stalled([5.3773, 5.3773 - 1e-7], 1)
    doc = " ".join(train.__doc__.split())
    assert "can stop at another milestone than train.py's" in doc and "tie within rounding" in doc
    ref = " ".join(open(os.path.join(ROOT, "REFERENCE.md")).read().split())
    assert "a study's run can stop at another milestone than train.py's" in ref


def test_6_a_bf16_run_is_not_done_in_an_fp32_study(tiny_python, tmp_path, capsys):
    """A finished --bf16 1 run was printed `done:` and then left unpaired by analyze: the study refuses
    it in one line, before anything is written."""
    study_main(["python", "seq_only", "0", *args(tiny_python, tmp_path), "--bf16=1"])
    capsys.readouterr()
    one_line(lambda: study_main(["python", "seq_only seq_depth", "0", *args(tiny_python, tmp_path)]),
             "seq_only/seed0 finished at bf16=1", "analyze.py would not pair it")
    assert "done:" not in capsys.readouterr().out and not os.path.exists(tmp_path / "python" / "seq_depth")


def test_7_sweep_follows_the_studys_finished_run_rule(tiny_python, tmp_path):
    """sweep.sh over runs finished at 2 steps with --steps 3 exited 0 and kept them: it now refuses them
    in one line, as study.py does; asked as they were trained, it keeps them and says so."""
    study_main(["python", "seq_only", "0", *args(tiny_python, tmp_path)])
    env = {**os.environ, "OUT": str(tmp_path)}
    def sweep(*extra):
        return subprocess.run(["bash", "scripts/sweep.sh", "python", "seq_only", "0", "1", "--data",
                               tiny_python, *TINY, *extra], cwd=ROOT, env=env, capture_output=True, text=True,
                               timeout=300)
    refused = sweep("--steps=3")
    assert refused.returncode != 0 and "steps: 2 there, 3 now" in refused.stderr, refused.stderr
    kept = sweep()
    assert kept.returncode == 0 and kept.stdout.startswith("done:"), kept.stdout + kept.stderr
    assert json.load(open(tmp_path / "python" / "seq_only" / "seed0" / "final.json"))["step"] == 2


def test_8_a_refused_study_leaves_no_folder(tiny_python, tmp_path):
    """A study refused at resume (a partial seq_depth run at another lr) had already written config.json
    folders for the runs before it; now every run is checked before anything is written."""
    run = train.main(["--corpus", "python", "--config", "seq_depth", *args(tiny_python, tmp_path, "--steps=3",
                                                                             "--milestones=3")])
    os.remove(os.path.join(run, "final.json"))                       # stopped before its end
    one_line(lambda: study_main(["python", "seq_only seq_tree seq_depth", "0",
                                 *args(tiny_python, tmp_path, "--steps=3", "--milestones=3", "--lr=0.02")]),
             "seq_depth/seed0 was trained with other values", "lr: ")
    assert sorted(os.listdir(tmp_path / "python")) == ["seq_depth"]


def test_9_messages_agree_with_what_happened(tiny_python, tmp_path, capsys):
    """At --lr 1e30 every run diverges before its first milestone, keeping no checkpoint: the closing
    line no longer promises a retry from the last checkpoint."""
    with pytest.raises(SystemExit) as e:
        study_main(["python", "seq_only seq_depth", "0", *args(tiny_python, tmp_path, "--lr=1e30")])
    msg = capsys.readouterr().err
    assert e.value.code == 2 and "no checkpoint kept" in msg and "last checkpoint" not in msg


def test_10_every_option_is_used_or_refused(tiny_python, tmp_path, capsys):
    """`study.py ... --seed 5` trained seed 0; `prepare.py python --max_programs 5 --src` prepared every
    document; study.py --help exited 1; the GPU probe went on with -24 s left. Each is now refused in
    one line, or (--help) the docstring printed with exit 0."""
    for given in (["--seed", "5"], ["--seed=5"], ["--config", "seq_tree"], ["--se", "5"]):
        one_line(lambda: study.arguments(["python", "seq_only", "0", *args(tiny_python, tmp_path), *given]),
                 "study.py takes --")
    assert not os.path.exists(tmp_path / "python")
    # a new user's trial: JOBS not a number was read as a seed ("argument --seed: invalid int value")
    one_line(lambda: study.arguments(["python", "seq_only", "0", "four"]), "JOBS (sweep.sh's processes")
    with pytest.raises(SystemExit) as e:
        study.arguments(["--help"])
    assert e.value.code == 0 and "python study.py CORPUS" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        prepare.main(["python", "--max_programs", "5", "--src", str(tmp_path), "--out", str(tmp_path / "d")])
    assert "--max_programs does not apply to the python corpus" in capsys.readouterr().err
    # the table stages' budget overspent (study.py --budget): refused in one line, no run written
    one_line(lambda: study_main(["python", "seq_only", "0", *args(tiny_python, tmp_path), "--budget=0.001"]),
             "not one step of one seed fits; raise --budget")
    assert not os.path.exists(tmp_path / "python")


# ---------------------------------------------------------------------------- tracebacks ----
def test_11_an_odd_head_width_is_one_line_before_anything_is_written(tiny_python, tmp_path):
    """`--n_layer=1 --n_embd=63` was a RuntimeError after config.json was written."""
    odd = args(tiny_python, tmp_path, "--n_embd=63")
    one_line(lambda: train.main(["--corpus", "python", "--config", "seq_only", *odd]), "63", "odd width")
    one_line(lambda: study_main(["python", "seq_only seq_depth", "0", *odd]), "63", "odd width")
    assert not os.path.exists(tmp_path / "python")


@pytest.mark.parametrize("edit,named", [
    (lambda c: c.pop("run"), "no 'run' object"),
    (lambda c: c["model"].pop("n_layer"), "model.n_layer is missing"),
    (lambda c: c["run"].update(seed="1"), "run.seed is '1', not int"),
], ids=["run", "n_layer", "seed"])
def test_12_an_edited_config_json_is_one_line_naming_the_key(edit, named, runs, tmp_path):
    """A hand-edited config.json that is still JSON was a KeyError or TypeError in analyze.py and
    evaluate.py; each reader now names the key."""
    run = copy_run(runs, tmp_path, "seq_depth") / "seed0"
    c = json.load(open(run / "config.json"))
    edit(c)
    (run / "config.json").write_text(json.dumps(c))
    one_line(lambda: analyze.load_runs(str(tmp_path / "python")), named, "config.json")
    one_line(lambda: evaluate.main([str(run)]), named)


def test_13_a_model_that_cannot_fit_is_refused_with_the_estimate(tiny_python, tmp_path, monkeypatch):
    """`study.py ... --max_len=100000` was killed by the kernel: rows of 100,000 tokens need T x T masks
    and scores. It is refused in one line with machine.step_bytes's estimate, nothing written."""
    monkeypatch.setattr(machine, "device_bytes", lambda device: 24 * 2**30)   # the trial's 24 GB machine
    msg = one_line(lambda: study_main(["python", "seq_only seq_depth", "0",
                                       *args(tiny_python, tmp_path, "--max_len=100000")]),
                   "GiB a step (machine.step_bytes)", "24.0 GiB")
    assert float(re.search(r"about ([\d.,]+) GiB", msg).group(1).replace(",", "")) > 100
    assert not os.path.exists(tmp_path / "python")
    # the estimate by hand: 1 run, 1 layer, d 2, 1 head, vocab 4, a row of 2 tokens, 56 parameters, fp32:
    # 56 x 16 bytes of weights and moments; activations 2 tokens x (34 x 2 + 5 x 1 x 2) x 4 / 2 = 312;
    # masks 2 x 2 x (1 + 1) = 8; logits 2 x 4 x (4 + 8) = 96 (model.GPT's loss takes them whole)
    assert machine.step_bytes(1, 1, 2, 1, 2, 1, 4, 56, False) == 896 + 312 + 8 + 96


def test_a_refused_model_leaves_no_folder(tiny_python, tmp_path):
    """train.py refuses a configuration whose planes do not fit the head (seq_tree_depth needs 62, a
    head 8 wide has 4) before it makes the run's folder: a refused run leaves nothing to resume."""
    one_line(lambda: train.main(["--corpus", "python", "--config", "seq_tree_depth",
                                 *args(tiny_python, tmp_path, "--n_embd=8", "--n_head=1")]),
             "seq_tree_depth", "62 planes")
    assert os.listdir(tmp_path) == []


# ------------------------------------------------------------- issue 63: the last cases ----
def test_w1_a_folder_copied_or_renamed_is_not_scored_under_its_name(runs, tmp_path):
    """`cp -r seq_depth/seed0 tree_only/seed0` was scored (eval_test.json written) and sampled as tree_only,
    a seed1 folder renamed seed5 scored as seed 5: every reader refuses in one line, nothing written."""
    copy = tmp_path / "python" / "tree_only" / "seed0"
    shutil.copytree(runs / "seq_depth" / "seed0", copy)
    for read in (lambda: evaluate.main([str(copy)]), lambda: sample.load(str(copy), "cpu"),
                 lambda: analyze.load_runs(str(tmp_path / "python"))):
        one_line(read, "says tree_only/seed0", "the run is seq_depth/seed0")
    renamed = tmp_path / "python" / "seq_depth" / "seed5"
    shutil.copytree(runs / "seq_depth" / "seed1", renamed)
    one_line(lambda: evaluate.main([str(renamed)]), "says seq_depth/seed5", "seq_depth seed 1")
    assert not any(p.name.startswith("eval") for p in (*copy.iterdir(), *renamed.iterdir()))


@pytest.mark.parametrize("value", ["7.3", None, "removed"])
def test_t1_a_damaged_final_json_is_one_line_naming_the_key(value, tmp_path):
    """final.json's test_loss set to "7.3", null or removed was a TypeError or KeyError in analyze.py; it
    goes through the validating reader config.json does."""
    for seed in (0, 1):
        planted(tmp_path, "seq_only", seed, 3.0)
    run = planted(tmp_path, "seq_depth", 0, 2.9)
    f = json.load(open(run / "final.json"))
    f.pop("test_loss") if value == "removed" else f.update(test_loss=value)
    (run / "final.json").write_text(json.dumps(f))
    one_line(lambda: analyze.load_runs(str(tmp_path / "web")), "final.json", "test_loss")


def test_t1_a_damaged_log_line_is_one_line_naming_the_key(tmp_path):
    """A log.jsonl milestone without its val_loss was a KeyError in analyze.py's pairing."""
    for seed in (0, 1):
        planted(tmp_path, "seq_only", seed, 3.0)
    run = planted(tmp_path, "seq_depth", 0, 2.9)
    (run / "log.jsonl").write_text(json.dumps({"step": 30}) + "\n")
    one_line(lambda: analyze.main([str(tmp_path / "web")]), "log.jsonl", "line 1: val_loss is missing")


def test_t1_a_non_finite_loss_is_left_out_with_a_note(tmp_path, capsys):
    """A NaN test_loss made a row "won 1/2, sign p 1": it is left out, said, and the row counts one seed."""
    for seed, base, depth in ((0, 3.0, 2.9), (1, 3.0, float("nan"))):
        planted(tmp_path, "seq_only", seed, base)
        planted(tmp_path, "seq_depth", seed, depth)
    runs = analyze.load_runs(str(tmp_path / "web"))
    assert "test_loss is nan, not a finite loss: left out of the tables" in capsys.readouterr().out
    [row] = analyze.compare(runs, "seq_only", "test")
    assert (row["n"], row["won"], round(row["delta"], 6)) == (1, 1, -0.1)


def test_t2_a_config_json_without_the_data_identity_is_one_line(runs, tmp_path):
    """run.data_identity removed from config.json was a TypeError in evaluate.py and sample.py."""
    run = copy_run(runs, tmp_path, "seq_depth") / "seed0"
    c = json.load(open(run / "config.json"))
    del c["run"]["data_identity"]
    (run / "config.json").write_text(json.dumps(c))
    one_line(lambda: evaluate.main([str(run)]), "run.data_identity is missing")
    one_line(lambda: sample.load(str(run), "cpu"), "run.data_identity is missing")


def test_t5_tokens_before_evaluate_names_the_step_to_take(runs):
    """`analyze.py --tokens A B` before evaluate.py was a FileNotFoundError."""
    pair = [str(runs / "seq_only" / "seed0"), str(runs / "seq_depth" / "seed0")]
    one_line(lambda: analyze.main(["--tokens", *pair]), "run evaluate.py", "seq_only/seed0")


def test_t6_a_study_too_big_for_memory_is_refused_before_any_model_exists(tiny_python, tmp_path, monkeypatch):
    """`--n_embd=4096 --n_layer=24` (4.8 billion parameters a run) was killed by the kernel: plan_runs built
    every model before `fits` estimated. Refused with the estimate, no model built, nothing written."""
    monkeypatch.setattr(machine, "device_bytes", lambda device: 24 * 2**30)
    monkeypatch.setattr(training, "build_model", lambda *a: pytest.fail("a model was built"))
    one_line(lambda: study_main(["python", "seq_only seq_depth", "0 1", *args(tiny_python, tmp_path),
                                 "--n_embd=4096", "--n_layer=24", "--n_head=32"]),
             "4 runs of 24L d4096", "machine.step_bytes")
    assert not os.path.exists(tmp_path / "python")


def test_m1_an_empty_lock_is_stale_once_its_writer_had_time(tmp_path):
    """A kill between creating seedN.lock and writing its pid left it empty, and every later writer was
    refused as "process N" with its own pid. An empty lock a second old is taken over; a fresh one (its
    writer writing its pid) is refused, named as such."""
    lock = tmp_path / "seed0.lock"
    lock.write_text("")
    one_line(lambda: files.owned(str(tmp_path / "seed0"), "the run").__enter__(), "a process starting now")
    os.utime(lock, (time.time() - 10, time.time() - 10))
    with files.owned(str(tmp_path / "seed0"), "the run"):
        assert lock.read_text() == str(os.getpid())
    assert not lock.exists()


def test_m2_more_records_a_step_than_the_split_holds_is_refused(tiny_python, tmp_path):
    """`--docs_per_step 5000` on a smaller split trained the whole split a step, config.json keeping
    5000; train.py and study.py refuse it in one line, before anything is written."""
    big = args(tiny_python, tmp_path, "--docs_per_step=5000")
    one_line(lambda: train.main(["--corpus", "python", "--config", "seq_only", *big]),
             "--docs_per_step 5,000", "train split")
    one_line(lambda: study_main(["python", "seq_only", "0", *big]), "--docs_per_step 5,000")
    assert not os.path.exists(tmp_path / "python")


@pytest.mark.parametrize("flags,said", [
    (["json", "--conversations", "5"], "--conversations does not apply to the json corpus"),
    (["python", "--workbooks", "3"], "--workbooks does not apply to the python corpus"),
    (["sheets", "--workbooks", "5", "--src", "."], "--workbooks does not apply to the sheets corpus with"),
], ids=["conversations", "workbooks", "workbooks_src"])
def test_d1_every_flag_a_corpus_ignores_is_refused(flags, said, tmp_path, capsys):
    """--conversations, --workbooks were accepted and ignored (not in meta.json): one rule refuses them."""
    with pytest.raises(SystemExit):
        prepare.main([*flags, "--out", str(tmp_path / "d")])
    assert said in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "d")


def test_d2_d3_sweep_passes_options_quoted_and_refuses_out(tiny_python, tmp_path):
    """sweep.sh joined its options and split them on spaces (`--data "dätä dir/x y"` failed every run),
    and took --out, training where it never looked (a retrain every time): the path passes whole,
    and --out is refused, nothing written."""
    data = tmp_path / "dätä dir" / "x y"
    shutil.copytree(tiny_python, data)
    env = {**os.environ, "OUT": str(tmp_path / "a")}
    def sweep(*extra):
        return subprocess.run(["bash", "scripts/sweep.sh", "python", "seq_only", "0", "1", "--data",
                               str(data), *TINY, *extra], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=300)
    refused = sweep("--out", str(tmp_path / "b"))
    assert refused.returncode == 2 and "drop --out" in refused.stderr, refused.stderr
    assert not os.path.exists(tmp_path / "a") and not os.path.exists(tmp_path / "b")
    done = sweep()
    assert done.returncode == 0, done.stdout + done.stderr
    assert os.path.exists(tmp_path / "a" / "python" / "seq_only" / "seed0" / "final.json")


def test_o1_evaluate_leaves_nothing_on_a_full_disk(runs, tmp_path, monkeypatch):
    """On a full disk evaluate.py left an empty .write_test<pid> in the run's folder: the write that
    fails after the file was made is cleaned up."""
    run = copy_run(runs, tmp_path, "seq_depth") / "seed0"
    before = sorted(os.listdir(run))
    class Full(io.StringIO):
        def write(self, s):
            raise OSError(errno.ENOSPC, "No space left on device")
    def full(path, mode="r", *a, **k):
        if "w" not in mode:
            return open(path, mode, *a, **k)
        open(path, mode).close()      # the file is made, its write fails
        return Full()
    monkeypatch.setattr(files, "open", full, raising=False)
    one_line(lambda: evaluate.main([str(run)]), "cannot write in", "No space left on device")
    assert sorted(os.listdir(run)) == before


def test_two_evaluations_of_one_run_take_its_lock(runs, tmp_path):
    """Two evaluate.py processes on one run took no lock: a run held by a live process (its training, or
    another evaluation) is refused in one line, nothing written; the lock is gone after a run's evaluation."""
    run = copy_run(runs, tmp_path, "seq_depth") / "seed0"
    lock = str(run) + ".lock"
    with open(lock, "w") as f:
        f.write(str(os.getppid()))               # a live process holds it
    one_line(lambda: evaluate.main([str(run), "--interventions", "none"]), "being written by process",
             str(os.getppid()))
    assert not os.path.exists(run / "eval_test.json")
    os.remove(lock)
    evaluate.main([str(run), "--interventions", "none"])
    assert os.path.exists(run / "eval_test.json") and not os.path.exists(lock)


def test_a_variants_printed_label_is_a_baseline(tmp_path, capsys):
    """`analyze --baseline "seq_depth_hot (lr 0.004)"`, the label a variant's rows print, found no such
    configuration: it names the variant as its name does."""
    for seed in (0, 1):
        planted(tmp_path, "seq_only", seed, 3.0)
        planted(tmp_path, "seq_depth", seed, 2.8, name="seq_depth_hot", lr=4e-3,
                given=["config", "lr", "name", "seed"])
    analyze.main([str(tmp_path / "web"), "--baseline", "seq_depth_hot (lr 0.004)"])
    out = capsys.readouterr().out
    assert "val Δ vs seq_depth_hot at step 30" in out and "| seq_only | +0.2000 |" in out, out


def test_a_copied_seed_is_not_pooled_twice_by_the_paper_004_tables(tmp_path):
    """analyze.py --boundary and --paragraphs pool every seed* folder's sums: a seed folder copied beside
    its run was pooled as another seed; both refuse it with the identity check evaluate.py makes."""
    run = planted(tmp_path, "hrope_axial", 0, 3.0)
    np.savez(run / "boundary_test.npz", doc=np.arange(2))
    np.savez(run / "paragraph_test.npz", max_len=np.int64(64))
    shutil.copytree(run, run.parent / "seed1")
    one_line(lambda: boundaries.boundary_pool(str(tmp_path)), "says hrope_axial/seed1", "hrope_axial seed 0")
    one_line(lambda: paragraph_depth.paragraph_regression(str(run.parent), "test", 400, None),
             "says hrope_axial/seed1")
