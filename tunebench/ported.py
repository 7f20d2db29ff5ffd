"""What a Kernel Tuner script's ``tune_kernel`` arguments are in a tunebench declaration.

A port passes them as they were (``Variant(..., grid_div_x=["block_size_x"])``), and Python's own
"unexpected keyword argument" named the argument and no way on. Each is told here with what
takes its place, as a declaration error at the suite's line.
"""

from __future__ import annotations

from collections.abc import Mapping

_RUN = "a run's choice, not the declaration's: give it on the command line (pytest suites --tune --help lists them)"

#: Kernel Tuner's argument -> what a tunebench declaration has in its place.
KERNEL_TUNER_ARGUMENTS = {
    "kernel_name": "entry='name' of the Variant",
    "kernel_source": "source='kernels/name.cu' of the Variant, the template's file",
    "kernel_string": "source='kernels/name.cu' of the Variant, the code written to that file",
    "problem_size": "the representative shapes of the Kernel's buckets, Bucket('all', n=(1, None), shapes=[...])",
    "arguments": "args=lambda shape, dtype, rng: {'name': array, ...} of the Kernel, the arguments by the entry's "
                 "parameter names",
    "tune_params": "space=Space({...}) of the Variant",
    "restrictions": "constraints of the space, Space({...}, constraints=[lambda a, b: a * b <= 1024]), each a "
                    "function of the params it names",
    **{f"grid_div_{axis}": "launch=lambda config, shape: (grid, block) of the cuda Variant, the grid computed from "
                           "the shape, as (shape[0] + config['block_size_x'] - 1) // config['block_size_x']"
       for axis in "xyz"},
    "block_size_names": "the params block_size_x, _y, _z of the space, which launch= reads",
    "answer": "reference= of the Kernel, a numpy function given the inputs it names, returning the outputs= "
              "the Kernel lists",
    "verify": "reference= of the Kernel taking config (reference(x, config)) where the right output depends on "
              "the config, with tolerance={dtype: (rtol, atol)}",
    "atol": "tolerance={dtype: (rtol, atol)} of the Kernel, where Kernel Tuner's answer check was numpy.allclose, "
            "which holds numpy's rtol 1e-5 as well as the atol (1e-6 unless given): tolerance={'float32': (1e-5, "
            "atol)} checks as it did",
    "iterations": "--tune-repeats N on the command line, a fixed N samples per trial (without it a trial samples "
                  "until its median is pinned)",
    "lang": "the Kernel's variant for the target, cuda=Variant(...) or cpu=Variant(...)",
    "compiler_options": "flags=(...) of the Variant",
    "defines": "a param of the space with its one value, or flags=('-DNAME=value',) of the Variant",
    **dict.fromkeys(("cmem_args", "smem_args", "texmem_args"),
                    "an argument of the entry, given by args=: tunebench fills no __constant__ or texture memory "
                    "from the host"),
    **dict.fromkeys(("strategy", "strategy_options", "cache", "metrics", "objective",
                     "objective_higher_is_better", "device", "platform", "compiler", "observers", "quiet",
                     "verbose", "simulation_mode", "log"), _RUN),
}


def refuse_ported(what: str, given: Mapping[str, object], error: type[Exception]) -> None:
    """Raise ``error`` (the declaring class's own: a space's is a SpaceError) naming each Kernel
    Tuner argument among ``given`` and what takes its place."""
    ported = [name for name in given if name in KERNEL_TUNER_ARGUMENTS]
    if ported:
        raise error(f"{what} takes no {', '.join(f'{name}=' for name in ported)}: Kernel Tuner's "
                          + "; ".join(f"{name}= is {KERNEL_TUNER_ARGUMENTS[name]}" for name in ported))
