"""The small-program Python corpus (appendix §4: programs, not modules): what a program is, by hand,
and the compact stream on real standard-library programs (round trip, parents from depth, density).
Run: python -m pytest -q tests/test_programs.py"""
import ast
import json
import os
import re

import numpy as np
import pytest
from conftest import stdlib_files

import prepare
import trees
from treerope import tokenizer, writer
from treerope.corpora import programs
from treerope.corpora import python as pycorpus
from treerope.corpora.text import source_text

MODULE = '''"""doc"""
import os
from a.b import c as d

X = 1


def short(x):
    return x


@decorated
def kept(y):
    z = y + 1
    return z


class K:
    def m(self):
        return os.sep
''' + "def long():\n" + "    pass\n" * 60


def test_old_stream_programs_are_top_level_functions_and_classes_with_all_imports():
    progs = dict(programs.python_programs(MODULE, stream="old"))
    assert sorted(progs) == ["K", "kept"]          # short: 2 lines; long: 61 lines; X is no program
    assert progs["kept"] == \
        "import os\nfrom a.b import c as d\n@decorated\ndef kept(y):\n    z = y + 1\n    return z\n"
    assert progs["K"].endswith("class K:\n    def m(self):\n        return os.sep\n")
    for text in progs.values():                    # every program is itself a Python file the corpus reads
        pycorpus.python_doc(text, stream="old")
    compact = dict(programs.python_programs(MODULE))
    assert compact["kept"] == "@decorated\ndef kept(y):\n    z = y + 1\n    return z\n"   # uses no import
    assert compact["K"].startswith("import os\nclass K:")


def test_a_module_that_does_not_parse_gives_no_program():
    with pytest.raises(trees.Skip, match="syntax error"):        # counted, as the python corpus counts it
        programs.python_programs("def f(:\n    pass\n")


def test_one_modules_programs_share_its_split():
    names = [f"0/pkg/mod{i}.py" for i in range(40)]
    for n in names:
        assert {prepare.split_of(f"{n}::{q}") for q in ("a", "b", "C")} == {prepare.split_of(n)}
    assert len({prepare.split_of(n) for n in names}) > 1   # modules still spread over the splits


def test_meta_reports_the_reference_token_share_python(tmp_path):
    """meta.json's reference_token_share: tokens reference rotation moves over all tokens (appendix
    §4's 20.6% on Python), the same count writer.reference_stats makes from the arrays on disk."""
    import json
    import os

    from conftest import stdlib_files

    src = tmp_path / "src"
    src.mkdir()
    for p in stdlib_files()[:30]:
        (src / os.path.basename(p)).write_bytes(open(p, "rb").read())
    out = prepare.main(["python", "--src", str(src), "--out", str(tmp_path / "data"), "--vocab", "300",
                        "--workers", "1"])
    share = json.load(open(os.path.join(out, "meta.json")))["reference_token_share"]
    counts = writer.reference_stats(out)
    assert 0 < share < 1 and share == counts["affected"] / counts["tokens"]


def test_a_program_gets_only_the_imports_it_uses():
    """Five names imported, one used: the program carries exactly that one (a star binds nothing
    we can see; __future__ is the compiler's and stays)."""
    module = ("from __future__ import annotations\nimport os, sys\nfrom a.b import c as d, e\n"
              "from f import *\nimport json.decoder\n\ndef g(p):\n    q = d(p)\n    return q\n")
    assert dict(programs.python_programs(module)) == {
        "g": "from __future__ import annotations\nfrom a.b import c as d\n"
             "def g(p):\n    q = d(p)\n    return q\n"}
    uses_dotted = module.replace("d(p)", "json.decoder.x(p)")
    assert dict(programs.python_programs(uses_dotted))["g"].startswith(
        "from __future__ import annotations\nimport json.decoder\ndef g")


def test_docstrings_are_left_out_of_a_program():
    """Our reading: a program is its code; docstrings (module, class, function, nested) are dropped
    from the stream and from the round trip's reference, a body left empty becomes `pass`; every
    other string stays, a string statement after the first included."""
    src = ('"""module doc"""\nclass K:\n    """class doc"""\n    def m(self):\n'
           '        """only a docstring"""\ndef f(a):\n    "f doc"\n    def g():\n        """g doc"""\n'
           '        return \'kept\'\n    "second statement: kept"\n    return g\n')
    doc = pycorpus.python_doc(src, rename=False, stream="compact")
    assert "doc" not in doc.text and "'kept'" in doc.text and "'second statement: kept'" in doc.text
    expected = ("class K:\n\n    def m(self):\n        pass\n\ndef f(a):\n\n    def g():\n"
                "        return 'kept'\n    'second statement: kept'\n    return g")
    assert pycorpus.canonical_python(src, rename=False, stream="compact") == expected
    assert ast.unparse(pycorpus.drop_docstrings(ast.parse(src))) == expected
    assert "module doc" in pycorpus.python_doc(src, stream="old").text      # the old stream keeps them


def test_module_and_class_level_renaming_by_hand():
    """Our reading (compact stream): module-level bindings are renamed too — assignment targets,
    defs and classes, and what an import binds (`import os as x0`: what is imported keeps its name).
    Class-body names stay: they are attributes (self.y, K.m). Each outermost function numbers its
    locals after the module's names, so no local hides one; a name first used before it is bound
    (helper) keeps its spelling; `global X` takes X's module-level spelling."""
    src = ("from __future__ import annotations\nimport os\nfrom a import b as c\nX = 1\n\n"
           "class K(Base):\n    y = X\n\n    def m(self, v):\n        return K(os.sep, c, self.y, v)\n\n"
           "def f(n):\n    global X\n    X = n\n    return f(n - 1) + helper()\n\n"
           "def helper():\n    return X\n")
    assert pycorpus.canonical_python(src, stream="compact") == (
        "from __future__ import annotations\nimport os as x0\nfrom a import b as x1\nx2 = 1\n\n"
        "class x3(Base):\n    y = x2\n\n    def m(x4, x5):\n        return x3(x0.sep, x1, x4.y, x5)\n\n"
        "def x4(x5):\n    global x2\n    x2 = x5\n    return x4(x5 - 1) + helper()\n\n"
        "def helper():\n    return x2")
    doc = pycorpus.python_doc(src, stream="compact")
    assert doc.text.startswith("|__future__ !annotations Import !!os x0 |a !!b x1 Assign x2 =1 $x3 Base")
    assert "^m arguments =:x4 :x5" in doc.text and "^x4 arguments =:x5" in doc.text
    # the whole-module corpus keeps its renaming: module-level names and imports as written
    assert pycorpus.canonical_python(src).startswith("from __future__ import annotations\nimport os\n"
                                                     "from a import b as c\nX = 1\n\nclass K(Base):")


def test_small_programs_only():
    """Compact: a program with a node of more than 20 children (the fast plane wraps) or a string
    over 80 characters is not small; 20 children and 80 characters are."""
    def kept(body):
        return bool(programs.python_programs(f"def f():\n    {body}\n    return 1\n"))
    assert kept("x = [" + "1, " * 20 + "]") and not kept("x = [" + "1, " * 21 + "]")
    assert kept("x = '" + "a" * 80 + "'") and not kept("x = '" + "a" * 81 + "'")
    assert kept('"""' + "a docstring is dropped, so it may be long " * 4 + '"""')
    assert programs.python_programs("def f():\n    x = 1\n    return '" + "a" * 81 + "'\n", stream="old")


def real_programs(stream, every=60):
    for p in stdlib_files()[::every]:
        try:
            src = source_text(open(p, "rb").read())
        except trees.Skip:
            continue
        yield from (prog for _, prog in programs.python_programs(src, stream=stream))


def test_compact_programs_round_trip_on_real_files():
    """Every compact program of a standard-library sample (and a few whole modules) decodes from its
    text + depths to ast.unparse of the program without docstrings; renamed, parents come back from
    order and depth alone, the program compiles, and only names changed (the same node types)."""
    modules = [open(p, "rb").read() for p in stdlib_files()[7::300]]
    progs = list(real_programs("compact")) + [m for m in modules if m.strip()]
    assert len(progs) > 100
    for prog in progs:
        doc = pycorpus.python_doc(prog, rename=False, stream="compact")
        decoded = pycorpus.decode_python(doc.text, doc.node_coords()[0].tolist())
        reference = pycorpus.drop_docstrings(ast.parse(prog))
        assert ast.unparse(decoded) == ast.unparse(reference)
        renamed = pycorpus.python_doc(prog, stream="compact")
        depth = renamed.node_coords()[0].tolist()
        assert pycorpus.parents_from_depth(depth) == renamed.parent.tolist()
        canon = pycorpus.decode_python(renamed.text, depth)
        compile(ast.unparse(canon), "<canon>", "exec")
        assert [type(n) for n in ast.walk(canon)] == [type(n) for n in ast.walk(decoded)]


def test_compact_density_and_ranks_on_real_programs():
    """Nodes per pre-token (tokenizer.CODE_PAT) bound nodes per token from above; on the default
    programs the 32,768-entry BPE keeps about 0.91 of it (0.85 -> 0.77), so 0.75 per token needs
    about 0.82 per pre-token. The old stream (all imports, docstrings, two-word defs) has 0.57."""
    pat = re.compile(tokenizer.CODE_PAT)
    density = {}
    for stream in ("compact", "old"):
        docs = [pycorpus.python_doc(p, stream=stream) for p in real_programs(stream)]
        density[stream] = sum(len(d.parent) for d in docs) / sum(len(pat.findall(d.text)) for d in docs)
        ranks = np.concatenate([d.rank[d.parent >= 0] for d in docs])
        if stream == "compact":
            assert np.percentile(ranks, 99) <= 10 and ranks.max() < programs.MAX_CHILDREN
    assert density["compact"] >= 0.82 and density["old"] < 0.65, density


def test_programs_meta_reports_density_rank_and_reference_share(tmp_path):
    """meta.json of a programs corpus: nodes_per_token, sibling_rank_p99 and reference_token_share
    (writer.reference_stats' count); --stream old is the older, sparser stream and says so."""
    src = tmp_path / "src"
    src.mkdir()
    for p in stdlib_files()[100:112]:
        (src / os.path.basename(p)).write_bytes(open(p, "rb").read())
    meta = {}
    for stream in ("compact", "old"):
        out = prepare.main(["programs", "--src", str(src), "--out", str(tmp_path / stream), "--vocab", "300",
                            "--workers", "1", "--stream", stream])
        meta[stream] = json.load(open(os.path.join(out, "meta.json")))
        counts = writer.reference_stats(out)
        assert meta[stream]["reference_token_share"] == counts["affected"] / counts["tokens"]
        assert meta[stream]["settings"]["stream"] == stream and "sibling_rank_p99" in meta[stream]
    assert meta["compact"]["nodes_per_token"] > meta["old"]["nodes_per_token"]
    assert meta["compact"]["reference_token_share"] > meta["old"]["reference_token_share"]
