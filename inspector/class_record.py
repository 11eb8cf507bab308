"""The teacher's counts for a class link: per exercise, how many students answered and how many got it right.

Where they live: in this process's memory (``RECORD``), not in the store. A class link made on this server counts
the answers of the sessions this process serves; a restart starts every count at zero and makes older teacher links
unknown (make a new class link), and with several processes behind one address each counts only its own sessions.
What is kept is anonymous: a class id, its exercise ids, a hash of the teacher's key and, per exercise, one random
token per student session (never a name, an address or Gradio's session id) with whether it was right before the
reveal. No session can read another's answers; the teacher link reads only the counts of its own class.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

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


RECORD = ClassRecord()
