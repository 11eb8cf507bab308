"""Where a corpus's refusal calibration is kept: the store's ``refusal-calibrations`` collection, one row per corpus
content and pair of models (``calibration_key``), so that every process on that store uses it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from retrieval.corpus import fingerprint
from retrieval.refusal_thresholds import SCRIPT_RULE, RefusalThresholds
from retrieval.settings import Settings
from retrieval.tokenize import CJK_ANALYSIS, MARK_ANALYSIS, changed_by_marks, has_cjk, main_script
from retrieval.types import Chunk

COLLECTION = "refusal-calibrations"


@dataclass(frozen=True)
class Calibration:
    """A corpus's calibrated thresholds and the report that justifies them (JSON-ready with ``to_dict``)."""

    thresholds: RefusalThresholds
    report: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"thresholds": self.thresholds.to_dict(), "report": self.report}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Calibration:
        return cls(RefusalThresholds.from_dict(data["thresholds"]), dict(data["report"]))


def calibration_key(chunks: Sequence[Chunk], settings: Settings) -> str:
    """One calibration per corpus content and pair of models (a cosine threshold belongs to its embedder). A corpus
    with Chinese, Japanese or Korean text also names the CJK analysis its words were counted with
    (``tokenize.CJK_ANALYSIS``): one calibrated when a whole CJK run was one word is not reused. So does a corpus
    with combining marks or text not in normal form C (Hindi, Thai, Arabic with harakat, decomposed Latin:
    ``tokenize.MARK_ANALYSIS``), whose words were cut at the marks; and a corpus with a card mostly in a script
    the cross-encoder does not read (Cyrillic, Greek, Arabic...: ``refusal.SCRIPT_RULE``), whose turns were judged
    by its score and are now judged by multilingual-e5. Other corpora (English, Spanish, Portuguese in NFC) keep
    their key, their tokens and rule are what they were."""
    base = fingerprint(chunks, settings.embedding_model, settings.reranker_model)
    extra = _analyses(base, chunks)
    return fingerprint(chunks, settings.embedding_model, settings.reranker_model, *extra) if extra else base


_ANALYSES: dict[str, tuple[str, ...]] = {}  # calibration key without markers -> the markers its corpus needs
_MAX_ANALYSES = 64


def _analyses(base: str, chunks: Sequence[Chunk]) -> tuple[str, ...]:
    """The analysis markers of ``calibration_key`` for these chunks, found once per corpus content and pair of
    models: the key is computed at every re-read of a corpus's calibration (``corpora.CALIBRATION_REREAD_S``), and
    three passes over every chunk's text took 0.13 s for SciFact's 23,341 sub-chunks, where its hash takes 0.02 s."""
    found = _ANALYSES.get(base)
    if found is None:
        found = ()
        if any(has_cjk(c.title) or has_cjk(c.text) for c in chunks):
            found += (CJK_ANALYSIS,)
        if any(changed_by_marks(c.title) or changed_by_marks(c.text) for c in chunks):
            found += (MARK_ANALYSIS,)
        if any(main_script(c.text) for c in chunks):
            found += (SCRIPT_RULE,)
        if len(_ANALYSES) >= _MAX_ANALYSES:
            _ANALYSES.pop(next(iter(_ANALYSES)))
        _ANALYSES[base] = found
    return found


def _collection(settings: Settings) -> Any:  # a Chroma collection
    from retrieval.corpus_store import client_for

    return client_for(settings).get_or_create_collection(COLLECTION, metadata={"hnsw:space": "cosine"})


def save(settings: Settings, chunks: Sequence[Chunk], calibration: Calibration) -> None:
    """Keep ``calibration`` in the store of ``settings`` (replacing an earlier one of the same corpus and models)."""
    key = calibration_key(chunks, settings)
    _collection(settings).upsert(
        ids=[key],
        documents=[json.dumps(calibration.to_dict())],
        embeddings=[[1.0]],
        metadatas=[
            {"corpus": str(calibration.report.get("corpus", "")), "when": str(calibration.report.get("when", ""))}
        ],
    )


def load(settings: Settings, chunks: Sequence[Chunk]) -> Calibration | None:
    """The stored calibration of this corpus and pair of models, or None (never calibrated, or unreadable)."""
    try:
        got = _collection(settings).get(ids=[calibration_key(chunks, settings)], include=["documents"])
        docs = got.get("documents") or []
        return Calibration.from_dict(json.loads(docs[0])) if docs and docs[0] else None
    except Exception:  # a store that cannot be read, or a record of an older shape: no calibration
        return None
