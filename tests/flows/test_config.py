from __future__ import annotations

from pathlib import Path

import pytest

from flows.config import ConfigError, load_config


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pipe.toml"
    path.write_text(text, encoding="utf-8")
    return path


GOOD = """
[pipeline]
name = "p"
[corpus]
[[corpus.sources]]
name = "c"
kind = "cldr"
langs = ["en", "kk"]
"""


def test_valid_config_maps_nothing_until_run(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, GOOD))
    assert config.name == "p"
    assert config.stages == ["corpus"]
    assert config.settings.root == str(tmp_path / "artifacts")  # relative to the config's folder


CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def test_demo_profile_is_valid() -> None:
    config = load_config(CONFIGS / "demo.toml")
    assert config.stages == ["corpus", "base_model", "train", "evaluate"]  # TR only: no word pairs to align
    assert config.stage_configs["train"].interpolation == 0.1  # measured: docs/experiments.md, "The demo out of domain"


@pytest.mark.parametrize("name", sorted(p.name for p in CONFIGS.glob("*.toml")))
def test_every_shipped_profile_is_valid(name: str) -> None:
    assert load_config(CONFIGS / name).stages


@pytest.mark.parametrize("name", sorted(p.name for p in (CONFIGS / "ablations").glob("*.toml")))
def test_every_shipped_grid_expands_into_valid_configs(name: str, tmp_path: Path) -> None:
    """Each grid names the profile it runs on in a `# base: configs/X.toml` line (default cpu-small)."""
    import re

    from flows.sweep import load_grid, variant_configs

    grid_path = CONFIGS / "ablations" / name
    found = re.search(r"^#\s*base:\s*configs/(\S+\.toml)", grid_path.read_text(encoding="utf-8"), re.MULTILINE)
    base = CONFIGS / (found.group(1) if found else "cpu-small.toml")
    grid = load_grid(grid_path, config=base)
    configs = variant_configs(base, grid)
    assert len(configs) >= 2 and set(configs) == {v.name for v in grid.variants}
    # quality claims need seeds: every variant that trains runs at least 3, unless the grid opts out (seeds = [])
    groups = {v.group: sum(w.group == v.group for w in grid.variants) for v in grid.variants}
    trained = [v for v in grid.variants if "train" in configs[v.name].stages]
    assert grid.seeding == "none" or all(groups[v.group] >= 3 for v in trained), {v.name: groups[v.group] for v in trained}


def test_malformed_toml_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, '[pipeline]\nname = "p"\n[corpus\n')
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(path) in str(info.value) and "line 3" in str(info.value)


def test_unknown_section(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown section\(s\) \[corpsu\]"):
        load_config(write(tmp_path, GOOD + "\n[corpsu]\nx = 1\n"))


def test_unknown_key_names_key_and_file(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace('kind = "cldr"', 'kind = "cldr"\nlangz = 3'))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert str(path) in message
    assert "corpus.sources[0].langz: unknown key (got 3)" in message


def test_wrong_type_names_key_and_value(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, GOOD.replace("[corpus]", '[corpus]\nseed = "forty-two"')))
    assert "corpus.seed" in str(info.value) and "'forty-two'" in str(info.value)


def invalid_config_message(tmp_path: Path, section: str, line: str) -> tuple[Path, str]:
    """The error of GOOD with `line` added to `section` (`corpus.sources`: its first source): the
    config's path and the message."""
    text = (
        GOOD.replace(f"[{section}]\n", f"[{section}]\n{line}\n")
        if section != "corpus.sources"
        else GOOD.replace('kind = "cldr"', f'kind = "cldr"\n{line}')
    )
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    return path, str(info.value)


@pytest.mark.parametrize(
    ("section", "line", "where", "shown"),
    [
        ("pipeline", 'max_workers = "2"', "pipeline.max_workers", "'2'"),
        ("pipeline", "max_workers = true", "pipeline.max_workers", "True"),
        ("pipeline", "max_workers = 2.0", "pipeline.max_workers", "2.0"),
        ("pipeline", 'ray_gpus_per_task = "0.5"', "pipeline.ray_gpus_per_task", "'0.5'"),
        ("pipeline", "write_index = 1", "pipeline.write_index", "1"),
        ("pipeline", 'write_index = "false"', "pipeline.write_index", "'false'"),
        ("corpus", 'seed = "7"', "corpus.seed", "'7'"),
        ("corpus", "filters = { dedupe = 0 }", "corpus.filters.dedupe", "0"),
        ("corpus.sources", 'sample = "5"', "corpus.sources[0].sample", "'5'"),
    ],
)
def test_numbers_and_booleans_are_checked_not_coerced(tmp_path: Path, section: str, line: str, where: str, shown: str) -> None:
    """A quoted number, a boolean for a number or a number for a boolean is an error naming the
    file, the key and the value; pydantic's lax mode used to turn "2" and true into 2 and 1."""
    path, message = invalid_config_message(tmp_path, section, line)
    assert message.startswith(f"{path}: invalid config") and f"{where}: " in message and f"(got {shown})" in message, message
    assert "unknown key" not in message, message


def test_an_integer_stays_valid_where_a_float_is_wanted(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, GOOD.replace("[pipeline]\n", "[pipeline]\nray_gpus_per_task = 1\n")))
    assert config.settings.ray_gpus_per_task == 1.0 and isinstance(config.settings.ray_gpus_per_task, float)


def test_a_sweep_grid_value_is_checked_like_a_config_value(tmp_path: Path) -> None:
    from flows.sweep import load_grid, variant_configs
    from flows.sweep.grid import GridError

    base = write(tmp_path, GOOD)
    grid_path = tmp_path / "grid.toml"
    grid_path.write_text('seeds = []\n[grid]\n"corpus.seed" = [7, "8"]\n', encoding="utf-8")
    with pytest.raises(GridError) as info:
        variant_configs(base, load_grid(grid_path, config=base))
    message = str(info.value)
    assert str(grid_path) in message and "corpus.seed" in message and "(got '8')" in message, message
    grid_path.write_text('seeds = []\n[grid]\n"corpus.filters.dedupe" = [true, 0]\n', encoding="utf-8")
    with pytest.raises(GridError) as info:
        variant_configs(base, load_grid(grid_path, config=base))
    assert "corpus.filters.dedupe: Input should be a valid boolean" in str(info.value) and "(got 0)" in str(info.value), str(
        info.value
    )


def test_unknown_language_code_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, GOOD.replace('"kk"]', '"klingon"]')))
    assert "corpus.sources[0].langs" in str(info.value) and "klingon" in str(info.value)


def test_bad_pipeline_name_and_missing_sections(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="pipeline.name"):
        load_config(write(tmp_path, GOOD.replace('name = "p"', 'name = "../evil"')))
    with pytest.raises(ConfigError, match=r"missing \[pipeline\]"):
        load_config(write(tmp_path, "[corpus]\n"))
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(tmp_path / "absent.toml")


def test_root_override_from_argument_and_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, GOOD)
    assert load_config(path, root="s3://bucket/x").settings.root == "s3://bucket/x"
    monkeypatch.setenv("XLEMBED_ROOT", "/somewhere/else")
    assert load_config(path).settings.root == "/somewhere/else"


def test_stage_reading_an_absent_stage_is_an_error(tmp_path: Path, toy_stages: dict) -> None:
    text = GOOD.replace('name = "p"', 'name = "p"\nstages = ["corpus", "histogram"]') + "\n[histogram]\nbucket = 5\n"
    with pytest.raises(ConfigError, match=r"\[histogram\] reads \['lengths'\]"):
        load_config(write(tmp_path, text))


def test_write_index_is_a_run_setting_in_no_stage_key(tmp_path: Path, toy_pipeline: dict, toy_stages: dict) -> None:
    from flows.plan import make_plan
    from storage import ArtifactStore

    text = toy_pipeline["config"].read_text(encoding="utf-8")
    default = load_config(toy_pipeline["config"])
    quiet = load_config(write(tmp_path, text.replace("[pipeline]\n", "[pipeline]\nwrite_index = false\n", 1)))
    assert default.settings.write_index is True and quiet.settings.write_index is False
    store = ArtifactStore(default.settings.root)
    keys = [{step.stage: step.key for step in make_plan(config, store, toy_stages)} for config in (default, quiet)]
    assert keys[0] == keys[1] and len(keys[0]) == 3
    with pytest.raises(ConfigError, match="pipeline.write_index"):
        load_config(write(tmp_path, text.replace("[pipeline]\n", '[pipeline]\nwrite_index = "sometimes"\n', 1)))


# ------------------------------------------------------------ issue 15: paths and messages
PATHS = """
[pipeline]
name = "p"
root = "../store"
[corpus]
[[corpus.sources]]
name = "pairs"
kind = "text"
files = { en = "data/x.en", kk = "/abs/x.kk", de = "https://example.org/x.de" }
[[corpus.sources]]
name = "tsv"
kind = "tsv"
path = "../tables/t.tsv"
columns = { en = "en", kk = "kk" }
"""


def test_relative_paths_resolve_against_the_config_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "cfg").mkdir()
    path = write(tmp_path / "cfg", PATHS)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("XLEMBED_ROOT", raising=False)
    config = load_config(Path("..") / "cfg" / path.name)
    assert config.settings.root == str(tmp_path / "store")
    pairs, tsv = config.stage_configs["corpus"].sources
    assert pairs.files == {"en": str(tmp_path / "cfg" / "data" / "x.en"), "kk": "/abs/x.kk", "de": "https://example.org/x.de"}
    assert tsv.path == str(tmp_path / "tables" / "t.tsv")
    # --root and XLEMBED_ROOT are command-line values: relative to the current directory
    assert load_config(path, root="here").settings.root == "here"


def test_a_config_built_in_memory_validates_like_its_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """load_config_dict: the parsed TOML of a file (a sweep variant) needs no file; relative paths
    resolve against the folder of the file it stands for, and errors begin with that file."""
    import tomllib

    from flows.config import load_config_dict

    (tmp_path / "cfg").mkdir()
    path = write(tmp_path / "cfg", PATHS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("XLEMBED_ROOT", raising=False)
    raw = tomllib.loads(PATHS)
    in_memory = load_config_dict(raw, path)
    from_file = load_config(path)
    assert in_memory.settings == from_file.settings and in_memory.stage_configs == from_file.stage_configs
    assert in_memory.settings.root == str(tmp_path / "store") and in_memory.raw == raw == from_file.raw
    elsewhere = load_config_dict(raw, path, base_dir=tmp_path / "a" / "b")  # base_dir: paths resolve there instead
    assert elsewhere.stage_configs["corpus"].sources[1].path == str(tmp_path / "a" / "tables" / "t.tsv")
    raw["corpus"]["sources"][0]["kind"] = "nonsense"
    with pytest.raises(ConfigError) as error:
        load_config_dict(raw, path)
    assert str(error.value).startswith(f"{path}: invalid config\n  corpus.sources[0]")


def test_shipped_configs_keep_their_root_and_data_from_the_repository_root() -> None:
    repo = Path(__file__).resolve().parents[2]
    demo = load_config(repo / "configs" / "demo.toml")
    assert demo.settings.root == str(repo / "artifacts")  # `make demo` and the README rely on ./artifacts
    small = load_config(repo / "configs" / "cpu-small.toml")
    assert small.settings.root == str(repo / "artifacts")
    assert small.stage_configs["corpus"].sources[0].path == str(repo.parent / "shared" / "data" / "flores200-dev")


def test_missing_config_names_the_absolute_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=f"looked for {tmp_path / 'nope.toml'}"):
        load_config("nope.toml")


def test_allow_empty_names_stages_of_the_pipeline(tmp_path: Path) -> None:
    assert load_config(
        write(tmp_path, GOOD.replace('name = "p"', 'name = "p"\nallow_empty = ["corpus"]'))
    ).settings.allow_empty == ["corpus"]
    with pytest.raises(ConfigError, match="allow_empty names stage"):
        load_config(write(tmp_path, GOOD.replace('name = "p"', 'name = "p"\nallow_empty = ["train"]')))


@pytest.mark.parametrize(
    ("section", "line", "where", "shown"),
    [
        ("pipeline", "max_workers = 99999999999999999999", "pipeline.max_workers", "99999999999999999999"),
        ("pipeline", "max_workers = 5000", "pipeline.max_workers", "5000"),
        ("corpus", "filters = { max_chars = 123456789012345678901234 }", "corpus.filters.max_chars", "123456789012345678901234"),
        ("corpus.sources", "sample = 100000000000000000000", "corpus.sources[0].sample", "100000000000000000000"),
    ],
)
def test_integers_out_of_range_are_errors(tmp_path: Path, section: str, line: str, where: str, shown: str) -> None:
    """Issue 35: `max_workers = 99999999999999999999` was accepted. Every config integer is bounded
    by 2**53 (what a JSON manifest keeps exactly), max_workers by 1024."""
    path, message = invalid_config_message(tmp_path, section, line)
    assert message.startswith(f"{path}: invalid config") and f"{where}: " in message, message
    assert f"(got {shown})" in message and "less than or equal to" in message, message
