"""``python -m retrieval``: the core's commands (``query``) and the measuring tools' (``eval``, ``bench``, ``lab``)."""

from retrieval.cli import main
from retrieval.evaluation.cli import register as register_evaluation

raise SystemExit(main(registrars=(register_evaluation,)))
