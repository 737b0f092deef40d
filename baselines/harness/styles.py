"""One look per policy, the same in every plot of a run: a colour that no other policy of the run
has, for any number of policies, and past the first 20 a line style and marker as well.

The first 10 colours are matplotlib's ``tab10``, the next 10 the light halves of ``tab20``; after
that, hues spaced by the golden ratio (deterministic, never repeating a colour) at two levels of
saturation. A plot asks :func:`policy_styles` with the run's policies in the run's order, so a
policy keeps its look across the run's plots.
"""
from __future__ import annotations

import colorsys
from typing import NamedTuple, Sequence

#: matplotlib's tab10 and the light halves of tab20, as RGB in 0..1 (no matplotlib import needed).
_TAB = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
        "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#c7c7c7",
        "#dbdb8d", "#9edae5")
_LINESTYLES = ("-", "--", "-.", ":")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
_GOLDEN = 0.6180339887498949


class PolicyStyle(NamedTuple):
    """How one policy is drawn: ``color`` (RGB in 0..1), ``linestyle`` and ``marker``."""

    color: tuple[float, float, float]
    linestyle: str
    marker: str


def _hex(text: str) -> tuple[float, float, float]:
    return tuple(int(text[i:i + 2], 16) / 255.0 for i in (1, 3, 5))  # type: ignore[return-value]


def policy_color(i: int) -> tuple[float, float, float]:
    """The colour of the ``i``-th policy of a run: distinct from every other index's."""
    if i < len(_TAB):
        return _hex(_TAB[i])
    k = i - len(_TAB)
    hue = (0.05 + k * _GOLDEN) % 1.0
    saturation, value = (0.85, 0.55) if k % 2 else (0.55, 0.85)
    return tuple(round(c, 6) for c in colorsys.hsv_to_rgb(hue, saturation, value))  # type: ignore[return-value]


def policy_style(i: int) -> PolicyStyle:
    """The look of the ``i``-th policy of a run (solid lines and circles for the first 20)."""
    extra = max(i - len(_TAB), -1) + 1
    return PolicyStyle(policy_color(i), _LINESTYLES[extra % len(_LINESTYLES)], _MARKERS[extra % len(_MARKERS)])


def policy_styles(policies: Sequence[str]) -> dict[str, PolicyStyle]:
    """Each of ``policies`` (in the run's order; repeats keep their first look) with its style."""
    out: dict[str, PolicyStyle] = {}
    for name in policies:
        if name not in out:
            out[name] = policy_style(len(out))
    return out


__all__ = ["PolicyStyle", "policy_color", "policy_style", "policy_styles"]
