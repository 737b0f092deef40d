"""The links of each GPU type's machines, each number with its source.

The hardware facts the all-reduce cost model (:mod:`cluster_env.world.interconnect`) and its
measured calibration (:mod:`cluster_env.world.comm_calibration`) both read; kept apart from both so
that neither imports the other.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict

#: Inter-node bandwidth of one server of Gavel's testbed, Gb/s. ASSUMPTION, documented: Gavel's
#: throughputs were measured on cloud servers of 2017-2019 (K80, P100 and V100 servers of 4 to 8
#: GPUs, one shared Ethernet NIC each); the repository does not state their network. AWS lists
#: its K80 and V100 servers of that generation (p2.8xlarge, p3.8xlarge) at "10 Gigabit" and the
#: 8-GPU V100 server (p3.16xlarge) at "25 Gigabit" (EC2 instance-type tables). We take 10 Gb/s;
#: at 25 Gb/s every modern penalty of the all-reduce model is about 2.5x larger in communication time
#: (``WorldConfig(gavel_testbed_gbps=25.0)`` studies it).
GAVEL_TESTBED_GBPS = 10.0


@dataclass(frozen=True)
class Interconnect:
    """How a machine of one GPU type talks to the others, in Gb/s per direction.

    Attributes:
        nic_per_gpu: inter-node bandwidth each GPU of the job brings (one NIC per GPU, GPUDirect
            RDMA); ``math.inf`` where the machine's NICs are shared by all its GPUs.
        nic_per_machine: the machine's total inter-node bandwidth.
        intra: bandwidth of one GPU's link inside the machine (NVLink, or PCIe without it).
        source: where the numbers come from.
    """

    nic_per_gpu: float
    nic_per_machine: float
    intra: float
    source: str


#: The fields of :class:`Interconnect` a user may override, in :func:`network_table` row order.
INTERCONNECT_FIELDS = ("nic_per_gpu", "nic_per_machine", "intra")

_GAVEL_SERVER = ("Gavel's testbed server: one shared NIC of GAVEL_TESTBED_GBPS (ASSUMPTION, see "
                 "there); intra-node PCIe 3.0 x16, 126 Gb/s per direction (PCI-SIG 3.0: 8 GT/s x 16 "
                 "lanes, 128b/130b encoding)")
_PCIE3 = 126.0          # PCIe 3.0 x16 per direction: 8 GT/s x 16 x 128/130, Gb/s
_PCIE4 = 252.0          # PCIe 4.0 x16 per direction: 16 GT/s x 16 x 128/130, Gb/s
_NVLINK2_V100 = 1200.0  # V100 SXM2: 6 NVLink 2.0 links x 25 GB/s per direction = 150 GB/s (data sheet 300 GB/s total)
_NVLINK3_A100 = 2400.0  # A100 SXM4: 12 NVLink 3 links, 600 GB/s total = 300 GB/s per direction (data sheet)
_NVLINK_EXPORT = 1600.0  # A800 / H800 SXM: NVLink 400 GB/s total = 200 GB/s per direction (data sheets)

#: Default interconnect of each GPU type's machines. Types not listed take their Gavel anchor's
#: testbed server (:func:`interconnect_for`).
INTERCONNECT_DEFAULTS: Dict[str, Interconnect] = {
    "K80": Interconnect(math.inf, GAVEL_TESTBED_GBPS, _PCIE3, _GAVEL_SERVER),
    "P100": Interconnect(math.inf, GAVEL_TESTBED_GBPS, _PCIE3, _GAVEL_SERVER),
    "V100": Interconnect(math.inf, GAVEL_TESTBED_GBPS, _PCIE3, _GAVEL_SERVER),
    "A100": Interconnect(200.0, 1600.0, _NVLINK3_A100,
                         "NVIDIA DGX A100 data sheet: 8 x single-port ConnectX-6 200 Gb/s HDR InfiniBand "
                         "(one per GPU) for the compute fabric; NVLink 3 600 GB/s per GPU (A100 data sheet)"),
    "A800": Interconnect(200.0, 1600.0, _NVLINK_EXPORT,
                         "NVIDIA A800 SXM4 data sheet: NVLink 400 GB/s (the export variant of A100); "
                         "network ASSUMPTION: the DGX A100 layout, 8 x 200 Gb/s HDR, one NIC per GPU"),
    "H800": Interconnect(400.0, 3200.0, _NVLINK_EXPORT,
                         "NVIDIA H800 SXM5 data sheet: NVLink 400 GB/s; network ASSUMPTION: the DGX H100 "
                         "layout (data sheet: 8 x single-port ConnectX-7 400 Gb/s, one per GPU)"),
    "A10": Interconnect(math.inf, 25.0, _PCIE4,
                        "NVIDIA A10 data sheet: PCIe 4.0 x16 card without NVLink; network ASSUMPTION: one "
                        "shared 25 Gb/s Ethernet NIC per server (AWS g5.8xlarge, 1 x A10G: 25 Gigabit)"),
}
