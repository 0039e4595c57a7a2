"""NLLB-200's languages and the Unicode scripts their FLORES-200 codes name.

NLLB-200 translates into 202 language varieties, each selected by a language-code token
(``fra_Latn``) that is also its FLORES-200 code, with one quirk: Santali is the token
``sat_Beng`` in NLLB's vocabulary although FLORES-200 writes it ``sat_Olck`` (Ol Chiki is the
script the text is actually in). FLORES-200 also has ``arb_Latn`` and ``min_Arab``, which NLLB
has no token for. The list below is NLLB's own (the order of the tokens in its vocabulary).

The script check of the translate stage needs, for each FLORES script subtag, the Unicode
scripts whose letters count as "in the expected script": ``Jpan`` is Hiragana + Katakana +
Han, ``Hans``/``Hant`` are Han (simplified and traditional characters cannot be told apart
by script), ``Kore`` is Hangul + Han. Patterns use Script_Extensions (``scx``) so that
characters shared by several scripts (the Japanese prolonged sound mark, for one) count for
each of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from tasks.languages import UnknownLanguageError, to_flores

# NLLB-200's language-code tokens, in vocabulary order (transformers' FAIRSEQ_LANGUAGE_CODES).
NLLB_LANGUAGE_CODES: tuple[str, ...] = (
    "ace_Arab", "ace_Latn", "acm_Arab", "acq_Arab", "aeb_Arab", "afr_Latn", "ajp_Arab", "aka_Latn", "amh_Ethi",
    "apc_Arab", "arb_Arab", "ars_Arab", "ary_Arab", "arz_Arab", "asm_Beng", "ast_Latn", "awa_Deva", "ayr_Latn",
    "azb_Arab", "azj_Latn", "bak_Cyrl", "bam_Latn", "ban_Latn", "bel_Cyrl", "bem_Latn", "ben_Beng", "bho_Deva",
    "bjn_Arab", "bjn_Latn", "bod_Tibt", "bos_Latn", "bug_Latn", "bul_Cyrl", "cat_Latn", "ceb_Latn", "ces_Latn",
    "cjk_Latn", "ckb_Arab", "crh_Latn", "cym_Latn", "dan_Latn", "deu_Latn", "dik_Latn", "dyu_Latn", "dzo_Tibt",
    "ell_Grek", "eng_Latn", "epo_Latn", "est_Latn", "eus_Latn", "ewe_Latn", "fao_Latn", "pes_Arab", "fij_Latn",
    "fin_Latn", "fon_Latn", "fra_Latn", "fur_Latn", "fuv_Latn", "gla_Latn", "gle_Latn", "glg_Latn", "grn_Latn",
    "guj_Gujr", "hat_Latn", "hau_Latn", "heb_Hebr", "hin_Deva", "hne_Deva", "hrv_Latn", "hun_Latn", "hye_Armn",
    "ibo_Latn", "ilo_Latn", "ind_Latn", "isl_Latn", "ita_Latn", "jav_Latn", "jpn_Jpan", "kab_Latn", "kac_Latn",
    "kam_Latn", "kan_Knda", "kas_Arab", "kas_Deva", "kat_Geor", "knc_Arab", "knc_Latn", "kaz_Cyrl", "kbp_Latn",
    "kea_Latn", "khm_Khmr", "kik_Latn", "kin_Latn", "kir_Cyrl", "kmb_Latn", "kon_Latn", "kor_Hang", "kmr_Latn",
    "lao_Laoo", "lvs_Latn", "lij_Latn", "lim_Latn", "lin_Latn", "lit_Latn", "lmo_Latn", "ltg_Latn", "ltz_Latn",
    "lua_Latn", "lug_Latn", "luo_Latn", "lus_Latn", "mag_Deva", "mai_Deva", "mal_Mlym", "mar_Deva", "min_Latn",
    "mkd_Cyrl", "plt_Latn", "mlt_Latn", "mni_Beng", "khk_Cyrl", "mos_Latn", "mri_Latn", "zsm_Latn", "mya_Mymr",
    "nld_Latn", "nno_Latn", "nob_Latn", "npi_Deva", "nso_Latn", "nus_Latn", "nya_Latn", "oci_Latn", "gaz_Latn",
    "ory_Orya", "pag_Latn", "pan_Guru", "pap_Latn", "pol_Latn", "por_Latn", "prs_Arab", "pbt_Arab", "quy_Latn",
    "ron_Latn", "run_Latn", "rus_Cyrl", "sag_Latn", "san_Deva", "sat_Beng", "scn_Latn", "shn_Mymr", "sin_Sinh",
    "slk_Latn", "slv_Latn", "smo_Latn", "sna_Latn", "snd_Arab", "som_Latn", "sot_Latn", "spa_Latn", "als_Latn",
    "srd_Latn", "srp_Cyrl", "ssw_Latn", "sun_Latn", "swe_Latn", "swh_Latn", "szl_Latn", "tam_Taml", "tat_Cyrl",
    "tel_Telu", "tgk_Cyrl", "tgl_Latn", "tha_Thai", "tir_Ethi", "taq_Latn", "taq_Tfng", "tpi_Latn", "tsn_Latn",
    "tso_Latn", "tuk_Latn", "tum_Latn", "tur_Latn", "twi_Latn", "tzm_Tfng", "uig_Arab", "ukr_Cyrl", "umb_Latn",
    "urd_Arab", "uzn_Latn", "vec_Latn", "vie_Latn", "war_Latn", "wol_Latn", "xho_Latn", "ydd_Hebr", "yor_Latn",
    "yue_Hant", "zho_Hans", "zho_Hant", "zul_Latn",
)  # fmt: skip
_NLLB_SET = frozenset(NLLB_LANGUAGE_CODES)

# FLORES-200 code -> NLLB token, where they differ.
_FLORES_TO_NLLB: Mapping[str, str] = MappingProxyType({"sat_Olck": "sat_Beng"})

# ISO 15924 script subtag -> Unicode scripts (as regex Script_Extensions names) of its letters.
SCRIPT_UNICODE: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "Arab": ("Arabic",), "Armn": ("Armenian",), "Beng": ("Bengali",), "Cyrl": ("Cyrillic",),
        "Deva": ("Devanagari",), "Ethi": ("Ethiopic",), "Geor": ("Georgian",), "Grek": ("Greek",),
        "Gujr": ("Gujarati",), "Guru": ("Gurmukhi",), "Hang": ("Hangul",), "Hans": ("Han",), "Hant": ("Han",),
        "Hebr": ("Hebrew",), "Jpan": ("Hiragana", "Katakana", "Han"), "Khmr": ("Khmer",), "Knda": ("Kannada",),
        "Kore": ("Hangul", "Han"), "Laoo": ("Lao",), "Latn": ("Latin",), "Mlym": ("Malayalam",),
        "Mymr": ("Myanmar",), "Olck": ("Ol_Chiki",), "Orya": ("Oriya",), "Sinh": ("Sinhala",), "Taml": ("Tamil",),
        "Telu": ("Telugu",), "Tfng": ("Tifinagh",), "Thai": ("Thai",), "Tibt": ("Tibetan",),
    }
)  # fmt: skip


class UnsupportedLanguageError(ValueError):
    """A language NLLB-200 cannot translate into or from; the message names the code."""


def nllb_code(code: str) -> str:
    """The NLLB language token for a language code (any form :func:`to_flores` accepts).

    Raises:
        UnsupportedLanguageError: naming the code, when it is not a FLORES-200 language or
            NLLB-200 has no token for it.
    """
    try:
        flores = to_flores(code)
    except UnknownLanguageError as exc:
        raise UnsupportedLanguageError(f"language {code!r} is not an NLLB-200 language: {exc}") from None
    token = _FLORES_TO_NLLB.get(flores, flores)
    if token not in _NLLB_SET:
        raise UnsupportedLanguageError(f"language {code!r} ({flores}) is a FLORES-200 code NLLB-200 cannot translate")
    return token


def script_pattern(code: str) -> str:
    """A regex (Rust/polars syntax) matching one letter in the script a FLORES code names."""
    script = code.rpartition("_")[2]
    if script == "Beng" and code == "sat_Beng":  # NLLB's token for Santali; the text is Ol Chiki
        script = "Olck"
    names = SCRIPT_UNICODE.get(script)
    if names is None:
        raise UnsupportedLanguageError(f"no Unicode script known for {code!r} (script subtag {script!r})")
    return "[\\p{L}&&[" + "".join(f"\\p{{scx={name}}}" for name in names) + "]]"
