import numpy as np
import pytest


@pytest.fixture
def rng(request):
    return np.random.default_rng(abs(hash(request.node.name)) % (1 << 32))
