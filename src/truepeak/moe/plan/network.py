"""The network between nodes of a layout larger than one node (:class:`Network`, ``--nodes``).

Pure Python. A layout's GPUs are split evenly over ``nodes`` nodes; a collective whose ranks span more GPUs than one
node holds crosses the network, and the ring over the nodes is bound by each GPU's network card: it costs
``α_net + S · factor(op, n) / bw_net`` (nccl-tests' busbw definitions, :mod:`truepeak.comm.model`). Default
``bw_net`` = 50 GB/s per GPU: one ConnectX-7 InfiniBand 400 Gb/s card per GPU, "~50 GB/s maximum bandwidth"
(deepseek-ai/DeepEP README, 'Normal kernels with NVLink and RDMA forwarding', measured on H800 nodes). ``α_net``
defaults to the collective's fixed cost inside a node (an assumption: no between-node latency was measured here);
``--network-latency`` sets it.
"""

from __future__ import annotations

from dataclasses import dataclass

from truepeak.errors import ConfigError

#: Bus bandwidth of the network per GPU (B/s): ConnectX-7 400 Gb/s ≈ 50 GB/s (deepseek-ai/DeepEP README).
NETWORK_BANDWIDTH = 50e9


@dataclass(frozen=True)
class Network:
    """``nodes`` nodes joined by a network of ``bandwidth`` B/s per GPU and ``latency_s`` per call (None: the
    collective's fixed cost inside a node).

    Raises:
        ConfigError: nodes < 1, bandwidth <= 0 or latency < 0.
    """

    nodes: int
    bandwidth: float = NETWORK_BANDWIDTH
    latency_s: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.nodes, bool) or not isinstance(self.nodes, int) or self.nodes < 1:
            raise ConfigError(f"--nodes {self.nodes!r} must be a whole number >= 1", field="nodes")
        if not self.bandwidth > 0:
            raise ConfigError(f"--network-bandwidth {self.bandwidth / 1e9:g} GB/s must be > 0 GB/s",
                              field="network_bandwidth")
        if self.latency_s is not None and not self.latency_s >= 0:
            raise ConfigError(f"--network-latency {self.latency_s * 1e6:g} µs must be >= 0 µs",
                              field="network_latency")

    def gpus_per_node(self, layout) -> int:
        """GPUs of ``layout`` in one node.

        Raises:
            ConfigError: ``nodes`` does not divide the layout's GPUs.
        """
        if layout.gpus % self.nodes:
            raise ConfigError(f"--nodes {self.nodes} does not divide the {layout.gpus} GPUs of layout {layout.name}; "
                              f"give a divisor of {layout.gpus}", field="nodes")
        return layout.gpus // self.nodes

    def to_dict(self) -> dict:
        return {"nodes": self.nodes, "bandwidth_B_per_s": self.bandwidth, "latency_s": self.latency_s}


__all__ = ["NETWORK_BANDWIDTH", "Network"]
