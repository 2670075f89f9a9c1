"""The shape of the repository: entry-point scripts import libraries, never each other.
Run: python -m pytest -q tests/test_layout.py"""
import ast
import glob
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = {"prepare", "train", "evaluate", "analyze", "sample"}


def imports(path):
    """Every module a file imports, at its top or inside a function."""
    out = set()
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


def test_no_file_imports_an_entry_point_script():
    """evaluate.py once imported Split from train.py, and train.py its file helpers (with openpyxl,
    rustbpe and tiktoken) from prepare.py: the shared layer is data.py now. Libraries (data, model,
    rotary, trees, tokenizer, candidates, boundaries, ...) may keep a small __main__ of their own."""
    files = sorted(glob.glob(os.path.join(ROOT, "*.py")))
    names = {os.path.basename(p)[:-3] for p in files}
    assert {"prepare", "train", "evaluate", "analyze", "data"} <= names
    # the benchmark drives train.py's loop as it runs; the study runner trains each run as train.py does
    found = {os.path.basename(p)[:-3]: imports(p) & SCRIPTS for p in files
             if os.path.basename(p) not in ("bench.py", "study.py")}
    assert {k: v for k, v in found.items() if v} == {}


LIFT = """
import json, sys, torch
sys.path.insert(0, sys.argv[1])
from model import GPT, GPTConfig
torch.manual_seed(0)
model = GPT(GPTConfig(vocab_size=64, n_layer=2, n_embd=64, n_head=1, max_len=16, rotary="seq_depth"))
pos = torch.arange(16).expand(2, 16)
depth = torch.tensor([[1, 2, 3, 3, 2, 1, 2, 3] * 2, [1, 1, 2, 2, 3, 3, 4, 4] * 2])
idx = torch.arange(32).view(2, 16) % 64
C = model.rotary.coords({"pos": pos, "depth": depth})
logits, (_, nll, _) = model(idx, C)[0], model(idx, C, targets=idx.roll(-1, 1))
nll.mean().backward()
torch.optim.AdamW(model.parameters(), lr=1e-3).step()
project = sorted(m for m in sys.modules if m.split(".")[0] in {PROJECT})
heavy = sorted(m for m in ("openpyxl", "lxml", "tiktoken", "rustbpe", "scipy", "matplotlib")
               if m in sys.modules)
print(json.dumps({"logits": logits.detach().flatten().tolist(), "project": project, "heavy": heavy}))
"""


def project_modules():
    names = {os.path.basename(p)[:-3] for p in glob.glob(os.path.join(ROOT, "*.py"))}
    return names | {d for d in ("corpora", "hrope") if os.path.isdir(os.path.join(ROOT, d))}


def lifted(where):
    import json
    import subprocess
    import sys
    code = LIFT.replace("{PROJECT}", repr(project_modules()))
    out = subprocess.run([sys.executable, "-I", "-c", code, where], capture_output=True, text=True, cwd=where)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_model_and_rotary_lift_out_alone(tmp_path):
    """The tree rotary is meant to be taken into another GPT: model.py and rotary.py copied alone
    into an empty folder build seq_depth, run forward, backward and an optimiser step on a
    hand-made pos/depth batch, and give the in-repo model's logits; the repository's run loads
    rotary and nothing heavy (no corpora, no tokeniser, no workbook or HTML reader)."""
    import shutil
    for f in ("model.py", "rotary.py"):
        shutil.copy(os.path.join(ROOT, f), tmp_path / f)
    alone, home = lifted(str(tmp_path)), lifted(ROOT)
    assert alone["project"] == ["model", "rotary"] and home["project"] == ["model", "rotary"]
    assert alone["heavy"] == [] and home["heavy"] == []
    assert alone["logits"] == home["logits"] and len(alone["logits"]) == 2 * 16 * 64


def test_no_function_over_sixty_lines():
    """Readable as a tutorial: every function outside tests/ fits on a screen."""
    long = []
    for path in glob.glob(os.path.join(ROOT, "**", "*.py"), recursive=True):
        if os.path.relpath(path, ROOT).split(os.sep)[0] == "tests":
            continue
        for node in ast.walk(ast.parse(open(path).read())):
            lines = getattr(node, "end_lineno", 0) - getattr(node, "lineno", 0) + 1
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and lines > 60:
                long.append(f"{os.path.relpath(path, ROOT)}:{node.name} ({lines})")
    assert long == []


def test_rotary_lists_every_configuration():
    """`python rotary.py` lists the core registry and the ones registered from configs.py and hrope/."""
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "rotary.py"], capture_output=True, text=True, cwd=ROOT).stdout
    names = {line.split()[0] for line in out.splitlines()[1:-1]}
    assert {"seq_depth", "two_corpus_shared", "ref_directed", "hrope_axial", "rand_axial"} <= names


@pytest.mark.slow   # prepares python3-doc's pages and trains: about 30 s
@pytest.mark.skipif(not os.path.isdir("/usr/share/doc/python3-doc/html"), reason="needs python3-doc")
def test_the_quickstart_loads_at_most_2000_lines_of_code():
    """A tutorial read in a sitting: `prepare.py web` + `train.py --config seq_depth` load at most
    2,000 code lines of the project (docstrings and comments not counted), and no paper-004 room."""
    import bench
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        files = bench.quickstart_lines()
    finally:
        os.chdir(cwd)
    assert sum(code for _, code in files.values()) <= 2000, files
    assert not any(p.startswith(("hrope", "configs", "corpora/sheets", "corpora/python")) for p in files)


def test_prepare_starts_without_torch():
    """prepare.py needs no model: importing it with the tree corpora's readers (web, python, sheets)
    leaves torch unloaded, and the path levels trees.py cuts at are the levels rotary.py encodes."""
    import subprocess
    import sys
    code = "import sys, prepare, corpora.web, corpora.python, corpora.sheets; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    import rotary
    import trees
    assert trees.LEVELS == rotary.LEVELS == 22
