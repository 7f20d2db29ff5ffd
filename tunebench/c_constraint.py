"""Shaped constraints written in C, for the exported header: a framework's launch path that
cannot import tunebench must still never launch a config whose constraint fails for its shape.

A constraint is a Python callable; its C form is made from its source: a ``lambda`` or a
one-``return`` function whose body uses only arithmetic (``+ - * // % / & | << >>``, and ``**`` of
numbers, written in as its value), comparisons
(chained too), ``and``/``or``/``not``, ``x if c else y``, ``min``/``max`` of two values, numbers,
the params and the kernel's dims it takes as arguments, ``shape[i]``, and names of numbers it
reads from its module or closure (``B = 4`` beside it), written in as their values: a dim of
that name must not be read in their place. The C form computes what Python does: in 64-bit
integers (Python's do not overflow; C's ``int`` did at ``tile * 2**30``), ``//`` and ``%``
floored (:data:`C_HELPERS`, on integers only: a float operand has no C form, nor has one of
``& | << >>``), and ``a or b`` is ``a`` where ``a`` is true, else ``b``. Where an integer meets a
float it is cast to a double, and a float's ``==`` and truth are read by ``<=`` and ``>=``, as a
framework's -Wconversion and -Wfloat-equal ask; compared with a float, an integer is compared
exactly (``tb_order``), as Python compares them, where a cast would round it beyond 2**53 (a
param or dim of 2**53 + 1 against a float 2.0**53). A value that is an integer or a float by
the branch taken (``min``, ``max``, ``x if c else y``, ``or``) is a double, as is an integer's
``/``: beyond 2**53 those round where Python's may not. Where Python would raise dividing by
zero, the C form clears the flag :data:`OK` names instead, which the caller reads after it (the config
then does not fit: a framework's launch path must not die of SIGFPE where ``best()`` says the
constraint raised). Anything else has no C form, and :class:`NoCForm` says which constraint and
what in it.
"""

from __future__ import annotations

import ast
import inspect
import math
import numbers
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tunebench.space import Constraint


class NoCForm(ValueError):
    """A constraint the header cannot check; the message names it and what it uses."""


_BINARY = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.BitAnd: "&", ast.BitOr: "|", ast.LShift: "<<",
           ast.RShift: ">>"}
_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult)
_FLOOR = {ast.FloorDiv: "tb_floordiv", ast.Mod: "tb_floormod"}
#: The int a C form clears where it divides by zero (declared 1 by the function it is in).
OK = "tb_ok"

#: Python's flooring ``//`` and ``%`` on integers, which C truncates, and ``/``, each clearing
#: the flag where the divisor is zero; a float's ``==`` (``tb_eq``) and an integer read as a
#: double (``tb_real``), in the spellings a framework's strictest warnings take (-Wfloat-equal,
#: -Wconversion; -Wold-style-cast in C++); what a C form calls.
C_HELPERS = """\
#ifndef TUNEBENCH_FLOOR_DIVISION
#define TUNEBENCH_FLOOR_DIVISION
static inline long long tb_floordiv(long long tb_a, long long tb_b, int *tb_flag)
{ long long tb_q; if (tb_b == 0) { *tb_flag = 0; return 0; } tb_q = tb_a / tb_b;
  return (tb_q * tb_b != tb_a && (tb_a < 0) != (tb_b < 0)) ? tb_q - 1 : tb_q; }
static inline long long tb_floormod(long long tb_a, long long tb_b, int *tb_flag)
{ long long tb_r; if (tb_b == 0) { *tb_flag = 0; return 0; } tb_r = tb_a % tb_b;
  return (tb_r != 0 && (tb_r < 0) != (tb_b < 0)) ? tb_r + tb_b : tb_r; }
static inline double tb_div(double tb_a, double tb_b, int *tb_flag)  /* b == 0, which -Wfloat-equal refuses */
{ if (tb_b <= 0 && tb_b >= 0) { *tb_flag = 0; return 0; } return tb_a / tb_b; }
#endif
#ifndef TUNEBENCH_FLOAT_EQUAL
#define TUNEBENCH_FLOAT_EQUAL
static inline int tb_eq(double tb_a, double tb_b)  /* a == b, as Python's (NaN: 0) */
{ return tb_a <= tb_b && tb_a >= tb_b; }
#endif
#ifndef TUNEBENCH_REAL
#define TUNEBENCH_REAL
#ifdef __cplusplus
static inline double tb_real(long long tb_v) { return static_cast<double>(tb_v); }
#else
static inline double tb_real(long long tb_v) { return (double)tb_v; }
#endif
#endif
#ifndef TUNEBENCH_EXACT_ORDER
#define TUNEBENCH_EXACT_ORDER
#ifdef __cplusplus
static inline long long tb_whole(double tb_v) { return static_cast<long long>(tb_v); }
#else
static inline long long tb_whole(double tb_v) { return (long long)tb_v; }
#endif
/* where a lies against b, exactly, as Python compares them (tb_real(a) rounds beyond 2**53):
   1 below, 2 equal, 4 above, 8 unordered (b is NaN) */
static inline int tb_order(long long tb_a, double tb_b)
{
    long long tb_t;
    if (!(tb_b <= tb_b)) return 8;
    if (tb_b >= 9223372036854775808.0) return 1;
    if (tb_b < -9223372036854775808.0) return 4;
    tb_t = tb_whole(tb_b);  /* b truncated, exactly: |b| < 2**63 */
    if (tb_a != tb_t) return tb_a < tb_t ? 1 : 4;
    return tb_b > tb_real(tb_t) ? 1 : tb_b < tb_real(tb_t) ? 4 : 2;  /* b's fraction decides */
}
#endif
"""
_COMPARE = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
#: The answers of ``tb_order`` (an integer against a float) for which a comparison holds; and the
#: comparison of the float against the integer, where the float is written first.
_ORDER = {ast.Lt: 1, ast.LtE: 1 | 2, ast.Eq: 2, ast.NotEq: 1 | 4 | 8, ast.Gt: 4, ast.GtE: 4 | 2}
_MIRROR = {ast.Lt: ast.Gt, ast.LtE: ast.GtE, ast.Eq: ast.Eq, ast.NotEq: ast.NotEq, ast.Gt: ast.Lt, ast.GtE: ast.LtE}


def c_form(constraint: Constraint, dims: Sequence[str], config: str = "c", floats: Sequence[str] = ()) -> str:
    """The C expression of a shaped constraint over ``config->param`` and the dims as variables,
    an int 0 or 1 (an int holds it); ``floats`` names the params with non-integer values (see
    :data:`C_HELPERS`)."""
    body = _body(constraint)
    args = constraint.params or ()
    writer = _Writer(constraint.label, set(args) - set(constraint.shaped), tuple(dims), config, set(floats),
                     set(constraint.shaped), _numbers(constraint.fn))
    return writer.test(body, whole=True)


def _numbers(fn) -> dict[str, int | float]:
    """The numbers a constraint reads by name from its closure or module (``B = 4``, numpy's
    ``np.float64(0.75)`` too), as Python's ints and floats."""
    try:
        found = inspect.getclosurevars(fn)
    except (TypeError, ValueError):
        return {}
    return {n: int(v) if isinstance(v, numbers.Integral) else float(v)
            for n, v in {**found.builtins, **found.globals, **found.nonlocals}.items()
            if isinstance(v, (numbers.Integral, float, np.floating)) and not isinstance(v, (bool, np.bool_))}


def _body(constraint: Constraint) -> ast.expr:
    """The expression the constraint returns, found in its source file by line and arguments."""
    fn = constraint.fn
    code = getattr(fn, "__code__", None)
    try:
        path = inspect.getsourcefile(fn)
        tree = ast.parse(Path(path).read_bytes()) if path else None  # as Python decodes it: UTF-8, or its coding line
    except (OSError, TypeError, SyntaxError):
        tree = None
    if code is None or tree is None:
        raise NoCForm(f"{constraint.label}: its source is not available")
    arg_names = list(code.co_varnames[:code.co_argcount])
    found = []  # (the lambda or def, the expression it returns)
    for node in ast.walk(tree):
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))], default=0) \
            if isinstance(node, (ast.Lambda, ast.FunctionDef)) else None
        if first == code.co_firstlineno and [a.arg for a in node.args.args] == arg_names:
            body = [] if isinstance(node, ast.Lambda) else [
                s for i, s in enumerate(node.body) if i or not (  # a docstring is no statement
                    isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str))]
            if isinstance(node, ast.Lambda):
                found.append((node, node.body))
            elif len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None:
                found.append((node, body[0].value))
            else:
                raise NoCForm(f"{constraint.label}: a function of more than one `return` statement")
    if not found:
        raise NoCForm(f"{constraint.label}: its source was not found in {path}")
    if len({ast.dump(b) for _, b in found}) > 1:  # lambdas of the same arguments on one line: by their columns
        found = [f for f in found if _within(f[0], code)]
    if len({ast.dump(b) for _, b in found}) != 1:
        raise NoCForm(f"{constraint.label}: its source could not be told apart on its line")
    return found[0][1]


def _within(node: ast.AST, code) -> bool:
    """Whether every instruction of ``code`` was compiled from ``node``'s span of the source (but
    those of no span, as a function's entry and return)."""
    start, end = (node.lineno, node.col_offset), (node.end_lineno, node.end_col_offset)
    return all(start <= (line, col) and (end_line, end_col) <= end
               for line, end_line, col, end_col in code.co_positions()
               if None not in (line, end_line, col, end_col) and (line, col) != (end_line, end_col))


class _Writer:
    def __init__(self, label: str, params: set[str], dims: tuple[str, ...], config: str, floats: set[str],
                 taken: set[str], numbers: dict[str, int | float]):
        self.label, self.params, self.dims, self.config, self.floats = label, params, dims, config, floats
        self.taken, self.numbers = taken, numbers  # the dims (or shape) it takes; numbers it reads by name

    def integral(self, node: ast.expr) -> bool:
        """Whether an operand is an integer in Python (a comparison's bool too), as its C form is:
        a float param or number, ``/`` or a float power makes it a float as far as its value reaches."""
        if isinstance(node, ast.Compare) or isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return True
        if isinstance(node, ast.Constant):
            return not isinstance(node.value, float)
        if isinstance(node, ast.Name):  # read as expr() reads it: a param, else a dim, else a number
            if node.id in self.params or node.id in self.dims and node.id in self.taken:
                return node.id not in self.floats
            return not isinstance(self.numbers.get(node.id), float)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            return not isinstance(self.constant(node), float)
        if isinstance(node, ast.BinOp):
            return not isinstance(node.op, ast.Div) and self.integral(node.left) and self.integral(node.right)
        if isinstance(node, ast.IfExp):
            return self.integral(node.body) and self.integral(node.orelse)
        values = node.values if isinstance(node, ast.BoolOp) else node.args if isinstance(node, ast.Call) else \
            [node.operand] if isinstance(node, ast.UnaryOp) else []
        return all(self.integral(v) for v in values)

    def exact(self, node: ast.expr) -> bool:
        """Whether an integer operand is a number a double holds exactly."""
        value = self.constant(node)
        return isinstance(value, int) and abs(value) < 2**53

    def real(self, node: ast.expr) -> str:
        """The C form of an operand that meets a float, as a double: an integer cast, which
        -Wconversion asks for (its implicit conversion may round); a number's, its double."""
        if self.exact(node):
            return self.number(float(self.constant(node)), node)
        return f"tb_real({self.expr(node)})" if self.integral(node) else self.expr(node)

    def test(self, node: ast.expr, whole: bool = False) -> str:
        """The C form of an operand read for its truth, as Python's ``bool()``: a float's by
        ``tb_eq`` (C's ``!`` and ``?`` of a double compare it with ==, which -Wfloat-equal
        refuses); where ``whole``, an int 0 or 1 (a 64-bit value held in an int lost its bits)."""
        if not self.integral(node):
            return f"(!tb_eq({self.expr(node)}, 0.0))"
        if whole and not isinstance(node, ast.Compare) and not (isinstance(node, ast.UnaryOp)
                                                                 and isinstance(node.op, ast.Not)):
            return f"({self.expr(node)} != 0)"
        return self.expr(node)

    def number(self, value: bool | int | float, node: ast.expr) -> str:
        """A Python number as a C literal: an int as a 64-bit one, as the C form computes."""
        if isinstance(value, float):
            if not math.isfinite(value):
                raise self.refuse(node)
            return repr(value)
        if not -2**63 < value < 2**63:
            raise self.refuse(node)
        return f"{int(value)}LL"

    def constant(self, node: ast.expr) -> int | float | complex | None:
        """The value of a power of numbers (``2**40``, ``-B ** 2``) as Python computes it, written
        in as a number; None where an operand is a param or a dim, or the value too large for C."""
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.Name) and node.id in self.numbers and node.id not in self.params \
                and not (node.id in self.dims and node.id in self.taken):
            return self.numbers[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            value = self.constant(node.operand)
            return None if value is None else -value
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            base, exponent = self.constant(node.left), self.constant(node.right)
            if base is None or exponent is None or isinstance(base, int) and isinstance(exponent, int) \
                    and abs(base) > 1 and (abs(base).bit_length() - 1) * exponent > 64:  # beyond 64 bits: not computed
                return None
            try:
                return base ** exponent
            except (OverflowError, ZeroDivisionError):
                return None
        return None

    def refuse(self, node: ast.AST) -> NoCForm:
        return NoCForm(f"{self.label}: `{ast.unparse(node)}` has no C form in the exported header")

    def expr(self, node: ast.expr) -> str:
        if isinstance(node, ast.Constant) and isinstance(node.value, (bool, int, float)):
            return self.number(node.value, node)
        if isinstance(node, ast.Name):  # 0LL + x: 64-bit arithmetic, without a cast C++ may warn of
            if node.id in self.params:
                return f"(0LL + {self.config}->{node.id})" if node.id not in self.floats else f"{self.config}->{node.id}"
            if node.id in self.dims and node.id in self.taken:
                return f"(0LL + {node.id})"
            if node.id in self.numbers:
                return self.number(self.numbers[node.id], node)
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "shape" \
                and "shape" in self.taken and isinstance(index := _index(node.slice), int) \
                and -len(self.dims) <= index < len(self.dims):
            return f"(0LL + {self.dims[index]})"
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):  # C has no operator for it
            value = self.constant(node)
            if not isinstance(value, (int, float)):
                raise self.refuse(node)
            return self.number(value, node)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY and self.integral(node):
            return f"({self.expr(node.left)} {_BINARY[type(node.op)]} {self.expr(node.right)})"
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:  # a float's: Python raises for & | << >>
            return f"({self.real(node.left)} {_BINARY[type(node.op)]} {self.real(node.right)})"
        if isinstance(node, ast.BinOp) and type(node.op) in _FLOOR and self.integral(node):
            return f"{_FLOOR[type(node.op)]}({self.expr(node.left)}, {self.expr(node.right)}, &{OK})"
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            return f"tb_div({self.real(node.left)}, {self.real(node.right)}, &{OK})"
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return f"(!{self.test(node.operand)})"
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return f"(-{self.expr(node.operand)})"
        value = self.expr if self.integral(node) else self.real  # where the operands' kinds meet, a double
        if isinstance(node, ast.BoolOp):  # the operand Python returns, as a value may be used
            found = value(node.values[0])
            for operand in node.values[1:]:
                a, b = found, value(operand)
                tested = a if self.integral(node) else f"(!tb_eq({a}, 0.0))"
                found = f"({tested} ? {b} : {a})" if isinstance(node.op, ast.And) else f"({tested} ? {a} : {b})"
            return found
        if isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
            sides = [node.left, *node.comparators]
            return "(" + " && ".join(self.compare(a, op, b) for a, op, b in zip(sides, node.ops, sides[1:])) + ")"
        if isinstance(node, ast.IfExp):
            return f"({self.test(node.test)} ? {value(node.body)} : {value(node.orelse)})"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("min", "max") \
                and len(node.args) == 2 and not node.keywords:
            a, b = (value(v) for v in node.args)
            return f"({a} {'<' if node.func.id == 'min' else '>'} {b} ? {a} : {b})"
        raise self.refuse(node)


    def compare(self, a: ast.expr, op: ast.cmpop, b: ast.expr) -> str:
        """One comparison of a chain; of a float, in doubles, its ``==`` and ``!=`` by ``tb_eq``;
        of an integer with a float, by ``tb_order``, but a number a double holds exactly."""
        if self.integral(a) and self.integral(b):
            return f"({self.expr(a)} {_COMPARE[type(op)]} {self.expr(b)})"
        whole, real, kind = (a, b, type(op)) if self.integral(a) else (b, a, _MIRROR[type(op)])
        if self.integral(whole) and not self.exact(whole):
            return f"((tb_order({self.expr(whole)}, {self.expr(real)}) & {_ORDER[kind]}) != 0)"
        if isinstance(op, (ast.Eq, ast.NotEq)):
            return f"({'' if isinstance(op, ast.Eq) else '!'}tb_eq({self.real(a)}, {self.real(b)}))"
        return f"({self.real(a)} {_COMPARE[type(op)]} {self.real(b)})"


def _index(node: ast.expr) -> int | None:
    """``shape[i]``'s index where it is a literal int, negative ones (a unary minus) too."""
    try:
        value = ast.literal_eval(node)
    except ValueError:
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None
