"""Unbalanced machines, performance fluctuation and stragglers.

A machine's speed factor is ``static * dynamic``:

* ``static``: drawn once per machine (:func:`draw_static_factors`), log-normal with mean 1;
* ``dynamic`` (:class:`FluctuationProcess`): ``exp(x - sigma^2 / 2) * (straggler_slowdown if
  straggling else 1)``, where ``x`` is a stationary mean-reverting Ornstein-Uhlenbeck process
  (stationary law N(0, sigma^2), so the OU term has mean 1) and *straggling* is a two-state Markov
  chain per machine (onsets at ``straggler_rate`` per second, episodes lasting
  ``straggler_mean_duration`` seconds on average, both exponential).

Both parts are advanced with their exact transition laws for any time step, so the simulator can
call :meth:`FluctuationProcess.advance` every ``interval`` seconds while jobs run and once with a
large step after an idle period, and obtain the same distribution either way.

The defaults (:data:`DEFAULT_FLUCTUATION`) are calibrated to the Alibaba PAI mini-batch-time data
(AntMan, OSDI'20); :mod:`cluster_env.world.calibration` computes the target statistics from the
packaged data and the same statistics on simulated workers.  See :data:`DEFAULT_FLUCTUATION`.

:data:`DEDICATED_FLUCTUATION` (opt-in, ``WorldConfig(fluctuation_params=DEDICATED_FLUCTUATION)``)
is the same process calibrated instead to the job-level slowdown of jobs of 512-1,024 GPUs on
whole 8-GPU machines (GREYHOUND, USENIX ATC'25); see :func:`cluster_env.world.calibration.
large_job_targets` and ``docs/world_model.md`` section 3, "Stragglers at width".
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from cluster_env.core import kernels as _kernels

__all__ = [
    "FluctuationParams",
    "DEFAULT_FLUCTUATION",
    "DEDICATED_FLUCTUATION",
    "NO_FLUCTUATION",
    "SECONDS_PER_ITERATION",
    "STATIC_FACTOR_BOUNDS",
    "draw_static_factors",
    "FluctuationProcess",
]

#: ASSUMPTION mapping the PAI data (which has iterations, no absolute time) to seconds: one
#: iteration (one column of ``coefficient_variation.csv``, one unit of the ``time`` column of
#: ``job_*_norm.csv``) lasts 1 s.  Gavel's measured 1-GPU throughputs are 0.3 .. 110 steps/s
#: (median about 8 steps/s, 0.13 s a step) on a whole GPU; PAI's workers in the four example
#: jobs hold 20-50 % of a GPU and their mini-batches carry larger models, so a mini-batch of the
#: order of a second is the typical case.  Every time constant below scales with this number.
SECONDS_PER_ITERATION = 1.0

#: Static factors are clipped to this range (a machine at most 2x slower or 1.5x faster).
STATIC_FACTOR_BOUNDS = (0.5, 1.5)


@dataclass(frozen=True)
class FluctuationParams:
    """Parameters of the static factors, the fluctuation process and the stragglers.

    Attributes:
        static_sigma: log-normal sigma of a machine's static speed factor (0 = equal machines).
        sigma: stationary standard deviation of the log-speed OU process (0 = no fluctuation).
        theta: mean-reversion rate of the OU process, 1/s (its correlation time is 1/theta).
        interval: seconds between fluctuation updates while jobs run.
        straggler_rate: straggler onsets per machine per second, while not straggling (0 = none).
        straggler_mean_duration: mean length of a straggler episode, s.
        straggler_slowdown: speed multiplier while straggling, in (0, 1].
    """

    static_sigma: float
    sigma: float
    theta: float
    interval: float
    straggler_rate: float
    straggler_mean_duration: float
    straggler_slowdown: float

    def __post_init__(self) -> None:
        values = (self.static_sigma, self.sigma, self.theta, self.interval, self.straggler_rate,
                  self.straggler_mean_duration, self.straggler_slowdown)
        if not all(math.isfinite(float(v)) for v in values):
            raise ValueError(f"FluctuationParams: every value must be finite (got {self})")
        checks = [
            (self.static_sigma >= 0, "static_sigma must be >= 0"),
            (self.sigma >= 0, "sigma must be >= 0"),
            (self.theta > 0, "theta must be > 0"),
            (self.interval > 0, "interval must be > 0"),
            (self.straggler_rate >= 0, "straggler_rate must be >= 0"),
            (self.straggler_mean_duration > 0, "straggler_mean_duration must be > 0"),
            (0 < self.straggler_slowdown <= 1, "straggler_slowdown must be in (0, 1]"),
        ]
        for ok, msg in checks:
            if not ok:
                raise ValueError(f"FluctuationParams: {msg} (got {self})")

    @property
    def straggling_fraction(self) -> float:
        """Stationary probability that a machine is straggling: rate*D / (1 + rate*D)."""
        rd = self.straggler_rate * self.straggler_mean_duration
        return rd / (1.0 + rd)


#: Calibrated defaults.  Data: PAI ``coefficient_variation.csv`` (100 jobs x 10 workers, CoV of the
#: mini-batch time across workers per iteration, first iteration dropped as warm-up) and
#: ``job_{1,2,3}_norm.csv`` (per-worker times); time mapping :data:`SECONDS_PER_ITERATION`.
#: Targets from :func:`cluster_env.world.calibration.pai_targets`, simulated values from
#: :func:`~cluster_env.world.calibration.simulate_worker_statistics` (mean over 10 seeds):
#:
#: * ``static_sigma`` = 0.072, ``sigma`` = 0.048: total log-spread 0.087, fitted so that the
#:   median CoV matches (PAI 0.0935, simulated 0.093), split by the static share of the variance
#:   in jobs 1-3 (0.69; std of per-worker mean log-time 0.062 vs within-worker 0.041).
#: * ``theta`` = 1/80 per s: correlation time of the per-worker log-time in jobs 1-3, 80
#:   iterations (exponential fit of the autocorrelation between lags of 10 and 100 iterations).
#: * ``straggler_slowdown`` = 0.2: one worker 5x slower than nine equal ones gives CoV 0.904; the
#:   median CoV among iterations with CoV > 0.5 is 0.908 (simulated 0.907).
#: * ``straggler_rate`` = 4e-5 per s, ``straggler_mean_duration`` = 780 s: stationary straggling
#:   fraction 0.030, set by P(CoV > 0.5) = 1 - (1 - p)^10 (PAI 0.264, simulated 0.265); the
#:   duration by the fraction of jobs with no iteration of CoV > 0.5 in their recorded window
#:   (PAI 0.54, simulated 0.55).
#: * ``interval`` = 300 s: the simulator's update period while jobs wait. It resolves straggler
#:   episodes (780 s on average); the 80-s OU noise is sampled, not averaged, over a period (the
#:   transition is exact for any step). A 60-s period resolves the OU too but makes the clock stop
#:   five times as often; pass ``interval=60`` for that fidelity.
#:
#: Not matched (one slowdown value cannot give the data's heavy tail): mean CoV, PAI 0.374,
#: simulated 0.30.  Full table: ``docs/world_model.md``.
DEFAULT_FLUCTUATION = FluctuationParams(
    static_sigma=0.072,
    sigma=0.048,
    theta=1.0 / 80.0,
    interval=300.0,
    straggler_rate=4.0e-5,
    straggler_mean_duration=780.0,
    straggler_slowdown=0.2,
)

#: Stragglers at width, for clusters of dedicated whole machines (opt-in; every shipped scenario
#: keeps :data:`DEFAULT_FLUCTUATION`).  Turn it on with
#: ``WorldConfig(fluctuation_params=DEDICATED_FLUCTUATION)``.  The process is the same; only the
#: parameters differ.
#:
#: Why not the PAI defaults: PAI's workers hold 20-50 % of a shared GPU, and one machine in 33 is
#: straggling at any time (stationary fraction 0.030).  As a job runs at its slowest machine's
#: pace, a 64-machine job then has a straggler 86 % of the time and takes 3.2x its nominal time in
#: the long run, where the published large-job figure is 1.2x.  Source: GREYHOUND (Wu et al.,
#: "GREYHOUND: Hunting Fail-Slows in Hybrid-Parallel Training at Scale", USENIX ATC'25, section 3,
#: Table 1, Figure 1; arXiv 2410.12588 "FALCON"): on a 10,000-GPU A100/H800 cluster (RoCE, up to
#: 4 x 400 Gb/s a machine), 16 of 27 jobs of 512-1,024 GPUs (64-128 whole 8-GPU machines, no
#: colocation) met fail-slows, which delayed those 16 by 34.59 % on average (20 % of them by more
#: than 50 %; 16/27 x 34.59 % = 20.5 % over all 27), mean fail-slow duration 72 min.  Targets:
#: :func:`cluster_env.world.calibration.large_job_targets`; statistics of the model:
#: :func:`~cluster_env.world.calibration.simulate_job_slowdown` (mean over seeds 0-9, 400 jobs of
#: 96 machines, 5 h each, in brackets):
#:
#: * ``straggler_slowdown`` = 0.2: the large-job fail-slows GREYHOUND plots cut throughput by
#:   80-85 % (a 1,024-GPU job, Figure 6; 90 % when two compound); the same severity as PAI's.
#: * ``straggler_mean_duration`` = 4,320 s: the 72-min mean fail-slow duration of the large jobs.
#: * ``straggler_rate`` = 4.5e-7 per machine per s (one onset per machine per ~26 days; stationary
#:   straggling fraction 0.0019): fitted, with the job length below, to the mean delay over all
#:   jobs, 0.205 (0.197), and the share of jobs that meet a fail-slow, 0.59 (0.61).  Checks, not
#:   fitted: mean delay of those jobs 0.346 (0.31); share of them delayed > 50 %: 0.20 (0.19).
#: * Job length (ASSUMPTION, :data:`~cluster_env.world.calibration.ASSUMED_LARGE_JOB_HOURS`):
#:   5 h.  GREYHOUND gives no job lengths; its 4-node probes ran ~5 h.  Longer jobs meet more
#:   fail-slows but are delayed less each (13-h jobs: 88 % met one, mean delay 0.18).
#: * Width: 1 machine, 80-min jobs: mean delay 0.28 % (GREYHOUND's single-node probes 0.18 %).
#:   Not matched: GREYHOUND's 4-node probes (2 GPUs on each of 4 shared machines, sharing links
#:   with other tenants) were delayed 6.2 % on average; the model gives 1.4 % on 4 dedicated
#:   machines.  Per-machine episodes are independent, so the delay grows about linearly with width
#:   while it is small (0.135 at 64 machines, 0.27 at 128, 5-h jobs).
#: * ``sigma`` = 0.006 (ASSUMPTION): GREYHOUND measures fail-slows against a job's normal
#:   throughput, which a trace's measured runtime already includes, so the fast per-machine
#:   jitter is kept small: the slowest of 96 machines costs ~1.5 % (of 2,048, ~2 %, the order of
#:   the 1-2 % diurnal throughput variation Meta reports for Llama 3 405B on 16k H100s).
#: * ``static_sigma``, ``theta``, ``interval``: as :data:`DEFAULT_FLUCTUATION` (PAI).  Same-SKU GPUs
#:   on dedicated HPC clusters differ by a similar amount (Sinha et al., SC'22: 8 % average
#:   variation, up to 22 %, outliers 1.5x slower than the median); an assumption for 8-GPU
#:   machines; ``WorldConfig(static_factors=False)`` switches it off.
DEDICATED_FLUCTUATION = replace(
    DEFAULT_FLUCTUATION,
    sigma=0.006,
    straggler_rate=4.5e-7,
    straggler_mean_duration=4320.0,
)

#: Everything off: equal machines, constant speed (handy for ablations and tests).
NO_FLUCTUATION = FluctuationParams(static_sigma=0.0, sigma=0.0, theta=1.0, interval=60.0,
                                   straggler_rate=0.0, straggler_mean_duration=1.0,
                                   straggler_slowdown=1.0)


def draw_static_factors(n: int, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """Static speed factor of ``n`` machines: log-normal with mean 1, clipped to [0.5, 1.5].

    ``exp(sigma * z - sigma^2 / 2)`` with ``z ~ N(0, 1)`` from ``rng``; ``sigma == 0`` gives all
    ones (and draws nothing).
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if sigma < 0:
        raise ValueError(f"sigma must be >= 0, got {sigma}")
    if sigma == 0:
        return np.ones(n, dtype=np.float64)
    z = rng.standard_normal(n)
    f = np.exp(sigma * z - 0.5 * sigma * sigma)
    return np.clip(f, STATIC_FACTOR_BOUNDS[0], STATIC_FACTOR_BOUNDS[1])


class FluctuationProcess:
    """Dynamic speed factor of ``n_machines`` machines (OU term times straggler slowdown).

    Starts from the stationary law (OU term ~ its stationary distribution, each machine straggling
    with the stationary probability), so the mean factor is near 1 at every time.

    The straggler chain is simulated exactly in continuous time: each machine keeps the time of
    its next switch (onset after an Exp(``straggler_rate``) wait, end after an
    Exp(1 / ``straggler_mean_duration``) episode); when a step passes a machine's switch time, the
    rest of the step follows the chain's closed-form transition law (see :meth:`_switch`).  This is
    the exact transition of the two-state chain for any ``dt`` (however many switches a long idle
    step contains); for a short step it reduces to "onset with probability 1 - exp(-rate dt), end
    with probability 1 - exp(-dt / mean)".  Random numbers for the chain are drawn only at
    switches, so a step costs one vector of normal draws and a few vector operations.

    Attributes:
        factors: (n,) float64, the current dynamic factor of each machine (updated in place).
        straggling: (n,) bool, which machines are in a straggler episode.
        log_speed: (n,) float64, the OU state x (the OU term is ``exp(x - sigma^2 / 2)``).
        time: seconds advanced since construction.
    """

    __slots__ = ("params", "rng", "n", "factors", "straggling", "log_speed", "time", "_z",
                 "_log_mult", "_next_switch", "_next_min", "_cache_dt", "_decay", "_noise",
                 "_shift", "_log_slow", "_on_mean", "_off_mean", "_k", "_due", "_since")

    def __init__(self, n_machines: int, params: FluctuationParams, rng: np.random.Generator, kernels=None):
        if n_machines < 0:
            raise ValueError(f"n_machines must be >= 0, got {n_machines}")
        self.params, self.rng, self.n = params, rng, int(n_machines)
        n = self.n
        self.time = 0.0
        self._z = np.empty(n)
        # The per-step arithmetic (cluster_env.core.kernels: compiled or numpy, the same bits).
        self._k = kernels if kernels is not None else _kernels.active()
        self._due = np.zeros(n, dtype=np.int64)
        self._since = np.zeros(n)
        self._shift = 0.5 * params.sigma * params.sigma
        self._log_slow = math.log(params.straggler_slowdown)
        self._on_mean = float(params.straggler_mean_duration)
        self._off_mean = 1.0 / params.straggler_rate if params.straggler_rate > 0 else math.inf
        self._cache_dt = None
        self._decay = self._noise = 0.0
        if params.sigma > 0:
            self.log_speed = params.sigma * rng.standard_normal(n)
        else:
            self.log_speed = np.zeros(n)
        pi = params.straggling_fraction
        if pi > 0:
            self.straggling = rng.random(n) < pi
            self._next_switch = self._waits(self.straggling, rng.standard_exponential(n))
        else:
            self.straggling = np.zeros(n, dtype=bool)
            self._next_switch = np.full(n, math.inf)
        self._next_min = float(self._next_switch.min()) if n else math.inf
        # log of (straggler multiplier) minus sigma^2/2, so that factors = exp(x + _log_mult).
        self._log_mult = np.where(self.straggling, self._log_slow, 0.0) - self._shift
        self.factors = np.empty(n)
        np.add(self.log_speed, self._log_mult, out=self.factors)
        np.exp(self.factors, out=self.factors)

    def _waits(self, on: np.ndarray, e: np.ndarray) -> np.ndarray:
        """Time to the next switch given the state ``on`` and standard exponential draws ``e``:
        episode end after ``mean_duration * e``; onset after ``e / rate`` (never if rate is 0)."""
        if self.params.straggler_rate > 0:
            return np.where(on, self._on_mean * e, self._off_mean * e)
        return np.where(on, self._on_mean * e, math.inf)

    def set_state(self, log_speed=None, straggling=None) -> np.ndarray:
        """Set the state (OU values ``x`` and/or which machines straggle); return ``factors``.

        Pending straggler switches are redrawn from ``rng`` (exact: the waits are memoryless).
        Meant for tests and for scenarios that start from a chosen state.
        """
        if log_speed is not None:
            x = np.asarray(log_speed, dtype=np.float64)
            self.log_speed[:] = np.broadcast_to(x, (self.n,))
        if straggling is not None:
            on = np.broadcast_to(np.asarray(straggling, dtype=bool), (self.n,)).copy()
            self.straggling[:] = on
            if self.n:
                self._next_switch[:] = self.time + self._waits(
                    on, self.rng.standard_exponential(self.n))
                self._next_min = float(self._next_switch.min())
            self._log_mult[:] = np.where(on, self._log_slow, 0.0) - self._shift
        np.add(self.log_speed, self._log_mult, out=self.factors)
        np.exp(self.factors, out=self.factors)
        return self.factors

    def draws_normals(self, dt: float) -> bool:
        """Whether ``advance(dt)`` draws ``n`` standard normals (the OU step), and nothing before."""
        return self.params.sigma > 0 and self.n > 0 and dt != 0

    def _switch(self, count: "int | None" = None) -> None:
        """Bring every machine whose next switch is due by ``self.time`` to ``self.time``.

        At its switch time ``s`` the machine enters the other state; over the remaining
        ``r = time - s`` the two-state chain moves with its closed-form transition law
        (``P(on | on) = pi + (1 - pi) e^{-(lam + mu) r}``, ``P(on | off) = pi (1 - e^{-(lam + mu) r})``
        with ``pi = lam / (lam + mu)``), and the wait for the next switch starts afresh (it is
        memoryless).  Exact, and one pass however many switches a long step contains.
        """
        nxt, strag, log_mult = self._next_switch, self.straggling, self._log_mult
        lam, mu = self.params.straggler_rate, 1.0 / self._on_mean
        tot = lam + mu
        pi = lam / tot
        if count is None:
            count = self._k.switch_due(nxt, self.time, self._due, self._since)
        if count == 1:                             # the common case: scalar work
            i = int(self._due[0])
            entered = not strag[i]
            ex = math.exp(-tot * float(self._since[0]))
            p_on = pi + (1.0 - pi) * ex if entered else pi * (1.0 - ex)
            on = bool(self.rng.random() < p_on)
            strag[i] = on
            log_mult[i] = (self._log_slow if on else 0.0) - self._shift
            e = self.rng.standard_exponential()
            if on:
                nxt[i] = self.time + self._on_mean * e
            elif lam > 0:
                nxt[i] = self.time + self._off_mean * e
            else:
                nxt[i] = math.inf
            self._next_min = float(np.minimum.reduce(nxt))
        elif count:
            ex = np.exp(-tot * self._since[:count])
            u = self.rng.random(count)
            e = self.rng.standard_exponential(count)
            self._next_min = self._k.switch_apply(
                count, self._due, ex, u, e, strag, log_mult, nxt, pi, self._log_slow, self._shift, self.time,
                self._on_mean, self._off_mean if lam > 0 else math.inf)
        else:
            self._next_min = float(np.minimum.reduce(nxt))

    def advance(self, dt: float, normals: "np.ndarray | None" = None) -> np.ndarray:
        """Move the process ``dt >= 0`` seconds forward (exact transition); return ``factors``.

        OU: ``x' = x e^{-theta dt} + sigma sqrt(1 - e^{-2 theta dt}) N(0, 1)``; straggling: every
        switch of the continuous-time chain inside the step (see the class docstring).  Random
        numbers come only from the generator given at construction. ``normals``: the OU step's
        ``n`` standard normals, already drawn from that generator by a caller that drew them
        together with its own (one call; the same stream), when :meth:`draws_normals` says so.
        """
        dt = float(dt)
        if not (dt >= 0 and math.isfinite(dt)):
            raise ValueError(f"dt must be finite and >= 0, got {dt}")
        if dt == 0 or self.n == 0:
            return self.factors
        self.time += dt
        if self.params.sigma > 0:
            if dt != self._cache_dt:
                theta = self.params.theta
                self._decay = math.exp(-theta * dt)
                self._noise = self.params.sigma * math.sqrt(-math.expm1(-2.0 * theta * dt))
                self._cache_dt = dt
            if normals is None:
                z = self._z
                self.rng.standard_normal(out=z)
            elif len(normals) == self.n:
                z = normals
            else:
                raise ValueError(f"normals must hold {self.n} draws, got {len(normals)}")
            switching = self.time >= self._next_min
            # x = x e^{-theta dt} + noise z; with no switch, also factors = x + log multiplier;
            # with one, the machines whose switch is due (one call).
            count = self._k.ou_switch_due(self.log_speed, z, self._noise, self._decay, self._log_mult,
                                          self._z[:0] if switching else self.factors, switching,
                                          self._next_switch, self.time, self._due, self._since)
            if switching:
                self._switch(count)
                np.add(self.log_speed, self._log_mult, out=self.factors)
        else:
            if self.time >= self._next_min:
                self._switch()
            np.add(self.log_speed, self._log_mult, out=self.factors)
        np.exp(self.factors, out=self.factors)
        return self.factors
