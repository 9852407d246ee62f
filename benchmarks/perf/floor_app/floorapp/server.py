"""Discovery (one query to every node), then rounds that send a small model to every node
and wait for all replies; prints ``round N/`` lines like fedimb's front end does."""

import time

import numpy as np
from flwr.app import ArrayRecord, Context, Message, RecordDict
from flwr.serverapp import Grid, ServerApp

app = ServerApp()


def ask_all(grid: Grid, nodes: list[int], message_type: str, content: RecordDict) -> list[Message]:
    messages = [
        Message(content=RecordDict(dict(content)), dst_node_id=node, message_type=message_type)
        for node in nodes
    ]
    return list(grid.send_and_receive(messages))


@app.main()
def main(grid: Grid, context: Context) -> None:
    print("round 0/", flush=True)
    nodes = sorted(grid.get_node_ids())
    ask_all(grid, nodes, "query", RecordDict())
    weights = ArrayRecord([np.zeros((784, 10), dtype=np.float32)])
    for rnd in range(1, int(context.run_config["num-rounds"]) + 1):
        started = time.perf_counter()
        replies = ask_all(grid, nodes, "train", RecordDict({"weights": weights}))
        print(
            f"round {rnd}/ replies={sum(r.has_content() for r in replies)} "
            f"seconds={time.perf_counter() - started:.2f}",
            flush=True,
        )
