"""Suite-wide settings: hypothesis runs without per-example deadlines (CI machines are slow
and shared), with a fixed example budget so the suite's time stays predictable. Under CI
(``CI`` set) the examples are derandomized, so a landing is reproducible run to run; local
runs keep exploring new examples."""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "kvunits",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.register_profile("kvunits-ci", parent=settings.get_profile("kvunits"), derandomize=True)
settings.load_profile("kvunits-ci" if os.environ.get("CI") else "kvunits")
