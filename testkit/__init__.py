"""What the tests and the benchmarks both use, importable by either without one importing the other: the
synthetic translation task, the tiny model trained on it, and the fake engine with its server command."""
