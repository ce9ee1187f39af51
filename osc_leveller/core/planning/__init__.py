"""Planning: the context, the kinds of plan, the planner, target placements,
drains, plan files and the report."""
