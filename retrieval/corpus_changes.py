"""What changes the corpora of a store besides adding: the import of an earlier version's registry file, deleting a
corpus (its record, dense collections, labels and jobs) and its refusal text; and who may change what."""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from retrieval import corpus_store, projection
from retrieval.corpus_entries import MAX_REFUSAL_CHARS, SHIPPED, STORED, CorpusData, CorpusEntry
from retrieval.corpus_retrievers import collection_names, forget_retrievers
from retrieval.formats import Limits, LoadError
from retrieval.index_jobs import forget_jobs, job_for_entry
from retrieval.settings import Settings
from retrieval.types import Chunk

log = logging.getLogger(__name__)

LEGACY_REGISTRY = "corpora.json"  # the registry file of earlier versions: imported into the store once
REGISTRY_LOCK = threading.RLock()  # one add (or legacy import) at a time in this process


class CorpusChanges:
    """What changes the corpora of a store besides adding: the legacy import, delete, the refusal text. Who may
    change what is decided here: the page only what its own session uploaded, the CLI anything of the store."""

    settings: Settings
    limits: Limits
    data_dir: Path
    data_root: Path | None
    get: Callable[..., CorpusEntry]
    add: Callable[..., tuple[CorpusData, bool]]
    load: Callable[[CorpusEntry], CorpusData]
    _records: Callable[..., list[dict[str, Any]]]

    def _import_legacy(self) -> None:
        """Corpora registered by an earlier version in ``DATA_DIR/corpora.json``: added to the store once (the CLI
        may delete them), then the file is renamed ``corpora.json.imported`` (0600)."""
        path = self.data_dir / LEGACY_REGISTRY
        if not path.is_file():
            return
        with REGISTRY_LOCK:
            if not path.is_file():
                return
            try:
                rows = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                rows = []
            done = path.with_name(path.name + ".imported")
            path.replace(done)
            os.chmod(done, 0o600)
            uploads = self.data_dir / "uploads"  # the old copies of uploads: the owner's only from now on
            if uploads.is_dir():
                os.chmod(uploads, 0o700)
                for old in uploads.iterdir():
                    if old.is_file():
                        os.chmod(old, 0o600)
            for row in rows if isinstance(rows, list) else []:
                raw = str(row.get("source") or "") if isinstance(row, dict) else ""
                if raw and Path(raw).exists():
                    source = Path(raw)
                    try:
                        self.add(source, str(row.get("name") or source.stem))
                    except Exception as exc:
                        log.warning("could not import %s from %s: %s", row.get("name"), done, exc)

    # --------------------------------------------------------------------------------------------- changing
    def _owned(self, name: str, token: str | None, page: bool, what: str) -> CorpusEntry:
        entry = self.get(name)
        if entry.kind not in STORED:
            where = "the shipped corpus" if entry.kind == SHIPPED else "a folder under the data root"
            raise ValueError(f"{entry.name!r} is {where}; only corpora uploaded or indexed here can {what}.")
        if page and not entry.may_delete(token):
            how = (
                "added from the command line"
                if not entry.owner
                else "uploaded or attached from another browser session"
            )
            act = "delete it" if what == "be deleted" else what
            raise ValueError(
                f"{entry.name!r} was {how}: only the browser session that uploaded or attached a corpus may {act} "
                "from the page"
                + (
                    f" (the machine's owner can, with `python -m retrieval index --delete {entry.name}`)."
                    if what == "be deleted"
                    else "."
                )
            )
        return entry

    def delete(self, name: str, *, token: str | None = None, page: bool = False) -> str:
        """Forget a corpus kept in the store: its record and its dense collections (an attached collection is never
        dropped: it was made elsewhere). ``page``: asked from the page, allowed only to the session holding the
        ``token`` its upload was given; the CLI (``page=False``) may delete any.

        Raises:
            ValueError: the shipped cards, a data-root folder, another session's corpus, or an unknown name.
        """
        return delete_corpus(self, self._owned(name, token, page, "be deleted"))

    def may_calibrate(self, name: str | None, token: str | None) -> CorpusEntry:
        """The entry of a corpus whose refusal calibration the page session holding ``token`` may re-run: only one
        it uploaded or attached (the shipped cards' and the CLI's corpora: `python -m retrieval calibrate NAME`).

        Raises:
            ValueError: the shipped cards, a data-root folder, another session's corpus, or an unknown name.
        """
        return self._owned(name or SHIPPED, token, True, "re-run its refusal calibration")

    def set_refusal(self, name: str, text: str | None, *, token: str | None = None, page: bool = False) -> str:
        """Keep ``text`` with the corpus as what the assistant says when it refuses a turn on it ("" or None: back to
        the neutral default). The same rule as ``delete`` says who may change it.

        Raises:
            ValueError: not a corpus of the store, not this session's, or a text too long.
        """
        entry = self._owned(name, token, page, "change its refusal text")
        clean = " ".join(str(text or "").split())
        if len(clean) > MAX_REFUSAL_CHARS:
            raise ValueError(f"the refusal text has {len(clean):,} characters; keep it under {MAX_REFUSAL_CHARS:,}.")
        try:
            corpus_store.update(self.settings, entry.name, refusal=clean)
        except KeyError:
            raise ValueError(
                f"corpus {entry.name!r} has been deleted (perhaps from another page or app process)."
            ) from None
        return f"refusal text of {entry.name} " + ("set" if clean else "reset to the default")


def delete_corpus(self: CorpusChanges, entry: CorpusEntry) -> str:
    """Forget a corpus of the store: its record and (unless attached) its dense collections."""
    job = job_for_entry(entry.name)
    if job is not None and job.running:
        raise ValueError(f"{entry.name!r} is being indexed; cancel the job first.")
    dropped = 0
    if entry.kind == "indexed":
        try:
            dropped = drop_collections(self.settings, self.load(entry).chunks)
        except (ValueError, LoadError):
            pass  # deleted meanwhile, or its cards no longer load: the record still goes
    if not corpus_store.drop(self.settings, entry.name):
        return f"{entry.name} was already deleted (perhaps from another page or app process)"
    from retrieval.judgments import corpus_identity, drop_corpus

    drop_corpus(self.settings, corpus_identity(CorpusData(entry, (), (), ())))  # its labels and everyone's marks
    forget_retrievers(CorpusData(entry, (), (), ()).key or "")
    forget_jobs(entry.name)
    projection.forget(entry.name)  # its map's status (the page's Data tab shows it)
    if entry.kind == "attached":
        return f"deleted {entry.name} (its collection {entry.collection} was made elsewhere and is kept)"
    return f"deleted {entry.name} ({dropped} Chroma collection{'s' if dropped != 1 else ''} removed)"


def drop_collections(settings: Settings, chunks: Sequence[Chunk]) -> int:
    """Drop the dense collections of these sub-chunks, one per embedding model the store may hold."""
    from retrieval.encoders import BUNDLED_EMBEDDERS, canonical_embedder

    models = sorted({*BUNDLED_EMBEDDERS, canonical_embedder(settings.embedding_model), settings.embedding_model})
    client = corpus_store.client_for(settings)
    existing = {c.name if hasattr(c, "name") else str(c) for c in client.list_collections()}
    dropped = 0
    for name in collection_names(chunks, models):
        if name in existing:
            try:
                client.delete_collection(name)
                dropped += 1
            except Exception as exc:  # another process dropped it first
                log.warning("could not drop %s: %s", name, exc)
    return dropped
