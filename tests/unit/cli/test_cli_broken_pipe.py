"""A reader that stops early (`courtier … | head`) ends the command quietly, exit 0."""

from __future__ import annotations

import os
import subprocess
import sys


def test_output_to_a_closed_pipe_ends_quietly() -> None:
    """The pipe's read end is closed before the command starts, so its first write fails
    with EPIPE whatever the output's size. Red without the BrokenPipeError case in main():
    a traceback on stderr and exit 1. (The redirect of stdout to /dev/null guards the
    interpreter's final flush of a partly written buffer; this case does not reach it.)"""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "courtier", "config", "reference"],
            stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120, check=False)
    finally:
        os.close(write_end)
    assert done.stderr == ""
    assert done.returncode == 0
