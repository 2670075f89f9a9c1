"""Every GPU command written in RESULTS.md, results/*.md, README.md, REPRODUCE.md and the scripts'
comments trains what it says.
Until 2026-12-07 a device chose its scale (settings.SCALES, removed): on CUDA a bare `sweep.sh python ...`
trained the paper's model; now it trains the CPU defaults on any device. So each GPU command, resolved
by training.parse, must name a setting or model flags that give another model than the defaults', or say
in its sentence that it ran under "the removed device scale" (the marker, RESULTS.md "Older commands").
A GPU command: a sweep.sh, study.py or train.py command whose sentence or section heading (markdown),
or whose comment line (scripts), names a GPU, an H100, an H200 or CUDA."""
import pathlib
import re
import shlex

from treerope import training

ROOT = pathlib.Path(__file__).resolve().parent.parent
GPU = re.compile(r"\b(?:GPUs?|H100|H200|CUDA)\b|--device[ =]cuda")
MARK = "the removed device scale"
COMMAND = re.compile(r"(?:for \w+ in [^;]+; do )?(?:\w+=\S+ )*"        # a loop, an environment,
                     r"(?:bash (?:scripts/)?sweep\.sh|python3? (?:study|train)\.py) .*")
FOR = re.compile(r"for (\w+) in ([^;]+); do (.*?);? done")


def sentences(paragraph):
    """A paragraph's sentences: split after '.', ';' or ':' before a space, outside backticks."""
    out, start, code = [], 0, False
    for i, ch in enumerate(paragraph):
        code ^= ch == "`"
        if not code and ch in ".;:" and paragraph[i + 1:i + 2] == " ":
            out.append(paragraph[start:i + 1])
            start = i + 1
    return out + [paragraph[start:]]


def markdown_commands(text):
    """(command, its sentence, its section heading) for each command in backticks or a code block."""
    heading, fenced = "", False
    for para in re.split(r"\n\s*\n|\n(?=- )", text):
        if para.startswith("#"):
            heading = para.splitlines()[0]
        if para.startswith("```"):
            fenced = not fenced or para.count("```") > 1
            spans = [(re.sub(r"\s+#.*", "", line), para) for line in para.splitlines()[1:]]   # its comments
        else:
            flat = " ".join(para.split())
            spans = [(code, s) for s in sentences(flat) for code in s.split("`")[1::2]]
        for code, sentence in spans:
            for m in COMMAND.finditer(code):
                yield m.group(0), sentence, heading


def script_commands(text):
    """(command, its comment line, "") for each command in a script's comments."""
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            for m in COMMAND.finditer(line.split("#", 1)[1].split("  # ")[0]):
                yield m.group(0), line, ""


def written():
    """(file, command, context) for every GPU command written in the documents and the scripts."""
    markdown = [ROOT / "RESULTS.md", *sorted((ROOT / "results").glob("*.md")), ROOT / "README.md",
                ROOT / "REPRODUCE.md"]
    docs = [(p, markdown_commands) for p in markdown]
    docs += [(p, script_commands) for p in sorted((ROOT / "scripts").glob("*.sh"))]
    for path, find in docs:
        for command, sentence, heading in find(path.read_text()):
            if GPU.search(sentence) or GPU.search(heading):
                yield path.name, command, sentence


def resolved(command):
    """training.parse's values for each run a command trains ({} for a usage line with placeholders);
    a `for c in a b; do ... $c ...; done` is each of its values."""
    loop = FOR.search(command)
    if loop:
        var, values, body = loop.groups()
        return [cfg for v in values.split() for cfg in resolved(body.replace(f"${var}", v))]
    words = shlex.split(command)
    at = next(i for i, w in enumerate(words) if w.endswith(("sweep.sh", "study.py", "train.py")))
    runner, args = words[at], words[at + 1:]
    if any(re.fullmatch(r"\[?[A-Z_]+\.*\]?", w) for w in args):   # CORPUS "CONFIGS" ...: a usage line
        return []
    if not runner.endswith("train.py"):   # CORPUS "CONFIGS" "SEEDS" [JOBS] options
        corpus, configs, args = args[0], args[1], args[3:]
        args = args[1:] if args and args[0].isdigit() else args
        args = ["--corpus", corpus, "--config", configs.split()[0], *args]
    return [training.parse([*args, "--device", "cuda"])[0][0]]


def model(cfg):
    return tuple(cfg[k] for k in ("n_layer", "n_embd", "n_head", "max_len"))


def unnamed(commands):
    """The GPU commands that would train the CPU defaults' model and do not say they ran under the
    removed device scale."""
    defaults = model(training.parse(["--device", "cuda"])[0][0])
    return [(f, c) for f, c, sentence in commands
            if MARK not in sentence and any(model(cfg) == defaults for cfg in resolved(c))]


def test_every_gpu_command_written_trains_a_named_model_or_says_it_ran_at_the_removed_scale():
    commands = list(written())
    # the ones this check was written for: RESULTS' H200 run, its results/ file, sweep.sh's example
    found = {(f, c.split(" --")[0]) for f, c, _ in commands}
    assert {("RESULTS.md", 'bash scripts/sweep.sh python "seq_only seq_depth" 0 2'),
            ("appendix-python-gpu.md", 'bash sweep.sh python "seq_only seq_depth" 0 2'),
            ("sweep.sh", 'bash scripts/sweep.sh programs "seq_only seq_depth tree_only" "$(seq 0 9)" 8')
            } <= found
    assert unnamed(commands) == []
    # planted: the H200 command as RESULTS wrote it before issue 70, a loop over settings, a usage line
    planted = "2026-11-29, one H200 (`bash scripts/sweep.sh python \"seq_only seq_depth\" 0 2 --steps 2500`)."
    (command, sentence, _), = markdown_commands(planted)
    assert unnamed([("planted", command, sentence)]) == [("planted", command)]
    assert unnamed([("planted", command, sentence + " It ran under the removed device scale.")]) == []
    loop = 'for c in code prose; do bash scripts/sweep.sh $c "flat" "0 1 2" 8 --setting hrope_$c; done'
    assert [cfg["corpus"] for cfg in resolved(loop)] == ["code", "prose"]
    assert unnamed([("loop", loop, "on a GPU")]) == []
    assert resolved('bash scripts/sweep.sh CORPUS "CONFIGS" "SEEDS" JOBS [train.py options]') == []
