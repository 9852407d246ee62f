"""Discovery (one query to every node), then rounds that send a model of ``model-floats``
zeros to every node and wait for all replies; prints ``round N/`` lines like fedimb's
front end does. With ``prompt-replies`` the replies are collected as fedimb's ServerApp
collects them in the simulation (:class:`fedimb.app.runtimes.prompt_grid.PromptGrid`), not by
Flower's Grid, which looks for them every 0.1 s."""

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


def connected_nodes(grid: Grid, count: int, timeout: float = 120.0) -> list[int]:
    """The node ids, once ``count`` nodes are connected (the simulation registers its
    nodes while the ServerApp starts)."""
    deadline = time.monotonic() + timeout
    while len(nodes := sorted(grid.get_node_ids())) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return nodes


@app.main()
def main(grid: Grid, context: Context) -> None:
    if context.run_config["prompt-replies"]:
        from fedimb.app.runtimes.prompt_grid import IN_MEMORY_POLL_INTERVAL, PromptGrid

        grid = PromptGrid(grid, IN_MEMORY_POLL_INTERVAL)
    print("round 0/", flush=True)
    nodes = connected_nodes(grid, int(context.run_config["num-nodes"]))
    ask_all(grid, nodes, "query", RecordDict())
    weights = ArrayRecord([np.zeros(int(context.run_config["model-floats"]), dtype=np.float32)])
    for rnd in range(1, int(context.run_config["num-rounds"]) + 1):
        started = time.perf_counter()
        replies = ask_all(grid, nodes, "train", RecordDict({"weights": weights}))
        print(
            f"round {rnd}/ replies={sum(r.has_content() for r in replies)} "
            f"seconds={time.perf_counter() - started:.4f}",
            flush=True,
        )
