"""README.md against RESULTS.md: its results table is made of RESULTS' summary rows (the same claim,
numbers RESULTS' row holds, the same verdict); the README stays short and its lines and the code's
within 110 characters (tables exempt). RESULTS.md stays a report a reader can finish (≤ 60,000
bytes), every results/ file linked from it, and no link into the documents left dangling."""
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
    row = "| +1.63%, 8/10, p = 0.19 | direction yes, not significant |"
    assert readme.count(row) == 1
    for planted in ("| +1.63%, 9/10, p = 0.19 | direction yes, not significant |",
                    "| −1.63%, 8/10, p = 0.19 | direction yes, not significant |",
                    "| +1.63%, 8/10, p = 0.19 | yes |"):
        assert len(disagreements(readme.replace(row, planted), results)) == 1, planted
    assert len(disagreements(readme.replace("| Python: tree only", "| Python: tree alone"), results)) == 2


def test_lines_within_110():
    """README's prose and every .py file within 110 characters a line (no byte cap: withdrawn)."""
    readme = (ROOT / "README.md").read_text()
    long = [f"README.md:{i}" for i, line in enumerate(readme.splitlines(), 1)
            if len(line) > 110 and not line.startswith("|")]
    for path in sorted(ROOT.glob("**/*.py")):
        if "hostile" not in path.parts and ".venv" not in path.parts:
            long += [f"{path.relative_to(ROOT)}:{i}" for i, line in
                     enumerate(path.read_text(errors="replace").splitlines(), 1) if len(line) > 110]
    assert long == []


HEADING = re.compile(r"^#{1,6} (.*)$", re.M)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(text):
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, repeats -1, -2."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    seen, out = {}, set()
    for heading in HEADING.findall(text):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        out.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return out


def dangling(docs):
    """Links among docs ({path: text}, paths relative to the root) to a missing document or heading;
    links out of the repository and to files other than documents are not followed."""
    bad = []
    for path, text in docs.items():
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            dest = (pathlib.PurePosixPath(path).parent / file).as_posix() if file else path
            dest = re.sub(r"[^/]+/\.\./", "", dest)
            if dest not in docs:
                if dest.endswith(".md") or not (ROOT / dest).exists():
                    bad.append(f"{path}: {target} (no such file)")
            elif anchor and anchor not in anchors(docs[dest]):
                bad.append(f"{path}: {target} (no such heading)")
    return bad


def results_shape(results, files):
    """What keeps RESULTS.md a short report: its size, and results/ files and its links one to one."""
    linked = set(re.findall(r"\]\((results/[^)#\s]+\.md)", results))
    size = len(results.encode())
    bad = [f"RESULTS.md is {size:,} bytes (at most 60,000)"] if size > 60_000 else []
    bad += [f"RESULTS.md links {f}, which does not exist" for f in sorted(linked - set(files))]
    bad += [f"{f} is not linked from RESULTS.md" for f in sorted(set(files) - linked)]
    bad += [f"{f}: its opening does not say which command produced it" for f, text in files.items()
            if not re.search(r"Produced by: `[^`]*(python|bash) ", text.split("\n#", 1)[0])]
    return bad


def documents():
    paths = [*ROOT.glob("*.md"), *ROOT.glob("results/*.md")]
    return {p.relative_to(ROOT).as_posix(): p.read_text() for p in paths}


def test_results_is_a_short_report_with_every_results_file_linked():
    docs = documents()
    files = {p: t for p, t in docs.items() if p.startswith("results/")}
    assert len(files) >= 10
    assert results_shape(docs["RESULTS.md"], files) == []


def test_no_link_among_the_documents_dangles():
    assert dangling(documents()) == []


def test_a_moved_heading_an_unlinked_file_or_a_long_report_is_caught():
    """Planted: each breakage alone is one finding."""
    docs = {"RESULTS.md": "# R\n\n## Speed\n\nSee [web](results/web.md#web-pages) and [s](#speed).\n",
            "results/web.md": "# Web\n\nProduced by: `python analyze.py x`.\n\n### Web pages\n\n| a |\n",
            "README.md": "[speed](RESULTS.md#speed), [up](results/web.md)\n"}
    files = {"results/web.md": docs["results/web.md"]}
    assert dangling(docs) == [] and results_shape(docs["RESULTS.md"], files) == []
    assert len(dangling({**docs, "README.md": "[speed](RESULTS.md#speed-1)"})) == 1
    assert len(dangling({**docs, "results/web.md": docs["results/web.md"].replace("Web pages", "Web")})) == 1
    assert len(dangling({**docs, "README.md": "[gone](results/sheets.md)"})) == 1
    unlinked = {**files, "results/sheets.md": "Produced by: `bash x`"}
    assert len(results_shape(docs["RESULTS.md"], unlinked)) == 1
    assert len(results_shape(docs["RESULTS.md"] + "x" * 60_000, files)) == 1
    assert len(results_shape(docs["RESULTS.md"], {"results/web.md": "# Web\n\n| a |\n"})) == 1
