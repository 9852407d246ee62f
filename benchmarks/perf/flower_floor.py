"""Flower's own start-up floor for a simulation: the same launch as ``fedimb`` (a SuperLink
in simulation mode, ``flwr run --stream``, Ray, one actor per CPU) running
``floor_app/``, a Flower App with fedimb's messages (a properties query to every node,
then a model of ``--model-floats`` zeros to every node and back per round) and no work: no
torch, no data, no training. Prints the App's ``round N/ ... seconds=S`` lines as they
arrive; :mod:`startup` times its start-up beside fedimb's, :mod:`fedavg_loop` its rounds
(``--prompt-replies``: replies collected as fedimb's ServerApp collects them).

    python benchmarks/perf/flower_floor.py [--nodes 20] [--rounds 2] [--model-floats 7840]
                                           [--prompt-replies]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fedimb.cli.federation.flwr_cli import flwr_home, write_connection
from fedimb.cli.federation.processes import SuperLink, flower_env
from fedimb.cli.launch.follower import flwr_run

APP = Path(__file__).resolve().parent / "floor_app"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--model-floats", type=int, default=7840, help="size of the model sent")
    parser.add_argument(
        "--prompt-replies",
        action="store_true",
        help="collect the replies as fedimb's ServerApp does (its PromptGrid)",
    )
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as workdir,
        flwr_home(None, base=Path(workdir)) as (home, connection),
    ):
        env = flower_env(home)
        env["RAY_ADDRESS"] = "local"  # as fedimb's simulation_env: a private Ray
        with SuperLink(Path(workdir) / "superlink.log", simulation=True, env=env) as superlink:
            superlink.wait_ready()
            write_connection(home, connection, superlink.address)
            return flwr_run(
                APP,
                connection,
                home,
                run_config={
                    "num-rounds": args.rounds,
                    "num-nodes": args.nodes,
                    "model-floats": args.model_floats,
                    "prompt-replies": args.prompt_replies,
                },
                federation_config={"num-supernodes": args.nodes, "client-resources-num-cpus": 1},
                on_line=lambda line: print(line, flush=True),
            )


if __name__ == "__main__":
    sys.exit(main())
