"""Running moves: the executor and a run's metrics."""
