"""The machine a run lands on: the precision it gets (fp32 eager on CPU, bf16 + torch.compile on CUDA,
each by measurement), the provenance a run records (commit, libraries, device), and data parallel
under torchrun as nanoGPT runs it: one process per device, gloo on CPU and nccl on CUDA, the model
under DDP; train.py's loop deals each step's micro-batches round-robin to the processes.

    torchrun --nproc_per_node=2 train.py --corpus python
"""
import ctypes
import os
import subprocess

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def precision(device):
    """(bf16, compile, why) for a device, chosen by measurement (RESULTS.md "Speed"). CPU: fp32 eager,
    since bf16 autocast + torch.compile ran the quickstart slower even where bf16 is native. CUDA:
    bf16 where supported, compiled: its batches have fixed shapes (appendix §4 compiles every run whose
    batch shapes do not vary). MPS: fp32 eager (our reading: untested in this repository)."""
    if device.startswith("cuda"):
        ok = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
        return ok, True, "CUDA " + ("supports bf16" if ok else "without bf16 (pre-Ampere)") + ", compiled"
    if device == "mps":
        return False, False, "MPS: fp32 eager (bf16 autocast there is untested in this repository)"
    return False, False, ("CPU: fp32 eager, measured faster than bf16 + compile at the quickstart's length "
                          "(RESULTS.md Speed)")


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


# ----------------------------------------------------------------------- data parallel ----
def start(cfg):
    """(rank, world) of this process, its process group joined and, on CUDA, its device set."""
    dist.init_process_group("nccl" if cfg["device"] == "cuda" else "gloo")
    if cfg["device"] == "cuda":
        cfg["device"] = f"cuda:{int(os.environ['LOCAL_RANK'])}"
        torch.cuda.set_device(cfg["device"])
    return dist.get_rank(), dist.get_world_size()


def wrapped(fwd, cfg):
    """fwd under DDP: each process's gradients averaged over the processes at a sync."""
    return DDP(fwd, device_ids=[torch.cuda.current_device()] if cfg["device"].startswith("cuda") else None)


def summed(values, device):
    """Values summed over the processes (a step's loss: the NaN stop must agree; its FLOPs executed)."""
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return t.tolist()


PEAK_FLOPS = 989e12   # H100/H200 SXM dense bf16 (nanoGPT's estimate_mfu uses the A100's 312e12)


def study_bytes(M, rows, T, n_layer, n_embd, n_head, vocab, n_params, bf16, chunks=1):
    """A study step's memory on its device, roughly (our estimate, for refusing a study that cannot
    fit): every run's weights, gradients and AdamW moments (16 bytes a parameter); the activations
    autograd keeps, ~34 E + 5 H T values a token a layer (Korthikanti et al. 2022's count); the
    attention masks; and one of `chunks` pieces of the logits (the value, fp32 copy and gradient)."""
    tokens, width = M * rows * T, 2 if bf16 else 4
    acts = tokens * n_layer * (34 * n_embd + 5 * n_head * T) * width / 2
    masks = M * rows * T * T * (1 + n_layer)
    return 16 * M * n_params + acts + masks + tokens * vocab * (width + 8) / chunks


def device_bytes(device):
    """The memory a study may use: the card's, or the host's on CPU (None where the system does not say)."""
    if device.startswith("cuda"):
        return torch.cuda.get_device_properties(device).total_memory
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None
