"""The trainer: one loop for every objective, plain or gradient-cached, one process or many.

A step:
1. rebuild the step's global batch from the step number (tasks.train.batching.BatchPlan), with
   what the objectives draw for it from (seed, step) (`Objective.draw`), take this process's rows, reseed torch from (seed, step, rank) — dropout draws depend on the step
   only, so resume is exact without replaying anything;
2. objectives' no-grad extras (frozen-model vectors, WMD), gathered over processes;
3. plain: forward all rows, sentence losses on the gathered vectors, token losses, backward.
   GradCache (`grad_cache_chunk` < rows): forward chunks without grad, keeping each chunk's RNG
   state; sentence losses on the full batch of cached vectors, backward to those vectors only;
   then each chunk again with grad (same RNG state, so the same dropout masks), backward of
   vector . cached gradient + the chunk's token losses. Peak memory is one chunk's activations,
   the negatives are the whole batch;
4. sum gradients over processes, clip, AdamW (fused), LR schedule.
The step never waits for the device: the losses and the gradient norm stay on it as 0-d tensors
and `run` reads them together every `log_every` steps and before every evaluation, checkpoint
and stop (one transfer). A NaN or infinite loss then stops training naming the first step that
had it; no checkpoint, best model or curve is ever written from that step on, so the last
good checkpoint is the one kept (the weights in memory, updated after it, are dropped).
Before the first step, every `eval_every` steps and after the last, rank 0 measures dev retrieval (tasks.encoders.neighbours) and keeps
the best weights; every `checkpoint_every` steps it writes a checkpoint (tasks.train.checkpoint).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch
from torch import nn

from tasks.encoders.neighbours import bitext_accuracy
from tasks.encoders.precision import full_fp32_matmuls
from tasks.languages import to_flores
from tasks.stop import Interrupted, stop_requested
from tasks.train import checkpoint as ckpt
from tasks.train.batching import BatchPlan, StepBatch, step_draws_rng
from tasks.train.config import TrainConfig
from tasks.train.data import build_training_data, multiway_rows
from tasks.train.distributed import gather_no_grad, gather_with_grad, sum_gradients, sum_over_processes
from tasks.train.model import DualEncoder, frozen_copy, load_transformer
from tasks.train.model_folder import save_model, write_curves
from tasks.train.objectives import Chunk, Objective, Side, TrainContext, build_objectives, needs_frozen_model
from tasks.train.reporters import StepMonitor
from tasks.train.tokens import tokenize
from tasks.train.views import forward_views, to_device

log = logging.getLogger(__name__)


class NonFiniteLossError(RuntimeError):
    """The loss became NaN or infinite; the last good checkpoint is kept."""


class TrainingStopped(RuntimeError):
    """`stop_after` was reached (tests and benchmarks simulate a killed run with it)."""


@dataclass
class TrainInputs:
    corpus: pa.Table  # corpus long format (or the translate stage's output)
    alignments: pa.Table | None  # WORD_ALIGNMENT_SCHEMA rows, or None
    base_dir: Path  # the base model directory


SCHEDULES = {"constant": "constant_with_warmup", "linear": "linear", "cosine": "cosine"}
"""`[train.schedule] kind` -> the name `transformers.get_scheduler` gives that schedule."""


def lr_scheduler(optimizer: torch.optim.Optimizer, config: TrainConfig) -> torch.optim.lr_scheduler.LambdaLR:
    """transformers' schedule (as the HF Trainer and sentence-transformers use it): the factor on
    the learning rate rises linearly from 0 at step 0 to 1 at `warmup_steps`, then stays at 1
    (constant), falls linearly to 0 at `steps` (linear) or along half a cosine to 0 (cosine)."""
    from transformers import get_scheduler

    return get_scheduler(
        SCHEDULES[config.schedule.kind], optimizer, num_warmup_steps=config.schedule.warmup_steps, num_training_steps=config.steps
    )


# --------------------------------------------------------------------------------- trainer


class Trainer:
    def __init__(
        self,
        config: TrainConfig,
        inputs: TrainInputs,
        *,
        rank: int = 0,
        world: int = 1,
        device: str | None = None,
        should_stop: Callable[[], bool] = stop_requested,
    ) -> None:
        from transformers import AutoTokenizer

        if config.interpolation < 1.0:
            raise ValueError(
                f"interpolation {config.interpolation}: the trainer trains the weights as they are (interpolation 1.0); "
                "the train stage derives WiSE-FT weights from them (tasks/train/interpolation.py)"
            )
        self.config, self.inputs, self.rank, self.world = config, inputs, rank, world
        self.should_stop = should_stop  # polled after every step (Ctrl-C: tasks/stop.py)
        if config.torch_threads:
            torch.set_num_threads(config.torch_threads)
        device = device or config.device or ("cuda" if torch.cuda.is_available() else "cpu")
        if device == "cuda" and world > 1:
            device = f"cuda:{torch.cuda.current_device()}"
        self.device = torch.device(device)
        use_bf16 = config.precision == "bf16" and self.device.type == "cuda"
        self.autocast = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if use_bf16 else contextlib.nullcontext
        # fp32 means IEEE float32 matmuls, backward passes included: TF32 (which a process may
        # have switched on) would give a GPU run other weights than a CPU run under one key
        self.step_precision = contextlib.nullcontext if use_bf16 else full_fp32_matmuls

        self.tokenizer = AutoTokenizer.from_pretrained(str(inputs.base_dir), use_fast=True)
        if not getattr(self.tokenizer, "is_fast", False):
            raise ValueError(f"{inputs.base_dir}: a fast tokenizer is required (word-to-subword maps use its offsets)")
        self.data = build_training_data(
            self.tokenizer,
            inputs.corpus,
            pivot=config.pivot,
            langs=config.langs and _flores(config.langs),
            max_length=config.max_length,
            prefix=config.prefix,
            alignments=inputs.alignments,
            min_alignment_score=config.min_alignment_score,
        )
        self.plan = BatchPlan(
            self.data,
            batch_size=config.batch_size,
            views=config.views,
            seed=config.seed,
            pivot_in_every_row=config.pivot_in_every_row,
        )
        self.local_rows = config.batch_size // world

        torch.manual_seed(config.seed)
        transformer = load_transformer(inputs.base_dir, dropout=config.dropout)
        self.model = DualEncoder(
            transformer, pooling=config.pooling, n_langs=len(self.data.langs) if config.language_embedding else 0
        ).to(self.device)
        if config.freeze_word_embeddings:
            self.model.word_embeddings().weight.requires_grad_(False)
        self.model.freeze_lower(config.freeze_lower_layers)
        unaligned = [
            name
            for name, section in config.objectives.active().items()
            if section.needs_alignments and not len(self.data.alignments)
        ]
        if unaligned and rank == 0:
            log.warning(
                "no word alignments in the training data (no align stage, or none matched): %s contribute nothing",
                ", ".join(unaligned),
            )
        self.frozen = frozen_copy(self.model) if needs_frozen_model(config.objectives) else None
        self.objectives: dict[str, Objective] = build_objectives(config, self.model, self.data, inputs.base_dir)
        self.module = nn.ModuleDict({"encoder": self.model, "objectives": nn.ModuleDict(self.objectives)}).to(self.device)
        self.module.train()
        self.params = [p for p in self.module.parameters() if p.requires_grad]
        decay, no_decay = [], []
        for name, p in self.module.named_parameters():
            if p.requires_grad:
                (no_decay if name.endswith("bias") or "norm" in name.lower() or p.ndim == 1 else decay).append(p)
        opt = config.optimizer
        # fused: one kernel pass over each tensor; on CPU the default per-tensor path spent a
        # third of an e5-small step updating the 250k-row embedding (benchmarks/train_step.py)
        self.optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": opt.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=opt.lr, betas=opt.betas, eps=opt.eps, fused=self.device.type in ("cpu", "cuda"),
        )  # fmt: skip
        self.scheduler = lr_scheduler(self.optimizer, config)
        self.ctx = TrainContext(self.data, self.model, self.frozen, self.device, self.autocast)
        self.dev = self._dev_set()
        self.checkpoint_dir: Path | None = None

    # ---------------------------------------------------------------------------- dev set

    def _dev_set(self) -> dict[str, Any] | None:
        try:
            _, langs, rows = multiway_rows(self.inputs.corpus, pivot=self.config.pivot, langs=self.data.langs[1:], split="dev")
        except ValueError:
            return None
        if self.config.eval_max_groups:
            rows = rows.slice(0, self.config.eval_max_groups)
        distinct = pc.unique(
            pa.chunked_array([c for column in rows.columns for c in column.chunks], type=pa.large_string()).drop_null()
        )
        texts = distinct.take(pc.array_sort_indices(distinct))  # sorted (UTF-8 byte order: code point order, as `sorted` gives)
        table = np.stack(
            [pc.index_in(rows.column(lang), value_set=texts).fill_null(-1).to_numpy().astype(np.int64) for lang in langs], axis=1
        ).reshape(rows.num_rows, len(langs))
        ids, lengths, _ = tokenize(self.tokenizer, texts, max_length=self.config.max_length, prefix=self.config.prefix)
        lang_of = np.zeros(len(texts), dtype=np.int64)
        for c in range(len(langs)):
            have = table[:, c] >= 0
            lang_of[table[have, c]] = self.data.langs.index(langs[c])
        return {"langs": langs, "table": table, "ids": ids, "lengths": lengths, "lang_of": lang_of}

    @torch.no_grad()
    def evaluate_dev(self, batch_size: int = 128) -> dict[str, float] | None:
        """Mean of both retrieval directions between the pivot and every language, on dev rows."""

        if self.dev is None:
            return None
        dev = self.dev
        was_training = self.model.training
        self.model.eval()
        order = np.argsort(-dev["lengths"], kind="stable")
        vectors = np.zeros((len(order), self.model.hidden_size), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            width = int(dev["lengths"][idx].max())
            ids = torch.from_numpy(dev["ids"][idx, :width]).to(self.device)
            att = torch.from_numpy((np.arange(width)[None, :] < dev["lengths"][idx][:, None]).astype(np.int64)).to(self.device)
            langs = torch.from_numpy(dev["lang_of"][idx]).to(self.device)
            with self.autocast(), self.step_precision():
                emb, _ = self.model(ids, att, langs)
            vectors[idx] = emb.float().cpu().numpy()
        self.model.train(was_training)
        scores: dict[str, float] = {}
        table = dev["table"]
        for c, lang in enumerate(dev["langs"][1:], start=1):
            both = (table[:, 0] >= 0) & (table[:, c] >= 0)
            if both.sum() < 2:
                continue
            fwd, bwd = bitext_accuracy(vectors[table[both, c]], vectors[table[both, 0]])
            scores[lang] = (fwd + bwd) / 2
        if not scores:
            return None
        scores["mean"] = float(np.mean([v for k, v in scores.items()]))
        return scores

    # ------------------------------------------------------------------------------- step

    def _chunk(self, part: StepBatch, tensors: dict[str, torch.Tensor], langs: torch.Tensor, norm: float) -> Chunk:
        b = part.size

        def side(sl: slice) -> Side:
            return Side(
                tensors["hidden"][sl], tensors["attention_mask"][sl], tensors["input_ids"][sl], tensors["word_ids"][sl], langs[sl]
            )

        return Chunk(part, side(slice(b, 2 * b)), side(slice(0, b)), self.config.batch_size, norm)

    def _token_losses(
        self, part: StepBatch, tensors: dict[str, torch.Tensor], langs: torch.Tensor, norms: dict[str, float]
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        total = tensors["hidden"].new_zeros((), dtype=torch.float32)
        parts: dict[str, torch.Tensor] = {}
        for name, obj in self.objectives.items():
            if obj.level == "token":
                value = obj(self.ctx, self._chunk(part, tensors, langs, norms[name]))
                parts[name] = value.detach()
                total = total + obj.weight * value
        return total, parts

    def _sentence_losses(
        self, emb_local: torch.Tensor, valid: torch.Tensor, extras: dict[str, dict[str, torch.Tensor]]
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        emb = gather_with_grad(emb_local)
        total = emb.new_zeros((), dtype=torch.float32)
        parts: dict[str, torch.Tensor] = {}
        for name, obj in self.objectives.items():
            if obj.level == "sentence":
                value = obj(emb, valid, extras.get(name, {}))
                parts[name] = value.detach()
                total = total + obj.weight * value
        return total, parts

    def step_batch(self, step: int) -> StepBatch:
        """The step's global batch, with what the objectives draw for it (`Objective.draw`)."""
        draws = {name: obj.draw for name, obj in self.objectives.items()}
        return self.plan.batch(step).draw(draws, step_draws_rng(self.config.seed, step))

    def backward_step(self, step: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The step's forward and backward passes: every parameter's `.grad` holds the gradient of
        the global batch's loss (summed over processes). Returns (loss, loss per objective), 0-d
        tensors on the device."""
        with self.step_precision():
            return self._backward_step(step)

    def _backward_step(self, step: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        config = self.config
        torch.manual_seed(config.seed * 1_000_003 + step * 1_009 + self.rank)
        full = self.step_batch(step)
        local = full.rows(self.rank * self.local_rows, (self.rank + 1) * self.local_rows)
        valid = to_device(self.ctx, full.text_ids >= 0)
        extras: dict[str, dict[str, torch.Tensor]] = {}
        for name, obj in self.objectives.items():
            if obj.level == "sentence":
                extras[name] = {k: gather_no_grad(v) for k, v in obj.prepare(self.ctx, local).items()}
        norms = {name: obj.normaliser(self.data, full) for name, obj in self.objectives.items() if obj.level == "token"}

        chunk = config.grad_cache_chunk or self.local_rows
        if chunk >= self.local_rows:
            emb, tensors, langs = forward_views(self.ctx, self.model, local)
            sentence, s_parts = self._sentence_losses(emb, valid, extras)
            token, t_parts = self._token_losses(local, tensors, langs, norms)
            (sentence + token).backward()
        else:
            bounds = [(s, min(s + chunk, self.local_rows)) for s in range(0, self.local_rows, chunk)]
            states, cached = [], []
            with torch.no_grad():
                for s, e in bounds:
                    states.append(RandContext(self.device))
                    cached.append(forward_views(self.ctx, self.model, local.rows(s, e))[0])
            emb_local = torch.cat(cached).detach().requires_grad_(True)
            sentence, s_parts = self._sentence_losses(emb_local, valid, extras)
            if sentence.requires_grad:
                sentence.backward()
            grad = emb_local.grad if emb_local.grad is not None else torch.zeros_like(emb_local)
            token = sentence.new_zeros(())
            t_parts = {}
            for (s, e), state in zip(bounds, states):
                part = local.rows(s, e)
                with state:  # the chunk's first pass's dropout masks; the RNG is put back after
                    emb, tensors, langs = forward_views(self.ctx, self.model, part)
                    t_total, t_chunk = self._token_losses(part, tensors, langs, norms)
                    ((emb * grad[s:e]).sum() + t_total).backward()
                token = token + t_total.detach()
                for k, v in t_chunk.items():
                    t_parts[k] = t_parts.get(k, 0.0) + v

        sum_gradients(self.params)
        token_global = sum_over_processes(token.detach().reshape(1))[0]
        t_parts = {k: sum_over_processes(torch.as_tensor(v, device=self.device).reshape(1))[0] for k, v in t_parts.items()}
        return sentence.detach() + token_global, {**s_parts, **t_parts}

    def train_step(self, step: int) -> dict[str, torch.Tensor | float]:
        """One optimizer step. The losses and the gradient norm come back as 0-d tensors on the
        device (reading one makes the host wait for the GPU); `read_values` turns steps of them
        into floats at once and stops on a non-finite loss."""
        config = self.config
        loss, parts = self.backward_step(step)
        grad_norm = None
        if config.optimizer.max_grad_norm:
            grad_norm = torch.nn.utils.clip_grad_norm_(self.params, config.optimizer.max_grad_norm)
        lr = self.scheduler.get_last_lr()[0]
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        out: dict[str, torch.Tensor | float] = {"loss": loss, "lr": lr, **{f"loss/{k}": v for k, v in parts.items()}}
        if grad_norm is not None:
            out["grad_norm"] = grad_norm.detach()
        return out

    def read_values(self, pending: list[tuple[int, dict[str, torch.Tensor | float]]]) -> list[tuple[int, dict[str, float]]]:
        """(step, train_step's values) of steps not read yet -> floats, in one device-to-host transfer."""
        tensors = [
            v.detach().reshape(()).double() for _, values in pending for v in values.values() if isinstance(v, torch.Tensor)
        ]
        numbers = iter(torch.stack(tensors).tolist() if tensors else [])
        return [
            (done, {k: next(numbers) if isinstance(v, torch.Tensor) else float(v) for k, v in values.items()})
            for done, values in pending
        ]

    def check_finite(self, done: int, values: dict[str, float]) -> None:
        if not math.isfinite(values["loss"]):
            parts = {k.removeprefix("loss/"): v for k, v in values.items() if k.startswith("loss/")}
            raise NonFiniteLossError(
                f"loss is {values['loss']} at step {done} (parts: {parts}); "
                f"training stopped; the last good checkpoint is kept in {self.checkpoint_dir}"
            )

    # -------------------------------------------------------------------------------- run

    def run(
        self, out_dir: Path, checkpoint_dir: Path, progress: Any = None, on_checkpoint: Callable[[Path], None] | None = None
    ) -> dict[str, Any]:
        """Train (resuming from `checkpoint_dir` when it holds a checkpoint), export into `out_dir`.

        `progress` (a ShardContext, or None) hears of every step and gets a line every
        `log_every` steps; curves also go to the `report_to` reporters (tasks.train.reporters).
        `on_checkpoint` gets each checkpoint's folder once it is written (rank 0; the store
        mirror, tasks.train.checkpoint.StoreCheckpoints.upload)."""

        config = self.config
        self.checkpoint_dir = checkpoint_dir
        state: dict[str, Any] = {"curves": [], "best_score": None, "best_step": None, "best_scores": None, "train_seconds": 0.0}
        start = 0
        latest = ckpt.latest_checkpoint(checkpoint_dir)
        if latest is not None:
            state = ckpt.load_checkpoint(latest, module=self.module, optimizer=self.optimizer, scheduler=self.scheduler)
            start = int(state["step"])
            log.info("resuming from %s (step %d)", latest, start)
        is_main = self.rank == 0
        if self._stop_agreed():
            kept = f"checkpoint at step {start} kept" if start else "no checkpoint yet"
            raise Interrupted(f"train: stopped before step {start + 1} of {config.steps}; {kept}; rerun resumes")
        # a dev point before any update, even with eval_every = 0: the curve starts from the base
        # (an evaluation in eval mode draws no random numbers and changes no weights)
        if start == 0 and is_main:
            scores = self.evaluate_dev()
            if scores is not None:
                state["curves"] += dev_curves(0, scores)
                state["base_scores"] = scores
        started = time.perf_counter()
        seconds_before = float(state.get("train_seconds", 0.0))

        monitor = StepMonitor(config, checkpoint_dir, start, progress, len(state["curves"]) if start else 0) if is_main else None
        pending: list[tuple[int, dict[str, torch.Tensor | float]]] = []

        def settle() -> None:
            # at the same steps on every process: each reads the same global loss and stops with the others
            read = self.read_values(pending)
            pending.clear()
            for done, values in read:
                self.check_finite(done, values)  # the steps before the first non-finite one reach the curves
                state["curves"] += [{"step": done, "metric": k, "value": v} for k, v in values.items()]
                if monitor is not None:
                    monitor.step(done, values, state["curves"])

        for step in range(start, config.steps):
            pending.append((step + 1, self.train_step(step)))
            done = step + 1
            if monitor is not None:
                monitor.tick(done)
            last = done == config.steps
            evaluating = bool(config.eval_every and done % config.eval_every == 0) or last
            if done % config.log_every == 0 or done == start + 1 or evaluating or done % config.checkpoint_every == 0:
                settle()
            if is_main and evaluating:
                scores = self.evaluate_dev()
                if scores is not None:
                    state["curves"] += dev_curves(done, scores)
                    if state["best_score"] is None or scores["mean"] > state["best_score"]:
                        state.update(best_score=scores["mean"], best_step=done, best_scores=scores)
                        ckpt.save_tensors_atomic(checkpoint_dir / ckpt.BEST_MODEL, self.model.state_dict())
            stopping = not last and self._stop_agreed()
            if stopping or (config.stop_after and done >= config.stop_after):
                settle()
            if is_main and (done % config.checkpoint_every == 0 or last or stopping):
                state["train_seconds"] = seconds_before + time.perf_counter() - started
                state["position"] = list(self.plan.position(step))
                saved = ckpt.save_checkpoint(
                    checkpoint_dir, step=done, module=self.module, optimizer=self.optimizer, scheduler=self.scheduler, state=state
                )
                if on_checkpoint is not None:
                    on_checkpoint(saved)
            if stopping:
                raise Interrupted(
                    f"train: stopped at step {done} of {config.steps}; checkpoint at step {done} kept in {checkpoint_dir}; rerun resumes from it"
                )
            if config.stop_after and done >= config.stop_after and not last:
                raise TrainingStopped(f"stopped after step {done} (stop_after)")
        train_seconds = seconds_before + time.perf_counter() - started
        if not is_main:
            return {}
        monitor.finish(out_dir, state["curves"])
        final_state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        best = checkpoint_dir / ckpt.BEST_MODEL
        if state.get("best_step") is not None and best.exists():
            from safetensors.torch import load_file

            self.model.load_state_dict(load_file(str(best)))
        out_dir.mkdir(parents=True, exist_ok=True)
        metrics = self._metrics(state, train_seconds)
        save_model(self.model, self.tokenizer, out_dir / "model", pooling=config.pooling, max_length=config.max_length,
                     langs=self.data.langs, card=_model_card(config, metrics))  # fmt: skip
        write_curves(
            state["curves"], out_dir / "curves.parquet", out_dir / "curves.png", title=f"train: {', '.join(self.objectives)}"
        )
        (out_dir / "metrics.json").write_text(json.dumps(metrics, indent=1, sort_keys=True), encoding="utf-8")
        self.model.load_state_dict(final_state)
        return metrics

    def _stop_agreed(self) -> bool:
        """Whether to stop now; with several processes, every one stops when any was asked to
        (each must stop at the same step, or the next collective call waits forever)."""
        asked = bool(self.should_stop())
        if self.world > 1:
            asked = bool(sum_over_processes(torch.tensor([float(asked)], device=self.device))[0] > 0)
        return asked

    def _metrics(self, state: dict[str, Any], train_seconds: float) -> dict[str, Any]:
        steps = self.config.steps
        final_losses = {c["metric"]: c["value"] for c in state["curves"] if c["step"] == steps and c["metric"].startswith("loss")}
        return {
            "steps": steps,
            "objectives": {k: obj.weight for k, obj in self.objectives.items()},
            "train_rows": self.data.n_groups,
            "train_texts": len(self.data.texts),
            "aligned_pairs": len(self.data.alignments),
            "languages": self.data.langs,
            "dropped": dict(self.data.dropped),
            "best_step": state.get("best_step") or steps,
            "dev": state.get("best_scores"),
            "dev_groups": int(self.dev["table"].shape[0]) if self.dev is not None else None,
            "dev_base": state.get("base_scores"),
            "final_losses": final_losses,
            "train_seconds": round(train_seconds, 2),
            "interpolation": self.config.interpolation,
            "examples_per_second": round(steps * self.config.batch_size / train_seconds, 2) if train_seconds > 0 else None,
        }


def dev_curves(step: int, scores: dict[str, float]) -> list[dict[str, Any]]:
    """Curve points of a dev evaluation: `dev_accuracy` (the mean) and `dev_accuracy/{lang}`."""
    return [{"step": step, "metric": "dev_accuracy" if lang == "mean" else f"dev_accuracy/{lang}", "value": value}
            for lang, value in sorted(scores.items(), key=lambda item: item[0] != "mean")]  # fmt: skip


def _flores(codes: list[str]) -> list[str]:

    return [to_flores(c) for c in codes]


class RandContext:
    """torch's RNG state (CPU, and `device` where it is a GPU) when made; `with` replays it inside
    `torch.random.fork_rng`, which puts back the state the block found when it ends. GradCache's
    `RandContext` (sentence-transformers' cached losses have it too): a chunk's second forward
    pass draws the dropout masks of its first."""

    def __init__(self, device: torch.device) -> None:
        self.devices = [device] if device.type == "cuda" else []
        self.cpu_state = torch.get_rng_state()
        self.device_states = [torch.cuda.get_rng_state(d) for d in self.devices]

    def __enter__(self) -> None:
        self._fork = torch.random.fork_rng(devices=self.devices)
        self._fork.__enter__()
        torch.set_rng_state(self.cpu_state)
        for d, state in zip(self.devices, self.device_states):
            torch.cuda.set_rng_state(state, d)

    def __exit__(self, *exc: object) -> None:
        self._fork.__exit__(*exc)


def _model_card(config: TrainConfig, metrics: dict[str, Any]) -> str:
    objectives = ", ".join(f"{k} (weight {w})" for k, w in metrics["objectives"].items())
    dev = metrics.get("dev") or {}
    lines = [
        "# xlembed cross-lingual sentence encoder",
        "",
        f"Trained by the xlembed train stage: {config.steps} steps, batch {config.batch_size}, max length {config.max_length}, "
        f"pooling {config.pooling}, objectives: {objectives}.",
        f"Languages: {', '.join(metrics['languages'])} (pivot {config.pivot}).",
        f"Checkpoint chosen on dev retrieval: step {metrics['best_step']}, mean accuracy {dev.get('mean', float('nan')):.4f}."
        if dev
        else "No dev split: the final step's weights.",
        "",
        f"Prefix used in training: {config.prefix!r}." if config.prefix else "No text prefix.",
    ]
    return "\n".join(lines) + "\n"
