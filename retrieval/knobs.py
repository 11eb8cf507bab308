"""What Settings knows about one field (``Knob``): its environment variable, type, range or choices and label, and
how a value of it is parsed from text, coerced from a widget and checked."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class Knob:
    """What Settings knows about one field, read from its metadata: the one source of truth for the environment
    variable, the validation, the CLI and the inspector's controls (type, range, choices, label)."""

    name: str
    env: str
    kind: str  # "bool", "int", "float", "choice", "name" (a non-empty string), "optional_name"
    lo: float | None = None
    hi: float | None = None
    choices: tuple[str, ...] = ()
    label: str = ""  # the inspector's label; "" = not a control of the page
    step: float | None = None
    doc: str = ""  # what it does, for the reference (docs/reference/settings.md); "" = its label says it

    def check(self, value: Any) -> None:
        """Raise ``ValueError`` naming the environment variable and the allowed values if ``value`` is invalid."""
        if self.kind == "bool":
            if not isinstance(value, bool):
                raise ValueError(f"{self.env} must be true or false, got {value!r}.")
        elif self.kind == "int":
            lo, hi = self.bounds()
            _check_int(self.env, value, int(lo), int(hi))
        elif self.kind == "float":
            _check_float(self.env, value, *self.bounds())
        elif self.kind == "choice":
            _check_choice(self.env, value, self.choices)
        elif self.kind == "name" or value is not None:
            _check_name(self.env, value)

    def bounds(self) -> tuple[float, float]:
        """The knob's (lo, hi); a numeric knob always has both."""
        if self.lo is None or self.hi is None:
            raise TypeError(f"{self.env} is a {self.kind} knob without lo and hi.")
        return self.lo, self.hi

    def parse(self, raw: str) -> Any:
        """A typed value from text (an environment variable, a ``--set`` pair, a URL parameter); ints and floats
        that do not parse are returned as text, so ``check`` names the allowed range."""
        raw = raw.strip()
        if self.kind == "bool":
            low = raw.lower()
            if low in _TRUE:
                return True
            if low in _FALSE:
                return False
            raise ValueError(f"{self.env}={raw!r} is not a boolean: use true or false (also 1/0, yes/no, on/off).")
        converter = {"int": int, "float": float}.get(self.kind)
        if converter is not None:
            try:
                return converter(raw)
            except ValueError:
                return raw
        return raw

    def coerce(self, value: Any) -> Any:
        """A value from a widget or an API call, typed and checked: sliders send floats for whole numbers, and
        text is parsed as ``parse`` does. Raises ``ValueError`` with what was wrong and what is allowed."""
        if isinstance(value, str) and self.kind in {"bool", "int", "float"}:
            value = self.parse(value)
        if self.kind == "int" and isinstance(value, float) and math.isfinite(value) and value == int(value):
            value = int(value)
        elif self.kind == "int" and isinstance(value, float):
            raise ValueError(f"{self.env} must be a whole number from {self.lo:g} to {self.hi:g}, got {value!r}.")
        elif self.kind == "float" and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        self.check(value)
        return value


def _check_int(name: str, value: Any, lo: int, hi: int) -> None:
    if isinstance(value, str):
        raise ValueError(f"{name}={value!r} is not a whole number: give an integer from {lo} to {hi}.")
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be a whole number from {lo} to {hi}, got {value!r}.")
    if not lo <= value <= hi:
        raise ValueError(f"{name}={_short(value)} is out of range: allowed {lo} to {hi}.")


def _short(value: int) -> str:
    """A whole number as a message shows it: 1e308 sent to a slider is "1e+308", not its 309 digits."""
    if abs(value) < 10**15:
        return str(value)
    try:
        return f"{float(value):.3g}"
    except OverflowError:
        return "a number of more than 300 digits"


def _check_float(name: str, value: Any, lo: float, hi: float) -> None:
    if isinstance(value, str):
        raise ValueError(f"{name}={value!r} is not a number: give a decimal from {lo} to {hi}.")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise ValueError(f"{name} must be a number from {lo} to {hi}, got {value!r}.")
    if not lo <= value <= hi:
        raise ValueError(f"{name}={value} is out of range: allowed {lo} to {hi}.")


def _check_choice(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name}={value!r} is not allowed: use one of {', '.join(allowed)}.")


def _check_name(name: str, value: Any) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} must be a non-empty string, got {value!r}.")
    if any(ord(c) < 32 for c in value):
        raise ValueError(f"{name} contains control characters: {value!r}.")
