"""The fused rotation: rotary.rotate(q, k, rotary.angles_runs(...)) as one Triton kernel forward and
one backward, for M runs at once, each with its own plane table, angles computed from the integer
coordinates inside the kernel, with gradients for q, k, rates, offsets and overlays. rotary.py loads
it on CUDA machines (Rotary.forward, study.py); on CPU the tests run it in triton's interpreter.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _block(i, L, pm, BLOCK_T: tl.constexpr):
    """Token block i of a run of L = B x T tokens: its token indices (int64) and masks."""
    r = i.to(tl.int64) * BLOCK_T + tl.arange(0, BLOCK_T)
    return r, r < L, (r < L)[:, None] & pm[None, :]


@triton.jit
def _row(m, r, T, s_m, s_b, s_t):
    """Offset of token r = b x T + t of run m in a tensor with strides s_m, s_b, s_t."""
    return m * s_m + (r // T) * s_b + (r % T) * s_t


@triton.jit
def _angles(C, COL, RATE, OFF, OVL, tab, crow, rmask, mark, p, pm, P: tl.constexpr):
    """Angles (BLOCK_T, BLOCK_P) of table row `tab` for a block of tokens whose coordinates start at
    C + crow; also the coordinate, where it is present, and where the overlay adds."""
    col = tl.load(COL + tab * P + p, mask=pm, other=-1)
    rate = tl.load(RATE + tab * P + p, mask=pm, other=0.0).to(tl.float32)
    off = tl.load(OFF + tab * P + p, mask=pm, other=0.0).to(tl.float32)
    ovl = tl.load(OVL + tab * P + p, mask=pm, other=0.0).to(tl.float32)
    m = rmask[:, None] & pm[None, :] & (col >= 0)[None, :]
    c = tl.load(C + crow[:, None] + tl.maximum(col, 0)[None, :], mask=m, other=-1).to(tl.float32)
    present = c >= 0
    # the run's overlay, where its marker coordinate is present (configs.py's directed offset)
    has = rmask & (tl.zeros_like(crow) + mark >= 0)      # broadcast by hand for triton's interpreter
    marked = tl.load(C + crow + tl.maximum(mark, 0), mask=has, other=-1) >= 0
    over = present & marked[:, None]
    ang = tl.where(present, c * rate[None, :] + off[None, :], 0.0) + tl.where(over, ovl[None, :], 0.0)
    return c, present, over, ang


@triton.jit
def _rotate(X, Y, at, out, m, cos, sin, P: tl.constexpr):
    """y = R(angle) x for one head of a block (plane i = dims i, i + P)."""
    x1 = tl.load(X + at, mask=m, other=0.0).to(tl.float32)
    x2 = tl.load(X + at + P, mask=m, other=0.0).to(tl.float32)
    tl.store(Y + out, (x1 * cos - x2 * sin).to(Y.dtype.element_ty), mask=m)
    tl.store(Y + out + P, (x1 * sin + x2 * cos).to(Y.dtype.element_ty), mask=m)


@triton.jit
def _unrotate(X, DY, DX, at, dat, out, m, cos, sin, P: tl.constexpr):
    """dx = R(-angle) dy; returns d angle = y1 dy2 - y2 dy1, y = R(angle) x recomputed."""
    x1 = tl.load(X + at, mask=m, other=0.0).to(tl.float32)
    x2 = tl.load(X + at + P, mask=m, other=0.0).to(tl.float32)
    d1 = tl.load(DY + dat, mask=m, other=0.0).to(tl.float32)
    d2 = tl.load(DY + dat + P, mask=m, other=0.0).to(tl.float32)
    tl.store(DX + out, (d1 * cos + d2 * sin).to(DX.dtype.element_ty), mask=m)
    tl.store(DX + out + P, (d2 * cos - d1 * sin).to(DX.dtype.element_ty), mask=m)
    return (x1 * cos - x2 * sin) * d2 - (x1 * sin + x2 * cos) * d1


@triton.jit
def _rotary_fwd(Q, K, C, COL, RATE, OFF, OVL, MARK, QO, KO, T, L, H, HT, xs_m, xs_b, xs_t, xs_h,
                cs_m, cs_b, cs_t, P: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_P: tl.constexpr):
    """One program per block of BLOCK_T tokens of run m (the grid's second axis), every head, q and k
    together; q, k read through their strides, outputs contiguous (M, B, T, H, D)."""
    m, p = tl.program_id(1).to(tl.int64), tl.arange(0, BLOCK_P)
    r, rmask, mask = _block(tl.program_id(0), L, p < P, BLOCK_T)
    crow, xrow, mark = _row(m, r, T, cs_m, cs_b, cs_t), _row(m, r, T, xs_m, xs_b, xs_t), tl.load(MARK + m)
    for h in range(H):
        _, _, _, ang = _angles(C, COL, RATE, OFF, OVL, m * HT + h * HT // H, crow, rmask, mark, p, p < P,
                               P)
        cos, sin = tl.cos(ang), tl.sin(ang)
        at = (xrow + h * xs_h)[:, None] + p[None, :]
        out = ((m * L + r) * H + h)[:, None] * 2 * P + p[None, :]
        _rotate(Q, QO, at, out, mask, cos, sin, P)
        _rotate(K, KO, at, out, mask, cos, sin, P)


@triton.jit
def _rotary_bwd(Q, K, DQO, DKO, C, COL, RATE, OFF, OVL, MARK, DQ, DK, PART, T, L, H, HT, n_iter,
                xs_m, xs_b, xs_t, xs_h, gs_m, gs_b, gs_t, gs_h, cs_m, cs_b, cs_t,
                P: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_P: tl.constexpr):
    """dx = R(-angle) dy for q and k over n_iter token blocks of run m per program; d angle, summed over
    q and k and over each block's tokens, accumulates in registers into this program's partial sums per
    head of d rate (d angle x coordinate), d offset and d overlay: no atomics."""
    m, p = tl.program_id(1).to(tl.int64), tl.arange(0, BLOCK_P)
    pm, mark, i = p < P, tl.load(MARK + m), tl.program_id(0)
    for h in range(H):
        d_rate = tl.zeros((BLOCK_P,), dtype=tl.float32)   # plane vectors: few registers, many programs
        d_off = tl.zeros((BLOCK_P,), dtype=tl.float32)
        d_ovl = tl.zeros((BLOCK_P,), dtype=tl.float32)
        for j in range(n_iter):
            r, rmask, mask = _block(i * n_iter + j, L, pm, BLOCK_T)
            c, present, over, ang = _angles(C, COL, RATE, OFF, OVL, m * HT + h * HT // H,
                                            _row(m, r, T, cs_m, cs_b, cs_t), rmask, mark, p, pm, P)
            cos, sin = tl.cos(ang), tl.sin(ang)
            at = (_row(m, r, T, xs_m, xs_b, xs_t) + h * xs_h)[:, None] + p[None, :]
            dat = (_row(m, r, T, gs_m, gs_b, gs_t) + h * gs_h)[:, None] + p[None, :]
            out = ((m * L + r) * H + h)[:, None] * 2 * P + p[None, :]
            dang = _unrotate(Q, DQO, DQ, at, dat, out, mask, cos, sin, P) + \
                _unrotate(K, DKO, DK, at, dat, out, mask, cos, sin, P)
            dang = tl.where(present, dang, 0.0)                # absent planes do not turn
            d_rate += tl.sum(dang * c, 0)
            d_off += tl.sum(dang, 0)
            d_ovl += tl.sum(tl.where(over, dang, 0.0), 0)
        part = PART + ((m * tl.num_programs(0) + i) * H + h) * P + p     # PART (3, M, programs, H, P)
        n = tl.num_programs(1) * tl.num_programs(0) * H * P
        tl.store(part, d_rate, mask=pm)
        tl.store(part + n, d_off, mask=pm)
        tl.store(part + 2 * n, d_ovl, mask=pm)


BLOCK_T = 32      # tokens per program and step: 32 x 64 planes x 2 halves x q, k per head
PROGRAMS = 2048   # backward programs aimed at: enough to fill a GPU, few partial sums left to add


def _alike(*xs):
    """xs as they are where they share strides and a contiguous last dimension (q, k sliced from one
    projection), else contiguous copies: the kernel reads them through one set of strides."""
    same = all(x.stride() == xs[0].stride() and x.stride(-1) == 1 for x in xs)
    return xs if same else tuple(x.contiguous() for x in xs)


def _runs_fwd(q, k, C, col, rate, offset, overlay, marker):
    """The forward launch: every run's every block of BLOCK_T tokens."""
    M, B, T, H, D = q.shape
    (q, k), (C,) = _alike(q, k), _alike(C)
    qo, ko = q.new_empty(q.shape), k.new_empty(k.shape)
    tables = [t.contiguous() for t in (col, rate, offset, overlay, marker)]
    _rotary_fwd[(triton.cdiv(B * T, BLOCK_T), M)](
        q, k, C, *tables, qo, ko, T, B * T, H, col.shape[1], *q.stride()[:4], *C.stride()[:3], D // 2,
        BLOCK_T, triton.next_power_of_2(D // 2))
    return qo, ko


def _runs_bwd(q, k, dqo, dko, C, col, rate, offset, overlay, marker):
    """The backward launch, each program n_iter blocks of one run: dq, dk and (3, M, HT, P) the
    gradients of rate, offset and overlay."""
    M, B, T, H, D = q.shape
    (q, k), (dqo, dko), (C,) = _alike(q, k), _alike(dqo, dko), _alike(C)
    blocks = triton.cdiv(B * T, BLOCK_T)
    n_iter = max(1, min(16, M * blocks // PROGRAMS))
    grid = (triton.cdiv(blocks, n_iter), M)
    dq, dk = q.new_empty(q.shape), k.new_empty(k.shape)
    part = torch.empty(3, M, grid[0], H, D // 2, device=q.device, dtype=torch.float32)
    _rotary_bwd[grid](q, k, dqo, dko, C, *[t.contiguous() for t in (col, rate, offset, overlay, marker)],
                      dq, dk, part, T, B * T, H, col.shape[1], n_iter, *q.stride()[:4], *dqo.stride()[:4],
                      *C.stride()[:3], D // 2, BLOCK_T, triton.next_power_of_2(D // 2))
    HT = col.shape[1]      # second stage: the partials, and heads sharing a table, added
    return dq, dk, part.view(3, M, grid[0], HT, H // HT, D // 2).sum((2, 4))


if not hasattr(torch.ops.treerope, "rotate_runs"):   # once per process: custom ops with fake
    # implementations, so torch.compile keeps them in its graph
    _op = torch.library.custom_op(
        "treerope::rotate_runs", _runs_fwd, mutates_args=(),
        schema="(Tensor q, Tensor k, Tensor C, Tensor col, Tensor rate, Tensor offset, Tensor overlay, "
               "Tensor marker) -> (Tensor, Tensor)")
    _op.register_fake(lambda q, k, *rest: (q.new_empty(q.shape), k.new_empty(k.shape)))
    _bwd = torch.library.custom_op(
        "treerope::rotate_runs_bwd", _runs_bwd, mutates_args=(),
        schema="(Tensor q, Tensor k, Tensor dqo, Tensor dko, Tensor C, Tensor col, Tensor rate, "
               "Tensor offset, Tensor overlay, Tensor marker) -> (Tensor, Tensor, Tensor)")
    _bwd.register_fake(lambda q, k, dqo, dko, C, col, *rest: (
        q.new_empty(q.shape), k.new_empty(k.shape), q.new_empty(3, *col.shape, dtype=torch.float32)))

    def _backward(ctx, dqo, dko):
        q, k, C, col, rate, offset, overlay, marker = ctx.saved_tensors
        dq, dk, d = torch.ops.treerope.rotate_runs_bwd(q, k, dqo, dko, C, col, rate, offset, overlay, marker)
        return dq, dk, None, None, *(g.to(t.dtype) for g, t in zip(d, (rate, offset, overlay))), None
    _op.register_autograd(_backward, setup_context=lambda ctx, inputs, output: ctx.save_for_backward(*inputs))


def rotate_runs_triton(q, k, C, col, rate, offset, overlay, marker):
    """Fused kernel for M runs at once, each with its own table: rotate(q, k, angles_runs(C, col, rate,
    offset, overlay, marker)) with q, k (M, B, T, H, D), in one launch forward and one backward, with
    gradients for q, k, rate, offset and overlay. Tables may be (M, HT, P) with HT dividing H (heads
    share a table in blocks, as Rotary.forward). Pass marker as a device tensor: no host work per call."""
    M, B, T, H, D = q.shape
    if k.shape != q.shape or C.shape[:3] != (M, B, T) or col.shape[0::2] != (M, D // 2) or \
            H % col.shape[1] or {t.shape for t in (rate, offset, overlay)} != {col.shape}:
        raise ValueError(f"rotate_runs_triton: q, k {tuple(q.shape)} (M, B, T, H, D), C {tuple(C.shape)} "
                         f"(M, B, T, K) and tables {tuple(col.shape)} (M, H or a divisor, D/2) do not fit")
    marker = torch.as_tensor(marker, device=C.device).view(M)
    return torch.ops.treerope.rotate_runs(q, k, C, col, rate, offset, overlay, marker)


def rotate_triton(q, k, C, col, rate, offset, overlay=None, marker=-1):
    """One model's rotation, the single-run case of rotate_runs_triton: q, k (B, T, H, D), tables (H or
    HT, P), marker the column of C where the overlay adds (an int, or a device tensor), -1 none."""
    overlay = torch.zeros_like(offset) if overlay is None else overlay
    qo, ko = rotate_runs_triton(*(t.unsqueeze(0) for t in (q, k, C, col, rate, offset, overlay)), marker)
    return qo[0], ko[0]
