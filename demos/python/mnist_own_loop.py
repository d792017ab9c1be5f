"""Trains keel's MNIST MLP (784-128-10) with a training loop of its own, in
numpy: keel's shards hold the parameters and apply the pushes exactly once,
Python threads run the workers' loops (their own batches, forward and
backward passes), and a shard is killed halfway through.

    bash scripts/fetch-mnist.sh          # MNIST into keel's data cache
    PYTHONPATH=build/python /usr/bin/python3 demos/python/mnist_own_loop.py

Prints the test accuracy keel's evaluation gives the trained parameters
(the same evaluation `keel train` reports) and what the run went through.
"""

import argparse
import os
import sys
import tempfile
import threading

import numpy as np

import keel


def load_mnist(data_dir=None, split="train", limit=0):
    """The MNIST split as (images [n, 784] float32 in [0, 1], labels [n] int64),
    read from the IDX files scripts/fetch-mnist.sh puts in keel's data cache
    (Fashion-MNIST where MNIST is missing, as keel's own models do)."""
    base = data_dir or keel.default_data_dir()
    prefix = "train" if split == "train" else "t10k"
    for folder in ("mnist", "fashion-mnist"):
        images = os.path.join(base, folder, prefix + "-images-idx3-ubyte")
        labels = os.path.join(base, folder, prefix + "-labels-idx1-ubyte")
        if os.path.exists(images) and os.path.exists(labels):
            break
    else:
        raise FileNotFoundError(
            "no MNIST in %s: run bash scripts/fetch-mnist.sh first" % base)
    with open(images, "rb") as f:
        magic, n, rows, cols = np.frombuffer(f.read(16), dtype=">u4")
        if magic != 2051:
            raise ValueError("%s: not an IDX image file (magic %d)" % (images, magic))
        x = np.frombuffer(f.read(), dtype=np.uint8).reshape(n, rows * cols)
    with open(labels, "rb") as f:
        magic, m = np.frombuffer(f.read(8), dtype=">u4")
        if magic != 2049 or m != n:
            raise ValueError("%s: not the labels of %s" % (labels, images))
        y = np.frombuffer(f.read(), dtype=np.uint8).astype(np.int64)
    if limit:
        x, y = x[:limit], y[:limit]
    return x.astype(np.float32) / 255.0, y


def gradient(pulled, grad, x, y):
    """Fills `grad` with the gradient of the batch's mean softmax
    cross-entropy at the pulled parameters; returns the loss."""
    w1, b1 = pulled.tensor("fc1.weight"), pulled.tensor("fc1.bias")
    w2, b2 = pulled.tensor("fc2.weight"), pulled.tensor("fc2.bias")
    z = x @ w1 + b1
    h = np.maximum(z, 0.0)
    logits = h @ w2 + b2
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(axis=1, keepdims=True)
    n = x.shape[0]
    loss = -np.log(p[np.arange(n), y] + 1e-12).mean()
    d = p
    d[np.arange(n), y] -= 1.0
    d /= n
    grad.tensor("fc2.weight")[...] = h.T @ d
    grad.tensor("fc2.bias")[...] = d.sum(axis=0)
    dz = (d @ w2.T) * (z > 0)
    grad.tensor("fc1.weight")[...] = x.T @ dz
    grad.tensor("fc1.bias")[...] = dz.sum(axis=0)
    grad.loss = float(loss)
    return loss


def run_worker(job, worker, workers, x, y, batch, seed, kill_at, log, timeout):
    """One worker's loop: its own shuffled batches (a function of the step,
    so a step the job moves back to is computed again the same way)."""
    client = job.client(worker)
    n = x.shape[0] // workers  # this worker's share of the training set
    own = np.arange(worker * n, (worker + 1) * n)
    per_epoch = n // batch
    orders = {}
    step = client.next_step().wait(timeout)
    while step < client.steps:
        epoch, at = divmod(step, per_epoch)
        if epoch not in orders:
            orders[epoch] = np.random.default_rng([seed, worker, epoch]).permutation(own)
        rows = orders[epoch][at * batch:(at + 1) * batch]
        try:
            pulled = client.pull(step).wait(timeout)
            grad = client.gradient_for(pulled)
            gradient(pulled, grad, x[rows], y[rows])
            client.push(step, grad).wait(timeout)
        except keel.StepMoved as moved:  # a restart or a rollback moved the worker
            log.append("worker:%d: %s" % (worker, moved))
        if worker == 0 and kill_at is not None and step == kill_at:
            job.kill("shard:0")
            log.append("worker:0 killed shard:0 after step %d" % step)
        step = client.next_step().wait(timeout)


def run_on_threads(loop, workers, on_error=None):
    """Runs loop(w) for each worker w on a thread of its own and waits for
    them all; a loop that raises is named in the RuntimeError raised at the
    end (`on_error` is called first, e.g. to stop what the others wait for)."""
    errors = []

    def guarded(w):
        try:
            loop(w)
        except Exception as e:  # noqa: BLE001 - reported below, naming the worker
            errors.append("worker:%d: %r" % (w, e))
            if on_error:
                on_error()

    threads = [threading.Thread(target=guarded, args=(w,)) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError("; ".join(errors))


def train(steps=None, epochs=3, workers=2, shards=2, batch=32, lr=0.1, seed=1, kill_shard=True,
          data_dir=None, train_limit=0, test_limit=0, checkpoint_dir=None, timeout=120):
    """Runs the job and returns (keel's result dict, the loops' log)."""
    x, y = load_mnist(data_dir, "train", train_limit)
    if steps is None:
        steps = epochs * (x.shape[0] // workers // batch)
    own_dir = checkpoint_dir is None
    checkpoint_dir = checkpoint_dir or tempfile.mkdtemp(prefix="keel-python-")
    job = keel.Job("mnist-mlp", steps, checkpoint_dir=checkpoint_dir, shards=shards, workers=workers,
                   batch_size=batch, lr=lr, seed=seed, data_dir=data_dir, test_examples=test_limit)
    log = []
    # A loop that fails stops the job: the others would wait for it.
    run_on_threads(lambda w: run_worker(job, w, workers, x, y, batch, seed, steps // 2 if kill_shard else None,
                                        log, timeout),
                   range(workers), on_error=job.stop)
    result = job.wait(timeout)
    if own_dir:
        import shutil
        shutil.rmtree(checkpoint_dir, ignore_errors=True)
    return result, log


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--no-kill", action="store_true", help="do not kill shard:0 halfway")
    a = ap.parse_args(argv)
    result, log = train(epochs=a.epochs, workers=a.workers, shards=a.shards, batch=a.batch, lr=a.lr,
                        kill_shard=not a.no_kill)
    for line in log:
        print(line)
    print("steps %d, test accuracy %.4f on %d examples, restarts %s, pushes acked %d applied %d, %.1f s" % (
        result["steps"], result["accuracy"], result["examples"], result["restarts"],
        result["pushes_acked"], result["pushes_applied"], result["seconds"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
