"""The statuses a sandboxed worker exits with on its own, and the signals that end it by its own
doing, shared by the template and its filter that make them (``autograder.sandbox.template``,
``autograder.sandbox.confine``) and the grading side that reads them
(``autograder.sandbox.client``): here, so that none imports another for them."""

import signal

#: It ended before it was confined: no student code ran, the grader's failure.
UNCONFINED = 70
#: A request it could not carry out or a record it could not send: it broke the protocol.
BROKEN = 71
#: Its socket closed under it: the grading side went away, or the connection was lost. Student
#: code can exit with it too, so it proves nothing (``autograder.sandbox.retries`` decides).
HUNG_UP = 72

#: Signals that end a worker by its own doing: a crash in its code, one of its own limits (CPU
#: time: SIGXCPU, file size: SIGXFSZ), or the timer it sets on each request (SIGALRM, on which
#: it writes its stacks; student code may take that handler away). The system-call filter lets
#: a worker send itself these alone (``autograder.sandbox.confine.SIGNAL_CALLS``), so an end by
#: any other signal came from outside it, unless the kernel sent it for one of the worker's own
#: limits (``autograder.sandbox.client``).
OWN_SIGNALS = frozenset(
    {
        signal.SIGSEGV,
        signal.SIGBUS,
        signal.SIGILL,
        signal.SIGFPE,
        signal.SIGABRT,
        signal.SIGSYS,
        signal.SIGTRAP,
        signal.SIGPIPE,
        signal.SIGXCPU,
        signal.SIGXFSZ,
        signal.SIGALRM,
    }
)
