"""FedAvg + fine-tuning, the standard baseline of personalised FL (Wang et al., 2019,
"Federated Evaluation of On-device Personalization"; the FT rows of FedBABU, ICLR 2022,
and of FedRoD, ICLR 2022): FedAvg's training unchanged, and as each client's personal
model the global model fine-tuned on the client's own training data for the run's local
budget: one ``fit`` (``train.local_epochs`` of the same SGD and batch order), scored and
then discarded, so that nothing of it reaches the server."""

from clients.base_shared import AveragingClient


class FedAvgFTClient(AveragingClient):
    """Local side of FedAvg + FT: FedAvg's, with a fine-tuned personal model."""

    def personal_model(self, parameters, config):
        self.fit(parameters, config)  # the received global model, trained on the local data
        return self.model
