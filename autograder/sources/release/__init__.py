"""Build what students get from the reference: stubs (``stubs``), the handout that carries them
(``handout``), and the check that nothing in it gives an answer away (``leaks``)."""

from autograder.sources.release.handout import (
    HANDOUT_FILES,
    SPEC,
    TORCH_CPU_INDEX,
    build_handout,
    record_answers,
    student_spec,
    write_public_tests,
)
from autograder.sources.release.leaks import (
    ORACLES,
    find_leaks,
    refused_test_code,
    strip_hidden_tests,
)
from autograder.sources.release.stubs import (
    ASSIGNMENTS,
    REPO,
    SOLUTIONS,
    ReleaseError,
    make_stub,
    stub_files,
    write_assignments,
)

__all__ = [
    "ASSIGNMENTS",
    "HANDOUT_FILES",
    "ORACLES",
    "REPO",
    "SOLUTIONS",
    "SPEC",
    "TORCH_CPU_INDEX",
    "ReleaseError",
    "build_handout",
    "find_leaks",
    "make_stub",
    "record_answers",
    "refused_test_code",
    "strip_hidden_tests",
    "stub_files",
    "student_spec",
    "write_assignments",
    "write_public_tests",
]
