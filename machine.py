"""The machine a run lands on: the precision it gets (bf16 autocast and torch.compile only where the
processor multiplies bf16 natively) and the provenance a run records (commit, libraries, device).
"""
import os
import subprocess

import torch

# oneDNN runs bf16 matrix products natively from these instruction sets up (its ISA names); below
# them bf16 is emulated, far slower than fp32 (REFERENCE.md "Precision")
ONEDNN_BF16 = ("AVX512_CORE_BF16", "AVX10_1_512", "AVX512_CORE_FP16", "AVX512_CORE_AMX", "AVX10_1_512_AMX",
               "AVX512_CORE_AMX_FP16", "AVX10_1_512_AMX_FP16", "ALL")


def cpu_flags():
    """The processor's feature flags as Linux lists them ('flags' on x86, 'Features' on Arm)."""
    try:
        with open("/proc/cpuinfo") as f:
            return {w for line in f if line.startswith(("flags", "Features"))
                    for w in line.split(":", 1)[1].split()}
    except OSError:                                                 # not Linux: no flags to read
        return set()


def native_bf16(flags, env):
    """(yes, why): does this CPU multiply bf16 natively? AVX-512 BF16 or AMX on x86, BF16 on Arm;
    ATEN_CPU_CAPABILITY and ONEDNN_MAX_CPU_ISA can cap torch below what the flags say."""
    cap, isa = env.get("ATEN_CPU_CAPABILITY", "").lower(), env.get("ONEDNN_MAX_CPU_ISA", "").upper()
    if cap in ("default", "avx2"):
        return False, f"ATEN_CPU_CAPABILITY={cap} caps torch below AVX-512, where bf16 is emulated"
    if isa and isa not in ONEDNN_BF16:
        return False, f"ONEDNN_MAX_CPU_ISA={isa} caps oneDNN below AVX512_CORE_BF16, where bf16 is emulated"
    have = sorted({"avx512_bf16", "amx_bf16", "bf16"} & flags)
    if have:
        return True, f"the processor multiplies bf16 natively ({', '.join(have)})"
    return False, ("the processor has no native bf16 (no avx512_bf16, amx_bf16 or bf16 flag): "
                   "it would be emulated")


def precision(device):
    """(bf16, compile, why) for a device. bf16 autocast only where the hardware runs it natively;
    on CPU torch.compile only with it (RESULTS.md "Speed" measures both). CUDA runs eager; MPS runs
    fp32 (our reading: untested here)."""
    if device.startswith("cuda"):
        ok = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
        return ok, False, "CUDA " + ("supports bf16" if ok else "without bf16 (pre-Ampere)")
    if device == "mps":
        return False, False, "MPS: fp32 (bf16 autocast there is untested in this repository)"
    ok, why = native_bf16(cpu_flags(), os.environ)
    return ok, ok, why


def provenance(device):
    """What made this run: the git commit (and whether the tree had uncommitted changes), library
    versions and the device, so a number can be traced to its code."""
    here = os.path.dirname(os.path.abspath(__file__))
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
