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
(or came from outside, or followed a worker lost before it ran student code), have a budget: together they may
take no longer than the submission's own grading has so far (plus ``SLACK``), and at most
``MAX_RETRIES`` of them. A fault past that budget leaves the grading undecided: the grader's
failure, never points lost.
"""

from __future__ import annotations

import enum
import time

#: Workers one submission may lose to ends not of its doing (that did not recur, came from
#: outside, or came before any student code ran) and still be graded; one more, and its grading
#: is the grader's failure.
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
    """One submission's record of ended workers and the time their retries took."""

    def __init__(self, clock=time.monotonic):
        self._clock = clock
        self._began = clock()
        #: Seconds that retries not (yet) found the submission's took: lost attempts, fresh
        #: workers, replays.
        self.spent = 0.0
        self.retried = 0  # workers lost and retried, their ends not (yet) recurred
        # Each request whose worker ended once, and the seconds its retry took.
        self._struck: dict[int, float] = {}
        self._retrying: int | None = (
            None  # the request being retried (``None``: a start)
        )

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
        if outside:  # however often it comes: not a strike, only the budget bounds it
            self._retrying = None
        elif (
            seq in self._struck
        ):  # its end recurred: the retry and its time were its own
            self.retried -= 1
            self.spent -= self._struck[seq]
            return Verdict.OWN
        else:
            self._retrying = seq
            if seq is not None:
                self._struck[seq] = 0.0
        self.retried += 1
        if self.retried > MAX_RETRIES or replay_seconds > self.budget():
            return Verdict.GRADER_FAILURE
        return Verdict.RETRY

    def charge(self, seconds: float) -> None:
        """Count ``seconds`` spent on the retry under way (a lost attempt, a fresh worker, a
        replay)."""
        self.spent += seconds
        if self._retrying is not None:
            self._struck[self._retrying] += seconds

    def cost_of(self, seq: int) -> float:
        """The seconds the retry of request ``seq`` took (0 where it had none)."""
        return self._struck.get(seq, 0.0)

    def budget(self) -> float:
        """Seconds left for retries: what the submission's own grading took, plus ``SLACK``,
        less what retries took already."""
        own = self._clock() - self._began - self.spent
        return own + SLACK - self.spent

    def exhausted(self) -> str:
        """Why the grading stops as the grader's failure (``Verdict.GRADER_FAILURE``)."""
        if self.retried > MAX_RETRIES:
            return f"{self.retried} of its processes were lost, more than {MAX_RETRIES}"
        return (
            f"retrying would take longer than grading it did ({self.spent:.0f} s of retries "
            "so far)"
        )
