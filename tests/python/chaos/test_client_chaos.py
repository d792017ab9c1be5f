"""Client processes of keel cluster --application-loop under faults of
their own: stopped (SIGSTOP, then SIGCONT), killed with SIGKILL and replaced
by a new client process, at random moments drawn from a seed. Whatever
happens to the clients, the run ends (never hangs: --stall-timeout-ms bounds
it), every push is applied exactly once (the probe's parameters count
them), and under BSP the parameters are bit-identical to keel's own workers
in one process.

The seeds (10 by default) are one test case each; KEEL_CLIENT_CHAOS_SEEDS=3,17
replays the ones named. Run by ctest with KEEL_BINARY at the keel program."""

import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pytest

import keel

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from test_cluster import Coordinator, own_workers_sha, write_secret  # noqa: E402

KEEL = os.environ.get("KEEL_BINARY", "keel")
PATIENCE = 120
STEPS = 4000
# A client loop waits this long for any one answer: a worker restarted
# elsewhere in the meantime answers its next request, so a timeout only
# sends the loop back to next_step().
ANSWER_S = 5


def seeds():
    named = os.environ.get("KEEL_CLIENT_CHAOS_SEEDS")
    return [int(s) for s in named.split(",")] if named else list(range(1, 11))


# Run as a child process: `python test_client_chaos.py JOIN SECRET WORKER`:
# the probe's loop for one worker, to the job's last step.
def child_main(join, secret, worker):
    with keel.connect(join, workers=[worker], secret_file=secret) as cluster:
        c = cluster.client(worker, PATIENCE)
        keys = list(range(c.layout["sparse_keys"]))
        s = c.next_step().wait(PATIENCE)
        while s < c.steps:
            try:
                p = c.pull(s, sparse=keys).wait(ANSWER_S)
                g = c.gradient_for(p)
                g.dense[:] = -1.0
                g.sparse_values[:] = -1.0
                c.push(s, g).wait(ANSWER_S)
            except (keel.StepMoved, keel.Timeout):
                pass
            s = c.next_step().wait(PATIENCE)
        cluster.wait_released(PATIENCE)


class Clients:
    """One client process per worker; a killed one is replaced by a new one."""

    def __init__(self, join, secret, workers):
        self.join, self.secret = join, secret
        self.procs = {w: self.start(w) for w in workers}

    def start(self, w):
        return subprocess.Popen([sys.executable, __file__, self.join, self.secret, str(w)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def stop_for(self, w, seconds):
        p = self.procs[w]
        if p.poll() is not None:
            return False
        p.send_signal(signal.SIGSTOP)
        time.sleep(seconds)  # how long the process stays stopped: the fault itself
        p.send_signal(signal.SIGCONT)
        return True

    def kill_and_replace(self, w):
        p = self.procs[w]
        if p.poll() is not None:
            return False
        p.kill()
        p.wait()
        self.procs[w] = self.start(w)
        return True

    def finish(self):
        codes = {}
        for w, p in self.procs.items():
            try:
                p.wait(PATIENCE)
            finally:
                if p.poll() is None:
                    p.send_signal(signal.SIGCONT)
                    p.kill()
                    p.wait()
            codes[w] = (p.returncode, p.stderr.read())
        return codes


def coordinator_args(d, secret):
    return ["--nodes", "2", "--secret-file", secret, "--application-loop", "--model", "probe", "--steps",
            str(STEPS), "--workers", "2", "--shards", "2", "--lr", "1", "--checkpoint-every", "50",
            "--checkpoint-dir", os.path.join(d, "run"), "--node-wait-ms", "20000", "--stall-timeout-ms", "30000"]


def check_run(code, out, err, d):
    assert code == 0, out + err
    assert "every parameter equals the %d pushes its shard acknowledged" % (2 * STEPS) in out, out
    acked = re.search(r"pushes acked (\d+), applied (\d+), params_sha256 (\w+)", out)
    assert acked and acked.group(1) == acked.group(2), out
    assert acked.group(3) == own_workers_sha(STEPS, os.path.join(d, "own")), out


def training(coordinator):
    """Waits until the coordinator reports its first progress point (a tenth
    of the run): the clients' loops train."""
    return coordinator.wait_for(lambda out: any(re.search(r"step \d+/%d" % STEPS, line) for line in out), PATIENCE)


def joins(out):
    """How many client processes the coordinator has taken in so far."""
    return sum("a client process (it runs the loops" in line for line in out)


def run_with_faults(faults):
    """Runs the job with two client processes; `faults(clients, stop, coordinator)` runs
    on a thread of its own once the job trains, until `stop` is set."""
    with tempfile.TemporaryDirectory(prefix="keel-pytest-client-chaos-") as d:
        secret = write_secret(d)
        coordinator = Coordinator(coordinator_args(d, secret))
        join = coordinator.join_address()
        clients = Clients(join, secret, (0, 1))
        stop = threading.Event()
        assert training(coordinator), "".join(coordinator.out) + "".join(coordinator.err)
        injector = threading.Thread(target=faults, args=(clients, stop, coordinator))
        injector.start()
        try:
            code, out, err = coordinator.finish()
        finally:
            stop.set()
            injector.join()
        codes = clients.finish()
        check_run(code, out, err, d)
        for w, (rc, text) in codes.items():
            assert rc == 0, "worker:%d's client: %s" % (w, text)
        return out


def test_a_client_process_stopped_for_3_s_goes_on_and_the_run_ends_bit_identical():
    def stop_once(clients, stop, coordinator):
        assert clients.stop_for(0, 3.0)

    out = run_with_faults(stop_once)
    assert re.search(r"node_down node:2: lost", out), out


@pytest.mark.parametrize("seed", seeds())
def test_client_processes_stopped_killed_and_replaced_at_random_moments(seed):
    rng = random.Random(seed)
    plan = [(rng.uniform(0.2, 1.5), rng.choice((0, 1)), rng.choice(("stop", "stop", "kill9")), rng.uniform(0.2, 2.5))
            for _ in range(rng.randint(2, 4))]
    print("seed %d: %s" % (seed, plan))
    done = []

    def chaos(clients, stop, coordinator):
        for wait, w, kind, seconds in plan:
            if stop.wait(wait):
                return
            if kind == "stop":
                done.append((kind, w, clients.stop_for(w, seconds)))
                continue
            joined = joins(list(coordinator.out))
            done.append((kind, w, clients.kill_and_replace(w)))
            # Faults strike clients that train: the next waits until the
            # coordinator has taken the new client in (a client stopped
            # while it joins is a case of its own, not this tier's).
            coordinator.wait_for(lambda out: joins(out) > joined, PATIENCE)

    run_with_faults(chaos)
    print("seed %d: faults %s" % (seed, done))
    assert any(hit for _, _, hit in done), "no fault hit a running client (the run ended first)"


if __name__ == "__main__":
    child_main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
