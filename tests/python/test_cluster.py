"""keel.connect from Python: this process (or a child Python process) as a
client of a keel cluster (keel cluster --application-loop, its coordinator
and `keel node` processes), running the loops of the job's workers. The
probe's loops through shard kills, a client killed with SIGKILL, and the
coordinator killed with SIGKILL and resumed on the same nodes end
bit-identical to keel's own workers with every push applied once, and the
MNIST example (demos/python/mnist_cluster_loop.py) reaches keel's own
workers' accuracy through a shard kill.

Run by ctest with KEEL_BINARY at the keel program."""

import os
import re
import subprocess
import sys
import tempfile
import threading

import pytest

import keel
from probe_loop import probe_loop  # noqa: E402

sys.path.insert(0, os.environ.get("KEEL_DEMOS", os.path.join(os.path.dirname(__file__), "../../demos/python")))
import mnist_cluster_loop  # noqa: E402
import mnist_own_loop  # noqa: E402

KEEL = os.environ.get("KEEL_BINARY", "keel")
PATIENCE = 60


def write_secret(d):
    path = os.path.join(d, "secret")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, os.urandom(32).hex().encode() + b"\n")
    os.close(fd)
    return path


class Coordinator:
    """keel cluster with the application's loops, its output read on threads."""

    def __init__(self, args):
        self.p = subprocess.Popen([KEEL, "cluster"] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)
        self.out, self.err, self.joined = [], [], threading.Event()
        self.changed = threading.Condition()  # notified at each line read, and at the end
        self.readers = [threading.Thread(target=self._read, args=(self.p.stdout, self.out)),
                        threading.Thread(target=self._read, args=(self.p.stderr, self.err))]
        for t in self.readers:
            t.start()

    def _read(self, stream, into):
        for line in stream:
            with self.changed:
                into.append(line)
                self.changed.notify_all()
            if "join node:0 at" in line:
                self.joined.set()
        self.joined.set()
        with self.changed:
            self.changed.notify_all()

    def wait_for(self, predicate, timeout):
        """Waits up to `timeout` s until predicate(out lines) holds or the
        output ends; returns whether it held."""
        with self.changed:
            return self.changed.wait_for(
                lambda: predicate(self.out) or all(not t.is_alive() for t in self.readers), timeout) \
                and predicate(self.out)

    def join_address(self):
        assert self.joined.wait(PATIENCE)
        m = re.search(r"join node:0 at (\S+) with", "".join(self.out))
        assert m, "".join(self.out) + "".join(self.err)
        return m.group(1)

    def finish(self):
        try:
            code = self.p.wait(PATIENCE * 2)
        finally:
            if self.p.poll() is None:
                self.p.kill()
                self.p.wait()
            for t in self.readers:
                t.join()
        return code, "".join(self.out), "".join(self.err)


# Run as a child process: `python test_cluster.py JOIN SECRET WORKER DIE_AT`.
def child_main(join, secret, worker, die_at):
    def die(s, pushed):
        if s == die_at:
            os.kill(os.getpid(), 9)
    with keel.connect(join, workers=[worker], secret_file=secret) as cluster:
        probe_loop(cluster.client(worker, PATIENCE), die)


def own_workers_sha(steps, d):
    r = keel.Job("probe", steps, checkpoint_dir=d, workers=2, shards=2, lr=1.0, application_loop=False).wait(PATIENCE)
    return r["params_sha256"]


def test_python_clients_of_a_cluster_apply_every_push_once_through_shard_kills_and_a_client_killed():
    steps = 80
    with tempfile.TemporaryDirectory(prefix="keel-pytest-cluster-") as d:
        secret = write_secret(d)
        coordinator = Coordinator(["--nodes", "2", "--secret-file", secret, "--application-loop", "--model", "probe",
                                   "--steps", str(steps), "--workers", "2", "--shards", "2", "--lr", "1",
                                   "--checkpoint-every", "10", "--checkpoint-dir", os.path.join(d, "run"),
                                   "--kill", "shard:0@12,shard:1@50"])
        join = coordinator.join_address()
        firsts = {}
        with keel.connect(join, workers=[0], secret_file=secret) as zero:
            # worker:0's loop runs here from the start.
            t = threading.Thread(target=lambda: firsts.__setitem__(0, probe_loop(zero.client(0, PATIENCE))))
            t.start()
            # worker:1's first client is a process of its own, killed with SIGKILL after step 30.
            child = subprocess.run([sys.executable, __file__, join, secret, "1", "30"], timeout=PATIENCE * 2,
                                   capture_output=True, text=True)
            assert child.returncode == -9, child.stderr
            # The next client of worker:1 goes on where the shards say.
            with keel.connect(join, workers=[1], secret_file=secret) as one:
                firsts[1] = probe_loop(one.client(1, PATIENCE))
                t.join()
                one.wait_released(PATIENCE)
            zero.wait_released(PATIENCE)
        code, out, err = coordinator.finish()
        assert code == 0, out + err
        assert firsts[0] == 0
        assert 0 < firsts[1] <= 31, out
        assert "every parameter equals the %d pushes its shard acknowledged" % (2 * steps) in out, out
        acked = re.search(r"pushes acked (\d+), applied (\d+), params_sha256 (\w+)", out)
        assert acked and acked.group(1) == acked.group(2) == str(2 * 2 * steps), out
        assert re.search(r"worker:1 .*restart|restart workers/worker:1", out), out
        assert acked.group(3) == own_workers_sha(steps, os.path.join(d, "own"))


def start_node(secret):
    p = subprocess.Popen([KEEL, "node", "--listen", "127.0.0.1:0", "--secret-file", secret],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = p.stdout.readline()
    m = re.search(r"listening on (127\.0\.0\.1:\d+)", line)
    assert m, line
    return p, m.group(1)


def test_python_clients_go_on_through_the_coordinator_killed_and_resumed_on_the_same_nodes():
    steps = 600
    with tempfile.TemporaryDirectory(prefix="keel-pytest-cluster-") as d:
        secret = write_secret(d)
        nodes = [start_node(secret) for _ in range(2)]
        try:
            args = ["--connect", ",".join(a for _, a in nodes), "--secret-file", secret, "--application-loop",
                    "--model", "probe", "--steps", str(steps), "--workers", "2", "--shards", "2", "--lr", "1",
                    "--checkpoint-every", "20", "--checkpoint-dir", os.path.join(d, "run")]
            first = Coordinator(args)
            join = first.join_address()
            killed = threading.Event()

            def loop(cluster, w):
                def kill_coordinator(s, pushed):
                    if w == 0 and s >= 200 and not killed.is_set():
                        first.p.kill()  # SIGKILL: the coordinator dies mid-run
                        killed.set()
                # The coordinator's death and its resume move the workers.
                probe_loop(cluster.client(w, PATIENCE), kill_coordinator, (keel.StepMoved, keel.Timeout))

            with keel.connect(join, workers=[0, 1], secret_file=secret) as cluster:
                threads = [threading.Thread(target=loop, args=(cluster, w)) for w in (0, 1)]
                for t in threads:
                    t.start()
                assert killed.wait(PATIENCE)
                code, _, _ = first.finish()
                assert code == -9
                second = Coordinator(args + ["--resume", os.path.join(d, "run")])
                for t in threads:
                    t.join()
                cluster.wait_released(PATIENCE)
            code, out, err = second.finish()
            assert code == 0, out + err
            assert "resumed at step" in out, out
            assert "every parameter equals the %d pushes its shard acknowledged" % (2 * steps) in out, out
            acked = re.search(r"pushes acked (\d+), applied (\d+), params_sha256 (\w+)", out)
            assert acked and acked.group(1) == acked.group(2), out
            assert acked.group(3) == own_workers_sha(steps, os.path.join(d, "own"))
        finally:
            for p, _ in nodes:
                p.terminate()
                p.wait(PATIENCE)


def test_a_cluster_client_names_what_is_wrong():
    with tempfile.TemporaryDirectory(prefix="keel-pytest-cluster-") as d:
        secret = write_secret(d)
        with pytest.raises(ValueError, match="HOST:PORT"):
            keel.connect("no-port", workers=[0], secret_file=secret)
        with pytest.raises(keel.Error, match="named twice"):
            keel.connect("127.0.0.1:9", workers=[1, 1], secret_file=secret)
        with pytest.raises(keel.Error, match="secret"):
            keel.connect("127.0.0.1:9", workers=[0], secret_file=os.path.join(d, "missing"))
        with pytest.raises(keel.Error, match="cannot join the node at 127.0.0.1:9"):
            keel.connect("127.0.0.1:9", workers=[0], secret_file=secret, timeout=1.0)


def test_the_mnist_example_against_keel_nodes_reaches_keel_own_workers_accuracy_through_a_shard_kill(
        own_mnist_accuracy):
    epochs, workers, batch = own_mnist_accuracy["epochs"], 2, 32
    text, log, figures = mnist_cluster_loop.train(KEEL, epochs=epochs, workers=workers, batch=batch, lr=0.1,
                                                  kill_shard=True)
    assert "fault shard:0: killed" in text, text
    assert figures["pushes_acked"] == figures["pushes_applied"], text
    print("python loop on a cluster %.4f, keel's workers %.4f" % (figures["accuracy"], own_mnist_accuracy["accuracy"]))
    assert figures["accuracy"] >= own_mnist_accuracy["accuracy"] - 0.005


if __name__ == "__main__":
    child_main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
