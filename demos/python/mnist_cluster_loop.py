"""Trains keel's MNIST MLP with a numpy training loop of its own against keel
shards in `keel node` processes: this Python process is a client of a keel
cluster (keel.connect), running the loops of the job's workers; the
coordinator (keel cluster --application-loop) and two keel nodes hold and
update the parameters, and shard:0 is killed halfway through.

    bash scripts/fetch-mnist.sh          # MNIST into keel's data cache
    PYTHONPATH=build/python /usr/bin/python3 demos/python/mnist_cluster_loop.py --keel build/demos/keel

It starts `keel cluster` itself, joins its node:0 and prints the accuracy the
coordinator's evaluation gives the trained parameters. To join a cluster
that is already running (keel cluster --application-loop, or keel node
processes and a coordinator elsewhere), give the node and the secret:

    ... mnist_cluster_loop.py --join 10.0.0.5:7001 --secret-file cluster.secret --workers 0,1

and read the outcome in the coordinator's report.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading

import keel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mnist_own_loop import load_mnist, run_on_threads, run_worker  # noqa: E402


class _ClusterWorkers:
    """What run_worker asks of a job, from a cluster client: the workers'
    Clients (the kill is the coordinator's plan, not the loop's)."""

    def __init__(self, cluster, timeout):
        self.cluster, self.timeout = cluster, timeout

    def client(self, worker):
        return self.cluster.client(worker, self.timeout)

    def kill(self, name):
        raise RuntimeError("faults come from the coordinator's plan (keel cluster --kill)")


def run_loops(join, secret_file, workers, of_workers, batch=32, seed=1, data_dir=None, timeout=120):
    """Joins the node at `join` as the client of `workers` (of `of_workers` in
    the job), runs their loops on threads and waits until the job lets them
    go. Returns the loops' log (steps a restart or rollback moved)."""
    x, y = load_mnist(data_dir, "train")
    log = []
    with keel.connect(join, workers=workers, secret_file=secret_file) as cluster:
        job = _ClusterWorkers(cluster, timeout)
        run_on_threads(lambda w: run_worker(job, w, of_workers, x, y, batch, seed, None, log, timeout), workers)
        cluster.wait_released(timeout)
    return log


def train(keel_binary, epochs=3, workers=2, shards=2, nodes=2, batch=32, lr=0.1, seed=1, kill_shard=True,
          data_dir=None, timeout=300, steps=None):
    """Starts keel cluster (its coordinator and nodes) with the application's
    loops, runs them here, and returns (keel cluster's report, the loops'
    log, the figures parsed from the report)."""
    x, _ = load_mnist(data_dir, "train")
    if steps is None:
        steps = epochs * (x.shape[0] // workers // batch)
    with tempfile.TemporaryDirectory(prefix="keel-cluster-python-") as d:
        secret = os.path.join(d, "secret")
        fd = os.open(secret, os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, os.urandom(32).hex().encode() + b"\n")
        os.close(fd)
        cmd = [keel_binary, "cluster", "--nodes", str(nodes), "--secret-file", secret, "--application-loop",
               "--model", "mnist-mlp", "--steps", str(steps), "--workers", str(workers), "--shards", str(shards),
               "--batch", str(batch), "--lr", str(lr), "--seed", str(seed),
               "--checkpoint-dir", os.path.join(d, "run")]
        if data_dir:
            cmd += ["--data-dir", data_dir]
        if kill_shard:
            cmd += ["--kill", "shard:0@%d" % (steps // 2)]
        coordinator = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # Its output is read on threads all along (a full pipe would stop it).
        report, errors, joined = [], [], threading.Event()

        def read(stream, into, watch):
            for line in stream:
                into.append(line)
                if watch and re.search(r"join node:0 at \S+ with", line):
                    joined.set()
            joined.set()  # it ended: nothing more to wait for

        readers = [threading.Thread(target=read, args=(coordinator.stdout, report, True)),
                   threading.Thread(target=read, args=(coordinator.stderr, errors, False))]
        for t in readers:
            t.start()
        try:
            joined.wait(timeout)
            m = re.search(r"join node:0 at (\S+) with", "".join(report))
            if not m:
                raise RuntimeError("keel cluster did not start: " + "".join(report) + "".join(errors))
            log = run_loops(m.group(1), secret, list(range(workers)), workers, batch, seed, data_dir, timeout)
            coordinator.wait(timeout)
        finally:
            if coordinator.poll() is None:
                coordinator.kill()
                coordinator.wait()
            for t in readers:
                t.join()
        text = "".join(report)
        if coordinator.returncode != 0:
            raise RuntimeError("keel cluster failed (exit %d): %s%s" % (coordinator.returncode, text,
                                                                      "".join(errors)))
    figures = {}
    for name, pattern in (("accuracy", r"test accuracy ([0-9.]+)"), ("pushes_acked", r"pushes acked (\d+)"),
                          ("pushes_applied", r"applied (\d+),"), ("restarts", r"(\d+) restarts"),
                          ("samples_per_second", r"done in [0-9.]+ s, ([0-9.]+) samples/s")):
        m = re.search(pattern, text)
        if m:
            figures[name] = float(m.group(1)) if name in ("accuracy", "samples_per_second") else int(m.group(1))
    return text, log, figures


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keel", default="keel", help="the keel program (default: keel on PATH)")
    ap.add_argument("--join", help="HOST:PORT of a node of a running cluster (then no keel cluster is started)")
    ap.add_argument("--secret-file", help="with --join: the cluster secret (else $KEEL_CLUSTER_SECRET)")
    ap.add_argument("--workers", default="0,1", help="with --join: the workers whose loops to run (of the job's)")
    ap.add_argument("--of-workers", type=int, default=2, help="with --join: how many workers the job has")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--no-kill", action="store_true", help="do not kill shard:0 halfway")
    a = ap.parse_args(argv)
    if a.join:
        workers = [int(w) for w in a.workers.split(",")]
        for line in run_loops(a.join, a.secret_file, workers, a.of_workers):
            print(line)
        print("the job let workers %s go: its report is the coordinator's" % workers)
        return 0
    text, log, figures = train(a.keel, epochs=a.epochs, kill_shard=not a.no_kill)
    print(text, end="")
    for line in log:
        print(line)
    print("test accuracy %.4f, pushes acked %d applied %d" % (
        figures["accuracy"], figures["pushes_acked"], figures["pushes_applied"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
