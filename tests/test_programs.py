"""The small-program Python corpus (appendix §4: programs, not modules): what a program is, by hand."""
import prepare
from corpora import python as pycorpus

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


def test_programs_are_top_level_functions_and_classes_with_the_imports():
    progs = dict(pycorpus.python_programs(MODULE))
    assert sorted(progs) == ["K", "kept"]          # short: 2 lines; long: 61 lines; X is no program
    assert progs["kept"] == \
        "import os\nfrom a.b import c as d\n@decorated\ndef kept(y):\n    z = y + 1\n    return z\n"
    assert progs["K"].endswith("class K:\n    def m(self):\n        return os.sep\n")
    for text in progs.values():                    # every program is itself a Python file the corpus reads
        pycorpus.python_doc(text)


def test_a_module_that_does_not_parse_gives_no_program():
    assert pycorpus.python_programs("def f(:\n    pass\n") == []


def test_one_modules_programs_share_its_split():
    names = [f"0/pkg/mod{i}.py" for i in range(40)]
    for n in names:
        assert {prepare.split_of(f"{n}::{q}") for q in ("a", "b", "C")} == {prepare.split_of(n)}
    assert len({prepare.split_of(n) for n in names}) > 1   # modules still spread over the splits
