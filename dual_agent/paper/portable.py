"""The dual agent's actors in float64 with one fixed order of operations: the same bits on every CPU.

A greedy policy turns a last-bit difference of its logits into another action whenever two
logits are close, and one other action sends the episode elsewhere. torch's float32 CPU kernels
pick their summation order (and vector width, and fused multiply-add) by CPU, so the shipped
checkpoints scored with torch gave other episodes on other x86-64 CPUs (preemptions
323 -> 3,551 on one seed, once). :class:`PortableActors` is what deterministic (arg max) policies act
through instead:

* the shipped float32 weights and the float32 features are widened exactly to float64;
* every layer is ``y_j = (sum_k x_k w_jk, summed for k = 0, 1, 2, ... in order) + b_j`` with a
  plain multiply and a plain add (compiled by numba without fast-math, so no reassociation and no
  fused multiply-add; a test checks the compiled kernels against their pure-Python versions);
* ``tanh``, the gate's sigmoid and their ``exp`` are written here with additions, multiplications,
  divisions and an exact power-of-two scaling: no C library or SIMD maths whose last bit differs
  between CPUs; masked mean and max are explicit loops in row order.

IEEE 754 fixes the result of each of these operations, so the logits are the same bits wherever
the code runs. They differ from torch's float32 logits by about 1e-7 relative (same network, other
rounding). Ties (identical candidate rows give identical logits here) go to the lowest index, as
``numpy.argmax`` does. The remaining inputs are portable too: the environment's observations are
bit-exact across CPUs (the baselines' scores check), and the Random Walk GP's float64 posterior is
rounded to float32 before it reaches the networks, which absorbs its LAPACK round-off but for a
vanishing fraction of values (a last-bit float64 change flips a float32 rounding about once in
10^7 values, and a float32 last-bit change of one input then almost never changes the arg max;
``tests/test_dual_portable.py`` scores the agent with every weight moved by a float64 ulp and
gets the checked-in scores).

Sampling policies (training workers) keep torch's path: their actions are random draws anyway.
"""
from __future__ import annotations

import math
import operator
import weakref
from typing import Optional

import numpy as np

__all__ = ["PortableActors", "masked_argmax", "portable_actors", "portable_logits"]

_LN2_HI = 6.93147180369123816490e-01   # ln 2 split so that k * _LN2_HI is exact for |k| < 2^11
_LN2_LO = 1.90821492927058770002e-10
_INV_LN2 = 1.44269504088896338700e+00
_BIG = float(np.finfo(np.float32).max)  # masked_mean_max's fill for float32 features


def _expm1_small(r):
    """exp(r) - 1 for |r| <= 0.35, Horner form of its Taylor series to r^14/14! (the first term
    left out is below 1e-18 there)."""
    p = 1.0 / 87178291200.0                         # 1/14!
    p = p * r + 1.0 / 6227020800.0
    p = p * r + 1.0 / 479001600.0
    p = p * r + 1.0 / 39916800.0
    p = p * r + 1.0 / 3628800.0
    p = p * r + 1.0 / 362880.0
    p = p * r + 1.0 / 40320.0
    p = p * r + 1.0 / 5040.0
    p = p * r + 1.0 / 720.0
    p = p * r + 1.0 / 120.0
    p = p * r + 1.0 / 24.0
    p = p * r + 1.0 / 6.0
    p = p * r + 0.5
    p = p * r + 1.0
    return p * r


# 2^k for k = -1022..1023: scaling by a table entry is exact (and faster than a call to ldexp).
_POW2 = np.ldexp(1.0, np.arange(-1022, 1024))


def _exp(x):
    """exp(x) by range reduction x = k ln2 + r and the series of exp(r): within a few ulps, and
    the same bits everywhere. Outside [-700, 709] (where the callers never go) inf or 0; NaN stays
    NaN (the table index below must stay in range)."""
    if x != x:
        return x
    if x > 709.0:
        return math.inf
    if x < -700.0:
        return 0.0
    k = math.floor(x * _INV_LN2 + 0.5)
    r = (x - k * _LN2_HI) - k * _LN2_LO
    return (_expm1_small(r) + 1.0) * _POW2[int(k) + 1022]


def _pow2_small(k):
    """2^k for an integer-valued float ``k`` in [0, 63], as a product of exact powers of two (no
    table look-up and no branch, so a loop over it vectorises): exactly ``_POW2[k + 1022]``."""
    p, t = 1.0, k
    for step, scale in ((32.0, 4294967296.0), (16.0, 65536.0), (8.0, 256.0), (4.0, 16.0), (2.0, 4.0)):
        c = t >= step
        p = p * (scale if c else 1.0)
        t = t - (step if c else 0.0)
    return p * (2.0 if t >= 1.0 else 1.0)


def _tanh(x):
    """tanh(x) = e / (e + 2) with e = exp(2|x|) - 1 (no cancellation near 0), odd; NaN stays NaN
    (the policy then raises on non-finite logits). Written without branches (every case computed,
    then selected) so that the dense layers' loop over it vectorises; each case is the operations
    of :func:`_exp` (near 0: its series alone), so the bits are those of ``_exp(2|x|) - 1``."""
    a = abs(x)
    y = min(2.0 * a, 40.0)                          # tanh is 1 to double precision past |x| = 20
    k = np.floor(y * _INV_LN2 + 0.5)                # 0 where y <= 0.34: then r = y exactly
    r = (y - k * _LN2_HI) - k * _LN2_LO
    p = _expm1_small(r)
    e = p if y <= 0.34 else (p + 1.0) * _pow2_small(k) - 1.0
    t = 1.0 if a > 20.0 else e / (e + 2.0)
    t = -t if x < 0.0 else t
    return x if x != x else t


def _sigmoid(x):
    """1 / (1 + exp(-x)); exactly 1 above 40 and 0 below -700 (where double precision ends); NaN
    stays NaN."""
    if x != x:
        return x
    if x > 40.0:
        return 1.0
    if x < -700.0:
        return 0.0
    return 1.0 / (1.0 + _exp(-x))


def _bias_act(out, b, act):
    """``out[r, j] = out[r, j] + b[j]``, then ``tanh`` when ``act`` (in place)."""
    rows, width = out.shape
    if act:
        for r in range(rows):
            for j in range(width):
                out[r, j] = _tanh(out[r, j] + b[j])
    else:
        for r in range(rows):
            for j in range(width):
                out[r, j] = out[r, j] + b[j]


def _products(x, wt):
    """``x @ wt`` (rows of ``x`` (R, K), ``wt`` (K, J)), each sum in the order k = 0..K-1. Only
    independent sums run side by side: the outputs j (vectorisable without changing any sum's
    order) and two rows at a time (sharing the loads of ``wt``)."""
    rows, inner = x.shape
    width = wt.shape[1]
    out = np.empty((rows, width))
    acc0, acc1 = np.empty(width), np.empty(width)
    r = 0
    while r + 2 <= rows:
        acc0[:] = 0.0
        acc1[:] = 0.0
        for k in range(inner):
            x0, x1 = x[r, k], x[r + 1, k]
            for j in range(width):
                w = wt[k, j]
                acc0[j] = acc0[j] + x0 * w
                acc1[j] = acc1[j] + x1 * w
        for j in range(width):
            out[r, j] = acc0[j]
            out[r + 1, j] = acc1[j]
        r += 2
    if r < rows:
        acc0[:] = 0.0
        for k in range(inner):
            x0 = x[r, k]
            for j in range(width):
                acc0[j] = acc0[j] + x0 * wt[k, j]
        for j in range(width):
            out[r, j] = acc0[j]
    return out


def _four_rows64(x, wt, r, out, acc):
    """Rows ``r .. r + 3`` of :func:`_products64` (they share the weights' loads)."""
    inner = x.shape[1]
    acc[:] = 0.0
    k = 0
    while k + 8 <= inner:
        a0, a1, a2, a3 = x[r, k], x[r, k + 1], x[r, k + 2], x[r, k + 3]
        a4, a5, a6, a7 = x[r, k + 4], x[r, k + 5], x[r, k + 6], x[r, k + 7]
        b0, b1, b2, b3 = x[r + 1, k], x[r + 1, k + 1], x[r + 1, k + 2], x[r + 1, k + 3]
        b4, b5, b6, b7 = x[r + 1, k + 4], x[r + 1, k + 5], x[r + 1, k + 6], x[r + 1, k + 7]
        c0, c1, c2, c3 = x[r + 2, k], x[r + 2, k + 1], x[r + 2, k + 2], x[r + 2, k + 3]
        c4, c5, c6, c7 = x[r + 2, k + 4], x[r + 2, k + 5], x[r + 2, k + 6], x[r + 2, k + 7]
        d0, d1, d2, d3 = x[r + 3, k], x[r + 3, k + 1], x[r + 3, k + 2], x[r + 3, k + 3]
        d4, d5, d6, d7 = x[r + 3, k + 4], x[r + 3, k + 5], x[r + 3, k + 6], x[r + 3, k + 7]
        for j in range(64):
            w0, w1, w2, w3 = wt[k, j], wt[k + 1, j], wt[k + 2, j], wt[k + 3, j]
            w4, w5, w6, w7 = wt[k + 4, j], wt[k + 5, j], wt[k + 6, j], wt[k + 7, j]
            acc[0, j] = (((((((acc[0, j] + a0 * w0) + a1 * w1) + a2 * w2) + a3 * w3) + a4 * w4) + a5 * w5)
                         + a6 * w6) + a7 * w7
            acc[1, j] = (((((((acc[1, j] + b0 * w0) + b1 * w1) + b2 * w2) + b3 * w3) + b4 * w4) + b5 * w5)
                         + b6 * w6) + b7 * w7
            acc[2, j] = (((((((acc[2, j] + c0 * w0) + c1 * w1) + c2 * w2) + c3 * w3) + c4 * w4) + c5 * w5)
                         + c6 * w6) + c7 * w7
            acc[3, j] = (((((((acc[3, j] + d0 * w0) + d1 * w1) + d2 * w2) + d3 * w3) + d4 * w4) + d5 * w5)
                         + d6 * w6) + d7 * w7
        k += 8
    while k < inner:
        a0, b0, c0, d0 = x[r, k], x[r + 1, k], x[r + 2, k], x[r + 3, k]
        for j in range(64):
            w0 = wt[k, j]
            acc[0, j] = acc[0, j] + a0 * w0
            acc[1, j] = acc[1, j] + b0 * w0
            acc[2, j] = acc[2, j] + c0 * w0
            acc[3, j] = acc[3, j] + d0 * w0
        k += 1
    for q in range(4):
        for j in range(64):
            out[r + q, j] = acc[q, j]


def _one_row64(x, wt, r, out, acc):
    """Row ``r`` of :func:`_products64`."""
    inner = x.shape[1]
    for j in range(64):
        acc[0, j] = 0.0
    k = 0
    while k + 8 <= inner:
        a0, a1, a2, a3 = x[r, k], x[r, k + 1], x[r, k + 2], x[r, k + 3]
        a4, a5, a6, a7 = x[r, k + 4], x[r, k + 5], x[r, k + 6], x[r, k + 7]
        for j in range(64):
            acc[0, j] = (((((((acc[0, j] + a0 * wt[k, j]) + a1 * wt[k + 1, j]) + a2 * wt[k + 2, j])
                            + a3 * wt[k + 3, j]) + a4 * wt[k + 4, j]) + a5 * wt[k + 5, j])
                         + a6 * wt[k + 6, j]) + a7 * wt[k + 7, j]
        k += 8
    while k < inner:
        a0 = x[r, k]
        for j in range(64):
            acc[0, j] = acc[0, j] + a0 * wt[k, j]
        k += 1
    for j in range(64):
        out[r, j] = acc[0, j]


def _products64(x, wt):
    """:func:`_products` for exactly 64 outputs (the shipped hidden width): the same sums in the
    same order, the loops' trip count known when compiled, four rows at a time (sharing the
    weights' loads), and eight terms of each sum added one after the other in one pass over the
    outputs (``(((s + x0 w0) + x1 w1) + ...) + x7 w7``: the order of k = 0, 1, 2, ..., with one
    load and one store of each partial sum per eight terms instead of per term)."""
    rows = x.shape[0]
    out = np.empty((rows, 64))
    acc = np.empty((4, 64))
    r = 0
    while r + 4 <= rows:
        _four_rows64(x, wt, r, out, acc)
        r += 4
    while r < rows:
        _one_row64(x, wt, r, out, acc)
        r += 1
    return out


def _dense(x, wt, b, act):
    """``x @ wt + b`` (rows of ``x`` (R, K), ``wt`` (K, J)), each sum in the order k = 0..K-1, the
    bias added last, then ``tanh`` when ``act``; a narrow layer (J < 8, the heads' last) keeps each
    sum in a register."""
    rows, inner = x.shape
    width = wt.shape[1]
    if width == 64:
        out = _products64(x, wt)
    elif width >= 8:
        out = _products(x, wt)
    else:
        out = np.empty((rows, width))
        for r in range(rows):
            for j in range(width):
                s = 0.0
                for k in range(inner):
                    s = s + x[r, k] * wt[k, j]
                out[r, j] = s
    _bias_act(out, b, act)
    return out


# The networks' layers, packed: every (weight transposed (K, J), bias (J,)) pair in one float64
# buffer, and a table of (offset of the weight, K, J, offset of the bias) per layer, in this order
# (each network's layers first to last); one array each instead of 40 arguments per call.
_PARTS = (("job_encoder", 3), ("machine_encoder", 1), ("squeeze", 3), ("gate", 1), ("job_head", 3),
          ("advance_head", 3), ("encoder", 3), ("head", 3))
_JOB_ENCODER, _MACHINE_ENCODER, _SQUEEZE, _GATE, _JOB_HEAD, _ADVANCE_HEAD, _ENCODER, _HEAD = 0, 3, 4, 7, 8, 11, 14, 17


def _net(x, weights, table, first, count, last_tanh):
    """Layers ``first .. first + count - 1`` of the packed table on the rows of ``x``: ``tanh``
    between them and after the last when ``last_tanh`` (``networks.mlp`` and ``networks.embed``)."""
    for i in range(first, first + count):
        at, k, j, bias_at = table[i, 0], table[i, 1], table[i, 2], table[i, 3]
        wt = weights[at:at + k * j].reshape((k, j))
        x = _dense(x, wt, weights[bias_at:bias_at + j], i < first + count - 1 or last_tanh)
    return x


def _sigmoid_rows(x):
    out = np.empty_like(x)
    for r in range(x.shape[0]):
        for j in range(x.shape[1]):
            out[r, j] = _sigmoid(x[r, j])
    return out


def _mean_max(x, valid):
    """``networks.masked_mean_max`` of (S, H) rows: [mean, max] of the valid rows summed in row
    order (count at least 1), zeros when none is valid."""
    h = x.shape[1]
    total, top = np.zeros(h), np.full(h, -_BIG)
    n = 0
    for s in range(x.shape[0]):
        if valid[s]:
            n += 1
            for j in range(h):
                total[j] = total[j] + x[s, j]
                if x[s, j] > top[j]:
                    top[j] = x[s, j]
    out = np.zeros(2 * h)
    for j in range(h):
        out[j] = total[j] / max(n, 1)
        out[h + j] = top[j] if n > 0 else 0.0
    return out


def _widen(a):
    """A C-contiguous float64 copy of the 2-D ``a`` (float32 widens exactly)."""
    out = np.empty(a.shape)
    for r in range(a.shape[0]):
        for c in range(a.shape[1]):
            out[r, c] = a[r, c]
    return out


def _job_rows(rows, last_rows, last_emb, weights, table):
    """The job encoder's output (R, H) for ``rows``: a row whose input bits equal a row of
    ``last_rows`` (the last call's, embedded as ``last_emb``) takes that embedding, the others
    go through the encoder together (each row is mapped on its own: the same bits)."""
    n, width = rows.shape
    bits = rows.view(np.uint64)
    reuse = last_rows.shape[1] == width
    last_bits = last_rows.view(np.uint64)
    source = np.full(n, -1, np.int64)
    missing = 0
    for r in range(n):
        if reuse:
            for q in range(last_rows.shape[0]):
                same = True
                for c in range(width):
                    if bits[r, c] != last_bits[q, c]:
                        same = False
                        break
                if same:
                    source[r] = q
                    break
        if source[r] < 0:
            missing += 1
    emb = np.empty((n, table[_JOB_ENCODER + 2, 2]))
    if missing > 0:
        todo = np.empty((missing, width))
        where = np.empty(missing, np.int64)
        i = 0
        for r in range(n):
            if source[r] < 0:
                todo[i] = rows[r]
                where[i] = r
                i += 1
        fresh = _net(todo, weights, table, _JOB_ENCODER, 3, False)
        for i in range(missing):
            emb[where[i]] = fresh[i]
    for r in range(n):
        if source[r] >= 0:
            emb[r] = last_emb[source[r]]
    return emb


def _machine_rows(machines, last_machines, last_emb, weights, table):
    """The machine encoder's output (M, H), recomputed only for the machines whose input bits
    differ from ``last_machines`` (the last call's, embedded as ``last_emb``; every machine when
    the shapes differ). Returns ``last_emb`` itself when no machine changed."""
    m, width = machines.shape
    if last_machines.shape[0] != m or last_machines.shape[1] != width:
        return _net(machines, weights, table, _MACHINE_ENCODER, 1, True)
    bits, last_bits = machines.view(np.uint64), last_machines.view(np.uint64)
    changed = np.empty(m, np.int64)
    n = 0
    for r in range(m):
        for c in range(width):
            if bits[r, c] != last_bits[r, c]:
                changed[n] = r
                n += 1
                break
    if n == 0:
        return last_emb
    todo = np.empty((n, width))
    for i in range(n):
        todo[i] = machines[changed[i]]
    fresh = _net(todo, weights, table, _MACHINE_ENCODER, 1, True)
    emb = last_emb.copy()
    for i in range(n):
        emb[changed[i]] = fresh[i]
    return emb


def _summarise(jobs, bits, machines, glob, last_rows, last_emb, last_machines, last_m_emb, weights, table):
    """The orderer's squeeze: (the distinct candidate rows (float64), their job embeddings, each
    row's distinct row, the machine embeddings, the summary (1, H)); ``jobs`` as observed. The squeeze network runs on
    ``[masked mean and max of the valid job rows, mean and max of the machine rows, glob]``."""
    keep, inverse = _distinct_rows(jobs, bits)
    rows = np.empty((keep.shape[0], jobs.shape[1]))        # float64 (float32 widens exactly)
    for i in range(keep.shape[0]):
        for c in range(jobs.shape[1]):
            rows[i, c] = jobs[keep[i], c]
    emb = _job_rows(rows, last_rows, last_emb, weights, table)
    m_emb = _machine_rows(machines, last_machines, last_m_emb, weights, table)
    valid = np.empty(rows.shape[0], np.bool_)   # the valid rows come first, in row order: the same sums
    for i in range(rows.shape[0]):
        valid[i] = rows[i, 0] > 0.5
    pooled_jobs = _mean_max(emb, valid)
    pooled_machines = _mean_max(m_emb, np.ones(m_emb.shape[0], np.bool_))
    a, b = pooled_jobs.shape[0], pooled_machines.shape[0]
    pooled = np.empty((1, a + b + glob.shape[0]))
    pooled[0, :a] = pooled_jobs
    pooled[0, a:a + b] = pooled_machines
    pooled[0, a + b:] = glob
    return rows, emb, inverse, m_emb, _net(pooled, weights, table, _SQUEEZE, 3, False)


def _orderer_logits(jobs_in, bits_in, machines_in, glob_in, legal, last_rows, last_emb, last_machines, last_m_emb,
                    weights, table):
    """``OrderingAgent.forward``'s logits (N + 1,) for the actions ``legal`` allows (the others
    -inf unless a legal row has the same inputs), and this call's rows and embeddings for the
    next: each job row gated by ``sigmoid(gate(summary))`` (exact products) next to the summary
    through the job head; the advance head on the summary."""
    machines = _widen(machines_in)
    glob = np.empty(glob_in.shape[0])
    glob[:] = glob_in
    rows, emb, inverse, m_emb, summary = _summarise(jobs_in, bits_in, machines, glob, last_rows, last_emb, last_machines,
                                                    last_m_emb, weights, table)
    n, h = inverse.shape[0], emb.shape[1]
    need = np.zeros(rows.shape[0], np.bool_)
    for r in range(n):
        if legal[r]:
            need[inverse[r]] = True
    wanted = np.flatnonzero(need)
    gate = _sigmoid_rows(_net(summary, weights, table, _GATE, 1, False))
    width = summary.shape[1]
    head_in = np.empty((wanted.shape[0], h + width))
    for i in range(wanted.shape[0]):
        for j in range(h):
            head_in[i, j] = emb[wanted[i], j] * gate[0, j]
        for j in range(width):
            head_in[i, h + j] = summary[0, j]
    head = _net(head_in, weights, table, _JOB_HEAD, 3, False)
    distinct = np.full(rows.shape[0], -np.inf)
    for i in range(wanted.shape[0]):
        distinct[wanted[i]] = head[i, 0]
    out = np.empty(n + 1)
    for r in range(n):
        out[r] = distinct[inverse[r]]
    out[n] = _net(summary, weights, table, _ADVANCE_HEAD, 3, False)[0, 0] if legal[n] else -np.inf
    return out, rows, emb, machines, m_emb


def _placer_logits(jobs_in, bits_in, machines_in, glob_in, placing_in, legal, last_rows, last_emb, last_machines,
                   last_m_emb, noop, weights, table):
    """``PlacementAgent.forward``'s logits (M + 1,) given the orderer's summary of the queue, for
    the machines ``legal`` allows (the others -inf; the no-op always), and this call's rows and
    embeddings: each machine row next to ``[placing, summary]`` through the encoder (every
    machine: their mean is the head's context), each legal machine's embedding next to that mean
    through the head."""
    machines = _widen(machines_in)
    glob = np.empty(glob_in.shape[0])
    glob[:] = glob_in
    rows, emb_jobs, _, m_emb, summary = _summarise(jobs_in, bits_in, machines, glob, last_rows, last_emb, last_machines,
                                                   last_m_emb, weights, table)
    m, f = machines.shape
    p, width = placing_in.shape[0], summary.shape[1]
    enc_in = np.empty((m, f + p + width))
    for r in range(m):
        for j in range(f):
            enc_in[r, j] = machines[r, j]
        for j in range(p):
            enc_in[r, f + j] = placing_in[j]
        for j in range(width):
            enc_in[r, f + p + j] = summary[0, j]
    emb = _net(enc_in, weights, table, _ENCODER, 3, False)              # (M, H)
    h = emb.shape[1]
    ctx = _mean_max(emb, np.ones(m, np.bool_))
    wanted = np.flatnonzero(legal[:m])
    head_in = np.empty((wanted.shape[0], 2 * h))
    for i in range(wanted.shape[0]):
        for j in range(h):
            head_in[i, j] = emb[wanted[i], j]
            head_in[i, h + j] = ctx[j]
    head = _net(head_in, weights, table, _HEAD, 3, False)
    out = np.full(m + 1, -np.inf)
    for i in range(wanted.shape[0]):
        out[wanted[i]] = head[i, 0]
    out[m] = noop
    return out, rows, emb_jobs, machines, m_emb


def _masked_argmax(logits, mask):
    """The lowest index of the largest logit ``mask`` allows (``numpy.argmax`` of the logits with
    the others at -inf); -1 when an allowed logit is not finite (NaN or inf), -2 when ``mask``
    allows nothing."""
    best, top = -2, -np.inf
    for i in range(logits.shape[0]):
        if mask[i]:
            v = logits[i]
            if not np.isfinite(v):
                return -1
            if best < 0 or v > top:
                best, top = i, v
    return best


# The kernels, compiled on first use. Each is looked up as a module attribute when called from
# Python and as a global when compiled, so a test can put the pure-Python versions back (all of
# them) and compare bits.
KERNELS = ("_bias_act", "_products", "_four_rows64", "_one_row64", "_products64", "_dense", "_net", "_sigmoid_rows", "_mean_max", "_widen",
           "_job_rows", "_machine_rows", "_summarise", "_orderer_logits", "_placer_logits", "_distinct_rows",
           "_masked_argmax")
_STATE = {"compiled": False}


def _compile() -> None:
    """Replace the module's functions by their numba-compiled versions (disk-cached), once."""
    if _STATE["compiled"]:
        return
    import numba

    from cluster_env.core import kernels as _cache

    jit = numba.njit(nogil=True, error_model="numpy")
    scalar = numba.njit(inline="always", error_model="numpy")
    g = globals()
    for name in SCALARS:
        g[name] = scalar(g[name])
    for name in KERNELS:
        dispatcher = jit(g[name])
        _cache._attach_cache(dispatcher)        # numba's disk cache, guarded as the simulator's
        g[name] = dispatcher
    _STATE["compiled"] = True


#: The scalar functions the kernels inline.
SCALARS = ("_expm1_small", "_exp", "_pow2_small", "_tanh", "_sigmoid")

Layer = tuple[np.ndarray, np.ndarray]   # (weight transposed (K, J), bias (J,)), float64, contiguous
_NO_ROWS = np.empty((0, 0))


class PortableActors:
    """The orderer's and the placer's logits of a :class:`dual_agent.paper.networks.DualAgentModel` from a
    float64 copy of its weights (taken when built: later in-place updates are not seen).

    Every network here maps each row on its own, so a row whose inputs have the same bits gives
    the same bits wherever and whenever it is computed. Three savings rest on that and change no
    bit: the observation's padding rows (invalid candidates, all alike) are computed once and
    copied, the machine encoder recomputes only the machines whose row changed since the last
    call (most steps change a few machines, or none), and the job encoder only the candidate rows
    the last call did not see (decisions at one instant share most rows). Given the acting
    agent's mask, the heads score only the actions it allows (what an arg max reads); the
    encoders and the summary still see every row. One compiled call per decision."""

    def __init__(self, orderer: dict[str, tuple[Layer, ...]], placer: dict[str, tuple[Layer, ...]],
                 noop_logit: float) -> None:
        self._o, self._p, self._noop = orderer, placer, float(noop_logit)
        parts = {**orderer, **placer}
        layers = [layer for name, count in _PARTS for layer in parts[name]]
        if [len(parts[name]) for name, _ in _PARTS] != [count for _, count in _PARTS]:
            raise ValueError("the portable actors mirror networks.mlp (3 layers) and networks.embed (1 layer) only")
        table, chunks, at = [], [], 0
        for wt, b in layers:
            k, j = wt.shape
            table.append((at, k, j, at + k * j))
            chunks += [np.ascontiguousarray(wt, np.float64).ravel(), np.ascontiguousarray(b, np.float64)]
            at += k * j + j
        self._weights = np.concatenate(chunks)
        self._table = np.array(table, np.int64)
        # The last call's (distinct job rows, their embeddings, machine rows, their embeddings).
        self._last = (_NO_ROWS, _NO_ROWS, _NO_ROWS, _NO_ROWS)

    def orderer(self, jobs: np.ndarray, machines: np.ndarray, glob: np.ndarray,
                legal: Optional[np.ndarray] = None) -> np.ndarray:
        """``OrderingAgent.forward``'s logits (N + 1,): the candidates, then ``advance``; with
        ``legal`` ((N + 1,) booleans) only those the mask allows (the others -inf)."""
        _compile()
        legal = np.ones(len(jobs) + 1, np.bool_) if legal is None else np.asarray(legal, np.bool_)
        jobs, bits = _observed(jobs)
        out, *last = _orderer_logits(jobs, bits, machines, glob, legal, *self._last, self._weights, self._table)
        self._last = tuple(last)
        return out

    def placer(self, jobs: np.ndarray, machines: np.ndarray, glob: np.ndarray, placing: np.ndarray,
               legal: Optional[np.ndarray] = None) -> np.ndarray:
        """``PlacementAgent.forward``'s logits (M + 1,): the machines, then the no-op; with
        ``legal`` ((M + 1,) booleans) only the machines the mask allows (the others -inf)."""
        _compile()
        legal = np.ones(len(machines) + 1, np.bool_) if legal is None else np.asarray(legal, np.bool_)
        jobs, bits = _observed(jobs)
        out, *last = _placer_logits(jobs, bits, machines, glob, np.asarray(placing, np.float64), legal, *self._last,
                                    self._noop, self._weights, self._table)
        self._last = tuple(last)
        return out

    def logits(self, agent: int, feats: dict, mask: Optional[np.ndarray] = None) -> np.ndarray:
        """One step's logits (float64, 1-D) of ``agent`` (0 orderer, 1 placer) from the policy's
        feature arrays (``DualAgentPolicy.features``); with the agent's ``mask`` only the actions
        it allows are scored (the others -inf): the same bits for those, less work."""
        if agent == 0:
            return self.orderer(feats["jobs"], feats["machines"], feats["global"], mask)
        return self.placer(feats["jobs"], feats["machines"], feats["global"], feats["placing"], mask)


def _distinct_rows(jobs, bits):
    """(rows to compute, index of each row among them): the valid candidates (column 0 > 0.5) in
    row order, then one padding row standing for every invalid row when they are all the same
    bits (the observation's zero padding); every row when they are not. ``jobs``: float32 or
    float64, C-contiguous; ``bits``: the same memory as unsigned integers of its width."""
    n, width = jobs.shape
    if n == 0 or width == 0:
        return np.arange(n), np.arange(n)
    keep = np.empty(n, np.int64)
    inverse = np.empty(n, np.int64)
    count, first_pad = 0, -1
    differ = bits[0, 0] ^ bits[0, 0]                 # zero, of the bits' type
    for r in range(n):
        if jobs[r, 0] > 0.5:
            inverse[r] = count
            keep[count] = r
            count += 1
        elif first_pad < 0:
            first_pad = r
        else:
            for c in range(width):                  # no early exit: the loop vectorises
                differ |= bits[r, c] ^ bits[first_pad, c]
    if differ != 0:
        return np.arange(n), np.arange(n)
    if first_pad >= 0:
        keep[count] = first_pad
        for r in range(n):
            if not jobs[r, 0] > 0.5:
                inverse[r] = count
        count += 1
    return keep[:count].copy(), inverse


def _observed(jobs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``jobs`` as the kernels read it (float32 as observed, anything else as float64; C-contiguous)
    and its bits (unsigned integers of the same width)."""
    if jobs.dtype != np.float32:
        jobs = np.asarray(jobs, np.float64)
    jobs = np.ascontiguousarray(jobs)
    return jobs, jobs.view(np.uint32 if jobs.dtype == np.float32 else np.uint64)


def _layers(pairs: Optional[tuple]) -> tuple[Layer, ...]:
    return tuple((np.ascontiguousarray(w.detach().cpu().numpy().astype(np.float64).T),
                  b.detach().cpu().numpy().astype(np.float64)) for w, b in pairs)


def portable_actors(model) -> Optional[PortableActors]:
    """:class:`PortableActors` for ``model`` (its current weights), or None when its actors are not
    exactly the networks mirrored here (:func:`dual_agent.paper.inference.actor_weights`)."""
    from dual_agent.paper.inference import actor_weights

    weights = actor_weights(model)
    if weights is None:
        return None
    orderer, placer = weights
    noop = placer.pop("noop_logit")
    return PortableActors({k: _layers(v) for k, v in orderer.items()},
                          {k: _layers(v) for k, v in placer.items()},
                          float(noop.detach().cpu().double().reshape(-1)[0]))


# Per model (weakly held): (the parameters' in-place version counters, its actors or None, its
# parameters).
_ACTORS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_VERSION = operator.attrgetter("_version")      # a tensor's in-place version counter


def masked_argmax(logits: np.ndarray, mask: np.ndarray) -> int:
    """The arg max of ``logits`` (float64, 1-D) over the actions ``mask`` (booleans) allows, ties
    to the lowest index (``numpy.argmax`` of ``numpy.where(mask, logits, -inf)``) in one compiled
    loop: -1 when an allowed logit is NaN or infinite, -2 when the mask allows nothing."""
    _compile()
    return int(_masked_argmax(logits, mask))


def portable_logits(model, agent: int, feats: dict, mask: Optional[np.ndarray] = None) -> Optional[np.ndarray]:
    """The acting agent's logits through :class:`PortableActors` (float64, 1-D), rebuilt whenever a
    weight changed in place (an optimiser step, ``load_state_dict``); None when the model is not
    mirrored (then the caller uses torch's path, which is not portable). With the agent's
    ``mask``, only the actions it allows are scored (the others -inf; an arg max never reads them)."""
    cached = _ACTORS.get(model)
    # The parameter list is walked once per model (module traversal costs more than a small
    # decision); its version counters are read at every call.
    params = cached[2] if cached is not None else list(model.parameters())
    versions = list(map(_VERSION, params))           # the cheapest walk
    if cached is None or cached[0] != versions:
        cached = _ACTORS[model] = (versions, portable_actors(model), params)
    actors = cached[1]
    return None if actors is None else actors.logits(agent, feats, mask)
