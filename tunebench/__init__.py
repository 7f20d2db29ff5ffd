"""tunebench: auto-tune CUDA and CPU kernels from pytest suites and guard their speed in CI.

Declare a suite with :class:`Kernel`, :class:`Variant`, :class:`Space` and :class:`Buckets`;
run ``pytest suites --tune``; apply the results with :func:`best` or :func:`tuned`.
"""

__version__ = "0.1.0"

from tunebench.apply import Tuned, tuned  # noqa: E402
from tunebench.buckets import Bucket, BucketError, Buckets, ShapeOutsideBuckets  # noqa: E402
from tunebench.kernel import Kernel, KernelError, KernelTableWarning, Variant  # noqa: E402
from tunebench.lookup import (LegacyRecordsWarning, StaleRecordsWarning, SuiteImportWarning,  # noqa: E402
                              UnknownDeviceWarning, UntunedWarning, best, lookup)
from tunebench.records import NewerFormat, RecordsError  # noqa: E402
from tunebench.space import Space, SpaceError, pow2  # noqa: E402

__all__ = ["Bucket", "BucketError", "Buckets", "Kernel", "KernelError", "KernelTableWarning", "LegacyRecordsWarning", "NewerFormat",
           "RecordsError", "ShapeOutsideBuckets", "Space", "SpaceError", "StaleRecordsWarning", "SuiteImportWarning", "Tuned",
           "UnknownDeviceWarning", "UntunedWarning", "Variant", "__version__", "best", "lookup", "pow2", "tuned"]
