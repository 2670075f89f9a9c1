"""The quickstart on real pages: `prepare.py web` cuts records at the context `train.py` trains
(appendix §4: "No document is split across steps"), and train.py says so when records are longer.
Run: python -m pytest -q tests/test_quickstart.py"""
import glob
import os

import numpy as np
import pytest

import prepare
import train
from model import GPTConfig

PAGES = sorted(glob.glob("/usr/share/doc/python3-doc/html/library/*.html"))[:24]


@pytest.mark.skipif(len(PAGES) < 24, reason="needs python3-doc (apt-get install python3-doc)")
def test_quickstart_records_fit_the_context_it_trains(tmp_path, capsys):
    src = tmp_path / "src"
    src.mkdir()
    for p in PAGES:
        os.symlink(p, src / os.path.basename(p))
    data = str(tmp_path / "data")
    prepare.main(["web", "--src", str(src), "--out", data, "--workers", "1"])
    context = GPTConfig.max_len   # the defaults' context
    lengths = np.concatenate([np.diff(np.load(os.path.join(data, "web", f"{s}_doc_start.npy")))
                              for s in ("train", "val", "test")])
    assert lengths.max() == context and (lengths > context // 2).mean() > 0.5   # long pages cut at 256
    run = ["--data", data, "--out", str(tmp_path / "out"), "--steps=1", "--val_docs=2", "--test_docs=2",
           "--compile=0", "--bf16=0"]
    capsys.readouterr()
    train.main(["--config", "seq_depth", *run])
    assert "longer than the context" not in capsys.readouterr().out
    train.main(["--config", "seq_depth", "--max_len=128", "--name=short", *run])
    note = [line for line in capsys.readouterr().out.splitlines() if "longer than the context" in line]
    assert len(note) == 1 and "only their first 128 tokens train" in note[0]
