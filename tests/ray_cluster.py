"""Moved to `service.testing.ray_cluster` (bench/ and scripts/ import it too); this name stays for
branches written before the move."""

from service.testing.ray_cluster import (  # noqa: F401
    FAST_HEALTH_CHECKS,
    HEAD_PORT,
    KEEP_WARM_WORKERS,
    OBJECT_STORE_BYTES,
    RAY,
    START_ATTEMPTS,
    PrivateNet,
    RayCluster,
    UdsServer,
    descendants,
    kill_tree,
)
