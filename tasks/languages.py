"""Language codes, for every stage.

Every stage stores every language as a FLORES-200 code (``kaz_Cyrl``,
``eng_Latn``, ``zho_Hans``: an ISO 639-3 language code, ``_``, an ISO 15924
script code) because that is the key of the evaluation data (FLORES-200) and of
the NLLB-200 family of models. Inputs arrive with other conventions (ISO 639-1,
macro-language codes, BCP-47 / CLDR tags, NTREX's ``aze-Latn``), so
:func:`to_flores` maps them; anything it cannot map with confidence is an
:class:`UnknownLanguageError` rather than a guess, because a silently wrong
language label poisons a corpus.

Everything here is literal data: the module must work without the FLORES files
(they are not on users' machines) and without network access. `LangCodes` is the config
field type of a list of such codes, checked when a config is validated; `GROUP_PREFIX` marks a
metric row's `src_lang` that names a group of languages rather than one.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Annotated, Any

from pydantic import AfterValidator

__all__ = [
    "DEFAULT_SCRIPT",
    "FLORES200_CODES",
    "GROUP_PREFIX",
    "ISO639_1_TO_3",
    "ISO639_2B_TO_3",
    "LangCodes",
    "LangKeyed",
    "MACROLANGUAGE_TO_FLORES",
    "UNSPACED_SCRIPTS",
    "UnknownLanguageError",
    "cldr_locale",
    "group_code",
    "hub_language",
    "is_group_code",
    "is_unspaced_script",
    "script_of",
    "to_flores",
]

# The 204 language varieties of FLORES-200 / NLLB-200, as named by the
# ``*.dev`` files of the FLORES-200 release.
FLORES200_CODES: frozenset[str] = frozenset(
    {
        "ace_Arab", "ace_Latn", "acm_Arab", "acq_Arab", "aeb_Arab", "afr_Latn", "ajp_Arab", "aka_Latn",
        "als_Latn", "amh_Ethi", "apc_Arab", "arb_Arab", "arb_Latn", "ars_Arab", "ary_Arab", "arz_Arab",
        "asm_Beng", "ast_Latn", "awa_Deva", "ayr_Latn", "azb_Arab", "azj_Latn", "bak_Cyrl", "bam_Latn",
        "ban_Latn", "bel_Cyrl", "bem_Latn", "ben_Beng", "bho_Deva", "bjn_Arab", "bjn_Latn", "bod_Tibt",
        "bos_Latn", "bug_Latn", "bul_Cyrl", "cat_Latn", "ceb_Latn", "ces_Latn", "cjk_Latn", "ckb_Arab",
        "crh_Latn", "cym_Latn", "dan_Latn", "deu_Latn", "dik_Latn", "dyu_Latn", "dzo_Tibt", "ell_Grek",
        "eng_Latn", "epo_Latn", "est_Latn", "eus_Latn", "ewe_Latn", "fao_Latn", "fij_Latn", "fin_Latn",
        "fon_Latn", "fra_Latn", "fur_Latn", "fuv_Latn", "gaz_Latn", "gla_Latn", "gle_Latn", "glg_Latn",
        "grn_Latn", "guj_Gujr", "hat_Latn", "hau_Latn", "heb_Hebr", "hin_Deva", "hne_Deva", "hrv_Latn",
        "hun_Latn", "hye_Armn", "ibo_Latn", "ilo_Latn", "ind_Latn", "isl_Latn", "ita_Latn", "jav_Latn",
        "jpn_Jpan", "kab_Latn", "kac_Latn", "kam_Latn", "kan_Knda", "kas_Arab", "kas_Deva", "kat_Geor",
        "kaz_Cyrl", "kbp_Latn", "kea_Latn", "khk_Cyrl", "khm_Khmr", "kik_Latn", "kin_Latn", "kir_Cyrl",
        "kmb_Latn", "kmr_Latn", "knc_Arab", "knc_Latn", "kon_Latn", "kor_Hang", "lao_Laoo", "lij_Latn",
        "lim_Latn", "lin_Latn", "lit_Latn", "lmo_Latn", "ltg_Latn", "ltz_Latn", "lua_Latn", "lug_Latn",
        "luo_Latn", "lus_Latn", "lvs_Latn", "mag_Deva", "mai_Deva", "mal_Mlym", "mar_Deva", "min_Arab",
        "min_Latn", "mkd_Cyrl", "mlt_Latn", "mni_Beng", "mos_Latn", "mri_Latn", "mya_Mymr", "nld_Latn",
        "nno_Latn", "nob_Latn", "npi_Deva", "nso_Latn", "nus_Latn", "nya_Latn", "oci_Latn", "ory_Orya",
        "pag_Latn", "pan_Guru", "pap_Latn", "pbt_Arab", "pes_Arab", "plt_Latn", "pol_Latn", "por_Latn",
        "prs_Arab", "quy_Latn", "ron_Latn", "run_Latn", "rus_Cyrl", "sag_Latn", "san_Deva", "sat_Olck",
        "scn_Latn", "shn_Mymr", "sin_Sinh", "slk_Latn", "slv_Latn", "smo_Latn", "sna_Latn", "snd_Arab",
        "som_Latn", "sot_Latn", "spa_Latn", "srd_Latn", "srp_Cyrl", "ssw_Latn", "sun_Latn", "swe_Latn",
        "swh_Latn", "szl_Latn", "tam_Taml", "taq_Latn", "taq_Tfng", "tat_Cyrl", "tel_Telu", "tgk_Cyrl",
        "tgl_Latn", "tha_Thai", "tir_Ethi", "tpi_Latn", "tsn_Latn", "tso_Latn", "tuk_Latn", "tum_Latn",
        "tur_Latn", "twi_Latn", "tzm_Tfng", "uig_Arab", "ukr_Cyrl", "umb_Latn", "urd_Arab", "uzn_Latn",
        "vec_Latn", "vie_Latn", "war_Latn", "wol_Latn", "xho_Latn", "ydd_Hebr", "yor_Latn", "yue_Hant",
        "zho_Hans", "zho_Hant", "zsm_Latn", "zul_Latn",
    }
)  # fmt: skip

# Script used when a language that FLORES-200 has in several scripts is given
# without one. The choice is the script in wider present-day use (for these
# languages, the official or de-facto standard orthography).
DEFAULT_SCRIPT: Mapping[str, str] = MappingProxyType(
    {
        "ace": "Latn",  # Acehnese: Latin is standard; Jawi is traditional.
        "arb": "Arab",  # Modern Standard Arabic; arb_Latn is romanised Arabic.
        "bjn": "Latn",  # Banjar: Latin is standard; Jawi is traditional.
        "kas": "Arab",  # Kashmiri: Perso-Arabic is the official script.
        "knc": "Latn",  # Central Kanuri: Latin is the standard orthography; Ajami is traditional.
        "min": "Latn",  # Minangkabau: Latin is standard; Jawi is traditional.
        "taq": "Latn",  # Tamasheq: Latin is the official orthography in Mali; Tifinagh is traditional.
        "zho": "Hans",  # Chinese: Simplified is used by most speakers (PRC, Singapore).
    }
)

# Scripts written without spaces between words: text in them needs a
# word segmenter (or character-level handling) wherever whitespace is assumed.
UNSPACED_SCRIPTS: frozenset[str] = frozenset({"Jpan", "Hans", "Hant", "Thai", "Khmr", "Laoo", "Mymr", "Tibt"})

# ISO 639-1 -> ISO 639-3 for every ISO 639-1 language that FLORES-200 covers.
# Values are the official ISO 639-3 code, which is a macro-language code where
# the ISO 639-1 code denotes one (``sw`` -> ``swa``); MACROLANGUAGE_TO_FLORES
# then picks the FLORES variety.
ISO639_1_TO_3: Mapping[str, str] = MappingProxyType(
    {
        "af": "afr", "ak": "aka", "am": "amh", "ar": "ara", "as": "asm", "ay": "aym", "az": "aze",
        "ba": "bak", "be": "bel", "bg": "bul", "bm": "bam", "bn": "ben", "bo": "bod", "bs": "bos",
        "ca": "cat", "cs": "ces", "cy": "cym", "da": "dan", "de": "deu", "dz": "dzo", "ee": "ewe",
        "el": "ell", "en": "eng", "eo": "epo", "es": "spa", "et": "est", "eu": "eus", "fa": "fas",
        "ff": "ful", "fi": "fin", "fj": "fij", "fo": "fao", "fr": "fra", "ga": "gle", "gd": "gla",
        "gl": "glg", "gn": "grn", "gu": "guj", "ha": "hau", "he": "heb", "hi": "hin", "hr": "hrv",
        "ht": "hat", "hu": "hun", "hy": "hye", "id": "ind", "ig": "ibo", "is": "isl", "it": "ita",
        "ja": "jpn", "jv": "jav", "ka": "kat", "kg": "kon", "ki": "kik", "kk": "kaz", "km": "khm",
        "kn": "kan", "ko": "kor", "kr": "kau", "ks": "kas", "ku": "kur", "ky": "kir", "lb": "ltz",
        "lg": "lug", "li": "lim", "ln": "lin", "lo": "lao", "lt": "lit", "lv": "lav", "mg": "mlg",
        "mi": "mri", "mk": "mkd", "ml": "mal", "mn": "mon", "mr": "mar", "ms": "msa", "mt": "mlt",
        "my": "mya", "nb": "nob", "ne": "nep", "nl": "nld", "nn": "nno", "no": "nor", "ny": "nya",
        "oc": "oci", "om": "orm", "or": "ori", "pa": "pan", "pl": "pol", "ps": "pus", "pt": "por",
        "qu": "que", "rn": "run", "ro": "ron", "ru": "rus", "rw": "kin", "sa": "san", "sc": "srd",
        "sd": "snd", "sg": "sag", "si": "sin", "sk": "slk", "sl": "slv", "sm": "smo", "sn": "sna",
        "so": "som", "sq": "sqi", "sr": "srp", "ss": "ssw", "st": "sot", "su": "sun", "sv": "swe",
        "sw": "swa", "ta": "tam", "te": "tel", "tg": "tgk", "th": "tha", "ti": "tir", "tk": "tuk",
        "tl": "tgl", "tn": "tsn", "tr": "tur", "ts": "tso", "tt": "tat", "tw": "twi", "ug": "uig",
        "uk": "ukr", "ur": "urd", "uz": "uzb", "vi": "vie", "wo": "wol", "xh": "xho", "yi": "yid",
        "yo": "yor", "zh": "zho", "zu": "zul",
    }
)  # fmt: skip

# Withdrawn ISO 639-1 codes still found in old data (Java locales, Android).
_DEPRECATED_ISO639_1: Mapping[str, str] = MappingProxyType({"iw": "heb", "in": "ind", "ji": "yid", "mo": "ron"})

# ISO 639-2/B (bibliographic) codes that differ from the ISO 639-3 (= 639-2/T) code.
ISO639_2B_TO_3: Mapping[str, str] = MappingProxyType(
    {
        "alb": "sqi", "arm": "hye", "baq": "eus", "bur": "mya", "chi": "zho", "cze": "ces", "dut": "nld",
        "fre": "fra", "geo": "kat", "ger": "deu", "gre": "ell", "ice": "isl", "mac": "mkd", "mao": "mri",
        "may": "msa", "per": "fas", "rum": "ron", "slo": "slk", "tib": "bod", "wel": "cym",
    }
)  # fmt: skip

# ISO 639-3 macro-language (or alternative individual-language) code -> the
# language part of the one FLORES-200 variety that stands for it.
MACROLANGUAGE_TO_FLORES: Mapping[str, str] = MappingProxyType(
    {
        "ara": "arb",  # Arabic -> Modern Standard Arabic
        "aym": "ayr",  # Aymara -> Central Aymara
        "aze": "azj",  # Azerbaijani -> North Azerbaijani (Latin); Arabic script / Iran -> azb
        "cmn": "zho",  # Mandarin Chinese -> FLORES "zho" (written Mandarin)
        "din": "dik",  # Dinka -> Southwestern Dinka
        "ekk": "est",  # Standard Estonian (individual code) -> FLORES est
        "fas": "pes",  # Persian -> Western Persian (Iran); Afghanistan -> prs (Dari)
        "fil": "tgl",  # Filipino -> Tagalog
        "ful": "fuv",  # Fulah -> Nigerian Fulfulde
        "gug": "grn",  # Paraguayan Guarani (individual code) -> FLORES grn
        "kau": "knc",  # Kanuri -> Central Kanuri
        "kur": "kmr",  # Kurdish -> Northern Kurdish (Kurmanji); Arabic script -> ckb (Sorani)
        "lav": "lvs",  # Latvian -> Standard Latvian
        "mlg": "plt",  # Malagasy -> Plateau Malagasy
        "mon": "khk",  # Mongolian -> Halh Mongolian
        "msa": "zsm",  # Malay -> Standard Malay
        "nep": "npi",  # Nepali -> Nepali (individual language)
        "nor": "nob",  # Norwegian -> Bokmal
        "ori": "ory",  # Oriya -> Odia (individual language)
        "orm": "gaz",  # Oromo -> West Central Oromo
        "pus": "pbt",  # Pashto -> Southern Pashto
        "que": "quy",  # Quechua -> Ayacucho Quechua
        "sqi": "als",  # Albanian -> Tosk Albanian (the standard)
        "swa": "swh",  # Swahili -> Swahili (individual language)
        "tmh": "taq",  # Tamashek -> Tamasheq
        "uzb": "uzn",  # Uzbek -> Northern Uzbek
        "yid": "ydd",  # Yiddish -> Eastern Yiddish
    }
)

# (ISO 639-3 code as given, script or region) -> a different FLORES language:
# the macro-language's variety that is written in that script / spoken there.
_LANGUAGE_BY_SCRIPT_OR_REGION: Mapping[tuple[str, str], str] = MappingProxyType(
    {
        ("aze", "Arab"): "azb",  # South Azerbaijani is written in Arabic script
        ("aze", "IR"): "azb",
        ("kur", "Arab"): "ckb",  # Kurdish in Arabic script is Central Kurdish (Sorani)
        ("fas", "AF"): "prs",  # Persian of Afghanistan is Dari
    }
)

# (FLORES language, region) -> the script that region writes it in, when it is
# not the language's default. A script FLORES lacks makes the code unknown
# (``pa-PK`` is Shahmukhi Punjabi, not pan_Guru) instead of a wrong guess.
_SCRIPT_BY_REGION: Mapping[tuple[str, str], str] = MappingProxyType(
    {
        ("zho", "TW"): "Hant", ("zho", "HK"): "Hant", ("zho", "MO"): "Hant",
        ("zho", "CN"): "Hans", ("zho", "SG"): "Hans", ("zho", "MY"): "Hans",
        ("yue", "CN"): "Hans",
        ("pan", "PK"): "Arab",
        ("uzn", "AF"): "Arab",
        ("khk", "CN"): "Mong",
    }
)  # fmt: skip

# FLORES code -> CLDR locale where the derivation in cldr_locale would miss or
# pick a less fitting locale. CLDR has no locales for the Arabic varieties, so
# they get the regional Arabic locale of where they are spoken.
_CLDR_OVERRIDES: Mapping[str, str] = MappingProxyType(
    {
        "tgl_Latn": "fil",  # CLDR names the Philippine standard "fil"
        "nob_Latn": "nb",
        "kor_Hang": "ko",  # CLDR gives Korean the script "Kore" (Hangul + Han)
        "prs_Arab": "fa_AF",  # CLDR's fa_AF is Dari
        "azb_Arab": "az_Arab",  # CLDR's az_Arab is South Azerbaijani (Iran)
        "fuv_Latn": "ff_Latn_NG",  # Fulah as written in Nigeria
        "twi_Latn": "ak",  # CLDR covers Twi under Akan
        "acm_Arab": "ar_IQ",  # Mesopotamian Arabic
        "acq_Arab": "ar_YE",  # Ta'izzi-Adeni Arabic
        "aeb_Arab": "ar_TN",  # Tunisian Arabic
        "ajp_Arab": "ar_JO",  # South Levantine Arabic
        "apc_Arab": "ar_SY",  # North Levantine Arabic
        "ars_Arab": "ar_SA",  # Najdi Arabic
        "ary_Arab": "ar_MA",  # Moroccan Arabic
        "arz_Arab": "ar_EG",  # Egyptian Arabic
    }
)

_FLORES_BY_LOWER: dict[str, str] = {c.lower(): c for c in FLORES200_CODES}
_SCRIPTS_BY_LANGUAGE: dict[str, frozenset[str]] = {
    lang: frozenset(c[4:] for c in FLORES200_CODES if c[:3] == lang) for lang in {c[:3] for c in FLORES200_CODES}
}
_FLORES_SCRIPTS: frozenset[str] = frozenset(c[4:] for c in FLORES200_CODES)
_SUBTAG_SPLIT = re.compile(r"[-_]")
# Macro-languages that BCP-47 allows an extended language subtag after (IANA registry).
_EXTLANG_PREFIXES: frozenset[str] = frozenset({"ara", "kok", "lav", "msa", "swa", "uzb", "zho"})


class UnknownLanguageError(ValueError):
    """A language code that cannot be mapped to exactly one FLORES-200 code.

    Raised instead of guessing, so a wrong label never reaches the corpus; the
    message names the code and, when there are any, close FLORES codes.
    """

    def __init__(self, code: str, suggestions: Sequence[str] = (), detail: str = "") -> None:
        self.code = code
        self.suggestions: tuple[str, ...] = tuple(suggestions)
        self.detail = detail
        message = f"unknown language code {code!r}: not a FLORES-200 language"
        if detail:
            message += f" ({detail})"
        if self.suggestions:
            message += f"; did you mean {', '.join(self.suggestions)}?"
        super().__init__(message)

    def __reduce__(self) -> tuple[type[UnknownLanguageError], tuple[str, tuple[str, ...], str]]:
        # Keep the exception picklable (worker processes send it back).
        return (type(self), (self.code, self.suggestions, self.detail))


def _suggest(text: str, language: str | None = None) -> list[str]:
    """Close FLORES codes for an unknown ``text``: same language first, then spelling."""
    found: list[str] = []
    if language is not None and language in _SCRIPTS_BY_LANGUAGE:
        found.extend(sorted(f"{language}_{s}" for s in _SCRIPTS_BY_LANGUAGE[language]))
    lowered = text.lower().replace("-", "_")
    for match in difflib.get_close_matches(lowered, list(_FLORES_BY_LOWER), n=3, cutoff=0.7):
        if _FLORES_BY_LOWER[match] not in found:
            found.append(_FLORES_BY_LOWER[match])
    return found[:5]


def _iso639_3(subtag: str) -> str | None:
    """ISO 639-3 code for a lower-case 2- or 3-letter language subtag, or None."""
    if len(subtag) == 2:
        return ISO639_1_TO_3.get(subtag) or _DEPRECATED_ISO639_1.get(subtag)
    return ISO639_2B_TO_3.get(subtag, subtag)


def _flores_language(iso3: str) -> str | None:
    """The FLORES language part for an ISO 639-3 code, or None if FLORES lacks it."""
    language = MACROLANGUAGE_TO_FLORES.get(iso3, iso3)
    return language if language in _SCRIPTS_BY_LANGUAGE else None


def to_flores(code: str) -> str:
    """Map a language code to its FLORES-200 code, so the corpus has one key per language.

    Accepts (case-insensitively, ``-`` or ``_`` as separator): FLORES-200 codes
    (returned unchanged); ISO 639-1, 639-2/B and 639-3 codes, macro-language
    codes mapped to their FLORES variety (``sw`` -> ``swh_Latn``); and tags of
    the form ``language[-extlang][-Script][-REGION]`` (BCP-47, CLDR/POSIX,
    NTREX ``aze-Latn``). A script, or a region that implies one (``zh-TW``),
    picks among a language's FLORES scripts; otherwise DEFAULT_SCRIPT does.
    Variants, extensions, encodings and modifiers are not accepted.

    Raises:
        UnknownLanguageError: for anything without exactly one FLORES-200 code.
    """
    if not isinstance(code, str):
        raise TypeError(f"language code must be a str, not {type(code).__name__}")
    text = code.strip()
    if not text or not text.isascii():
        raise UnknownLanguageError(code)
    exact = _FLORES_BY_LOWER.get(text.lower().replace("-", "_"))
    if exact is not None:
        return exact

    parts = _SUBTAG_SPLIT.split(text)
    if not all(p.isalnum() for p in parts) or not (parts[0].isalpha() and 2 <= len(parts[0]) <= 3):
        raise UnknownLanguageError(code, _suggest(text))
    iso3 = _iso639_3(parts[0].lower())
    rest = parts[1:]
    # BCP-47 extended language subtag: zh-yue, zh-cmn-Hant, ar-arz.
    if iso3 in _EXTLANG_PREFIXES and rest and len(rest[0]) == 3 and rest[0].isalpha():
        iso3 = _iso639_3(rest[0].lower())
        rest = rest[1:]
    script: str | None = None
    region: str | None = None
    if rest and len(rest[0]) == 4 and rest[0].isalpha():
        script = rest[0].title()
        rest = rest[1:]
    if rest and ((len(rest[0]) == 2 and rest[0].isalpha()) or (len(rest[0]) == 3 and rest[0].isdigit())):
        region = rest[0].upper()
        rest = rest[1:]
    if rest or iso3 is None:
        raise UnknownLanguageError(code, _suggest(text))

    language = None
    if script is not None:
        language = _LANGUAGE_BY_SCRIPT_OR_REGION.get((iso3, script))
    if language is None and region is not None:
        language = _LANGUAGE_BY_SCRIPT_OR_REGION.get((iso3, region))
    if language is None:
        language = _flores_language(iso3)
    if language is None:
        raise UnknownLanguageError(code, _suggest(text))

    if script is None and region is not None:
        script = _SCRIPT_BY_REGION.get((language, region))
    if script is None:
        scripts = _SCRIPTS_BY_LANGUAGE[language]
        script = DEFAULT_SCRIPT[language] if len(scripts) > 1 else next(iter(scripts))
    result = f"{language}_{script}"
    if result not in FLORES200_CODES:
        known = ", ".join(sorted(_SCRIPTS_BY_LANGUAGE[language]))
        raise UnknownLanguageError(code, _suggest(text, language), f"FLORES-200 has {language} only in {known}")
    return result


def script_of(code: str) -> str:
    """ISO 15924 script of a language code ("Cyrl" for "kaz_Cyrl"), for script-aware processing.

    Any code :func:`to_flores` accepts works; unknown codes raise UnknownLanguageError.
    """
    return to_flores(code)[4:]


def is_unspaced_script(code: str) -> bool:
    """Whether the language's script is written without spaces between words.

    Such text (Jpan, Hans, Hant, Thai, Khmr, Laoo, Mymr, Tibt) cannot be split
    into words on whitespace. ``code`` is any code :func:`to_flores` accepts,
    or a bare ISO 15924 script code such as "Thai".
    """
    if len(code) == 4 and code.isascii() and code.isalpha():
        script = code.title()
        if script in UNSPACED_SCRIPTS or script in _FLORES_SCRIPTS:
            return script in UNSPACED_SCRIPTS
    return script_of(code) in UNSPACED_SCRIPTS


def _likely_script(language: str) -> str | None:
    """CLDR's default script for a bare language id, or None when CLDR does not say."""
    from babel.core import get_global

    likely = get_global("likely_subtags").get(language)
    if not likely:
        return None
    parts = likely.split("_")
    return parts[1] if len(parts) > 1 and len(parts[1]) == 4 else None


def cldr_locale(code: str) -> str | None:
    """The Babel/CLDR locale id for a language code, or None when Babel has no such locale.

    Lets later stages use CLDR data (names, plural rules, number formats) for a
    FLORES language. The id is the bare language when CLDR's default script is
    the FLORES script ("kaz_Cyrl" -> "kk"), else language_Script ("zho_Hant"
    -> "zh_Hant"). ``code`` is any code :func:`to_flores` accepts. Needs Babel,
    imported only here so that the rest of the module does not.
    """
    from babel import localedata

    flores = to_flores(code)
    override = _CLDR_OVERRIDES.get(flores)
    if override is not None and localedata.exists(override):
        return override
    language, script = flores[:3], flores[4:]
    candidates = [two for two, iso3 in ISO639_1_TO_3.items() if _flores_language(iso3) == language]
    candidates.append(language)
    for candidate in candidates:
        if localedata.exists(candidate) and _likely_script(candidate) in (script, None):
            return candidate
        if localedata.exists(f"{candidate}_{script}"):
            return f"{candidate}_{script}"
    return None


def _check_lang_codes(codes: list[str]) -> list[str]:
    flores = [to_flores(code) for code in codes]  # raises naming the unknown code
    dupes = sorted({c for c in flores if flores.count(c) > 1})
    if dupes:
        raise ValueError(f"languages listed twice (after mapping to FLORES-200): {dupes}")
    return codes


def _check_lang_keys(mapping: dict[str, Any]) -> dict[str, Any]:
    _check_lang_codes(list(mapping))
    return mapping


# Language codes as users write them (ISO 639-1/3, BCP-47, FLORES-200); each must map to FLORES-200.
LangCodes = Annotated[list[str], AfterValidator(_check_lang_codes)]
# A mapping keyed by such language codes.
LangKeyed = AfterValidator(_check_lang_keys)

# A metric row whose `src_lang` is "group:<name>" averages over a group of languages (a
# benchmark's group, XNLI's mean, the xx-yy pairs); every other `src_lang` is a FLORES-200 code.
GROUP_PREFIX = "group:"


def group_code(name: str) -> str:
    """The `src_lang` of the rows that average over the group `name`."""
    return f"{GROUP_PREFIX}{name}"


def is_group_code(code: str) -> bool:
    """Whether a `src_lang` names a group of languages (see `group_code`), not one language."""
    return code.startswith(GROUP_PREFIX)


def hub_language(flores: str) -> str:
    """The model hub's code for a FLORES-200 code (its cards' `language:`): ISO 639-1 where one
    exists, for the variety or the macro-language it stands for (swh_Latn -> sw, zsm_Latn -> ms),
    else the ISO 639-3 code (ast_Latn -> ast). The model card and the dataset card both use it, so
    one language gets one tag on both."""
    iso3 = flores.split("_", 1)[0]
    iso1 = {three: one for one, three in ISO639_1_TO_3.items()}
    macro = {variety: code for code, variety in MACROLANGUAGE_TO_FLORES.items()}
    return iso1.get(iso3) or iso1.get(macro.get(iso3, "")) or iso3
