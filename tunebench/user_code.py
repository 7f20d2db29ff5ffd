"""What is a suite's own code, and where in it an error arose, for the messages that report it.

A suite's args builder, reference, heuristic, constraints and byte counts are the user's code;
tunebench reports their errors in one line, without a traceback (a traceback would be mostly
tunebench's and numpy's frames). The line names the user's frame the error came from, so a
mistake in a 40-line reference is found without a debugger.
"""

from __future__ import annotations

import os
import re
import sys
import sysconfig
import traceback
import types
from pathlib import Path

#: tunebench's own folder, and with it the folders of code that is not the suite's (the standard
#: library; installed packages are told by their folder's name, wherever pip put them: a venv, a
#: user's ~/.local, Debian's dist-packages).
_OURS = str(Path(__file__).parent) + os.sep
_NOT_USERS = (_OURS, *{sysconfig.get_paths()[k] + os.sep for k in ("stdlib", "platstdlib")})
_PACKAGES = re.compile(r"[/\\](?:site|dist)-packages[/\\]")


def _library(filename: str) -> bool:
    """Whether a file is tunebench's, the standard library's or an installed package's."""
    return filename.startswith(_NOT_USERS) or bool(_PACKAGES.search(filename))


def is_users(value) -> bool:
    """Whether ``value`` is a module, a class or an object of the suite's own code (a module of
    the project's, a dataclass of its settings): not tunebench's, the standard library's or an
    installed package's."""
    module = value if isinstance(value, types.ModuleType) else sys.modules.get(
        getattr(value if isinstance(value, type) else type(value), "__module__", None) or "")
    where = getattr(module, "__file__", None)
    return bool(where) and not _library(where)


def raised(e: BaseException, about: str = "") -> str:
    """``ValueError: message for shape (1000,), in reference at suites/test_x.py:12``: the error,
    what it was ``about``, and the innermost frame of the user's code it passed through; where
    every frame is a package's (a project installed as one), the first frame tunebench called."""
    said = f"{type(e).__name__}: {str(e).rstrip()}" + (f" {about}" if about else "")
    frames = [f for f in traceback.extract_tb(e.__traceback__)  # code made by exec has no file to name
              if not f.filename.startswith((_OURS, "<"))]
    users = [f for f in frames if not _library(f.filename)]
    frame = users[-1] if users else frames[0] if frames else None
    if frame is None:
        return said
    where = os.path.relpath(frame.filename) if frame.filename.startswith(os.getcwd() + os.sep) else frame.filename
    return f"{said}, in {frame.name} at {where}:{frame.lineno}"
