"""No mlPolicy of a framework: upstream's plain-ML plugin (pkg/runtime/framework/plugins/plainml/plainml.go).

Only the node count and the trainer's env: a TrainJob on such a runtime (TensorFlow's, say) sets whatever its
program needs itself.
"""

from __future__ import annotations

from trainctl.frameworks.policies.base import Info, Policy


class Plain(Policy):
    def enforce(self, info: Info) -> None:
        info.set_trainer_count()
        info.upsert_trainer_env()


POLICY = Plain()
