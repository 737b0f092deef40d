"""What world a run plays in, in one line: every run prints it and records it.

:func:`world_summary` reads a :class:`~cluster_env.core.config.WorldConfig` and the cluster's GPU
types and says

* **spread**: the spread model and what its penalty is relative to (``off`` when the effect is);
* **stragglers**: which fluctuation preset (``DEFAULT_FLUCTUATION``, PAI's shared machines;
  ``DEDICATED_FLUCTUATION``, GREYHOUND's large jobs on whole machines; ``custom``), or ``off``;
* **interconnect**: under ``"allreduce"``, where each GPU type's network numbers come from (a
  data sheet, an assumption, a user override) and Gavel's testbed bandwidth (an assumption);
  ``not used`` under ``"gavel"``;
* **effects**: the world effects that are on (contention with its alpha, restarts with their cost);
* **speeds**: the GPU types whose speed came from the spec-sheet fallback rule
  (:func:`speed_fallback_types`) rather than a measurement;
* **origin**: the scenario's own world, or the hardware rule applied to a user's cluster
  (``cluster_env.scenarios.hardware``) with the fields the user set.

``cluster-bench run`` and ``python -m cluster_env`` print :meth:`WorldSummary.line`; ``results.json``
holds :meth:`WorldSummary.as_dict` in its ``meta`` and the line in each episode's ``world``;
``env.unwrapped.world_summary()`` returns it.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Sequence

from cluster_env.world.fluctuation import DEDICATED_FLUCTUATION, DEFAULT_FLUCTUATION, NO_FLUCTUATION
from cluster_env.world.gpu_catalog import gpu_spec
from cluster_env.world.interconnect import INTERCONNECT_DEFAULTS, interconnect_for

#: Types whose machines are Gavel's testbed servers (their network is an assumption).
GAVEL_TESTBED_TYPES = ("K80", "P100", "V100")

#: Named fluctuation presets, as the summary names them.
FLUCTUATION_PRESETS = (
    (DEFAULT_FLUCTUATION, "DEFAULT_FLUCTUATION (PAI, shared machines)"),
    (DEDICATED_FLUCTUATION, "DEDICATED_FLUCTUATION (GREYHOUND, whole machines)"),
    (NO_FLUCTUATION, "NO_FLUCTUATION"),
)


def speed_fallback_types(gpu_type_names: Sequence[str], speeds: str = "spec-sheet") -> tuple[str, ...]:
    """The GPU types among ``gpu_type_names`` whose speed comes (in part) from the spec-sheet rule
    (``gpu_catalog``: ``factor = sqrt(compute ratio x bandwidth ratio)`` against a Gavel anchor)
    rather than from a measurement, under ``WorldConfig.speeds`` (``"spec-sheet"``, or
    ``"measured"`` / ``"measured-best"``: Sia/Pollux profiles and MLPerf where they cover the type). The decision is
    :func:`cluster_env.world.measured_speeds.fallback_speed_types`; names are canonical."""
    from cluster_env.world.measured_speeds import fallback_speed_types

    return tuple(gpu_spec(n).name for n in fallback_speed_types(gpu_type_names, speeds))


def fluctuation_preset_name(params: Any) -> str:
    """The preset's name (:data:`FLUCTUATION_PRESETS`), or ``"custom"``."""
    for preset, name in FLUCTUATION_PRESETS:
        if params == preset:
            return name
    return "custom"


def _interconnect_label(gpu_type: str, overrides: Sequence) -> str:
    """``"A100 data sheet"``, ``"H800 partly assumed"`` (data-sheet links, an assumed network),
    ``"P40 assumed (Gavel testbed)"``; with ``", overridden"`` where the user replaced a number."""
    ic = interconnect_for(gpu_type, overrides)
    spec = gpu_spec(gpu_type)
    if spec.name not in INTERCONNECT_DEFAULTS or spec.name in GAVEL_TESTBED_TYPES:
        kind = "assumed (Gavel testbed)"
    elif "ASSUMPTION" in ic.source:
        kind = "partly assumed"
    else:
        kind = "data sheet"
    if "overridden" in ic.source:
        kind += ", overridden"
    return f"{spec.name} {kind}"


@dataclass(frozen=True)
class WorldSummary:
    """One run's world; :meth:`line` prints it, :meth:`as_dict` records it."""

    spread: str
    stragglers: str
    interconnect: str
    effects: tuple[str, ...]
    speed_fallback: tuple[str, ...]
    origin: str
    gavel_shape: str = "raw"           # "capped": Gavel's superlinear multi-GPU entries treated (world model v3)
    speeds: str = "spec-sheet"         # WorldConfig.speeds: which rule the measured speeds follow

    def line(self) -> str:
        """``world: spread allreduce (fewest_machines); stragglers DEDICATED_FLUCTUATION (...); ...``."""
        speeds = ("spec-sheet fallback for " + ", ".join(self.speed_fallback)) if self.speed_fallback \
            else "all measured"
        if self.speeds == "measured-best":
            speeds += " (best-throughput rule)"
        if self.gavel_shape == "capped":
            speeds += " (Gavel's table capped)"
        effects = ", ".join(self.effects) if self.effects else "none"
        return (f"world: spread {self.spread}; stragglers {self.stragglers}; interconnect {self.interconnect}; "
                f"effects {effects}; speeds {speeds}; {self.origin}")

    def as_dict(self) -> dict[str, Any]:
        """The fields, JSON-ready, plus ``"line"``."""
        out = asdict(self)
        out["effects"] = list(self.effects)
        out["speed_fallback"] = list(self.speed_fallback)
        out["line"] = self.line()
        return out


def world_summary(world: Any, gpu_type_names: Sequence[str], origin: str = "the scenario's world") -> WorldSummary:
    """The :class:`WorldSummary` of ``world`` (a ``WorldConfig``) on a cluster of ``gpu_type_names``."""
    if world.spread_penalty:
        spread = f"{world.spread_model} ({world.spread_reference})"
    else:
        spread = "off"
    stragglers = fluctuation_preset_name(world.fluctuation_params) if world.fluctuation else "off"
    if world.spread_penalty and world.spread_model == "allreduce":
        labels = ", ".join(_interconnect_label(t, world.interconnect) for t in gpu_type_names)
        if world.comm_source == "measured":     # fitted per server class; the testbed's bandwidth cancels
            interconnect = (f"{labels}; communication fitted on measured multi-node runs (Sia/Pollux) where a "
                            "profile covers the server class, Gavel's ratio on its own servers")
        else:
            interconnect = f"{labels}; Gavel testbed {world.gavel_testbed_gbps:g} Gb/s (assumption)"
    else:
        interconnect = "not used"
    effects = []
    if world.static_factors:
        effects.append("static factors")
    if world.fluctuation:
        effects.append("fluctuation")
    if world.contention and world.contention_alpha > 0:
        effects.append(f"contention (alpha {world.contention_alpha:g})")
    if world.spread_penalty:
        effects.append("spread penalty")
    if world.restart_overhead > 0:
        effects.append(f"restart overhead ({world.restart_overhead:g} s)")
    return WorldSummary(spread=spread, stragglers=stragglers, interconnect=interconnect, effects=tuple(effects),
                        speed_fallback=speed_fallback_types(gpu_type_names, world.speeds), origin=origin,
                        gavel_shape=world.gavel_shape, speeds=world.speeds)


__all__ = ["FLUCTUATION_PRESETS", "WorldSummary", "fluctuation_preset_name", "speed_fallback_types",
           "world_summary"]
