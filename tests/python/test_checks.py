"""What keel.Job and keel.Client check, as keel's commands and C++ clients
do (actors/job/config_bounds.hpp, actors/job/ps_client.hpp): numbers outside
keel's bounds refused by keyword before anything starts, a gradient that is
not finite refused by name at the push, and a pull retried after its wait
raised keel.Timeout answered."""

import os
import tempfile
import time

import numpy as np
import pytest

import keel

PATIENCE = 60  # seconds any single answer may take


@pytest.fixture
def ckpt():
    with tempfile.TemporaryDirectory(prefix="keel-pytest-checks-") as d:
        yield d


@pytest.mark.parametrize("kwargs, message", [
    ({"workers": 10**9}, r"^workers: 1000000000 is too large \(at most 1024\)$"),
    ({"workers": 0}, r"^workers: 0 is too small \(at least 1\)$"),
    ({"shards": 5000}, r"^shards: 5000 is too large \(at most 1024\)$"),
    ({"lr": float("nan")}, r"^lr: nan is not a finite number$"),
    ({"lr": float("inf")}, r"^lr: inf is not a finite number$"),
    ({"lr": -0.5}, r"^lr: -0.5 is too small \(at least 0\)$"),
    ({"lr": 1e300}, r"^lr: .* is too large \(at most 1e\+06\)$"),
    ({"batch_size": 0}, r"^batch_size: 0 is too small \(at least 1\)$"),
])
def test_a_job_of_numbers_keel_train_refuses_is_refused_by_keyword_before_it_starts(ckpt, kwargs, message):
    began = time.monotonic()
    with pytest.raises(ValueError, match=message):
        keel.Job("probe", 5, checkpoint_dir=ckpt, **kwargs)
    assert time.monotonic() - began < 5  # refused, not started (10**9 workers once took 24 GB)
    assert os.listdir(ckpt) == []  # nothing written


def test_a_job_of_no_steps_is_refused_by_keyword(ckpt):
    with pytest.raises(ValueError, match=r"^steps: 0 is too small \(at least 1\)$"):
        keel.Job("probe", 0, checkpoint_dir=ckpt)


def test_a_push_of_a_gradient_that_is_not_finite_is_refused_naming_the_tensor_and_element(ckpt):
    job = keel.Job("probe", 3, checkpoint_dir=ckpt, workers=1, lr=1.0)
    c = job.client(0)
    assert c.check_finite  # on by default
    p = c.pull(0).wait(PATIENCE)
    g = c.gradient_for(p)
    g.tensor("probe.dense")[7] = np.nan
    with pytest.raises(keel.Error, match=r"push of step 0: the gradient of probe\.dense\[7\] is NaN"):
        c.push(0, g).wait(PATIENCE)
    g.tensor("probe.dense")[7] = -np.inf
    with pytest.raises(keel.Error, match=r"probe\.dense\[7\] is -inf"):
        c.push(0, g).wait(PATIENCE)
    g.tensor("probe.dense")[7] = 0.0
    assert c.push(0, g).wait(PATIENCE) == 0  # refused before the worker saw it: the step goes on
    job.stop()


def test_with_the_check_off_a_gradient_that_is_not_finite_is_pushed_and_its_step_skipped(ckpt):
    job = keel.Job("probe", 2, checkpoint_dir=ckpt, workers=1, lr=1.0)
    c = job.client(0)
    c.check_finite = False
    p0 = c.pull(0).wait(PATIENCE)
    before = np.array(p0.dense)
    g = c.gradient_for(p0)
    g.dense[:] = -1.0
    g.dense[7] = np.nan
    assert c.push(0, g).wait(PATIENCE) == 0  # answered: the worker's guard decides
    p1 = c.pull(1).wait(PATIENCE)
    assert np.array_equal(p1.dense, before)  # the worker skipped the step: nothing applied
    g = c.gradient_for(p1)
    assert c.push(1, g).wait(PATIENCE) == 1
    assert job.wait(PATIENCE)["steps"] == 2


def test_a_pull_retried_after_its_wait_raised_timeout_is_answered(ckpt):
    job = keel.Job("probe", 3, checkpoint_dir=ckpt, workers=2, lr=1.0)
    c0, c1 = job.client(0), job.client(1)
    c0.push(0, c0.gradient_for(c0.pull(0).wait(PATIENCE))).wait(PATIENCE)
    p1 = c1.pull(0).wait(PATIENCE)  # worker 1 holds step 0, not pushed yet
    with pytest.raises(keel.Timeout):
        c0.pull(1).wait(0.2)  # BSP: step 1 waits for worker 1's step 0
    retried = c0.pull(1)  # the application asks again
    c1.push(0, c1.gradient_for(p1)).wait(PATIENCE)
    assert retried.wait(PATIENCE).step == 1
    assert c0.pull(1).wait(PATIENCE).step == 1  # and again, once answered: at once
    assert c0.push(1, c0.gradient_for(retried.wait(PATIENCE))).wait(PATIENCE) == 1
    job.stop()


def test_a_retried_pull_with_other_keys_is_refused_by_name(ckpt):
    job = keel.Job("probe", 3, checkpoint_dir=ckpt, workers=2, lr=1.0)
    c0 = job.client(0)
    c0.push(0, c0.gradient_for(c0.pull(0).wait(PATIENCE))).wait(PATIENCE)
    with pytest.raises(keel.Timeout):
        c0.pull(1).wait(0.2)
    with pytest.raises(keel.Error, match="other keys"):
        c0.pull(1, sparse=[2]).wait(PATIENCE)
    job.stop()
