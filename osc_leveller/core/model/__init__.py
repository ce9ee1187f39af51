"""The cloud as read: the model, snapshot files and their validation, the
errors every layer raises."""
