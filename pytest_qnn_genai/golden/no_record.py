"""The one line a figure with no accepted value fails with: a hole in the record is never a pass.

Contract. :func:`line` says what has no record (a case, a target key of a case, a case's genai
bounds, one figure), where it was looked for, and how to make it: for an accepted record the
command that records it (:func:`by_update`: the run's own command line with
``--qnn-update-golden``, which refuses under CI). Every such
figure carries the rule :data:`pytest_qnn_genai.figures.NO_RECORD`, so the terminal summary and
the report count them apart from the failures a record judged.

Hazard. A figure with nothing to hold it to but the case's floors (about 5 dB under the truth)
would pass a regression the record exists to catch: a new SoC, a phone, a user's own case, a
pip install without the repository's ``golden/``. So it fails, the same way wherever it is.
"""
from __future__ import annotations

import shlex

UPDATE_FLAG = "--qnn-update-golden"


def command(run_command: str) -> str:
    """``run_command`` (``pytest …``) with :data:`UPDATE_FLAG`, once."""
    words = shlex.split(run_command) or ["pytest"]
    if UPDATE_FLAG not in words:
        words.append(UPDATE_FLAG)
    return shlex.join(words)


def by_update(run_command: str) -> str:
    """How a record is made: the update run of ``run_command``."""
    return (f"record it with `{command(run_command)}` (an update run outside CI; judge the "
            "figures it writes before committing them)")


def line(source: str, what: str, how: str) -> str:
    """``source: no record of what: how`` (``how``: :func:`by_update`, or what else makes it)."""
    return f"{source}: no record of {what}: {how}"
