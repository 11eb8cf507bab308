"""Medicine brand names and the generic names they stand for: a turn that names its medicine by a brand ("is motrin
ok for period cramps") is searched with the generic beside it ("is motrin (ibuprofen) ok ..."), so the cards,
which name a medicine by its generic, can be found and judged to answer it.

People name their medicines by the box; cards (and package leaflets, and this project's synthetic cards) by the
active ingredient. Neither branch can bridge the two alone: BM25 never matches "norvasc" to "amlodipine", and the
bundled English models tie few brands to their generic (the cross-encoder scored medqa's "what is norvasc for"
-7.2 to -9.6 against the card that answers it, and the refusal rule refused it: docs/explanation/refusal.md).

The table holds widely sold brands (United States, Latin America, Brazil) with one active ingredient, each mapped
to its generic's English name (both names where two are in common use: acetaminophen, paracetamol). Left out: brands
that are also everyday words in English, Spanish or Portuguese ("Frontal", "Bayer", "Actos", "Concerta"),
combinations of several ingredients, and this project's own synthetic products (Glucavex, Tirovanta...), whose
cards name the generic already. Only a brand written as a whole word is matched; the generic is added the first
time the turn names the brand, and not at all when the turn names the generic itself.
"""

from __future__ import annotations

import re

_ACETAMINOPHEN = "acetaminophen, paracetamol"
_ALBUTEROL = "albuterol, salbutamol"
_HYOSCINE = "hyoscine butylbromide"

# brand (lower case) -> its generic name, or the names in common use separated by ", "
BRANDS: dict[str, str] = {
    # pain, fever
    "tylenol": _ACETAMINOPHEN,
    "panadol": _ACETAMINOPHEN,
    "tempra": _ACETAMINOPHEN,
    "tafirol": _ACETAMINOPHEN,
    "dolex": _ACETAMINOPHEN,
    "advil": "ibuprofen",
    "motrin": "ibuprofen",
    "nurofen": "ibuprofen",
    "ibupirac": "ibuprofen",
    "aleve": "naproxen",
    "naprosyn": "naproxen",
    "ecotrin": "aspirin",
    "novalgina": "dipyrone, metamizole",
    "ultram": "tramadol",
    "oxycontin": "oxycodone",
    "celebrex": "celecoxib",
    "voltaren": "diclofenac",
    "cataflam": "diclofenac",
    # heart, blood pressure, cholesterol, blood thinners
    "norvasc": "amlodipine",
    "lipitor": "atorvastatin",
    "zocor": "simvastatin",
    "crestor": "rosuvastatin",
    "pravachol": "pravastatin",
    "zestril": "lisinopril",
    "prinivil": "lisinopril",
    "vasotec": "enalapril",
    "altace": "ramipril",
    "cozaar": "losartan",
    "aradois": "losartan",
    "diovan": "valsartan",
    "benicar": "olmesartan",
    "micardis": "telmisartan",
    "avapro": "irbesartan",
    "lopressor": "metoprolol",
    "toprol": "metoprolol",
    "selozok": "metoprolol",
    "tenormin": "atenolol",
    "coreg": "carvedilol",
    "lasix": "furosemide",
    "aldactone": "spironolactone",
    "hctz": "hydrochlorothiazide",
    "lanoxin": "digoxin",
    "cordarone": "amiodarone",
    "coumadin": "warfarin",
    "jantoven": "warfarin",
    "eliquis": "apixaban",
    "xarelto": "rivaroxaban",
    "pradaxa": "dabigatran",
    "plavix": "clopidogrel",
    "brilinta": "ticagrelor",
    # diabetes
    "glucophage": "metformin",
    "glifage": "metformin",
    "glucotrol": "glipizide",
    "amaryl": "glimepiride",
    "januvia": "sitagliptin",
    "jardiance": "empagliflozin",
    "farxiga": "dapagliflozin",
    "forxiga": "dapagliflozin",
    "invokana": "canagliflozin",
    "ozempic": "semaglutide",
    "wegovy": "semaglutide",
    "rybelsus": "semaglutide",
    "trulicity": "dulaglutide",
    "victoza": "liraglutide",
    "mounjaro": "tirzepatide",
    "lantus": "insulin glargine",
    "basaglar": "insulin glargine",
    "toujeo": "insulin glargine",
    "levemir": "insulin detemir",
    "tresiba": "insulin degludec",
    "humalog": "insulin lispro",
    "novolog": "insulin aspart",
    "novorapid": "insulin aspart",
    "apidra": "insulin glulisine",
    # thyroid, bones, gout
    "synthroid": "levothyroxine",
    "levoxyl": "levothyroxine",
    "euthyrox": "levothyroxine",
    "puran": "levothyroxine",
    "fosamax": "alendronate",
    "boniva": "ibandronate",
    "actonel": "risedronate",
    "zyloprim": "allopurinol",
    "uloric": "febuxostat",
    "colcrys": "colchicine",
    # stomach, bowel
    "prilosec": "omeprazole",
    "nexium": "esomeprazole",
    "prevacid": "lansoprazole",
    "protonix": "pantoprazole",
    "pepcid": "famotidine",
    "imodium": "loperamide",
    "dulcolax": "bisacodyl",
    "miralax": "polyethylene glycol",
    "colace": "docusate",
    "plasil": "metoclopramide",
    "reglan": "metoclopramide",
    "luftal": "simethicone",
    "buscopan": _HYOSCINE,
    "buscapina": _HYOSCINE,
    "dramamine": "dimenhydrinate",
    "dramin": "dimenhydrinate",
    # mood, sleep, nerves, seizures
    "zoloft": "sertraline",
    "prozac": "fluoxetine",
    "lexapro": "escitalopram",
    "celexa": "citalopram",
    "paxil": "paroxetine",
    "wellbutrin": "bupropion",
    "effexor": "venlafaxine",
    "cymbalta": "duloxetine",
    "desyrel": "trazodone",
    "remeron": "mirtazapine",
    "xanax": "alprazolam",
    "ativan": "lorazepam",
    "valium": "diazepam",
    "klonopin": "clonazepam",
    "rivotril": "clonazepam",
    "ambien": "zolpidem",
    "neurontin": "gabapentin",
    "lyrica": "pregabalin",
    "keppra": "levetiracetam",
    "lamictal": "lamotrigine",
    "tegretol": "carbamazepine",
    "dilantin": "phenytoin",
    "topamax": "topiramate",
    "depakote": "divalproex, valproate",
    "seroquel": "quetiapine",
    "zyprexa": "olanzapine",
    "risperdal": "risperidone",
    "abilify": "aripiprazole",
    "ritalin": "methylphenidate",
    # allergy, breathing
    "zyrtec": "cetirizine",
    "claritin": "loratadine",
    "allegra": "fexofenadine",
    "benadryl": "diphenhydramine",
    "xyzal": "levocetirizine",
    "singulair": "montelukast",
    "flonase": "fluticasone",
    "flovent": "fluticasone",
    "ventolin": _ALBUTEROL,
    "proair": _ALBUTEROL,
    "proventil": _ALBUTEROL,
    "aerolin": _ALBUTEROL,
    "pulmicort": "budesonide",
    "spiriva": "tiotropium",
    "sudafed": "pseudoephedrine",
    "mucinex": "guaifenesin",
    "epipen": "epinephrine",
    # infections
    "amoxil": "amoxicillin",
    "zithromax": "azithromycin",
    "cipro": "ciprofloxacin",
    "levaquin": "levofloxacin",
    "keflex": "cephalexin",
    "flagyl": "metronidazole",
    "vibramycin": "doxycycline",
    "diflucan": "fluconazole",
    "valtrex": "valacyclovir",
    "zovirax": "acyclovir",
    "tamiflu": "oseltamivir",
    # other
    "flomax": "tamsulosin",
    "proscar": "finasteride",
    "viagra": "sildenafil",
    "cialis": "tadalafil",
    "plaquenil": "hydroxychloroquine",
    "trexall": "methotrexate",
    "medrol": "methylprednisolone",
}

_WORD = re.compile(r"(?<![\w-])[A-Za-z][A-Za-z0-9]*(?![\w-])")


def _named(generic: str, words: set[str]) -> bool:
    """Whether a text of ``words`` names ``generic`` already (every word of one of its names)."""
    return any(set(name.split()) <= words for name in generic.split(", "))


def generics_in(text: str) -> list[tuple[str, str]]:
    """The brands ``text`` names (as written, each once) with their generic, leaving out a brand whose generic the
    text names already."""
    words = set(re.findall(r"\w+", text.casefold()))
    found: dict[str, tuple[str, str]] = {}
    for match in _WORD.finditer(text):
        brand = match.group().casefold()
        generic = BRANDS.get(brand)
        if generic and brand not in found and not _named(generic, words):
            found[brand] = (match.group(), generic)
    return list(found.values())


def with_generics(text: str) -> str:
    """``text`` with each brand it names followed by its generic in brackets ("motrin" -> "motrin (ibuprofen)"), the
    first time it is named, unless the text names that generic already; unchanged when it names no brand."""
    brands = {brand.casefold(): generic for brand, generic in generics_in(text)}
    if not brands:
        return text

    def add(match: re.Match[str]) -> str:
        generic = brands.pop(match.group().casefold(), None)
        return f"{match.group()} ({generic})" if generic else match.group()

    return _WORD.sub(add, text)
