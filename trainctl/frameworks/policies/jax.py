"""mlPolicy.jax: JAX's distributed variables (upstream pkg/runtime/framework/plugins/jax/jax.go).

``jax.distributed.initialize()`` reads the process count (the node count), the process id (the node's completion
index) and the coordinator (``<job>-node-0-0.<job>:29500``). The plugin reserves no names.
"""

from __future__ import annotations

from trainctl.frameworks.policies.base import TRAINER_PORT, Info, Policy, index_env, upsert_env, upsert_port
from trainctl.frameworks.policies.base import value_env


class Jax(Policy):
    key = "jax"

    def enforce(self, info: Info) -> None:
        info.set_trainer_count()
        container = info.trainer_container()
        if container is None:
            return
        upsert_env(container.setdefault("env", []),
                   value_env("JAX_NUM_PROCESSES", info.trainer_count()),
                   index_env("JAX_PROCESS_ID"),
                   value_env("JAX_COORDINATOR_ADDRESS", f"{info.addresses.rank0()}:{info.addresses.rank0_port()}"))
        upsert_port(container.setdefault("ports", []), TRAINER_PORT)


POLICY = Jax()
