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
