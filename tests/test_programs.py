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


def test_meta_reports_the_reference_token_share(tmp_path):
    """meta.json's reference_token_share: tokens reference rotation moves over all tokens (appendix
    §4's 20.6% on Python), the same count configs.reference_stats makes from the arrays on disk."""
    import json
    import os

    from conftest import stdlib_files

    import configs
    src = tmp_path / "src"
    src.mkdir()
    for p in stdlib_files()[:30]:
        (src / os.path.basename(p)).write_bytes(open(p, "rb").read())
    out = prepare.main(["python", "--src", str(src), "--out", str(tmp_path / "data"), "--vocab", "300",
                        "--workers", "1"])
    share = json.load(open(os.path.join(out, "meta.json")))["reference_token_share"]
    counts = configs.reference_stats(out)
    assert 0 < share < 1 and share == counts["affected"] / counts["tokens"]
