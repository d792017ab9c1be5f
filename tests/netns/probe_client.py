"""A keel cluster's client process in a network namespace of its own
(scripts/netns-cluster.sh with KEEL_NETNS_CLIENT): joins node 0, runs the
probe's loops of workers 0 and 1 (tests/python/probe_loop.py), and waits
until the job lets them go. Its own address, node 0's and the secret come
from the harness's environment."""

import os
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../python"))
import keel  # noqa: E402
from probe_loop import PATIENCE, probe_loop  # noqa: E402


def main():
    join, secret, host = os.environ["KEEL_NETNS_JOIN"], os.environ["KEEL_NETNS_SECRET"], os.environ["KEEL_NETNS_HOST"]
    firsts, errors = {}, []
    with keel.connect(join, workers=[0, 1], secret_file=secret, host=host, timeout=30.0) as cluster:
        def loop(w):
            try:
                firsts[w] = probe_loop(cluster.client(w, PATIENCE), moved=(keel.StepMoved, keel.Timeout))
            except Exception as e:  # noqa: BLE001 - reported, and the exit status says it
                errors.append("worker:%d: %r" % (w, e))

        threads = [threading.Thread(target=loop, args=(w,)) for w in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if not errors:
            cluster.wait_released(PATIENCE)
    if errors:
        print("probe_client: " + "; ".join(errors), flush=True)
        return 1
    print("probe_client: workers 0 and 1 ran their loops from %s at %s" % (join, host), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
