"""The recording format: the file `record-runs` writes and the page replays. Torch-free."""
