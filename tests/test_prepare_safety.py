"""prepare.py never loses or mixes data: an output inside its sources is refused before anything is
written, staging folders of killed runs are removed, "up to date" reads the sources' content and every
array's length, and a damaged meta.json, a read-only folder, a full disk or Ctrl-C on the process
group is one line, not a traceback (issue 51). Run: python -m pytest -q tests/test_prepare_safety.py"""
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

import prepare

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = "<html><body><h1>Title {i}</h1><p>Some text of page {i}, long enough to be a page.</p></body></html>"


def pages(folder, n=30):
    os.makedirs(folder, exist_ok=True)
    for i in range(n):
        with open(os.path.join(folder, f"p{i:02d}.html"), "w") as f:
            f.write(PAGE.format(i=i))
    return str(folder)


def web(src, out, *extra):
    return prepare.main(["web", "--src", str(src), "--out", str(out), "--vocab", "300", "--workers", "1",
                         *extra])


def script(*args, **kw):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT, timeout=300,
                          **kw)


def snapshot(folder):
    return {os.path.join(r, f): open(os.path.join(r, f), "rb").read()
            for r, _, fs in os.walk(folder) for f in fs}


@pytest.mark.parametrize("src,out", [("data/json", "data"),         # the output folder is the source
                                     ("data", "data"),              # it lies inside the source
                                     ("data/json/part", "data")])   # it holds the source
def test_an_output_that_is_holds_or_lies_inside_a_source_is_refused_before_writing(src, out, tmp_path):
    """Issue 51 item 1: `prepare.py json --src data/json` deleted every source file."""
    os.makedirs(tmp_path / "data/json/part")
    for i in range(3):
        (tmp_path / f"data/json/part/f{i}.json").write_text(json.dumps({"a": [i, {"b": "text"}]}))
    before = snapshot(tmp_path)
    with pytest.raises(SystemExit) as e:
        prepare.main(["json", "--src", str(tmp_path / src), "--out", str(tmp_path / out), "--workers", "1"])
    assert str(e.value.code).startswith("error: the output folder") and "\n" not in str(e.value.code)
    assert "--out elsewhere" in str(e.value.code)
    assert snapshot(tmp_path) == before and sorted(os.listdir(tmp_path / "data")) == ["json"]


def test_staging_folders_of_dead_processes_are_removed(tmp_path):
    """Issue 51 item 3: a kill -9 during the write left <corpus>.tmp<pid> behind for good."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True)
    os.makedirs(tmp_path / "data" / f"web.tmp{dead.stdout.strip()}")
    (tmp_path / "data" / f"web.tmp{dead.stdout.strip()}" / "train_tokens.npy").write_bytes(b"x" * 100)
    os.makedirs(tmp_path / "data" / "web.tmp1")                          # pid 1 runs: not ours to remove
    web(pages(tmp_path / "src"), tmp_path / "data")
    assert sorted(os.listdir(tmp_path / "data")) == ["web", "web.tmp1"]


def test_an_edit_that_keeps_the_size_and_mtime_rebuilds(tmp_path, capsys):
    """Issue 51 item 7: the fingerprint was name:size, so such an edit was "up to date"."""
    src = pages(tmp_path / "src")
    web(src, tmp_path / "data")
    web(src, tmp_path / "data")
    assert "is up to date" in capsys.readouterr().out
    page = os.path.join(src, "p03.html")
    st = os.stat(page)
    text = open(page).read()
    with open(page, "w") as f:
        f.write(text.replace("page 3", "page 9"))                         # same size
    os.utime(page, ns=(st.st_atime_ns, st.st_mtime_ns))                   # same mtime
    files = json.load(open(tmp_path / "data/web/meta.json"))["settings"]["files"]
    web(src, tmp_path / "data")
    assert "is up to date" not in capsys.readouterr().out
    assert json.load(open(tmp_path / "data/web/meta.json"))["settings"]["files"] != files


def _truncate_bytes(path):
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 10)


def _shorter_array(path):
    a = np.load(path)
    np.save(path, a[:-3])


@pytest.mark.parametrize("damage", [_truncate_bytes, _shorter_array])
@pytest.mark.parametrize("field", ["train_tokens", "val_depth", "train_record_doc"])
def test_a_truncated_array_is_not_up_to_date(damage, field, tmp_path, capsys):
    """Issue 51 item 7: only doc_start's length was checked, so a truncated tokens array passed."""
    src = pages(tmp_path / "src")
    web(src, tmp_path / "data")
    path = tmp_path / f"data/web/{field}.npy"
    length = len(np.load(path))
    damage(path)
    capsys.readouterr()
    web(src, tmp_path / "data")
    assert "is up to date" not in capsys.readouterr().out
    assert len(np.load(path)) == length


@pytest.mark.parametrize("content", ["", '{"settings": {"corpus": "web"'])
def test_a_damaged_meta_json_rebuilds_without_force(content, tmp_path, capsys):
    src = pages(tmp_path / "src")
    web(src, tmp_path / "data")
    (tmp_path / "data/web/meta.json").write_text(content)
    capsys.readouterr()
    web(src, tmp_path / "data")
    assert "is damaged" in capsys.readouterr().out
    assert json.load(open(tmp_path / "data/web/meta.json"))["documents"] == 30


def _one_line_error(run, begins):
    assert run.returncode == 1, run.stderr
    lines = [x for x in run.stderr.strip().split("\n") if x.strip() and "it/s" not in x and "doc/s" not in x]
    assert len(lines) == 1 and lines[0].startswith(begins) and "Traceback" not in run.stderr, run.stderr


def test_a_read_only_output_folder_is_one_line(tmp_path):
    src = pages(tmp_path / "src")
    out = tmp_path / "ro"
    os.makedirs(out)
    os.chmod(out, 0o555)
    try:                                  # root writes anyway: then a folder no one may create in
        os.rmdir(tempfile.mkdtemp(dir=out))
        out = "/sys/treerope_prepare_test"
        os.rmdir(tempfile.mkdtemp(dir="/sys"))
        pytest.skip("no read-only folder on this machine")
    except OSError:
        pass
    run = script("prepare.py", "web", "--src", src, "--out", str(out), "--vocab", "300", "--workers", "1")
    _one_line_error(run, "error: cannot write")
    assert str(out) in run.stderr
    assert "writable --out" in run.stderr or "a folder you can write" in run.stderr


def test_a_full_disk_is_one_line_and_keeps_the_prepared_folder(tmp_path):
    src = pages(tmp_path / "src")
    args = ["prepare.py", "web", "--src", src, "--out", str(tmp_path / "data"), "--vocab", "300",
            "--workers", "1"]
    assert script(*args).returncode == 0
    before = snapshot(tmp_path / "data")
    def limit():   # ulimit -f: writes past 4 KB fail (Python ignores SIGXFSZ: EFBIG)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
    run = script(*args, "--force", preexec_fn=limit)
    _one_line_error(run, "error: cannot write")
    assert "free space" in run.stderr
    assert snapshot(tmp_path / "data") == before                            # as it was, no staging left


SLOW = """import sys, time, prepare, treerope.corpora.web as w
import dataclasses
build = w.CORPORA["web"].build
def slow(item, **kw):
    open(sys.argv[1], "w").close()
    time.sleep(0.5)
    return build(item, **kw)
w.CORPORA["web"] = dataclasses.replace(w.CORPORA["web"], build=slow)
try:
    prepare.main(sys.argv[2:])
except KeyboardInterrupt:
    sys.exit("interrupted")
"""


def test_ctrl_c_on_the_process_group_is_one_line(tmp_path):
    """Ctrl-C reaches every process of the group: the pool workers printed their tracebacks too."""
    src, started = pages(tmp_path / "src", 40), tmp_path / "started"
    p = subprocess.Popen([sys.executable, "-c", SLOW, str(started), "web", "--src", src, "--out",
                          str(tmp_path / "data"), "--vocab", "300", "--workers", "2"], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.time() + 120
    while not started.exists() and time.time() < deadline and p.poll() is None:
        time.sleep(0.1)
    os.killpg(p.pid, signal.SIGINT)
    _, err = p.communicate(timeout=60)
    lines = [x for x in err.split("\n") if x.strip() and "%|" not in x]      # tqdm's bars aside
    assert lines == ["interrupted"], err              # not "Process ForkPoolWorker-1:" and its traceback
    assert not os.path.exists(tmp_path / "data" / "web")
