"""Issue 23's Python figure: an application's numpy training loop of the
MNIST MLP through keel's Python Client (demos/python/mnist_own_loop.py,
2 shards x 2 worker threads, BSP, batch 32, checkpoints every 50 steps),
beside two ceilings measured in the same run:
  - the same numpy forward/backward and SGD update in one plain Python
    loop with no keel at all (the application alone: what keel's pulls,
    pushes and hand-offs add to it is the difference);
  - keel's own C++ workers on the same job (keel.Job(application_loop=False)).
With --cluster KEEL it also runs the same loop as a client of `keel cluster
--nodes 2 --application-loop` (demos/python/mnist_cluster_loop.py: the
shards in node processes), its figure the coordinator's samples/s.
Medians of `repeats` alternating runs.

    PYTHONPATH=build/python /usr/bin/python3 bench/training/python_client_bench.py [epochs=1] [repeats=3] [--cluster build/demos/keel]
"""
import os
import statistics
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../demos/python"))
import keel  # noqa: E402
import mnist_cluster_loop  # noqa: E402
import mnist_own_loop  # noqa: E402


def plain_numpy(x, y, steps, batch, lr, seed):
    """The application alone: the same gradient and SGD update, one
    process, one thread, the parameters in numpy arrays, two workers'
    batches a step (as the job's BSP step sums them)."""
    rng = np.random.default_rng(seed)
    w1 = rng.uniform(-np.sqrt(6 / 784), np.sqrt(6 / 784), (784, 128)).astype(np.float32)
    w2 = rng.uniform(-np.sqrt(6 / 138), np.sqrt(6 / 138), (128, 10)).astype(np.float32)
    params = {"fc1.weight": w1, "fc1.bias": np.zeros(128, np.float32),
              "fc2.weight": w2, "fc2.bias": np.zeros(10, np.float32)}

    class View:
        def __init__(self, d):
            self.d = d

        def tensor(self, name):
            return self.d[name]

    grads = {k: np.zeros_like(v) for k, v in params.items()}
    g = View(grads)
    g.loss = 0.0
    p = View(params)
    t0 = time.perf_counter()
    for s in range(steps):
        for w in range(2):
            rows = rng.integers(0, x.shape[0], batch)
            mnist_own_loop.gradient(p, g, x[rows], y[rows])
            for k in params:
                params[k] -= lr * grads[k]
    return steps * 2 * batch / (time.perf_counter() - t0)


def main(argv):
    cluster = None
    if "--cluster" in argv:
        at = argv.index("--cluster")
        cluster = argv[at + 1]
        argv = argv[:at] + argv[at + 2:]
    epochs = int(argv[0]) if argv else 1
    repeats = int(argv[1]) if len(argv) > 1 else 3
    x, y = mnist_own_loop.load_mnist()
    steps = epochs * (x.shape[0] // 2 // 32)
    loop, plain, own, remote = [], [], [], []
    for i in range(repeats):
        t0 = time.perf_counter()
        r, _ = mnist_own_loop.train(steps=steps, kill_shard=False)
        loop.append(steps * 2 * 32 / (time.perf_counter() - t0))
        plain.append(plain_numpy(x, y, steps, 32, 0.1, i))
        with tempfile.TemporaryDirectory(prefix="keel-pybench-") as d:
            t0 = time.perf_counter()
            o = keel.Job("mnist-mlp", steps, checkpoint_dir=d, application_loop=False).wait(3600)
            own.append(steps * 2 * 32 / (time.perf_counter() - t0))
        print("python_client_bench: run %d: Python loop through keel %.0f samples/s (accuracy %.4f), "
              "plain numpy %.0f, keel's C++ workers %.0f (accuracy %.4f)" % (
                  i + 1, loop[-1], r["accuracy"], plain[-1], own[-1], o["accuracy"]))
        if cluster:
            _, _, f = mnist_cluster_loop.train(cluster, steps=steps, kill_shard=False)
            remote.append(f["samples_per_second"])
            print("python_client_bench: run %d: the Python loop as a client of keel cluster --nodes 2 %.0f samples/s "
                  "(accuracy %.4f)" % (i + 1, remote[-1], f["accuracy"]))
    a, b, c = statistics.median(loop), statistics.median(plain), statistics.median(own)
    print("python_client_bench: mnist-mlp, %d epoch(s), median of %d: Python loop through keel %.0f samples/s; "
          "ceiling plain numpy loop %.0f (ratio %.2f); keel's own C++ workers %.0f (ratio %.2f)" % (
              epochs, repeats, a, b, a / b, c, a / c))
    if cluster:
        d = statistics.median(remote)
        print("python_client_bench: the Python loop as a client of keel cluster --nodes 2, median of %d: %.0f "
              "samples/s; ceiling plain numpy loop %.0f (ratio %.2f)" % (repeats, d, b, d / b))


if __name__ == "__main__":
    main(sys.argv[1:])
