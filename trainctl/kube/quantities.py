"""Kubernetes quantities (``500m``, ``16Gi``, ``2``) as numbers, and back in the canonical form.

Resource amounts are compared (a request above its limit, trainctl/core/validation.py) and summed (a
gang's minimum resources, trainctl/controller/gang.py) as exact decimals, never floats.
"""

from __future__ import annotations

from decimal import Decimal

SUFFIXES = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
            "k": Decimal(10) ** 3, "M": Decimal(10) ** 6, "G": Decimal(10) ** 9, "T": Decimal(10) ** 12,
            "P": Decimal(10) ** 15, "E": Decimal(10) ** 18, "Ki": Decimal(2) ** 10, "Mi": Decimal(2) ** 20,
            "Gi": Decimal(2) ** 30, "Ti": Decimal(2) ** 40, "Pi": Decimal(2) ** 50, "Ei": Decimal(2) ** 60}


def parse_quantity(text: object) -> Decimal:
    value = str(text).strip()
    for suffix in sorted(SUFFIXES, key=len, reverse=True):
        if suffix and value.endswith(suffix):
            return Decimal(value[: -len(suffix)]) * SUFFIXES[suffix]
    return Decimal(value)


def format_quantity(value: Decimal) -> str:
    """Whole numbers as they are, fractions in milli-units (``1500m``), like Kubernetes' canonical form."""
    if value == value.to_integral_value():
        return str(int(value))
    return f"{int(value * 1000)}m"
