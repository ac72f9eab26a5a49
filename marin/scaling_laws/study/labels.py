"""What a study compares: its labels (corpora and mixtures), validation sets and metric,
checked when the graph is built.

    labels = study_labels({"plays": StudyCorpus(...), "docs": StudyCorpus(...),
                           "mix": Mixture({"plays": 0.7, "docs": 0.3})})
    labels.corpora            # {"plays": StudyCorpus, "docs": StudyCorpus}: tokenized once each
    labels.mixtures["mix"]    # (("plays", 0.7), ("docs", 0.3))
    sets = validation_sets(labels, None)      # every corpus's validation split, by its label
    check_metric("plays/bpb", sets)

Every check fails in one line (``StudyInputError``) naming the field and the fix.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DEFAULT_LABEL", "METRICS", "Mixture", "StudyCorpus", "StudyInputError",
           "StudyLabels", "check_metric", "study_labels", "validation_sets"]

DEFAULT_LABEL = "default"
#: metrics over all validation sets; ``<set>/loss`` and ``<set>/bpb`` name one set
METRICS = ("macro_bpb", "macro_loss", "loss", "bpb")
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class StudyInputError(ValueError):
    """A study's corpora, mixtures, validation sets or metric are inconsistent."""


@dataclass(frozen=True)
class StudyCorpus:
    """A corpus of the study.

    Attributes:
        train: files, folders or globs of documents (any fsspec URL: local, ``gs://``,
            ``s3://``, ``hf://``; .txt, .jsonl[.gz|.zst] or .parquet).
        validation: the same for its held-out text (its validation split).
        text_field: the JSON-lines field or Parquet column holding the text.
        version: what identifies remote or generated text that the executor cannot
            fingerprint (a package's version, a revision): part of the tokenize step's key.
    """

    train: tuple[str, ...]
    validation: tuple[str, ...] = ()
    text_field: str = "text"
    version: str = ""


@dataclass(frozen=True)
class Mixture:
    """Training text drawn from labelled corpora by weight, per token:
    ``Mixture({"plays": 0.7, "docs": 0.3})``. Weights are relative (they need not sum to 1);
    a weight of 0 leaves its corpus out."""

    weights: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        pairs = self.weights.items() if isinstance(self.weights, Mapping) else self.weights
        object.__setattr__(self, "weights", dict(pairs))


@dataclass(frozen=True)
class StudyLabels:
    """The labels in order; ``corpora`` the labels that are corpora, ``mixtures`` the
    labels that are mixtures, as (corpus label, weight) pairs with positive weights."""

    order: tuple[str, ...]
    corpora: dict[str, StudyCorpus]
    mixtures: dict[str, tuple[tuple[str, float], ...]]

    @property
    def single(self) -> bool:
        """One corpus under the default label: names stay as a one-corpus study's."""
        return self.order == (DEFAULT_LABEL,)


def study_labels(corpora: StudyCorpus | Mapping[str, StudyCorpus | Mixture]) -> StudyLabels:
    if isinstance(corpora, StudyCorpus):
        return StudyLabels((DEFAULT_LABEL,), {DEFAULT_LABEL: corpora}, {})
    if isinstance(corpora, Mixture):
        raise StudyInputError("isoflop_study's corpora is a Mixture of nothing: give a mapping "
                              "label -> StudyCorpus | Mixture, e.g. {'plays': StudyCorpus(...), "
                              "'mix': Mixture({'plays': 0.5, ...})}")
    if not isinstance(corpora, Mapping) or not corpora:
        raise StudyInputError("isoflop_study's corpora must be a StudyCorpus or a non-empty "
                              "mapping label -> StudyCorpus | Mixture")
    plain: dict[str, StudyCorpus] = {}
    for label, value in corpora.items():
        if not isinstance(label, str) or not _LABEL.match(label):
            raise StudyInputError(f"corpora label {label!r}: use letters, digits, '.', '_' and "
                                  "'-' (it names runs and folders)")
        if isinstance(value, StudyCorpus):
            plain[label] = value
        elif not isinstance(value, Mixture):
            raise StudyInputError(f"corpora[{label!r}] is a {type(value).__name__}; give a "
                                  "StudyCorpus or a Mixture")
    mixtures = {label: _mixture(label, value.weights, plain) for label, value in corpora.items()
                if isinstance(value, Mixture)}
    return StudyLabels(tuple(corpora), plain, mixtures)


def _mixture(label: str, weights: Mapping[str, float], corpora: Mapping[str, StudyCorpus]
             ) -> tuple[tuple[str, float], ...]:
    where = f"corpora[{label!r}]"
    if not weights:
        raise StudyInputError(f"{where} is a Mixture with no weights; give label -> weight")
    for name, weight in weights.items():
        if name not in corpora:
            close = difflib.get_close_matches(str(name), list(corpora), n=1)
            hint = f"did you mean {close[0]!r}?" if close else \
                f"the corpora are {', '.join(corpora) or 'none'}"
            raise StudyInputError(f"{where} weights {name!r}, which is no corpus of the study "
                                  f"(a mixture weights corpora, not other mixtures); {hint}")
        if not isinstance(weight, (int, float)) or isinstance(weight, bool) \
                or not math.isfinite(weight) or weight < 0:
            raise StudyInputError(f"{where} gives {name!r} the weight {weight!r}; weights must "
                                  "be finite numbers of 0 or more")
    if sum(weights.values()) <= 0:
        raise StudyInputError(f"{where}'s weights sum to 0; give at least one corpus a "
                              "positive weight")
    return tuple((name, float(w)) for name, w in weights.items() if w > 0)


def validation_sets(labels: StudyLabels, validation: Mapping[str, str] | Sequence[str] | None
                    ) -> dict[str, str]:
    """Validation set name -> the corpus whose validation split it is. ``None``: every
    corpus that has validation text, named by its label."""
    if validation is None:
        sets = {c: c for c, corpus in labels.corpora.items() if corpus.validation}
        if not sets:
            raise StudyInputError("no corpus of the study has validation text: give "
                                  "StudyCorpus(validation=...) for at least one")
        return sets
    if isinstance(validation, str):
        raise StudyInputError(f"validation={validation!r}: give a sequence of corpus labels "
                              f"(validation=({validation!r},)) or a mapping name -> label")
    sets = dict(validation) if isinstance(validation, Mapping) else {v: v for v in validation}
    if not sets:
        raise StudyInputError("validation is empty; leave it out to use every corpus's "
                              "validation split")
    for name, corpus in sets.items():
        if not isinstance(name, str) or not _LABEL.match(name):
            raise StudyInputError(f"validation set name {name!r}: use letters, digits, '.', '_' "
                                  "and '-'")
        if corpus not in labels.corpora:
            close = difflib.get_close_matches(str(corpus), list(labels.corpora), n=1)
            hint = f"did you mean {close[0]!r}?" if close else \
                f"the corpora are {', '.join(labels.corpora)}"
            raise StudyInputError(f"validation[{name!r}] names {corpus!r}, which is no corpus "
                                  f"of the study; {hint}")
        if not labels.corpora[corpus].validation:
            raise StudyInputError(f"validation[{name!r}]: corpus {corpus!r} has no validation "
                                  "text; give it StudyCorpus(validation=...)")
    return sets


def check_metric(metric: Any, sets: Mapping[str, str]) -> str:
    """``metric`` if the runs will record it; else a one-line error listing what they will."""
    known = [*METRICS, *(f"{s}/{q}" for s in sets for q in ("bpb", "loss"))]
    if metric in known:
        return metric
    close = difflib.get_close_matches(str(metric), known, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise StudyInputError(f"metric={metric!r} is not recorded by the study's runs; {hint}"
                          f"use one of {', '.join(known)}")
