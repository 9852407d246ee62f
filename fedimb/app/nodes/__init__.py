"""The client side of a run: the ClientApp and which node is which client."""
