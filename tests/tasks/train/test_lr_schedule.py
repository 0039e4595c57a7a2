"""The train stage's LR schedules (transformers' get_scheduler) and GradCache's RNG replay (RandContext)."""

from __future__ import annotations

import math

import pytest
import torch
from transformers import get_scheduler

from tasks.train.config import TrainConfig
from tasks.train.trainer import SCHEDULES, RandContext, Trainer, TrainInputs, lr_scheduler

CASES = [  # (kind, warmup_steps, steps)
    ("linear", 0, 10),
    ("linear", 3, 10),
    ("linear", 10, 10),
    ("linear", 20, 1000),
    ("cosine", 0, 7),
    ("cosine", 4, 9),
    ("cosine", 20, 1000),
    ("constant", 0, 5),
    ("constant", 5, 12),
]


def schedule_config(kind: str, warmup: int, steps: int) -> TrainConfig:
    return TrainConfig.model_validate({"steps": steps, "schedule": {"kind": kind, "warmup_steps": warmup}})


def factors(kind: str, warmup: int, steps: int) -> list[float]:
    """The factor on the learning rate at each step, read off the scheduler as the trainer steps it."""
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    scheduler = lr_scheduler(optimizer, schedule_config(kind, warmup, steps))
    out = []
    for _ in range(steps):
        out.append(scheduler.get_last_lr()[0])
        optimizer.step()
        scheduler.step()
    return out


def old_factor(kind: str, warmup: int, total: int, step: int) -> float:
    """The hand-written schedule this replaced (train code version 2), kept here to compare."""
    if warmup and step < warmup:
        return (step + 1) / warmup
    if kind == "constant":
        return 1.0
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    if kind == "linear":
        return max(0.0, 1.0 - progress)
    return 0.5 * (1.0 + math.cos(math.pi * progress))


@pytest.mark.parametrize(("kind", "warmup", "steps"), CASES)
def test_lr_schedule_is_transformers_schedule_of_that_name(kind, warmup, steps):
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    reference = get_scheduler(SCHEDULES[kind], optimizer, num_warmup_steps=warmup, num_training_steps=steps)
    expected = [reference.lr_lambdas[0](step) for step in range(steps)]
    assert factors(kind, warmup, steps) == expected


@pytest.mark.parametrize(("kind", "warmup", "steps"), CASES)
def test_lr_schedule_against_the_old_formula_at_every_step(kind, warmup, steps):
    """After warmup the old values, to the last bit for cosine and constant and within one unit in
    the last place for linear ((total - s) / n where the old code took 1 - (s - w) / n). During
    warmup transformers starts from 0: step s trains at s / warmup, where the old code used
    (s + 1) / warmup, so every warmup step runs at the old previous step's rate."""
    new = factors(kind, warmup, steps)
    for step, value in enumerate(new):
        old = old_factor(kind, warmup, steps, step)
        if step < warmup:
            assert value == step / warmup
            assert step == 0 or value == old_factor(kind, warmup, steps, step - 1)
        elif kind == "linear":
            assert value == pytest.approx(old, rel=0, abs=math.ulp(1.0))
        else:
            assert value == old


@pytest.fixture(scope="module")
def inputs(tiny_model_dir, corpus_table, alignment_table):
    return TrainInputs(corpus_table, alignment_table, tiny_model_dir)


def test_trainer_warms_up_from_zero_lr(inputs):
    cfg = TrainConfig.model_validate(
        {
            "steps": 4,
            "batch_size": 8,
            "views": 2,
            "max_length": 24,
            "optimizer": {"lr": 1e-3},
            "torch_threads": 1,
            "schedule": {"kind": "linear", "warmup_steps": 2},
            "objectives": {"translation_ranking": {"weight": 1.0}},
        }  # fmt: skip
    )
    trainer = Trainer(cfg, inputs)
    lrs = []
    for step in range(4):
        lrs.append(trainer.train_step(step)["lr"])
    assert lrs == pytest.approx([0.0, 5e-4, 1e-3, 5e-4], abs=1e-12)


def test_rand_context_replays_the_rng_and_puts_back_the_state_it_found():
    torch.manual_seed(0)
    replay = RandContext(torch.device("cpu"))
    first = torch.rand(5)
    dropout_first = torch.nn.functional.dropout(torch.ones(64), p=0.5)
    torch.rand(3)  # the stream moves on
    state = torch.get_rng_state()
    with replay:
        assert torch.equal(torch.rand(5), first)
        assert torch.equal(torch.nn.functional.dropout(torch.ones(64), p=0.5), dropout_first)
    assert torch.equal(torch.get_rng_state(), state)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_rand_context_replays_the_gpu_rng_too():
    device = torch.device("cuda")
    torch.manual_seed(0)
    replay = RandContext(device)
    first = torch.rand(5, device=device)
    torch.rand(3, device=device)
    state = torch.cuda.get_rng_state(device)
    with replay:
        assert torch.equal(torch.rand(5, device=device), first)
    assert torch.equal(torch.cuda.get_rng_state(device), state)
