"""World-model parameters derived from data: GPU catalog, measured throughputs, fluctuation."""
from cluster_env.world.gpu_catalog import (
    GPUSpec, KNOWN_GPU_TYPES, MEASURED_GPU_TYPES, all_gpu_specs, canonical_gpu_name, gpu_spec,
)

__all__ = [
    "GPUSpec", "KNOWN_GPU_TYPES", "MEASURED_GPU_TYPES", "all_gpu_specs", "canonical_gpu_name",
    "gpu_spec",
]
