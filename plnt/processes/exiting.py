"""Leaving a process that ran the Temporal SDK: flushed, without interpreter teardown."""

from __future__ import annotations

import logging
import os
import sys


def exit_now(code: int) -> None:
    """Flush and leave without interpreter teardown.

    The Temporal SDK's native runtime can crash while a plain Python process tears
    itself down (temporalio/sdk-python#300); every command and child process that used
    the SDK exits here instead, after its own orderly shutdown, so users never see that
    crash.
    """
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
