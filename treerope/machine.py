"""The machine a run lands on: its fast paths (fp32 eager on CPU, bf16 + torch.compile on CUDA, the
fused rotation nowhere yet, each by measurement), the provenance a run records (commit, libraries,
device), and data parallel under torchrun as nanoGPT runs it: one process per device, gloo on CPU and
nccl on CUDA, the model under DDP; train.py's loop deals each step's micro-batches round-robin to them.

    torchrun --nproc_per_node=2 train.py --corpus python
"""
import contextlib
import ctypes
import dataclasses
import os
import signal
import subprocess
import sys
import traceback

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from model import GPT
from rotary import Rotary

SWITCHES = ("compile", "bf16", "kernel")   # the fast paths: a run's --bf16, --compile, --kernel (none: below)


def switches(device):
    """({switch: on} for SWITCHES, why) on a device, each chosen by measurement (RESULTS.md "Speed"). CPU:
    fp32 eager, bf16 autocast + torch.compile ran the quickstart slower even where bf16 is native. CUDA:
    bf16 where supported, compiled (its batches have fixed shapes; appendix §4 compiles every run whose
    batch shapes do not vary). The fused Triton rotation: off everywhere until a GPU measures it faster
    than the readable rotation compiled (twice measured slower on an H200). MPS: fp32 eager (our
    reading: untested in this repository)."""
    if device.startswith("cuda"):
        ok = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
        bf16 = "supports bf16" if ok else "without bf16 (pre-Ampere)"
        return {"compile": True, "bf16": ok, "kernel": False}, f"CUDA {bf16}, compiled, the readable rotation"
    if device == "mps":
        return {"compile": False, "bf16": False, "kernel": False}, \
            "MPS: fp32 eager (bf16 autocast there is untested in this repository)"
    return {"compile": False, "bf16": False, "kernel": False}, \
        "CPU: fp32 eager, measured faster than bf16 + compile at the quickstart's length (RESULTS.md Speed)"


def keep_freed_memory():
    """glibc gives large freed blocks back to the system and faults them in again, page by page, on
    the next step (zeroing a 16 MB buffer: 6.7 ms, 0.3 ms once kept; RESULTS "Speed"): keep them in
    the process. True where glibc took the setting."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:                               # not glibc (macOS, musl): its allocator as it is
        return False
    return bool(libc.mallopt(-3, 1 << 30) and libc.mallopt(-1, 1 << 31))   # M_MMAP_, M_TRIM_THRESHOLD


def provenance(device):
    """What made this run: the git commit (and whether the tree had uncommitted changes), library
    versions and the device, so a number can be traced to its code."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    def git(*a):
        return subprocess.run(["git", "-C", here, *a], capture_output=True, text=True).stdout.strip()
    try:
        commit = git("rev-parse", "HEAD") or None
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    except OSError:                       # no git on this machine
        commit, dirty = None, None
    try:
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    name = torch.cuda.get_device_name() if device.startswith("cuda") else "cpu"
    return {"commit": commit, "dirty": dirty, "torch": torch.__version__, "triton": triton_version,
            "device": name}


def cores():
    """The cores a CPU's runs are dealt to: torch's intra-op threads (OMP_NUM_THREADS, else every core)."""
    return torch.get_num_threads()


@contextlib.contextmanager
def per_core(planned, cfg, world=1):
    """This process's share of the runs still to train (`planned`'s unfinished). On a CPU, eager, outside
    torchrun, several runs are dealt in order to one process a core, each on one thread: forked once the
    runs are opened (each inherits them; their folders' locks stay with the first), since two one-thread
    processes outran one process's two threads by 8.7% (RESULTS "Speed"). A forked share's process ends
    with the with-block, exiting as it would (2: a run diverged); the first waits for them all and exits
    as the worst of them did."""
    runs = [r for r in planned if not r.finished]
    n = min(len(runs), cores()) if cfg.device == "cpu" and not cfg.compile and world == 1 else 1
    if n <= 1 or not hasattr(os, "fork"):
        yield runs
        return
    shares = [[runs[int(i)] for i in part] for part in np.array_split(np.arange(len(runs)), n)]
    print(f"{n} processes of one thread, the runs dealt in order: " +
          " | ".join(", ".join(f"{r.cfg.config}/{r.cfg.seed}" for r in share) for share in shares))
    sys.stdout.flush()   # not written again by each fork
    sys.stderr.flush()
    threads, forked, first = torch.get_num_threads(), [], os.getpid()
    for share in shares[1:]:
        pid = os.fork()
        if pid == 0:
            torch.set_num_threads(1)
            os.environ["TQDM_DISABLE"] = "1"   # one progress bar, the first share's (on one terminal line)
            ended_with(first)
            code = 0
            try:
                yield share
            except SystemExit as e:       # a refusal's line (said here), or train.py's exit 2
                if isinstance(e.code, str):
                    print(e.code, file=sys.stderr)
                code = e.code if isinstance(e.code, int) else int(e.code is not None)
            except KeyboardInterrupt:     # Ctrl-C reaches every process: the first says what a rerun does
                code = 130
            except BaseException:
                traceback.print_exc()
                code = 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        forked.append((pid, share))
    torch.set_num_threads(1)
    try:
        yield shares[0]
    finally:
        torch.set_num_threads(threads)
        ended = [(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), share) for pid, share in forked]
    failed = [(code, share) for code, share in ended if code]
    if any(code != 2 for code, _ in failed):
        code, share = next((c, s) for c, s in failed if c != 2)
        sys.exit(f"error: the process training {', '.join(r.out_dir for r in share)} ended with exit code "
                 f"{code} (its output is above)")
    if failed:          # a run diverged there; its line said so
        sys.exit(2)


def ended_with(first):
    """A forked share's process ends when the first does (Linux's PR_SET_PDEATHSIG; a kill or a timeout
    of train.py stops every share, each resumable from its last checkpoint); elsewhere it trains on."""
    try:
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGTERM)
    except (OSError, AttributeError):
        return
    if os.getppid() != first:    # the first ended before the call
        os._exit(1)


# ----------------------------------------------------------------------- data parallel ----
def start(device):
    """(rank, world, device) of this process, its process group joined and, on CUDA, its device set."""
    dist.init_process_group("nccl" if device == "cuda" else "gloo")
    if device == "cuda":
        device = f"cuda:{int(os.environ['LOCAL_RANK'])}"
        torch.cuda.set_device(device)
    return dist.get_rank(), dist.get_world_size(), device


def wrapped(fwd, device):
    """fwd under DDP: each process's gradients averaged over the processes at a sync (a dropout mask is
    each process's own: buffers are not broadcast)."""
    return DDP(fwd, device_ids=[torch.cuda.current_device()] if device.startswith("cuda") else None,
               broadcast_buffers=False)


def summed(values, device):
    """Values summed over the processes (a step's losses: the NaN stop must agree; its FLOPs executed),
    as they came: a tensor, or a list."""
    t = torch.as_tensor(values, dtype=torch.float64, device=device).clone()
    dist.all_reduce(t)
    return t if torch.is_tensor(values) else t.tolist()


PEAK_FLOPS = 989e12   # H100/H200 SXM dense bf16 (nanoGPT's estimate_mfu uses the A100's 312e12)


def step_bytes(M, rows, T, n_layer, n_embd, n_head, vocab, n_params, bf16):
    """The memory a step of M runs needs on its device, roughly (our estimate, for refusing runs that
    cannot fit): every run's weights, gradients and AdamW moments (16 bytes a parameter); the activations
    autograd keeps, ~34 E + 5 H T values a token a layer (Korthikanti et al. 2022's count, attention's
    probabilities and dropout masks in it); the attention masks; the logits (value, fp32 copy, gradient)."""
    tokens, width = M * rows * T, 2 if bf16 else 4
    acts = tokens * n_layer * (34 * n_embd + 5 * n_head * T) * width / 2
    masks = M * rows * T * T * (1 + n_layer)
    return 16 * M * n_params + acts + masks + tokens * vocab * (width + 8)


def step_memory(mcfg, cfg, M=1):
    """(bytes a step of M runs of the model `mcfg` needs (step_bytes), bytes the device has or None): one
    run's, or runs trained at once. A configuration the model cannot take is refused here, as
    training.build_model refuses it (this runs first)."""
    rows, T = max(1, cfg["mb_tokens"] // mcfg.max_len), mcfg.max_len
    try:
        n_params = parameters(mcfg)
    except (ValueError, KeyError) as e:                             # e.g. more planes than the head has
        sys.exit(f"error: --config {mcfg.configuration}: {e.args[0]}")
    need = step_bytes(M, rows, T, mcfg.n_layer, mcfg.n_embd, mcfg.n_head, mcfg.vocab_size, n_params,
                      cfg["bf16"])
    return need, device_bytes(cfg["device"])


def parameters(mcfg):
    """model.GPT(mcfg)'s parameters, counted on the meta device (none allocated). Every block holds the
    same ones, so a model deeper than 8 layers is counted from its 1- and 2-layer forms: building 100,000
    blocks, even on the meta device, takes minutes. A layer pattern has a depth of its own: checked at
    this one (the rotary alone is quick to build), then counted whole."""
    def count(n_layer):
        with torch.device("meta"):
            return GPT(dataclasses.replace(mcfg, n_layer=n_layer)).num_params()
    if mcfg.n_layer <= 8:
        return count(mcfg.n_layer)
    try:
        one, two = count(1), count(2)
    except ValueError:
        Rotary(mcfg.configuration, mcfg.n_embd // mcfg.n_head, mcfg.n_layer, mcfg.corpus)
        return count(mcfg.n_layer)
    return one + (mcfg.n_layer - 1) * (two - one)


def refuse_over(need, have, mcfg, cfg, M, advice):
    """Exit in one line, before anything is built or written, where a step's `need` (step_memory) is over
    0.9 of the device's `have`: M runs trained at once, or one; `advice` says what to lower."""
    if have and need > 0.9 * have:
        rows, T = max(1, cfg["mb_tokens"] // mcfg.max_len), mcfg.max_len
        sys.exit(f"error: {M} run{'s' * (M > 1)} of {mcfg.n_layer}L d{mcfg.n_embd}, {rows} x {T:,} tokens a "
                 f"micro-batch, would need about {need / 2 ** 30:,.1f} GiB a step (machine.step_bytes), "
                 f"over 0.9 of the {have / 2 ** 30:,.1f} GiB on {cfg['device']}; {advice}")


def device_bytes(device):
    """The memory a step may use: the card's, or the host's on CPU (None where the system does not say)."""
    if device.startswith("cuda"):
        return torch.cuda.get_device_properties(device).total_memory
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None
