"""Type stubs of the native module. Its public names are those of ioswitch/__init__.pyi,
which documents them, less `bench` (a Python module), and `_bench_run`."""

from typing import Any

from ioswitch import *
from ioswitch import __all__ as __all__

def _bench_run(job: Any, plus: bool = False, check: bool = True) -> dict[str, Any]:
    """Runs fio jobs; see ioswitch.bench.run."""

__all__.remove("bench")
__all__.append("_bench_run")
