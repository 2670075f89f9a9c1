"""Every one-call GPU stage of reproduce_gpu.sh dry-runs on CPU (`--dry`: the same code at toy size):
it prepares, times the study's own first steps and states its seeds (study.py --budget), trains them,
evaluates, leaves exactly its four files under $OUT (log, table, runs tarball without checkpoints,
each step's seconds)
and prints the paired table last, so a stage cannot fail on the device for a reason the CPU could have
shown. Slow: a paper-size model trains a few steps on CPU.
Run: python -m pytest -q -m slow tests/test_reproduce_gpu.py"""
import json
import os
import subprocess
import sys
import tarfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = os.path.isdir("/usr/share/doc/python3-doc/html")

STAGES = {   # stage arguments: (name of its files, corpus, the configurations it trains)
    ("python_table",): ("python_table", "programs", ["seq_only", "tree_only", "tree_within", "seq_tree",
                                                     "seq_depth"]),
    ("web_table",): ("web_table", "web", ["seq_only", "tree_only", "tree_within", "seq_tree", "seq_depth"]),
    ("sheets_table",): ("sheets_table", "sheets", ["seq_only", "seq_grid", "seq_tree", "seq_depth"]),
    ("hrope_table", "code"): ("hrope_table_code", "code", ["flat", "hrope_axial"]),
    ("hrope_table", "prose", "3"): ("hrope_table_prose", "prose", ["flat", "rand_axial", "period_axial"]),
}


def dry(args, tmp_path, **limits):
    """`bash scripts/reproduce_gpu.sh ARGS --dry` with its own $OUT and $WORK under tmp_path (and any
    limit planted): (the finished process, $OUT)."""
    out, work = tmp_path / f"out_{args[0]}", tmp_path / f"work_{args[0]}"
    env = {**os.environ, "OUT": str(out), "WORK": str(work), "OMP_NUM_THREADS": "1", **limits}
    return subprocess.run(["bash", "scripts/reproduce_gpu.sh", *args, "--dry"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900), out


@pytest.mark.slow
@pytest.mark.parametrize("args", list(STAGES), ids=["_".join(a) for a in STAGES])
def test_a_stage_dry_runs_to_its_table_and_four_files(args, tmp_path):
    name, corpus, configs = STAGES[args]
    if not PAGES and corpus in ("web", "prose"):
        pytest.skip("needs python3-doc's pages")
    run, out = dry(args, tmp_path)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert sorted(os.listdir(out)) == [f"{name}.log", f"{name}_runs.tar.gz", f"{name}_table.md",
                                       f"{name}_timings.json"]
    table = (out / f"{name}_table.md").read_text()
    assert run.stdout.rstrip().endswith(table.rstrip())                    # the table, printed last
    assert "steps of" in run.stdout and "training seed 0 of 1 at 1 steps" in run.stdout   # study.py --budget
    for config in configs[1:]:                                             # a paired row per configuration
        assert any(config in line and line.startswith("|") for line in table.splitlines()), table
    with tarfile.open(out / f"{name}_runs.tar.gz") as tar:
        names = tar.getnames()
    for config in configs:
        assert f"runs/{corpus}/{config}/seed0/final.json" in names
        assert f"runs/{corpus}/{config}/seed0/eval_test.json" in names
    assert not any(n.endswith(".pt") for n in names)
    if corpus == "sheets":
        assert "SYNTHETIC" in run.stdout


@pytest.mark.slow
def test_the_speed_stages_dry_run_to_their_files(tmp_path):
    """speed_check runs the kernel's and the study's tests and the rotation benchmark; study_bench
    prepares the Python setting, times 2 runs as one study alone, then 2 and 1 runs batched beside
    separate processes (no checkpoints), its figures and plan printed before any step, the card named
    and each step's seconds in STAGE_timings.json."""
    for stage, files, said in (("speed_check", ["rotation.txt", "speed_check.log",
                                                "speed_check_timings.json"], "passed"),
                               ("study_bench", ["study_bench.log", "study_bench.txt",
                                                "study_bench_runs.tar.gz", "study_bench_timings.json"],
                                "M 1  path separate")):
        run, out = dry([stage], tmp_path)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        assert sorted(os.listdir(out)) == files and said in run.stdout, run.stdout[-3000:]
        assert "card: none, the CPU (--dry); python " in run.stdout
        timed = json.load(open(out / f"{stage}_timings.json"))["steps"]
        assert all(s["exit"] == 0 and 0 <= s["seconds"] <= s["limit_s"] for s in timed.values()), timed
    rows = [line for line in (out / "study_bench.txt").read_text().splitlines() if line.startswith("M ")]
    assert [r.split("  ")[:2] for r in rows] == [["M 2", "path study"], ["M 2", "path study"],
                                                 ["M 2", "path separate"], ["M 1", "path study"],
                                                 ["M 1", "path separate"]]
    said = run.stdout.index
    assert said("figure: compiled <= 300 s: --dry") < said("plan: setup <= 60 prepare") < said("-- prepare")
    assert set(timed) == {"setup", "prepare", "compiled", "eager"}
    with tarfile.open(out / "study_bench_runs.tar.gz") as tar:   # every measurement's logs, no checkpoint
        names = tar.getnames()
    for kept in ("compiled/M2_study", "eager/M2_study", "eager/M2_separate", "eager/M1_separate"):
        assert f"bench/{kept}/programs/seq_only/seed0/log.jsonl" in names
    assert not any(n.endswith(".pt") for n in names)
    assert not list((tmp_path / "work_study_bench").rglob("ckpt.pt"))   # --checkpoint=0: none written


@pytest.mark.slow
def test_a_benchmark_killed_at_its_limit_keeps_the_rows_it_finished(tmp_path):
    """study_bench --dry with the eager comparison's limit planted at 2 s: the compiled study's row,
    measured first, is in $OUT/study_bench.txt; the stage exits non-zero, naming the step it lost."""
    run, out = dry(["study_bench"], tmp_path, LIMIT_BENCH="2")
    assert run.returncode != 0
    rows = (out / "study_bench.txt").read_text()
    assert "M 2  path study  runs 2  tokens/s" in rows and "path separate" not in rows
    with tarfile.open(out / "study_bench_runs.tar.gz") as tar:   # the finished measurement's logs, kept
        names = tar.getnames()
    kept = "bench/compiled/M2_study/"
    assert kept + "programs/seq_depth/seed0/log.jsonl" in names and kept + "output.txt" in names
    assert not any(n.endswith(".pt") for n in names)
    last = (out / "study_bench.log").read_text().rstrip().splitlines()[-1]
    assert last.startswith("== study_bench FAILED at: 2. bench.py study") and "ran past its 2 s limit" in last


@pytest.mark.slow
def test_a_step_past_its_limit_ends_the_stage_named_with_its_rows_kept(tmp_path):
    """speed_check --dry with the rotation's limit planted at 2 s (its imports alone take longer): the
    tests' rows are already in $OUT's log, the stage exits non-zero, and its last line names the step."""
    run, out = dry(["speed_check"], tmp_path, LIMIT_ROTATION="2")
    assert run.returncode != 0
    log = (out / "speed_check.log").read_text()
    assert " passed" in log and any(line.startswith("plan: setup <= 60 tests <= 400 rotation <= 2 s")
                                    for line in log.splitlines()[:6])
    assert log.rstrip().splitlines()[-1].startswith("== speed_check FAILED at: 2. a study's rotation")
    assert "ran past its 2 s limit" in log.rstrip().splitlines()[-1]


@pytest.mark.slow
def test_a_table_stage_past_its_scoring_limit_keeps_its_table_and_runs(tmp_path):
    """python_table --dry with evaluate.py's limit planted at 2 s: the paired table (final.json's
    losses) was written before scoring and the runs tarball on exit, so both are in $OUT; the stage exits
    non-zero, naming the scoring step."""
    run, out = dry(["python_table"], tmp_path, LIMIT_SCORE="2")
    assert run.returncode != 0
    assert sorted(os.listdir(out)) == ["python_table.log", "python_table_runs.tar.gz",
                                       "python_table_table.md", "python_table_timings.json"]
    table = (out / "python_table_table.md").read_text().splitlines()
    assert any("seq_depth" in line and line.startswith("|") for line in table)
    with tarfile.open(out / "python_table_runs.tar.gz") as tar:
        assert "runs/programs/seq_depth/seed0/final.json" in tar.getnames()
    last = (out / "python_table.log").read_text().rstrip().splitlines()[-1]
    assert last.startswith("== python_table FAILED at: evaluate.py on every run") and "2 s limit" in last


def planned(stage, **env):
    """`bash scripts/reproduce_gpu.sh STAGE --plan` for the GPU (no setup, nothing run): (exit, output)."""
    run = subprocess.run(["bash", "scripts/reproduce_gpu.sh", stage, "--plan"], cwd=ROOT, text=True,
                         env={**os.environ, **env}, capture_output=True, timeout=60)
    return run.returncode, run.stdout + run.stderr


@pytest.mark.parametrize("stage,steps", [("speed_check", ["tests", "rotation"]),
                                         ("study_bench", ["prepare", "compiled", "eager"])])
def test_a_speed_stage_plans_a_quarter_of_a_call_free_each_limit_with_its_figure(stage, steps):
    """The GPU plan: each step's limit printed with the figure it rests on, the sum at most 450 of a
    call's 600 s; a limit planted past that is refused in one line before anything runs."""
    code, out = planned(stage)
    total = int(out.split("plan: ")[1].split(" s in all")[0].rsplit("; ", 1)[1])
    assert code == 0 and total <= 450 and f"{total} s in all" in out, out
    for key in steps:
        assert out.index(f"figure: {key} <= ") < out.index("plan: "), out
    code, out = planned(stage, LIMIT_TESTS="400", LIMIT_COMPILED="400")
    assert code == 1 and out.splitlines()[-1].startswith("error: the plan's ") and "25%" in out, out


def test_an_earlier_calls_timings_plan_the_next(tmp_path):
    """TIMINGS=FILE (a call's study_bench_timings.json): a step that finished gets 1.5 x its seconds +
    20 (prepare 30 s -> 65); one that overran keeps its limit (compiled: 160); a --dry file's CPU seconds
    plan no GPU call; a file that is not one is a one-line error."""
    timings = {"stage": "study_bench", "card": "NVIDIA H100 80GB HBM3", "commit": "abc1234", "dry": False,
               "date": "2026-12-07T10:00:00Z",
               "steps": {"prepare": {"limit_s": 60, "seconds": 30, "exit": 0},
                         "compiled": {"limit_s": 160, "seconds": 170, "exit": 124}}}
    path = tmp_path / "study_bench_timings.json"
    path.write_text(json.dumps(timings))
    code, out = planned("study_bench", TIMINGS=str(path))
    assert code == 0 and "plan: setup <= 30 prepare <= 65 compiled <= 160 eager <= 180 s" in out, out
    assert "figure: prepare took 30 s of its 60 s limit, exit 0 in" in out and "NVIDIA H100 80GB HBM3" in out
    path.write_text(json.dumps({**timings, "dry": True}))
    assert "prepare <= 60 compiled" in planned("study_bench", TIMINGS=str(path))[1]
    path.write_text("{}")
    code, out = planned("study_bench", TIMINGS=str(path))
    assert code == 1 and out.splitlines()[-1] == f"error: TIMINGS={path} is not a STAGE_timings.json", out


@pytest.mark.parametrize("fails,said", [("pip install", "error: pip could not install"),
                                        ("import rustbpe", "error: rustbpe or openpyxl still missing")])
def test_carried_wheels_that_do_not_install_stop_the_stage_in_one_line(tmp_path, fails, said):
    """A machine without rustbpe/openpyxl (planted: python3 says so) installs the carried wheels: pip's
    failure, or the packages still missing after it (wheels for another Python), ends the stage there."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "whl").mkdir()
    (tmp_path / "whl" / "rustbpe-0-cp39-none-any.whl").write_text("not a wheel")
    shim = tmp_path / "bin" / "python3"
    shim.write_text(f'#!/bin/sh\ncase "$*" in *"import rustbpe"*|*"{fails}"*) exit 1 ;; '
                    f'*"pip install"*) exit 0 ;; esac\nexec {sys.executable} "$@"\n')
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "WHEELS": str(tmp_path / "whl"),
           "OUT": str(tmp_path / "out"), "WORK": str(tmp_path / "work")}
    run = subprocess.run(["bash", "scripts/reproduce_gpu.sh", "speed_check", "--dry"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 1 and run.stdout.splitlines()[-1].startswith(said), run.stdout + run.stderr
    assert "-- 1." not in run.stdout + run.stderr


@pytest.mark.slow
def test_the_studies_mode_leaves_three_flat_files_in_out(tmp_path):
    """`studies` (every CPU-scale study on one GPU) keeps its runs under $OUT10 and, on any exit (here:
    no data prepared, every run refused in one line), leaves $OUT only its log, tables and runs tarball:
    what a call brings back (8 files, 2 folders deep at most)."""
    out = tmp_path / "out"
    env = {**os.environ, "OUT": str(out), "OUT10": str(tmp_path / "out10"), "SEEDS10": "0", "JOBS": "1",
           "OMP_NUM_THREADS": "1"}
    subprocess.run(["bash", "scripts/reproduce_gpu.sh", "studies"], cwd=ROOT, env=env, capture_output=True,
                   text=True, timeout=600, input="")
    assert sorted(os.listdir(out)) == ["studies.log", "studies_runs.tar.gz", "studies_tables.md"]
    log = (out / "studies.log").read_text()   # refused: no data (on a GPU), no CUDA device (here)
    assert "is not prepared" in log or "--device cuda is not available on this machine" in log
    with tarfile.open(out / "studies_runs.tar.gz") as tar:
        assert "./programs/seq_only/seed0/train.log" in tar.getnames()
