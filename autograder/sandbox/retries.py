"""Whose doing a worker's end was, and what a retry may cost: the retry policy in one place.

Why a module of its own: the grader sees a worker only from outside, and everything it sees of
the worker's end (its exit status, its signal, whether its socket still answers) is something
student code can choose: ``os._exit`` with the status of a lost connection, a signal sent to
itself, its own sockets shut. So no end is the host's by its look. An end is the submission's
when it is plainly its own (an exit with a status of its own choosing, a crash, one of its own
limits: ``evident``) or when it happens again at the same request after one retry in a fresh
worker; it is the host's only on evidence from outside the worker: a worker that ended before
any student code ran in it, a retry that did not end the same way, or a signal the worker
cannot send itself (``outside``: the system-call filter refuses it every other signal, and the
kernel's own signals for its limits are told apart by what the template reaped), which is
retried however often it recurs. docs/DESIGN.md ("What the grader believes") states the same
policy for readers of the grades.

Retries cost time (each replays what the lost worker served). A retry whose end recurs was the
submission's doing, and so is its time; after it a fresh worker starts with nothing to replay,
so such retries replay each request at most once. The other retries, whose ends did not recur
(or followed a worker lost before it ran student code), have a budget: together they may take
no longer than the submission's own grading has so far (plus ``SLACK``), and at most
``MAX_RETRIES`` of them. The retries of ends from outside, which no submission can cause, have
one of their own: together as long as the submission's time limit. A fault past its budget
leaves the grading undecided: the grader's failure, never points lost.
"""

from __future__ import annotations

import enum
import time

#: Workers one submission may lose to ends that did not recur (or that came before any student
#: code ran) and still be graded; one more, and its grading is the grader's failure.
MAX_RETRIES = 12
#: Seconds of retries a submission gets beyond what its own grading took so far: a fresh worker
#: and a short replay, so that a fault early in a grading can still be retried.
SLACK = 20.0


class Verdict(enum.Enum):
    """What becomes of a request whose worker ended."""

    #: The submission's doing: the request fails, and the grade stays final.
    OWN = "own"
    #: Not decided yet: run the request again in a fresh worker brought to the lost one's state.
    RETRY = "retry"
    #: The host's, and the budget of retries is spent: the grading is the grader's failure.
    GRADER_FAILURE = "grader failure"


class Retries:
    """One submission's record of ended workers and the time their retries took.
    ``outside_limit``: seconds the retries of ends from outside it may take together (its
    own time limit: a host that kills its workers that often leaves it undecided)."""

    def __init__(self, outside_limit: float, clock=time.monotonic):
        self._clock = clock
        self._began = clock()
        self._outside_limit = outside_limit
        #: Seconds that retries not (yet) found the submission's took: lost attempts, fresh
        #: workers, replays.
        self.spent = 0.0
        #: Seconds that retries of ends from outside took (never the submission's).
        self.spent_outside = 0.0
        self.retried = 0  # workers lost and retried, their ends not (yet) recurred
        # Each request whose worker ended once, and the seconds its retry took.
        self._struck: dict[int, float] = {}
        self._retrying: int | None = None  # the request being retried (None: a start)
        self._outside = False  # whether the retry under way follows an end from outside
        self._why = ""  # why the budget is spent

    def judge(
        self,
        seq: int | None,
        evident: bool,
        replay_seconds: float,
        outside: bool = False,
    ) -> Verdict:
        """A worker ended while serving request ``seq`` (``None``: before it said hello, so
        before any student code ran in it); ``evident``: by an end plainly its own;
        ``outside``: by an end it cannot have caused (a signal the filter kept it from sending
        itself); ``replay_seconds``: what the requests to replay took when they were first
        served."""
        if seq is not None and evident:
            return Verdict.OWN
        self._outside = outside
        if outside:  # however often it comes: no strike, only its own budget bounds it
            self._retrying = None
            left = self._outside_limit - self.spent_outside
            if replay_seconds > left:
                self._why = (
                    f"retrying would take longer than its time limit allows retries of kills "
                    f"from outside ({self.spent_outside:.0f} s of them so far)"
                )
                return Verdict.GRADER_FAILURE
            return Verdict.RETRY
        if seq in self._struck:  # its end recurred: the retry and its time were its own
            self.retried -= 1
            self.spent -= self._struck[seq]
            return Verdict.OWN
        self._retrying = seq
        if seq is not None:
            self._struck[seq] = 0.0
        self.retried += 1
        if self.retried > MAX_RETRIES:
            self._why = (
                f"{self.retried} of its processes were lost, more than {MAX_RETRIES}"
            )
            return Verdict.GRADER_FAILURE
        if replay_seconds > self.budget():
            self._why = (
                f"retrying would take longer than grading it did ({self.spent:.0f} s of "
                "retries so far)"
            )
            return Verdict.GRADER_FAILURE
        return Verdict.RETRY

    def charge(self, seconds: float) -> None:
        """Count ``seconds`` spent on the retry under way (a lost attempt, a fresh worker, a
        replay)."""
        if self._outside:
            self.spent_outside += seconds
            return
        self.spent += seconds
        if self._retrying is not None:
            self._struck[self._retrying] += seconds

    def cost_of(self, seq: int) -> float:
        """The seconds the retry of request ``seq`` took (0 where it had none)."""
        return self._struck.get(seq, 0.0)

    def budget(self) -> float:
        """Seconds left for retries of undecided ends: what the submission's own grading took,
        plus ``SLACK``, less what those retries took already."""
        own = self._clock() - self._began - self.spent - self.spent_outside
        return own + SLACK - self.spent

    def exhausted(self) -> str:
        """Why the grading stops as the grader's failure (``Verdict.GRADER_FAILURE``)."""
        return self._why
