"""Config models whose numbers and booleans are checked, not coerced.

Pydantic's default (lax) mode turns `max_workers = "2"` into 2, `max_workers = true` into 1 and
`seed = "7"` into 7: a typo or a quoted value in a TOML file silently becomes a setting. Its
strict mode refuses them, but applied to a whole model it also refuses what TOML cannot write
otherwise (a list for a tuple, a string for an enum or a path). So only the scalar types are made
strict, wherever they appear in a field's type (`int | None`, `list[float]`,
`dict[str, int]`, `tuple[float, float]`, `Annotated[int, Field(ge=1)]`):

- int: an integer, not a bool, a string or a float (`2.0`);
- float: an integer or a float (TOML `lr = 1` stays valid), not a bool or a string;
- bool: `true` or `false`, not 0/1 or "true".

Every int but a seed (a field named `seed` or `*_seed`) is also bounded by ±MAX_CONFIG_INT (2**53,
the largest integer a float keeps exactly): `max_workers = 99999999999999999999` is a typo, not a
setting. Fields with a meaningful range declare their own bounds on top (`max_workers` at most 1024).
"""

from __future__ import annotations

import types
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from annotated_types import Interval
from pydantic import BaseModel, Strict

_SCALARS = (bool, int, float)
MAX_CONFIG_INT = 2**53
_BUILTIN_GENERICS = {list: list, dict: dict, tuple: tuple, set: set, frozenset: frozenset}


def strict_scalars(annotation: Any, *, bounded: bool = True) -> Any:
    """`annotation` with every int, float and bool inside it marked Strict (the same object when
    there is none); `bounded`: ints also within ±MAX_CONFIG_INT (seeds are not: any integer
    seeds a generator, and a sample drawn with a large one must stay reproducible)."""
    if annotation is int:
        if not bounded:
            return Annotated[int, Strict()]
        return Annotated[int, Strict(), Interval(ge=-MAX_CONFIG_INT, le=MAX_CONFIG_INT)]
    if annotation in _SCALARS:
        return Annotated[annotation, Strict()]
    origin = get_origin(annotation)
    if origin is None or origin is Literal:
        return annotation
    args = get_args(annotation)
    if origin is Annotated:
        inner = strict_scalars(args[0], bounded=bounded)
        return annotation if inner is args[0] else Annotated[(inner, *args[1:])]
    strict = tuple(a if a is Ellipsis else strict_scalars(a, bounded=bounded) for a in args)
    if all(new is old for new, old in zip(strict, args)):
        return annotation
    if origin is Union or origin is types.UnionType:
        return Union[strict]
    if origin in _BUILTIN_GENERICS:
        return _BUILTIN_GENERICS[origin][strict]
    try:
        return origin[strict]  # collections.abc generics: Mapping[str, float], Sequence[int]
    except TypeError:
        return annotation  # a generic that cannot be rebuilt from its arguments: left lax


class StrictScalars(BaseModel):
    """A model base whose subclasses' int, float and bool fields (at any depth of their types)
    are strict; see the module docstring."""

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        changed = False
        for name, info in cls.model_fields.items():
            strict = strict_scalars(info.annotation, bounded=not name.endswith("seed"))
            if strict is not info.annotation:
                info.annotation = strict
                changed = True
        if changed:
            cls.model_rebuild(force=True)
