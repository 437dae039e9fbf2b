"""JAXJob: N Worker; jax.distributed reads COORDINATOR_ADDRESS/PORT, PROCESS_ID."""

from trainctl.frameworks.base import Framework


class JAX(Framework):
    kind = "JAXJob"
    name = "jax"
    aliases = ("jaxjob",)
    replica_spec_field = "jaxReplicaSpecs"
    replica_types = ("Worker",)
    container = "jax"
    port_name = "jaxjob-port"
    port = 6666
    restart_policy = "Never"
    scalable = True
    workers_help = "N Worker"
    default_image = "docker.io/library/python:3.11-slim"


FRAMEWORK = JAX()
