"""A ClientApp decodes the configuration its ServerApp validated: it builds the method's
client without validating again and without importing the method's strategy."""

from __future__ import annotations

import json
import subprocess
import sys

from fedimb.app.configuration import transport
from fedimb.app.configuration.compose import compose

#: run in a fresh interpreter: what the ClientApp path imports, and its client's class
CLIENT_PATH = """
import json, sys
from flwr.app import Context
from flwr.common import RecordDict
from fedimb.app.nodes import client_app
run_config = {"config": sys.argv[1]}
context = Context(
    run_id=0, node_id=0, node_config={"partition-id": 0}, state=RecordDict(), run_config=run_config
)
client = client_app.client_fn(context)
print(json.dumps(sorted(name for name in sys.modules if name.split(".")[0] == "strategies")))
"""


def test_a_client_app_builds_its_client_without_importing_the_strategy():
    cfg = compose(["method=fedprox", "dataset=digits", "num_clients=2", "runtime=in_process"])
    encoded = transport.encode(cfg)
    done = subprocess.run(
        [sys.executable, "-c", CLIENT_PATH, encoded],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
