"""The terminal while tuning: one live line per task and nothing for unsampled candidates.

On a terminal, a task's line (trials done of the budget, the best so far against the heuristic,
the time left) is redrawn in place as trials finish, at most every :data:`REDRAW_EVERY_S`
seconds, and stays once the task is done; elsewhere (CI logs, pipes) a plain line is written at
most every :data:`PLAIN_EVERY_S` seconds and once at the end. The line saying a task's final
round begins is drawn at once, on both: held back, the last trial's time left stood through the
round. A plain line the same as the task's last is not written again. A task that has measured
nothing yet in this run (its trials so far from the records: a tune run again or resumed) has no
progress to show, and a time left from what those trials cost when measured would be stale: its
line comes with its first measured trial, when its final round begins, or at its end, saying its
trials came from the records. ``-q`` keeps only the summary. A candidate the budget left
unsampled reports no letter: thousands of them would bury the progress and the summary (``-vv``
lists them).
"""

from __future__ import annotations

import contextlib
import time

import pytest

#: Seconds between plain progress lines where the output is not a terminal.
PLAIN_EVERY_S = 10.0
#: Seconds between redraws on a terminal.
REDRAW_EVERY_S = 0.2
#: The user property that marks a candidate the budget left unsampled.
UNSAMPLED = ("tunebench", "unsampled")
#: Set once the run's summary is written: pytest's ``-rs`` lines then ask each report's word again.
SUMMARY = pytest.StashKey[bool]()


class Progress:
    """Called by a task after each candidate and at its end (see :meth:`tunebench.session.Task`)."""

    def __init__(self, config: pytest.Config):
        self.config = config
        # task -> when its line was drawn, in its final round or not, and the line
        self._last: dict[object, tuple[float, bool, str]] = {}

    def __call__(self, task, done: bool) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None or self.config.get_verbosity() < 0:
            return
        if not done and not task.new and not task.waiting and not task.rounding:  # all so far from the records
            return
        now = time.monotonic()
        tty = reporter.isatty
        drawn, rounding, said = self._last.get(task, (-float("inf"), False, ""))
        if not done and rounding == task.rounding and now - drawn < (REDRAW_EVERY_S if tty else PLAIN_EVERY_S):
            return
        line = task.progress_line()
        if not tty and line == said:  # a final round longer than PLAIN_EVERY_S wrote its line again, word for word
            return
        self._last[task] = (now, task.rounding, line)
        capture = self.config.pluginmanager.get_plugin("capturemanager")  # none under -p no:capture
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            if tty:
                reporter.rewrite(line, erase=True)
                if done:
                    reporter.ensure_newline()
                    reporter.write("\n")
            else:
                reporter.write_line(line)


def report_teststatus(report: pytest.TestReport, config: pytest.Config):
    """No letter or word for an unsampled candidate (a word under -vv) while the run goes; pytest's
    own in its summary, whose folded ``-rs`` lines all take the first skipped report's word."""
    if (report.when == "call" and report.skipped and UNSAMPLED in report.user_properties
            and not config.stash.get(SUMMARY, False)):
        return "skipped", "", "UNSAMPLED" if config.get_verbosity() > 1 else ""
    return None
