"""Benchmarks (not tests).
    python bench.py rotation [TOKENS ...]   # a study's rotation: eager, compile, Triton (64k..512k tokens)
    python bench.py train [DATA] [STEPS] [REPS]   # train.py beside a bare loop, alternating REPS times
    python bench.py study [CORPUS] [M ...] [--reps=R] [--study_only] [--keep=DIR] [--train.py options]
                                     # M runs batched beside M processes, alternating R times (3 on CPU,
                                     # 1 on a GPU); --keep: each measurement's runs kept in DIR
    python bench.py update [M ...]   # a study's clip and AdamW: run by run, and all runs at once
"""
import contextlib
import glob
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

if not torch.cuda.is_available():   # on CPU the Triton kernel runs in triton's interpreter
    os.environ.setdefault("TRITON_INTERPRET", "1")
from torch.func import functional_call, vmap  # noqa: E402

import rotary  # noqa: E402  (after TRITON_INTERPRET: rotary.py's kernels are made when it is imported)
from model import GPT, GPTConfig  # noqa: E402
from treerope import ensemble, machine  # noqa: E402
from treerope.batches import Split, by_length  # noqa: E402
from treerope.prepared import corpus_stats  # noqa: E402
from treerope.settings import Values  # noqa: E402
from treerope.training import param_groups  # noqa: E402

STUDY = ("seq_tree_depth", "seq_depth", "ref_directed", "seq_tree")   # the runs' configurations, in turn
SIZES = (65536, 131072, 262144, 524288)                                 # study sizes: tokens of all runs


def rotation_inputs(tokens, M, T, H, D, dev, dtype):
    """A study's rotation at one size: M runs of tokens / M tokens (configurations from STUDY in turn),
    their Rotary modules, their tables in one frame (ensemble.frame), the frame's coordinate names, C (M, B,
    T, K), q and k (M, B, T, H, D) and random contiguous output gradients."""
    rots = [rotary.Rotary(STUDY[m % len(STUDY)], D, 1).to(dev) for m in range(M)]
    names = sorted({n for r in rots for n in r.names})
    B, g = tokens // (M * T), torch.Generator().manual_seed(0)
    path = torch.randint(0, 8, (M, B, T, rotary.LEVELS), generator=g)
    b = {"pos": torch.arange(T).expand(M, B, T), "depth": torch.randint(1, 22, (M, B, T), generator=g),
         "path": path, "within": torch.randint(0, 9, (M, B, T), generator=g),
         "ref_path": torch.where(torch.rand(M, B, T, 1, generator=g) < 0.2, path, -1)}
    C = torch.stack([rotary.coordinate(b, n) for n in names], -1).int().to(dev)
    q, k, dqo, dko = (torch.randn(M, B, T, H, D, device=dev, dtype=dtype) for _ in range(4))
    frames = [{k[7:]: v for k, v in ensemble.frame(r, names, H).items()} for r in rots]
    tables = {k: torch.stack([f[k] for f in frames]) for k in frames[0]}
    return rots, names, tables, C, q.requires_grad_(), k.requires_grad_(), (dqo, dko)


def rotations(rots, names, tables, kernel):
    """The runs' rotation as training runs it: Rotary.forward, once per run under vmap, its tables and
    padded rates and offsets the run's (the readable rotation, or with `kernel` the fused one)."""
    rot = rotary.Rotary(STUDY[0], rots[0].tables[0].col.shape[-1] * 2, 1).to(rots[0].rates.device)
    rot.names, rot.kernel = names, kernel
    longest = {k: max(getattr(r, k).numel() for r in rots) for k in ("rates", "offsets")}

    def rotate(q, k, C):
        state = {**tables, **{k: torch.stack([ensemble.pad(getattr(r, k), n) for r in rots])
                              for k, n in longest.items()}}
        return vmap(lambda s, q, k, C: functional_call(rot, s, (q, k, C, 0)))(state, q, k, C)
    return rotate


def median_seconds(fn, dev, reps, warm=3):
    """Median seconds of fn() after warm-up: on CUDA an event pair per call, the calls back to back
    (the host queues ahead of the device wherever the device sets the pace)."""
    for _ in range(warm):
        fn()
    if dev != "cuda":
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return statistics.median(times)
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(reps + 1)]
    ev[0].record()
    for e in ev[1:]:
        fn()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in zip(ev, ev[1:])) / 1e3


def rotation(sizes=SIZES, M=8, T=1024, H=2, D=128, reps=20, say=lambda out: None):
    """Forward + backward of a study's rotation (M runs, each its own table, as training runs it:
    `rotations`) per size and variant: the readable rotation eager, torch.compile of it, and the fused
    Triton kernel (--kernel), compiled. bf16 on CUDA; on CPU fp32 and the kernel in triton's interpreter (a
    smoke test: use a tiny size). Bytes moved: 10 x the bytes of q (fwd reads q, k, writes both; bwd reads
    q, k and their output gradients, writes dq, dk) plus C read by each pass; a same-size device copy
    measured alongside (read + write). Each size said (`say`) as it is measured; returns
    {tokens: {row: value}}."""
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16 if dev == "cuda" else torch.float32
    out = {}
    for tokens in sizes:
        torch._dynamo.reset()    # each size compiled for its own shapes, as a study compiles its one shape
        rots, names, tables, C, q, k, grads = rotation_inputs(tokens, M, T, H, D, dev, dtype)
        params = [p for r in rots for p in (r.rates, r.offsets)]
        readable, fused = rotations(rots, names, tables, False), rotations(rots, names, tables, True)
        paths = {"eager": readable, "compile": torch.compile(readable), "triton": torch.compile(fused)}
        row = {"bytes": 10 * q.numel() * q.element_size() + 2 * C.numel() * C.element_size()}
        with torch.no_grad():
            row["triton_max_abs_err"] = max((x.float() - y.float()).abs().max().item() for x, y in
                                            zip(readable(q, k, C), fused(q, k, C)))
        for name, f in paths.items():
            row[name] = median_seconds(lambda: torch.autograd.grad(f(q, k, C), [q, k, *params], grads,
                                                                   allow_unused=True), dev, reps)
        src = torch.empty(row["bytes"] // 2, dtype=torch.uint8, device=dev)
        dst = torch.empty_like(src)
        row["copy"] = median_seconds(lambda: dst.copy_(src), dev, reps)
        out[tokens] = row
        say({tokens: row})
    return out


def print_rotation(out, M, T, dtype):
    for tokens, r in out.items():   # flushed: a stage's log keeps each size as it is measured
        gb = r["bytes"] / 1e9
        print(f"{tokens:,} tokens ({M} runs x {tokens // (M * T)} x {T}), H 2, D 128, {dtype}: "
              f"{gb * 1e3:,.0f} MB moved; copy {gb / r['copy']:,.0f} GB/s; "
              f"Triton max |err| {r['triton_max_abs_err']:.2g}")
        for v in ("eager", "compile", "triton"):
            print(f"  {v:8} {r[v] * 1e3:8.3f} ms {gb / r[v]:7.0f} GB/s {r['copy'] / r[v]:6.1%} of copy",
                  flush=True)


def bare_loop(data_dir, steps, seed=0, lr=1.2e-3):
    """The CPU scale's run written plainly: the same model, records, micro-batches, AdamW, clipping
    and lr schedule as train.py, and its validations (the same fixed records at the same evenly spaced
    steps, a plain no-grad forward). Returns (tokens, training seconds, validation seconds, the losses)."""
    v = Values     # the defaults: the CPU scale
    meta, corpus = corpus_stats(data_dir)
    cfg = GPTConfig(vocab_size=meta["tokenizer"]["vocab"], configuration="seq_depth",
                    corpus=corpus)
    train, val = Split(data_dir, "train", cfg.max_len), Split(data_dir, "val", cfg.max_len)
    val_ids = np.arange(min(v.val_docs, len(val)))
    checks = {math.ceil(k * steps / v.milestones) for k in range(1, v.milestones + 1)}
    torch.manual_seed(seed)
    model = GPT(cfg)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and not n.startswith("rotary")]
    rest = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and not n.startswith("rotary"))]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                            lr=lr, betas=(0.9, 0.95))
    warm, per_pass, tokens = max(1, int(0.02 * steps)), max(len(train) // v.docs_per_step, 1), 0
    t0, validating, vals = time.perf_counter(), 0.0, []
    for step in range(steps):
        frac = (step - warm) / max(1, steps - 1 - warm)
        for g in opt.param_groups:
            g["lr"] = lr * (step + 1) / warm if step < warm else \
                lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0))))
        epoch, j = divmod(step, per_pass)
        order = np.random.default_rng([seed, epoch]).permutation(len(train))
        rows = order[j * v.docs_per_step:(j + 1) * v.docs_per_step]
        n_tok = int((train.len[rows] - 1).sum())
        for group in by_length(train.len[rows], v.mb_tokens):
            b = train.batch(rows[group], "cpu")
            _, nll, _ = model(b["tokens"], model.rotary.coords(b), b["targets"])
            (nll.sum() / n_tok).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        tokens += n_tok
        if step + 1 in checks:
            t1, total = time.perf_counter(), 0.0
            model.eval()
            with torch.no_grad():
                for group in by_length(val.len[val_ids], v.mb_tokens):
                    b = val.batch(val_ids[group], "cpu")
                    total += model(b["tokens"], model.rotary.coords(b), b["targets"])[1].double().sum().item()
            model.train()
            vals.append(total / int((val.len[val_ids] - 1).sum()))
            validating += time.perf_counter() - t1
    return tokens, time.perf_counter() - t0 - validating, validating, vals


def train_py(data_dir, steps, seed=0):
    """train.py's loop as it runs (milestones and checkpoints included; setup and the final test
    score not), from its log: (tokens, training seconds, validation seconds, the validation losses).
    Its seconds: the training time the log counts (`elapsed`) and the validation's (`val_elapsed`);
    checkpoint writes, a few ms a milestone at the CPU scale, are not counted."""
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([sys.executable, "train.py", "--config", "seq_depth", "--data",
                        os.path.dirname(data_dir), "--corpus", os.path.basename(data_dir), "--out", out,
                        f"--steps={steps}", f"--seed={seed}", "--compile=0", "--bf16=0"],
                       check=True, stdout=subprocess.DEVNULL, env={**os.environ, "TQDM_DISABLE": "1"})
        log = [json.loads(x) for x in open(os.path.join(out, os.path.basename(data_dir), "seq_depth",
                                                         f"seed{seed}", "log.jsonl"))]
    return log[-1]["tokens"], log[-1]["elapsed"], log[-1]["val_elapsed"], [x["val_loss"] for x in log]


def training(data_dir="data/web", steps=300, reps=3, say=print):
    """train.py beside the bare loop, alternating `reps` times (fp32 eager, the threads torch has), each
    repetition's rows said as measured: tokens/s over the whole loop (training and validations) and
    over training alone, then the median of the repetitions' ratios (train.py ÷ bare) of each."""
    rows = []
    for rep in range(1, reps + 1):
        for path, run in (("bare", bare_loop), ("train.py", train_py)):
            tokens, trained, validating, vals = run(data_dir, steps)
            rows.append({"rep": rep, "path": path, "tokens/s": tokens / (trained + validating),
                         "tokens/s training": tokens / trained,
                         "validation share": validating / (trained + validating), "last val": vals[-1]})
            say(rows[-1])
    pairs = list(zip(rows[::2], rows[1::2]))
    for k in ("tokens/s", "tokens/s training"):
        ratios = [b[k] / a[k] for a, b in pairs]
        rows.append({"path": "train.py / bare", "of": k, "median of reps": statistics.median(ratios),
                     "each": " ".join(f"{r:.3f}" for r in ratios)})
        say(rows[-1])
    return rows


def study(corpus="web", sizes=(8, 4, 1), steps=60, milestones=6, jobs=2, options=(), reps=1, say=print,
          paths=("study", "separate"), keep=None):
    """Aggregate training throughput of M runs (seq_only and seq_depth over seeds 0, 1, ...) trained as one
    batched study (study.py; on a CPU one process a core, machine.per_core) beside the same runs as
    separate processes (sweep.sh, `jobs` at a time, one thread each), in this one invocation, largest M
    first, each row said (`say`) as it is measured. Steady state: the window from each run's first
    milestone (compile and warm-up before it, reported apart) to its last, read from the log fields both
    paths write: `tokens`, `flops` and `elapsed` (training time: validation and checkpoints left out).
    The study's runs train over one window (its processes start together): the longest run's; the
    separate runs' concurrency is measured, not assumed: their windows' summed length over the wall time
    any of them was open (each log entry's `time`). FLOPs are nanoGPT's count at each record's length
    (model.flops; MFU against machine.PEAK_FLOPS on CUDA), hardware FLOPs executed (padding, masked
    attention) beside them. With `reps` > 1 the two paths alternate `reps` times and a last row gives the
    median of the repetitions' ratios (study ÷ separate): a machine whose speed drifts between runs
    minutes apart moves both paths of a repetition alike. `paths` ("study",): the study alone (a GPU's
    compiled study, its MFU: compiling M separate processes would not fit a call). `keep`: a folder where
    each measurement's runs and output stay (under M{M}_{path}[_rep{rep}]), so a measurement killed at
    its limit leaves the milestones it logged."""
    rows = []
    for M, rep in ((M, rep) for M in sizes for rep in range(1, reps + 1)):
        configs = ["seq_only", "seq_depth"] if M > 1 else ["seq_only"]
        seeds = [str(s) for s in range(max(1, M // 2))]
        args = [corpus, " ".join(configs), " ".join(seeds), str(jobs), f"--steps={steps}",
                f"--milestones={milestones}", *options]
        for path in paths:
            kept = keep and os.path.join(keep, f"M{M}_{path}" + (f"_rep{rep}" if reps > 1 else ""))
            if kept:
                shutil.rmtree(kept, ignore_errors=True)   # a warm machine's earlier call
                os.makedirs(kept)
            with contextlib.nullcontext(kept) if kept else tempfile.TemporaryDirectory() as out:
                env = {**os.environ, "OUT": out, **({"OMP_NUM_THREADS": "1"} if path == "separate" else {})}
                cmd = [sys.executable, "study.py", *args, "--out", out] if path == "study" else \
                    ["bash", "scripts/sweep.sh", *args]
                t0 = time.perf_counter()
                with open(os.path.join(out, "output.txt"), "w+") as f:   # on disk as it comes
                    done = subprocess.run(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, text=True)
                    wall = time.perf_counter() - t0
                    f.seek(0)
                    said = f.read()
                if done.returncode:
                    sys.exit(f"error: {' '.join(cmd[:5])} … failed: {said[-600:]}")
                runs = sorted(glob.glob(os.path.join(out, corpus, "*", "seed*")))
                logs = [[json.loads(x) for x in open(os.path.join(r, "log.jsonl"))] for r in runs]
            row = {"M": M, "path": path, **({"rep": rep} if reps > 1 else {}), "runs": len(logs),
                   **steady(logs, path == "study"),
                   "tokens/s end to end": sum(log[-1]["tokens"] for log in logs) / wall}
            graphs = [line for line in said.splitlines() if line.startswith("compiled:")]
            if graphs:
                row["graphs"] = graphs[-1].split()[1]
            rows.append(row)
            say(row)
        if reps > 1 and rep == reps and len(paths) == 2:   # the repetitions' ratios, study ÷ separate
            pairs = zip(rows[-2 * reps::2], rows[-2 * reps + 1::2])
            ratios = [a["tokens/s"] / b["tokens/s"] for a, b in pairs]
            rows.append({"M": M, "path": "study / separate", "median of reps": statistics.median(ratios),
                         "each": " ".join(f"{r:.3f}" for r in ratios)})
            say(rows[-1])
    return rows


def update(sizes=(8, 16), reps=30, say=print):
    """A study's update of M runs of the default model (planted gradients), each run's clip_grad_norm_ and
    AdamW.step() in turn beside ensemble.clip + adamw_step: the median of `reps` interleaved timings
    (synchronised) and the operators each calls in one update (torch.profiler; on a GPU, launches)."""
    cfg = GPTConfig(vocab_size=8192, configuration="seq_depth", corpus="web")
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    sync = torch.cuda.synchronize if dev == "cuda" else lambda: None
    for M in sizes:
        models = [GPT(cfg).to(dev) for _ in range(M)]
        opts = [torch.optim.AdamW(param_groups(m, 0.1), lr=1e-3, betas=(0.9, 0.95), fused=True)
                for m in models]
        paths = {"each run": lambda: [(torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0), o.step())
                                      for m, o in zip(models, opts)],
                 "at once": lambda: (ensemble.clip(models), ensemble.adamw_step(opts))}
        times, ops = {k: [] for k in paths}, {}
        for _ in range(reps):
            for k, f in paths.items():
                for m in models:
                    for p in m.parameters():
                        p.grad = torch.randn_like(p)
                sync()
                t0 = time.perf_counter()
                f()
                sync()
                times[k].append(time.perf_counter() - t0)
        for k, f in paths.items():
            with torch.profiler.profile() as prof:
                f()
            ops[k] = sum(e.key.startswith("aten::") and e.cpu_parent is None for e in prof.events())
        say(f"M {M}: " + "; ".join(f"{k} {statistics.median(times[k]) * 1e3:.2f} ms, {ops[k]} operators"
                                   for k in paths), flush=True)


def steady(logs, one_clock):
    """Rates over each run's steady window (first milestone to last) from its log: tokens/s, model
    and executed FLOP/s (MFU and HFU on CUDA), and the warm-up before it (seconds of training time)."""
    a, b = [log[0] for log in logs], [log[-1] for log in logs]
    if any(x["step"] == y["step"] for x, y in zip(a, b)):
        sys.exit("error: a steady window needs two milestones per run (--milestones ≥ 2)")
    d = {k: sum(y[k] - x[k] for x, y in zip(a, b)) for k in ("tokens", "flops", "flops_executed")}
    trained = [y["elapsed"] - x["elapsed"] for x, y in zip(a, b)]
    if one_clock:            # the study's runs trained together: one window
        seconds = max(trained)
    else:                    # side by side: the training seconds over the runs' measured concurrency
        opened = [(x["time"], y["time"]) for x, y in zip(a, b)]
        union, end = 0.0, -math.inf
        for s, e in sorted(opened):
            union += max(0.0, e - max(s, end))
            end = max(end, e)
        seconds = sum(trained) / (sum(e - s for s, e in opened) / union)
    steps = min(y["step"] - x["step"] for x, y in zip(a, b))
    out = {"tokens/s": d["tokens"] / seconds, "GFLOP/s": d["flops"] / seconds / 1e9,
           "GFLOP/s executed": d["flops_executed"] / seconds / 1e9,
           "warm-up s": max(x["elapsed"] for x in a),
           "window": f"{steps} steps {seconds:.1f} s" + (" (short: < 100 steps and < 30 s)" if steps < 100
                                                         and seconds < 30 else "")}
    if torch.cuda.is_available():
        out["MFU"], out["HFU"] = (d[k] / seconds / machine.PEAK_FLOPS for k in ("flops", "flops_executed"))
    return out


def said(row):
    """A measurement's row on one line, as it is measured."""
    print("  ".join(f"{k} {v:,.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()),
          flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["train"]:
        args = sys.argv[2:]
        print(f"bench.py train on CPU, {torch.get_num_threads()} threads", flush=True)
        training(args[0] if args else "data/web", int(args[1]) if len(args) > 1 else 300,
                 int(args[2]) if len(args) > 2 else 3, say=said)
    elif sys.argv[1:2] == ["study"]:
        cuda, args = torch.cuda.is_available(), sys.argv[2:]
        paths = ("study",) if "--study_only" in args else ("study", "separate")
        keep = next((a[7:] for a in args if a.startswith("--keep=")), None)
        args = [a for a in args if a != "--study_only" and not a.startswith("--keep=")]
        given = [a[7:] for a in args if a.startswith("--reps=")]
        if not all(r.isdecimal() and int(r) > 0 for r in given):
            sys.exit("error: --reps takes a whole number ≥ 1")
        reps = int(given[-1]) if given else 1 if cuda else 3        # a GPU's call has room for one
        args = [a for a in args if not a.startswith("--reps=")]
        cut = next((i for i, a in enumerate(args) if a.startswith("--")), len(args))   # then options
        sizes = tuple(int(a) for a in args[:cut] if a.isdigit()) or ((16, 4, 1) if cuda else (8, 4, 1))
        words = [a for a in args[:cut] if not a.isdigit()]
        where = torch.cuda.get_device_name() if cuda else "CPU"
        on, why = machine.switches("cuda" if cuda else "cpu")
        print(f"bench.py study on {where}, {torch.get_num_threads()} threads; fast paths: "
              f"{', '.join(f'{k} {int(v)}' for k, v in on.items())} ({why})", flush=True)
        study(words[0] if words else "web", tuple(sorted(sizes, reverse=True)), jobs=8 if cuda else 2,
              options=args[cut:], reps=reps, paths=paths, keep=keep, say=said)
    elif sys.argv[1:2] == ["update"]:
        update(tuple(int(a) for a in sys.argv[2:]) or (8, 16))
    elif sys.argv[1:2] == ["rotation"]:
        # 8 runs of T = 1,024 on CUDA; on CPU a smoke test of the same code at a tiny size (interpreter)
        M, T, kw = (8, 1024, {}) if torch.cuda.is_available() else (2, 16, {"sizes": (64,), "reps": 2})
        if any(not a.isdigit() or int(a) % (M * T) for a in sys.argv[2:]):
            sys.exit(f"error: sizes are token counts, multiples of {M} runs x {T} tokens")
        sizes = tuple(sorted((int(a) for a in sys.argv[2:]), reverse=True)) or kw.pop("sizes", SIZES[::-1])
        print(torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU, triton's interpreter",
              f"torch {torch.__version__} triton {rotary.triton.__version__}")
        rotation(sizes, M, T, **kw, say=lambda r: print_rotation(r, M, T, "bf16" if torch.cuda.is_available()
                                                                 else "fp32"))
    else:
        sys.exit("usage: python bench.py rotation [TOKENS ...] | train [DATA] [STEPS] [REPS] | "
                 "update [M ...] | study [CORPUS] [M ...] [--reps=R] [--study_only] [--keep=DIR] [options]")
