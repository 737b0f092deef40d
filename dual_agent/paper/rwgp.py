"""Random Walk Gaussian Process (RWGP): per-machine belief about relative speed for the placer.

The environment reports, per machine, a *measured* speed relative to the GPU type's nominal speed
(a noisy moving average of observed progress) and the age of that reading; machines never measured
read 1.0 with age -1. The placement agent needs more than the raw reading: a never-measured machine
should borrow from similar machines, and the uncertainty of every estimate should be explicit. The
RWGP gives each machine ``i`` a Gaussian posterior ``N(mean_i, std_i^2)`` of its relative speed.

Model
-----
``f ~ GP(prior_mean, K)`` over the M machines, observed as ``y_i = f_i + eps_i`` on measured
machines with ``eps_i ~ N(0, D_i)``. Readings go stale because machines fluctuate, so the noise
grows with the reading's age: ``D_i = noise_var * (1 + age_i / staleness_seconds)``. Unmeasured
machines contribute nothing.

Kernel
------
A graph over machines built from the static columns only (``gpu_type``, ``type_speed``): machines
of the same GPU type are linked with weight 1; each machine also links to at most ``neighbours``
machines of other types, the most similar by nominal speed, with weight
``exp(-|log s_i - log s_j| / speed_bandwidth)``; the graph is symmetrised. With the normalised
Laplacian ``L = I - D^-1/2 W D^-1/2`` (spectrum in [0, 2]) the kernel is the p-step random-walk
kernel ``K = (a I - L)^p`` (Smola & Kondor 2003, "Kernels and regularization on graphs", COLT; a
discrete cousin of the diffusion kernel ``exp(-beta L)`` of Kondor & Lafferty 2002, "Diffusion
kernels on graphs and other discrete structures", ICML). ``a >= 2`` keeps K positive semidefinite.
K is scaled so that its mean diagonal is ``prior_var``.

Scaling trick
-------------
Posterior algebra is done in the weight space of a factor ``Phi`` (M, r): ``f - prior_mean =
Phi w + e`` with ``w ~ N(0, I_r)`` and independent ``e_i ~ N(0, Delta_i)``, i.e. ``K ~= Phi Phi^T +
diag(Delta)``. Then ``A = I + Phi_O^T N^-1 Phi_O`` and ``b = Phi_O^T N^-1 (y - prior_mean)`` with
``N_i = D_i + Delta_i`` over the measured set O are all the state (r x r and r), a measurement change
is a rank-1 down-date plus up-date of (A, b) in O(r^2), and the posterior costs one r x r Cholesky and
O(M r^2) for the variances, only when something changed.

* ``M <= rank``: the full eigendecomposition, ``Phi = U Lambda^1/2`` and ``Delta = 0``: exactly
  the dense GP.
* ``M > rank``: the top-r eigenpairs with the eigenvalues lowered by the largest dropped one,
  ``Phi = U_r (Lambda_r - lambda_{r+1})^1/2``, and ``Delta_i = K_ii - |phi_i|^2`` so that every
  prior variance is exact. This "low rank + floor" form is exact when the dropped spectrum is flat,
  which is nearly the case here (a clique per GPU type gives a large, almost degenerate bulk: the
  machine's own, idiosyncratic variance, which ``Delta`` keeps and a plain truncation would lose).
  Near-equal eigenvalues at the cut get a weight near 0, so the arbitrary choice of eigenvectors
  inside a near-degenerate cluster barely moves the result.

With ``Delta > 0`` a measured machine's own reading also informs its independent part ``e_i``:
with ``g_i = Delta_i / (Delta_i + D_i)``, ``mean_i = prior_mean + (1 - g_i) phi_i^T A^-1 b +
g_i (y_i - prior_mean)`` and ``var_i = (1 - g_i)^2 phi_i^T A^-1 phi_i + g_i D_i`` (unmeasured:
``g_i = 0`` and ``var_i = phi_i^T A^-1 phi_i + Delta_i``). This is the exact posterior of the kernel
``Phi Phi^T + diag(Delta)``.

Staleness, cheaply
------------------
Ages move with the clock, so exact ``D_i`` would change every machine's contribution at every step.
Instead ``D_i`` is frozen at the age seen when the machine's reading last changed (new value, age
going down, or becoming measured), and all ``D_i`` are refreshed from the current ages, with a full
rebuild of (A, b), once any frozen age lags the current one by ``refresh_seconds`` or more (the lag
of an unchanged reading is exactly the simulated time elapsed since it was frozen, so no clock is
needed). Noise is thus understated by at most ``noise_var * refresh_seconds / staleness_seconds``.
The full rebuild also bounds the round-off of the incremental updates. Everything is a pure
function of the sequence of observations passed to :meth:`RandomWalkGP.update`: deterministic.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields
from functools import lru_cache

import numpy as np
import scipy.linalg

from baselines.obs import M as COL
from cluster_env.envs.observation import MACHINE_FEATURES

__all__ = ["RWGPConfig", "KernelFactor", "RandomWalkGP", "similarity_graph", "normalised_laplacian",
           "random_walk_kernel", "kernel_factor"]


@dataclass(frozen=True)
class RWGPConfig:
    """Hyper-parameters of the RWGP (see the module docstring)."""

    steps: int = 3                      # p of the p-step random-walk kernel K = (a I - L)^p
    a: float = 2.0                      # a >= 2 keeps K positive semidefinite
    speed_bandwidth: float = 0.15       # log-speed distance scale for links between GPU types
    neighbours: int = 8                 # cross-type links per machine (before symmetrisation)
    rank: int = 64                      # size of the low-rank factor; exact when M <= rank
    prior_mean: float = 1.0
    prior_var: float = 0.05             # mean prior variance (diagonal of K)
    noise_var: float = 0.01             # noise variance of a fresh measurement
    staleness_seconds: float = 3600.0   # noise grows by noise_var per this many seconds of age
    refresh_seconds: float = 600.0      # frozen ages are refreshed after this much simulated time

    def __post_init__(self) -> None:
        _integer("steps", self.steps, minimum=1)
        _number("a", self.a, minimum=2.0)
        _number("speed_bandwidth", self.speed_bandwidth, positive=True)
        _integer("neighbours", self.neighbours, minimum=0)
        _integer("rank", self.rank, minimum=1)
        _number("prior_mean", self.prior_mean)
        _number("prior_var", self.prior_var, positive=True)
        _number("noise_var", self.noise_var, positive=True)
        _number("staleness_seconds", self.staleness_seconds, positive=True, allow_inf=True)
        _number("refresh_seconds", self.refresh_seconds, positive=True, allow_inf=True)


def _integer(name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")


def _number(name: str, value: object, minimum: float | None = None, positive: bool = False,
            allow_inf: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a number, got {value!r}")
    if math.isnan(value) or (math.isinf(value) and not (allow_inf and value > 0)):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if positive and value <= 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")


# ---------------------------------------------------------------------------------- kernel
def similarity_graph(gpu_type: np.ndarray, type_speed: np.ndarray, speed_bandwidth: float,
                     neighbours: int) -> np.ndarray:
    """Symmetric weight matrix (M, M), zero diagonal, of the machine similarity graph.

    Same type: weight 1. Other types: each machine takes ``neighbours`` links, from the most
    similar type first (ties by type order); inside a type every machine has the same weight, so
    machine ``l`` of its type starts at a proportional offset in the other type. This spreads the
    links evenly instead of piling them on the lowest-numbered machines (which would turn those
    into hubs) and keeps the graph a deterministic function of the columns.
    """
    types, code = np.unique(np.asarray(gpu_type), return_inverse=True)
    members = [np.flatnonzero(code == t) for t in range(len(types))]
    speed = np.array([float(type_speed[idx[0]]) for idx in members])
    log_speed = np.log(np.maximum(speed, 1e-12))
    w = (code[:, None] == code[None, :]).astype(np.float64)
    for t, own in enumerate(members):
        others = [u for u in range(len(types)) if u != t]
        weight = {u: math.exp(-abs(log_speed[t] - log_speed[u]) / speed_bandwidth) for u in others}
        left = neighbours
        for u in sorted(others, key=lambda u: (-weight[u], u)):
            if left <= 0:
                break
            target = members[u]
            q = min(left, len(target))
            start = (np.arange(len(own)) * len(target)) // len(own)
            cols = target[(start[:, None] + np.arange(q)[None, :]) % len(target)]
            w[own[:, None], cols] = weight[u]
            left -= q
    w = np.maximum(w, w.T)
    np.fill_diagonal(w, 0.0)
    return w


def normalised_laplacian(w: np.ndarray) -> np.ndarray:
    """``L = I - D^-1/2 W D^-1/2``; an isolated vertex gets ``L_ii = 0`` (Chung's convention)."""
    deg = w.sum(axis=1)
    inv = np.where(deg > 0, 1.0 / np.sqrt(np.where(deg > 0, deg, 1.0)), 0.0)
    lap = -(inv[:, None] * w * inv[None, :])
    lap[np.diag_indices_from(lap)] += (deg > 0).astype(np.float64)
    return lap


def random_walk_kernel(lap: np.ndarray, steps: int, a: float) -> np.ndarray:
    """The unscaled p-step random-walk kernel ``(a I - L)^p`` by explicit matrix powers."""
    return np.linalg.matrix_power(a * np.eye(len(lap)) - lap, steps)


@dataclass(frozen=True)
class KernelFactor:
    """``K ~= phi phi^T + diag(residual)``, K scaled to mean diagonal ``prior_var``."""

    phi: np.ndarray        # (M, r) float64, read-only
    residual: np.ndarray   # (M,) float64 >= 0, read-only; all zero when exact
    scale: float           # factor applied to (a I - L)^p
    exact: bool            # True when phi phi^T is the whole kernel (M <= rank)


def kernel_factor(lap: np.ndarray, steps: int, a: float, prior_var: float, rank: int) -> KernelFactor:
    """Factor of the scaled random-walk kernel of the Laplacian ``lap`` (see the module docstring)."""
    m = len(lap)
    # Eigenvectors of L are those of K; eigh of the symmetrised matrix keeps them orthonormal.
    lam, vec = scipy.linalg.eigh(0.5 * (lap + lap.T), driver="evd", check_finite=False)
    kval = np.clip(a - lam, 0.0, None) ** steps            # ascending lam -> descending kval
    diag = (vec * vec) @ kval
    scale = prior_var / float(diag.mean()) if diag.mean() > 0 else 0.0
    if m <= rank:
        phi = vec * np.sqrt(kval * scale)[None, :]
        residual = np.zeros(m)
        exact = True
    else:
        floor = kval[rank]
        phi = vec[:, :rank] * np.sqrt((kval[:rank] - floor) * scale)[None, :]
        residual = np.clip(diag * scale - np.einsum("ij,ij->i", phi, phi), 0.0, None)
        exact = False
    phi = np.ascontiguousarray(phi)
    phi.flags.writeable = False
    residual.flags.writeable = False
    return KernelFactor(phi=phi, residual=residual, scale=scale, exact=exact)


@lru_cache(maxsize=8)
def _cached_factor(type_bytes: bytes, speed_bytes: bytes, config: RWGPConfig) -> KernelFactor:
    # Keyed by the static columns' bytes: repeated resets on the same cluster cost a dict lookup.
    gpu_type = np.frombuffer(type_bytes, dtype=np.float64)
    type_speed = np.frombuffer(speed_bytes, dtype=np.float64)
    w = similarity_graph(gpu_type, type_speed, config.speed_bandwidth, config.neighbours)
    return kernel_factor(normalised_laplacian(w), config.steps, config.a, config.prior_var, config.rank)


def _static_columns(machines: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    gpu_type = np.ascontiguousarray(machines[:, COL["gpu_type"]], dtype=np.float64)
    type_speed = np.ascontiguousarray(machines[:, COL["type_speed"]], dtype=np.float64)
    return gpu_type, type_speed


def _graph_config(config: RWGPConfig) -> RWGPConfig:
    # Only these fields shape the factor; the rest must not split the cache.
    return RWGPConfig(steps=config.steps, a=config.a, speed_bandwidth=config.speed_bandwidth,
                      neighbours=config.neighbours, rank=config.rank, prior_var=config.prior_var)


# ---------------------------------------------------------------------------------- the GP
class RandomWalkGP:
    """Incremental RWGP posterior over the machines of one cluster.

    Call :meth:`reset` with the first observation's ``machines`` of an episode, then
    :meth:`update` (or :meth:`features`) with every later one.
    """

    def __init__(self, config: RWGPConfig = RWGPConfig()) -> None:
        if not isinstance(config, RWGPConfig):
            raise ValueError(f"config must be an RWGPConfig, got {config!r}")
        self.config = config
        self.factor: KernelFactor | None = None

    # ------------------------------------------------------------------ episode
    def reset(self, machines: np.ndarray) -> None:
        """Build (or fetch from the cache) the kernel factor of this cluster; forget all readings."""
        machines = self._check(machines, expected_rows=None)
        gpu_type, type_speed = _static_columns(machines)
        self.factor = _cached_factor(gpu_type.tobytes(), type_speed.tobytes(), _graph_config(self.config))
        m, r = self.factor.phi.shape
        self._phi_t = np.ascontiguousarray(self.factor.phi.T)   # (r, M): rows are cheap to slice
        self._on = np.zeros(m, dtype=bool)          # contributes to (A, b)
        self._y = np.zeros(m)                       # reading - prior_mean used in (A, b)
        self._noise = np.full(m, np.inf)            # D_i frozen at the last change
        self._frozen_age = np.zeros(m)              # age (s) at which D_i was frozen
        self._last_value = np.full(m, np.nan, dtype=np.float32)
        self._last_age = np.full(m, -1.0)
        self._last_age_log = np.full(m, np.nan)     # the raw column of the last update (NaN: none)
        self._a = np.eye(r)
        self._b = np.zeros(r)
        self._dirty = True
        self._mean = self._std = None
        self._seen: "bytes | None" = None           # the last update's reading columns (None: none)
        self._stacked: "np.ndarray | None" = None   # features' [mean, std] of the current posterior

    def update(self, machines: np.ndarray) -> None:
        """Take the measured speeds and ages of ``machines``; update (A, b) for what changed."""
        if self.factor is None:
            raise RuntimeError("RandomWalkGP.update called before reset")
        machines = self._check(machines, expected_rows=len(self._on))
        readings = machines[:, _READINGS]
        key = readings.tobytes()
        if key == self._seen:
            # The last call's readings and ages bit for bit (none NaN): the check below would
            # return at once.
            return
        self._take(readings)
        self._seen = None if np.isnan(readings).any() else key

    def _take(self, readings: np.ndarray) -> None:
        """The update from the (M, 2) speed and age columns."""
        value = readings[:, 0].astype(np.float32)
        age_log = readings[:, 1].astype(np.float64)
        measured = age_log >= 0.0
        age = np.where(measured, np.expm1(np.where(measured, age_log, 0.0)), -1.0)
        # A new reading: (un)measured status flips, the value moves, or the age goes back; a
        # refresh when a reading that did not change lags its frozen age by refresh_seconds.
        same, changed, refresh = _scan_readings(measured, self._on, value, self._last_value, age, self._last_age,
                                                self._frozen_age, float(self.config.refresh_seconds), age_log,
                                                self._last_age_log)
        if same:
            # The same readings and ages as the last call (the clock stood still): nothing changed
            # and no frozen age lags more than it did then, so the update below would do nothing.
            return
        self._last_age_log = age_log
        self._last_value, self._last_age = value, age        # fresh arrays, never written
        if refresh:
            self._freeze(np.flatnonzero(measured | self._on), measured, value, age)
            self._rebuild()
            return
        idx = changed.nonzero()[0]                  # np.flatnonzero of a 1-D array
        if idx.size == 0:
            return
        old_w, old_y = self._weights(idx), self._y[idx].copy()
        self._freeze(idx, measured, value, age)
        # Incremental cost ~ 2 k r^2 against n_on r^2 for a rebuild: choose by count.
        if 2 * idx.size >= max(1, int(self._on.sum())):
            self._rebuild()
        else:
            self._apply(idx, old_w, old_y)
        self._dirty = True

    def posterior(self) -> tuple[np.ndarray, np.ndarray]:
        """Posterior (mean (M,), std (M,)) of every machine's relative speed, float32."""
        if self.factor is None:
            raise RuntimeError("RandomWalkGP.posterior called before reset")
        if self._dirty:
            self._mean, self._std = self._solve()
            self._dirty = False
            self._stacked = None
        return self._mean.copy(), self._std.copy()

    def features(self, machines: np.ndarray) -> np.ndarray:
        """``update(machines)``, then (M, 2) float32 ``[mean, std]`` for the placement network (a
        new array)."""
        self.update(machines)
        if self._dirty or self._stacked is None:
            self.posterior()
            self._stacked = np.stack([self._mean, self._std], axis=1)   # kept until the posterior moves
        return self._stacked.copy()

    # ------------------------------------------------------------------ internals
    def _check(self, machines: np.ndarray, expected_rows: int | None) -> np.ndarray:
        machines = np.asarray(machines)
        if machines.ndim != 2 or machines.shape[1] != len(MACHINE_FEATURES) or machines.shape[0] == 0:
            raise ValueError(f"machines must have shape (M, {len(MACHINE_FEATURES)}) with M >= 1, "
                             f"got {machines.shape}")
        if expected_rows is not None and machines.shape[0] != expected_rows:
            raise ValueError(f"machines has {machines.shape[0]} rows but the GP was reset with {expected_rows}")
        return machines

    def _weights(self, idx: np.ndarray) -> np.ndarray:
        """Precision ``1 / (D_i + Delta_i)`` of the readings in (A, b); 0 when not contributing."""
        out = np.zeros(idx.size)
        on = self._on[idx]
        out[on] = 1.0 / (self._noise[idx][on] + self.factor.residual[idx][on])
        return out

    def _freeze(self, idx: np.ndarray, measured: np.ndarray, value: np.ndarray, age: np.ndarray) -> None:
        """Record the readings of ``idx`` with their noise frozen at the current age."""
        cfg = self.config
        on = measured[idx]
        self._on[idx] = on
        self._y[idx] = np.where(on, value[idx].astype(np.float64) - cfg.prior_mean, 0.0)
        self._frozen_age[idx] = np.where(on, age[idx], 0.0)
        self._noise[idx] = np.where(on, cfg.noise_var * (1.0 + self._frozen_age[idx] / cfg.staleness_seconds),
                                    np.inf)

    def _apply(self, idx: np.ndarray, old_w: np.ndarray, old_y: np.ndarray) -> None:
        """Down-date the old and up-date the new contributions of ``idx`` in one product."""
        new_w = self._weights(idx)
        p = self._phi_t[:, idx]                                 # (r, k)
        self._a += (p * (new_w - old_w)) @ p.T
        self._b += p @ (new_w * self._y[idx] - old_w * old_y)

    def _rebuild(self) -> None:
        """(A, b) from scratch over the contributing machines."""
        idx = self._on.nonzero()[0]
        w = self._weights(idx)
        p = self._phi_t[:, idx]
        self._a = np.eye(len(self._b)) + (p * w) @ p.T
        self._b = p @ (w * self._y[idx])
        self._dirty = True

    def _solve(self) -> tuple[np.ndarray, np.ndarray]:
        solved = _lapack_solve(self._a, self._b, self._phi_t)
        if solved is None:
            solved = _scipy_solve(self._a, self._b, self._phi_t)
        return self._posterior(*solved)

    def _posterior(self, mean_w: np.ndarray, half: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        cfg, res = self.config, self.factor.residual
        shared = self._phi_t.T @ mean_w
        shared_var = np.einsum("ij,ij->j", half, half)
        # Share of a reading that goes to the machine's own, independent part (0 when exact).
        gain = np.zeros_like(res)
        on = self._on
        noise = self._noise[on]
        gain[on] = res[on] / (res[on] + noise)
        mean = cfg.prior_mean + (1.0 - gain) * shared + gain * self._y
        var = (1.0 - gain) ** 2 * shared_var + np.where(on, 0.0, res)
        var[on] += gain[on] * noise
        return mean.astype(np.float32), np.sqrt(np.clip(var, 0.0, None)).astype(np.float32)


def _scan_readings_py(measured, on, value, last_value, age, last_age, frozen_age, refresh_seconds, age_log,
                      last_age_log):
    """(same, changed, refresh): whether the speeds and the raw ages equal the last call's
    (``np.array_equal`` of each: NaN never equal), the machines with a new reading (the
    (un)measured status flips, or a measured machine's value moves or its age goes back), and
    whether an unchanged measured reading lags its frozen age by ``refresh_seconds`` or more; the
    numpy expressions ``(measured != on) | (measured & ((value != last_value) | (age < last_age)))``
    and ``max(age[stale] - frozen_age[stale]) >= refresh_seconds`` (a NaN difference makes the
    maximum NaN: no refresh) in one loop."""
    n = measured.shape[0]
    changed = np.empty(n, np.bool_)
    top, stale, nan, same = -np.inf, False, False, True
    for i in range(n):
        if not (value[i] == last_value[i] and age_log[i] == last_age_log[i]):
            same = False
        c = (measured[i] != on[i]) or (measured[i] and (value[i] != last_value[i] or age[i] < last_age[i]))
        changed[i] = c
        if measured[i] and not c:
            d = age[i] - frozen_age[i]
            stale = True
            if d != d:
                nan = True
            elif d > top:
                top = d
    return same, changed, stale and not nan and top >= refresh_seconds


def _scan_readings(*args):
    """:func:`_scan_readings_py`, compiled by numba on first use (the same comparisons)."""
    kernel = _SCAN.get("kernel")
    if kernel is None:
        import numba

        from cluster_env.core import kernels

        kernel = numba.njit(nogil=True)(_scan_readings_py)
        kernels._attach_cache(kernel)            # numba's disk cache, guarded as the simulator's
        _SCAN["kernel"] = kernel
    return kernel(*args)


_SCAN: dict = {}
_READINGS = [COL["measured_speed"], COL["measured_age_log"]]   # the columns update reads


def _scipy_solve(a: np.ndarray, b: np.ndarray, phi_t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``A^-1 b`` and ``L^-1 phi_t`` (``A = L L^T``) through scipy's wrappers (they raise on an
    A that is not positive definite)."""
    chol = scipy.linalg.cho_factor(a, lower=True, check_finite=False)
    mean_w = scipy.linalg.cho_solve(chol, b, check_finite=False)
    half = scipy.linalg.solve_triangular(chol[0], phi_t, lower=True, check_finite=False)
    return mean_w, half


@lru_cache(maxsize=1)
def _lapack_funcs():
    return scipy.linalg.get_lapack_funcs(("potrf", "potrs", "trtrs"), (np.zeros((1, 1)),))


def _lapack_solve(a: np.ndarray, b: np.ndarray, phi_t: np.ndarray) -> "tuple[np.ndarray, np.ndarray] | None":
    """:func:`_scipy_solve` by the same LAPACK calls with the same arguments (the wrappers' checks
    and batching cost more than the 64 x 64 algebra): the same bits. None when a call reports a
    problem or the arrays are not what the wrappers would pass through (then the wrappers run)."""
    if a.dtype != np.float64 or b.dtype != np.float64 or phi_t.dtype != np.float64:
        return None
    potrf, potrs, trtrs = _lapack_funcs()
    c, info = potrf(a, lower=True, overwrite_a=False, clean=False)
    if info != 0 or not c.flags.f_contiguous:
        return None
    mean_w, info = potrs(c, b, lower=True, overwrite_b=False)
    if info != 0:
        return None
    half, info = trtrs(c, phi_t, overwrite_b=False, lower=True, trans=0, unitdiag=False)
    if info != 0:
        return None
    return mean_w, half
