"""Data parallel under torchrun, as nanoGPT runs it: one process per device, gloo on CPU and nccl
on CUDA, the model under DDP. train.py imports it only when WORLD_SIZE > 1; train.train_step deals
each step's micro-batches round-robin to the processes.

    torchrun --nproc_per_node=2 train.py --corpus python
"""
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


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


def summed(step_loss, device):
    """A step's loss summed over the processes: every process sees the whole (the NaN stop must agree)."""
    t = torch.tensor([step_loss], device=device)
    dist.all_reduce(t)
    return t.item()
