"""What went wrong with one submission, worked out once from its test results.

Each part's points, its first failure and its likely mistake, and the limits the student's code
ran into. ``feedback.md`` and the instructor's file open with it; ``results.json`` carries it in
``extra_data``, from which the gradebook's ``problems`` column, the terminal's class summary
and ``report.html`` are all made: they say the same things because they read the same record,
never each other's wording.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from autograder.facts import safe_text
from autograder.facts.points import PARTS

#: What the sandbox raises when the student's code runs into one of its limits.
LIMITS = ("TimeoutError", "ProcessExit", "MemoryError")


@dataclass(frozen=True)
class PartFinding:
    part: int
    score: int
    max_score: int
    first_failure: str = ""  # the name of the part's first failing test
    error: str = ""  # what the student's code raised in that failure, if it raised
    diagnosis: str = ""  # the part's likely mistake: the first its failures name


@dataclass(frozen=True)
class Findings:
    parts: list[PartFinding]  # the parts that have tests, in order
    limits: dict[str, list[int]] = field(default_factory=dict)  # kind -> parts
    problems: list[str] = field(default_factory=list)  # the submission's own problems

    def troubles(self) -> list[str]:
        """What went wrong beyond the score, one entry each: the gradebook's ``problems``
        column and the class report's troubles, word for word."""
        hit = [
            f"hit a limit: {kind} in part{'s' * (len(parts) > 1)} "
            + ", ".join(map(str, parts))
            for kind, parts in self.limits.items()
        ]
        return [*hit, *self.problems]

    def mistakes(self) -> list[tuple[int, str]]:
        """``(part, likely mistake)`` of each part that names one."""
        return [(p.part, p.diagnosis) for p in self.parts if p.diagnosis]

    def to_json(self) -> dict:
        return {
            "parts": [asdict(p) for p in self.parts],
            "limits": self.limits,
            "problems": self.problems,
        }

    @classmethod
    def from_json(cls, data: dict) -> Findings:
        return cls(
            [PartFinding(**p) for p in data["parts"]],
            {str(k): list(v) for k, v in data["limits"].items()},
            list(data["problems"]),
        )


def find(tests, problems: list[str]) -> Findings:
    """The findings of ``tests`` (``runner.TestResult``, in the suite's order) and the
    submission's ``problems``. Give it the visible tests alone for what a student may see."""
    parts = []
    for k in PARTS:
        own = [t for t in tests if t.part == k]
        if not own:
            continue
        failed = [t for t in own if not t.passed]
        first = failed[0] if failed else None
        parts.append(
            PartFinding(
                k,
                sum(t.points for t in own if t.passed),
                sum(t.points for t in own),
                first.name if first else "",
                safe_text.capped(first.error) if first else "",
                next((t.diagnosis for t in failed if t.diagnosis), ""),
            )
        )
    limits: dict[str, list[int]] = {}
    for kind in LIMITS:
        hit = sorted({t.part for t in tests if not t.passed and t.error == kind})
        if hit:
            limits[kind] = hit
    return Findings(parts, limits, list(problems))
