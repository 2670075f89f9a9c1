"""A prepared-data folder and a run folder have one writer at a time: a second prepare.py or
train.py into a folder being written is refused in one line; a lock its dead owner left is taken over.
Run: python -m pytest -q tests/test_ownership.py"""
import json
import os
import subprocess
import sys

from treerope import files

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = "<html><body><h1>Title {i}</h1><p>Some text of page {i}, long enough to be a page.</p></body></html>"


def pages(tmp_path, n=60):
    src = tmp_path / "src"
    src.mkdir()
    for i in range(n):
        (src / f"p{i}.html").write_text(PAGE.format(i=i))
    return str(src)


def script(*args):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT, timeout=300)


def test_a_second_prepare_into_a_folder_being_written_is_refused(tmp_path):
    src, out = pages(tmp_path), str(tmp_path / "data")
    with files.owned(os.path.join(out, "web"), "the prepared data"):     # a first writer, alive
        second = script("prepare.py", "web", "--src", src, "--out", out, "--vocab", "300", "--workers", "1")
    assert second.returncode == 1 and not os.path.exists(os.path.join(out, "web"))
    assert second.stderr.strip().count("\n") == 0
    assert f"being written by process {os.getpid()}" in second.stderr
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True)
    with open(os.path.join(out, "web.lock"), "w") as f:                 # left by a process that is gone
        f.write(dead.stdout.strip())
    first = script("prepare.py", "web", "--src", src, "--out", out, "--vocab", "300", "--workers", "1")
    assert first.returncode == 0, first.stderr
    assert not os.path.exists(os.path.join(out, "web.lock"))
    assert json.load(open(os.path.join(out, "web", "meta.json")))["documents"] == 60


def test_a_second_train_on_a_run_being_written_is_refused_and_up_to_date_checks_the_arrays(tmp_path):
    src, out = pages(tmp_path), str(tmp_path / "data")
    prep = ["prepare.py", "web", "--src", src, "--out", out, "--vocab", "300", "--workers", "1"]
    assert script(*prep).returncode == 0
    run = os.path.join(str(tmp_path / "out"), "web", "seq_depth", "seed0")
    flags = ["train.py", "--config", "seq_depth", "--data", out, "--out", str(tmp_path / "out"), "--steps=1",
             "--val_docs=2", "--test_docs=2", "--compile=0", "--bf16=0"]
    with files.owned(run, "the run"):
        second = script(*flags)
    assert second.returncode == 1 and "the run" in second.stderr and "being written" in second.stderr
    assert not os.path.exists(os.path.join(run, "final.json"))
    assert script(*flags).returncode == 0 and os.path.exists(os.path.join(run, "final.json"))
    os.remove(os.path.join(run, "final.json"))   # resumable from its checkpoint: refused, not "resuming"
    with files.owned(run, "the run"):
        third = script(*flags)
    assert third.returncode == 1 and "being written" in third.stderr and "resuming" not in third.stdout
    resumed = script(*flags)
    assert resumed.returncode == 0 and f"resuming {run} from step 1" in resumed.stdout
    os.remove(os.path.join(out, "web", "val_doc_start.npy"))   # meta.json alone is not "up to date"
    again = script(*prep)
    assert again.returncode == 0 and "up to date" not in again.stdout
    assert os.path.exists(os.path.join(out, "web", "val_doc_start.npy"))
