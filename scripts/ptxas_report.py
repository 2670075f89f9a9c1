"""Registers and spills of rotary.py's two Triton kernels on an H100/H200 (sm_90a), without a GPU: each is
compiled ahead of time (triton.compile for a GPUTarget("cuda", 90, 32)) to PTX, and triton's own ptxas
assembles that with -v, whose report says the registers a thread uses and the bytes it spills.

    python scripts/ptxas_report.py                      # rotary.py's launch parameters (num_warps, BLOCK_T)
    python scripts/ptxas_report.py --warps 4 8 --block 16 32   # other choices, each reported
"""
import argparse
import itertools
import os
import re
import subprocess
import sys
import tempfile

os.environ["TRITON_INTERPRET"] = "0"   # the compiler, not the interpreter
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import rotary  # noqa: E402

# the arguments' types as the launches pass them: q, k, outputs bf16 (the GPU's precision), coordinates
# int32, tables (col int32, rate/offset/overlay fp32), marker int64, partial sums fp32, sizes and strides int
FWD = dict(Q="*bf16", K="*bf16", C="*i32", COL="*i32", RATE="*fp32", OFF="*fp32", OVL="*fp32", MARK="*i64",
           QO="*bf16", KO="*bf16")
BWD = dict(Q="*bf16", K="*bf16", DQO="*bf16", DKO="*bf16", C="*i32", COL="*i32", RATE="*fp32", OFF="*fp32",
           OVL="*fp32", MARK="*i64", DQ="*bf16", DK="*bf16", PART="*fp32")


def ptx(kernel, pointers, warps, block, planes):
    """The kernel's PTX for sm_90, compiled with `warps` warps, BLOCK_T `block`, P = BLOCK_P = `planes`."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    consts = {"P": planes, "BLOCK_T": block, "BLOCK_P": triton.next_power_of_2(planes)}
    signature = {a: pointers.get(a, "constexpr" if a in consts else "i32") for a in kernel.arg_names}
    src = ASTSource(fn=kernel, signature=signature, constexprs=consts)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps}).asm["ptx"]


def ptxas(text):
    """(registers, spill store bytes, spill load bytes) that the ptxas triton uses for sm_90 reports (-v)."""
    from triton.backends.nvidia.compiler import get_ptxas
    exe = get_ptxas(90).path
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "kernel.ptx")
        with open(path, "w") as f:
            f.write(text)
        out = subprocess.run([exe, "-v", "--gpu-name", "sm_90a", path, "-o", os.path.join(d, "kernel.cubin")],
                             capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"error: ptxas failed: {out.stderr.strip().splitlines()[-1]}")
    report = out.stderr
    regs = int(re.search(r"Used (\d+) registers", report).group(1))
    stores, loads = (int(x) for x in re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads",
                                               report).groups())
    return regs, stores, loads


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--warps", type=int, nargs="+", default=[rotary.NUM_WARPS])
    ap.add_argument("--block", type=int, nargs="+", default=[rotary.BLOCK_T])
    ap.add_argument("--head_dim", type=int, default=128)
    args = ap.parse_args()
    if rotary.tl.constexpr is None:
        sys.exit("error: triton is not installed")
    import triton
    from triton.backends.nvidia.compiler import get_ptxas
    print(f"triton {triton.__version__}, ptxas {get_ptxas(90).version}, sm_90a, head_dim {args.head_dim}, "
          f"bf16 q/k; rotary.py launches num_warps {rotary.NUM_WARPS}, BLOCK_T {rotary.BLOCK_T}")
    for warps, block in itertools.product(args.warps, args.block):
        for name, kernel, pointers in (("forward", rotary._rotary_fwd, FWD),
                                       ("backward", rotary._rotary_bwd, BWD)):
            regs, stores, loads = ptxas(ptx(kernel, pointers, warps, block, args.head_dim // 2))
            print(f"num_warps {warps:2}  BLOCK_T {block:3}  {name:8}  {regs:3} registers  "
                  f"spills: {stores} B stored, {loads} B loaded")


if __name__ == "__main__":
    main()
