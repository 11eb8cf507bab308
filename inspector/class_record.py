"""The teacher's counts for a class link: per exercise, how many students answered and how many got it right.

Where they live: in the Chroma store the app already uses (``CHROMA_HOST`` if set, else ``CHROMA_PATH``), in one
small collection, ``classroom`` (``StoreClassRecord``): every process serving the same store sees the same class
links and counts, and they survive a restart. ``ClassRecord`` keeps the same record in one process's memory (the
tests' double, and the fallback when the store cannot be opened, logged).

What is kept is anonymous: a class id, its exercise ids, a hash of the teacher's key and, per exercise, one row per
student session keyed by a hash of (class, exercise, a random token made for that session: never a name, an address
or Gradio's session id) with whether it was right before the reveal. No session can read another's answers; the
teacher link reads only the counts of its own class.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

CLASS_RE = re.compile(r"^[A-Za-z0-9_-]{8,40}$")
MAX_CLASSES = 500  # oldest class links are forgotten first
MAX_STUDENTS = 1000  # per exercise of a class


@dataclass
class _Class:
    exercises: tuple[str, ...]
    key_hash: str
    answers: dict[str, dict[str, bool]] = field(default_factory=dict)  # exercise -> student token -> right


class ClassRecord:
    """Class links and their anonymous counts, thread-safe, bounded."""

    def __init__(self, max_classes: int = MAX_CLASSES) -> None:
        self._classes: OrderedDict[str, _Class] = OrderedDict()
        self._lock = threading.Lock()
        self.max_classes = max_classes

    def open_class(self, exercises: Sequence[str]) -> tuple[str, str]:
        """A new class link for ``exercises``: (class id for the students' link, teacher key for the teacher's)."""
        if not exercises:
            raise ValueError("pick at least one exercise for the class link.")
        class_id, key = secrets.token_urlsafe(9), secrets.token_urlsafe(18)
        with self._lock:
            self._classes[class_id] = _Class(tuple(exercises), _hash(key))
            while len(self._classes) > self.max_classes:
                self._classes.popitem(last=False)
        return class_id, key

    def exercises(self, class_id: str | None) -> tuple[str, ...] | None:
        """The exercises of a known class link, or None."""
        if not class_id or not CLASS_RE.match(class_id):
            return None
        with self._lock:
            found = self._classes.get(class_id)
            return found.exercises if found else None

    def record(self, class_id: str | None, exercise: str, student: str, right: bool) -> bool:
        """One student's check of one exercise of a class link (right stays right once it was); False if the class
        or the exercise is not known here."""
        with self._lock:
            found = self._classes.get(class_id or "")
            if found is None or exercise not in found.exercises:
                return False
            answers = found.answers.setdefault(exercise, {})
            if student not in answers and len(answers) >= MAX_STUDENTS:
                return False
            answers[student] = answers.get(student, False) or right
            return True

    def counts(self, class_id: str | None, key: str | None) -> dict[str, tuple[int, int]] | None:
        """Per exercise: (students who answered, students right before the reveal); None unless ``key`` is the
        teacher key of ``class_id``."""
        with self._lock:
            found = self._classes.get(class_id or "")
            if found is None or not key or not hmac.compare_digest(found.key_hash, _hash(key)):
                return None
            return {
                ex: (len(found.answers.get(ex, {})), sum(found.answers.get(ex, {}).values())) for ex in found.exercises
            }


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "replace")).hexdigest()


COLLECTION = "classroom"


class StoreClassRecord:
    """The same record in the Chroma store: one row per class link and one per (class, exercise, student)."""

    def __init__(self, settings: Any) -> None:
        self.settings = settings
        self._collection = None

    @property
    def collection(self) -> Any:
        if self._collection is None:
            from retrieval.corpus_store import client_for

            self._collection = client_for(self.settings).get_or_create_collection(
                COLLECTION, metadata={"purpose": "class links and their anonymous counts"}
            )
        return self._collection

    def open_class(self, exercises: Sequence[str]) -> tuple[str, str]:
        if not exercises:
            raise ValueError("pick at least one exercise for the class link.")
        class_id, key = secrets.token_urlsafe(9), secrets.token_urlsafe(18)
        meta = {"kind": "class", "class": class_id, "exercises": ",".join(exercises), "key_hash": _hash(key)}
        self.collection.upsert(ids=[f"class:{class_id}"], embeddings=[[1.0]], documents=[""], metadatas=[meta])
        return class_id, key

    def _class(self, class_id: str | None) -> dict[str, Any] | None:
        if not class_id or not CLASS_RE.match(class_id):
            return None
        got = self.collection.get(ids=[f"class:{class_id}"], include=["metadatas"])
        return got["metadatas"][0] if got["metadatas"] else None

    def exercises(self, class_id: str | None) -> tuple[str, ...] | None:
        found = self._class(class_id)
        return tuple(found["exercises"].split(",")) if found else None

    def record(self, class_id: str | None, exercise: str, student: str, right: bool) -> bool:
        found = self._class(class_id)
        if found is None or exercise not in found["exercises"].split(","):
            return False
        row = "answer:" + hashlib.sha256(f"{class_id}\x00{exercise}\x00{student}".encode()).hexdigest()[:32]
        before = self.collection.get(ids=[row], include=["metadatas"])["metadatas"]
        right = right or bool(before and before[0].get("right"))
        meta = {"kind": "answer", "class": str(class_id), "exercise": exercise, "right": right}
        self.collection.upsert(ids=[row], embeddings=[[1.0]], documents=[""], metadatas=[meta])
        return True

    def counts(self, class_id: str | None, key: str | None) -> dict[str, tuple[int, int]] | None:
        found = self._class(class_id)
        if found is None or not key or not hmac.compare_digest(found["key_hash"], _hash(key)):
            return None
        got = self.collection.get(where={"$and": [{"kind": "answer"}, {"class": str(class_id)}]}, include=["metadatas"])
        out = {ex: (0, 0) for ex in found["exercises"].split(",")}
        for m in got["metadatas"]:
            if m["exercise"] in out:
                answered, right = out[m["exercise"]]
                out[m["exercise"]] = (answered + 1, right + int(bool(m["right"])))
        return out


_RECORDS: dict[tuple, Any] = {}
_RECORDS_LOCK = threading.Lock()
_MEMORY = ClassRecord()


def current() -> ClassRecord | StoreClassRecord:
    """The record of the app's store (one per store), or this process's memory if the store cannot be opened."""
    from inspector import handlers

    s = handlers.base_settings()
    key = (s.chroma_host, s.chroma_port, s.chroma_path)
    with _RECORDS_LOCK:
        if key not in _RECORDS:
            record = StoreClassRecord(s)
            try:
                _ = record.collection
            except Exception as exc:  # noqa: BLE001 (any store failure: the counts stay in this process)
                log.warning(
                    "class links' counts kept in this process's memory: the store could not be opened (%s)", exc
                )
                return _MEMORY
            _RECORDS[key] = record
        return _RECORDS[key]
