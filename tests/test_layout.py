"""The shape of the repository: entry-point scripts import libraries, never each other.
Run: python -m pytest -q tests/test_layout.py"""
import ast
import glob
import os

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
    found = {os.path.basename(p)[:-3]: imports(p) & SCRIPTS for p in files}
    assert {k: v for k, v in found.items() if v} == {}
