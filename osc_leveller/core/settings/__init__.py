"""Settings, the planner's options and the maintenance windows."""
