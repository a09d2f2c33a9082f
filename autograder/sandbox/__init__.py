"""The sandbox: student code run in separate, confined processes, answering plain-data requests.

Its face is this module; what lies behind it, from the outside in:

- ``bubblewrap``: the outer boundary (bubblewrap's namespaces, a read-only view, cgroups)
  around one template process per grading process;
- ``template``: that process, which imports torch once and forks a worker per submission;
  ``confine`` makes each worker its own (a fresh uid, seccomp, Landlock, private scratch,
  limits); ``worker_exit`` holds the statuses a worker ends with;
- ``template_client``: the grading process's end of the template;
- ``client``: ``IsolatedSubmission``, the grading process's end of a worker: requests, replies,
  deadlines, retries of workers that ended (whose doing an end was: ``retries``), hangs
  (``hangs``) and the host's delays its time limits forgive (``host_wait``);
- ``wire``: the plain format requests and replies cross the socket in.
"""

from importlib import import_module

#: The face: each name and where behind it it lives.
_FACE = {
    "BROKE_PROTOCOL": ("client", "BROKE_PROTOCOL"),
    "IsolatedSubmission": ("client", "IsolatedSubmission"),
    "Limits": ("client", "Limits"),
    "limits_for": ("client", "limits_for"),
    "protections": ("bubblewrap", "protections"),
    "start_template": ("template_client", "start"),
}
__all__ = [
    "BROKE_PROTOCOL",
    "IsolatedSubmission",
    "Limits",
    "limits_for",
    "protections",
    "start_template",
]


def __getattr__(name: str):
    """A name of the face, imported when first used: a grading process starts the template
    (``start_template``) before it imports torch, which the client needs, so that the two
    import side by side."""
    if name not in _FACE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = _FACE[name]
    return getattr(import_module(f"{__name__}.{module}"), attribute)
