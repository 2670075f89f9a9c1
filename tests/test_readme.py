"""README.md against RESULTS.md: its results table is made of RESULTS' summary rows (the same claim,
numbers RESULTS' row holds, the same verdict); the README stays short and its lines and the code's
within 110 characters (tables exempt)."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
NUMBER = re.compile(r"[+-]?\d+(?:[.,]\d+)*")     # signed: +2.45 and −2.45 differ; 3/10 gives 3 and 10


def section(text, heading):
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start:] if end < 0 else text[start:end]


def rows(text):
    """Each table row's cells (escaped pipes kept inside a cell), header and rule rows left out."""
    out = []
    for line in text.splitlines():
        if line.startswith("| ") and not line.startswith("| ---"):
            out.append([c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]])
    return [r for r in out if r[0] != "claim"]


def numbers(cell):
    return set(NUMBER.findall(cell.replace("−", "-")))


def summary(results):
    """RESULTS' summary rows by claim: (paper, here, verdict); "same" is the row above's paper."""
    by_claim, paper = {}, ""
    for claim, p, here, verdict, _command in rows(section(results, "## Summary")):
        paper = paper if p == "same" else p
        by_claim[claim] = (paper, here, verdict)
    return by_claim


def disagreements(readme, results):
    """Every README results row whose claim, numbers or verdict RESULTS' summary does not hold."""
    rows_of = summary(results)
    bad, paper = [], ""
    for claim, p, here, verdict in rows(section(readme, "## Results in short")):
        paper = paper if p == "same" else p
        if claim not in rows_of:
            bad.append(f"{claim}: no such summary row in RESULTS.md")
            continue
        r_paper, r_here, r_verdict = rows_of[claim]
        for what, mine, theirs in (("paper", paper, r_paper), ("here", here, r_here)):
            if numbers(mine) - numbers(theirs):
                bad.append(f"{claim}: {what} {sorted(numbers(mine) - numbers(theirs))} not in RESULTS")
        if verdict != r_verdict:
            bad.append(f"{claim}: verdict {verdict!r}, RESULTS {r_verdict!r}")
    return bad


def test_readme_results_are_results_summary_rows():
    readme, results = (ROOT / "README.md").read_text(), (ROOT / "RESULTS.md").read_text()
    assert disagreements(readme, results) == []
    claims = [r[0] for r in rows(section(readme, "## Results in short"))]
    assert len(claims) >= 5 and any("32,768" in c for c in claims)


def test_a_changed_number_or_verdict_is_caught():
    """Planted edits of the README: each alone is one disagreement."""
    readme, results = (ROOT / "README.md").read_text(), (ROOT / "RESULTS.md").read_text()
    row = "| −2.45%, 3/10 | no |"
    assert readme.count(row) == 1
    for planted in ("| −2.45%, 4/10 | no |", "| +2.45%, 3/10 | no |", "| −2.45%, 3/10 | yes |"):
        assert len(disagreements(readme.replace(row, planted), results)) == 1, planted
    assert len(disagreements(readme.replace("| Python: tree only", "| Python: tree alone"), results)) == 2


def test_readme_short_and_lines_within_110():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.encode()) < 12_000
    long = [f"README.md:{i}" for i, line in enumerate(readme.splitlines(), 1)
            if len(line) > 110 and not line.startswith("|")]
    for path in sorted(ROOT.glob("**/*.py")):
        if "hostile" not in path.parts and ".venv" not in path.parts:
            long += [f"{path.relative_to(ROOT)}:{i}" for i, line in
                     enumerate(path.read_text(errors="replace").splitlines(), 1) if len(line) > 110]
    assert long == []
