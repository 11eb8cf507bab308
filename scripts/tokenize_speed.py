"""How long ``retrieval.tokenize.tokenize`` takes per text, by kind of text, against another version of the module.

    git show 5f30b19:retrieval/tokenize.py > /tmp/tokenize_old.py   # before combining marks and NFC
    .venv/bin/python scripts/tokenize_speed.py --baseline /tmp/tokenize_old.py [--repeat 15] [--json]

The texts are the shipped sub-chunks (corpus/cards.jsonl split as the pipeline splits it), by kind: English cards
that are pure ASCII, English cards with a character beyond ASCII (’ — °), the Spanish and Portuguese cards
(Latin-1), the same with typographic punctuation beyond Latin-1 (’ — “”), the same decomposed to NFD (text pasted
from macOS), and a few Russian and Hindi sentences written for this script (no shipped card is in those scripts).
Each kind is tokenized whole, the two versions interleaved ``--repeat`` times; the best run of each is reported
(the least disturbed by other processes), with the 1-minute load average at the start. The BM25 build splits a
pure-ASCII text by byte translation, without ``tokenize`` (``retrieval.bm25``): the ASCII row is what a turn, the
refusal vocabulary and highlighting pay.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import sys
import time
import unicodedata
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _load(path: str):
    spec = importlib.util.spec_from_file_location(f"tokenize_{abs(hash(path))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# About a sub-chunk's length of text in each (no shipped card is in these scripts).
RUSSIAN = [
    "Храните запасные шприц-ручки с инсулином в холодильнике при температуре от 2 до 8 градусов.",
    "Не замораживайте инсулин и не кладите его рядом с морозильной камерой.",
    "Начатую ручку можно хранить при комнатной температуре до 28 дней, вдали от солнца и тепла.",
    "Если вы пропустили дозу метформина, примите её с ближайшим приёмом пищи, но не удваивайте дозу.",
]
HINDI = [
    "बिना खोले इंसुलिन पेन को फ्रिज में 2 से 8 डिग्री पर रखें।",
    "इंसुलिन को जमने न दें और फ्रीज़र के पास न रखें।",
    "खुला हुआ पेन कमरे के तापमान पर 28 दिनों तक रखा जा सकता है, धूप और गर्मी से दूर।",
    "अगर आप मेटफॉर्मिन की खुराक भूल गए हैं, तो अगले भोजन के साथ लें, लेकिन दोहरी खुराक न लें।",
]


def _kinds() -> dict[str, list[str]]:
    from retrieval.corpus import load_cards, split_cards

    chunks = split_cards(load_cards(ROOT / "corpus" / "cards.jsonl"))
    english = [c.text for c in chunks if c.lang.startswith("en")]
    iberian = [c.text for c in chunks if not c.lang.startswith("en")]
    return {
        "english, ASCII": [t for t in english if t.isascii()],
        "english, beyond ASCII": [t for t in english if not t.isascii()],
        "spanish/portuguese": iberian,
        "spanish/portuguese with ’ — “”": [t.replace(", ", " — ", 1) + " “fin”" for t in iberian],
        "spanish/portuguese, NFD": [unicodedata.normalize("NFD", t) for t in iberian],
        "russian (written here)": [" ".join(RUSSIAN)] * 20,
        "hindi (written here)": [" ".join(HINDI)] * 20,
    }


def _best(fn, texts: list[str], best: float) -> float:
    began = time.perf_counter()
    for text in texts:
        fn(text)
    return min(best, time.perf_counter() - began)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", help="another tokenize.py to compare with (e.g. main's, via git show)")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    current = _load(str(ROOT / "retrieval" / "tokenize.py"))
    versions = {"current": current.tokenize}
    if args.baseline:
        versions["baseline"] = _load(args.baseline).tokenize
    load = os.getloadavg()[0]
    rows = []
    for kind, texts in _kinds().items():
        if not texts:
            continue
        for fn in versions.values():
            fn(texts[0])  # build anything built on first use
        best = dict.fromkeys(versions, float("inf"))
        for _ in range(args.repeat):
            for name, fn in versions.items():
                best[name] = _best(fn, texts, best[name])
        row = {"kind": kind, "texts": len(texts), "chars": sum(map(len, texts))}
        row.update({f"{name}_us_per_text": round(1e6 * s / len(texts), 2) for name, s in best.items()})
        if "baseline" in best:
            row["change_pct"] = round(100 * (best["current"] / best["baseline"] - 1), 1)
        rows.append(row)
    meta = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load_1min": round(load, 2),
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "python": sys.version.split()[0],
        "repeat": args.repeat,
    }
    if args.json:
        print(json.dumps({"meta": meta, "rows": rows}, indent=1))
        return
    print(
        f"# tokenize() per text, best of {args.repeat}; {meta['date']}, load {meta['load_1min']}, "
        f"{meta['cores']} cores, Python {meta['python']}"
    )
    cols = [k for k in rows[0] if k != "kind"]
    print("| kind | " + " | ".join(cols) + " |")
    print("|---|" + "---:|" * len(cols))
    for r in rows:
        print(f"| {r['kind']} | " + " | ".join(str(r.get(c, "")) for c in cols) + " |")


if __name__ == "__main__":
    main()
