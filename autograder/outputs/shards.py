"""One batch graded as N shards on N machines, then merged into one gradebook.

Why a hash of the name: every shard lists the whole batch and keeps the submissions whose
name's SHA-256 falls in its slice. No shard needs to hear from another, the slices are the same
on every machine (Python's own ``hash`` is salted per process), and adding a submission moves no
other one to a different shard, so a shard's kept grades stay where they are.

Each shard's folder holds its submissions' grades and ``shard.json``: which shard it is, the
suite it was graded with (``grade.suite_digest``, as the regrade cache computes it), the batch it
was cut from and the names it owns. ``merge`` checks those before it writes anything: the merged
gradebook is then the one a single run of the same batch writes.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from autograder.outputs import report

MANIFEST = "shard.json"


class ShardError(ValueError):
    """Shards that cannot be merged into one gradebook; the message says why and what to do."""


@dataclass(frozen=True, order=True)
class Shard:
    index: int  # 1 to count
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> Shard:
    """``I/N``: the I-th (from 1) of N shards."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not match:
        raise ValueError(f"--shard {text!r}: write it I/N, such as 2/3")
    shard = Shard(int(match[1]), int(match[2]))
    if not 1 <= shard.index <= shard.count:
        raise ValueError(f"--shard {text}: I counts from 1 to N")
    return shard


def shard_of(name: str, count: int) -> int:
    """The shard (1 to ``count``) that grades the submission ``name``."""
    digest = hashlib.sha256(name.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


def owned(found: list[tuple[str, Path]], shard: Shard) -> list[tuple[str, Path]]:
    """The submissions of the batch that ``shard`` grades."""
    return [
        (name, path)
        for name, path in found
        if shard_of(name, shard.count) == shard.index
    ]


def batch_digest(names: list[str]) -> str:
    """The batch a shard was cut from, by its submissions' names."""
    return hashlib.sha256("\0".join(sorted(names)).encode("utf-8")).hexdigest()


def write_manifest(
    out: Path, shard: Shard, suite: str, batch: list[str], names: list[str]
) -> None:
    report.private_dir(out)
    manifest = {
        "shard": str(shard),
        "suite_sha256": suite,
        "batch_sha256": batch_digest(batch),
        "batch_size": len(batch),
        "names": sorted(names),
    }
    report.atomic_write(out / MANIFEST, json.dumps(manifest, indent=2) + "\n")


@dataclass(frozen=True)
class ShardOutput:
    folder: Path
    shard: Shard
    suite: str
    batch: str
    batch_size: int
    names: list[str]


def read_manifest(folder: Path) -> ShardOutput:
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        return ShardOutput(
            folder,
            parse_shard(manifest["shard"]),
            manifest["suite_sha256"],
            manifest["batch_sha256"],
            manifest["batch_size"],
            list(manifest["names"]),
        )
    except FileNotFoundError:
        raise ShardError(
            f"{folder} holds no {MANIFEST}: it is not a shard's output "
            "(autograder grade PATH... --shard I/N --out DIR writes one)"
        ) from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ShardError(f"{folder / MANIFEST} cannot be read: {exc}") from None


def check(shards: list[ShardOutput]) -> None:
    """Refuse shards that would not make the gradebook of one run of the batch."""
    first = shards[0]
    for other in shards[1:]:
        if other.shard.count != first.shard.count:
            raise ShardError(
                f"shard {first.shard} ({first.folder}) and shard {other.shard} "
                f"({other.folder}) come from different splits and overlap: merge the "
                "shards of one split"
            )
        if other.suite != first.suite:
            raise ShardError(
                f"shard {first.shard} ({first.folder}) and shard {other.shard} "
                f"({other.folder}) were graded with different suites (tests, engine, torch "
                "version, -k or visibility): grade every shard with the same ones"
            )
        if other.batch != first.batch:
            raise ShardError(
                f"shard {first.shard} ({first.folder}) and shard {other.shard} "
                f"({other.folder}) were cut from different batches: give every shard the "
                "same PATHS"
            )
    folders: dict[int, Path] = {}
    for output in shards:
        if output.shard.index in folders:
            raise ShardError(
                f"shard {output.shard} is given twice ({folders[output.shard.index]} and "
                f"{output.folder}): the shards overlap; give each once"
            )
        folders[output.shard.index] = output.folder
    count = first.shard.count
    missing = [str(Shard(i, count)) for i in range(1, count + 1) if i not in folders]
    if missing:
        raise ShardError(
            f"shard{'s' * (len(missing) > 1)} {', '.join(missing)} missing: "
            f"merging needs all {count}"
        )
    names = [name for output in shards for name in output.names]
    if len(set(names)) != len(names) or batch_digest(names) != first.batch:
        raise ShardError(
            f"the shards' submissions are not the {first.batch_size} of the batch they were "
            "cut from: grade every shard again on the same PATHS"
        )
    for output in shards:
        unfinished = [
            n
            for n in output.names
            if not (output.folder / n / report.RESULTS).is_file()
        ]
        if unfinished:
            raise ShardError(
                f"shard {output.shard} ({output.folder}) has no grade for "
                f"{len(unfinished)} of its submissions ({', '.join(unfinished[:5])}"
                f"{', ...' if len(unfinished) > 5 else ''}): it did not finish; run it again"
            )


def merge(folders: list[Path], out: Path) -> list[str]:
    """Check the shards in ``folders``, then copy their grades into ``out``; the batch's
    names. The gradebook and class report are the caller's to write."""
    shards = sorted((read_manifest(f) for f in folders), key=lambda s: s.shard)
    check(shards)
    report.private_dir(out)
    for output in shards:
        for name in output.names:
            report.private_dir(out / name)
            for file in report.FILES:  # in their order: results last, the grade is done
                source = output.folder / name / file
                if source.is_file():
                    text = source.read_text(encoding="utf-8")
                    report.atomic_write(out / name / file, text)
    return sorted(name for output in shards for name in output.names)
