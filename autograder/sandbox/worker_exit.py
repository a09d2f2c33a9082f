"""The statuses a sandboxed worker exits with on its own, shared by the template that makes
them (``autograder.sandbox.template``) and the grading side that reads them (``autograder.sandbox.client``):
here, so that neither imports the other for them."""

#: It ended before it was confined: no student code ran, the grader's failure.
UNCONFINED = 70
#: A request it could not carry out or a record it could not send: it broke the protocol.
BROKEN = 71
#: Its socket closed under it: the grading side went away, or the connection was lost. Student
#: code can exit with it too, so it proves nothing (``autograder.sandbox.retries`` decides).
HUNG_UP = 72
