"""Numbers as the RRF class writes them: rounded half up at a fixed number of decimals, by decimal arithmetic.

Python's ``f"{x:.5f}"`` rounds the binary value half to even: 1/64 = 0.015625 prints 0.01562 where the class (and a
person with a pencil) writes 0.01563. Every page that shows a fused score, the inspector's columns, the classroom
and the lab's lessons, formats it here, so the same number never reads two ways.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal, localcontext
from fractions import Fraction


def half_up(value: float | Fraction | Decimal, places: int = 5) -> Decimal:
    """``value`` rounded half up to ``places`` decimals: ``half_up(Fraction(1, 64)) == Decimal("0.01563")``.

    A ``Fraction`` or a ``Decimal`` is rounded on its exact value (the classroom's exercises compute in fractions).
    A float is rounded as it prints, its shortest repr (``repr(0.015625)`` is exact), not its binary expansion, so
    a value that prints as a 5 in the next place rounds up as written.
    """
    if places < 0:
        raise ValueError(f"places must be 0 or more, got {places}")
    with localcontext() as ctx:
        ctx.prec = 60
        if isinstance(value, Fraction):
            exact = Decimal(value.numerator) / Decimal(value.denominator)
        elif isinstance(value, Decimal):
            exact = value
        else:
            exact = Decimal(repr(float(value)))
        if not exact.is_finite():  # inf or nan, from a hostile or broken input: nothing to round
            return exact
        ctx.prec = max(ctx.prec, exact.adjusted() + places + 2)  # room for every digit of a huge value (1e308)
        return exact.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)


def round_half_up(x: float | Fraction | Decimal, places: int = 5) -> str:
    """``x`` rounded half up to ``places`` decimals, as text: ``round_half_up(1/64) == "0.01563"`` (see ``half_up``)."""
    return str(half_up(x, places))
