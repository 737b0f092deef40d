"""The v1 and v3 scenarios tell schedulers apart (docs/design.md section 9): paired intervals at the default load.

The fast tests run a few test windows of the two Philly scenarios, where the gaps are large; the
slow test checks every claim of docs/reference.md ("Default loads, measured") on 20 windows.
"""
from __future__ import annotations

import pytest

import baselines
from baselines.harness.stats import paired_summary


def _records(scenario: str, policies: list[str], seeds) -> list[dict]:
    records: list[dict] = []
    for policy in policies:
        records += baselines.evaluate(policy, scenario, split="test", seeds=seeds)
    return records


def test_heterogeneity_aware_placement_beats_first_fit_on_philly_hetero_v1():
    records = _records("philly-hetero-v1", ["fifo", "fifo+fastest"], range(5))
    s = paired_summary(records, "fifo+fastest", reference="fifo")
    assert s.n == 5 and s.ci_high < 1.0, s.describe()


def test_sjf_and_strict_fifo_separate_from_fifo_on_philly_v1():
    records = _records("philly-v1", ["fifo", "sjf", "fifo-strict"], range(6))
    sjf = paired_summary(records, "sjf", reference="fifo")
    strict = paired_summary(records, "fifo-strict", reference="fifo")
    assert sjf.ci_high < 1.0, sjf.describe()
    assert strict.ci_low > 1.0, strict.describe()


def test_size_aware_order_and_placement_beat_fifo_on_philly_hetero_v4():
    records = _records("philly-hetero-v4", ["fifo", "sjf", "fifo+fastest"], range(5))
    for policy in ("sjf", "fifo+fastest"):
        s = paired_summary(records, policy, reference="fifo")
        assert s.n == 5 and s.ci_high < 1.0, s.describe()


#: Heterogeneous scenarios: a heterogeneity-aware placer must beat first-fit there too.
HETEROGENEOUS = {"philly-hetero-v1", "philly-hetero-v4", "modern-v3", "philly-slo-v2"}


@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["philly-v1", "philly-hetero-v1", "philly-hetero-v4", "modern-v3", "philly-slo-v2"])
def test_literature_orderings_on_20_windows(scenario):
    policies = ["fifo", "sjf", "tiresias", "fifo-strict"]
    if scenario in HETEROGENEOUS:
        policies.append("fifo+fastest")
    records = _records(scenario, policies, range(20))
    for policy in ("sjf", "tiresias", "fifo+fastest"):
        if policy in policies:
            s = paired_summary(records, policy, reference="fifo")
            assert s.n == 20 and s.ci_high < 1.0, s.describe()
    strict = paired_summary(records, "fifo-strict", reference="fifo")
    assert strict.ci_low > 1.0, strict.describe()
