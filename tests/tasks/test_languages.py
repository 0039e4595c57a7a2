"""Tests for tasks.languages: mapping language codes to FLORES-200 codes."""

from __future__ import annotations

import pickle
import string
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:  # the repo is not an installed package yet
    sys.path.insert(0, str(REPO_ROOT))

from tasks.languages import (  # noqa: E402
    DEFAULT_SCRIPT,
    FLORES200_CODES,
    ISO639_1_TO_3,
    ISO639_2B_TO_3,
    MACROLANGUAGE_TO_FLORES,
    UNSPACED_SCRIPTS,
    UnknownLanguageError,
    cldr_locale,
    is_unspaced_script,
    script_of,
    to_flores,
)

FLORES_DEV_DIR = REPO_ROOT.parent / "shared" / "data" / "flores200-dev"
WACSE_LOW_RESOURCE = ["kaz_Cyrl", "tel_Telu", "kat_Geor", "jav_Latn", "tgl_Latn", "swh_Latn", "mal_Mlym", "mar_Deva"]


def test_there_are_204_well_formed_codes() -> None:
    assert len(FLORES200_CODES) == 204
    for code in FLORES200_CODES:
        language, script = code.split("_")
        assert len(language) == 3 and language.islower()
        assert len(script) == 4 and script.istitle()


@pytest.mark.skipif(not FLORES_DEV_DIR.is_dir(), reason=f"FLORES-200 dev files not present at {FLORES_DEV_DIR}")
def test_codes_match_the_flores_dev_files() -> None:
    stems = {path.stem for path in FLORES_DEV_DIR.glob("*.dev")}
    assert FLORES200_CODES == stems


@pytest.mark.parametrize("code", sorted(FLORES200_CODES))
def test_every_flores_code_maps_to_itself(code: str) -> None:
    assert to_flores(code) == code
    assert to_flores(code.lower()) == code
    assert to_flores(code.upper().replace("_", "-")) == code


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        # ISO 639-1
        ("kk", "kaz_Cyrl"), ("en", "eng_Latn"), ("sw", "swh_Latn"), ("tl", "tgl_Latn"), ("EN", "eng_Latn"),
        ("te", "tel_Telu"), ("ka", "kat_Geor"), ("jv", "jav_Latn"), ("ml", "mal_Mlym"), ("mr", "mar_Deva"),
        ("ja", "jpn_Jpan"), ("ko", "kor_Hang"), ("he", "heb_Hebr"), ("iw", "heb_Hebr"), ("mo", "ron_Latn"),
        ("rw", "kin_Latn"), ("ks", "kas_Arab"), ("tw", "twi_Latn"), ("ak", "aka_Latn"), ("sc", "srd_Latn"),
        # ISO 639-3
        ("kaz", "kaz_Cyrl"), ("eng", "eng_Latn"), ("swh", "swh_Latn"), ("ckb", "ckb_Arab"), ("KAZ", "kaz_Cyrl"),
        # macro-languages -> FLORES variety
        ("ara", "arb_Arab"), ("ar", "arb_Arab"), ("zh", "zho_Hans"), ("zho", "zho_Hans"), ("cmn", "zho_Hans"),
        ("msa", "zsm_Latn"), ("ms", "zsm_Latn"), ("fas", "pes_Arab"), ("fa", "pes_Arab"), ("per", "pes_Arab"),
        ("swa", "swh_Latn"), ("lav", "lvs_Latn"), ("lv", "lvs_Latn"), ("uzb", "uzn_Latn"), ("uz", "uzn_Latn"),
        ("mon", "khk_Cyrl"), ("mn", "khk_Cyrl"), ("nep", "npi_Deva"), ("ne", "npi_Deva"), ("ori", "ory_Orya"),
        ("or", "ory_Orya"), ("orm", "gaz_Latn"), ("om", "gaz_Latn"), ("que", "quy_Latn"), ("qu", "quy_Latn"),
        ("sqi", "als_Latn"), ("sq", "als_Latn"), ("alb", "als_Latn"), ("aze", "azj_Latn"), ("az", "azj_Latn"),
        ("pus", "pbt_Arab"), ("ps", "pbt_Arab"), ("grn", "grn_Latn"), ("gn", "grn_Latn"), ("aym", "ayr_Latn"),
        ("ay", "ayr_Latn"), ("nor", "nob_Latn"), ("no", "nob_Latn"), ("nb", "nob_Latn"), ("nn", "nno_Latn"),
        ("fil", "tgl_Latn"), ("yid", "ydd_Hebr"), ("yi", "ydd_Hebr"), ("est", "est_Latn"), ("et", "est_Latn"),
        ("ekk", "est_Latn"), ("kur", "kmr_Latn"), ("ku", "kmr_Latn"), ("yue", "yue_Hant"), ("kon", "kon_Latn"),
        ("kg", "kon_Latn"), ("mlg", "plt_Latn"), ("mg", "plt_Latn"), ("ful", "fuv_Latn"), ("ff", "fuv_Latn"),
        ("kau", "knc_Latn"), ("kr", "knc_Latn"), ("din", "dik_Latn"),
        # ISO 639-2/B
        ("fre", "fra_Latn"), ("ger", "deu_Latn"), ("chi", "zho_Hans"), ("dut", "nld_Latn"), ("gre", "ell_Grek"),
        ("cze", "ces_Latn"), ("rum", "ron_Latn"), ("slo", "slk_Latn"), ("wel", "cym_Latn"), ("arm", "hye_Armn"),
        ("geo", "kat_Geor"), ("ice", "isl_Latn"), ("mac", "mkd_Cyrl"), ("may", "zsm_Latn"), ("baq", "eus_Latn"),
        ("bur", "mya_Mymr"), ("tib", "bod_Tibt"), ("mao", "mri_Latn"),
        # BCP-47 / CLDR / POSIX tags
        ("zh-Hant", "zho_Hant"), ("zh_Hant", "zho_Hant"), ("zh-hant", "zho_Hant"), ("zh-TW", "zho_Hant"),
        ("zh_HK", "zho_Hant"), ("zh-CN", "zho_Hans"), ("zh-Hans-SG", "zho_Hans"), ("zh-Hant-TW", "zho_Hant"),
        ("pt_BR", "por_Latn"), ("pt-PT", "por_Latn"), ("es-419", "spa_Latn"), ("sr-Cyrl", "srp_Cyrl"),
        ("sr_Cyrl_RS", "srp_Cyrl"), ("kk-KZ", "kaz_Cyrl"), ("kk_Cyrl_KZ", "kaz_Cyrl"), ("en_US", "eng_Latn"),
        ("kaz-Cyrl-KZ", "kaz_Cyrl"),
        ("az-Arab", "azb_Arab"), ("az-IR", "azb_Arab"), ("az-Latn-AZ", "azj_Latn"), ("ku-Arab", "ckb_Arab"),
        ("fa-AF", "prs_Arab"), ("fa-IR", "pes_Arab"), ("ks-Deva", "kas_Deva"), ("ar-Latn", "arb_Latn"),
        ("zh-yue", "yue_Hant"), ("zh-cmn-Hant", "zho_Hant"), ("ar-arz", "arz_Arab"),
        # NTREX-style dash forms
        ("aze-Latn", "azj_Latn"), ("srp-Cyrl", "srp_Cyrl"), ("zho-CN", "zho_Hans"), ("zho-TW", "zho_Hant"),
        ("ckb-Arab", "ckb_Arab"), ("tgk-Cyrl", "tgk_Cyrl"), ("snd-Arab", "snd_Arab"), ("por-BR", "por_Latn"),
        # several FLORES scripts: explicit script, else DEFAULT_SCRIPT
        ("ace", "ace_Latn"), ("ace-Arab", "ace_Arab"), ("arb", "arb_Arab"), ("bjn", "bjn_Latn"),
        ("bjn_Arab", "bjn_Arab"), ("kas", "kas_Arab"), ("knc", "knc_Latn"), ("knc-Arab", "knc_Arab"),
        ("min", "min_Latn"), ("taq", "taq_Latn"), ("taq-Tfng", "taq_Tfng"), ("mni", "mni_Beng"),
        # surrounding whitespace is ignored
        ("  en ", "eng_Latn"),
    ],
)  # fmt: skip
def test_representative_mappings(given: str, expected: str) -> None:
    assert to_flores(given) == expected


@pytest.mark.parametrize(
    "code",
    [
        "xx", "klingon", "kaz_Latn", "", "   ", "sr-Latn", "hbs", "sh", "pa-PK", "yue-CN", "zh-Latn", "uz-AF",
        "en_US.UTF-8", "sr_RS@latin", "en-US-x-private", "ca-ES-valencia", "kk--KZ", "e n", "k", "kazakh",
        "qaa", "und", "zho_Hanz", "en-abc", "kaz_Latn_KZ",
    ],
)  # fmt: skip
def test_unknown_codes_raise(code: str) -> None:
    with pytest.raises(UnknownLanguageError) as info:
        to_flores(code)
    assert isinstance(info.value, ValueError)
    assert repr(code) in str(info.value)
    assert info.value.code == code


def test_unknown_script_suggests_the_known_ones() -> None:
    with pytest.raises(UnknownLanguageError) as info:
        to_flores("kaz_Latn")
    assert "kaz_Cyrl" in str(info.value)
    assert info.value.suggestions[0] == "kaz_Cyrl"


def test_misspelt_code_gets_close_matches() -> None:
    with pytest.raises(UnknownLanguageError) as info:
        to_flores("eng_Ltn")
    assert "eng_Latn" in info.value.suggestions


def test_error_survives_pickling() -> None:
    with pytest.raises(UnknownLanguageError) as info:
        to_flores("kaz_Latn")
    copy = pickle.loads(pickle.dumps(info.value))
    assert isinstance(copy, UnknownLanguageError)
    assert str(copy) == str(info.value)
    assert copy.suggestions == info.value.suggestions


def test_non_string_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        to_flores(None)  # type: ignore[arg-type]


def test_default_script_covers_exactly_the_multi_script_languages() -> None:
    languages = [code[:3] for code in FLORES200_CODES]
    multi = {language for language in languages if languages.count(language) > 1}
    assert set(DEFAULT_SCRIPT) == multi
    for language, script in DEFAULT_SCRIPT.items():
        assert f"{language}_{script}" in FLORES200_CODES
        assert to_flores(language) == f"{language}_{script}"


def test_lookup_tables_only_lead_to_flores_codes() -> None:
    flores_languages = {code[:3] for code in FLORES200_CODES}
    assert set(MACROLANGUAGE_TO_FLORES.values()) <= flores_languages
    for two in ISO639_1_TO_3:
        assert len(two) == 2
        assert to_flores(two) in FLORES200_CODES
    for bibliographic in ISO639_2B_TO_3:
        assert to_flores(bibliographic) in FLORES200_CODES


def test_iso639_1_table_covers_common_flores_languages() -> None:
    # A sample of FLORES languages that have an ISO 639-1 code: each must be reachable from it.
    covered = {to_flores(two) for two in ISO639_1_TO_3}
    sample = [*WACSE_LOW_RESOURCE, "bod_Tibt", "dzo_Tibt", "srd_Latn", "lim_Latn", "twi_Latn", "plt_Latn", "nno_Latn"]
    for code in sample:
        assert code in covered


@pytest.mark.parametrize(
    ("code", "script"), [("kaz_Cyrl", "Cyrl"), ("zho_Hant", "Hant"), ("kk", "Cyrl"), ("zh-TW", "Hant"), ("ja", "Jpan")]
)
def test_script_of(code: str, script: str) -> None:
    assert script_of(code) == script


def test_script_of_unknown_code_raises() -> None:
    with pytest.raises(UnknownLanguageError):
        script_of("klingon")


def test_is_unspaced_script() -> None:
    unspaced = {code for code in FLORES200_CODES if is_unspaced_script(code)}
    assert unspaced == {
        "jpn_Jpan", "zho_Hans", "zho_Hant", "yue_Hant", "tha_Thai", "khm_Khmr", "lao_Laoo",
        "mya_Mymr", "shn_Mymr", "bod_Tibt", "dzo_Tibt",
    }  # fmt: skip
    assert UNSPACED_SCRIPTS == {"Jpan", "Hans", "Hant", "Thai", "Khmr", "Laoo", "Mymr", "Tibt"}
    assert is_unspaced_script("ja") and is_unspaced_script("zh-TW")
    assert not is_unspaced_script("kor_Hang") and not is_unspaced_script("kk")
    assert is_unspaced_script("Thai") and is_unspaced_script("hans")
    assert not is_unspaced_script("Cyrl")


@pytest.mark.parametrize(
    ("code", "locale"),
    [
        ("kaz_Cyrl", "kk"), ("tgl_Latn", "fil"), ("zho_Hant", "zh_Hant"), ("zho_Hans", "zh"), ("swh_Latn", "sw"),
        ("kas_Deva", "ks_Deva"), ("kas_Arab", "ks"), ("nob_Latn", "nb"), ("prs_Arab", "fa_AF"),
        ("azb_Arab", "az_Arab"), ("azj_Latn", "az"), ("kor_Hang", "ko"), ("yue_Hant", "yue"), ("srp_Cyrl", "sr"),
        ("arz_Arab", "ar_EG"), ("ceb_Latn", "ceb"), ("kk", "kk"),
    ],
)  # fmt: skip
def test_cldr_locale(code: str, locale: str) -> None:
    assert cldr_locale(code) == locale


@pytest.mark.parametrize("code", ["arb_Latn", "ace_Latn", "tzm_Tfng", "hne_Deva"])
def test_cldr_locale_is_none_without_a_babel_locale(code: str) -> None:
    assert cldr_locale(code) is None


@pytest.mark.parametrize("code", WACSE_LOW_RESOURCE)
def test_cldr_locale_loads_for_wacse_low_resource_languages(code: str) -> None:
    from babel import Locale

    locale_id = cldr_locale(code)
    assert locale_id is not None
    locale = Locale.parse(locale_id)
    assert locale.get_display_name("en")


def test_every_cldr_locale_loads_with_a_matching_script() -> None:
    from babel import Locale

    for code in sorted(FLORES200_CODES):
        locale_id = cldr_locale(code)
        if locale_id is None:
            continue
        locale = Locale.parse(locale_id)
        assert locale.get_display_name("en"), code
        if locale.script is not None:
            assert locale.script == script_of(code), code


_TAG_CHARS = string.ascii_letters + string.digits + "-_ ."
_pieces = st.sampled_from(
    [*sorted(FLORES200_CODES), *ISO639_1_TO_3, *MACROLANGUAGE_TO_FLORES, "Latn", "Hant", "Arab", "TW", "IR", "419"]
)
_short_strings = st.one_of(
    st.text(max_size=12),
    st.text(alphabet=_TAG_CHARS, max_size=12),
    st.lists(_pieces, min_size=1, max_size=3).flatmap(lambda parts: st.sampled_from(["-", "_"]).map(lambda sep: sep.join(parts))),
)


@pytest.mark.slow
@settings(max_examples=500, deadline=None)
@given(_short_strings)
def test_to_flores_returns_a_flores_code_or_raises(text: str) -> None:
    try:
        result = to_flores(text)
    except UnknownLanguageError as error:
        assert repr(text) in str(error)
        return
    assert result in FLORES200_CODES
    assert to_flores(result) == result


def _group_literals(path: Path) -> list[int]:
    """Lines of `path` whose code spells a string starting with "group:" (comments and docstrings aside)."""
    import ast

    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.JoinedStr) and node.values:
            node = node.values[0]
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("group:"):
            lines.append(node.lineno)
    return lines


@pytest.mark.slow
def test_the_group_prefix_is_spelled_once() -> None:
    from tasks.languages import GROUP_PREFIX, group_code, is_group_code

    spelled = {
        str(path.relative_to(REPO_ROOT)): found
        for folder in ("tasks", "flows", "storage")
        for path in sorted((REPO_ROOT / folder).rglob("*.py"))
        if (found := _group_literals(path))
    }
    assert spelled == {"tasks/languages.py": spelled.get("tasks/languages.py", [])} and len(spelled["tasks/languages.py"]) == 1
    assert group_code("xx-yy") == GROUP_PREFIX + "xx-yy" and is_group_code(group_code("wacse-4"))
    assert not is_group_code("eng_Latn")


def test_every_stage_takes_language_codes_from_tasks_languages() -> None:
    import ast

    from tasks import languages

    assert not (REPO_ROOT / "tasks" / "corpus" / "languages.py").exists()
    wrong = []
    for path in sorted((REPO_ROOT / "tasks").rglob("*.py")) + sorted((REPO_ROOT / "flows").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module not in (None, "tasks.languages"):
                named = {alias.name for alias in node.names} & {"LangCodes", "LangKeyed", "to_flores", "UnknownLanguageError"}
                if named:
                    wrong.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno} {node.module} {sorted(named)}")
    assert wrong == []
    assert languages.LangCodes and callable(languages.to_flores)
