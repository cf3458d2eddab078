"""Agent roles (Manager, Worker, Critic) and the conversation they share."""
