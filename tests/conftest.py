import os
import sys

# Triton kernels run on CPU through the interpreter; must be set before triton is imported.
os.environ.setdefault("TRITON_INTERPRET", "1")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import glob
import shutil
import sysconfig

import numpy as np
import pytest
import torch

import prepare
from rotary import tl, triton
from treerope import machine

STDLIB = sysconfig.get_paths()["stdlib"]
# 40 files of CPython 3.11.7's distutils (PSF licence, stdlib311/README.md): the corpus whose losses tests
# record, the same files whichever interpreter runs them; their test_*.py are data, not tests
TINY_PYTHON = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "stdlib311", "**", "*.py"),
                               recursive=True))
collect_ignore = ["stdlib311"]


@triton.jit
def _count(X, n):   # a loop over a runtime count, as rotary.py's kernels loop over heads (range(H))
    for i in range(n):
        tl.store(X + i, i)


def triton_fault():
    """Why rotary.py's kernels cannot run here, or None: triton missing, or (TRITON_INTERPRET=1) its
    interpreter failing a loop over a runtime count (triton 3.6 with numpy >= 2.4 does)."""
    if tl.constexpr is None:
        return "triton not installed"
    if os.environ["TRITON_INTERPRET"] != "1":
        return None
    x = torch.zeros(3, dtype=torch.int32)
    try:
        _count[(1,)](x, 3)
    except Exception as e:   # the interpreter wraps numpy's TypeError in its own error
        return f"triton {triton.__version__}'s interpreter fails with numpy {np.__version__}: {e}"
    return None if x.tolist() == [0, 1, 2] else f"triton {triton.__version__}'s interpreter counts wrong"


TRITON_FAULT = triton_fault()
needs_triton = pytest.mark.skipif(TRITON_FAULT is not None, reason=f"the Triton kernel: {TRITON_FAULT}")


@pytest.fixture(autouse=True)
def one_process(monkeypatch):
    """Runs trained at once stay in the test's process (machine.per_core forks one a core, and a fork keeps
    neither a test's captured output nor its view of the runs); tests of the forks give machine.cores."""
    monkeypatch.setattr(machine, "cores", lambda: 1)


def pytest_terminal_summary(terminalreporter):
    if TRITON_FAULT and terminalreporter.stats.get("skipped"):   # said under -q too
        terminalreporter.write_line(f"skipped the Triton kernel's tests: {TRITON_FAULT}")


def stdlib_files():
    return sorted(p for p in glob.glob(os.path.join(STDLIB, "**", "*.py"), recursive=True)
                  if "site-packages" not in p)


def one_line(call, *names):
    """call() exits with one line (exit status 1: a message, not a code) that names each of `names`."""
    with pytest.raises(SystemExit) as e:
        call()
    msg = e.value.code
    assert isinstance(msg, str) and msg.startswith("error: ") and "\n" not in msg, msg
    for name in names:
        assert name in msg, msg
    return msg


@pytest.fixture(scope="session")
def tiny_python(tmp_path_factory):
    """A small real corpus: the 40 committed standard-library files, prepared with a 512-entry BPE."""
    src = tmp_path_factory.mktemp("src")
    for p in TINY_PYTHON:
        shutil.copy(p, src / os.path.basename(p))
    out = tmp_path_factory.mktemp("data")
    prepare.main(["python", "--src", str(src), "--out", str(out), "--vocab", "512", "--max_len", "256",
                  "--workers", "1"])
    return str(out)
