"""World-model parameters derived from data.

* :mod:`~cluster_env.world.gpu_catalog`: GPU types (speed factor, memory, price, power);
* :mod:`~cluster_env.world.throughputs`: Gavel's measured throughputs as speed, spread-penalty and
  communication-intensity tables (``gavel_shape``: raw, or capped where V100's are superlinear);
* :mod:`~cluster_env.world.measured_speeds`: measured post-2019 GPU speeds (Sia/Pollux profiles) and
  which types fall back to the spec-sheet rule (:func:`fallback_speed_types`);
* :mod:`~cluster_env.world.comm_calibration`: communication demand fitted on measured multi-node runs;
* :mod:`~cluster_env.world.fluctuation`: static machine factors, fluctuation and stragglers;
* :mod:`~cluster_env.world.calibration`: the PAI statistics the fluctuation defaults match, and the
  published large-job straggler figures :data:`DEDICATED_FLUCTUATION` matches.

Every value and its source is listed in ``docs/world_model.md``.
"""
from cluster_env.world.gpu_catalog import (
    GPU_ALIASES, KNOWN_GPU_TYPES, MEASURED_GPU_TYPES, GPUSpec, all_gpu_specs, canonical_gpu_name,
    gpu_spec,
)
from cluster_env.world.throughputs import (
    DEFAULT_CONTENTION_ALPHA, GPU_COUNT_BUCKETS, JOB_TYPES, bucket_index,
    colocation_contention_fit, comm_intensity, measured_throughput, relative_speed_table,
    spread_ratio_table,
)
from cluster_env.world.measured_speeds import (
    SPEED_SOURCES, best_throughput_table, fallback_speed_types, family_ratio_table, rule_error_table,
    speed_source,
)
from cluster_env.world.comm_calibration import COMM_SOURCES, fit_table
from cluster_env.world.throughputs import GAVEL_SHAPES, superlinear_entries
from cluster_env.world.fluctuation import (
    DEDICATED_FLUCTUATION, DEFAULT_FLUCTUATION, NO_FLUCTUATION, SECONDS_PER_ITERATION,
    FluctuationParams, FluctuationProcess, draw_static_factors,
)
from cluster_env.world.calibration import (
    expected_delay_at_width, large_job_targets, pai_targets, simulate_job_slowdown,
    simulate_worker_statistics,
)

__all__ = [
    "GPUSpec", "GPU_ALIASES", "KNOWN_GPU_TYPES", "MEASURED_GPU_TYPES", "all_gpu_specs",
    "canonical_gpu_name", "gpu_spec",
    "JOB_TYPES", "GPU_COUNT_BUCKETS", "DEFAULT_CONTENTION_ALPHA", "bucket_index",
    "relative_speed_table", "spread_ratio_table", "comm_intensity", "colocation_contention_fit",
    "measured_throughput",
    "SPEED_SOURCES", "GAVEL_SHAPES", "COMM_SOURCES", "fallback_speed_types", "speed_source",
    "rule_error_table", "best_throughput_table", "family_ratio_table", "fit_table", "superlinear_entries",
    "FluctuationParams", "DEFAULT_FLUCTUATION", "DEDICATED_FLUCTUATION", "NO_FLUCTUATION",
    "SECONDS_PER_ITERATION", "FluctuationProcess", "draw_static_factors",
    "pai_targets", "simulate_worker_statistics",
    "large_job_targets", "expected_delay_at_width", "simulate_job_slowdown",
]
