"""Workloads: real programs in the client and server namespaces that behave like applications
(step 2 of the journey). ``WORKLOADS[name](**settings).launch(path, logdir).wait()``."""

from . import http, iperf, probed, roundtrips, streams  # noqa: F401  (each registers its workloads)
from .base import WORKLOADS, Workload
from .http import Http
from .iperf import Iperf
from .probed import Probed
from .roundtrips import Idleburst, Reqresp
from .streams import Bulk, Ratelimited, Shortconns, Slowreader
from .result import AppResult
from .running import RunningWorkload, WorkloadError, WorkloadFailed, WorkloadTimeout

__all__ = ["WORKLOADS", "Workload", "Bulk", "Slowreader", "Ratelimited", "Shortconns", "Reqresp", "Idleburst",
           "Http", "Iperf", "Probed", "RunningWorkload", "AppResult", "WorkloadTimeout", "WorkloadFailed",
           "WorkloadError"]
