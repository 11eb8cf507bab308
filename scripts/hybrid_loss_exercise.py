"""Write ``corpus/exercise_hybrid_loss.json``: the classroom's "the hybrid does not always win" exercise, taken from
the real pipeline on the shipped labeled set (default settings).

Usage: ``python scripts/hybrid_loss_exercise.py [--turn q038] [--check]``. It lists every labeled turn where fusion
ranks the most relevant card below its rank in one branch alone (card level), and writes the chosen one (by default
q038, when its exercise, the top 5 cards of each branch fused with the turn's k and weights, shows the same loss).
``--check`` writes nothing and exits 1 if the shipped file differs from what the pipeline gives now.
``tests/test_exercises.py`` runs the same check.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> int:
    from retrieval.corpus import load_shipped
    from retrieval.exercise_set import HYBRID_LOSS_FILE, HYBRID_LOSS_TURN
    from retrieval.exercise_turns import build_hybrid_loss, hybrid_losses
    from retrieval.pipeline import HybridRetriever
    from retrieval.settings import Settings

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turn", default=HYBRID_LOSS_TURN, help="the labeled turn's id (default: %(default)s)")
    parser.add_argument("--check", action="store_true", help="compare with the shipped file, write nothing")
    args = parser.parse_args()
    settings = Settings.from_env()
    dataset = load_shipped(settings.corpus_path)
    retriever = HybridRetriever(settings, progress=lambda done, total: None)
    losses = hybrid_losses(dataset, retriever, settings)
    for loss in losses:
        print(f"{loss.turn_id} {loss.text!r}: {loss.card} branch ranks {loss.branch_ranks}, fused #{loss.fused_rank}")
    exercise = build_hybrid_loss(dataset, retriever, settings, losses, args.turn)
    text = json.dumps(exercise.to_dict(), ensure_ascii=False, indent=2) + "\n"
    if args.check:
        same = HYBRID_LOSS_FILE.exists() and HYBRID_LOSS_FILE.read_text(encoding="utf-8") == text
        print("the shipped exercise matches the pipeline" if same else "the shipped exercise DIFFERS from the pipeline")
        return 0 if same else 1
    HYBRID_LOSS_FILE.write_text(text, encoding="utf-8")
    print(f"wrote {HYBRID_LOSS_FILE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
