"""The run folder: the one writer of its files and the one reader of them."""
