"""The trainer end to end on a tiny BERT: every objective, export, GradCache, resume, NaN, DDP."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from tasks.stop import Interrupted
from tasks.train.config import TrainConfig
from tasks.train.trainer import NonFiniteLossError, Trainer, TrainingStopped, TrainInputs

ALL = {
    "translation_ranking": {"weight": 1.0, "symmetric": True, "margin": 0.1},
    "multiway_supcon": {"weight": 0.5, "regularization": 0.1, "positive_boost": True},
    "aligned_word_prediction": {"weight": 0.2},
    "word_translation_ranking": {"weight": 0.2, "temperature": 0.1},
    "representation_translation": {"weight": 0.2, "direction": "both", "target_vocab_only": True},
    "dueam": {"weight": 0.2, "sinkhorn_iterations": 20},
}
ROOT = Path(__file__).resolve().parents[3]


def config(**overrides) -> TrainConfig:
    base = {"steps": 4, "batch_size": 8, "views": 3, "max_length": 24, "eval_every": 2, "checkpoint_every": 2,
            "optimizer": {"lr": 1e-3}, "seed": 3, "dropout": 0.0, "torch_threads": 1, "objectives": ALL}  # fmt: skip
    base.update(overrides)
    return TrainConfig.model_validate(base)


def weights(trainer: Trainer) -> dict[str, torch.Tensor]:
    """The trainer's tensors, on the CPU (a GPU run's weights compare with files read back)."""
    return {k: v.detach().to("cpu", copy=True) for k, v in trainer.module.state_dict().items()}


def run(cfg, inputs, tmp_path, name="run"):
    trainer = Trainer(cfg, inputs)
    metrics = trainer.run(tmp_path / name / "out", tmp_path / name / "ckpt")
    return trainer, metrics


@pytest.fixture(scope="module")
def inputs(tiny_model_dir, corpus_table, alignment_table):
    return TrainInputs(corpus_table, alignment_table, tiny_model_dir)


@pytest.mark.slow
def test_all_objectives_train_and_export_loads_in_transformers_and_sentence_transformers(inputs, tmp_path):
    trainer, metrics = run(config(), inputs, tmp_path)
    out = tmp_path / "run" / "out"
    assert set(metrics["final_losses"]) >= {f"loss/{k}" for k in ALL}
    assert all(np.isfinite(v) for v in metrics["final_losses"].values())
    assert metrics["dev"] is not None and 0 <= metrics["dev"]["mean"] <= 1
    assert (out / "curves.parquet").exists() and (out / "curves.png").stat().st_size > 1000
    import pyarrow.parquet as pq

    curves = pq.read_table(out / "curves.parquet").to_pylist()
    assert {"loss", "lr", "dev_accuracy"} <= {c["metric"] for c in curves}

    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel

    AutoModel.from_pretrained(str(out / "model"))
    st = SentenceTransformer(str(out / "model"), device="cpu")
    texts = ["the river city 1.", "la rivière ville 1."]
    got = st.encode(texts, convert_to_numpy=True)
    # the exported (best) model's own vectors, computed with the trainer's model
    from safetensors.torch import load_file

    trainer.model.load_state_dict(load_file(str(tmp_path / "run" / "ckpt" / "best-model.safetensors")))
    trainer.model.eval()
    enc = trainer.tokenizer(texts, padding=True, return_tensors="pt").to(trainer.device)
    with torch.no_grad():
        want, _ = trainer.model(enc["input_ids"], enc["attention_mask"])
    np.testing.assert_allclose(got, want.cpu().numpy(), atol=1e-5)


def step_gradient(cfg: TrainConfig, inputs: TrainInputs, step: int = 0) -> torch.Tensor:
    """Every parameter's gradient after one step's backward pass, flattened (compared before Adam,
    whose first update is about lr * sign(gradient) and hides most differences)."""
    trainer = Trainer(cfg, inputs)
    trainer.backward_step(step)
    return torch.cat(
        [p.grad.reshape(-1) if p.grad is not None else torch.zeros(p.numel(), device=p.device) for p in trainer.params]
    )


def test_grad_cache_gives_the_plain_step_gradient_at_dropout_zero(inputs):
    for step in (0, 1):
        plain = step_gradient(config(eval_every=0), inputs, step)
        cached = step_gradient(config(eval_every=0, grad_cache_chunk=3), inputs, step)
        assert float((cached - plain).norm() / plain.norm()) < 1e-5  # measured: 3.5e-7 at step 0
        torch.testing.assert_close(cached, plain, atol=1e-6, rtol=1e-4)


def test_with_dropout_on_grad_cache_changes_the_gradient_so_the_key_holds_it(inputs):
    """Each chunk's forward pass draws its own dropout masks: at dropout 0.1 the chunked gradient
    is another sample (measured: 48% relative difference on this model), reproducible run to run.
    That is why the chunk is keyed when dropout is on (test_stage.py)."""
    plain = step_gradient(config(eval_every=0, dropout=0.1), inputs)
    cached = step_gradient(config(eval_every=0, dropout=0.1, grad_cache_chunk=3), inputs)
    assert torch.equal(step_gradient(config(eval_every=0, dropout=0.1, grad_cache_chunk=3), inputs), cached)
    assert float((cached - plain).norm() / plain.norm()) > 0.05


@pytest.mark.slow
def test_unsupervised_dueam_and_rtl_from_the_pivot_train(inputs, tmp_path):
    """The ablations' other settings through the real step: DuEAM on random pairs only, RTL en->xx."""
    cfg = config(steps=2, eval_every=0, objectives={
        "dueam": {"weight": 1.0, "pairs": "random", "sinkhorn_iterations": 10},
        "representation_translation": {"weight": 0.2, "direction": "from_pivot", "layers": 1},
    })  # fmt: skip
    before = weights(Trainer(cfg, inputs))
    trainer, metrics = run(cfg, inputs, tmp_path)
    assert set(metrics["final_losses"]) >= {"loss/dueam", "loss/representation_translation"}
    assert all(np.isfinite(v) for v in metrics["final_losses"].values())
    after = weights(trainer)
    assert any(not torch.equal(before[k], after[k]) for k in before)


@pytest.mark.slow
def test_stopped_run_resumes_to_identical_weights(inputs, tmp_path):
    cfg = config(steps=4, checkpoint_every=2, dropout=0.1)
    full, full_metrics = run(cfg, inputs, tmp_path, "full")
    with pytest.raises(TrainingStopped):
        run(config(steps=4, checkpoint_every=2, dropout=0.1, stop_after=3), inputs, tmp_path, "killed")
    resumed, resumed_metrics = run(cfg, inputs, tmp_path, "killed")  # same checkpoint dir: resumes at step 2
    a, b = weights(full), weights(resumed)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert full_metrics["final_losses"] == resumed_metrics["final_losses"]


@pytest.mark.slow
def test_a_stop_request_ends_the_step_keeps_it_as_a_checkpoint_and_resumes_to_identical_weights(inputs, tmp_path):
    """Ctrl-C (tasks/stop.py): polled before the first step and after each; here after step 2."""
    cfg = config(steps=4, checkpoint_every=4, dropout=0.1)
    full, _ = run(cfg, inputs, tmp_path, "full")
    polls = []
    stopped = Trainer(cfg, inputs, should_stop=lambda: polls.append(1) or len(polls) >= 3)
    with pytest.raises(
        Interrupted, match=r"^train: stopped at step 2 of 4; checkpoint at step 2 kept in .*; rerun resumes from it$"
    ):
        stopped.run(tmp_path / "stopped" / "out", tmp_path / "stopped" / "ckpt")
    assert json.loads((tmp_path / "stopped" / "ckpt" / "latest.json").read_text())["step"] == 2
    resumed, _ = run(cfg, inputs, tmp_path, "stopped")
    a, b = weights(full), weights(resumed)
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.slow
def test_sigkilled_process_resumes_to_identical_weights(inputs, tmp_path, tiny_model_dir, corpus_table, alignment_table):
    import pyarrow.parquet as pq

    pq.write_table(corpus_table, tmp_path / "corpus.parquet")
    pq.write_table(alignment_table, tmp_path / "align.parquet")
    cfg = config(steps=6, checkpoint_every=1, eval_every=0, dropout=0.1,
                 objectives={"translation_ranking": {"weight": 1.0}, "word_translation_ranking": {"weight": 0.5}})  # fmt: skip
    script = (
        "import sys, json, time, pyarrow.parquet as pq; from pathlib import Path\n"
        "from tasks.train.config import TrainConfig; from tasks.train.trainer import Trainer, TrainInputs\n"
        "import tasks.train.trainer as T\n"
        "cfg = TrainConfig.model_validate(json.loads(sys.argv[1]))\n"
        "t = Trainer(cfg, TrainInputs(pq.read_table(sys.argv[2]), pq.read_table(sys.argv[3]), Path(sys.argv[4])))\n"
        "step = t.train_step\n"
        "def slow(i):\n    out = step(i); time.sleep(0.5 if i >= 2 else 0); return out\n"
        "t.train_step = slow\n"
        "t.run(Path(sys.argv[5]), Path(sys.argv[6]))\n"
    )
    ckdir = tmp_path / "ck"
    args = [sys.executable, "-c", script, json.dumps(cfg.model_dump(mode="json")), str(tmp_path / "corpus.parquet"),
            str(tmp_path / "align.parquet"), str(tiny_model_dir), str(tmp_path / "o1"), str(ckdir)]  # fmt: skip
    proc = subprocess.Popen(args, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.time() + 120
    while time.time() < deadline:
        latest = ckdir / "latest.json"
        if latest.exists() and json.loads(latest.read_text())["step"] >= 3:
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert json.loads((ckdir / "latest.json").read_text())["step"] < 6, "the run finished before it was killed"
    trainer = Trainer(cfg, inputs)
    trainer.run(tmp_path / "o2", ckdir)
    full, _ = run(cfg, inputs, tmp_path, "full")
    a, b = weights(full), weights(trainer)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_non_finite_loss_stops_and_keeps_the_last_good_checkpoint(inputs, tmp_path, monkeypatch):
    from tasks.train.objectives import translation_ranking

    original = translation_ranking.TranslationRankingLoss.forward
    calls = {"n": 0}

    def poisoned(self, embeddings, valid, extras):
        calls["n"] += 1
        value = original(self, embeddings, valid, extras)
        return value * float("nan") if calls["n"] >= 3 else value

    monkeypatch.setattr(translation_ranking.TranslationRankingLoss, "forward", poisoned)
    cfg = config(steps=4, checkpoint_every=1, eval_every=0, objectives={"translation_ranking": {"weight": 1.0}})
    with pytest.raises(NonFiniteLossError, match=r"loss is nan at step 3.*last good checkpoint"):
        run(cfg, inputs, tmp_path, "nan")
    latest = json.loads((tmp_path / "nan" / "ckpt" / "latest.json").read_text())
    assert latest["step"] == 2


def test_a_non_finite_loss_read_steps_later_still_stops_before_any_checkpoint_of_that_step(inputs, tmp_path, monkeypatch):
    """The step does not read its loss (that would make the host wait for a GPU every step): the
    trainer reads them every `log_every` steps and before each checkpoint. A NaN at step 5, read at
    step 6, names step 5; the checkpoint of step 4 is the last one."""
    from tasks.train.objectives import translation_ranking

    original = translation_ranking.TranslationRankingLoss.forward
    calls = {"n": 0}

    def poisoned(self, embeddings, valid, extras):
        calls["n"] += 1
        value = original(self, embeddings, valid, extras)
        return value * float("nan") if calls["n"] >= 5 else value

    monkeypatch.setattr(translation_ranking.TranslationRankingLoss, "forward", poisoned)
    cfg = config(steps=8, checkpoint_every=2, log_every=100, eval_every=0, objectives={"translation_ranking": {"weight": 1.0}})
    trainer = Trainer(cfg, inputs)
    values = trainer.train_step(0)
    assert isinstance(values["loss"], torch.Tensor) and values["loss"].dim() == 0  # not read by the step
    trainer = Trainer(cfg, inputs)
    calls["n"] = 0
    with pytest.raises(
        NonFiniteLossError, match=r"loss is nan at step 5 \(parts: \{'translation_ranking': nan\}\).*last good checkpoint"
    ):
        trainer.run(tmp_path / "out", tmp_path / "ckpt")
    assert calls["n"] == 6  # step 6 ran before the loss of step 5 was read
    latest = json.loads((tmp_path / "ckpt" / "latest.json").read_text())
    assert latest["step"] == 4


@pytest.mark.slow
def test_two_gloo_processes_match_one_process(inputs, tmp_path, tiny_model_dir, corpus_table, alignment_table):
    import pyarrow.parquet as pq

    cfg = config(steps=2, eval_every=0, batch_size=8, distributed={"nproc_per_node": 2, "backend": "gloo"})
    single, _ = run(cfg, inputs, tmp_path, "single")
    spec_dir = tmp_path / "spec"
    spec_dir.mkdir()
    pq.write_table(corpus_table, spec_dir / "corpus.parquet")
    pq.write_table(alignment_table, spec_dir / "align.parquet")
    spec = {"config": cfg.model_dump(mode="json"), "corpus": str(spec_dir / "corpus.parquet"), "alignments": str(spec_dir / "align.parquet"),
            "base_dir": str(tiny_model_dir), "out_dir": str(tmp_path / "ddp" / "out"), "checkpoint_dir": str(tmp_path / "ddp" / "ckpt")}  # fmt: skip
    (spec_dir / "spec.json").write_text(json.dumps(spec))
    from tasks.train.launch import launch

    launch(spec_dir / "spec.json", nproc=2, timeout_s=300)
    from safetensors.torch import load_file

    ddp = load_file(str(next((tmp_path / "ddp" / "ckpt").glob("step-*")) / "model.safetensors"))
    for k, v in weights(single).items():
        torch.testing.assert_close(ddp[k], v, atol=2e-5, rtol=1e-4, msg=k)


@pytest.mark.slow
def test_a_stop_request_stops_torchrun_workers_together_with_a_checkpoint(
    tmp_path, tiny_model_dir, corpus_table, alignment_table
):
    """The workers run in their own process group; `launch` asks them through a file, they agree
    on the step (all-reduce) and rank 0 says where it stopped."""
    import pyarrow.parquet as pq

    from tasks.stop import STOP
    from tasks.train.launch import launch

    cfg = config(
        steps=500, eval_every=0, checkpoint_every=1000, batch_size=8, distributed={"nproc_per_node": 2, "backend": "gloo"}
    )
    pq.write_table(corpus_table, tmp_path / "corpus.parquet")
    spec = {"config": cfg.model_dump(mode="json"), "corpus": str(tmp_path / "corpus.parquet"), "alignments": None,
            "base_dir": str(tiny_model_dir), "out_dir": str(tmp_path / "out"), "checkpoint_dir": str(tmp_path / "ckpt")}  # fmt: skip
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    STOP.set()
    try:
        with pytest.raises(
            Interrupted,
            match=r"^train: stopped (before step 1 of 500; no checkpoint yet|at step \d+ of 500; checkpoint at step \d+ kept)",
        ):
            launch(tmp_path / "spec.json", nproc=2, timeout_s=300)
    finally:
        STOP.clear()
    assert not (tmp_path / "out" / "metrics.json").exists()


def test_the_trainer_refuses_interpolation_the_stage_derives_it(inputs):
    with pytest.raises(ValueError, match="derives WiSE-FT weights"):
        Trainer(config(interpolation=0.5), inputs)


class Lines:
    """A stand-in for the shard's progress: what the trainer reports."""

    def __init__(self) -> None:
        self.expected, self.advanced, self.lines = None, 0, []

    def expect(self, total, unit, done=0):
        self.expected = (total, unit, done)

    def progress(self, n, check_stop=True):
        self.advanced += n

    def report(self, line):
        self.lines.append(line)


@pytest.mark.slow
def test_progress_lines_name_step_losses_lr_speed_and_eta(inputs, tmp_path):
    progress = Lines()
    cfg = config(steps=4, log_every=2, objectives={k: ALL[k] for k in ("translation_ranking", "word_translation_ranking")})
    Trainer(cfg, inputs).run(tmp_path / "out", tmp_path / "ckpt", progress=progress)
    assert progress.expected == (4, "steps", 0) and progress.advanced == 4
    assert [line.split(" · ")[0] for line in progress.lines] == [
        "train: step 1/4 (25%)",
        "train: step 2/4 (50%)",
        "train: step 4/4 (100%)",
    ]
    line = progress.lines[-1]
    assert "loss " in line and "(translation_ranking " in line and "word_translation_ranking " in line
    assert " · lr " in line and " examples/s · " in line and "ETA 0:00:00" in line


@pytest.mark.slow
def test_tensorboard_event_files_hold_per_objective_losses_and_survive_resume(inputs, tmp_path):
    from tasks.train.reporters import read_scalars

    cfg = config(steps=4, checkpoint_every=2, objectives={k: ALL[k] for k in ("translation_ranking", "word_translation_ranking")})
    with pytest.raises(TrainingStopped):
        Trainer(cfg.model_copy(update={"stop_after": 3}), inputs).run(tmp_path / "out", tmp_path / "ckpt")
    Trainer(cfg, inputs).run(tmp_path / "out", tmp_path / "ckpt")  # resumes at step 2
    scalars = read_scalars(tmp_path / "out" / "tensorboard")
    for tag in ("loss", "loss/translation_ranking", "loss/word_translation_ranking", "lr", "examples_per_second"):
        assert f"train/{tag}" in scalars, sorted(scalars)
    dev_languages = [t.removeprefix("eval/dev_accuracy/") for t in scalars if t.startswith("eval/dev_accuracy/")]
    assert dev_languages and "eval/dev_accuracy" in scalars, sorted(scalars)  # the mean and each language's
    # steps 1..4 once each: what the stopped run logged after its checkpoint (step 3) is purged
    assert [step for step, _ in scalars["train/loss/translation_ranking"]] == [1, 2, 3, 4]
    assert [step for step, _ in scalars["eval/dev_accuracy"]][0] == 0
    # the run's settings as TensorBoard hparams, against its final metrics
    plugins = _plugin_events(tmp_path / "out" / "tensorboard")
    assert "hparams" in plugins
    assert b"optimizer.lr" in plugins["hparams"] and b"eval/dev_accuracy" in plugins["hparams"]


def _plugin_events(logdir):
    """plugin name -> the plugin content bytes of every summary value that names one."""
    import struct

    from tensorboardX.proto.event_pb2 import Event

    found: dict[str, bytes] = {}
    for path in logdir.rglob("events.out.tfevents.*"):
        data, at = path.read_bytes(), 0
        while at + 12 <= len(data):
            (length,) = struct.unpack("<Q", data[at : at + 8])
            event = Event.FromString(data[at + 12 : at + 12 + length])
            at += 12 + length + 4
            for value in event.summary.value:
                if value.metadata.plugin_data.plugin_name:
                    found[value.metadata.plugin_data.plugin_name] = (
                        found.get(value.metadata.plugin_data.plugin_name, b"")
                        + value.metadata.plugin_data.content
                        + value.tag.encode()
                    )
    return found


@pytest.mark.slow
def test_objectives_that_need_alignments_are_named_when_there_are_none(inputs, caplog):
    objectives = {"translation_ranking": {"weight": 1.0}, "word_translation_ranking": {"weight": 0.2}}
    with caplog.at_level("WARNING", logger="tasks.train.trainer"):
        Trainer(config(objectives=objectives), TrainInputs(inputs.corpus, None, inputs.base_dir))
    assert "no word alignments" in caplog.text and "word_translation_ranking contribute nothing" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="tasks.train.trainer"):
        Trainer(config(objectives=objectives), inputs)
    assert "no word alignments" not in caplog.text


def test_curves_hold_a_step_0_dev_point_without_eval_every_and_the_png_plots_them(inputs, tmp_path):
    """eval_every = 0 still gives dev accuracy before any update and after the last step, so the
    dev panel is a line from the base, not one dot; the step-0 point is the base's score."""
    import pyarrow.parquet as pq

    trainer, metrics = run(config(steps=3, eval_every=0, objectives={"translation_ranking": {"weight": 1.0}}), inputs, tmp_path)
    out = tmp_path / "run" / "out"
    curves = pq.read_table(out / "curves.parquet").to_pylist()
    dev_steps = sorted(c["step"] for c in curves if c["metric"] == "dev_accuracy")
    assert dev_steps == [0, 3]
    step0 = next(c["value"] for c in curves if c["metric"] == "dev_accuracy" and c["step"] == 0)
    assert step0 == metrics["dev_base"]["mean"]
    assert {"loss", "loss/translation_ranking", "lr", "grad_norm"} <= {c["metric"] for c in curves}
    assert (out / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_freeze_lower_layers_keeps_the_embeddings_and_those_layers_bit_for_bit_and_trains_the_rest(inputs, tmp_path):
    objectives = {"translation_ranking": ALL["translation_ranking"]}
    trainer = Trainer(config(steps=2, eval_every=0, freeze_lower_layers=1, objectives=objectives), inputs)
    before = weights(trainer)
    trainer.run(tmp_path / "out", tmp_path / "ckpt")
    after = weights(trainer)
    depth = len(trainer.model.transformer_layers())
    assert depth >= 2, "the tiny model needs a layer above the frozen one"
    frozen = [k for k in before if ".embeddings." in k or ".encoder.layer.0." in k]
    trained = [k for k in before if f".encoder.layer.{depth - 1}." in k and k.endswith("weight")]
    assert frozen and trained
    assert all(torch.equal(before[k], after[k]) for k in frozen)
    assert all(not torch.equal(before[k], after[k]) for k in trained)


def test_freeze_lower_layers_beyond_the_model_depth_is_refused_before_training(inputs):
    with pytest.raises(ValueError, match="freeze_lower_layers = 99: the model has only"):
        Trainer(config(freeze_lower_layers=99, objectives={"translation_ranking": ALL["translation_ranking"]}), inputs)
