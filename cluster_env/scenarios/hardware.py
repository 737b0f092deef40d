"""The world a user's cluster brings with it: spread model and straggler preset by GPU generation.

A named scenario fixes its world (``Scenario.world``) together with its cluster. A cluster the user
gives (a cluster CSV, ``custom_scenario(base, cluster_csv=...)`` / ``--cluster-csv``, or a
:class:`~cluster_env.core.instance.Cluster` object, ``custom_scenario(base, cluster=...)``) is put
on a base scenario for its workload and protocol, but its world follows its own hardware, whatever
the base: a 16 x 8 A100 cluster on ``philly-v1`` is priced as ``modern-v1`` prices its A100 nodes,
not with the 2017 world of Philly's P100/P40 servers. Settings the user passes
(``parallel_env(..., spread_model=...)``, ``--env spread_model=...``) are applied afterwards and win.

**Generation of a GPU type** (:data:`GPU_GENERATIONS`, every catalog type listed; a test keeps it
complete): ``"modern"`` for Ampere and newer data-centre GPUs (A10, A100, A800, H800, H100, and the
undisclosed codes the catalog takes as one of them: G3, GPU-series-1, GPU-series-2); ``"legacy"``
for Kepler, Pascal, Volta and Turing (K80, P100, P40, V100 and its Alibaba names, T4, and G2 and
MISC, taken as V100-class).

**Generation of a cluster**: ``"modern"`` when every GPU is modern, ``"legacy"`` when none is,
``"mixed"`` otherwise.

**The world of each generation** (:func:`hardware_world`):

===========  ===============  =====================  ========================================
generation   spread model     stragglers             why
===========  ===============  =====================  ========================================
modern       ``"allreduce"``  DEDICATED_FLUCTUATION  ``modern-v1``'s world: the all-reduce
                                                     model prices the DGX-class NICs and NVLink
                                                     of these types (interconnect defaults per
                                                     type, ``cluster_env.world.interconnect``);
                                                     GREYHOUND's preset was fitted on A100/H800
                                                     clusters of whole 8-GPU machines
legacy       ``"gavel"``      DEFAULT_FLUCTUATION    the Philly/Gavel world: Gavel measured its
                                                     spread ratio on exactly these GPUs' servers;
                                                     PAI's stragglers come from shared machines
                                                     of that generation
mixed        ``"allreduce"``  by the majority of     the all-reduce model prices each machine by
                              GPUs (a tie: PAI's)    its own type's interconnect (on the legacy
                                                     servers it gives Gavel's measured ratio at
                                                     Gavel's widths), so one model is right on
                                                     both parts; the straggler preset is one per
                                                     cluster, so the generation holding most GPUs
                                                     sets it (a tie takes PAI's, the preset of
                                                     shared machines)
===========  ===============  =====================  ========================================

**A cluster of the base's own generation keeps the base's spread model.** The table gives the
world of a generation where the base scenario says nothing about it; where the base's cluster is
of the same generation, the base chose a spread model for exactly this hardware and it stays: a
K80/V100 cluster on ``philly-hetero-v3`` (Gavel's servers priced with ``"allreduce"``) is priced
with ``"allreduce"`` too, on ``philly-v1`` (Philly's P100/P40, ``"gavel"``) with ``"gavel"``, and
on ``modern-v1`` (another generation) with the legacy generation's ``"gavel"``. Otherwise the same
hardware would be priced two ways on one base: an 8-GPU LM job on such a CSV cluster (eight
1-GPU holes on V100 machines, two free K80 machines) ran 3.30x its duration on the K80s under
``"gavel"`` (the V100 holes cost 3.47x there) where ``philly-hetero-v3``'s own world charges the
V100 holes nothing.

Every generation takes world model v3's measurements (:data:`MEASURED_WORLD`, as ``modern-v2``
does): measured speeds where a profile covers the GPU type, Gavel's table capped, communication
fitted on measured multi-node runs; a type no source measures keeps the spec-sheet rule, and the
run's world line names it.

**The spread guard follows the spread model the world uses.** Every user cluster takes
``SchedulingConfig(spread_floor=True)`` (:data:`HARDWARE_SCHEDULING`, put on the scenario by
``custom_scenario``, so the parallel env, the compiled engine, ``cluster-bench run --cluster-csv``
and ``custom_scenario(cluster=...)`` share it). The floor is reported only where the env's final
world prices spreading with ``"allreduce"`` (the simulator's ``spread_floor`` is NaN under
``"gavel"``), so the guard of ``fastest`` and the clairvoyant placer reasons with the model the
world actually uses: the all-reduce model's own floor under ``"allreduce"`` (the generation's, or a
user's ``spread_model="allreduce"``), Gavel's bound under ``"gavel"`` (the legacy generation's, or
a user's ``spread_model="gavel"``). A user's explicit ``spread_floor=`` wins. Deciding the floor
from the generation's spread model alone would leave Gavel's bound on a legacy cluster that the
user moves to ``"allreduce"``: an 8-GPU LM job then took two free K80 machines (3.30x its
duration) over eight 1-GPU holes on V100 machines that the all-reduce model charges nothing.

Every generation takes ``spread_reference="fewest_machines"``: the v0 rule (``"one_machine"``)
double-counts the penalty of a job wider than a machine and is kept only so that the named v0
scenarios stay bit for bit. ``"allreduce"`` also needs it, since its reference placement is the
fewest machines. Named scenarios never pass through this module: their worlds, digests and scores
are unchanged.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable, Mapping, Optional

from cluster_env.core.config import SchedulingConfig, WorldConfig
from cluster_env.world.fluctuation import DEDICATED_FLUCTUATION, DEFAULT_FLUCTUATION, FluctuationParams
from cluster_env.world.gpu_catalog import canonical_gpu_name

MODERN, LEGACY, MIXED = "modern", "legacy", "mixed"

#: Generation of each GPU type (canonical names; some not in the catalog yet, such as H100, are
#: listed so that adding them to the catalog keeps their generation).
GPU_GENERATIONS: Mapping[str, str] = {
    "K80": LEGACY, "P100": LEGACY, "P40": LEGACY, "V100": LEGACY, "V100M16": LEGACY,
    "V100M32": LEGACY, "T4": LEGACY, "G2": LEGACY, "MISC": LEGACY,
    "A10": MODERN, "A100": MODERN, "A800": MODERN, "H100": MODERN, "H800": MODERN, "H20": MODERN,
    "G3": MODERN, "GPU-series-1": MODERN, "GPU-series-2": MODERN,
}

#: The world fields a hardware world sets (what a user's explicit setting overrides).
HARDWARE_WORLD_FIELDS = ("spread_model", "spread_reference", "fluctuation_params", "speeds", "gavel_shape",
                         "comm_source")
#: World model v3's measurements, which every generation's world takes (``modern-v2``'s settings):
#: measured speeds where a profile covers the type (the spec-sheet rule only as the labelled
#: fallback), Gavel's table without its superlinear V100 entries, communication fitted on measured
#: multi-node runs where a profile covers the server class (Gavel's own servers keep Gavel's ratio).
MEASURED_WORLD = {"speeds": "measured", "gavel_shape": "capped", "comm_source": "measured"}
#: The scheduling settings every user cluster takes: the spread guard on the active model's floor
#: (module docstring). Under ``"gavel"`` no floor is reported and the guard keeps Gavel's bound.
HARDWARE_SCHEDULING = {"spread_floor": True}


@dataclass(frozen=True)
class HardwareWorld:
    """The world a cluster's GPU generation implies.

    Attributes:
        generation: ``"modern"``, ``"legacy"`` or ``"mixed"`` (module docstring).
        spread_model: ``WorldConfig.spread_model`` of that generation.
        spread_reference: ``WorldConfig.spread_reference`` (always ``"fewest_machines"``).
        fluctuation_params: the straggler preset.
        speeds, gavel_shape, comm_source: world model v3's measured settings (:data:`MEASURED_WORLD`).
        gpu_types: the cluster's GPU types by generation, e.g. ``{"modern": ("A100",)}``.
    """

    generation: str
    spread_model: str
    spread_reference: str
    fluctuation_params: FluctuationParams
    gpu_types: Mapping[str, tuple]
    speeds: str = MEASURED_WORLD["speeds"]
    gavel_shape: str = MEASURED_WORLD["gavel_shape"]
    comm_source: str = MEASURED_WORLD["comm_source"]

    def describe(self) -> str:
        """One phrase: ``"modern (A100)"``, ``"mixed (modern A100; legacy K80, V100)"``."""
        parts = [f"{gen} {', '.join(types)}" for gen, types in sorted(self.gpu_types.items())]
        types = "; ".join(parts) if self.generation == MIXED else ", ".join(
            t for ts in self.gpu_types.values() for t in ts)
        return f"{self.generation} ({types})"


def gpu_generation(gpu_type: str) -> str:
    """``"modern"`` or ``"legacy"`` for a GPU type name (aliases accepted).

    Raises:
        UnknownGPUTypeError: not a catalog type.
        KeyError: a catalog type without a generation in :data:`GPU_GENERATIONS`.
    """
    name = canonical_gpu_name(gpu_type)
    if name not in GPU_GENERATIONS:
        raise KeyError(f"GPU type {name!r} has no generation in cluster_env.scenarios.hardware.GPU_GENERATIONS")
    return GPU_GENERATIONS[name]


def cluster_generation(gpus_of_type: Mapping[str, int]) -> str:
    """``"modern"``, ``"legacy"`` or ``"mixed"`` for a cluster given as ``{GPU type: GPUs}``."""
    generations = {gpu_generation(t) for t, n in gpus_of_type.items() if n > 0}
    if not generations:
        raise ValueError("a cluster with no GPU has no generation")
    return generations.pop() if len(generations) == 1 else MIXED


def hardware_world(gpus_of_type: Mapping[str, int], base_world: Optional[WorldConfig] = None,
                   base_gpus_of_type: Optional[Mapping[str, int]] = None) -> HardwareWorld:
    """The world of a cluster given as ``{GPU type: GPUs}`` (``Cluster.gpus_of_type()``), put on a
    base scenario whose world is ``base_world`` on a cluster of ``base_gpus_of_type``: a cluster of
    the base's own generation keeps the base's spread model (module docstring)."""
    generation = cluster_generation(gpus_of_type)
    by_gen: dict[str, list] = {}
    count = {MODERN: 0, LEGACY: 0}
    for t, n in sorted(gpus_of_type.items()):
        if n > 0:
            g = gpu_generation(t)
            by_gen.setdefault(g, []).append(canonical_gpu_name(t))
            count[g] += int(n)
    spread = "gavel" if generation == LEGACY else "allreduce"
    if base_world is not None and base_gpus_of_type is not None and cluster_generation(base_gpus_of_type) == generation:
        spread = base_world.spread_model
    dedicated = count[MODERN] > count[LEGACY]
    return HardwareWorld(generation=generation, spread_model=spread, spread_reference="fewest_machines",
                         fluctuation_params=DEDICATED_FLUCTUATION if dedicated else DEFAULT_FLUCTUATION,
                         gpu_types={g: tuple(ts) for g, ts in by_gen.items()})


def apply_hardware_world(world: WorldConfig, gpus_of_type: Mapping[str, int],
                         keep: Iterable[str] = (), base_gpus_of_type: Optional[Mapping[str, int]] = None) -> WorldConfig:
    """``world`` (the base's) with the spread model, spread reference and straggler preset of the
    cluster's generation (:data:`HARDWARE_WORLD_FIELDS`; :func:`hardware_world`, given the base's
    cluster as ``base_gpus_of_type``), except the fields named in ``keep`` (set by the user). Every
    other field (effect switches, reference GPU, contention, interconnect overrides) is the base's."""
    hw = hardware_world(gpus_of_type, world, base_gpus_of_type)
    changes = {f: getattr(hw, f) for f in HARDWARE_WORLD_FIELDS if f not in set(keep)}
    return replace(world, **changes)


def apply_hardware_scheduling(scheduling: SchedulingConfig) -> SchedulingConfig:
    """``scheduling`` with the settings of :data:`HARDWARE_SCHEDULING`: the spread guard follows
    whichever spread model the world ends up with (module docstring)."""
    return replace(scheduling, **HARDWARE_SCHEDULING)


__all__ = ["GPU_GENERATIONS", "HARDWARE_SCHEDULING", "HARDWARE_WORLD_FIELDS", "HardwareWorld", "LEGACY", "MIXED",
           "MODERN", "apply_hardware_scheduling", "apply_hardware_world", "cluster_generation", "gpu_generation",
           "hardware_world"]
