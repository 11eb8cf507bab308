"""The page's controls as Settings: the process-wide base Settings, the widgets' initial values and choices, and
one turn's Settings built from the widget values (validated by Settings' own field metadata)."""

from __future__ import annotations

import threading
from typing import Any

import gradio as gr

from retrieval.encoders import BUNDLED_EMBEDDERS, canonical_embedder
from retrieval.settings import CONTROLS, DEFAULT_MIN_SIMILARITY, Settings

# The bundled embedders. Their cosine scales differ, so switching model in the UI moves the threshold slider to
# that model's default (retrieval.settings.DEFAULT_MIN_SIMILARITY); the cosine is shown on every final card.
EMBEDDING_MODELS: tuple[str, ...] = tuple(BUNDLED_EMBEDDERS)

# The controls (retrieval.settings.CONTROLS), in the order the UI passes them and ``run_turn`` takes them; their
# types, ranges, choices and labels are Settings' own field metadata (``Settings.knobs()``).
KNOBS = Settings.knobs()
CHOICES: dict[str, tuple[str, ...]] = {name: KNOBS[name].choices for name in CONTROLS if KNOBS[name].choices}

_BASE: Settings | None = None
_BASE_LOCK = threading.Lock()


def page_text(value: Any) -> str | None:
    """A page value that should be text: itself, or None when it is empty or not text (a client may send anything)."""
    return value if isinstance(value, str) and value else None


def base_settings() -> Settings:
    """The process-wide base Settings (from the environment on first use); the UI only overrides controls."""
    global _BASE
    with _BASE_LOCK:
        if _BASE is None:
            _BASE = Settings.from_env()
        return _BASE


def use_base_settings(settings: Settings | None) -> None:
    """Replace the base Settings (tests, or an app embedding the inspector); None re-reads the environment."""
    global _BASE
    with _BASE_LOCK:
        _BASE = settings


def default_controls() -> dict[str, Any]:
    """Initial widget values: the base Settings' values for every control."""
    s = base_settings()
    return {name: getattr(s, name) for name in CONTROLS}


def model_choices() -> list[str]:
    """The embedding models the UI offers: the bundled ones, plus the configured one if it is not bundled."""
    configured = base_settings().embedding_model
    bundled = list(EMBEDDING_MODELS)
    return bundled if canonical_embedder(configured) in bundled else [*bundled, configured]


def suggested_min_similarity(model: str) -> float:
    """The threshold to preselect for an embedding model: the base setting for the configured model, else that
    model's default on its own cosine scale (``DEFAULT_MIN_SIMILARITY``)."""
    s = base_settings()
    if canonical_embedder(model) == canonical_embedder(s.embedding_model):
        return s.min_similarity
    return DEFAULT_MIN_SIMILARITY.get(canonical_embedder(model), s.min_similarity)


def build_settings(controls: dict[str, Any]) -> Settings:
    """Settings = base + control values (sliders send floats: whole-number controls are rounded).

    Raises:
        ValueError: a value is out of range or of the wrong type; the message names the setting.
    """
    changes: dict[str, Any] = {}
    for name in CONTROLS:
        value = controls.get(name)
        if value is None:
            continue
        if name == "embedding_model" and value not in model_choices():
            raise ValueError(
                f"embedding model {value!r} is not available here: choose one of {', '.join(model_choices())}."
            )
        changes[name] = KNOBS[name].coerce(value)
    return base_settings().replace(**changes)


def on_model_change(model: str) -> Any:
    """The embedding model changed: preselect its threshold (cosine scales differ between models); a value that is
    not a model name leaves the threshold as it is (the turn that follows says what is wrong with it)."""
    if not isinstance(model, str):
        return gr.skip()
    return suggested_min_similarity(model)
