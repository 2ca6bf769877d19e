"""The hypothesis profiles of the property tests (RELIABILITY.md): ``small`` for ``make test``, a
few examples from the seeds each test fixes, no shrinking; ``soak`` for ``make soak``,
``LAKERULES_SOAK_EXAMPLES`` examples (default 40), derandomized unless ``LAKERULES_SOAK_RANDOM`` is
set, shrinking a failure unless ``LAKERULES_SOAK_SHRINK=0``. ``LAKERULES_PROFILE`` chooses."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

PROFILE = os.environ.get("LAKERULES_PROFILE", "small")


def register(small: str, soak: str, *, small_examples: int, small_steps: int | None = None,
             soak_steps: int | None = None, **small_extra) -> settings:
    """Register the two profiles under these names; the one ``LAKERULES_PROFILE`` chooses. Steps
    are a stateful test's sequence lengths (None for a test that is not stateful)."""
    common = {"deadline": None, "database": None, "suppress_health_check": list(HealthCheck), "print_blob": True}
    steps = lambda n: {} if n is None else {"stateful_step_count": n}  # noqa: E731
    settings.register_profile(small, max_examples=small_examples, phases=[Phase.explicit, Phase.generate],
                              **steps(small_steps), **common, **small_extra)
    settings.register_profile(
        soak, max_examples=int(os.environ.get("LAKERULES_SOAK_EXAMPLES", "40")), **steps(soak_steps),
        derandomize=os.environ.get("LAKERULES_SOAK_RANDOM") is None, **common,
        phases=[Phase.explicit, Phase.generate] + ([] if os.environ.get("LAKERULES_SOAK_SHRINK") == "0" else [Phase.shrink]),
    )
    return settings.get_profile(small if PROFILE == "small" else soak)
