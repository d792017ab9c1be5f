"""The probe's loop as keel's workers run it, for the Python tests: every
dense and sparse value's gradient -1 (the probe's own, at lr 1), so each
applied push adds exactly 1 to every parameter."""

import keel

PATIENCE = 60  # seconds any single answer may take


def probe_loop(client, after_step=None, moved=(keel.StepMoved,)):
    """Runs `client`'s loop to the job's last step: `after_step(s, pushed)`
    is called after each step's push (or its failure); the errors in `moved`
    (a restart or rollback moved the worker) send the loop to next_step().
    Returns the first step the loop ran."""
    keys = list(range(client.layout["sparse_keys"]))
    s = client.next_step().wait(PATIENCE)
    first = s
    while s < client.steps:
        pushed = False
        try:
            p = client.pull(s, sparse=keys).wait(PATIENCE)
            g = client.gradient_for(p)
            g.dense[:] = -1.0
            g.sparse_values[:] = -1.0
            assert client.push(s, g).wait(PATIENCE) == s
            pushed = True
        except moved:
            pass
        if after_step:
            after_step(s, pushed)
        s = client.next_step().wait(PATIENCE)
    return first
