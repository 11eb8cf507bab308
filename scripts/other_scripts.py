"""Turns written in Cyrillic, Arabic, Greek and Devanagari through the real pipeline: answered or refused.

    .venv/bin/python scripts/other_scripts.py                 # the shipped (English) cards
    .venv/bin/python scripts/other_scripts.py --russian-cards # six synthetic Russian cards (tests/data)

For each script, four turns about the shipped cards (storing insulin, a missed metformin dose, insulin on a plane,
symptoms of low blood sugar) and four off-topic ones (the weather, the capital of France, a recipe, the football
world cup), written for this script. With ``--russian-cards`` the corpus is tests/data/russian_cards.jsonl: Russian
turns about it and off it, and two English turns about it. Each turn's line gives the detected language
(``retrieval.refusal_vocabulary.language``), the decision, the cross-encoder score, multilingual-e5's cosine when it was
asked, the top card and the reason; then the counts, the date and the load. The dense store is built in a
temporary folder (``--chroma`` to keep it), never in the app's.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
for key, value in (
    ("HF_HUB_OFFLINE", "1"),
    ("TOKENIZERS_PARALLELISM", "false"),
    ("REFUSAL_CALIBRATE_ON_INDEX", "false"),
):
    os.environ.setdefault(key, value)

IN_DOMAIN = {
    "ru": [
        "Как хранить инсулин?",
        "Что делать, если я пропустил дозу метформина?",
        "Можно ли брать инсулин в самолёт?",
        "Какие симптомы гипогликемии?",
    ],
    "ar": [
        "كيف أحفظ الأنسولين؟",
        "ماذا أفعل إذا نسيت جرعة الميتفورمين؟",
        "هل يمكنني أخذ الأنسولين في الطائرة؟",
        "ما هي أعراض انخفاض السكر في الدم؟",
    ],
    "el": [
        "Πώς αποθηκεύω την ινσουλίνη;",
        "Τι κάνω αν ξέχασα μια δόση μετφορμίνης;",
        "Μπορώ να πάρω ινσουλίνη στο αεροπλάνο;",
        "Ποια είναι τα συμπτώματα της υπογλυκαιμίας;",
    ],
    "hi": [
        "मैं इंसुलिन कैसे रखूँ?",
        "मैं अपनी मेटफॉर्मिन की खुराक भूल गया, क्या करूँ?",
        "क्या मैं हवाई जहाज़ में इंसुलिन ले जा सकता हूँ?",
        "हाइपोग्लाइसीमिया के लक्षण क्या हैं?",
    ],
}
OFF_TOPIC = {
    "ru": [
        "Какая погода в Москве?",
        "Какая столица Франции?",
        "Как приготовить борщ?",
        "Кто выиграл чемпионат мира по футболу?",
    ],
    "ar": ["كيف الطقس في القاهرة؟", "ما هي عاصمة فرنسا؟", "كيف أطبخ الكبسة؟", "من فاز بكأس العالم لكرة القدم؟"],
    "el": [
        "Τι καιρό κάνει στην Αθήνα;",
        "Ποια είναι η πρωτεύουσα της Γαλλίας;",
        "Πώς φτιάχνω μουσακά;",
        "Ποιος κέρδισε το Μουντιάλ;",
    ],
    "hi": ["दिल्ली में मौसम कैसा है?", "फ्रांस की राजधानी क्या है?", "पनीर बटर मसाला कैसे बनाएं?", "फुटबॉल विश्व कप किसने जीता?"],
}
RUSSIAN_CARDS = ROOT / "tests" / "data" / "russian_cards.jsonl"
RUSSIAN_IN = {
    "ru": [
        "Как хранить инсулин?",
        "Что делать, если я пропустил дозу метформина?",
        "Можно ли пить грейпфрутовый сок со статинами?",
        "Куда выбросить иглы?",
        "Можно ли брать инсулин в самолёт?",
        "Какие признаки низкого сахара?",
    ],
    "en": ["How should I store insulin?", "I missed my metformin dose, what now?"],
}
RUSSIAN_OFF = {"ru": OFF_TOPIC["ru"], "en": ["What is the capital of France?"]}


def _value(decision, name: str) -> str:
    test = next((t for t in decision.tests if t.name == name), None)
    return "-" if test is None or test.value is None else f"{test.value:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--russian-cards", action="store_true", help="the six synthetic Russian cards instead")
    parser.add_argument("--chroma", help="folder for the dense store (default: a temporary one)")
    args = parser.parse_args()
    from retrieval.refusal_vocabulary import language
    from retrieval.settings import Settings

    chroma = args.chroma or tempfile.mkdtemp(prefix="other-scripts-")
    patient = dict(bm25_timeout_ms=60_000, dense_timeout_ms=60_000, rerank_timeout_ms=60_000)
    if args.russian_cards:
        from retrieval.corpus import load_cards, split_cards
        from retrieval.pipeline import HybridRetriever

        s = Settings.from_env(corpus_path=str(RUSSIAN_CARDS), chroma_path=chroma, **patient)
        retriever = HybridRetriever(s, chunks=split_cards(load_cards(RUSSIAN_CARDS), 400), progress=lambda d, t: None)
        sets = (("about the cards", RUSSIAN_IN), ("off-topic", RUSSIAN_OFF))
    else:
        from retrieval.retriever_cache import get_retriever

        s = Settings.from_env(chroma_path=chroma, **patient)
        retriever = get_retriever(s)
        sets = (("about the cards", IN_DOMAIN), ("off-topic", OFF_TOPIC))
    load = os.getloadavg()[0]
    counts = []
    for kind, by_lang in sets:
        for lang, turns in by_lang.items():
            answered = 0
            for turn in turns:
                out = retriever.retrieve(turn, s)
                d = out.refusal
                ranked = out.final or out.cut or out.reranked
                answered += not d.refused
                print(
                    f"{kind:15} {lang} {language(turn) or '-':5} {'refused ' if d.refused else 'answered'} "
                    f"ce={_value(d, 'cross-encoder'):>7} e5={_value(d, 'multilingual cosine'):>5} "
                    f"top={ranked[0].parent_id if ranked else '-'} | {turn} | {d.reason}",
                    flush=True,
                )
            counts.append((kind, lang, answered, len(turns)))
    print(
        f"\n# {'six Russian cards' if args.russian_cards else 'shipped cards'}; "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, load {load:.2f} (1 min), {os.cpu_count()} cores"
    )
    print("| turns | language | answered |\n|---|---|---:|")
    for kind, lang, answered, n in counts:
        print(f"| {kind} | {lang} | {answered}/{n} |")


if __name__ == "__main__":
    main()
