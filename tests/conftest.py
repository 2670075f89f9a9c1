import os
import sys

# Triton kernels run on CPU through the interpreter; must be set before triton is imported.
os.environ.setdefault("TRITON_INTERPRET", "1")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import glob
import sysconfig

import pytest

STDLIB = sysconfig.get_paths()["stdlib"]


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
    """A small real corpus: 40 standard-library files, prepared with a 512-entry BPE."""
    import shutil

    import prepare
    src = tmp_path_factory.mktemp("src")
    for p in stdlib_files()[200:240]:
        shutil.copy(p, src / os.path.basename(p))
    out = tmp_path_factory.mktemp("data")
    prepare.main(["python", "--src", str(src), "--out", str(out), "--vocab", "512", "--max_len", "256",
                  "--workers", "1"])
    return str(out)
