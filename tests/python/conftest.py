"""What the Python tests share: the accuracy keel's own workers reach on
MNIST in 2 epochs, computed once per session."""

import os
import sys
import tempfile

import pytest

import keel


@pytest.fixture(scope="session")
def own_mnist_accuracy():
    if not any(os.path.exists(os.path.join(keel.default_data_dir(), d)) for d in ("mnist", "fashion-mnist")):
        pytest.fail("no MNIST in %s: bash scripts/fetch-mnist.sh" % keel.default_data_dir())
    sys.path.insert(0, os.environ.get("KEEL_DEMOS", os.path.join(os.path.dirname(__file__), "../../demos/python")))
    import mnist_own_loop
    epochs, workers, batch = 2, 2, 32
    x, _ = mnist_own_loop.load_mnist()
    steps = epochs * (x.shape[0] // workers // batch)
    with tempfile.TemporaryDirectory(prefix="keel-pytest-own-") as d:
        own = keel.Job("mnist-mlp", steps, checkpoint_dir=d, workers=workers, batch_size=batch, lr=0.1,
                       application_loop=False).wait(300)
    return {"epochs": epochs, "steps": steps, "accuracy": own["accuracy"]}
