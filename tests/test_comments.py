"""A text's code as gcc lexes it: comments and whitespace out, everything else in."""

import pytest

from tunebench import comments
from tunebench.comments import code_of, lexed_alike
from tunebench.kernel import comment_edits

BASE = """\
#define N 4 /* a block */
// one line
const char *s = "/* kept */ // kept";
char c = '"';
int f(int a) { return a + N; }
"""


@pytest.mark.parametrize("edited", [
    BASE.replace("/* a block */", "/* a block,\n   of four */"),  # a comment over two lines
    "\n\n" + BASE.replace("int f", "   int   f") + "\n   \n",  # blank lines, indentation, a run of blanks for one
    BASE.replace("// one line", "/* one line \\\n   spliced */"),  # a splice in a comment
])
def test_comments_and_whitespace_are_no_code(edited):
    assert code_of(BASE, "c") is not None and code_of(edited, "c") == code_of(BASE, "c")


@pytest.mark.parametrize("edited", [
    BASE.replace("/* kept */", "/* kept! */"),  # a comment's text in a string is the string's
    BASE.replace("char c = '\"';", "char c = '\\'';"),
    BASE.replace("#define N 4", "#define N 8"),
    "#pragma once\n" + BASE,  # a directive gcc would run on a main file: text all the same
    BASE.replace('"/* kept */ // kept"', '"a \\\n/* b */"'),  # spliced: the comment is in the string
    BASE.replace("a + N", "a+N"),  # blanks between tokens count (as gcc keeps them): another source
])
def test_code_edited_is_other_code(edited):
    assert code_of(edited, "c") is not None and code_of(edited, "c") != code_of(BASE, "c")


def test_a_raw_strings_text_and_its_splices_are_code():
    raw = 'auto r = R"x(a /* b */ \\\nc)x";\n'
    assert code_of(raw, "c++") != code_of(raw.replace("/* b */", "/* d */"), "c++")
    assert code_of(raw, "c++") != code_of(raw.replace("\\\n", ""), "c++")


def test_a_text_gcc_refuses_is_no_code():
    assert code_of("#frobnicate\nint x;\n", "c") is None
    assert code_of("int x; /* never closed\n", "c") is None


#: A raw string over lines: its indentation, blank lines and blanks at a line's end are its text.
RAW = 'const char *s = R"x(\n    a\n\n)x";\n'


@pytest.mark.parametrize("edited", [
    RAW.replace("    a", "        a"),  # sizeof s 4 bytes more
    RAW.replace("a\n\n", "a\n"),
    RAW.replace("    a", "    a  "),
])
def test_a_raw_strings_lines_are_its_text(edited):
    assert code_of(edited, "c++") is not None and code_of(edited, "c++") != code_of(RAW, "c++")


def test_blanks_and_comments_around_a_raw_string_are_no_code():
    edited = "\n  " + RAW.replace(";", "; // s") + "/* t */\n"
    assert code_of(RAW, "c++") is not None and code_of(edited, "c++") == code_of(RAW, "c++")


@pytest.mark.parametrize("directive", [
    "#include <sys//types.h>", "# include_next <sys/*x*/types.h>", "#import <sys//types.h>",
    "#if __has_include( <sys//types.h> )\n#endif",
    # a comment before the header name: <sys//stat.h> read as the same code as <sys//types.h>
    "#include /* x */ <sys//types.h>", "#if __has_include(/**/<sys//types.h>)\n#endif",
    "const unsigned char d[] = {\n#embed <data//a.bin>\n};",
    "/* a */ #include <sys//types.h>", "%:include <sys//types.h>", "import <sys//types.h>;",
])
def test_a_header_name_holding_a_comments_opening_is_no_code_known(directive):
    """gcc's lexer, running no directive, took <sys//types.h>'s // for a comment: the template
    including <sys//stat.h> instead was the same code."""
    assert code_of(directive + "\nint x;\n", "c") is None


@pytest.mark.parametrize("line", [
    "embed[i] = (i < n) ? 1 : 0; // clamp", "int include = n < m; /* m */", "x = import < y; // y",
])
def test_a_line_of_code_naming_a_directive_is_lexed(line):
    """A line of code, not a directive's, with ``<`` and a comment after a name such as ``embed``:
    taken for a header name, such a template re-tuned on every comment edit."""
    text = f"int f(int *embed, int include, int import, int y, int i, int n, int m, int x) {{\n{line}\nreturn 0; }}\n"
    assert code_of(text, "c") is not None
    assert code_of(text, "c") == code_of(text.replace("return 0;", "return 0; /* edited */"), "c")


def test_a_comment_after_a_header_name_is_no_code():
    assert code_of("#include <sys/types.h> // a\n", "c") is not None
    assert code_of("#include <sys/types.h> // a\n", "c") == code_of("#include <sys/types.h> /* b */\n", "c")


def test_a_trigraph_is_no_code_known():
    """``??/`` ends a // comment: under -std=c11 (an ISO standard, -ansi, -trigraphs) a backslash,
    which splices the next line into the comment; gcc's lexer, in its GNU standard, reads no
    trigraph, and took the two for the same code."""
    text = "int y = 1;\n// note\ny = 2;\n"
    assert code_of(text, "c") is not None and code_of(text.replace("// note", "// note ??/"), "c") is None


@pytest.mark.parametrize("flags", [("-ansi",), ("-O2", "-std=c89"), ("--std", "c90"), ("--std=iso9899:199409",)])
def test_a_line_comment_under_c90_is_no_comment_known(flags):
    """In C90 ``//`` starts no comment: ``4 //**/ 2`` is 4 / 2, and 4 under gcc's default."""
    before, after = "int b = 4 //**/ 2\n;\n", "int b = 4 //**/ 3\n;\n"
    assert comment_edits(before, after, "k.c", {}, "c", ()) == ["k.c"]
    assert comment_edits(before, after, "k.c", {}, "c", flags) is None


def test_other_standards_read_line_comments():
    assert lexed_alike(("-std=c99", "-O2")) and lexed_alike(("-std=gnu89",)) and lexed_alike(("-std=c++98",))


def test_each_text_is_lexed_once_however_many_versions_are_compared(monkeypatch):
    """A kernel of 300 versions, each compared with today's for each of its tasks: an lru_cache of
    256 texts lexed them all again for every task (7 s a task); a text with no line to splice was
    lexed twice, as written and spliced, to the same."""
    lexed = []
    monkeypatch.setattr(comments, "_lexed", lambda text, language: lexed.append(text) or text)
    versions = [f"int version_{i}; /* lexed once */\n" for i in range(300)]
    for _task in range(2):
        for text in versions:
            code_of(text, "c")
    assert len(lexed) == len(versions)
