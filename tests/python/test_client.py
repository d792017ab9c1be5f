"""The Python module `keel` (demos/python/keel_module.cpp) from Python, with
Debian's pytest: a loop of the application's own through shard kills, the
accuracy keel's own workers reach, and the errors a loop can meet.

Run by ctest (tests/python/CMakeLists.txt) with PYTHONPATH at the built
module and KEEL_DEMOS at demos/python/."""

import os
import sys
import tempfile

import numpy as np
import pytest

import keel
from probe_loop import probe_loop  # noqa: E402

sys.path.insert(0, os.environ.get("KEEL_DEMOS", os.path.join(os.path.dirname(__file__), "../../demos/python")))
import mnist_own_loop  # noqa: E402

PATIENCE = 60  # seconds any single answer may take


@pytest.fixture
def ckpt():
    with tempfile.TemporaryDirectory(prefix="keel-pytest-") as d:
        yield d


def probe_steps(job, worker, steps_done, kill=None):
    """Worker `worker`'s probe loop, noting the steps it pushed and killing
    kill[s] after step s."""
    def after(s, pushed):
        if pushed:
            steps_done.append(s)
        if kill and s in kill:  # once: a step the job moves back to comes again
            job.kill(kill.pop(s))
    probe_loop(job.client(worker), after)


def test_every_push_of_a_python_loop_is_applied_exactly_once_through_shard_and_worker_kills(ckpt):
    import threading
    steps = 40
    job = keel.Job("probe", steps, checkpoint_dir=ckpt, workers=2, shards=2, lr=1.0, checkpoint_every=10)
    done = [[], []]
    kills = [{7: "shard:0", 23: "shard:1"}, {15: "worker:0", 31: "shard:0"}]
    threads = [threading.Thread(target=probe_steps, args=(job, w, done[w], kills[w])) for w in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    r = job.wait(PATIENCE)
    assert r["steps"] == steps
    assert r["pushes_acked"] == r["pushes_applied"] == 2 * 2 * steps
    assert r["restarts"].get("shard:0", 0) >= 1 and r["restarts"].get("shard:1", 0) >= 1
    assert r["restarts"].get("worker:0", 0) == 1
    # keel's own workers push the probe's gradient, -1 everywhere, and end
    # with every parameter counting its pushes: so does the Python loop, to
    # the bit, only if every push was applied once.
    with tempfile.TemporaryDirectory(prefix="keel-pytest-own-") as d:
        own = keel.Job("probe", steps, checkpoint_dir=d, workers=2, shards=2, lr=1.0, checkpoint_every=10,
                       application_loop=False).wait(PATIENCE)
    assert r["params_sha256"] == own["params_sha256"]


def test_the_python_mnist_loop_through_a_shard_kill_reaches_keel_own_workers_accuracy(own_mnist_accuracy):
    epochs, workers, batch = own_mnist_accuracy["epochs"], 2, 32
    ours, log = mnist_own_loop.train(epochs=epochs, workers=workers, batch=batch, lr=0.1, kill_shard=True)
    assert ours["restarts"].get("shard:0", 0) == 1, log
    assert ours["pushes_acked"] == ours["pushes_applied"]
    assert ours["steps"] == own_mnist_accuracy["steps"]
    print("python loop %.4f, keel's workers %.4f" % (ours["accuracy"], own_mnist_accuracy["accuracy"]))
    assert ours["accuracy"] >= own_mnist_accuracy["accuracy"] - 0.005


def test_a_python_loop_gets_errors_naming_what_was_wrong(ckpt):
    job = keel.Job("probe", 5, checkpoint_dir=ckpt, workers=1, shards=2)
    with pytest.raises(keel.Error, match="no worker:1"):
        job.client(1)
    c = job.client(0)
    s = c.next_step().wait(PATIENCE)
    assert s == 0
    with pytest.raises(keel.StepMoved, match="at step 0"):
        c.pull(2).wait(PATIENCE)
    with pytest.raises(keel.Error, match="ascending"):
        c.pull(0, sparse=[9, 4]).wait(PATIENCE)
    p = c.pull(0).wait(PATIENCE)
    assert p.step == 0
    assert not p.dense.flags.writeable
    with pytest.raises(ValueError):
        p.dense[0] = 1.0  # the pulled parameters are the shards', read-only
    with pytest.raises(keel.Error, match="not_found"):
        p.tensor("no-such-tensor")
    g = c.gradient_for(p)
    assert g.dense.flags.writeable and np.all(g.dense == 0)
    answers = []
    f = c.push(0, g)
    assert f.wait(PATIENCE) == 0
    f.then(lambda step, error: answers.append((step, error)))  # answered already: called here
    assert answers == [(0, None)]
    assert c.next_step().wait(PATIENCE) == 1
    job.stop()
    with pytest.raises(keel.JobEnded, match="stopped"):
        c.next_step().wait(PATIENCE)
    with pytest.raises(keel.JobEnded):
        c.pull(1).wait(PATIENCE)
    with pytest.raises(ValueError, match="optimizer"):
        keel.Job("probe", 5, checkpoint_dir=ckpt, optimizer="rmsprop")


def test_threads_that_make_their_first_arrays_at_once_do_not_deadlock(ckpt):
    # numpy is not imported before keel here: the module's first arrays,
    # made on two threads at once, must not deadlock on numpy's import.
    import subprocess
    code = """
import keel, sys, threading
job = keel.Job("probe", 20, checkpoint_dir=sys.argv[1], workers=2)
def loop(w):
    c = job.client(w)
    s = c.next_step().wait(30)
    while s < c.steps:
        p = c.pull(s).wait(30)
        g = c.gradient_for(p)
        g.dense[:] = -1.0
        c.push(s, g).wait(30)
        s = c.next_step().wait(30)
threads = [threading.Thread(target=loop, args=(w,)) for w in range(2)]
for t in threads: t.start()
for t in threads: t.join()
print(job.wait(30)["pushes_applied"])
"""
    r = subprocess.run([sys.executable, "-c", code, ckpt], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(20 * 2 * 2)


def test_a_job_gives_named_tensors_rules_of_their_own_and_refuses_a_name_the_model_lacks(ckpt):
    steps = 6
    with tempfile.TemporaryDirectory(prefix="keel-pytest-plain-") as d:
        plain = keel.Job("probe", steps, checkpoint_dir=d, application_loop=False, lr=1.0).wait(PATIENCE)
    ruled = keel.Job("probe", steps, checkpoint_dir=ckpt, application_loop=False, lr=1.0,
                     rules={"probe.dense": "momentum:0.5"}).wait(PATIENCE)
    assert ruled["pushes_applied"] == plain["pushes_applied"]
    assert ruled["params_sha256"] != plain["params_sha256"]
    with tempfile.TemporaryDirectory(prefix="keel-pytest-bad-") as d:
        with pytest.raises(keel.Error, match="fc9.weight"):
            keel.Job("probe", steps, checkpoint_dir=d, rules={"fc9.weight": "adam"})
        with pytest.raises(keel.Error, match="rmsprop"):
            keel.Job("probe", steps, checkpoint_dir=d, rules={"probe.dense": "rmsprop"})


def test_a_callback_given_before_the_answer_runs_on_keels_thread_with_it(ckpt):
    import threading
    job = keel.Job("probe", 3, checkpoint_dir=ckpt, workers=2)
    c0, c1 = job.client(0), job.client(1)
    for c in (c0, c1):
        assert c.next_step().wait(PATIENCE) == 0
    g = c0.gradient_for(c0.pull(0).wait(PATIENCE))
    c0.push(0, g).wait(PATIENCE)
    pending = c0.pull(1)  # BSP: waits for worker 1's step 0
    seen, called = [], threading.Event()

    def on_answer(pulled, error):
        seen.append((pulled.step if pulled else None, error, threading.current_thread() is threading.main_thread()))
        called.set()

    pending.then(on_answer)
    assert not pending.ready()
    g = c1.gradient_for(c1.pull(0).wait(PATIENCE))
    c1.push(0, g).wait(PATIENCE)
    assert pending.wait(PATIENCE).step == 1
    assert called.wait(PATIENCE)
    assert seen == [(1, None, False)]  # the step, no error, not this thread
    job.stop()


def test_a_job_dropped_with_a_callback_waiting_ends_without_a_deadlock(ckpt):
    import gc
    import threading
    job = keel.Job("probe", 3, checkpoint_dir=ckpt, workers=2)
    c0 = job.client(0)
    assert c0.next_step().wait(PATIENCE) == 0
    called = threading.Event()
    c0.pull(1).then(lambda pulled, error: called.set())  # answered only by the job's end
    del job, c0
    gc.collect()  # the job stops here; its end answers the pull, whose callback needs the GIL
    assert called.wait(PATIENCE)
