"""A Flower App with fedimb's message pattern and no work: the start-up floor."""
