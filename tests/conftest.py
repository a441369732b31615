"""Test-wide settings.

Hypothesis: no per-example deadline and no "too slow" health check (CI shares 2 cores with
other work, so wall time says nothing about correctness).  Under CI (``CI=true``) examples
are derandomized, so a CI run is reproducible; locally they stay random and keep exploring.
"""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "workbench",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=os.environ.get("CI", "").lower() in {"1", "true", "yes"},
    print_blob=True,
)
settings.load_profile("workbench")
