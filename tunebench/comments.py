"""A C or C++ text's code: what is left once gcc's own lexer has taken out its comments and
whitespace. Two versions of a template with the same code build the same kernel (their line
numbers apart), so a trial of one stands for the other (see :func:`~tunebench.kernel.comment_edits`).

gcc lexes the text as already preprocessed (``-fpreprocessed -E -P``): its string and character
literals, raw strings and ``//`` and ``/* */`` comments as the compiler reads them, no macro
expanded and no header read. Each line is indented by one space first, so that gcc runs no
directive (it would drop a ``#define``, and a ``#pragma once``, as of a main file): each stays
text to compare. That mode splices no lines, so the text is lexed twice, as written and with its
lines spliced (a ``\\`` at a line's end joins the next, in a comment or a string too; once where it
has none), and both must be the same: spliced alone, a raw string's splices (which it keeps) would
be lost.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from collections.abc import Sequence

#: A line splice, as gcc takes one: a backslash, blanks (gcc warns of them), the end of the line.
_SPLICE = re.compile(r"\\[ \t\f\v]*\r?\n")
#: The opening of a raw string: its prefix (not the end of a longer name), its delimiter (up to 16
#: characters, no blank, parenthesis or backslash) between ``"`` and ``(``.
_RAW_STRING = re.compile(r'(?<![\w$])(?:u8|[uUL])?R"([^\s()\\]{0,16})\(')
#: A header name in angle brackets holding ``//`` or ``/*`` (``#include <sys//types.h>``) on a
#: directive's line (``#`` or ``%:`` first, after blanks and ``/* */`` comments) that names an
#: #include, #include_next, #import, #embed or __has_include, or on a C++ ``import``'s, wherever
#: it lies on it (``#include /* x */ <sys//types.h>``): the compiler reads it whole, gcc's lexer,
#: with no directive run, as a comment from there, the rest of the name lost. Only there: a line of
#: code such as ``embed[i] = (i < n) ? 1 : 0; // clamp`` would make every edit of its text re-tune.
_COMMENT_IN_HEADER_NAME = re.compile(
    r"^[ \t]*(?:/\*.*?\*/[ \t]*)*(?:(?:#|%:)[^\n]*\b(?:include(?:_next)?|import|embed|__has_include(?:_next)?)\b"
    r"|(?:export[ \t]+)?import\b)[^\n]*<[^>\n]*(?://|/\*)", re.MULTILINE)
#: A trigraph, which an ISO standard (``-std=c11``, ``-ansi``) or ``-trigraphs`` reads and gcc's
#: lexer, in its GNU standard, does not: ``??/`` is a backslash, at a ``//`` comment's end a splice
#: that continues the comment over the next line.
_TRIGRAPH = re.compile(r"\?\?[=/'()!<>-]")
#: What gcc's lexer reads otherwise than the compiler (see above): a text holding one is not lexed.
_MISREAD = (_COMMENT_IN_HEADER_NAME, _TRIGRAPH)
#: The C standards in which ``//`` starts no comment (C90, as ``-ansi`` is in C), where
#: ``a //**/ b`` is ``a / b``.
_C90 = ("c89", "c90", "iso9899:1990", "iso9899:199409")
#: What :func:`code_of` found, by the hash of the text and its language: each text is lexed once in
#: a process, however many tasks compare it (an lru_cache of 256 texts, compared in turn with each
#: version of a kernel of 300, lexed them all again for each task: 7 s a task).
_FOUND: dict[tuple[str, str], tuple[str, str] | None] = {}


def code_of(text: str, language: str) -> tuple[str, str] | None:
    """``text``'s code as written and with its lines spliced (see the module), each line with its
    comments taken out and its blanks at either end, blank lines dropped; ``language``: ``c`` or
    ``c++``. Blanks between the tokens of a line count (gcc keeps one where there were any),
    as do line breaks, and a ``//`` comment's line that a splice continues (as written, it is
    code), and a raw string's text, its line breaks and blanks too. None where gcc is not on the
    PATH or refuses the text (an unknown directive, an unterminated comment), or would lex it
    otherwise than the compiler (a ``//`` in a header name, a trigraph): no two texts are then
    known to be the same code."""
    key = (hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest(), language)
    if key not in _FOUND:
        _FOUND[key] = _code_of(text, language)
    return _FOUND[key]


def _code_of(text: str, language: str) -> tuple[str, str] | None:
    spliced = _SPLICE.sub("", text)
    if any(misread.search(each) for misread in _MISREAD for each in (text, spliced)):
        return None
    written = _lexed(text, language)
    found = (written, written if spliced == text else _lexed(spliced, language))  # none to splice: lexed once
    return None if None in found else found


def lexed_alike(flags: Sequence[str]) -> bool:
    """Whether a build with ``flags`` reads comments as :func:`code_of` lexes them: not under C90
    (``-ansi``, ``-std=c89``, ``--std c90``...; see :data:`_C90`), where ``//`` starts none."""
    for before, flag in zip(("", *flags), flags):
        option, _, standard = flag.partition("=")
        if flag in ("-ansi", "--ansi") or (option in ("-std", "--std") and standard in _C90) \
                or (before == "--std" and flag in _C90):
            return False
    return True


def _lexed(text: str, language: str) -> str | None:
    gcc = shutil.which("gcc")
    if gcc is None:
        return None
    indented = "\n".join(" " + line for line in text.split("\n"))  # a directive lexed, never run
    done = subprocess.run([gcc, "-fpreprocessed", "-E", "-P", "-x", language, "-"], capture_output=True,
                          input=indented.encode("utf-8", "surrogateescape"))
    if done.returncode:
        return None
    return _code(done.stdout.decode("utf-8", "surrogateescape"))


def _code(lexed: str) -> str | None:
    """gcc's output, each line's blanks at either end and blank lines out, but a raw string's text
    kept whole, which gcc keeps as written: its indentation and blank lines are characters of the
    string (``R"(\\n  a\\n)"`` is two bytes longer than ``R"(\\na\\n)"``). None where a raw
    string is not closed."""
    pieces, at = [], 0  # each the lines of the text between raw strings, or a raw string as one
    while (raw := _RAW_STRING.search(lexed, at)) is not None:
        end = lexed.find(f'){raw[1]}"', raw.end())
        if end < 0:
            return None
        end += len(raw[1]) + 2
        pieces += [lexed[at:raw.start()].split("\n"), [lexed[raw.start():end]]]
        at = end
    pieces.append(lexed[at:].split("\n"))
    lines = [""]
    for piece in pieces:  # a raw string joins the lines it lies between
        lines[-1] += piece[0]
        lines += piece[1:]
    return "\n".join(line.strip() for line in lines if line.strip())
