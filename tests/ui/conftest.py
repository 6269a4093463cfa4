from __future__ import annotations

import pytest

from nbtune.ui.fallback import DRAWN


@pytest.fixture(autouse=True)
def a_fresh_front_end():
    """Each test starts as a fresh kernel does: its front end has drawn no widget yet (the
    dashboard falls back to static HTML sooner)."""
    DRAWN.forget()
    yield
    DRAWN.forget()
