"""Suite-wide settings: hypothesis runs without per-example deadlines (CI machines are slow
and shared), with a fixed example budget so the suite's time stays predictable."""

from hypothesis import HealthCheck, settings

settings.register_profile(
    "kvunits",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.load_profile("kvunits")
