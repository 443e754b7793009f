"""The Ray cluster a run uses: joined at an address, or started on this machine, and left as found.

`--ray-address ADDR` (or the RAY_ADDRESS variable) joins a running cluster; without either a cluster
of this machine's CPUs and GPUs is started for the run and stopped after it. A process that has called
`ray.init` already (a test, a notebook) keeps its connection. Ray's dashboard is not started and its
workers' output is not copied to kvgate's terminal.
"""

from __future__ import annotations

import logging
import socket
from types import ModuleType
from typing import Any

from kvgate.errors import BadInput, EngineFailure

INSTALL_HINT = "pip install 'kvgate[ray]'"
CONNECT_TIMEOUT_S = 10.0


def import_ray() -> ModuleType:
    """The `ray` module, or a one-line BadInput saying how to install it."""
    try:
        import ray
    except ImportError:
        raise BadInput(f"--executor ray needs Ray: {INSTALL_HINT}") from None
    return ray


def check_reachable(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Refuse (one line) a `host:port` or `ray://host:port` address nothing answers at, before Ray's own
    connection attempts, which retry for minutes; other forms ("auto", "local") are Ray's to resolve."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit() or not host:
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise BadInput(
            f"cannot reach the Ray cluster at {address}: {reason} (is `ray start --head` running?)"
        ) from None


class Cluster:
    """A connection to a Ray cluster; `close` disconnects only if this object connected."""

    def __init__(self, address: str | None) -> None:
        self.ray = import_ray()
        self.owned = False
        if self.ray.is_initialized():
            return
        if address:
            check_reachable(address)
        try:
            self.ray.init(
                address=address,
                include_dashboard=False,
                log_to_driver=False,
                logging_level=logging.WARNING,
            )
        except (ConnectionError, RuntimeError, ValueError, TimeoutError) as exc:
            where = f"at {address}" if address else "(RAY_ADDRESS, or a new one on this machine)"
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise BadInput(f"cannot reach the Ray cluster {where}: {first}") from None
        except Exception as exc:  # Ray failed to start here (its temp folder, its processes): exit 4
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise EngineFailure(
                f"Ray did not start: {type(exc).__name__}: {first}; check RAY_TMPDIR and the machine's "
                "free memory and disk, or join a running cluster with --ray-address"
            ) from None
        self.owned = True

    @property
    def address(self) -> str:
        return str(self.ray.get_runtime_context().gcs_address)

    def total(self) -> dict[str, Any]:
        """The cluster's resources (CPU, GPU, …) as its nodes declare them now."""
        return dict(self.ray.cluster_resources())

    def close(self) -> None:
        if self.owned and self.ray.is_initialized():
            self.ray.shutdown()
        self.owned = False
