"""Whether two builds hold the same machine code (tunebench.backends.machine_code), on real builds
of the gate's two kinds: today's template, and the recorded one (its header inlined, as the
records keep it), each compiled under its own name, as the gate compiles them, or in another
folder, as a cluster's host does."""

import dataclasses
import shutil
import sys

import numpy as np
import pytest

from tunebench.backends import cpu
from tunebench.backends.cache import BuildCache
from tunebench.backends.cpu import CpuBackend
from tunebench.backends.machine_code import same_code
from tunebench.buckets import Bucket, Buckets
from tunebench.kernel import Kernel, Variant
from tunebench.space import Space

#: A header of constants in each section that holds them: ``LANES`` and ``SKEW`` in the code (.text),
#: ``weights`` in .rodata, ``gain`` in .data, ``carry`` in .tdata, ``warm`` and the ordered ``first``
#: and ``then`` in the init arrays, ``CURVE`` a libm function called by name (.dynstr).
HEADER = """\
/* scale.h: the constants of the scale kernel */
#include <math.h>
#define LANES 8
#define SKEW 1000
#define CURVE expf
static const float weights[5] = {0.5f, 0.25f, 0.125f, 0.0625f, 3.0f};
float gain = 1.0f;
static float scratch[64];
static __thread float carry[4] = {1.0f, 2.0f, 3.0f, 4.0f};
__attribute__((constructor)) static void warm(void) { scratch[1] = gain; }
__attribute__((constructor(200))) static void first(void) { gain = gain * 2.0f; }
__attribute__((constructor(300))) static void then(void) { gain = gain + 1.0f; }
"""
TEMPLATE = """\
#include "scale.h"
typedef TB_DTYPE real;
void scale(const real *x, real *y, int n)
{
#pragma omp parallel for
    for (int i = 0; i < n; i += LANES)
        for (int l = 0; l < LANES && i + l < n; ++l)
            y[i + l] = CURVE(x[i + l]) * weights[(i + l + SKEW) % 5] * gain + scratch[l % 64] + carry[l % 4];
}
"""

#: Edits of the header whose build is the same code as the tune's.
SAME = {
    "a comment edited": lambda h: h.replace("the constants of the scale kernel", "the scale kernel's constants"),
    "whitespace within a line": lambda h: h.replace("#define LANES 8", "#define  LANES\t8 "),
    "nothing, built in another folder": lambda h: h,
}
#: Edits of one constant, each in another section: other code.
OTHER = {
    ".rodata": lambda h: h.replace("3.0f}", "3.5f}"),
    ".data": lambda h: h.replace("gain = 1.0f", "gain = 1.5f"),
    ".text": lambda h: h.replace("#define LANES 8", "#define LANES 4"),
    ".text, of the same size": lambda h: h.replace("#define SKEW 1000", "#define SKEW 1001"),
    "a libm function called for another (.dynstr alone)": lambda h: h.replace("#define CURVE expf", "#define CURVE logf"),
    "a __thread initialiser (.tdata)": lambda h: h.replace("3.0f, 4.0f}", "3.0f, 5.0f}"),
    "two constructors' order": lambda h: h.replace("(200)", "(250)").replace("(300)", "(200)").replace("(250)", "(300)"),
    "the init array": lambda h: h + "__attribute__((constructor)) static void again(void) { gain = gain * 2 - 1; }\n",
}


@pytest.fixture(params=["gcc", "clang-19"])
def compiler(request, monkeypatch):
    if not shutil.which(request.param):
        pytest.skip(f"{request.param} is not on PATH")
    monkeypatch.setattr(cpu, "CC", request.param)
    return request.param


def builds(tmp_path, compiler: str, edit, other_folder: bool = False, template: str = TEMPLATE):
    """The library of the tune's template (the records' text), and of today's, its header edited
    by ``edit`` and its own text ``template``: built as the gate builds them, in one compile cache
    (or, ``other_folder``, today's in another at another depth)."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "scale.c").write_text(TEMPLATE)
    (project / "scale.h").write_text(HEADER)

    def declared():
        variant = Variant(source=project / "scale.c", entry="scale", space=Space({"u": [1]}),
                          heuristic=lambda shape: {"u": 1})
        kernel = Kernel(f"machine_code_{compiler.replace('-', '_')}", cpu=variant,
                        buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(64,)])]),
                        args=lambda shape, dtype, rng: {"x": np.ones(shape[0], np.float32),
                                                        "y": np.empty(shape[0], np.float32),
                                                        "n": np.int32(shape[0])},
                        reference=lambda x, n: x, outputs=["y"])
        return kernel, variant

    kernel, tuned = declared()
    recorded = dataclasses.replace(tuned, text=tuned.template)
    (project / "scale.h").write_text(edit(HEADER))
    (project / "scale.c").write_text(template)
    kernel, today = declared()
    here = CpuBackend(BuildCache(tmp_path / "cache"))
    there = CpuBackend(BuildCache(tmp_path / "another" / "host's" / "cache")) if other_folder else here
    return (here.build(kernel, recorded, {"u": 1}, "float32").handle,
            there.build(kernel, today, {"u": 1}, "float32").handle)


@pytest.mark.parametrize("edit", SAME)
def test_a_header_edited_in_comments_or_whitespace_builds_the_same_code(tmp_path, compiler, edit):
    """gcc 12 and clang 19 (-O3 -g -march=native -fopenmp) write the source's name and lines into
    the debug sections, the symbol table and the build ID, all left out; the code is alike."""
    recorded, today = builds(tmp_path, compiler, SAME[edit], other_folder=edit.startswith("nothing"))
    assert recorded != today and recorded.read_bytes() != today.read_bytes()
    assert same_code(recorded, today)


@pytest.mark.parametrize("section", OTHER)
def test_a_constant_changed_in_a_header_is_other_code(tmp_path, compiler, section):
    recorded, today = builds(tmp_path, compiler, OTHER[section])
    assert not same_code(recorded, today)


def test_a_line_added_ahead_of_an_openmp_loop_is_other_code_for_clang_alone(tmp_path, compiler):
    """clang writes an OpenMP loop's source line into .rodata (";scale.c;scale;7;1;;"): a line
    added ahead of it is other code there, measured as any other change; gcc writes none."""
    recorded, today = builds(tmp_path, compiler, lambda h: h, template="/* a line added */\n" + TEMPLATE)
    assert same_code(recorded, today) is (compiler == "gcc")


def test_nothing_is_the_same_code_where_it_cannot_be_told(tmp_path, monkeypatch):
    """No ELF file, one cut short (its headers or sections past its end: pyelftools raised), or no
    pyelftools (the GPU image): nothing is compared, and the gate measures."""
    recorded, today = builds(tmp_path, "gcc", SAME["a comment edited"])
    assert not same_code(tmp_path / "project" / "scale.c", tmp_path / "project" / "scale.c")
    for size in (100, 5000):
        cut = tmp_path / f"cut{size}.so"
        cut.write_bytes(recorded.read_bytes()[:size])
        assert not same_code(cut, cut)
    monkeypatch.setitem(sys.modules, "elftools.elf.elffile", None)  # its import raises ImportError
    assert not same_code(recorded, today)
    assert not same_code(recorded, recorded)


SCALE_CUH = """\
/* scale.cuh: the scale kernel's constants */
#define FACTOR 2.0f
__constant__ float offset[2] = {0.5f, 0.25f};
"""
SCALE_CU = """\
#include "scale.cuh"
extern "C" __global__ void __launch_bounds__(128) scale(const TB_DTYPE *x, TB_DTYPE *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * FACTOR + offset[i % 2];
}
"""


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize("flags", [(), ("-lineinfo",)])
@pytest.mark.parametrize("edit, kernel_edit, same", [
    (lambda h: h.replace("constants */", "constants, as tuned */"), None, True),
    (lambda h: "/* a line added */\n" + h.replace("#define FACTOR", "#define  FACTOR"), None, True),
    (lambda h: h, lambda k: "/* a line added */\n\n" + k, True),  # the kernel's lines moved: -lineinfo's alone
    (lambda h: h.replace("2.0f", "3.0f"), None, False),  # the code's constant
    (lambda h: h.replace("0.25f", "0.5f"), None, False),  # constant memory's
], ids=["comment", "whitespace", "kernel lines moved", "code", "constant memory"])
def test_cubins_of_a_header_edited_in_comments_hold_the_same_code_and_of_a_constant_changed_other_code(
        tmp_path, flags, edit, kernel_edit, same):
    """A cubin is read whole by the driver: its debug sections aside (-lineinfo's, which name the
    kernel's lines), nvcc's cubins of the same code are alike, whatever the edit of the comments
    or the folder."""
    from tunebench.backends.cuda import CudaCompiler

    (tmp_path / "scale.cuh").write_text(SCALE_CUH)
    (tmp_path / "scale.cu").write_text(SCALE_CU)

    def declared():
        variant = Variant(source=tmp_path / "scale.cu", entry="scale", space=Space({"u": [1]}),
                          heuristic=lambda shape: {"u": 1}, flags=flags, launch=lambda config, shape: (1, 128))
        return Kernel("machine_code_cuda", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(64,)])]),
                      args=lambda shape, dtype, rng: {}, reference=lambda: None, outputs=["y"], cuda=variant), variant

    kernel, tuned = declared()
    recorded = dataclasses.replace(tuned, text=tuned.template)
    (tmp_path / "scale.cuh").write_text(edit(SCALE_CUH))
    (tmp_path / "scale.cu").write_text(kernel_edit(SCALE_CU) if kernel_edit else SCALE_CU)
    kernel, today = declared()
    here, there = (CudaCompiler("sm_90", BuildCache(tmp_path / folder)) for folder in ("cache", "another"))
    assert same_code(here.build(kernel, recorded, {"u": 1}, "float32").handle,
                     there.build(kernel, today, {"u": 1}, "float32").handle) is same
