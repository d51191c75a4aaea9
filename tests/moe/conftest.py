"""Models and accelerators the planner's tests share (module-scoped: loaded once per test module)."""

from __future__ import annotations

import pytest

from truepeak.hardware.lookup import get_accelerator
from truepeak.moe.config import load_model


@pytest.fixture(scope="module")
def glm5():
    return load_model("glm-5")


@pytest.fixture(scope="module")
def dsv3():
    return load_model("deepseek-v3")


@pytest.fixture(scope="module")
def ws():
    return get_accelerator("NVIDIA RTX PRO 6000 Blackwell Workstation Edition")


@pytest.fixture(scope="module")
def h200():
    return get_accelerator("h200")
