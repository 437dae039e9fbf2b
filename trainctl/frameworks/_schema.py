"""Small helpers for the structural-schema fragments framework modules declare."""

INT32 = {"type": "integer", "format": "int32"}
STRING = {"type": "string"}
BOOLEAN = {"type": "boolean"}

# autoscaling/v2 MetricSpec list: kept opaque; the HPA API server validates it.
METRICS = {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}


def obj(**properties: dict) -> dict:
    return {"type": "object", "properties": properties}
