"""Each node answers a properties query and a training message at once (numpy only)."""

import numpy as np
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

app = ClientApp()


@app.query()
def query(msg: Message, context: Context) -> Message:
    return Message(RecordDict({"properties": MetricRecord({"samples": 1})}), reply_to=msg)


@app.train()
def train(msg: Message, context: Context) -> Message:
    weights = msg.content["weights"]
    return Message(
        RecordDict({"weights": ArrayRecord([np.asarray(a.numpy()) for a in weights.values()])}),
        reply_to=msg,
    )
