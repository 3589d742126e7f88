"""gpusort: sort NumPy arrays and files on GPUs (or the CPU) through the gpusortd daemon.

    import numpy as np, gpusort
    with gpusort.Client() as c:              # $GPUSORT_SOCKET or /run/gpusort/gpusort.sock
        s = c.sort(np.random.rand(10**8))    # == np.sort(a); NaNs last
        i = c.argsort(a)                     # == np.argsort(a, kind="stable")
        x = c.empty(10**9, np.int64)         # in a shared buffer of the daemon
        x[:] = ...; c.sort(x)                # sorted where it is: no copy
        c.sort_file("data.npy")              # the file's data, the header kept

Pure Python: the standard library, NumPy and protobuf. The wire protocol is proto/README.md of
the gpusort repository.
"""

from ._errors import ConnectionLost, Error, Unavailable
from ._progress import Progress

__version__ = "0.1.0"

from .client import DEFAULT_SOCKET, Client, JobReport, ServerInfo  # noqa: E402

__all__ = ["Client", "Error", "ConnectionLost", "Unavailable", "Progress", "JobReport",
           "ServerInfo", "DEFAULT_SOCKET", "__version__"]
