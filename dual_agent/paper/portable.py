"""The dual agent's actors in float64 with one fixed order of operations: the same bits on every CPU.

A greedy policy turns a last-bit difference of its logits into another action whenever two
logits are close, and one other action sends the episode elsewhere. torch's float32 CPU kernels
pick their summation order (and vector width, and fused multiply-add) by CPU, so the shipped
checkpoints scored with torch gave other episodes on other x86-64 CPUs (issue 28: preemptions
323 -> 3,551 on one seed). :class:`PortableActors` is what deterministic (arg max) policies act
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
import weakref
from typing import Optional

import numpy as np

__all__ = ["PortableActors", "portable_actors", "portable_logits"]

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


def _tanh(x):
    """tanh(x) = e / (e + 2) with e = exp(2|x|) - 1 (no cancellation near 0), odd; NaN stays NaN
    (the policy then raises on non-finite logits)."""
    if x != x:
        return x
    a = abs(x)
    if a > 20.0:                                    # tanh is 1 to double precision
        t = 1.0
    else:
        e = _expm1_small(2.0 * a) if 2.0 * a <= 0.34 else _exp(2.0 * a) - 1.0
        t = e / (e + 2.0)
    return -t if x < 0.0 else t


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


def _dense(x, wt, b, act):
    """``x @ wt + b`` (rows of ``x`` (R, K), ``wt`` (K, J)), each sum in the order k = 0..K-1, then
    ``tanh`` when ``act``. Only independent sums run side by side: the outputs j (vectorisable
    without changing any sum's order) and two rows at a time (sharing the loads of ``wt``); a
    narrow layer (J < 8, the heads' last) keeps each sum in a register."""
    rows, inner = x.shape
    width = wt.shape[1]
    out = np.empty((rows, width))
    if width < 8:
        for r in range(rows):
            for j in range(width):
                s = 0.0
                for k in range(inner):
                    s = s + x[r, k] * wt[k, j]
                out[r, j] = s
    else:
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
    for r in range(rows):
        for j in range(width):
            y = out[r, j] + b[j]
            out[r, j] = _tanh(y) if act else y
    return out


def _mlp3(x, w1, b1, w2, b2, w3, b3, last_tanh):
    """Three :func:`_dense` layers, ``tanh`` between them (and after the last when
    ``last_tanh``): ``networks.mlp`` in one call (the same operations as three calls)."""
    return _dense(_dense(_dense(x, w1, b1, True), w2, b2, True), w3, b3, last_tanh)


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


def _job_rows(rows, last_rows, last_emb, w1, b1, w2, b2, w3, b3):
    """The job encoder's output (R, H) for ``rows``: a row whose input bits equal a row of
    ``last_rows`` (the last call's, embedded as ``last_emb``) takes that embedding, the others
    go through the encoder together (each row is mapped on its own: the same bits)."""
    n, width = rows.shape
    bits, last_bits = rows.view(np.uint64), last_rows.view(np.uint64)
    source = np.full(n, -1, np.int64)
    missing = 0
    for r in range(n):
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
    emb = np.empty((n, b3.shape[0]))
    if missing > 0:
        todo = np.empty((missing, width))
        where = np.empty(missing, np.int64)
        i = 0
        for r in range(n):
            if source[r] < 0:
                todo[i] = rows[r]
                where[i] = r
                i += 1
        fresh = _mlp3(todo, w1, b1, w2, b2, w3, b3, False)
        for i in range(missing):
            emb[where[i]] = fresh[i]
    for r in range(n):
        if source[r] >= 0:
            emb[r] = last_emb[source[r]]
    return emb


def _summary(emb, valid, m_emb, glob, w1, b1, w2, b2, w3, b3):
    """The squeeze network on ``[masked mean and max of the valid job rows, mean and max of the
    machine rows, glob]``: the orderer's summary (1, H)."""
    jobs = _mean_max(emb, valid)
    machines = _mean_max(m_emb, np.ones(m_emb.shape[0], np.bool_))
    pooled = np.empty((1, jobs.shape[0] + machines.shape[0] + glob.shape[0]))
    pooled[0, :jobs.shape[0]] = jobs
    pooled[0, jobs.shape[0]:jobs.shape[0] + machines.shape[0]] = machines
    pooled[0, jobs.shape[0] + machines.shape[0]:] = glob
    return _mlp3(pooled, w1, b1, w2, b2, w3, b3, False)


def _orderer_head(emb, summary, gw, gb, h1, c1, h2, c2, h3, c3, a1, d1, a2, d2, a3, d3):
    """The orderer's logits (R + 1,) from the job rows' embeddings (R, H) and the summary (1, H):
    each row gated by ``sigmoid(gate(summary))`` (exact products) next to the summary through the
    job head, then the advance head on the summary."""
    gate = _sigmoid_rows(_dense(summary, gw, gb, False))
    rows, h = emb.shape
    width = summary.shape[1]
    head_in = np.empty((rows, h + width))
    for r in range(rows):
        for j in range(h):
            head_in[r, j] = emb[r, j] * gate[0, j]
        for j in range(width):
            head_in[r, h + j] = summary[0, j]
    job = _mlp3(head_in, h1, c1, h2, c2, h3, c3, False)
    out = np.empty(rows + 1)
    for r in range(rows):
        out[r] = job[r, 0]
    out[rows] = _mlp3(summary, a1, d1, a2, d2, a3, d3, False)[0, 0]
    return out


def _placer_head(machines, placing, summary, e1, f1, e2, f2, e3, f3, h1, c1, h2, c2, h3, c3, noop):
    """The placer's logits (M + 1,): each machine row next to ``[placing, summary]`` through the
    encoder, each embedding next to the embeddings' mean through the head, then the no-op."""
    m, f = machines.shape
    p, width = placing.shape[0], summary.shape[1]
    enc_in = np.empty((m, f + p + width))
    for r in range(m):
        for j in range(f):
            enc_in[r, j] = machines[r, j]
        for j in range(p):
            enc_in[r, f + j] = placing[j]
        for j in range(width):
            enc_in[r, f + p + j] = summary[0, j]
    emb = _mlp3(enc_in, e1, f1, e2, f2, e3, f3, False)                 # (M, H)
    h = emb.shape[1]
    ctx = _mean_max(emb, np.ones(m, np.bool_))
    head_in = np.empty((m, 2 * h))
    for r in range(m):
        for j in range(h):
            head_in[r, j] = emb[r, j]
            head_in[r, h + j] = ctx[j]
    logits = _mlp3(head_in, h1, c1, h2, c2, h3, c3, False)
    out = np.empty(m + 1)
    for r in range(m):
        out[r] = logits[r, 0]
    out[m] = noop
    return out


# The kernels as called below, compiled on first use. They are looked up as module attributes at
# each call, so a test can put the pure-Python versions back and compare bits.
KERNELS = ("_dense", "_mlp3", "_sigmoid_rows", "_mean_max", "_job_rows", "_summary", "_orderer_head",
           "_placer_head", "_distinct_rows")
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
    g["_expm1_small"] = scalar(_expm1_small)
    g["_exp"] = scalar(_exp)
    g["_tanh"] = scalar(_tanh)
    g["_sigmoid"] = scalar(_sigmoid)
    for name in KERNELS:
        dispatcher = jit(g[name])
        _cache._attach_cache(dispatcher)        # numba's disk cache, guarded as the simulator's
        g[name] = dispatcher
    _STATE["compiled"] = True


Layer = tuple[np.ndarray, np.ndarray]   # (weight transposed (K, J), bias (J,)), float64, contiguous


class PortableActors:
    """The orderer's and the placer's logits of a :class:`dual_agent.paper.networks.DualAgentModel` from a
    float64 copy of its weights (taken when built: later in-place updates are not seen).

    Every network here maps each row on its own, so a row whose inputs have the same bits gives
    the same bits wherever and whenever it is computed. Two savings rest on that and change no
    bit: the observation's padding rows (invalid candidates, all alike) are computed once and
    copied, the machine encoder recomputes only the machines whose row changed since the last
    call (most steps change a few machines, or none), and the job encoder only the candidate rows
    the last call did not see (decisions at one instant share most rows)."""

    def __init__(self, orderer: dict[str, tuple[Layer, ...]], placer: dict[str, tuple[Layer, ...]],
                 noop_logit: float) -> None:
        self._o, self._p, self._noop = orderer, placer, float(noop_logit)
        self._machines: Optional[tuple[np.ndarray, np.ndarray]] = None   # last (input, embedding)
        self._jobs: Optional[tuple[np.ndarray, np.ndarray]] = None       # last (job rows, embeddings)

    def _mlp(self, layers: tuple[Layer, ...], x: np.ndarray, last_tanh: bool = False) -> np.ndarray:
        if len(layers) == 3:                 # networks.mlp: one compiled call instead of three
            (w1, b1), (w2, b2), (w3, b3) = layers
            return _mlp3(x, w1, b1, w2, b2, w3, b3, last_tanh)
        for i, (wt, b) in enumerate(layers):
            x = _dense(x, wt, b, i < len(layers) - 1 or last_tanh)
        return x

    def _job_embeddings(self, rows: np.ndarray) -> np.ndarray:
        """The job encoder's rows, computed only for rows whose input bits the last call did not
        see (consecutive decisions at one instant share most candidate rows)."""
        last = self._jobs
        if last is None or last[0].shape[1] != rows.shape[1]:
            last = (np.empty((0, rows.shape[1])), np.empty((0, self._o["job_encoder"][-1][1].shape[0])))
        emb = _job_rows(rows, last[0], last[1], *_flat(self._o["job_encoder"]))
        self._jobs = (rows, emb)
        return emb

    def _machine_embeddings(self, machines: np.ndarray) -> np.ndarray:
        """The machine encoder's rows, recomputed only where a machine's input bits changed."""
        last = self._machines
        if last is not None and last[0].shape == machines.shape:
            changed = np.flatnonzero((last[0].view(np.uint64) != machines.view(np.uint64)).any(axis=1))
            if len(changed) == 0:
                return last[1]
            emb = last[1].copy()
            emb[changed] = self._mlp(self._o["machine_encoder"], machines[changed], last_tanh=True)
        else:
            emb = self._mlp(self._o["machine_encoder"], machines, last_tanh=True)
        self._machines = (machines.copy(), emb)
        return emb

    def _summarise(self, jobs: np.ndarray, machines: np.ndarray, glob: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(job embeddings of the distinct rows, which of them are valid, the row -> distinct row
        index, the summary (1, H))."""
        keep, inverse = _distinct_rows(jobs)
        rows = jobs[keep]
        emb = self._job_embeddings(rows)                                       # (distinct rows, H)
        m_emb = self._machine_embeddings(machines)                             # (M, H)
        valid = rows[:, 0] > 0.5          # the valid rows come first, in row order: the same sums
        return emb, valid, inverse, _summary(emb, valid, m_emb, glob, *_flat(self._o["squeeze"]))

    def orderer(self, jobs: np.ndarray, machines: np.ndarray, glob: np.ndarray) -> np.ndarray:
        """``OrderingAgent.forward``'s logits (N + 1,): the candidates, then ``advance``."""
        emb, _, inverse, summary = self._summarise(jobs, machines, glob)
        o = self._o
        distinct = _orderer_head(emb, summary, *_flat(o["gate"]), *_flat(o["job_head"]), *_flat(o["advance_head"]))
        out = np.empty(len(inverse) + 1)
        out[:-1] = distinct[inverse]
        out[-1] = distinct[-1]
        return out

    def placer(self, jobs: np.ndarray, machines: np.ndarray, glob: np.ndarray, placing: np.ndarray) -> np.ndarray:
        """``PlacementAgent.forward``'s logits (M + 1,): the machines, then the no-op."""
        *_, summary = self._summarise(jobs, machines, glob)
        return _placer_head(machines, placing, summary, *_flat(self._p["encoder"]), *_flat(self._p["head"]), self._noop)

    def logits(self, agent: int, feats: dict) -> np.ndarray:
        """One step's logits (float64, 1-D) of ``agent`` (0 orderer, 1 placer) from the policy's
        feature arrays (``DualAgentPolicy.features``)."""
        _compile()
        wide = {k: np.ascontiguousarray(feats[k], dtype=np.float64) for k in ("jobs", "machines", "global", "placing")}
        if agent == 0:
            return self.orderer(wide["jobs"], wide["machines"], wide["global"])
        return self.placer(wide["jobs"], wide["machines"], wide["global"], wide["placing"])


def _flat(layers: tuple[Layer, ...]) -> tuple[np.ndarray, ...]:
    """``(wt1, b1, wt2, b2, ...)``: the arrays of ``layers`` in the kernels' argument order."""
    return tuple(a for layer in layers for a in layer)


def _distinct_rows(jobs):
    """(rows to compute, index of each row among them): the valid candidates (column 0 > 0.5) in
    row order, then one padding row standing for every invalid row when they are all the same
    bits (the observation's zero padding); every row when they are not. ``jobs``: C-contiguous
    float64."""
    n, width = jobs.shape
    bits = jobs.view(np.uint64)
    keep = np.empty(n, np.int64)
    inverse = np.empty(n, np.int64)
    count, first_pad = 0, -1
    for r in range(n):
        if jobs[r, 0] > 0.5:
            inverse[r] = count
            keep[count] = r
            count += 1
        elif first_pad < 0:
            first_pad = r
        else:
            for c in range(width):
                if bits[r, c] != bits[first_pad, c]:
                    return np.arange(n), np.arange(n)
    if first_pad >= 0:
        keep[count] = first_pad
        for r in range(n):
            if not jobs[r, 0] > 0.5:
                inverse[r] = count
        count += 1
    return keep[:count].copy(), inverse


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


def portable_logits(model, agent: int, feats: dict) -> Optional[np.ndarray]:
    """The acting agent's logits through :class:`PortableActors` (float64, 1-D), rebuilt whenever a
    weight changed in place (an optimiser step, ``load_state_dict``); None when the model is not
    mirrored (then the caller uses torch's path, which is not portable)."""
    cached = _ACTORS.get(model)
    # The parameter list is walked once per model (module traversal costs more than a small
    # decision); its version counters are read at every call.
    params = cached[2] if cached is not None else list(model.parameters())
    versions = [p._version for p in params]          # a list comprehension: the cheapest walk
    if cached is None or cached[0] != versions:
        cached = _ACTORS[model] = (versions, portable_actors(model), params)
    actors = cached[1]
    return None if actors is None else actors.logits(agent, feats)
