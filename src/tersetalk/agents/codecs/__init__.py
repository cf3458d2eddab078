"""Message codecs: how one protocol writes and reads the agents' messages."""
