"""Load: scores, the planning state, the load that lasted and the load to
come, migration durations, the metrics guard."""
