"""Benchmarks (not tests): the rotation alone, eager against torch.compile and the Triton kernel.
Run: python bench.py rotation [B T]   (default B=8, T=1,024)"""
import sys
import time

import torch

import rotary


def rotation(config="seq_tree_depth", B=8, T=1024, H=2, D=128, reps=5):
    """Forward+backward of the rotation alone: eager, torch.compile and (on CUDA) Triton, in bf16
    on CUDA (the paper's training precision) and fp32 on CPU. Returns {variant: seconds per
    call}, the kernel's error against the reference, and on CUDA the GB/s each variant moves."""
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16 if dev == "cuda" else torch.float32
    rot = rotary.Rotary(config, D, 1).to(dev)
    g = torch.Generator().manual_seed(0)
    b = {"pos": torch.arange(T).expand(B, T), "depth": torch.randint(1, 22, (B, T), generator=g),
         "path": torch.randint(0, 8, (B, T, rotary.LEVELS), generator=g),
         "within": torch.randint(0, 9, (B, T), generator=g)}
    C = rot.coords({k: v.to(dev) for k, v in b.items()})
    q = torch.randn(B, T, H, D, device=dev, dtype=dtype, requires_grad=True)
    k = torch.randn(B, T, H, D, device=dev, dtype=dtype, requires_grad=True)
    def eager():
        return rotary.rotate(q, k, rot.angles(C, 0))
    variants = {"eager": eager, "compile": torch.compile(eager)}
    if dev == "cuda" and rotary.triton is not None:
        variants["triton"] = lambda: rotary.rotate_triton(q, k, C, *rot.table(0))
    out = {}
    if "triton" in variants:   # the kernel against the readable reference at full size
        with torch.no_grad():
            out["triton_max_abs_err"] = max((x.float() - y.float()).abs().max().item()
                                            for x, y in zip(eager(), variants["triton"]()))
    for name, fn in variants.items():
        for i in range(reps + 2):
            if i == 2:
                if dev == "cuda":
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
            a, bb = fn()
            (a.sum() + bb.sum()).backward()
        if dev == "cuda":
            torch.cuda.synchronize()
        out[name] = (time.perf_counter() - t0) / reps
        if dev == "cuda":   # least bytes moved: fwd reads q, k and writes both; bwd reads q, k,
            # their output gradients and writes dq, dk (coordinates and tables are small)
            out[name + "_GBps"] = 10 * q.numel() * q.element_size() / out[name] / 1e9
    return out


if __name__ == "__main__":
    if sys.argv[1:2] == ["rotation"]:
        sizes = [int(a) for a in sys.argv[2:]]
        r = rotation(B=sizes[0], T=sizes[1]) if len(sizes) == 2 else rotation()
        print({k: round(v, 5) for k, v in r.items()})
        print(f"compile / eager time: {r['compile'] / r['eager']:.2f}")
    else:
        sys.exit("usage: python bench.py rotation [B T]")
